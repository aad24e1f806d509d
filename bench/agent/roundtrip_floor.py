#!/usr/bin/env python3
"""The round trip of the daemon path, against the same call embedded: a
summary of a one-message session, 3,000 calls through cairnd and 3,000
embedded, in one process, three rounds. Prints each round's medians, the
client's CPU per call (this process, all threads) and cairnd's.

    python3 bench/agent/roundtrip_floor.py

Uses build/libcairn.so and build/cairnd (make lib bins). A daemon turn
cannot cost less than the disk's floor plus this round trip."""
import os, sys, tempfile, time, statistics, shutil
from pathlib import Path
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))
import cairn
from agent_bench import proc_cpu_s  # this script's directory
d = tempfile.mkdtemp(prefix="rtfloor-")
try:
    os.makedirs(d + "/e"); os.makedirs(d + "/d")
    ce = cairn.connect(d + "/e", embedded=True)
    cd = cairn.connect(d + "/d", daemon=str(REPO / "build" / "cairnd"), daemon_args=["--idle-timeout=60s"])
    pid = cd.status()["daemon"]["pid"]
    for c in (ce, cd):
        c.save("s", change={"append_messages": [{"role": "user", "content": "x"}]})
    def lat(c, n=3000):
        ts = []
        for _ in range(n):
            t = time.perf_counter_ns(); c.summary("s"); ts.append(time.perf_counter_ns() - t)
        return statistics.median(ts) / 1000
    for r in range(3):
        e = lat(ce)
        c0, d0 = time.process_time(), proc_cpu_s(pid)
        dl = lat(cd)
        cc, dc = (time.process_time() - c0) / 3000 * 1e6, (proc_cpu_s(pid) - d0) / 3000 * 1e6
        print(f"summary: embedded {e:.0f} us, daemon {dl:.0f} us (client cpu {cc:.0f} + cairnd {dc:.0f} us); round trip adds {dl - e:.0f} us; load {os.getloadavg()[0]:.2f}")
    cd.close(); ce.close(); os.kill(pid, 15)
finally:
    shutil.rmtree(d, ignore_errors=True)
