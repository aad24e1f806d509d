#!/usr/bin/env python3
"""Several cairnd binaries' CPU per agent turn, measured over the same
moments: one Python process holds a connection to each (each cairnd on a
workspace of its own) and runs the agent turn on each in turn, so a burst
of load from elsewhere falls on every binary alike.

    python3 bench/agent/cairnd_ab.py [--turns 3000] [--blocks 6] CAIRND ...

One libcairn (CAIRN_LIBRARY, default build/libcairn.so) serves every
connection, so only cairnd differs. A turn is bench/bindings/python_turn.py's
(one checkpoint carrying ~8 KiB of messages); the turns are split into
--blocks, and each block prints, per binary, its median turn, its CPU per
turn (its threads' CPU time from /proc/<pid>/task/*/schedstat) and their
context switches per turn. The last lines are the medians over the blocks.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench" / "bindings"), str(REPO / "bindings" / "python"), str(REPO / "bench" / "agent")]
os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))

import cairn  # noqa: E402
from agents_cpu import threads_cpu  # noqa: E402
from daemon_turn_cpu import switches  # noqa: E402
from python_bench import connected  # noqa: E402
from python_turn import turn_messages  # noqa: E402


def cpu_ns(pid: int) -> int:
    """CPU time of process pid's live threads, in ns (finer than
    /proc/<pid>/stat's clock ticks; cairnd's threads do not exit)."""
    c = threads_cpu(pid)
    return round((c["main"] + c["other"]) * 1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=3000, help="turns per binary")
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("bins", nargs="+")
    a = ap.parse_args()
    with ExitStack() as stack:
        cs, pids, runs = [], [], []
        for b in a.bins:
            c = stack.enter_context(connected(cairn, "daemon", b, "cairn-ab"))
            c.save("s", change={"append_messages": [{"role": "system", "content": "you are an agent"}]})
            runs.append(c.begin_run("s")["run_id"])
            cs.append(c)
            pids.append(c.status()["daemon"]["pid"])
        for i in range(1, 201):  # warm-up
            for c, run in zip(cs, runs):
                c.checkpoint(run, i, turn_messages(i), usage={"input_tokens": i}, tool_calls_count=i, state={"t": i})
        per = a.turns // a.blocks
        turn = 201
        rows: list[list[tuple[float, float, float]]] = [[] for _ in a.bins]
        names = [os.path.relpath(b) if len(b) > 40 else b for b in a.bins]
        width = max(len(n) for n in names)
        for blk in range(a.blocks):
            msgs = [turn_messages(i) for i in range(turn, turn + per)]
            walls: list[list[int]] = [[] for _ in a.bins]
            s0 = [switches(p) for p in pids]
            d0 = [cpu_ns(p) for p in pids]
            for k in range(per):
                # Rotate which binary goes first, so neither always follows the other.
                order = range(len(cs)) if k % 2 == 0 else reversed(range(len(cs)))
                for j in order:
                    t0 = time.perf_counter_ns()
                    cs[j].checkpoint(runs[j], turn + k, msgs[k], usage={"input_tokens": k}, tool_calls_count=k, state={"t": k})
                    walls[j].append(time.perf_counter_ns() - t0)
            turn += per
            load = os.getloadavg()[0]
            for j in range(len(cs)):
                cpu = (cpu_ns(pids[j]) - d0[j]) / per / 1000
                sw = (switches(pids[j]) - s0[j]) / per
                med = statistics.median(walls[j]) / 1000
                rows[j].append((med, cpu, sw))
                print(f"block {blk + 1}  {names[j]:{width}}  median {med:5.0f} us  cairnd cpu {cpu:4.0f} us  "
                      f"switches {sw:4.1f}/turn  load {load:.1f}", flush=True)
        print("# medians over the blocks")
        for j in range(len(cs)):
            med, cpu, sw = (statistics.median(r[x] for r in rows[j]) for x in range(3))
            print(f"{names[j]:{width}}  median {med:5.0f} us  cairnd cpu {cpu:4.0f} us  switches {sw:4.1f}/turn")


if __name__ == "__main__":
    main()
