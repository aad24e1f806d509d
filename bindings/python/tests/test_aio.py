"""cairn.aio: the asyncio flavour."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections import Counter
from typing import Any, List

import pytest

import cairn
import cairn.aio
from conftest import aio_connect, msg, record_runtime, run


def test_aio_every_method_embedded(workspace: str) -> None:
    async def main() -> None:
        async with await cairn.aio.connect(workspace, embedded=True) as c:
            assert (await c.status())["mode"] == "embedded"
            assert "protocol_version" in await c.hello()
            assert (await c.save("s", {"session_id": "s", "messages": [msg(0)]}))["generation"] == 1
            await c.save("s", change={"append_messages": [msg(1)]}, expect_generation=1)
            assert (await c.resume_session("s"))["generation"] == 2
            r = await c.begin_run("s", "r")
            await c.checkpoint(r["run_id"], 1, [msg(2)], {"total_tokens": 3}, 1, {"x": 1})
            rr = await c.resume_run("r", new_run_id="r2")
            assert rr["state"] == {"x": 1}
            await c.complete_run("r2", "completed", {"total_tokens": 4}, 2)
            assert (await c.begin_workflow("wf", [{"step_id": "a", "identity": "i"}], "s"))["completed"] == []
            await c.complete_step("wf", "a", "i", 7, "s")
            await c.finish_workflow("wf")
            await c.fork("s", "s2")
            assert {x["session_id"] for x in await c.list_sessions()} == {"s", "s2"}
            env = await c.export("s2")
            await c.delete("s2")
            assert (await c.import_(env))["session_id"] == "s2"
            assert (await c.call("status"))["mode"] == "embedded"
            with pytest.raises(cairn.NotFoundError):
                await c.resume_session("nope")
        assert c.closed
        with pytest.raises(cairn.BadHandleError):
            await c.status()

    run(main())


def test_aio_does_not_block_loop(workspace: str) -> None:
    """Calls run off the loop: a ticker keeps ticking while many calls run."""

    async def main() -> None:
        async with await cairn.aio.connect(workspace, embedded=True) as c:
            loop_thread = threading.get_ident()
            ticks = 0
            stop = False

            async def ticker() -> None:
                nonlocal ticks
                while not stop:
                    ticks += 1
                    await asyncio.sleep(0)

            t = asyncio.ensure_future(ticker())
            gens = await asyncio.gather(*(c.save(f"s{i % 4}", change={"append_messages": [i]}) for i in range(80)))
            sub = await c.subscribe()
            # A long wait for an event happens on a worker thread.
            waited = asyncio.ensure_future(sub.next_event(timeout=0.3))
            before = ticks
            await asyncio.sleep(0.1)
            assert ticks > before
            assert await waited is None
            await sub.aclose()
            stop = True
            await t
            assert sorted(g["generation"] for g in gens) == sorted(list(range(1, 21)) * 4)
            assert threading.get_ident() == loop_thread

    run(main())


def test_aio_subscribe_in_order(workspace: str) -> None:
    async def main() -> None:
        async with await cairn.aio.connect(workspace, embedded=True) as c:
            sub = await c.subscribe(["session.committed"])
            for i in range(10):
                await c.save("s", change={"append_messages": [i]})
            got = []
            async for ev in sub:
                got.append(ev["data"]["generation"])
                if len(got) == 10:
                    await sub.aclose()
            assert got == list(range(1, 11))
            assert sub.closed and sub.dropped == 0

    run(main())


def test_aio_parallel_resumable(workspace: str) -> None:
    calls: Counter = Counter()
    fail = {"b"}

    def make(name: str, value: Any, is_async: bool) -> Any:
        if is_async:

            async def afn() -> Any:
                calls[name] += 1
                await asyncio.sleep(0.01)
                if name in fail:
                    raise ValueError(name)
                return value

            return afn

        def fn() -> Any:
            calls[name] += 1
            if name in fail:
                raise ValueError(name)
            return value

        return fn

    def specs() -> List[cairn.Step]:
        return [
            cairn.Step("a", "1", make("a", {"v": "a"}, True)),
            cairn.Step("b", "1", make("b", "b", True)),
            cairn.Step("c", "1", make("c", [3], False)),
        ]

    async def main() -> None:
        async with await cairn.aio.connect(workspace, embedded=True) as c:
            with pytest.raises(ValueError):
                await c.parallel_resumable(specs(), "wf")
            assert calls == Counter(a=1, b=1, c=1)
            fail.clear()
            assert await c.parallel_resumable(specs(), "wf") == [{"v": "a"}, "b", [3]]
            assert calls == Counter(a=1, b=2, c=1)

    run(main())


def test_aio_daemon_mode(workspace: str, daemons: List[int]) -> None:
    async def main() -> None:
        c = await aio_connect(workspace, "daemon", daemons)
        try:
            await asyncio.gather(*(c.save("s", change={"append_messages": [i]}) for i in range(20)))
            assert len((await c.resume_session("s"))["snapshot"]["messages"]) == 20
        finally:
            await c.close()
        empty = tempfile.mkdtemp(prefix="cairn-py-")
        try:
            with pytest.raises(cairn.UnavailableError):
                await cairn.aio.connect(empty, auto_start=False)
        finally:
            shutil.rmtree(empty)

    run(main())


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_aio_handoff_runtime_changes(workspace: str, daemons: List[int], started: List[int], mode: str) -> None:
    async def main() -> None:
        c = await aio_connect(workspace, mode, daemons)
        try:
            clock = (await c.changes())["clock"]
            await c._run(record_runtime, c.sync)
            assert [p["state"] for p in (await c.resume_session("s"))["processes"]] == ["unhealthy", "unhealthy"]
            h = await c.handoff("s")
            assert (h["session_id"], h["complete"]) == ("s", False)
            assert (await c.runtime_check("s"))["processes"][0]["state"] == "unhealthy"
            r = await c.runtime_restart("s", "web", 20000)
            if "pid" in r:
                started.append(r["pid"])
            assert (r["outcome"], r["state"]) == ("started", "healthy"), r
            assert (await c.runtime_check("s", 5000))["processes"][0]["state"] == "healthy"
            assert "ready" in (await c.changes(clock))["added"]
        finally:
            await c.close()

    run(main())
