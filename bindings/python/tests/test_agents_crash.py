"""An Agents SDK Runner.run SIGKILLed in the middle of a step (its tool
running) and continued by a new process: CairnSession (embedded and through
the daemon) ends with the same items, in the same order, as a file-backed
SQLiteSession driven through the same steps in the same test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

from conftest import DAEMON, against_sqlite, kill_at

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
    kill_at(p, "IN_TOOL")
    after_kill, resumed, final = child("resume")[-3:]
    return {"first": first, "after_kill": json.loads(after_kill), "resumed": resumed, "final": json.loads(final)}


def test_same_items_as_sqlite_session(daemons: List[int]) -> None:
    results = against_sqlite(scenario, "cairn-ag-", daemons)
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
