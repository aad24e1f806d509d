"""cairn.agents.CairnSession against the OpenAI Agents SDK Session
semantics, embedded and through the daemon, and a two-turn Runner.run with
a stub model whose history survives a change of process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

import cairn
from conftest import DAEMON, run

# Imported, not importorskip: a missing SDK is a failure.
from agents.memory.session import Session, SessionABC

from cairn.agents import CairnSession

HERE = Path(__file__).resolve().parent


def item(i: int) -> dict:
    return {"role": "user", "content": f"m{i}"}


def test_is_a_session(client: cairn.Client) -> None:
    s = CairnSession("a", client)
    assert isinstance(s, Session) and isinstance(s, SessionABC)


def test_order_limit_pop_clear(client: cairn.Client) -> None:
    async def go() -> None:
        s = CairnSession("chat", client)
        assert await s.get_items() == []
        assert await s.pop_item() is None
        await s.add_items([item(0), item(1)])
        await s.add_items([item(2)])
        await s.add_items([])
        assert await s.get_items() == [item(0), item(1), item(2)]
        assert await s.get_items(limit=2) == [item(1), item(2)]
        assert await s.get_items(limit=10) == [item(0), item(1), item(2)]
        assert await s.get_items(limit=0) == []
        assert await s.pop_item() == item(2)
        assert await s.get_items() == [item(0), item(1)]
        # Another session's items are its own.
        other = CairnSession("other", client)
        await other.add_items([item(9)])
        await s.clear_session()
        assert await s.get_items() == []
        assert await s.pop_item() is None
        assert await other.get_items() == [item(9)]
        await s.add_items([item(5)])
        assert await s.get_items() == [item(5)]

    run(go())


def test_limit_reads_a_tail(client: cairn.Client) -> None:
    async def go() -> None:
        s = CairnSession("long", client)
        for k in range(0, 300, 50):
            await s.add_items([item(i) for i in range(k, k + 50)])
        assert await s.get_items(limit=3) == [item(297), item(298), item(299)]
        assert len(await s.get_items()) == 300

    run(go())
    # The tail read is a bounded page of messages, not the whole session.
    page = client.messages("agents:long", tail=3)
    assert page["from"] == 297 and page["total"] == 300


def test_concurrent_pops_are_distinct(client: cairn.Client) -> None:
    async def go() -> List[dict]:
        s = CairnSession("pops", client)
        await s.add_items([item(i) for i in range(15)])
        return list(await asyncio.gather(*(CairnSession("pops", client).pop_item() for _ in range(10))))

    popped = run(go())
    assert sorted(p["content"] for p in popped) == sorted(f"m{i}" for i in range(5, 15))
    assert run(CairnSession("pops", client).get_items()) == [item(i) for i in range(5)]


def test_compaction_hook_replaces_a_suffix(client: cairn.Client) -> None:
    async def go() -> None:
        s = CairnSession("compact", client)
        await s.add_items([item(i) for i in range(6)])
        snap = await s._get_compaction_snapshot(4)
        assert snap.items == [item(i) for i in range(2, 6)] and not snap.complete
        assert await snap.replace_suffix(1, [{"role": "assistant", "content": "summary"}])
        assert await s.get_items() == [item(0), item(1), item(2), {"role": "assistant", "content": "summary"}]
        # A stale snapshot does not overwrite newer history.
        stale = await s._get_compaction_snapshot(10)
        assert stale.complete
        await s.add_items([item(7)])
        assert not await stale.replace_suffix(0, [])
        assert (await s.get_items())[-1] == item(7)

    run(go())


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_runner_keeps_history_across_processes(mode: str, workspace: str, daemons: List[int]) -> None:
    env = dict(os.environ, CAIRN_DAEMON=DAEMON, PYTHONPATH=str(HERE.parent))

    def turn(text: str) -> str:
        p = subprocess.run(
            [sys.executable, str(HERE / "helpers" / "agents_child.py"), workspace, mode, "conv", text],
            env=env, capture_output=True, text=True, timeout=60,
        )
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    try:
        assert turn("hello") == "seen: hello"
        assert turn("again") == "seen: hello | again"
        c = cairn.connect(workspace, embedded=True) if mode == "embedded" else cairn.connect(workspace, daemon=DAEMON)
        try:
            if mode == "daemon":
                daemons.append(c.status()["daemon"]["pid"])
            items = run(CairnSession("conv", c).get_items())
        finally:
            c.close()
        assert [i.get("content") for i in items if i.get("role") == "user"] == ["hello", "again"]
        assert len(items) == 4  # two user inputs, two assistant messages
    finally:
        pass
