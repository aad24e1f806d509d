"""The adapter examples of the README run as shown: each is SIGKILLed in
the middle of its work and resumes from a new process; the README holds
each example file verbatim."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import List

import cairn
from conftest import DAEMON

HERE = Path(__file__).resolve().parents[1]
EX = HERE / "examples"


def env() -> dict:
    return dict(os.environ, CAIRN_DAEMON=DAEMON, PYTHONPATH=str(HERE))


def start(name: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(EX / name), *args], env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_after(p: subprocess.Popen, line: str) -> List[str]:
    seen: List[str] = []
    try:
        for out in p.stdout:  # type: ignore[union-attr]
            seen.append(out.strip())
            if out.strip() == line:
                p.send_signal(signal.SIGKILL)
                break
    finally:
        p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL, (seen, p.stderr.read())  # type: ignore[union-attr]
    return seen


def finish(name: str, *args: str) -> List[str]:
    q = subprocess.run([sys.executable, str(EX / name), *args], env=env(), capture_output=True, text=True, timeout=120)
    assert q.returncode == 0, q.stderr
    return q.stdout.strip().splitlines()


def stop_daemon_of(ws: str, daemons: List[int]) -> None:
    try:
        c = cairn.connect(ws, daemon=DAEMON, auto_start=False)
    except cairn.UnavailableError:
        return
    daemons.append(c.status()["daemon"]["pid"])
    c.close()


def test_readme_holds_the_examples() -> None:
    readme = (HERE / "README.md").read_text()
    for f in sorted(EX.glob("*.py")):
        assert f.read_text() in readme, f.name


def test_langgraph_example(workspace: str, daemons: List[int]) -> None:
    try:
        kill_after(start("langgraph_resume.py", workspace), "running research (done so far: ['plan'])")
        out = finish("langgraph_resume.py", workspace)
        assert out[0] == "resuming at research"
        assert out[-1] == "result: ['plan', 'research', 'write', 'review']"
        assert "running plan" not in "\n".join(out)
    finally:
        stop_daemon_of(workspace, daemons)


def test_agents_example(workspace: str, daemons: List[int]) -> None:
    try:
        assert finish("agents_resume.py", workspace, "q1") == ["you have asked 1 question(s): ['q1']"]
        assert finish("agents_resume.py", workspace, "q2") == ["you have asked 2 question(s): ['q1', 'q2']"]
    finally:
        stop_daemon_of(workspace, daemons)


def test_run_loop_example(workspace: str, daemons: List[int]) -> None:
    try:
        kill_after(start("start_run_resume.py", workspace), "turn 2 done")
        out = finish("start_run_resume.py", workspace)
        assert out[0].startswith("resumed run_") and out[0].endswith("at turn 2, 2 tool calls, 200 input tokens so far")
        assert out[-1].endswith("completed: 5 turns, 5 tool calls")
    finally:
        stop_daemon_of(workspace, daemons)
