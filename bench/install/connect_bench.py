"""Connect to first save through the installed wheel: `make bench-install`.

    python3 bench/install/connect_bench.py dist/cairn_sessions-*.whl [-n 10]

Installs the wheel into a fresh venv in a temp dir (pip --no-index), then
measures, each N times with a fresh workspace and no daemon running:

- connect -> first save: a fresh python process (env -i with PATH and HOME
  only) imports cairn, then times cairn.connect(ws) (which auto-starts the
  wheel's own cairnd) until the first save is acknowledged; the split into
  connect and save is shown too;
- cairnd's own start: the wheel's cairnd exec'd by this script until its
  socket accepts a connection;
- python -c 'import cairn' as a whole process, beside python -c 'pass'.

Prints median and p90 of each (ms) and whether connect -> first save's
median is under the 300 ms target. Every daemon it starts is stopped
(SIGTERM, SIGKILL after 10 s) before the next run, and the temp dir removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from procs import kill_daemons  # noqa: E402

TARGET_MS = 300.0
STEP_TIMEOUT = 60

FIRST_SAVE = r"""
import json, sys, time
import cairn
t0 = time.perf_counter()
c = cairn.connect(sys.argv[1])
t1 = time.perf_counter()
c.save("s1", change={"append_messages": [{"role": "user", "content": "first"}]})
t2 = time.perf_counter()
pid = c.status()["daemon"]["pid"]
c.close()
print(json.dumps({"connect": (t1 - t0) * 1e3, "save": (t2 - t1) * 1e3, "pid": pid}))
"""


def pct(xs: List[float], p: float) -> float:
    """The p-th percentile (nearest rank) of xs."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def stop(pid: int) -> None:
    """SIGTERMs pid and waits until it is gone (SIGKILL after 10 s)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (ProcessLookupError, OSError):
            return
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wheel")
    ap.add_argument("-n", type=int, default=10)
    args = ap.parse_args()
    wheel = Path(args.wheel).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="cairn-bi-"))
    try:
        venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=STEP_TIMEOUT)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check", str(wheel)],
            check=True,
            timeout=STEP_TIMEOUT,
        )
        py = str(venv / "bin" / "python")
        env: Dict[str, str] = {"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": str(tmp)}
        pkg = Path(subprocess.run([py, "-c", "import cairn, os; print(os.path.dirname(cairn.__file__))"],
                                  env=env, capture_output=True, text=True, check=True, timeout=STEP_TIMEOUT).stdout.strip())
        cairnd = pkg / "cairnd"

        def ws(kind: str, i: int) -> Path:
            d = tmp / f"{kind}{i}"
            d.mkdir()
            return d

        first, conn, save = [], [], []
        for i in range(args.n):
            w = ws("w", i)
            r = subprocess.run([py, "-c", FIRST_SAVE, str(w)], env=env, cwd=str(w), capture_output=True, text=True, timeout=STEP_TIMEOUT)
            if r.returncode != 0:
                raise RuntimeError(f"first save exited {r.returncode}: {r.stderr}")
            o = json.loads(r.stdout)
            if Path(f"/proc/{o['pid']}/exe").resolve() != cairnd.resolve():
                raise RuntimeError(f"daemon pid {o['pid']} is not the wheel's cairnd {cairnd}")
            first.append(o["connect"] + o["save"])
            conn.append(o["connect"])
            save.append(o["save"])
            stop(o["pid"])

        dstart = []
        for i in range(args.n):
            w = ws("d", i)
            sock_path = w / ".cairn" / "cairnd.sock"
            t0 = time.perf_counter()
            p = subprocess.Popen([str(cairnd), "--workspace", str(w)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + STEP_TIMEOUT
            while True:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(str(sock_path))
                    break
                except OSError:
                    if time.monotonic() > deadline or p.poll() is not None:
                        raise RuntimeError(f"cairnd on {w} did not answer (exit {p.poll()})")
                    time.sleep(0.0005)
                finally:
                    s.close()
            dstart.append((time.perf_counter() - t0) * 1e3)
            stop(p.pid)
            p.wait(timeout=STEP_TIMEOUT)

        def whole(code: str) -> List[float]:
            out = []
            for _ in range(args.n):
                t0 = time.perf_counter()
                subprocess.run([py, "-c", code], env=env, cwd=str(tmp), check=True, timeout=STEP_TIMEOUT)
                out.append((time.perf_counter() - t0) * 1e3)
            return out

        imp = whole("import cairn")
        bare = whole("pass")

        rows = [
            ("connect -> first acknowledged save (auto-starts cairnd)", first),
            ("  of which connect()", conn),
            ("  of which the first save", save),
            ("cairnd start: exec until its socket accepts", dstart),
            ("python -c 'import cairn' (whole process)", imp),
            ("python -c 'pass' (whole process)", bare),
        ]
        print(f"cairn installed wheel, {wheel.name}; N={args.n}, a fresh workspace and no daemon each run")
        print(f"{'':58} {'median ms':>10} {'p90 ms':>8}")
        for name, xs in rows:
            print(f"{name:58} {statistics.median(xs):10.1f} {pct(xs, 90):8.1f}")
        med = statistics.median(first)
        print(f"target: connect -> first save under {TARGET_MS:.0f} ms: {'met' if med < TARGET_MS else 'NOT met'} (median {med:.1f} ms)")
        return 0
    finally:
        # Any cairnd left on a workspace here (a run that failed midway).
        kill_daemons(str(tmp))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
