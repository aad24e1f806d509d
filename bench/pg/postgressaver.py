"""Per-turn cost of saving an agent's turn, on one PostgreSQL server:
cairn (connect(store=URL): one save appending the turn's message, through
cairnd and embedded, i.e. pgstore in this process as PostgresSaver is)
against LangGraph's PostgresSaver (langgraph-checkpoint-postgres
with psycopg, autocommit connection, setup() done: one put() per turn of a
checkpoint whose "messages" channel holds the conversation so far, as a
messages-state graph checkpoints it). 1,000 turns each; prints the median
per-turn latency over all turns and over the last 100.

usage: postgressaver.py URL [TURNS]   (run by `make bench-pg-saver`)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid

import cairn
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Connection
from psycopg.rows import dict_row

MSG = {"role": "assistant", "content": "x" * 180}


def med_us(xs):
    return statistics.median(xs) * 1e6


def bench_cairn(url, turns, embedded=False):
    with tempfile.TemporaryDirectory(prefix="cairn-pgsaver-") as ws:
        if embedded:
            c = cairn.connect(ws, store=url, embedded=True)
        else:
            c = cairn.connect(ws, store=url, daemon_args=["--idle-timeout=30s"])
        try:
            sid = "s-" + uuid.uuid4().hex[:8]
            c.save(sid, change={"append_messages": []})
            lat = []
            for _ in range(turns):
                t = time.perf_counter()
                c.save(sid, change={"append_messages": [MSG]})
                lat.append(time.perf_counter() - t)
            return lat
        finally:
            c.close()


def bench_saver(url, turns):
    # A database of its own on the same server: its tables (checkpoints
    # among them) are not cairn's.
    name = "lgsaver_" + uuid.uuid4().hex[:8]
    with Connection.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = url.replace(url.rsplit("/", 1)[1].split("?")[0] + "?", name + "?", 1)
    with Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        config = {"configurable": {"thread_id": "t-" + uuid.uuid4().hex[:8], "checkpoint_ns": ""}}
        cp = empty_checkpoint()
        messages = []
        lat = []
        for step in range(turns):
            messages = messages + [MSG]
            cp = dict(cp)
            cp["id"] = str(uuid.uuid1())
            cp["channel_values"] = {"messages": messages}
            cp["channel_versions"] = {"messages": step + 1}
            t = time.perf_counter()
            config = saver.put(config, cp, {"source": "loop", "step": step, "parents": {}}, {"messages": step + 1})
            lat.append(time.perf_counter() - t)
        return lat


def main():
    url = sys.argv[1]
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rows = []
    for name, fn in (
        ("cairn save through cairnd (pgstore)", bench_cairn),
        ("cairn save embedded (pgstore in process)", lambda u, n: bench_cairn(u, n, embedded=True)),
        ("LangGraph PostgresSaver.put", bench_saver),
    ):
        lat = fn(url, turns)
        rows.append((name, med_us(lat), med_us(lat[-100:])))
    print(f"| per turn, {turns} turns | median | median of the last 100 |")
    print("|---|---|---|")
    for name, a, b in rows:
        print(f"| {name} | {a:.0f} µs | {b:.0f} µs |")
    saver = rows[-1]
    for name, a, b in rows[:-1]:
        print(f"| PostgresSaver / {name.split(' (')[0]} | {saver[1] / a:.1f}× | {saver[2] / b:.1f}× |")


if __name__ == "__main__":
    main()
