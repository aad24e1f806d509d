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

    CAIRN_LIBRARY=build/libcairn.so python3 bench/agent/embedded_floor.py [--turns 2000] [--runs 3] [--go-floor build/goembedfloor.so]

The gap between cairn embedded and the Python floor is what libcairn adds
to a turn (the call, the request's decode and checks, the records'
encoding, the guards), beside the disk and the binding's encoding.

With --go-floor (bench/goembedfloor, built by make bench-embedded-floor),
each run also measures the Go floor: the same params handed through
ctypes to a Go c-shared library that only writes them into synced zeros
and fdatasyncs (what any embedded Go library costs the turn: the
crossing into the Go runtime and its monitor thread). A process can hold
one Go runtime, so each run is two processes one after the other, one
with cairn embedded and one with the Go floor, each against its own
SQLite, Python floor and overwrite floor.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench" / "agent"), str(REPO / "bindings" / "python"), str(REPO / "bench" / "goembedfloor")]
os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))

import agent_bench as ab  # noqa: E402
import cairn  # noqa: E402
from agents_cpu import threads_cpu  # noqa: E402
from cairn import client as cc  # noqa: E402


def params(i, msgs) -> bytes:
    """Turn i's params as Client.checkpoint encodes them."""
    return cc._dumps({"run_id": "r", "turn": i, "new_messages": msgs, "tool_calls_count": i, "usage": ab.usage_of(i), "state": ab.state_of(i)})


class PyFloor(ab.OverwriteFloor):
    """The turn's params as Client.checkpoint encodes them, written into
    synced zeros and made durable: no Go, no checks."""

    def turn(self, i, msgs):
        b = params(i, msgs)
        os.pwrite(self.fd, b, self.off)
        os.fdatasync(self.fd)
        self.off = (self.off + len(b)) % (self.SIZE - (1 << 16))


class GoFloor:
    """The turn's params as Client.checkpoint encodes them, handed to a Go
    c-shared library (bench/goembedfloor) through ctypes, which writes
    them into synced zeros and makes them durable."""

    def __init__(self, lib: str, path: str) -> None:
        from floorlib import open_floor

        self.commit = open_floor(lib, path)

    def turn(self, i, msgs):
        self.commit(params(i, msgs))

    def close(self) -> None:
        pass


def run(turns: int, go_floor: str = "") -> dict:
    d = tempfile.mkdtemp(prefix="cairn-efloor-")
    c = None
    try:
        ws = os.path.join(d, "ws")
        os.makedirs(ws)
        if go_floor:
            middle: tuple = ("gofloor", GoFloor(go_floor, os.path.join(d, "gf.bin")))
        else:
            c = cairn.connect(ws, embedded=True)
            middle = ("embedded", ab.CairnAgent(c, ab.SID))
        agents = [("sqlite", ab.SQLiteAgent(os.path.join(d, "a.db"), ab.SID)), middle,
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
            if c is not None:
                c.close()
        return {k: sorted(v)[len(v) // 2] / 1000 for k, v in wall.items()}, other / turns * 1e6
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--go-floor", default="", help="also run the Go floor library (bench/goembedfloor), in a second process")
    ap.add_argument("--only-go-floor", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    for _ in range(a.runs):
        if a.go_floor and not a.only_go_floor:
            # The Go floor's run first, in a process of its own (see the doc).
            subprocess.run([sys.executable, __file__, "--turns", str(a.turns), "--runs", "1", "--go-floor", a.go_floor, "--only-go-floor"],
                           check=True)
        med, other = run(a.turns, a.go_floor if a.only_go_floor else "")
        print("  ".join(f"{k} {v:.0f} us ({v / med['sqlite']:.2f}x)" for k, v in med.items())
              + f"  other threads {other:.0f} us cpu/turn  {ab.load()}", flush=True)


if __name__ == "__main__":
    main()
