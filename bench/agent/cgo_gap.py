#!/usr/bin/env python3
"""What Go's runtime does around a C host's calls into libcairn, by how long
the host runs between them: N embedded calls that do nothing much (a
session's summary), each followed by --gap microseconds of the host's own
work (a busy loop), for each gap given. Per call it prints the call's median
wall time and the CPU time and context switches of libcairn's own threads
(every thread of this process but the calling one: the runtime's monitor,
its idle Ms), read from /proc/self/task/*.

    CAIRN_LIBRARY=build/libcairn.so python3 bench/agent/cgo_gap.py [--calls 5000] [--gaps 0,200,2000]

A call from C keeps its P once it returns (Go 1.26), and the monitor thread
(sysmon) takes back a P whose scheduler tick has not moved for 10 ms. A
callback never moves its P's tick (only the scheduler's execute does), so
after the first 10 ms every poll that finds the host's P between calls
takes it; the next call then finds the monitor asleep (no P was running)
and wakes it. With no gap the monitor rarely sees the P between calls; a
host that works between its calls, as every agent does, pays this per call.
See docs/PERFORMANCE.md, "Go's monitor thread and a C host's calls".
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))

import cairn  # noqa: E402


def others(me: int) -> "tuple[int, int]":
    """CPU nanoseconds and context switches of this process's threads other
    than me, so far (threads that ended are not counted)."""
    cpu = switches = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                cpu += int(f.read().split()[0])
            with open(f"/proc/self/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return cpu, switches


def run(c: "cairn.Client", calls: int, gap_us: int) -> "tuple[float, float, float]":
    me = threading.get_native_id()
    gap = gap_us / 1e6
    for _ in range(200):  # past the runtime's first 10 ms
        c.summary("s")
    cpu0, sw0 = others(me)
    walls = []
    for _ in range(calls):
        t0 = time.perf_counter()
        c.summary("s")
        t1 = time.perf_counter()
        walls.append(t1 - t0)
        end = t1 + gap
        while time.perf_counter() < end:
            pass
    cpu1, sw1 = others(me)
    return statistics.median(walls) * 1e6, (cpu1 - cpu0) / calls / 1e3, (sw1 - sw0) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--gaps", default="0,200,2000", help="comma-separated gaps after each call, in microseconds")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="cairn-cgogap-")
    try:
        c = cairn.connect(d, embedded=True)
        try:
            c.save("s", change={"append_messages": [{"role": "user", "content": "hi"}]})
            print(f"# {a.calls} calls per gap; libcairn {os.environ['CAIRN_LIBRARY']}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            print(f"{'gap us':>7} {'call us':>8} {'go threads cpu us/call':>23} {'their switches/call':>20}")
            for g in (int(x) for x in a.gaps.split(",")):
                wall, cpu, sw = run(c, a.calls, g)
                print(f"{g:>7} {wall:>8.1f} {cpu:>23.1f} {sw:>20.2f}", flush=True)
        finally:
            c.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
