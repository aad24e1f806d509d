"""runloop_child.py on cairn.aio: a host loop on the asyncio client's
start_run, in its own process, for the kill tests. Same argv and output:
workspace mode(embedded|daemon) session_id turns resume(0|1)
[stop_phase(between|tool) stop_turn]."""

from __future__ import annotations

import asyncio
import json
import sys

import cairn.aio

ws, mode, sid, turns, resume = sys.argv[1:6]
stop_phase, stop_turn = (sys.argv[6], int(sys.argv[7])) if len(sys.argv) > 7 else ("", -1)


async def block() -> None:
    print("STOPPED", flush=True)
    await asyncio.sleep(120)
    sys.exit(3)


async def main() -> None:
    if mode == "embedded":
        c = await cairn.aio.connect(ws, embedded=True)
    else:
        c = await cairn.aio.connect(ws, daemon_args=["--idle-timeout=20s"])
    async with c.start_run(sid, resume=resume == "1") as run:
        start = {"run_id": run.run_id, "resumed_from": run.resumed_from, "turn": run.turn_no,
                 "usage": run.usage.get("input_tokens", 0), "tool_calls": run.tool_calls,
                 "messages": [m["content"] for m in run.messages], "state": run.state}
        for _ in range(2 * int(turns)):  # bounded even if turn() stops counting
            if run.turn_no >= int(turns):
                break
            n = run.turn_no + 1
            call = {"role": "assistant", "content": f"call{n}"}
            if stop_phase == "tool" and n == stop_turn:
                await block()  # killed in the middle of the tool call
            result = {"role": "tool", "content": f"result{n}"}
            await run.turn([call, result], usage={"input_tokens": 10}, tool_calls=1, state={"done": n})
            if stop_phase == "between" and n == stop_turn:
                await block()  # killed between turns
    print(json.dumps({"start": start, "end": {"run_id": run.run_id, "turn": run.turn_no,
                      "usage": run.usage.get("input_tokens", 0), "tool_calls": run.tool_calls}}), flush=True)
    await c.close()


asyncio.run(main())
