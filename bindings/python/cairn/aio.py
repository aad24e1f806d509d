"""cairn for asyncio: the same client, with coroutine methods.

Every call runs on a thread of the client's own executor (ctypes releases
the GIL during the foreign call), so the event loop is never blocked::

    async with await cairn.aio.connect(ws) as c:
        await c.save("s1", change={"append_messages": [{"role": "user"}]})
        async for ev in await c.subscribe():
            ...
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Literal, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import client as _sync
from .client import PathLike, Step, StepLike, _steps

if TYPE_CHECKING:
    from .runloop import AsyncRunLoop
from .types import (
    JSON,
    ArtifactDataResult,
    ArtifactsResult,
    ArtifactsByIDDataResult,
    BeginRunResult,
    BeginWorkflowResult,
    ChangeSet,
    CheckpointResult,
    CompleteRunResult,
    Envelope,
    Event,
    ExportFileResult,
    ForkResult,
    HandoffResult,
    HelloResult,
    ImportResult,
    LibStatus,
    MessagesResult,
    RepairReport,
    RestartResult,
    ResumeRunResult,
    ResumeSessionResult,
    RunEventsResult,
    RunResult,
    RunsResult,
    RuntimeCheckResult,
    SaveResult,
    StepSpec,
    Summary,
    Usage,
    VerifyReport,
)

__all__ = ["AsyncClient", "AsyncSubscription", "connect", "Step"]

T = TypeVar("T")

#: Threads per client executor; blocked event waits and long calls each use one.
MAX_THREADS = 32


class AsyncClient:
    """The asyncio flavour of :class:`cairn.Client` (same methods, awaitable)."""

    def __init__(self, client: _sync.Client, executor: ThreadPoolExecutor) -> None:
        self.sync = client
        self._pool = executor

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.sync.closed:
            # The executor is gone; the call fails at once (bad_handle) anyway.
            return fn(*args, **kwargs)
        loop = asyncio.get_running_loop()
        if kwargs:
            return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))
        return await loop.run_in_executor(self._pool, fn, *args)

    @property
    def closed(self) -> bool:
        return self.sync.closed

    @property
    def workspace(self) -> Optional[str]:
        return self.sync.workspace

    async def close(self) -> None:
        try:
            await self._run(self.sync.close)
        finally:
            self._pool.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return "<cairn.aio." + repr(self.sync)[len("<cairn.") :]

    async def call(self, method: str, params: Optional[Mapping[str, Any]] = None) -> Any:
        return await self._run(self.sync.call, method, params)

    async def status(self) -> LibStatus:
        return await self._run(self.sync.status)

    async def hello(self) -> HelloResult:
        return await self._run(self.sync.hello)

    async def save(
        self,
        session_id: str,
        snapshot: Optional[Mapping[str, Any]] = None,
        *,
        change: Optional[Mapping[str, Any]] = None,
        expect_generation: Optional[int] = None,
    ) -> SaveResult:
        return await self._run(
            self.sync.save, session_id, snapshot, change=change, expect_generation=expect_generation
        )

    async def resume_session(
        self,
        session_id: str,
        *,
        messages_tail: Optional[int] = None,
        artifacts: Literal["full", "metadata", "none"] = "full",
        traces: Literal["all", "none"] = "all",
        drift: bool = True,
        processes: bool = True,
    ) -> ResumeSessionResult:
        return await self._run(
            self.sync.resume_session,
            session_id,
            messages_tail=messages_tail,
            artifacts=artifacts,
            traces=traces,
            drift=drift,
            processes=processes,
        )

    async def summary(self, session_id: str) -> Summary:
        return await self._run(self.sync.summary, session_id)

    async def messages(
        self,
        session_id: str,
        *,
        tail: Optional[int] = None,
        from_: Optional[int] = None,
        to: Optional[int] = None,
        since_generation: Optional[int] = None,
        limit: Optional[int] = None,
        max_bytes: Optional[int] = None,
    ) -> MessagesResult:
        return await self._run(
            self.sync.messages,
            session_id,
            tail=tail,
            from_=from_,
            to=to,
            since_generation=since_generation,
            limit=limit,
            max_bytes=max_bytes,
        )

    async def artifact(self, session_id: str, artifact_id: str) -> ArtifactDataResult:
        return await self._run(self.sync.artifact, session_id, artifact_id)

    async def artifacts(self, session_id: str) -> ArtifactsResult:
        return await self._run(self.sync.artifacts, session_id)

    async def artifacts_by_id(self, session_id: str, artifact_ids: List[str]) -> ArtifactsByIDDataResult:
        return await self._run(self.sync.artifacts_by_id, session_id, artifact_ids)

    async def run(self, run_id: str, session_id: Optional[str] = None) -> RunResult:
        return await self._run(self.sync.run, run_id, session_id)

    async def runs(self, session_id: str) -> RunsResult:
        return await self._run(self.sync.runs, session_id)

    async def run_events(
        self,
        run_id: str,
        session_id: Optional[str] = None,
        *,
        from_: Optional[int] = None,
        since_generation: Optional[int] = None,
        limit: Optional[int] = None,
        max_bytes: Optional[int] = None,
    ) -> RunEventsResult:
        return await self._run(
            self.sync.run_events,
            run_id,
            session_id,
            from_=from_,
            since_generation=since_generation,
            limit=limit,
            max_bytes=max_bytes,
        )

    async def list_sessions(self) -> List[Summary]:
        return await self._run(self.sync.list_sessions)

    async def delete(self, session_id: str) -> None:
        await self._run(self.sync.delete, session_id)

    async def fork(self, session_id: str, new_id: str, at_generation: Optional[int] = None) -> ForkResult:
        return await self._run(self.sync.fork, session_id, new_id, at_generation)

    async def export(self, session_id: str) -> Envelope:
        return await self._run(self.sync.export, session_id)

    async def import_(self, envelope: Union[Mapping[str, Any], str, bytes]) -> ImportResult:
        return await self._run(self.sync.import_, envelope)

    async def export_file(self, session_id: str, path: PathLike) -> ExportFileResult:
        return await self._run(self.sync.export_file, session_id, path)

    async def import_file(self, path: PathLike) -> ImportResult:
        return await self._run(self.sync.import_file, path)

    async def verify(self, *, secrets: bool = False) -> VerifyReport:
        return await self._run(self.sync.verify, secrets=secrets)

    async def repair(
        self,
        session_id: Optional[str] = None,
        *,
        workflow_id: Optional[str] = None,
        apply: bool = False,
    ) -> RepairReport:
        return await self._run(self.sync.repair, session_id, workflow_id=workflow_id, apply=apply)

    async def handoff(self, session_id: str) -> HandoffResult:
        return await self._run(self.sync.handoff, session_id)

    async def runtime_check(self, session_id: str, timeout_ms: Optional[int] = None) -> RuntimeCheckResult:
        return await self._run(self.sync.runtime_check, session_id, timeout_ms)

    async def runtime_restart(self, session_id: str, name: str, timeout_ms: Optional[int] = None) -> RestartResult:
        return await self._run(self.sync.runtime_restart, session_id, name, timeout_ms)

    async def changes(self, since: Optional[str] = None) -> ChangeSet:
        return await self._run(self.sync.changes, since)

    async def begin_run(self, session_id: str, run_id: Optional[str] = None) -> BeginRunResult:
        return await self._run(self.sync.begin_run, session_id, run_id)

    async def checkpoint(
        self,
        run_id: str,
        turn: int,
        new_messages: Sequence[JSON],
        usage: Optional[Usage] = None,
        tool_calls_count: int = 0,
        state: JSON = None,
        *,
        session_id: Optional[str] = None,
    ) -> CheckpointResult:
        return await self._run(
            self.sync.checkpoint, run_id, turn, new_messages, usage, tool_calls_count, state, session_id=session_id
        )

    async def complete_run(
        self,
        run_id: str,
        status: str,
        usage: Optional[Usage] = None,
        tool_calls_count: Optional[int] = None,
        *,
        session_id: Optional[str] = None,
    ) -> CompleteRunResult:
        return await self._run(self.sync.complete_run, run_id, status, usage, tool_calls_count, session_id=session_id)

    async def resume_run(
        self, run_id: str, session_id: Optional[str] = None, new_run_id: Optional[str] = None
    ) -> ResumeRunResult:
        return await self._run(self.sync.resume_run, run_id, session_id, new_run_id)

    async def begin_workflow(
        self,
        workflow_id: str,
        steps: Sequence[Union[StepSpec, StepLike, Tuple[str, str]]],
        session_id: Optional[str] = None,
    ) -> BeginWorkflowResult:
        return await self._run(self.sync.begin_workflow, workflow_id, steps, session_id)

    async def complete_step(
        self,
        workflow_id: str,
        step_id: str,
        identity: str,
        result: JSON = None,
        session_id: Optional[str] = None,
    ) -> None:
        await self._run(self.sync.complete_step, workflow_id, step_id, identity, result, session_id)

    async def finish_workflow(self, workflow_id: str) -> None:
        await self._run(self.sync.finish_workflow, workflow_id)

    async def parallel_resumable(
        self,
        specs: Iterable[StepLike],
        workflow_id: str,
        *,
        session_id: Optional[str] = None,
    ) -> List[Any]:
        """As :meth:`cairn.Client.parallel_resumable`, concurrently on the loop.

        A step's ``fn`` may be a coroutine function (awaited on the loop) or a
        plain function (run on the client's executor).
        """
        steps = _steps(specs)
        begun = await self.begin_workflow(workflow_id, steps, session_id)
        recorded = {r["step_id"]: r.get("result") for r in begun["completed"]}
        results: List[Any] = [None] * len(steps)
        todo: List[int] = []
        for i, s in enumerate(steps):
            if s.step_id in recorded:
                results[i] = recorded[s.step_id]
            else:
                todo.append(i)
        failures: List[BaseException] = []

        async def run(i: int) -> Any:
            s = steps[i]
            try:
                if inspect.iscoroutinefunction(s.fn):
                    v = await s.fn()
                else:
                    v = await self._run(s.fn)
                    if inspect.isawaitable(v):
                        v = await v
                await self.complete_step(workflow_id, s.step_id, s.identity, v, session_id)
            except BaseException as e:
                failures.append(e)
                raise
            return v

        outcomes = await asyncio.gather(*(run(i) for i in todo), return_exceptions=True)
        if failures:
            raise failures[0]
        for i, v in zip(todo, outcomes):
            results[i] = v
        return results

    def start_run(
        self,
        session_id: str,
        *,
        resume: bool = False,
        run_id: Optional[str] = None,
        on_error: Literal["resume", "fail"] = "resume",
    ) -> "AsyncRunLoop":
        """As :meth:`cairn.Client.start_run`, awaitable: ``async with
        client.start_run("s1", resume=True) as run: ... await
        run.turn(msgs, usage=..., tool_calls=...)``. See :mod:`cairn.runloop`."""
        from .runloop import AsyncRunLoop, RunLoop

        return AsyncRunLoop(RunLoop(self.sync, session_id, resume=resume, run_id=run_id, on_error=on_error), self._run)

    async def subscribe(
        self, events: Optional[Iterable[str]] = None, *, poll_interval: float = 0.5
    ) -> "AsyncSubscription":
        sub = await self._run(self.sync.subscribe, events, poll_interval=poll_interval)
        return AsyncSubscription(self, sub)


class AsyncSubscription:
    """An async iterator of events; ``await sub.aclose()`` unsubscribes."""

    def __init__(self, client: AsyncClient, sub: _sync.Subscription) -> None:
        self._client = client
        self.sync = sub

    @property
    def dropped(self) -> int:
        return self.sync.dropped

    @property
    def closed(self) -> bool:
        return self.sync.closed

    async def next_event(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event, or None on timeout or when closed."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self.sync.closed:
            # Each wait is one bounded slice, so cancelling the awaiting task
            # leaves at most one short nextEvent running on the executor.
            slice_s = self.sync._poll_ms / 1000
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    return None
                slice_s = min(slice_s, left)
            ev = await self._client._run(self.sync.next_event, slice_s)
            if ev is not None:
                return ev
        return None

    def __aiter__(self) -> "AsyncSubscription":
        return self

    async def __anext__(self) -> Event:
        ev = await self.next_event()
        if ev is None:
            raise StopAsyncIteration
        return ev

    async def aclose(self) -> None:
        await self._client._run(self.sync.close)

    async def __aenter__(self) -> "AsyncSubscription":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


async def connect(
    workspace: Optional[PathLike] = None,
    embedded: bool = False,
    daemon: Optional[PathLike] = None,
    daemon_args: Optional[Sequence[str]] = None,
    auto_start: bool = True,
    *,
    max_threads: int = MAX_THREADS,
    store: Optional[str] = None,
    call_timeout: Optional[float] = None,
) -> AsyncClient:
    """As :func:`cairn.connect` (without ``workspace``: the one found from the
    current directory), without blocking the loop (a daemon start can take a
    while). ``max_threads`` bounds the client's executor."""
    pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="cairn-aio")
    loop = asyncio.get_running_loop()
    try:
        c = await loop.run_in_executor(
            pool, functools.partial(
                _sync.connect, workspace, embedded, daemon, daemon_args, auto_start, store=store, call_timeout=call_timeout
            )
        )
    except BaseException:
        pool.shutdown(wait=False)
        raise
    return AsyncClient(c, pool)
