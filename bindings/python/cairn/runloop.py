"""The run helper for hosts with their own agent loop: a run that
checkpoints every tool turn without the host asking.

    with client.start_run("s1", resume=True) as run:
        history = run.messages            # what the resumed run had
        while not done:
            reply, calls = model(history)
            results = [tool(c) for c in calls]      # never checkpointed mid-call
            run.turn([reply, *results], usage={"input_tokens": 120}, tool_calls=len(calls))

``turn`` is the only place a checkpoint is taken: the boundary after a
completed tool turn, with the turn's messages, the run's running totals
(usage, tool calls) and the host's optional ``state``, in one durable
commit. A process killed anywhere, even in the middle of a tool call,
resumes from the last completed turn with its counters carried on.

A turn whose checkpoint fails with :class:`~cairn.UnavailableError`
(a lost connection, a call timeout: the outcome is unknown) is settled by
the next call: ``turn`` (or ``complete``) first reads the run to learn
whether that checkpoint was committed. If it was, the helper counts it;
a ``turn`` with the same arguments (the same JSON values: ``2`` and
``2.0`` alike, ``true`` and ``1`` not) is then the host retrying it and
returns its number without saving it twice, and any other ``turn`` is
the next one. If it was not, the turn is saved anew. So a host may retry
a failed turn, or go on, and the run holds each turn once.

On a clean exit of the ``with`` block the run is completed
(``completeRun``, status ``"completed"``, with the final totals). On an
exception the run is left running, as after a crash, so that
``client.start_run(session_id, resume=True)`` picks it up from its last
turn; pass ``on_error="fail"`` to end it as ``"failed"`` instead (it can
then not be resumed). ``resume=True`` resumes the session's interrupted run
(the latest one, when there are several) or, if there is none, begins a new
run.

The asyncio client has the same helper, awaitable
(:class:`AsyncRunLoop`)::

    async with client.start_run("s1", resume=True) as run:
        await run.turn([reply, *results], usage={"input_tokens": 120})
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, List, Literal, Optional, Sequence, Tuple

from .errors import NotFoundError, UnavailableError

__all__ = ["RunLoop", "AsyncRunLoop"]


def _add_usage(total: Dict[str, Any], more: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    out = dict(total)
    for k, v in (more or {}).items():
        out[k] = out.get(k, 0) + v
    return out


def _same_json(a: Any, b: Any) -> bool:
    """Whether a and b are the same JSON value: numbers by value (1 and
    1.0 alike), booleans apart from numbers (Python's True == 1), objects
    whatever their key order, arrays (lists or tuples) in order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same_json, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_json(v, b[k]) for k, v in a.items())
    return a == b


