"""cairn.agents: an OpenAI Agents SDK ``Session`` stored in cairn.

Install the SDK with the extra: ``pip install cairn-sessions[agents]``.

:class:`CairnSession` keeps an agent session's items as the messages of one
cairn session, ``session_prefix + session_id`` (default prefix
``"agents:"``), each item byte for byte as the SDK gave it:

- ``get_items(limit)`` reads the last ``limit`` messages (a tail read: its
  cost does not grow with the history);
- ``add_items`` appends, in one durable save;
- ``pop_item`` and ``clear_session`` are delta edits (truncations), made
  with a compare-and-swap on the session's generation, so concurrent
  ``pop_item`` calls, from any process, each get a different item;
- the SDK's history-rewriting hook (``_get_compaction_snapshot``, used by
  ``OpenAIResponsesCompactionSession``) reads a tail and replaces it in one
  compare-and-swap save.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, List, Optional

from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from .client import Client
from .errors import ConflictError, NotFoundError

try:  # the hook exists in the SDK versions that compact history
    from agents.memory.session import _CompactionSnapshot  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older SDKs
    _CompactionSnapshot = None  # type: ignore[assignment,misc]

__all__ = ["CairnSession"]

_CAS_TRIES = 1000


class CairnSession(SessionABC):
    """An Agents SDK session over a cairn :class:`~cairn.Client` (embedded
    or through the daemon)."""

    def __init__(
        self,
        session_id: str,
        client: Client,
        *,
        session_prefix: str = "agents:",
        session_settings: Optional[SessionSettings] = None,
    ) -> None:
        self.session_id = session_id
        self.client = client
        self.cairn_session_id = session_prefix + session_id
        self.session_settings = session_settings

    # -- sync implementations (each async method runs one on a worker thread)

    def _get_items(self, limit: Optional[int]) -> List[Any]:
        if limit == 0:
            return []
        sid = self.cairn_session_id
        try:
            if limit is not None and limit > 0:
                return list(self.client.messages(sid, tail=limit)["messages"])
            out: List[Any] = []
            page = self.client.messages(sid)
            out.extend(page["messages"])
            while page["more"]:
                page = self.client.messages(sid, from_=page["next"])
                out.extend(page["messages"])
            return out
        except NotFoundError:
            return []

    def _add_items(self, items: List[Any]) -> None:
        if items:
            self.client.save(self.cairn_session_id, change={"append_messages": list(items)})

    def _pop_item(self) -> Any:
        sid = self.cairn_session_id
        for _ in range(_CAS_TRIES):
            try:
                page = self.client.messages(sid, tail=1)
            except NotFoundError:
                return None
            if not page["messages"]:
                return None
            try:
                # Only if nobody saved since the read: the item returned is
                # the one removed, and two callers never get the same one.
                self.client.save(
                    sid,
                    change={"truncate_messages": page["total"] - 1},
                    expect_generation=page["generation"],
                )
            except ConflictError:
                continue
            return page["messages"][0]
        raise ConflictError(f"pop_item: session {sid!r} kept changing; gave up after {_CAS_TRIES} tries")

    def _clear(self) -> None:
        try:
            self.client.save(self.cairn_session_id, change={"truncate_messages": 0})
        except NotFoundError:
            pass

    # -- the Session protocol -------------------------------------------------

    async def get_items(self, limit: Optional[int] = None) -> List[Any]:
        """The latest ``limit`` items in order (all when None and the
        session settings set no limit)."""
        return await asyncio.to_thread(self._get_items, resolve_session_limit(limit, self.session_settings))

    async def add_items(self, items: List[Any]) -> None:
        await asyncio.to_thread(self._add_items, list(items))

    async def pop_item(self) -> Any:
        """Removes and returns the last item (None when empty)."""
        return await asyncio.to_thread(self._pop_item)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self._clear)

    # -- history rewriting ------------------------------------------------------

    async def _get_compaction_snapshot(
        self,
        limit: int,
        *,
        prune_prefix: Optional[Callable[[Any], bool]] = None,
    ) -> Any:
        """The last ``limit`` items and a ``replace_suffix(start, output)``
        that swaps items ``start..`` of them for ``output`` in one save,
        only if the session did not change since (else it returns False).
        With ``prune_prefix`` (expiring items before the window) there is no
        snapshot (None), and the SDK falls back to its generic path, which
        keeps the expiry semantics."""
        if _CompactionSnapshot is None or prune_prefix is not None or limit <= 0:
            return None
        sid = self.cairn_session_id
        try:
            page = await asyncio.to_thread(self.client.messages, sid, tail=limit)
        except NotFoundError:
            page = {"messages": [], "from": 0, "total": 0, "generation": 0}
        items = list(page["messages"])
        base, gen = page["from"], page["generation"]

        async def replace_suffix(start: int, output: List[Any]) -> bool:
            if start >= len(items):
                return False
            try:
                await asyncio.to_thread(
                    self.client.save,
                    sid,
                    change={"truncate_messages": base + start, "append_messages": list(output)},
                    expect_generation=gen,
                )
            except ConflictError:
                return False
            return True

        return _CompactionSnapshot(items, base == 0, replace_suffix)
