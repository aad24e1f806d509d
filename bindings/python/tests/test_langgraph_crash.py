"""A real LangGraph graph SIGKILLed in the middle of a step (one parallel
branch finished, the other running) and resumed by a new process: CairnSaver
(embedded and through the daemon) gives the same state, and re-runs the
same nodes, as SqliteSaver in the same test."""

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

import pytest

import cairn
from conftest import DAEMON

HERE = Path(__file__).resolve().parent
CHILD = str(HERE / "helpers" / "graph_child.py")


def crash_and_resume(kind: str, path: str) -> Dict[str, Any]:
    env = dict(os.environ, CAIRN_DAEMON=DAEMON, PYTHONPATH=str(HERE.parent))
    p = subprocess.Popen([sys.executable, CHILD, kind, path, "run"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()  # type: ignore[union-attr]
        assert line.strip() == "IN_SLOW", (line, p.stderr.read() if p.poll() is not None else "")  # type: ignore[union-attr]
        p.send_signal(signal.SIGKILL)
    finally:
        p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    q = subprocess.run([sys.executable, CHILD, kind, path, "resume"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert q.returncode == 0, q.stderr
    return json.loads(q.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_same_state_as_sqlite(daemons: List[int]) -> None:
    results = {}
    for kind in ("sqlite", "cairn-embedded", "cairn-daemon"):
        d = tempfile.mkdtemp(prefix="cairn-lg-")
        try:
            results[kind] = crash_and_resume(kind, d)
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
    # SqliteSaver: the killed step resumes with "fast"'s write kept, so only
    # "slow" runs again.
    assert want["before_next"] == ["slow"], want
    assert sorted(want["final"]) == sorted(["in", "a", "fast", "slow", "join"])
    assert sorted(want["exec"]) == sorted(["a", "fast", "slow", "slow", "join"])
    for r in results.values():
        # "fast" and "slow" run in parallel: their order in the log varies.
        r["exec"] = sorted(r["exec"])
    for kind in ("cairn-embedded", "cairn-daemon"):
        assert results[kind] == want, (kind, results[kind], want)
