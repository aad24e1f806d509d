#!/usr/bin/env python3
"""Where agent_bench's tail 20 goes: the same pair, in the states it meets.

Writes a session of --turns turns embedded and into SQLite, lockstep as
agent_bench does (embedded and sqlite only), then measures the pair
messages(tail=20) | ORDER BY id DESC LIMIT 20 + json.loads (agent_bench's
timed_pair: interleaved, order alternating) in each state:
  after-lockstep  right after the writes, in the writing process
  after-resume    after agent_bench's resume_all of both sides (every
                  message into Python objects, --resumes times)
  after-session   after --resumes resume_session calls, as agent_bench
                  makes (at 10,000 turns each is over the reply limit)
Per side: median wall, median CPU of the calling thread, and minor page
faults per call (getrusage), so that a state's cost shows where it lands;
and the median time of the resumes themselves (connect + every message,
as agent_bench's resume_all).

    python3 bench/agent/tail_probe.py --turns 10000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "agent"))
sys.path.insert(0, str(REPO / "bench" / "bindings"))
import agent_bench as ab  # noqa: E402
from python_turn import turn_messages  # noqa: E402


def pair(fa: Callable[[], Any], fb: Callable[[], Any], reps: int, warmup: int = 10) -> Tuple[Dict[str, float], Dict[str, float]]:
    for _ in range(warmup):
        fa()
        fb()
    clock, tclock, ru = time.perf_counter_ns, time.thread_time_ns, resource.getrusage
    S = resource.RUSAGE_SELF
    out: List[Dict[str, List[int]]] = [{"wall": [], "cpu": [], "flt": []}, {"wall": [], "cpu": [], "flt": []}]
    for i in range(reps):
        order = ((fa, out[0]), (fb, out[1])) if i % 2 == 0 else ((fb, out[1]), (fa, out[0]))
        for fn, o in order:
            f0 = ru(S).ru_minflt
            c0 = tclock()
            t0 = clock()
            fn()
            t1 = clock()
            c1 = tclock()
            o["wall"].append(t1 - t0)
            o["cpu"].append(c1 - c0)
            o["flt"].append(ru(S).ru_minflt - f0)

    def med(v: List[int]) -> float:
        return sorted(v)[len(v) // 2]

    return tuple({"wall_us": med(o["wall"]) / 1000, "cpu_us": med(o["cpu"]) / 1000,  # type: ignore[return-value]
                  "flt": sum(o["flt"]) / reps} for o in out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=250, help="samples of each side per state")
    ap.add_argument("--resumes", type=int, default=3, help="resume_all of each side before the second state")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--pause", type=float, default=0, help="seconds to sleep before after-resume (to attach perf)")
    a = ap.parse_args()
    os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import cairn

    root = tempfile.mkdtemp(prefix="cairn-tailprobe-", dir=a.dir)
    try:
        ws, db_path = os.path.join(root, "ws"), os.path.join(root, "agent.sqlite")
        os.makedirs(ws)
        ce = cairn.connect(ws, embedded=True)
        sq = ab.SQLiteAgent(db_path, ab.SID)
        agents = [sq, ab.CairnAgent(ce, ab.SID)]
        for i in range(1, a.turns + 1):
            msgs = turn_messages(i)
            for ag in (agents if i % 2 else agents[::-1]):
                ag.turn(i, msgs)
        sq.close()
        ce.close()
        loads = json.loads

        def measure(state: str) -> None:
            c = cairn.connect(ws, embedded=True)
            db = ab.sqlite_open(db_path)
            try:
                e, s = pair(lambda: c.messages(ab.SID, tail=20),
                            lambda: [loads(r[0]) for r in reversed(db.execute(
                                "SELECT body FROM messages WHERE session=? ORDER BY id DESC LIMIT 20", (ab.SID,)).fetchall())],
                            a.reps)
            finally:
                c.close()
                db.close()
            print(f"{a.turns:6d} {state:15s} embedded {e['wall_us']:6.1f} us (cpu {e['cpu_us']:6.1f}, flt {e['flt']:5.1f})"
                  f"  sqlite {s['wall_us']:6.1f} us (cpu {s['cpu_us']:6.1f}, flt {s['flt']:5.1f})"
                  f"  x {e['wall_us'] / s['wall_us']:.2f}  gc {gc.get_count()}  {ab.load()}", flush=True)

        measure("after-lockstep")
        took: List[List[float]] = [[], []]
        for _ in range(a.resumes):
            t0 = time.perf_counter()
            c = cairn.connect(ws, embedded=True)
            try:
                n = len(ab.all_messages(c))
            finally:
                c.close()
            t1 = time.perf_counter()
            db = ab.sqlite_open(db_path)
            try:
                n2 = len([loads(r[0]) for r in db.execute("SELECT body FROM messages WHERE session=? ORDER BY id", (ab.SID,))])
            finally:
                db.close()
            took[0].append(t1 - t0)
            took[1].append(time.perf_counter() - t1)
            assert n == n2 == 2 * a.turns + 1, (n, n2)
        e_ms, s_ms = (sorted(v)[len(v) // 2] * 1000 for v in took)
        print(f"{a.turns:6d} resume_all      embedded {e_ms:6.1f} ms  sqlite {s_ms:6.1f} ms  x {e_ms / s_ms:.2f}", flush=True)
        print(f"# resumed, pid {os.getpid()}", flush=True)
        time.sleep(a.pause)
        measure("after-resume")
        for _ in range(a.resumes):
            c = cairn.connect(ws, embedded=True)
            try:
                c.resume_session(ab.SID, drift=False, processes=False)
            except cairn.TooLargeError:
                pass  # agent_bench's resume_session: over the reply limit at 10,000 turns
            finally:
                c.close()
        measure("after-session")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
