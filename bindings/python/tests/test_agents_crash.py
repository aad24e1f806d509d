"""An Agents SDK Runner.run SIGKILLed in the middle of a step (its tool
running) and continued by a new process: CairnSession (embedded and through
the daemon) ends with the same items, in the same order, as a file-backed
SQLiteSession driven through the same steps in the same test."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import cairn
from conftest import DAEMON

HERE = Path(__file__).resolve().parent
CHILD = str(HERE / "helpers" / "agents_crash_child.py")


def scenario(kind: str, path: str) -> Dict[str, Any]:
    env = dict(os.environ, CAIRN_DAEMON=DAEMON, PYTHONPATH=str(HERE.parent))

    def child(phase: str) -> List[str]:
        q = subprocess.run([sys.executable, CHILD, kind, path, phase], env=env,
                           capture_output=True, text=True, timeout=120)
        assert q.returncode == 0, (kind, phase, q.stderr)
        return q.stdout.strip().splitlines()

    first = child("first")[-1]
    p = subprocess.Popen([sys.executable, CHILD, kind, path, "run"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()  # type: ignore[union-attr]
        assert line.strip() == "IN_TOOL", (line, p.stderr.read() if p.poll() is not None else "")  # type: ignore[union-attr]
        p.send_signal(signal.SIGKILL)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)
        p.stdout.close()  # type: ignore[union-attr]
        p.stderr.close()  # type: ignore[union-attr]
    assert p.returncode == -signal.SIGKILL
    after_kill, resumed, final = child("resume")[-3:]
    return {"first": first, "after_kill": json.loads(after_kill), "resumed": resumed, "final": json.loads(final)}


def test_same_items_as_sqlite_session(daemons: List[int]) -> None:
    results = {}
    for kind in ("sqlite", "cairn-embedded", "cairn-daemon"):
        d = tempfile.mkdtemp(prefix="cairn-ag-")
        try:
            results[kind] = scenario(kind, d)
        finally:
            if kind == "cairn-daemon":
                try:
                    c = cairn.connect(d, daemon=DAEMON, auto_start=False)
                    daemons.append(c.status()["daemon"]["pid"])
                    c.close()
                except cairn.CairnError:
                    pass
            shutil.rmtree(d, ignore_errors=True)
    want = results["sqlite"]
    # SQLiteSession: the killed run had saved its input only; the tool call
    # of the interrupted step is gone, and the next run sees the whole first
    # turn, the orphaned "start" and its own input.
    roles = [i.get("type") or i.get("role") for i in want["final"]]
    assert roles == ["user", "function_call", "function_call_output", "message",
                     "user", "user", "function_call", "function_call_output", "message"], roles
    assert want["after_kill"] == want["final"][:5]
    for kind in ("cairn-embedded", "cairn-daemon"):
        assert results[kind] == want, (kind, results[kind], want)
