#!/usr/bin/env python3
"""Interleaved A/B of two checkouts' Python bindings over one libcairn, in
one process, call by call in an order shuffled at every step: the agent turn's Client.checkpoint (the turn of
bench/bindings/python_turn.py, embedded) and CairnSaver.put (the put of
bench/adapters/bench.py's durable part, embedded), with SqliteSaver
(synchronous=FULL) beside as the yardstick. Each binding is loaded from its
checkout under a name of its own (cairn_a, cairn_b); both call the library
CAIRN_LIBRARY names, each on a workspace of its own, so only the Python
side differs.

    CAIRN_LIBRARY=<libcairn.so> <python with langgraph> bench/agent/binding_ab.py A_ROOT B_ROOT [rounds] [calls per round]

Prints per row the median wall time of each round and the median over the
rounds, and the CPU per call (getrusage: the whole process, libcairn's Go
threads included), in microseconds.
"""
from __future__ import annotations

import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "adapters"))
sys.path.insert(0, str(REPO / "bench" / "bindings"))
from bench import Putter, sqlite_saver  # noqa: E402
from checkouts import load  # noqa: E402
from python_turn import turn_messages  # noqa: E402


def turns(c: Any) -> Callable[[], None]:
    c.save("agent", change={"append_messages": [{"role": "system", "content": "you are an agent"}]})
    run_id = c.begin_run("agent")["run_id"]
    n = [0]

    def turn() -> None:
        n[0] += 1
        i = n[0]
        usage = {"input_tokens": 1000 * i, "output_tokens": 200 * i, "total_tokens": 1200 * i, "cost": 0.001 * i}
        c.checkpoint(run_id, i, turn_messages(i), usage=usage, tool_calls_count=i, state={"step": "after_tool", "turn": i})

    return turn


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def shuffled(rows: Dict[str, Callable[[], None]], rounds: int, per: int) -> Tuple[Dict[str, List[float]], Dict[str, List[float]]]:
    """Calls every row once per step, in an order shuffled step by step
    (seeded), so that no row always follows the same one (what ran just
    before decides what is still in the caches); 20 warm-up calls each.
    Returns each row's median wall time and mean CPU per call of every
    round, in microseconds."""
    rng = random.Random(1)
    order = list(rows)
    for f in rows.values():
        for _ in range(20):
            f()
    meds: Dict[str, List[float]] = {n: [] for n in rows}
    cpus: Dict[str, List[float]] = {n: [] for n in rows}
    for _ in range(rounds):
        ts: Dict[str, List[float]] = {n: [] for n in rows}
        cs: Dict[str, float] = {n: 0.0 for n in rows}
        for _ in range(per):
            rng.shuffle(order)
            for n in order:
                c0, t0 = _cpu(), time.perf_counter()
                rows[n]()
                ts[n].append(time.perf_counter() - t0)
                cs[n] += _cpu() - c0
        for n in rows:
            meds[n].append(statistics.median(ts[n]) * 1e6)
            cpus[n].append(cs[n] / per * 1e6)
    return meds, cpus


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    roots = {"A": sys.argv[1], "B": sys.argv[2]}
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    per = int(sys.argv[4]) if len(sys.argv) > 4 else 500
    tmp = tempfile.mkdtemp(prefix="cairn-binding-ab-")
    closers = []
    try:
        rows: Dict[str, Callable[[], None]] = {}
        for k, root in roots.items():
            m = load("cairn_" + k.lower(), root)
            for what in ("turn", "put"):
                d = os.path.join(tmp, k + what)
                os.makedirs(d)
                c = m.connect(d, embedded=True)
                closers.append(c.close)
                if what == "turn":
                    rows[f"turn {k}"] = turns(c)
                else:
                    rows[f"put {k}"] = Putter(sys.modules[m.__name__ + ".langgraph"].CairnSaver(c), "t")
        full = sqlite_saver(os.path.join(tmp, "full.db"), full=True)
        closers.append(full.conn.close)
        rows["put SqliteSaver FULL"] = Putter(full, "t")
        meds, cpus = shuffled(rows, rounds, per)
        print(f"# {rounds} rounds of {per} calls per row; load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
        print(f"# A={roots['A']} B={roots['B']} CAIRN_LIBRARY={os.environ.get('CAIRN_LIBRARY', '')}")
        print(f"{'row':22} {'median':>7} {'CPU':>6}  rounds (median us)")
        for n in rows:
            rs = " ".join(f"{x:.0f}" for x in meds[n])
            print(f"{n:22} {statistics.median(meds[n]):>7.0f} {statistics.median(cpus[n]):>6.0f}  {rs}")
        for k in roots:
            ratios = " ".join(f"{a / b:.2f}" for a, b in zip(meds[f"put {k}"], meds["put SqliteSaver FULL"]))
            print(f"put {k} x SqliteSaver FULL by round: {ratios}")
    finally:
        for f in reversed(closers):
            f()
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
