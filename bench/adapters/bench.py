"""Framework adapters against SQLite, in one script on one machine:
`make bench-adapters` (python3 bench/adapters/bench.py [--scale F]).

- LangGraph checkpointers: CairnSaver (embedded, daemon), SqliteSaver
  (its defaults, and PRAGMA synchronous=FULL) and AsyncSqliteSaver:
  put, get_tuple and list(limit=10) at 10, 1,000 and 10,000 checkpoints
  in one thread; a chat graph's invoke at turns 10, 150 and 1,000.
- Agents SDK sessions: CairnSession (embedded, daemon) and SQLiteSession:
  add_items, get_items(limit=10) and pop_item at 100 and 20,000 items.

Each figure is the median of repeated calls, in microseconds. --scale
shrinks every size (e.g. 0.1 for a quick look). Numbers are only
comparable within one run; the machine may be shared."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Annotated, Any, Callable, Dict, List, TypedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

import cairn  # noqa: E402
from cairn.agents import CairnSession  # noqa: E402
from cairn.langgraph import CairnSaver  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: E402
from langgraph.channels.delta import DeltaChannel  # noqa: E402
from langgraph.graph import START, END, MessagesState, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402

DAEMON_ARGS = ["--idle-timeout=30s"]


def med(f: Callable[[], Any], n: int) -> float:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


class Sync:
    """Runs an async saver's methods on one loop, as sync calls."""

    def __init__(self, saver: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.s, self.loop = saver, loop

    def get_next_version(self, cur: Any, ch: Any) -> Any:
        return self.s.get_next_version(cur, ch)

    def put(self, *a: Any) -> Any:
        return self.loop.run_until_complete(self.s.aput(*a))

    def get_tuple(self, cfg: Any) -> Any:
        return self.loop.run_until_complete(self.s.aget_tuple(cfg))

    def list(self, cfg: Any, limit: int) -> List[Any]:
        async def go() -> List[Any]:
            return [t async for t in self.s.alist(cfg, limit=limit)]

        return self.loop.run_until_complete(go())


def savers(tmp: str, stack: List[Callable[[], None]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    os.makedirs(os.path.join(tmp, "emb"))
    ce = cairn.connect(os.path.join(tmp, "emb"), embedded=True)
    stack.append(ce.close)
    out["CairnSaver embedded"] = CairnSaver(ce)
    os.makedirs(os.path.join(tmp, "dmn"))
    cd = cairn.connect(os.path.join(tmp, "dmn"), daemon_args=DAEMON_ARGS)
    pid = cd.status()["daemon"]["pid"]
    stack.append(cd.close)
    stack.append(lambda: os.kill(pid, 15))
    out["CairnSaver daemon"] = CairnSaver(cd)
    s1 = sqlite_saver(os.path.join(tmp, "default.db"))
    out[f"SqliteSaver default (synchronous={s1.conn.execute('PRAGMA synchronous').fetchone()[0]})"] = s1
    out["SqliteSaver synchronous=FULL"] = sqlite_saver(os.path.join(tmp, "full.db"), full=True)
    loop = asyncio.new_event_loop()
    import aiosqlite

    async def make() -> Any:
        conn = await aiosqlite.connect(os.path.join(tmp, "async.db"))
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        return conn, saver

    ac, a = loop.run_until_complete(make())
    out["AsyncSqliteSaver default"] = Sync(a, loop)
    stack.append(lambda: (loop.run_until_complete(ac.close()), loop.close()))
    return out


def checkpoints(sizes: List[int], tmp: str, stack: List[Callable[[], None]]) -> None:
    print(f"\n## LangGraph checkpointer: median us per call at N checkpoints in the thread")
    print(f"{'saver':44} {'N':>6} {'put':>9} {'get_tuple':>10} {'list(10)':>9}")
    for name, s in savers(tmp, stack).items():
        cfg: Dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        have = 0
        ver = None

        def put() -> None:
            nonlocal cfg, ver, have
            cp = empty_checkpoint()
            ver = s.get_next_version(ver, None)
            cp["channel_values"] = {"messages": ["hello world"] * 4, "step": have}
            cp["channel_versions"] = {"messages": ver, "step": ver}
            cfg = s.put(cfg, cp, {"source": "loop", "step": have}, cp["channel_versions"])
            have += 1

        for n in sizes:
            while have < n - 20:
                put()
            p = med(put, 20)
            latest = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            g = med(lambda: s.get_tuple(latest), 50)
            lst = med(lambda: list(s.list(latest, limit=10)), 20)
            print(f"{name:44} {have:>6} {p:>9.0f} {g:>10.0f} {lst:>9.0f}", flush=True)


class _Timed:
    """A client whose save calls are timed (wall and process CPU), so a
    put's one commit can be told from what the saver does around it."""

    def __init__(self, c: Any) -> None:
        self._c = c
        self.wall = self.cpu = 0.0
        self.saves = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)

    def save(self, *a: Any, **k: Any) -> Any:
        c0, t0 = _cpu(), time.perf_counter()
        try:
            return self._c.save(*a, **k)
        finally:
            self.wall += time.perf_counter() - t0
            self.cpu += _cpu() - c0
            self.saves += 1

    def _call(self, method: bytes, req: Any, decode: bool = True) -> Any:
        # CairnSaver.put hands its request to the client's _call as JSON
        # text; a save that way is timed as one.
        if method != b"save":
            return self._c._call(method, req, decode)
        c0, t0 = _cpu(), time.perf_counter()
        try:
            return self._c._call(method, req, decode)
        finally:
            self.wall += time.perf_counter() - t0
            self.cpu += _cpu() - c0
            self.saves += 1


def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sqlite_saver(path: str, full: bool = False) -> Any:
    """A SqliteSaver on a file of its own, set up; with full, under
    PRAGMA synchronous=FULL (its own default otherwise)."""
    conn = sqlite3.connect(path, check_same_thread=False)
    s = SqliteSaver(conn)
    s.setup()
    if full:
        conn.execute("PRAGMA synchronous=FULL")
    return s


class Putter:
    """A thread's puts, one per call, each the checkpoint a small graph's
    step writes: two channels, both changed."""

    def __init__(self, saver: Any, thread_id: str) -> None:
        self.s, self.ver, self.i = saver, None, 0
        self.cfg: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}

    def __call__(self) -> None:
        cp = empty_checkpoint()
        self.ver = self.s.get_next_version(self.ver, None)
        cp["channel_values"] = {"messages": ["hello world"] * 4, "step": self.i}
        cp["channel_versions"] = {"messages": self.ver, "step": self.ver}
        self.cfg = self.s.put(self.cfg, cp, {"source": "loop", "step": self.i}, cp["channel_versions"])
        self.i += 1


def interleaved(
    rows: Dict[str, Callable[[], None]],
    rounds: int,
    per: int,
    begin_round: Callable[[], None] = lambda: None,
    end_round: Callable[[], None] = lambda: None,
    block: int = 1,
) -> "tuple[Dict[str, List[float]], Dict[str, List[float]]]":
    """Calls every row in turn, per times a round, after 20 warm-up calls
    each; returns each row's median wall time and mean CPU per call of
    every round, in microseconds (CPU from getrusage: the whole process).
    With block > 1 each turn is block calls of one row in a row (per is
    then rounded down to a multiple of it).

    The rows' order is shuffled at every turn (seeded, so a run can be
    repeated): a call runs cold after whatever ran before it, and a fixed
    order would give each row the same predecessor every time. In a fixed
    order a row that follows one of the same kind (two SQLite savers in a
    row) runs warm where the others run cold; shuffled, every row follows
    every other about equally often."""
    for f in rows.values():
        for _ in range(20):
            f()
    rng = random.Random(20261202)
    names = list(rows)
    meds: Dict[str, List[float]] = {n: [] for n in rows}
    cpus: Dict[str, List[float]] = {n: [] for n in rows}
    for _ in range(rounds):
        begin_round()
        ts: Dict[str, List[float]] = {n: [] for n in rows}
        cs: Dict[str, float] = {n: 0.0 for n in rows}
        for _ in range(per // block):
            rng.shuffle(names)
            for n in names:
                f = rows[n]
                for _ in range(block):
                    c0, t0 = _cpu(), time.perf_counter()
                    f()
                    ts[n].append(time.perf_counter() - t0)
                    cs[n] += _cpu() - c0
        for n in rows:
            meds[n].append(statistics.median(ts[n]) * 1e6)
            cpus[n].append(cs[n] / len(ts[n]) * 1e6)
        end_round()
    return meds, cpus


FULL = "SqliteSaver synchronous=FULL"


def print_interleaved(meds: Dict[str, List[float]], cpus: Dict[str, List[float]], width: int) -> None:
    base = statistics.median(meds[FULL])
    print(f"{'saver':{width}} {'median':>8} {'rounds (median us)':>40} {'CPU us':>7} {'vs FULL':>8}")
    for n in meds:
        m = statistics.median(meds[n])
        rs = " ".join(f"{x:.0f}" for x in meds[n])
        print(f"{n:{width}} {m:>8.0f} {rs:>40} {statistics.median(cpus[n]):>7.0f} {m / base:>7.2f}x", flush=True)


def durable(rounds: int, per: int, tmp: str, stack: List[Callable[[], None]]) -> None:
    """A durable put, CairnSaver embedded against SqliteSaver with
    synchronous=FULL, interleaved call by call so that both see the same
    machine, each saver on a client or connection of its own and nothing
    else open; medians per round, CPU per put from getrusage (the whole
    process: cairn's Go threads included).

    The savers compared run as a pair, so that each put follows the other
    saver's: with a third row, a saver that follows one of its own kind
    runs warm where the others run cold. SqliteSaver's default setting runs
    as a second pair against another FULL saver: the two are the same
    setting here, so that pair's ratio is the method's own error. The share
    of cairn's one commit (client.save) is timed in a pass of its own, on a
    client that wraps the save in timers: inside the pairs the timers would
    be part of cairn's put alone. A put runs colder after the other saver's
    than after one of its own kind, so each saver's put is also timed
    against a second saver of its kind (a second workspace for cairn; for
    SQLite, the error pair's FULL row)."""
    print(f"\n## Durable put, interleaved call by call: {rounds} rounds of {per} puts each")
    d = os.path.join(tmp, "durable")
    os.makedirs(os.path.join(d, "emb"))
    ce = cairn.connect(os.path.join(d, "emb"), embedded=True)
    stack.append(ce.close)
    full = sqlite_saver(os.path.join(d, "full.db"), full=True)
    full2 = sqlite_saver(os.path.join(d, "full2.db"), full=True)
    default = sqlite_saver(os.path.join(d, "default.db"))
    stack.extend(s.conn.close for s in (full, full2, default))
    name_default = f"SqliteSaver default (synchronous={default.conn.execute('PRAGMA synchronous').fetchone()[0]})"
    pair = {"CairnSaver embedded": Putter(CairnSaver(ce), "d"), FULL: Putter(full, "d")}
    meds, cpus = interleaved(pair, rounds, per)
    print_interleaved(meds, cpus, 44)
    print("the method's own error: the same setting in both rows")
    meds, cpus = interleaved({name_default: Putter(default, "d"), FULL: Putter(full2, "d")}, rounds, per)
    print_interleaved(meds, cpus, 44)
    sqlite_own = statistics.median(meds[FULL])
    # Each put above follows the other saver's, and runs colder for it than
    # after one of its own kind: cairn's too, against a second workspace.
    os.makedirs(os.path.join(d, "emb2"))
    ce2 = cairn.connect(os.path.join(d, "emb2"), embedded=True)
    stack.append(ce2.close)
    own = {"CairnSaver embedded": Putter(CairnSaver(ce), "own"), "CairnSaver embedded, a second workspace": Putter(CairnSaver(ce2), "d")}
    meds, _ = interleaved(own, rounds, per)
    cairn_own = statistics.median(meds["CairnSaver embedded"])
    print(
        f"each saver after a put of its own kind: CairnSaver {cairn_own:.0f} us (against a second workspace), "
        f"SqliteSaver FULL {sqlite_own:.0f} us (the pair above): {cairn_own / sqlite_own:.2f}x"
    )

    # The commit's share, alone: a put's save timed by a wrapping client.
    timed = _Timed(ce)
    put = Putter(CairnSaver(timed), "t")  # type: ignore[arg-type]
    for _ in range(20):
        put()
    timed.wall = timed.cpu = 0.0
    timed.saves = 0
    t0 = time.perf_counter()
    for _ in range(rounds * per):
        put()
    whole = (time.perf_counter() - t0) / (rounds * per) * 1e6
    print(
        f"CairnSaver alone, {rounds * per} puts in a row: {timed.saves / (rounds * per):.2f} commits per put; "
        f"{whole:.0f} us mean wall a put (timers included), of which the commit (client.save) "
        f"{timed.wall / (rounds * per) * 1e6:.0f} us, {timed.cpu / (rounds * per) * 1e6:.0f} us CPU"
    )
    # A graph's puts come from one saver, with the graph's own work between
    # them: call by call above, each put follows the other saver's (cold
    # caches for both); here each saver makes a run of puts in a row, the
    # savers alternating run by run.
    block = max(per // 4, 1)
    print(f"\n## Durable put, runs of {block} puts per saver, savers alternating: {rounds} rounds of {per} puts each")
    meds, cpus = interleaved(pair, rounds, per, block=block)
    print_interleaved(meds, cpus, 44)


def _add_batch(state: list, writes: list) -> list:
    for w in writes:
        state = add_messages(state, w)
    return state


class DeltaState(TypedDict):
    messages: Annotated[list, DeltaChannel(_add_batch)]


def chat(turns: List[int], tmp: str, stack: List[Callable[[], None]]) -> None:
    print(f"\n## Chat graph invoke(durability='sync'): median us per turn around turn T")
    print(f"{'saver':44} {'T':>6} {'invoke':>9}")
    os.makedirs(os.path.join(tmp, "chat"))
    from langgraph.checkpoint.memory import InMemorySaver

    # InMemorySaver stores nothing durably and reads nothing from disk: its
    # growth from turn 10 to 1,000 is LangGraph's own, the floor of any saver.
    # With a DeltaChannel state a checkpoint holds the turn's writes, not
    # the whole list (a snapshot every 100 updates), the same floor again.
    os.makedirs(os.path.join(tmp, "chat-delta"))
    ce = cairn.connect(os.path.join(tmp, "chat-delta"), embedded=True)
    stack.append(ce.close)
    rows = [(n, s, MessagesState) for n, s in savers(os.path.join(tmp, "chat"), stack).items()]
    rows += [
        ("InMemorySaver (LangGraph's own cost)", InMemorySaver(), MessagesState),
        ("InMemorySaver, DeltaChannel state", InMemorySaver(), DeltaState),
        ("CairnSaver embedded, DeltaChannel state", CairnSaver(ce), DeltaState),
    ]
    for name, s, state in rows:
        if isinstance(s, Sync):
            continue  # the async saver needs ainvoke; its sync figures are above
        g = StateGraph(state)
        g.add_node("bot", lambda st: {"messages": [("ai", f"reply {len(st['messages'])}")]})
        g.add_edge(START, "bot")
        g.add_edge("bot", END)
        graph = g.compile(checkpointer=s)
        cfg = {"configurable": {"thread_id": "chat"}}
        done = 0
        for t in turns:
            while done < t - 5:
                graph.invoke({"messages": [("user", "hi")]}, cfg, durability="sync")
                done += 1
            us = med(lambda: graph.invoke({"messages": [("user", "hi")]}, cfg, durability="sync"), 5)
            done += 5
            print(f"{name:44} {done:>6} {us:>9.0f}", flush=True)


def agents(sizes: List[int], tmp: str, stack: List[Callable[[], None]]) -> None:
    from agents.memory.sqlite_session import SQLiteSession

    print(f"\n## Agents SDK session: median us per call at N items")
    print(f"{'session':44} {'N':>6} {'add_items':>10} {'get_items(10)':>14} {'pop_item':>9}")
    loop = asyncio.new_event_loop()
    os.makedirs(os.path.join(tmp, "ag-emb"))
    ce = cairn.connect(os.path.join(tmp, "ag-emb"), embedded=True)
    stack.append(ce.close)
    os.makedirs(os.path.join(tmp, "ag-dmn"))
    cd = cairn.connect(os.path.join(tmp, "ag-dmn"), daemon_args=DAEMON_ARGS)
    pid = cd.status()["daemon"]["pid"]
    stack.append(cd.close)
    stack.append(lambda: os.kill(pid, 15))
    sessions = {
        "CairnSession embedded": CairnSession("a", ce),
        "CairnSession daemon": CairnSession("a", cd),
        "SQLiteSession (file)": SQLiteSession("a", os.path.join(tmp, "agents.db")),
    }
    run = loop.run_until_complete
    for name, s in sessions.items():
        have = 0
        for n in sizes:
            while have < n:
                k = min(500, n - have)
                run(s.add_items([{"role": "user", "content": f"item {have + i}"} for i in range(k)]))
                have += k
            a = med(lambda: run(s.add_items([{"role": "user", "content": "x"}])), 20)
            g = med(lambda: run(s.get_items(limit=10)), 50)
            p = med(lambda: run(s.pop_item()), 20)
            print(f"{name:44} {n:>6} {a:>10.0f} {g:>14.0f} {p:>9.0f}", flush=True)
    loop.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--parts", default="checkpoints,durable,chat,agents", help="comma-separated subset")
    args = ap.parse_args()
    sc = lambda xs: sorted({max(int(x * args.scale), 10) for x in xs})  # noqa: E731
    tmp = tempfile.mkdtemp(prefix="cairn-bench-ad-")
    stack: List[Callable[[], None]] = []
    try:
        print(f"cairn {cairn.version()}; python {sys.version.split()[0]}; sqlite {sqlite3.sqlite_version}")
        parts = args.parts.split(",")
        if "checkpoints" in parts:
            checkpoints(sc([10, 1000, 10000]), tmp, stack)
        if "durable" in parts:
            durable(5, max(int(200 * args.scale), 20), tmp, stack)
        if "chat" in parts:
            chat(sc([10, 150, 1000]), tmp, stack)
        if "agents" in parts:
            agents(sc([100, 20000]), tmp, stack)
    finally:
        for f in reversed(stack):
            try:
                f()
            except Exception:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
