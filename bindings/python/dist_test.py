"""The installed wheel works on its own: `make test-dist`.

    python3 dist_test.py dist/cairn_sessions-*.whl

Installs the wheel into a fresh venv in a temp dir (pip --no-index: nothing
but the wheel), then, with a clean environment (``env -i`` with only PATH
and HOME; no CAIRN_* variables), runs programs on the venv's python:

1. connect() in daemon mode auto-starts the wheel's own cairnd (checked
   through /proc/<pid>/exe), saves a message and checkpoints a run's turn;
2. that cairnd is killed with SIGKILL;
3. connect() auto-starts it again; resume_session and resume_run return
   what was saved;
4. ``cairn ls`` from the venv's PATH lists the session.

Every step has a time limit; daemons started here are killed and the temp
dir removed whatever happens. Prints "N passed, 0 failed" or fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from procs import alive, kill_daemons  # noqa: E402

STEP_TIMEOUT = 60

SAVE = r"""
import json, sys, cairn
c = cairn.connect(sys.argv[1])
c.save("s1", change={"append_messages": [{"role": "user", "content": "hello from the wheel"}]})
run = c.begin_run("s1", run_id="r1")
c.checkpoint(run["run_id"], turn=1, new_messages=[{"role": "assistant", "content": "turn one"}],
             tool_calls_count=1)
print(json.dumps({"pid": c.status()["daemon"]["pid"], "lib": cairn._lib._path.as_posix()}))
c.close()
"""

RESUME = r"""
import json, sys, cairn
c = cairn.connect(sys.argv[1])
s = c.resume_session("s1")
r = c.resume_run("r1", new_run_id="r2")
print(json.dumps({
    "pid": c.status()["daemon"]["pid"],
    "messages": [m["content"] for m in s["snapshot"]["messages"]],
    "interrupted": [x["run_id"] for x in s["interrupted_runs"]],
    "run_turn": r["turn"],
    "run_messages": [m["content"] for m in r["messages"]],
}))
c.close()
"""


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    wheel = Path(sys.argv[1]).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="cairn-dist-"))
    passed = 0

    def clean_env(venv: Path) -> Dict[str, str]:
        return {"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": str(tmp / "home")}

    def run(args: List[str], env: Dict[str, str], cwd: Path) -> str:
        r = subprocess.run(args, env=env, cwd=str(cwd), capture_output=True, text=True, timeout=STEP_TIMEOUT)
        if r.returncode != 0:
            raise AssertionError(f"{args[:3]} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def check(cond: bool, what: str) -> None:
        nonlocal passed
        if not cond:
            raise AssertionError(what)
        passed += 1
        print(f"ok: {what}")

    try:
        (tmp / "home").mkdir()
        ws = tmp / "ws"
        ws.mkdir()
        venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=STEP_TIMEOUT)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check", str(wheel)],
            check=True,
            timeout=STEP_TIMEOUT,
        )
        env = clean_env(venv)
        py = str(venv / "bin" / "python")
        site_pkg = Path(run([py, "-c", "import cairn, os; print(os.path.dirname(cairn.__file__))"], env, ws).strip())
        check(str(site_pkg).startswith(str(venv) + os.sep), f"import cairn comes from the venv ({site_pkg})")
        own = (site_pkg / "cairnd").resolve()

        first = json.loads(run([py, "-c", SAVE, str(ws)], env, ws))
        check(Path(first["lib"]).resolve() == (site_pkg / "libcairn.so").resolve(), "libcairn.so loaded from the wheel")
        check(Path(f"/proc/{first['pid']}/exe").resolve() == own, "connect() auto-started the wheel's own cairnd")

        os.kill(first["pid"], signal.SIGKILL)
        deadline = time.monotonic() + STEP_TIMEOUT
        while alive(first["pid"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        check(not alive(first["pid"]), "the daemon is gone after SIGKILL")

        second = json.loads(run([py, "-c", RESUME, str(ws)], env, ws))
        check(second["pid"] != first["pid"], "connect() auto-started a new cairnd")
        check(Path(f"/proc/{second['pid']}/exe").resolve() == own, "the new cairnd is the wheel's own too")
        check(second["messages"][:1] == ["hello from the wheel"], f"the saved message survived ({second['messages']})")
        check("r1" in second["interrupted"], f"the killed run is reported interrupted ({second['interrupted']})")
        check(
            second["run_turn"] == 1 and "turn one" in second["run_messages"],
            f"resume_run resumes from the checkpoint (turn {second['run_turn']})",
        )

        out = run(["cairn", "ls"], env, ws)
        check("s1" in out, "`cairn ls` on the venv's PATH lists the session")
        print(f"{passed} passed, 0 failed")
        return 0
    except (AssertionError, subprocess.SubprocessError, ValueError, KeyError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        print(f"{passed} passed, 1 failed")
        return 1
    finally:
        # Every cairnd that ran on this workspace, including one a step
        # that failed started, names the temp dir in its command line.
        kill_daemons(str(tmp))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
