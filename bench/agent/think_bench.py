#!/usr/bin/env python3
"""The agent turn with an agent's pauses between turns, against SQLite.

agent_bench.py runs turns back to back, so every page a turn touches is in
the page cache and every CPU is awake. An agent waits seconds on its model
between turns; meanwhile a page cache that reclaims cold pages (a VM's
memory reclaim: this machine's drops a file's clean pages within minutes)
drops what the next turn writes into, and the CPUs sleep. This script
makes the turns of one process against each contestant in turn (the order
rotated every turn), --gap seconds apart, after --idle seconds of pause
once every contestant has made a few turns:

  sqlite    Python sqlite3 (WAL, synchronous=FULL), agent_bench's agent
  embedded  the binding in process (libcairn, CAIRN_LIBRARY)
  cairnd:N  the binding against a cairnd binary given with --daemon (each
            on a workspace of its own; give two to compare builds)

It prints each contestant's median and mean turn and the median's ratio to
SQLite's.

    python3 bench/agent/think_bench.py [--idle 240] [--turns 150] [--gap 1.0] [--daemon build/cairnd ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench" / "agent"), str(REPO / "bench" / "bindings"), str(REPO / "bindings" / "python")]
os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))

import agent_bench as ab  # noqa: E402
import cairn  # noqa: E402
from python_bench import connected  # noqa: E402
from python_turn import turn_messages  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=float, default=240.0, help="seconds of pause after the first turns")
    ap.add_argument("--turns", type=int, default=150, help="turns per contestant after the pause")
    ap.add_argument("--gap", type=float, default=1.0, help="seconds between turns")
    ap.add_argument("--daemon", action="append", default=[], help="a cairnd binary (repeatable)")
    ap.add_argument("--no-embedded", action="store_true")
    a = ap.parse_args()
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="cairn-think-") as root:
        agents: Dict[str, Any] = {"sqlite": ab.SQLiteAgent(os.path.join(root, "agent.sqlite"), "s1")}
        stack.callback(agents["sqlite"].close)
        if not a.no_embedded:
            agents["embedded"] = ab.CairnAgent(stack.enter_context(connected(cairn, "embedded", "", "cairn-think")), "s1")
        for k, binary in enumerate(a.daemon):
            agents[f"cairnd:{k}"] = ab.CairnAgent(stack.enter_context(connected(cairn, "daemon", os.path.abspath(binary), "cairn-think")), "s1")
        msgs = [turn_messages(i) for i in range(50)]
        names = list(agents)
        for i in range(5):
            for k in names:
                agents[k].turn(i, msgs[i])
        print(f"# {os.cpu_count()} CPUs; {a.turns} turns each, {a.gap}s apart, after {a.idle}s of pause; {ab.load()}", flush=True)
        for k, binary in enumerate(a.daemon):
            print(f"# cairnd:{k} = {binary}", flush=True)
        time.sleep(a.idle)
        took: Dict[str, List[float]] = {k: [] for k in names}
        for i in range(5, 5 + a.turns):
            r = i % len(names)
            for k in names[r:] + names[:r]:
                t0 = time.perf_counter()
                agents[k].turn(i, msgs[i % len(msgs)])
                took[k].append(time.perf_counter() - t0)
            time.sleep(a.gap)
        base = statistics.median(took["sqlite"])
        print(f"# {ab.load()}", flush=True)
        print("contestant   median us    mean us  x sqlite", flush=True)
        for k in names:
            med = statistics.median(took[k])
            print(f"{k:10s}  {med * 1e6:10.0f} {statistics.mean(took[k]) * 1e6:10.0f}  {med / base:8.2f}", flush=True)


if __name__ == "__main__":
    main()
