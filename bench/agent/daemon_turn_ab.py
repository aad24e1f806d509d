#!/usr/bin/env python3
"""Lockstep agent turns (a run checkpoint carrying ~8 KB of messages)
through a given cairnd from Python: median latency, this process's CPU per
turn (the binding and libcairn, all threads) and cairnd's.

    python3 bench/agent/daemon_turn_ab.py CAIRND [TURNS]

CAIRN_LIBRARY chooses the library; run two builds in turn to compare them."""
import os
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench", "bindings"))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
os.environ.setdefault("CAIRN_LIBRARY", os.path.join(REPO, "build", "libcairn.so"))
from agent_bench import proc_cpu_s  # noqa: E402  (this script's directory)
from python_turn import turn_messages  # noqa: E402

import cairn  # noqa: E402


def turn(c, run_id, i):
    c.checkpoint(run_id, i, turn_messages(i), usage={"input_tokens": i}, tool_calls_count=i, state={"turn": i})


def main():
    daemon = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    d = tempfile.mkdtemp(prefix="cairn-dturn-")
    try:
        c = cairn.connect(d, daemon=daemon, daemon_args=["--idle-timeout=20s"])
        pid = c.status()["daemon"]["pid"]
        c.save("agent", change={"append_messages": [{"role": "system", "content": "x"}]})
        run = c.begin_run("agent")
        rid = run["run_id"] if isinstance(run, dict) else run
        for i in range(1, 201):  # warm-up
            turn(c, rid, i)
        c0, d0, lat = time.process_time(), proc_cpu_s(pid), []
        for i in range(201, n + 201):
            t = time.perf_counter()
            turn(c, rid, i)
            lat.append(time.perf_counter() - t)
        c1, d1 = time.process_time(), proc_cpu_s(pid)
        c.close()
        os.kill(pid, 15)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(
        f"{os.path.basename(daemon):22} median {statistics.median(lat) * 1e6:.0f} us  "
        f"client cpu {(c1 - c0) / n * 1e6:.0f}  cairnd cpu {(d1 - d0) / n * 1e6:.0f} us/turn  "
        f"load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
