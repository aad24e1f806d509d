#!/usr/bin/env python3
"""The daemon path's null call: a summary of a one-message session through
a cairnd, from Python, CALLS times after 500 warm-up calls.

    python3 bench/agent/nullcall_cpu.py ROOT CALLS

ROOT is a checkout with build/libcairn.so, build/cairnd and
bindings/python. Prints one line: median latency (us), the client
process's CPU per call (us, all threads, getrusage), its context switches
per call (voluntary + involuntary, all threads), cairnd's CPU per call (us)
and the load. Run it for several builds in turn to compare them."""
import os, sys, tempfile, time, statistics, shutil, resource
root = sys.argv[1]; n = int(sys.argv[2])
sys.path.insert(0, root + "/bindings/python")
os.environ["CAIRN_LIBRARY"] = root + "/build/libcairn.so"
import cairn
from agent_bench import proc_cpu_s  # this script's directory
d = tempfile.mkdtemp(prefix="r2null-")
try:
    cd = cairn.connect(d, daemon=root + "/build/cairnd", daemon_args=["--idle-timeout=60s"])
    pid = cd.status()["daemon"]["pid"]
    cd.save("s", change={"append_messages": [{"role": "user", "content": "x"}]})
    for _ in range(500): cd.summary("s")
    ru0 = resource.getrusage(resource.RUSAGE_SELF); d0 = proc_cpu_s(pid)
    ts = []
    for _ in range(n):
        t = time.perf_counter_ns(); cd.summary("s"); ts.append(time.perf_counter_ns() - t)
    ru1 = resource.getrusage(resource.RUSAGE_SELF); d1 = proc_cpu_s(pid)
    ccpu = (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) / n * 1e6
    cs = (ru1.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nvcsw - ru0.ru_nivcsw) / n
    print(f"{statistics.median(ts)/1000:.0f} {ccpu:.0f} {cs:.2f} {(d1-d0)/n*1e6:.0f} {os.getloadavg()[0]:.2f}")
    cd.close(); os.kill(pid, 15)
finally:
    shutil.rmtree(d, ignore_errors=True)
