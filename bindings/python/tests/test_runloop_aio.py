"""cairn.aio's start_run: a host loop on the asyncio client SIGKILLed in
the middle of a tool call resumes, in a new process, from the last
completed turn with its counters carried on; a clean exit completes the
run; an exception leaves it resumable, or ends it failed with
on_error="fail"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

import cairn
import cairn.aio
from conftest import DAEMON, aio_connect, connect_daemon, kill_at, run

HERE = Path(__file__).resolve().parent
CHILD = str(HERE / "helpers" / "runloop_aio_child.py")


def child(ws: str, mode: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, CAIRN_DAEMON=DAEMON, PYTHONPATH=str(HERE.parent))
    return subprocess.Popen([sys.executable, CHILD, ws, mode, "s1", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_killed_in_tool_call_resumes_from_last_turn(mode: str, workspace: str, daemons: List[int]) -> None:
    p = child(workspace, mode, "5", "0", "tool", "3")
    kill_at(p, "STOPPED")
    q = child(workspace, mode, "5", "1")
    out, err = q.communicate(timeout=60)
    assert q.returncode == 0, err
    got = json.loads(out.strip().splitlines()[-1])
    s = got["start"]
    # Turn 3's tool call was in flight: turns 1 and 2 are what the run had.
    assert s["resumed_from"] is not None and s["run_id"] != s["resumed_from"]
    assert (s["turn"], s["tool_calls"], s["usage"], s["state"]) == (2, 2, 20, {"done": 2})
    assert s["messages"] == ["call1", "result1", "call2", "result2"]
    assert got["end"] == {"run_id": s["run_id"], "turn": 5, "usage": 50, "tool_calls": 5}

    c = cairn.connect(workspace, embedded=True) if mode == "embedded" else connect_daemon(workspace, daemons)
    try:
        runs = {r["run_id"]: r for r in c.runs("s1")["runs"]}
        assert runs[s["run_id"]]["status"] == "completed"
        assert runs[s["run_id"]]["tool_calls_count"] == 5
        assert runs[s["resumed_from"]]["status"] == "interrupted"
        assert [m["content"] for m in c.messages("s1")["messages"]] == [
            x for n in range(1, 6) for x in (f"call{n}", f"result{n}")
        ]
    finally:
        c.close()


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_exception_resume_and_fail(mode: str, workspace: str, daemons: List[int]) -> None:
    async def go() -> None:
        c = await aio_connect(workspace, mode, daemons)
        try:
            with pytest.raises(RuntimeError):
                async with c.start_run("s2") as r:
                    await r.turn([{"role": "user", "content": "a"}], usage={"output_tokens": 5}, tool_calls=2)
                    first = r.run_id
                    raise RuntimeError("tool blew up")
            assert (await c.run(first))["run"]["status"] == "running"
            async with c.start_run("s2", resume=True) as again:
                assert again.resumed_from == first and again.turn_no == 1
                assert again.tool_calls == 2 and again.usage["output_tokens"] == 5
                assert [m["content"] for m in again.messages] == ["a"]
                assert await again.turn([{"role": "user", "content": "b"}], tool_calls=1) == 2
            done = (await c.run(again.run_id))["run"]
            assert done["status"] == "completed" and done["tool_calls_count"] == 3
            async with c.start_run("s2", resume=True) as fresh:
                assert fresh.resumed_from is None and fresh.turn_no == 0
            with pytest.raises(ValueError):
                async with c.start_run("s3", on_error="fail") as bad:
                    await bad.turn([{"role": "user", "content": "x"}])
                    raise ValueError("x")
            assert (await c.run(bad.run_id))["run"]["status"] == "failed"
        finally:
            await c.close()

    run(go())
