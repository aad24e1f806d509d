#!/usr/bin/env python3
"""A/B of the Python binding's native checkpoint path against libcairn's.

Both contestants run agent_bench's daemon turn (one checkpoint carrying
the turn's two messages, usage and state) against ONE cairnd:
  wire  a Client with the native path (cairn/_wire.py), the default
  lib   a Client made with CAIRN_PY_WIRE=0: the call goes through libcairn
with Python sqlite3 (agent_bench's SQLite agent) beside them as the
reference the targets are stated against.

Part 1, one agent: in this process, blocks of --block turns of each
contestant in turn (the order rotated every round), --turns turns each in
all. Per contestant: the median and p99 of a turn's wall time, and CPU
per turn, split into this process's (every thread: the Go runtime's
included) and cairnd's (from /proc/<pid>/stat, over its blocks).

Part 2, --agents N processes, each on its own session, each running
--agent-turns turns, started together; the contestants one after the
other, the order rotated every round: turns/s in all, and CPU per turn
of the agent processes and of cairnd.

Run after `make lib bins`:
    python3 bench/agent/wire_ab.py --turns 1000 --agents 1,32 --agent-turns 200 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "agent"))
sys.path.insert(0, str(REPO / "bench" / "bindings"))
sys.path.insert(0, str(REPO / "bindings" / "python"))
import agent_bench as ab  # noqa: E402
from python_turn import turn_messages  # noqa: E402

KINDS = ("sqlite", "wire", "lib")


def connect(cairn: Any, ws: str, wire: bool, **kw: Any) -> Any:
    old = os.environ.pop("CAIRN_PY_WIRE", None)
    if not wire:
        os.environ["CAIRN_PY_WIRE"] = "0"
    try:
        c = cairn.connect(ws, **kw)
    finally:
        os.environ.pop("CAIRN_PY_WIRE", None)
        if old is not None:
            os.environ["CAIRN_PY_WIRE"] = old
    assert (c._wire is not None) == wire
    return c


def agent(kind: str, target: str, sid: str, cairn: Any = None) -> Any:
    if kind == "sqlite":
        return ab.SQLiteAgent(target, sid, busy_ms=60000)
    return ab.CairnAgent(connect(cairn, target, kind == "wire", auto_start=False), sid)


def worker(kind: str, target: str, sid: str, turns: int) -> None:
    """One agent process (agent_bench.fleet)."""
    import cairn

    a = agent(kind, target, sid, cairn)
    ab.run_turns(a, turns, (lambda: {"sent": a.c._wire.sent}) if kind == "wire" else None)


def sqlite_file(root: str) -> str:
    return ab.shared_sqlite(os.path.join(tempfile.mkdtemp(dir=root), "shared.sqlite"))


def one_agent(cairn: Any, ws: str, dpid: int, root: str, turns: int, block: int, rounds: int) -> None:
    agents = {"sqlite": agent("sqlite", sqlite_file(root), "one"), "wire": agent("wire", ws, "one-wire", cairn),
              "lib": agent("lib", ws, "one-lib", cairn)}
    wall: Dict[str, List[int]] = {k: [] for k in KINDS}
    cpu = {k: 0.0 for k in KINDS}
    dcpu = {k: 0.0 for k in KINDS}
    done = {k: 0 for k in KINDS}
    msgs = [turn_messages(i) for i in range(1, turns + 1)]
    order = list(KINDS)
    r = 0
    while done["lib"] < turns:
        for k in order:
            a = agents[k]
            d0, c0 = ab.proc_cpu_s(dpid), time.process_time()
            for _ in range(min(block, turns - done[k])):
                done[k] += 1
                i = done[k]
                t = time.perf_counter_ns()
                a.turn(i, msgs[i - 1])
                wall[k].append(time.perf_counter_ns() - t)
            cpu[k] += time.process_time() - c0
            if k != "sqlite":
                dcpu[k] += ab.proc_cpu_s(dpid) - d0
        r += 1
        order = order[1:] + order[:1]
    sent = agents["wire"].c._wire.sent
    print(f"one agent, {turns} turns each in blocks of {block} ({ab.load()}); native checkpoints sent: {sent}")
    sq = ab.pct(wall["sqlite"], 0.5)
    for k in KINDS:
        med, p99 = ab.pct(wall[k], 0.5), ab.pct(wall[k], 0.99)
        srv = f"  cairnd {dcpu[k] * 1e6 / turns:4.0f}" if k != "sqlite" else ""
        print(f"  {k:6s} median {med:6.1f} us  p99 {p99:7.1f} us  x sqlite {med / sq:4.2f}  cpu/turn client {cpu[k] * 1e6 / turns:4.0f} us{srv}")
    agents["wire"].c.close()
    agents["lib"].c.close()
    agents["sqlite"].close()


def many(kind: str, ws: str, dpid: int, root: str, n: int, turns: int, tag: str) -> Tuple[float, float, float, int]:
    target = sqlite_file(root) if kind == "sqlite" else ws
    outs, dc = ab.fleet(lambda k: [sys.executable, __file__, "--worker", kind, target, f"{tag}-{kind}-{k:02d}", str(turns)], n,
                        dpid if kind != "sqlite" else 0)
    tot = n * turns
    return ab.rate(outs, tot), sum(o["cpu_s"] for o in outs) * 1e6 / tot, dc * 1e6 / tot, sum(o.get("sent", 0) for o in outs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=1000, help="part 1: turns per contestant (0 skips)")
    ap.add_argument("--block", type=int, default=100, help="part 1: turns per block")
    ap.add_argument("--agents", default="1,32", help="part 2: agent process counts ('' skips)")
    ap.add_argument("--agent-turns", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="part 2: rounds (each runs every contestant once)")
    ap.add_argument("--daemon", default=os.environ.get("CAIRN_DAEMON") or str(REPO / "build" / "cairnd"))
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker[0], a.worker[1], a.worker[2], int(a.worker[3]))
        return
    import cairn

    root = tempfile.mkdtemp(prefix="wire-ab-")
    ws = tempfile.mkdtemp(dir=root)
    c0 = cairn.connect(ws, daemon=a.daemon, daemon_args=["--idle-timeout=600s"])
    dpid = c0.status()["daemon"]["pid"]
    try:
        print(f"cairnd pid {dpid}, libcairn {cairn.client._lib._path}")
        if a.turns:
            one_agent(cairn, ws, dpid, root, a.turns, a.block, a.rounds)
        ns = [int(x) for x in a.agents.split(",") if x]
        order = list(KINDS)
        for r in range(a.rounds if ns else 0):
            for n in ns:
                res = {k: many(k, ws, dpid, root, n, a.agent_turns, f"r{r}n{n}") for k in order}
                sq = res["sqlite"][0]
                for k in KINDS:
                    tps, ccpu, dcpu, sent = res[k]
                    srv = f" cairnd {dcpu:4.0f}" if k != "sqlite" else ""
                    extra = f"  native sent {sent}" if k == "wire" else ""
                    print(f"round {r} n={n:2d} {k:6s} {tps:6.0f} turns/s  x sqlite {tps / sq:4.2f}  cpu/turn us: client {ccpu:4.0f}{srv}  ({ab.load()}){extra}", flush=True)
            order = order[1:] + order[:1]
    finally:
        c0.close()
        ab.stop(dpid, timeout=20)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
