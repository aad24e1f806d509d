#!/usr/bin/env python3
"""The agent workload against SQLite: per turn, resume, open and concurrency.

An agent's turn is two messages (about 2 KB and 6 KB of JSON), its usage
and a run checkpoint, saved durably before the next turn. Five contestants
run it lockstep in one process, turn by turn, their order rotated each turn
so that they share the disk's conditions:
  sqlite    Python sqlite3, WAL, synchronous=FULL, one row per message; one
            transaction per turn: 2 message rows, a checkpoint row and the
            run's usage (an UPDATE)
  embedded  cairn through the Python binding, embedded: one checkpoint call
            carrying the messages (bench/bindings/python_turn.py's turn)
  daemon    the same call through cairnd
  floor     an 8 KiB append + fdatasync to a file in the same directory
  overwrite an 8 KiB write + fdatasync into zeros written and fdatasync'd
            beforehand (32 MiB, then from the start again): the disk's
            floor for a commit into cairn's zeros ahead, and for SQLite's
            WAL once it is reused; no file size changes, so no journal
Per contestant: the per-turn median and p99, the ratios to SQLite and to
the floor, and CPU per turn (this process's CPU time across the call; for
the daemon plus cairnd's own, from /proc/<pid>/stat, over the whole run).

Then, on the sessions that run wrote:
  resume all   a fresh embedded connect + every message into Python objects
               (list(iter_messages()), pages of 4 MiB) | connect + SELECT of every row + json.loads
               (resume_session(drift off, processes off) beside it, as info)
  tail 20      messages(tail=20) | ORDER BY id DESC LIMIT 20 + json.loads
  open         connect(embedded=True) + one summary() on a workspace holding
               --open-mib MiB of history (built once, kept under
               build/bench-agent/) | sqlite3.connect + one row
  concurrency  1, 8, 32 agent processes, each on its own session, through
               one cairnd | each with its own connection to one shared
               SQLite file (busy_timeout, BEGIN IMMEDIATE); turns/s in all
               over --agent-turns turns per process

Run after `make lib bins`:
    python3 bench/agent/agent_bench.py              # a quick smoke run
    python3 bench/agent/agent_bench.py --full       # 1,000 and 10,000 turns
Flags choose each part's size (--turns 1000,10000, --open-mib 1024,
--agents 1,8,32, --agent-turns 200). Everything but the cached open
workspace is created under one temp dir (--dir), removed at the end.
Missed targets are reported, not an error.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "bindings"))
from python_bench import stop  # noqa: E402
from python_turn import turn_messages  # noqa: E402

SID = "agent"
# LOCKSTEP names the per-turn part's contestants, in the order of their
# first turn. Each runs in this one process, so each leaves its traces (a
# runtime's threads still running, caches) on the next one's turn:
# --lockstep leaves some out.
LOCKSTEP = ("sqlite", "embedded", "daemon", "floor", "overwrite")
_enc = json.JSONEncoder(separators=(",", ":")).encode
CLK_TCK = os.sysconf("SC_CLK_TCK")
LOAD_HANGS = [0]  # agent processes restarted because libcairn's load hung


def log(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def usage_of(i: int) -> Dict[str, Any]:
    return {"input_tokens": 1000 * i, "output_tokens": 200 * i, "total_tokens": 1200 * i, "cost": 0.001 * i}


def state_of(i: int) -> Dict[str, Any]:
    return {"step": "after_tool", "turn": i}


def pct(samples: List[int], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * q))] / 1000


def proc_cpu_s(pid: int) -> float:
    """utime + stime of process pid, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


# -- the contestants ---------------------------------------------------------


SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, session TEXT NOT NULL, turn INTEGER, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS messages_session ON messages (session, id);
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, session TEXT, usage TEXT, tool_calls_count INTEGER, turn INTEGER);
CREATE TABLE IF NOT EXISTS checkpoints (run_id TEXT NOT NULL, turn INTEGER NOT NULL, state TEXT, usage TEXT,
                                        tool_calls_count INTEGER, at REAL, PRIMARY KEY (run_id, turn));
