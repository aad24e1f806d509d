#!/usr/bin/env python3
"""The embedded agent turn against its floors, lockstep in one process:
SQLite (agent_bench.py's), cairn embedded, the Python floor (the turn's
params encoded by the binding's own encoder, as Client.checkpoint does,
then written with one pwrite into synced zeros and one fdatasync: what an
embedded store that did nothing in Go would cost) and the bare overwrite
floor (8 KiB pwrite + fdatasync into synced zeros). Prints each one's
median turn and its ratio to SQLite's, per run, and the CPU a turn of the
process's threads other than the one that makes the calls: the Go
runtime's, woken by libcairn's calls (SQLite and Python start none).

    CAIRN_LIBRARY=build/libcairn.so python3 bench/agent/embedded_floor.py [--turns 2000] [--runs 3]

The gap between cairn embedded and the Python floor is what libcairn adds
to a turn (the call, the request's decode and checks, the records'
encoding, the guards), beside the disk and the binding's encoding.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench" / "agent"), str(REPO / "bindings" / "python")]
os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))

import agent_bench as ab  # noqa: E402
import cairn  # noqa: E402
from agents_cpu import threads_cpu  # noqa: E402
from cairn import client as cc  # noqa: E402


class PyFloor(ab.OverwriteFloor):
    """The turn's params as Client.checkpoint encodes them, written into
    synced zeros and made durable: no Go, no checks."""

    def turn(self, i, msgs):
        p = {"run_id": "r", "turn": i, "new_messages": msgs, "tool_calls_count": i, "usage": ab.usage_of(i), "state": ab.state_of(i)}
        b = cc._dumps(p)
        os.pwrite(self.fd, b, self.off)
        os.fdatasync(self.fd)
        self.off = (self.off + len(b)) % (self.SIZE - (1 << 16))


def run(turns: int) -> dict:
    d = tempfile.mkdtemp(prefix="cairn-efloor-")
    try:
        ws = os.path.join(d, "ws")
        os.makedirs(ws)
        c = cairn.connect(ws, embedded=True)
        agents = [("sqlite", ab.SQLiteAgent(os.path.join(d, "a.db"), ab.SID)), ("embedded", ab.CairnAgent(c, ab.SID)),
                  ("pyfloor", PyFloor(os.path.join(d, "pf.bin"))), ("overwrite", ab.OverwriteFloor(os.path.join(d, "ow.bin")))]
        wall = {k: [] for k, _ in agents}
        other = threads_cpu()["other"]
        try:
            for i in range(1, turns + 1):
                m = ab.turn_messages(i)
                k = i % len(agents)
                for name, a in agents[k:] + agents[:k]:
                    t0 = time.perf_counter_ns()
                    a.turn(i, m)
                    wall[name].append(time.perf_counter_ns() - t0)
            other = threads_cpu()["other"] - other
        finally:
            for name, a in agents:
                if name != "embedded":
                    a.close()
            c.close()
        return {k: sorted(v)[len(v) // 2] / 1000 for k, v in wall.items()}, other / turns * 1e6
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    for _ in range(a.runs):
        med, other = run(a.turns)
        print("  ".join(f"{k} {v:.0f} us ({v / med['sqlite']:.2f}x)" for k, v in med.items())
              + f"  other threads {other:.0f} us cpu/turn  {ab.load()}", flush=True)


if __name__ == "__main__":
    main()
