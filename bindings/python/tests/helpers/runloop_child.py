"""A host loop on client.start_run, in its own process, for the kill tests.
argv: workspace mode(embedded|daemon) session_id turns resume(0|1)
      [stop_phase(between|tool) stop_turn]
Each turn is a model message and one tool call's result: usage 10 input
tokens, 1 tool call. At the stop point it prints "STOPPED" and blocks until
killed. At the end it prints one JSON line describing the run."""

from __future__ import annotations

import json
import sys
import time

import cairn

ws, mode, sid, turns, resume = sys.argv[1:6]
stop_phase, stop_turn = (sys.argv[6], int(sys.argv[7])) if len(sys.argv) > 7 else ("", -1)


def block() -> None:
    print("STOPPED", flush=True)
    time.sleep(120)
    sys.exit(3)


c = cairn.connect(ws, embedded=True) if mode == "embedded" else cairn.connect(ws, daemon_args=["--idle-timeout=20s"])
with c.start_run(sid, resume=resume == "1") as run:
    start = {"run_id": run.run_id, "resumed_from": run.resumed_from, "turn": run.turn_no,
             "usage": run.usage.get("input_tokens", 0), "tool_calls": run.tool_calls,
             "messages": [m["content"] for m in run.messages], "state": run.state}
    while run.turn_no < int(turns):
        n = run.turn_no + 1
        call = {"role": "assistant", "content": f"call{n}"}
        if stop_phase == "tool" and n == stop_turn:
            block()  # killed in the middle of the tool call
        result = {"role": "tool", "content": f"result{n}"}
        run.turn([call, result], usage={"input_tokens": 10}, tool_calls=1, state={"done": n})
        if stop_phase == "between" and n == stop_turn:
            block()  # killed between turns
print(json.dumps({"start": start, "end": {"run_id": run.run_id, "turn": run.turn_no,
                  "usage": run.usage.get("input_tokens", 0), "tool_calls": run.tool_calls}}), flush=True)
c.close()
