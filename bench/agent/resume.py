#!/usr/bin/env python3
"""Resuming after a crash, cairn embedded against SQLite, in one process:
agent_bench.py's turns (two messages of about 2 KB and 6 KB, usage, a run
checkpoint) saved to both, then, interleaved, each of cairn's resumes
against SQLite reading what it answers: every message row of the session,
each parsed, and the run's latest checkpoint row, its state and usage
parsed. cairn's resumes are Client.resume_run (the messages up to the
checkpoint and the checkpoint, as Python objects; asked again with the
same new run id, which writes nothing) and Client.resume_session (the
session's snapshot, its messages included, with its interrupted run; no
drift or process checks). Prints the medians and the ratios at each turn
count.

    CAIRN_LIBRARY=build/libcairn.so python3 bench/agent/resume.py [--turns 100,1000] [--reps 20]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench" / "agent"), str(REPO / "bindings" / "python")]
os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))

import agent_bench as ab  # noqa: E402
import cairn  # noqa: E402


def run(turns: int, reps: int) -> None:
    d = tempfile.mkdtemp(prefix="cairn-resume-")
    try:
        ws = os.path.join(d, "ws")
        os.makedirs(ws)
        c = cairn.connect(ws, embedded=True)
        sq = ab.SQLiteAgent(os.path.join(d, "a.db"), ab.SID)
        ca = ab.CairnAgent(c, ab.SID)
        for i in range(1, turns + 1):
            m = ab.turn_messages(i)
            sq.turn(i, m)
            ca.turn(i, m)
        expect = 2 * turns + 1
        loads = json.loads

        def cairn_resume() -> None:
            r = c.resume_run(ca.run_id, new_run_id="resumed")
            assert len(r["messages"]) == expect and r["turn"] == turns

        def cairn_session() -> None:
            r = c.resume_session(ab.SID, drift=False, processes=False)
            assert len(r["snapshot"]["messages"]) == expect

        def sqlite_resume() -> None:
            ex = sq.db.execute
            msgs = [loads(r[0]) for r in ex("SELECT body FROM messages WHERE session=? ORDER BY id", (ab.SID,))]
            turn, state, usage, calls = ex("SELECT turn, state, usage, tool_calls_count FROM checkpoints WHERE run_id=? ORDER BY turn DESC LIMIT 1",
                                           (sq.run_id,)).fetchone()
            loads(state), loads(usage)
            assert len(msgs) == expect and turn == turns

        try:
            for name, fn in (("resume_run", cairn_resume), ("resume_session", cairn_session)):
                a, b = ab.timed_pair(fn, sqlite_resume, reps, 2)
                print(f"turns {turns:6d}  cairn {name:14s} {a['median_us'] / 1000:8.2f} ms  sqlite {b['median_us'] / 1000:8.2f} ms  "
                      f"ratio {a['median_us'] / b['median_us']:.2f}  {ab.load()}", flush=True)
        finally:
            sq.close()
            c.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", default="100,1000")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    for n in a.turns.split(","):
        run(int(n), a.reps)


if __name__ == "__main__":
    main()