class RunLoop:
    """One run of a host's loop; see the module doc. Attributes: ``run_id``,
    ``session_id``, ``turn_no`` (the last completed turn), ``usage`` and
    ``tool_calls`` (the run's totals), ``state`` (the last turn's),
    ``resumed_from`` (the run it continues, or None) and ``messages`` (on
    a resume, the session's messages up to the resumed boundary; else
    empty)."""

    def __init__(
        self,
        client: Any,
        session_id: str,
        *,
        resume: bool = False,
        run_id: Optional[str] = None,
        on_error: Literal["resume", "fail"] = "resume",
    ) -> None:
        if on_error not in ("resume", "fail"):
            raise ValueError(f"start_run: on_error must be 'resume' or 'fail', not {on_error!r}")
        self.client = client
        self.session_id = session_id
        self.on_error = on_error
        self._want_resume = resume
        self._want_id = run_id
        self.run_id: Optional[str] = None
        self.turn_no = 0
        self.usage: Dict[str, Any] = {}
        self.tool_calls = 0
        self.state: Any = None
        self.resumed_from: Optional[str] = None
        self.messages: List[Any] = []
        self.ended = False
        # _unsure: the last turn, when its checkpoint's outcome is unknown:
        # (turn, usage, tool_calls, state, the arguments it was given).
        self._unsure: Optional[Tuple[int, Dict[str, Any], int, Any, Tuple[Any, ...]]] = None

    # -- begin / resume ---------------------------------------------------------

    def _interrupted(self) -> Optional[Dict[str, Any]]:
        try:
            r = self.client.resume_session(
                self.session_id, messages_tail=1, artifacts="none", traces="none", drift=False, processes=False
            )
        except NotFoundError:
            return None
        runs = r.get("interrupted_runs") or []
        if not runs:
            return None
        return max(runs, key=lambda x: (x.get("checkpointed_at", ""), x.get("turn", 0)))

    def start(self) -> "RunLoop":
        if self.run_id is not None:
            return self
        if self._want_resume:
            r = self._interrupted()
            if r is not None:
                got = self.client.resume_run(r["run_id"], self.session_id, self._want_id)
                self.run_id = got["run_id"]
                self.resumed_from = got["resumed_from"]
                self.turn_no = got["turn"]
                self.usage = dict(got["usage"])
                self.tool_calls = got["tool_calls_count"]
                self.state = got.get("state")
                self.messages = list(got["messages"])
                return self
        try:
            self.run_id = self.client.begin_run(self.session_id, self._want_id)["run_id"]
        except NotFoundError:
            # A run needs its session: create it empty, then begin.
            self.client.save(self.session_id, change={"append_messages": []})
            self.run_id = self.client.begin_run(self.session_id, self._want_id)["run_id"]
        return self

    def __enter__(self) -> "RunLoop":
        return self.start()

    # -- the loop's boundary ---------------------------------------------------

    def turn(
        self,
        new_messages: Sequence[Any],
        *,
        usage: Optional[Dict[str, Any]] = None,
        tool_calls: int = 0,
        state: Any = None,
    ) -> int:
        """Records a completed tool turn: its messages, this turn's
        ``usage`` and ``tool_calls`` (added to the run's totals) and the
        host's ``state``. Returns the turn number."""
        if self.run_id is None:
            self.start()
        if self.ended:
            raise RuntimeError(f"start_run: run {self.run_id!r} has ended")
        msgs = list(new_messages)
        args = (msgs, usage, tool_calls, state)
        if _same_json(self._settle(), args):
            return self.turn_no  # the host retrying the turn that was committed
        total_usage = _add_usage(self.usage, usage)
        total_calls = self.tool_calls + tool_calls
        n = self.turn_no + 1
        try:
            self.client.checkpoint(self.run_id, n, msgs, total_usage, total_calls, state, session_id=self.session_id)
        except UnavailableError:
            self._unsure = (n, total_usage, total_calls, state, args)
            raise
        self.turn_no, self.usage, self.tool_calls, self.state = n, total_usage, total_calls, state
        return n

    def _settle(self) -> Optional[Tuple[Any, ...]]:
        """Learns whether the turn whose outcome was unknown was committed
        (the run's checkpoint has reached it) and, if so, counts it and
        returns the arguments it was given; None otherwise. Raises what
        reading the run raises (the outcome stays unknown)."""
        u = self._unsure
        if u is None:
            return None
        cp = self.client.run(self.run_id, session_id=self.session_id).get("checkpoint") or {}
        self._unsure = None
        if cp.get("turn", 0) < u[0]:
            return None
        self.turn_no, self.usage, self.tool_calls, self.state = u[0], u[1], u[2], u[3]
        return u[4]

    def complete(self, status: str = "completed") -> None:
        """Ends the run (``completeRun``) with the run's totals."""
        if self.run_id is None or self.ended:
            return
        self._settle()
        self.client.complete_run(self.run_id, status, self.usage, self.tool_calls, session_id=self.session_id)
        self.ended = True

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.complete("completed")
        elif self.on_error == "fail":
            self.complete("failed")
        # else: left running, resumable from its last turn.

    def __repr__(self) -> str:
        return f"RunLoop(session_id={self.session_id!r}, run_id={self.run_id!r}, turn={self.turn_no})"


class AsyncRunLoop:
    """:class:`RunLoop` for :class:`cairn.aio.AsyncClient`: the same run,
    whose calls run on the client's executor so the event loop is never
    blocked. ``async with client.start_run(...) as run`` and ``await
    run.turn(...)``; the attributes are the :class:`RunLoop`'s."""

    def __init__(self, loop: RunLoop, call: Callable[..., Awaitable[Any]]) -> None:
        self.sync = loop
        self._call = call

    def __getattr__(self, name: str) -> Any:
        # run_id, turn_no, usage, tool_calls, state, resumed_from, messages...
        return getattr(self.sync, name)

    async def start(self) -> "AsyncRunLoop":
        await self._call(self.sync.start)
        return self

    async def __aenter__(self) -> "AsyncRunLoop":
        return await self.start()

    async def turn(
        self,
        new_messages: Sequence[Any],
        *,
        usage: Optional[Dict[str, Any]] = None,
        tool_calls: int = 0,
        state: Any = None,
    ) -> int:
        """As :meth:`RunLoop.turn`."""
        n: int = await self._call(
            self.sync.turn, list(new_messages), usage=usage, tool_calls=tool_calls, state=state
        )
        return n

    async def complete(self, status: str = "completed") -> None:
        """As :meth:`RunLoop.complete`."""
        await self._call(self.sync.complete, status)

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            await self.complete("completed")
        elif self.sync.on_error == "fail":
            await self.complete("failed")

    def __repr__(self) -> str:
        return "Async" + repr(self.sync)
