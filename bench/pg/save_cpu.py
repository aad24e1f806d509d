#!/usr/bin/env python3
"""A 200-byte save on a PostgreSQL store from Python, turn after turn:
median latency and CPU per save, embedded (pgstore in this process) or
through cairnd.

    python3 bench/pg/save_cpu.py URL emb|daemon [SAVES]

URL is a database's postgres:// URL (`go run ./internal/pgtest/pgserve`
prints one). CAIRN_LIBRARY and CAIRN_DAEMON choose the builds, so two
builds can be run in turn against one server. Prints the median, the CPU
of this process's calling thread and of its other threads (the Go
runtime's), and for the daemon, cairnd's, each per save."""
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path[:0] = [os.path.join(REPO, "bindings", "python"), os.path.join(REPO, "bench", "agent")]
import cairn  # noqa: E402
from agent_bench import proc_cpu_s  # noqa: E402
from agents_cpu import threads_cpu  # noqa: E402

MSG = {"role": "assistant", "content": "x" * 180}


def main():
    url, mode = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    with tempfile.TemporaryDirectory(prefix="cairn-pgsave-") as ws:
        if mode == "emb":
            c = cairn.connect(ws, store=url, embedded=True)
            dpid = None
        else:
            c = cairn.connect(ws, store=url, daemon_args=["--idle-timeout=30s"])
            dpid = c.status()["daemon"]["pid"]
        try:
            sid = "s%d" % os.getpid()
            for _ in range(200):
                c.save(sid, change={"append_messages": [MSG]})
            a, da = threads_cpu(), dpid and proc_cpu_s(dpid)
            lat = []
            for _ in range(n):
                t = time.perf_counter()
                c.save(sid, change={"append_messages": [MSG]})
                lat.append(time.perf_counter() - t)
            b, db = threads_cpu(), dpid and proc_cpu_s(dpid)
        finally:
            c.close()
            if dpid:
                os.kill(dpid, 15)
    us = lambda s: s / n * 1e6  # noqa: E731
    line = f"{mode}: median {statistics.median(lat) * 1e6:.0f} us; cpu per save: calling thread {us(b['main'] - a['main']):.0f} us, other threads {us(b['other'] - a['other']):.0f} us"
    if dpid:
        line += f", cairnd {us(db - da):.0f} us"
    print(line + f" (load {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