"""


def sqlite_open(path: str, busy_ms: int = 0) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, timeout=busy_ms / 1000 if busy_ms else 5.0)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    if busy_ms:
        db.execute(f"PRAGMA busy_timeout={busy_ms}")
    return db


def create_schema(ex: Callable[[str], Any]) -> None:
    """Runs SCHEMA's statements through ex (a connection's execute)."""
    for stmt in SCHEMA.strip().split(";"):
        if stmt.strip():
            ex(stmt)


class SQLiteAgent:
    def __init__(self, path: str, sid: str, busy_ms: int = 0) -> None:
        self.db = sqlite_open(path, busy_ms)
        self.sid = sid
        self.run_id = f"run-{sid}"
        ex = self.db.execute
        ex("BEGIN IMMEDIATE")
        create_schema(ex)
        ex("INSERT INTO messages (session, turn, body) VALUES (?,?,?)", (sid, 0, _enc({"role": "system", "content": "you are an agent"})))
        ex("INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?)", (self.run_id, sid, "{}", 0, 0))
        ex("COMMIT")

    def turn(self, i: int, msgs: List[Any]) -> None:
        ex = self.db.execute
        u = _enc(usage_of(i))
        ex("BEGIN IMMEDIATE")
        try:
            ex("INSERT INTO messages (session, turn, body) VALUES (?,?,?)", (self.sid, i, _enc(msgs[0])))
            ex("INSERT INTO messages (session, turn, body) VALUES (?,?,?)", (self.sid, i, _enc(msgs[1])))
            ex("INSERT INTO checkpoints VALUES (?,?,?,?,?,?)", (self.run_id, i, _enc(state_of(i)), u, i, time.time()))
            ex("UPDATE runs SET usage=?, tool_calls_count=?, turn=? WHERE run_id=?", (u, i, i, self.run_id))
            ex("COMMIT")
        except BaseException:
            ex("ROLLBACK")
            raise

    def close(self) -> None:
        self.db.close()


class CairnAgent:
    def __init__(self, c: Any, sid: str) -> None:
        self.c = c
        c.save(sid, change={"append_messages": [{"role": "system", "content": "you are an agent"}]})
        self.run_id = c.begin_run(sid)["run_id"]

    def turn(self, i: int, msgs: List[Any]) -> None:
        self.c.checkpoint(self.run_id, i, msgs, usage=usage_of(i), tool_calls_count=i, state=state_of(i))


class Floor:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.block = b"\x5a" * 8192

    def turn(self, i: int, msgs: List[Any]) -> None:
        os.write(self.fd, self.block)
        os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class OverwriteFloor(Floor):
    SIZE = 32 << 20

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        self.block = b"\x5a" * 8192
        zeros = bytes(1 << 20)
        for _ in range(self.SIZE >> 20):
            os.write(self.fd, zeros)
        os.fsync(self.fd)
        self.off = 0

    def turn(self, i: int, msgs: List[Any]) -> None:
        os.pwrite(self.fd, self.block, self.off)
        os.fdatasync(self.fd)
        self.off = (self.off + len(self.block)) % self.SIZE


# -- per turn ----------------------------------------------------------------


def lockstep(cairn: Any, root: str, turns: int, daemon: str, names: List[str]) -> Dict[str, Any]:
    """Runs turns turns of the contestants named (of the five), interleaved;
    returns their samples and CPU, and leaves the workspaces and the SQLite
    file in root for the resume measures."""
    d = os.path.join(root, f"t{turns}")
    ws_e, ws_d = os.path.join(d, "ws-embedded"), os.path.join(d, "ws-daemon")
    os.makedirs(ws_e)
    os.makedirs(ws_d)
    db_path = os.path.join(d, "agent.sqlite")
    ce = cairn.connect(ws_e, embedded=True)
    cd = cairn.connect(ws_d, daemon=daemon, daemon_args=["--idle-timeout=600s"])
    pid = cd.status()["daemon"]["pid"]
    sq = SQLiteAgent(db_path, SID)
    fl = Floor(os.path.join(d, "floor.bin"))
    ow = OverwriteFloor(os.path.join(d, "overwrite.bin"))
    agents: List[Tuple[str, Any]] = [("sqlite", sq), ("embedded", CairnAgent(ce, SID)), ("daemon", CairnAgent(cd, SID)), ("floor", fl),
                                     ("overwrite", ow)]
    agents = [(n, x) for n, x in agents if n in names]
    names = [n for n, _ in agents]
    wall: Dict[str, List[int]] = {n: [] for n in names}
    cpu: Dict[str, int] = {n: 0 for n in names}
    clock, pclock = time.perf_counter_ns, time.process_time_ns
    try:
        d_cpu0 = proc_cpu_s(pid)
        t_start = time.monotonic()
        for i in range(1, turns + 1):
            msgs = turn_messages(i)
            k = i % len(agents)
            for name, agent in agents[k:] + agents[:k]:
                c0 = pclock()
                t0 = clock()
                agent.turn(i, msgs)
                t1 = clock()
                cpu[name] += pclock() - c0
                wall[name].append(t1 - t0)
            if i % 1000 == 0:
                log(f"  {turns} turns: {i} done ({time.monotonic() - t_start:.0f}s, {load()})")
        daemon_cpu = proc_cpu_s(pid) - d_cpu0
        sizes = {"sqlite": sum(os.path.getsize(p) for p in (db_path, db_path + "-wal") if os.path.exists(p)),
                 "embedded": dir_bytes(os.path.join(ws_e, ".cairn")), "daemon": dir_bytes(os.path.join(ws_d, ".cairn"))}
    finally:
        sq.close()
        fl.close()
        ow.close()
        ce.close()
        cd.close()
        stop(pid, timeout=20.0)
    out: Dict[str, Any] = {"turns": turns, "rows": {}, "dir": d, "ws_embedded": ws_e, "ws_daemon": ws_d, "db": db_path, "sizes": sizes}
    for n in names:
        row = {"median_us": pct(wall[n], 0.5), "p99_us": pct(wall[n], 0.99), "cpu_us": cpu[n] / turns / 1000}
        if n == "daemon":
            row["client_cpu_us"] = row["cpu_us"]
            row["daemon_cpu_us"] = daemon_cpu * 1e6 / turns
            row["cpu_us"] += row["daemon_cpu_us"]
        out["rows"][n] = row
    return out


# -- resume ------------------------------------------------------------------


def timed(fn: Callable[[], Any], reps: int, warmup: int = 1) -> Dict[str, float]:
    for _ in range(warmup):
        fn()
    s: List[int] = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        fn()
        s.append(time.perf_counter_ns() - t)
    return {"median_us": pct(s, 0.5), "p99_us": pct(s, 0.99), "n": reps}


def timed_pair(fa: Callable[[], Any], fb: Callable[[], Any], reps: int, warmup: int = 1) -> Tuple[Dict[str, float], Dict[str, float]]:
    """timed for two contestants, sample by sample, which goes first
    alternating."""
    for _ in range(warmup):
        fa()
        fb()
    sa: List[int] = []
    sb: List[int] = []
    for i in range(reps):
        for fn, out in ((fa, sa), (fb, sb)) if i % 2 == 0 else ((fb, sb), (fa, sa)):
            t = time.perf_counter_ns()
            fn()
            out.append(time.perf_counter_ns() - t)
    return ({"median_us": pct(sa, 0.5), "p99_us": pct(sa, 0.99), "n": reps},
            {"median_us": pct(sb, 0.5), "p99_us": pct(sb, 0.99), "n": reps})


def all_messages(c: Any) -> List[Any]:
    if hasattr(c, "iter_messages"):
        return list(c.iter_messages(SID))  # the binding's own paged read
    out: List[Any] = []
    page = c.messages(SID)
    out.extend(page["messages"])
    while page["more"]:
        page = c.messages(SID, from_=page["next"])
        out.extend(page["messages"])
    return out


def resume_phase(cairn: Any, lk: Dict[str, Any], reps: int) -> Dict[str, Dict[str, float]]:
    ws, db_path = lk["ws_embedded"], lk["db"]
    expect = 2 * lk["turns"] + 1
    res: Dict[str, Dict[str, float]] = {}

    def cairn_all() -> None:
        c = cairn.connect(ws, embedded=True)
        try:
            msgs = all_messages(c)
        finally:
            c.close()
        assert len(msgs) == expect, (len(msgs), expect)

    def cairn_resume() -> None:
        c = cairn.connect(ws, embedded=True)
        try:
            r = c.resume_session(SID, drift=False, processes=False)
        finally:
            c.close()
        assert len(r["snapshot"]["messages"]) == expect

    loads = json.loads

    def sqlite_all() -> None:
        db = sqlite_open(db_path)
        try:
            msgs = [loads(r[0]) for r in db.execute("SELECT body FROM messages WHERE session=? ORDER BY id", (SID,))]
        finally:
            db.close()
        assert len(msgs) == expect, (len(msgs), expect)

    res["resume_all/embedded"] = timed(cairn_all, reps)
    res["resume_all/sqlite"] = timed(sqlite_all, reps)
    try:
        res["resume_session/embedded"] = timed(cairn_resume, reps)
    except cairn.TooLargeError:
        pass  # over the reply size limit (64 MiB): only the paged read answers

    c = cairn.connect(ws, embedded=True)
    db = sqlite_open(db_path)
    try:
        # Interleaved, order alternating, as the lockstep turns are: run one
        # after the other, the second would find the interpreter's
        # allocator (and the CPU's caches) warmed by the first.
        res["tail20/embedded"], res["tail20/sqlite"] = timed_pair(
            lambda: c.messages(SID, tail=20),
            lambda: [loads(r[0]) for r in reversed(db.execute(
                "SELECT body FROM messages WHERE session=? ORDER BY id DESC LIMIT 20", (SID,)).fetchall())],
            reps * 50, 10)
    finally:
        c.close()
        db.close()
    return res


def resume_daemon(cairn: Any, lk: Dict[str, Any], daemon: str, reps: int) -> Dict[str, Dict[str, float]]:
    """The daemon's resume of the session it wrote: cairnd started (not
    timed), then a connect + every message, and tail 20."""
    ws = lk["ws_daemon"]
    c0 = cairn.connect(ws, daemon=daemon, daemon_args=["--idle-timeout=600s"])
    pid = c0.status()["daemon"]["pid"]
    res: Dict[str, Dict[str, float]] = {}
    try:
        def one() -> None:
            c = cairn.connect(ws, daemon=daemon, auto_start=False)
            try:
                all_messages(c)
            finally:
                c.close()

        res["resume_all/daemon"] = timed(one, reps)
        res["tail20/daemon"] = timed(lambda: c0.messages(SID, tail=20), reps * 50, 10)
    finally:
        c0.close()
        stop(pid, timeout=20.0)
    return res


# -- open --------------------------------------------------------------------


def build_open_workspace(cairn: Any, mib: int) -> Tuple[str, str]:
    """A workspace holding about mib MiB of agent history in 64 sessions,
    each written turn after turn in batches of 25 turns (50 messages) per
    commit, and the SQLite file of the same rows; built once under
    build/bench-agent/open-<mib>/ and reused."""
    base = REPO / "build" / "bench-agent" / f"open-{mib}"
    ws, db_path, done = base / "ws", base / "agent.sqlite", base / "done"
    if done.exists():
        return str(ws), str(db_path)
    shutil.rmtree(base, ignore_errors=True)
    ws.mkdir(parents=True)
    sessions, per_commit = 64, 25
    per_turn = sum(len(_enc(m)) for m in turn_messages(1))
    turns_per_session = max(per_commit, (mib << 20) // per_turn // sessions)
    t0 = time.monotonic()
    c = cairn.connect(str(ws), embedded=True)
    db = sqlite_open(str(db_path))
    create_schema(db.execute)
    try:
        for s in range(sessions):
            sid = f"s{s:03d}"
            for lo in range(1, turns_per_session + 1, per_commit):
                msgs = [m for i in range(lo, min(turns_per_session + 1, lo + per_commit)) for m in turn_messages(i)]
                c.save(sid, change={"append_messages": msgs})
                db.execute("BEGIN")
                db.executemany("INSERT INTO messages (session, turn, body) VALUES (?,?,?)",
                               [(sid, lo + j // 2, _enc(m)) for j, m in enumerate(msgs)])
                db.execute("COMMIT")
            if s % 8 == 7:
                log(f"  open workspace: {s + 1}/{sessions} sessions ({time.monotonic() - t0:.0f}s, {load()})")
    finally:
        c.close()
        db.close()
    done.write_text(json.dumps({"sessions": sessions, "turns_per_session": turns_per_session}))
    return str(ws), str(db_path)


def open_phase(cairn: Any, mib: int, reps: int) -> Dict[str, Any]:
    ws, db_path = build_open_workspace(cairn, mib)
    stored = dir_bytes(os.path.join(ws, ".cairn"))

    def cairn_open_only() -> None:
        t = time.perf_counter_ns()
        c = cairn.connect(ws, embedded=True)
        c.summary("s000")
        opened.append(time.perf_counter_ns() - t)
        c.close()

    opened: List[int] = []

    def sqlite_open1() -> None:
        db = sqlite3.connect(db_path, isolation_level=None)
        try:
            db.execute("SELECT body FROM messages WHERE id=1").fetchone()
        finally:
            db.close()

    for _ in range(reps + 1):
        cairn_open_only()
    opened = opened[1:]
    r = {"stored_bytes": stored, "sqlite_bytes": os.path.getsize(db_path),
         "open/embedded": {"median_us": pct(opened, 0.5), "p99_us": pct(opened, 0.99), "n": len(opened)},
         "open/sqlite": timed(sqlite_open1, reps * 4)}
    return r


# -- concurrency -------------------------------------------------------------


def shared_sqlite(path: str) -> str:
    """Creates the SQLite file at path that agent processes share (SCHEMA)
    and returns path."""
    db = sqlite_open(path)
    create_schema(db.execute)
    db.close()
    return path


def run_turns(agent: Any, turns: int, after: Optional[Callable[[], Dict[str, Any]]] = None) -> None:
    """The body of one agent process (see fleet): makes its turns'
    messages, says ready, waits for a line on stdin, runs the turns and
    prints a JSON line of its start, end (time.monotonic), CPU
    (process_time) and median and p99 turn (us), with after()'s items."""
    msgs = [turn_messages(i) for i in range(1, turns + 1)]
    samples = [0] * turns
    clock = time.perf_counter_ns
    print("ready", flush=True)
    sys.stdin.readline()
    t0, c0 = time.monotonic(), time.process_time()
    for i in range(1, turns + 1):
        s = clock()
        agent.turn(i, msgs[i - 1])
        samples[i - 1] = clock() - s
    out = {"start": t0, "end": time.monotonic(), "cpu_s": time.process_time() - c0,
           "median_us": pct(samples, 0.5), "p99_us": pct(samples, 0.99)}
    if after is not None:
        out.update(after())
    print(json.dumps(out), flush=True)


