"""client.start_run: a host loop SIGKILLed between turns and in the middle of
a tool call resumes, in a new process, from the last completed turn with
its counters carried on; a clean exit completes the run; an exception
leaves it resumable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

import cairn
from cairn import runloop
from conftest import DAEMON, connect_daemon, kill_at, sigstop

HERE = Path(__file__).resolve().parent
CHILD = str(HERE / "helpers" / "runloop_child.py")


def child(ws: str, mode: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, CAIRN_DAEMON=DAEMON, PYTHONPATH=str(HERE.parent))
    return subprocess.Popen([sys.executable, CHILD, ws, mode, "s1", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
@pytest.mark.parametrize("phase", ["between", "tool"])
def test_killed_loop_resumes_from_last_turn(mode: str, phase: str, workspace: str, daemons: List[int]) -> None:
    p = child(workspace, mode, "6", "0", phase, "3")
    kill_at(p, "STOPPED")
    done = 3 if phase == "between" else 2  # the tool turn in flight is not recorded

    q = child(workspace, mode, "6", "1")
    out, err = q.communicate(timeout=60)
    assert q.returncode == 0, err
    got = json.loads(out.strip().splitlines()[-1])
    s = got["start"]
    assert s["resumed_from"] is not None and s["run_id"] != s["resumed_from"]
    assert s["turn"] == done and s["tool_calls"] == done and s["usage"] == 10 * done
    assert s["state"] == {"done": done}
    want = [x for n in range(1, done + 1) for x in (f"call{n}", f"result{n}")]
    assert s["messages"] == want
    assert got["end"] == {"run_id": s["run_id"], "turn": 6, "usage": 60, "tool_calls": 6}

    c = cairn.connect(workspace, embedded=True) if mode == "embedded" else connect_daemon(workspace, daemons)
    try:
        runs = {r["run_id"]: r for r in c.runs("s1")["runs"]}
        assert runs[s["run_id"]]["status"] == "completed"
        assert runs[s["run_id"]]["tool_calls_count"] == 6
        assert runs[s["run_id"]]["usage"]["input_tokens"] == 60
        assert runs[s["resumed_from"]]["status"] == "interrupted"
        msgs = c.messages("s1")["messages"]
        assert [m["content"] for m in msgs] == [x for n in range(1, 7) for x in (f"call{n}", f"result{n}")]
    finally:
        c.close()


def test_exception_leaves_run_resumable(embedded: cairn.Client) -> None:
    with pytest.raises(RuntimeError):
        with embedded.start_run("s2") as run:
            run.turn([{"role": "user", "content": "a"}], usage={"output_tokens": 5}, tool_calls=2)
            first = run.run_id
            raise RuntimeError("tool blew up")
    assert embedded.run(first)["run"]["status"] == "running"
    with embedded.start_run("s2", resume=True) as again:
        assert again.resumed_from == first and again.turn_no == 1
        assert again.tool_calls == 2 and again.usage["output_tokens"] == 5
    assert embedded.run(again.run_id)["run"]["status"] == "completed"
    # Nothing left to resume: a new run begins.
    with embedded.start_run("s2", resume=True) as fresh:
        assert fresh.resumed_from is None and fresh.turn_no == 0


def test_on_error_fail_ends_the_run(embedded: cairn.Client) -> None:
    with pytest.raises(ValueError):
        with embedded.start_run("s3", on_error="fail") as run:
            run.turn([{"role": "user", "content": "a"}])
            raise ValueError("x")
    assert embedded.run(run.run_id)["run"]["status"] == "failed"


def _wait_turn(c: cairn.Client, run_id: str, turn: int) -> None:
    deadline = time.monotonic() + 10
    while ((c.run(run_id).get("checkpoint") or {}).get("turn", 0)) < turn:
        assert time.monotonic() < deadline, f"run {run_id} never reached turn {turn}"
        time.sleep(0.02)


@pytest.mark.parametrize("path", ["own", "libcairn"])
def test_a_turn_of_unknown_outcome_is_settled(path: str, workspace: str, daemons: List[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn whose checkpoint got no answer (a stopped daemon, a call
    timeout) raises UnavailableError. When the daemon carried it out after
    all, the host's retry of the same turn returns its number without
    saving it twice, and the next turn follows it; when it did not (a
    request cut before it was whole), the host's next turn takes its
    number. Totals follow what was committed."""
    if path == "libcairn":
        monkeypatch.setenv("CAIRN_PY_WIRE", "0")
    c = connect_daemon(workspace, daemons, call_timeout=0.4)
    pid = daemons[-1]
    stopped = False
    try:
        run = c.start_run("s")
        assert run.turn([{"t": 1}], usage={"input_tokens": 1}, tool_calls=1) == 1
        sigstop(pid)
        stopped = True
        with pytest.raises(cairn.UnavailableError, match="no answer to checkpoint"):
            run.turn([{"t": 2}], usage={"input_tokens": 2}, tool_calls=1, state={"k": 2})
        os.kill(pid, signal.SIGCONT)
        stopped = False
        _wait_turn(c, run.run_id, 2)  # the daemon carried it out
        # The retry, re-spelled: the same JSON values.
        assert run.turn(({"t": 2.0},), usage={"input_tokens": 2}, tool_calls=1, state={"k": 2.0}) == 2
        assert (run.turn_no, run.usage, run.tool_calls, run.state) == (2, {"input_tokens": 3}, 2, {"k": 2})
        assert run.turn([{"t": 3}]) == 3

        # Carried out; the next turn differs only by true against 1 (equal
        # in Python, not in JSON): a new turn, not the retry.
        sigstop(pid)
        stopped = True
        with pytest.raises(cairn.UnavailableError, match="no answer to checkpoint"):
            run.turn([{"t": 1}])
        os.kill(pid, signal.SIGCONT)
        stopped = False
        _wait_turn(c, run.run_id, 4)
        assert run.turn([{"t": True}]) == 5

        # Cut before it was whole: not carried out; the next turn is 6.
        sigstop(pid)
        stopped = True
        with pytest.raises(cairn.UnavailableError, match="no answer to checkpoint"):
            run.turn([{"t": "x" * (16 << 20)}], usage={"input_tokens": 9}, tool_calls=9)
        os.kill(pid, signal.SIGCONT)
        stopped = False
        assert run.turn([{"t": 4}], usage={"input_tokens": 4}) == 6
        assert (run.usage, run.tool_calls) == ({"input_tokens": 7}, 2)
        run.complete()
        got = c.run(run.run_id)
        assert got["run"]["status"] == "completed" and got["run"]["usage"]["input_tokens"] == 7
        ts = [m["t"] for m in c.messages("s")["messages"]]
        assert ts == [1, 2, 3, 1, True, 4] and type(ts[4]) is bool
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        c.close()


def test_same_json() -> None:
    """The retry check compares JSON values: numbers by value, booleans
    apart from numbers, objects in any key order, lists and tuples alike."""
    same = runloop._same_json
    assert same(([{"a": 1, "b": [1, 2]}], None, 0, None), ([{"b": (1.0, 2), "a": 1.0}], None, 0, None))
    assert same(2**63, float(2**63)) and not same(2**53 + 1, float(2**53))
    for a, b in [(True, 1), (False, 0), (1.0, True), ([True], [1]), ({"k": 0}, {"k": False}), (None, 0),
                 ({"a": 1}, {"a": 1, "b": 1}), ([1, 2], [2, 1]), ("1", 1), ([1], {"1": 1})]:
        assert not same(a, b) and not same(b, a), (a, b)
