#!/usr/bin/env python3
"""Two host threads sharing one daemon-mode client for 4 s: thread A saves
8 KiB messages in a loop (each an fdatasync in cairnd), thread B calls
summary in a loop.

    python3 bench/agent/two_threads.py ROOT

ROOT is a checkout with build/libcairn.so, build/cairnd and
bindings/python. Prints A's saves/s, B's summaries/s and B's median and
p99 latency: whether one thread's calls wait behind the other's."""
import os, sys, tempfile, time, statistics, shutil, threading
root = sys.argv[1]
sys.path.insert(0, root + "/bindings/python")
os.environ["CAIRN_LIBRARY"] = root + "/build/libcairn.so"
import cairn
d = tempfile.mkdtemp(prefix="r2thr-")
try:
    c = cairn.connect(d, daemon=root + "/build/cairnd", daemon_args=["--idle-timeout=60s"])
    pid = c.status()["daemon"]["pid"]
    c.save("s", change={"append_messages": [{"role": "user", "content": "x"}]})
    stop = time.monotonic() + 4
    na = [0]; lb = []
    def a():
        while time.monotonic() < stop:
            c.save("a", change={"append_messages": [{"role": "user", "content": "y" * 8192}]}); na[0] += 1
    def b():
        while time.monotonic() < stop:
            t = time.perf_counter_ns(); c.summary("s"); lb.append(time.perf_counter_ns() - t)
    ts = [threading.Thread(target=f) for f in (a, b)]
    [t.start() for t in ts]; [t.join() for t in ts]
    lb.sort()
    print(f"A saves/s {na[0]/4:.0f}  B summaries/s {len(lb)/4:.0f}  B median {lb[len(lb)//2]/1000:.0f} us p99 {lb[len(lb)*99//100]/1000:.0f} us  load {os.getloadavg()[0]:.1f}")
    c.close(); os.kill(pid, 15)
finally:
    shutil.rmtree(d, ignore_errors=True)