def fleet(argv: Callable[[int], List[str]], n: int, pid: int = 0,
          env: Optional[Dict[str, str]] = None) -> Tuple[List[Dict[str, Any]], float]:
    """Starts n agent processes (argv(k): the k-th's command, a script
    whose body is run_turns), waits until each is ready, starts them
    together and returns each one's JSON line and the CPU seconds process
    pid (0: none) spent meanwhile. env: the agent processes' environment
    (default: this one's). A process not ready within 30 s is
    killed and started again: libcairn's load can deadlock (its constructor
    and the Go runtime's init both ask for the library's path, one holding
    the loader's lock); LOAD_HANGS counts these restarts."""
    procs: List[subprocess.Popen] = []

    def start(k: int) -> subprocess.Popen:
        return subprocess.Popen(argv(k), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    try:
        for k in range(n):
            procs.append(start(k))
        for k in range(n):
            for attempt in range(4):
                p = procs[k]
                ready, _, _ = select.select([p.stdout], [], [], 30)
                line = p.stdout.readline() if ready else ""
                if line.strip() == "ready":
                    break
                p.kill()
                p.wait()
                if attempt == 3:
                    raise RuntimeError(f"agent process {k} did not start: {line!r}")
                LOAD_HANGS[0] += 1
                log(f"  agent process {k} not ready after 30 s (libcairn load hang?): restarted")
                procs[k] = start(k)
        cpu0 = proc_cpu_s(pid) if pid else 0.0
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in procs:
            outs.append(json.loads(p.stdout.readline()))
            p.wait(timeout=600)
            if p.returncode:
                raise RuntimeError(f"agent process exited {p.returncode}")
        return outs, (proc_cpu_s(pid) - cpu0 if pid else 0.0)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def rate(outs: List[Dict[str, Any]], total: int) -> float:
    """Turns per second of total turns made by the agent processes whose
    JSON lines are outs, from the first one's start to the last one's end."""
    return total / (max(o["end"] for o in outs) - min(o["start"] for o in outs))


def worker(a: argparse.Namespace) -> None:
    """One agent process of the concurrency phase (fleet)."""
    sid = a.worker_session
    if a.worker == "daemon":
        sys.path.insert(0, str(REPO / "bindings" / "python"))
        import cairn

        c = cairn.connect(a.worker_target, auto_start=False)
        run_turns(CairnAgent(c, sid), a.agent_turns)
        c.close()
    else:
        agent = SQLiteAgent(a.worker_target, sid, busy_ms=60_000)
        run_turns(agent, a.agent_turns)
        agent.close()


def concurrency(cairn: Any, root: str, kind: str, n: int, turns: int, daemon: str,
                argv: Optional[Callable[[str, str], List[str]]] = None,
                env: Optional[Dict[str, str]] = None) -> Dict[str, float]:
    """n agent processes of turns turns each, on their own sessions, all
    started together: turns/s in total and CPU us per turn (the agents'
    and the daemon's). kind "sqlite" shares one SQLite file; any other, one
    cairnd. argv(target, sid): an agent process's command (default: this
    script's worker of kind); env: their environment (fleet)."""
    d = tempfile.mkdtemp(prefix=f"conc-{kind}-{n}-", dir=root)
    pid = 0
    try:
        if kind != "sqlite":
            c0 = cairn.connect(d, daemon=daemon, daemon_args=["--idle-timeout=600s"])
            pid = c0.status()["daemon"]["pid"]
            target = d
        else:
            target = shared_sqlite(os.path.join(d, "shared.sqlite"))
        if argv is None:
            argv = lambda target, sid: [sys.executable, __file__, "--worker", kind, "--worker-target", target,  # noqa: E731
                                        "--worker-session", sid, "--agent-turns", str(turns)]
        outs, d_cpu = fleet(lambda k: argv(target, f"agent-{k:02d}"), n, pid, env)
    finally:
        if pid:
            c0.close()
            stop(pid, timeout=20.0)
        shutil.rmtree(d, ignore_errors=True)
    total = n * turns
    tps = rate(outs, total)
    return {"turns_per_s": tps, "span_s": total / tps,
            "cpu_us": (sum(o["cpu_s"] for o in outs) + d_cpu) * 1e6 / total,
            "agent_cpu_us": sum(o["cpu_s"] for o in outs) * 1e6 / total,
            "median_us": statistics.median(o["median_us"] for o in outs),
            "outs": outs}


# -- report ------------------------------------------------------------------


def report(a: argparse.Namespace, per_turn: List[Dict[str, Any]], resume: Dict[str, Any], opened: Optional[Dict[str, Any]],
           conc: Dict[Tuple[str, int], Dict[str, float]], start_load: str) -> None:
    print(f"# cairn agent workload vs SQLite; {start_load} at start, {load()} at the end")
    print(f"# {os.cpu_count()} CPUs; turns {a.turns}; open {a.open_mib} MiB; agents {a.agents} x {a.agent_turns} turns")
    print()
    print(f"{'per turn':10} {'turns':>6} {'median us':>10} {'p99 us':>10} {'x sqlite':>9} {'x floor':>8} {'cpu us':>8}  target")
    targets = {"embedded": ("<= 0.8x sqlite", 0.8), "daemon": ("<= 1.0x sqlite", 1.0)}
    verdicts: List[str] = []
    for lk in per_turn:
        rows = lk["rows"]
        sq, fl = rows["sqlite"]["median_us"], rows["floor"]["median_us"]
        for n in (n for n in LOCKSTEP if n in rows):
            r = rows[n]
            cpu = f"{r['cpu_us']:8.0f}"
            t = ""
            if n in targets:
                ratio = r["median_us"] / sq
                t = f"{targets[n][0]}: {'PASS' if ratio <= targets[n][1] else 'MISS'}"
            print(f"{n:10} {lk['turns']:6d} {r['median_us']:10.0f} {r['p99_us']:10.0f} {r['median_us'] / sq:9.2f} "
                  f"{r['median_us'] / fl:8.2f} {cpu}  {t}")
        d = rows.get("daemon")
        if d:
            print(f"{'':10} {'':6} daemon cpu = client {d['client_cpu_us']:.0f} + cairnd {d['daemon_cpu_us']:.0f} us/turn")
        sz = lk["sizes"]
        print(f"{'':10} {'':6} on disk after the run: sqlite {sz['sqlite'] / 1e6:.1f} MB, cairn {sz['embedded'] / 1e6:.1f} MB "
              f"({sz['sqlite'] / lk['turns'] / 1e3:.1f} / {sz['embedded'] / lk['turns'] / 1e3:.1f} KB per turn)")
    print()
    if resume:
        print(f"{'resume':24} {'median ms':>10} {'p99 ms':>10} {'x sqlite':>9}  target   ({resume['turns']} turns, "
              f"{2 * resume['turns'] + 1} messages)")
        for key, base, tgt in (("resume_all/embedded", "resume_all/sqlite", 1.2), ("resume_all/daemon", "resume_all/sqlite", None),
                               ("resume_session/embedded", "resume_all/sqlite", None), ("resume_all/sqlite", None, None),
                               ("tail20/embedded", "tail20/sqlite", 1.0), ("tail20/daemon", "tail20/sqlite", None),
                               ("tail20/sqlite", None, None)):
            r = resume.get(key)
            if not r:
                continue
            ratio = r["median_us"] / resume[base]["median_us"] if base else 1.0
            t = f"<= {tgt}x: {'PASS' if ratio <= tgt else 'MISS'}" if tgt else ""
            print(f"{key:24} {r['median_us'] / 1000:10.3f} {r['p99_us'] / 1000:10.3f} {ratio:9.2f}  {t}")
        print()
    if opened:
        e, s = opened["open/embedded"], opened["open/sqlite"]
        ok = e["median_us"] <= 20_000
        print(f"open of {opened['stored_bytes'] / (1 << 30):.2f} GiB of cairn history ({opened['sqlite_bytes'] / (1 << 30):.2f} GiB sqlite):")
        print(f"{'open/embedded':24} {e['median_us'] / 1000:10.3f} {e['p99_us'] / 1000:10.3f} {e['median_us'] / s['median_us']:9.1f}  "
              f"<= 20 ms: {'PASS' if ok else 'MISS'}")
        print(f"{'open/sqlite':24} {s['median_us'] / 1000:10.3f} {s['p99_us'] / 1000:10.3f} {1.0:9.2f}")
        print()
    if conc:
        print(f"{'agents':>6} {'daemon turns/s':>15} {'sqlite turns/s':>15} {'x sqlite':>9} {'x own 1':>8} "
              f"{'cpu us d/s':>12}  target")
        one = conc.get(("daemon", 1))
        for n in a.agents:
            dd, ss = conc.get(("daemon", n)), conc.get(("sqlite", n))
            if not dd or not ss:
                continue
            xs = dd["turns_per_s"] / ss["turns_per_s"]
            xo = dd["turns_per_s"] / one["turns_per_s"] if one else float("nan")
            t = ""
            if n == 32:
                t = f">= 1.5x sqlite: {'PASS' if xs >= 1.5 else 'MISS'}, >= 3x own 1: {'PASS' if xo >= 3 else 'MISS'}"
            print(f"{n:6d} {dd['turns_per_s']:15.0f} {ss['turns_per_s']:15.0f} {xs:9.2f} {xo:8.2f} "
                  f"{dd['cpu_us']:6.0f}/{ss['cpu_us']:<5.0f}  {t}")
        if LOAD_HANGS[0]:
            print(f"# {LOAD_HANGS[0]} agent process(es) hung while loading libcairn and were restarted before the start")
    del verdicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="1,000 and 10,000 turns, 1 GiB open, 1/8/32 agents x 200 turns")
    ap.add_argument("--turns", default="300", help="comma-separated lockstep sizes (default 300; --full: 1000,10000)")
    ap.add_argument("--open-mib", type=int, default=None, help="MiB of history in the open workspace (default 64; --full: 1024; 0 skips)")
    ap.add_argument("--agents", default=None, help="agent process counts (default 1,8; --full: 1,8,32)")
    ap.add_argument("--agent-turns", type=int, default=None, help="turns per agent process (default 50; --full: 200)")
    ap.add_argument("--reps", type=int, default=None, help="samples of each resume (tail: x50) and open (default 3; --full: 5)")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: turns,resume,open,concurrency")
    ap.add_argument("--lockstep", default=",".join(LOCKSTEP),
                    help="the per-turn part's contestants, of " + ",".join(LOCKSTEP) + " (sqlite and floor always run)")
    ap.add_argument("--dir", default=None, help="parent of the temp dir (default: the system's)")
    ap.add_argument("--daemon", default=os.environ.get("CAIRN_DAEMON") or str(REPO / "build" / "cairnd"))
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--worker", choices=["daemon", "sqlite"], help=argparse.SUPPRESS)
    ap.add_argument("--worker-target", help=argparse.SUPPRESS)
    ap.add_argument("--worker-session", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a)
        return
    if a.full and a.turns == "300":
        a.turns = "1000,10000"
    a.turns = [int(x) for x in str(a.turns).split(",") if x]
    a.open_mib = a.open_mib if a.open_mib is not None else (1024 if a.full else 64)
    a.agents = [int(x) for x in (a.agents or ("1,8,32" if a.full else "1,8")).split(",") if x]
    a.agent_turns = a.agent_turns or (200 if a.full else 50)
    a.reps = a.reps or (5 if a.full else 3)
    skip = set(filter(None, a.skip.split(",")))
    asked = a.lockstep.split(",")
    names = [n for n in LOCKSTEP if n in asked or n in ("sqlite", "floor")]
    if set(asked) - set(LOCKSTEP):
        ap.error(f"--lockstep: not a contestant: {a.lockstep}")
    os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import cairn

    start_load = load()
    root = tempfile.mkdtemp(prefix="cairn-agent-", dir=a.dir)
    per_turn: List[Dict[str, Any]] = []
    resume: Dict[str, Any] = {}
    opened = None
    conc: Dict[Tuple[str, int], Dict[str, float]] = {}
    try:
        if "turns" not in skip:
            for t in a.turns:
                t0 = time.monotonic()
                lk = lockstep(cairn, root, t, a.daemon, names)
                per_turn.append(lk)
                log(f"lockstep {t} turns in {time.monotonic() - t0:.0f}s ({load()})")
                if "resume" not in skip and t == max(a.turns) and "embedded" in names:
                    resume = {"turns": t, **resume_phase(cairn, lk, a.reps)}
                    if "daemon" in names:
                        resume.update(resume_daemon(cairn, lk, a.daemon, a.reps))
                    log(f"resume measured ({load()})")
                shutil.rmtree(lk["dir"], ignore_errors=True)
        if "open" not in skip and a.open_mib:
            t0 = time.monotonic()
            opened = open_phase(cairn, a.open_mib, a.reps)
            log(f"open measured in {time.monotonic() - t0:.0f}s ({load()})")
        if "concurrency" not in skip:
            for n in a.agents:
                for kind in ("sqlite", "daemon"):
                    conc[(kind, n)] = concurrency(cairn, root, kind, n, a.agent_turns, a.daemon)
                    del conc[(kind, n)]["outs"]
                    log(f"concurrency {kind} x{n}: {conc[(kind, n)]['turns_per_s']:.0f} turns/s ({load()})")
        report(a, per_turn, resume, opened, conc, start_load)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"per_turn": [{k: v for k, v in lk.items() if k in ("turns", "rows", "sizes")} for lk in per_turn],
                           "resume": resume, "open": opened,
                           "concurrency": [{"kind": k, "agents": n, **v} for (k, n), v in conc.items()]}, f, indent=1)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
