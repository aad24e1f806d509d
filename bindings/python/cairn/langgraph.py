"""cairn.langgraph: a LangGraph checkpointer that stores threads in cairn.

:class:`CairnSaver` is a ``BaseCheckpointSaver`` (sync and async). Install
the framework with the extra: ``pip install cairn-sessions[langgraph]``.

Layout. A thread is one cairn session, ``session_prefix + thread_id``
(default prefix ``"langgraph:"``, so thread ``"t1"`` is session
``"langgraph:t1"``); every checkpoint namespace of the thread lives in that
session. Inside it:

- each checkpoint is an artifact ``c<key>`` holding the checkpoint (without
  its channel values), its metadata, its parent's id and the values of the
  channels ``put`` got a new version of: a checkpoint costs what changed,
  not the whole state. For each of its other channels the record names the
  checkpoint whose record holds the value;
- a channel value may also be an artifact ``b<key>`` per (namespace,
  channel, version): every value in threads written before the values moved
  into the checkpoint records, and those ``prune`` and ``delete_for_runs``
  keep when the record holding them goes;
- the pending writes of a checkpoint are one artifact ``w<key>``;
- the newest checkpoint id of each namespace is an artifact ``h<key>``;
- each ``put`` appends one small index message (namespace, id, parent,
  run id, metadata) used by ``list``, ``delete_for_runs`` and ``prune``.

A put is one save of two artifacts (the checkpoint's record and the head,
which moves unless a newer checkpoint is there) and the index message.
Threads written in the first layout (a record as JSON with base64 inside,
every channel value an artifact of its own) read as they are, and a put
on top of one writes the current layout; nothing is migrated.

So ``get_tuple`` is one ``artifacts_by_id`` call (the head, the checkpoint
and its writes; the saver guesses the head from the last one it stored or
read, and the head read along checks the guess; values neither in that
record nor cached take one more), and ``list(limit=N)``
reads N index entries from the tail and then their checkpoints and writes
in one call: both stay flat as a thread grows. Nothing
on the hot path reads a whole session. A run's threads are recorded in a
session ``run_prefix + run_id`` (default ``"langgraph-run:"``) so that
``delete_for_runs`` visits only those threads.

Crash safety: every call is one atomic, durable cairn save. Run graphs with
``durability="sync"`` (``graph.invoke(..., durability="sync")``): LangGraph
then waits for each checkpoint to be stored before starting the next step,
so a process killed at any moment resumes from the last finished step. With
the default ``"async"`` a step can start before its checkpoint is stored,
and with ``"exit"`` nothing is stored until the graph ends.
"""

from __future__ import annotations

import asyncio
import binascii
import functools
import hashlib
import json
import random
import re
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.base import WRITES_IDX_MAP  # type: ignore[attr-defined]

from .client import Client
from .errors import ConflictError, MethodNotFoundError, NotFoundError

__all__ = ["CairnSaver"]

_PAGE = 64
_CAS_TRIES = 50
# The most ids one artifactsByID call takes (api.MaxArtifactIDs).
_MAX_IDS = 1024
# How many checkpoints list reads in one call when it has no limit.
_LIST_BATCH = 16
# How many parsed checkpoint records a saver keeps (a few hundred bytes each).
_RECORDS_KEPT = 1024


# The characters json.dumps(ensure_ascii=False) escapes in a string.
_ESCAPED = re.compile(r'[\x00-\x1f"\\]')


@functools.lru_cache(maxsize=8192)
def _key(kind: str, *parts: str) -> str:
    # JSON keeps the parts apart whatever they contain; long keys are hashed
    # to stay under cairn's id limit. Parts with nothing to escape (ids,
    # namespaces, versions) are joined as json.dumps would write them, as
    # the keys of stored threads were: the ids are on every read's path.
    if parts and all(type(p) is str for p in parts) and not _ESCAPED.search("".join(parts)):
        k = kind + '["' + '","'.join(parts) + '"]'
    else:
        k = kind + json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    if len(k) > 50 and len(k.encode("utf-8")) > 200:
        k = kind + "#" + hashlib.sha256(k.encode("utf-8")).hexdigest()
    return k


# _key without its cache, for a key made once (a new checkpoint's).
_new_key = _key.__wrapped__


def _sorted_writes(raw: Optional[bytes]) -> List[List[Any]]:
    """A writes artifact's entries, [task_id, channel, value, task_path,
    idx], in writes_sort_key order."""
    if raw is None:
        return []
    ws = _json(raw.decode("utf-8"))
    ws.sort(key=lambda w: writes_sort_key(w[3], w[0], w[4]))
    return ws  # type: ignore[no-any-return]


# The artifacts' JSON is decoded from str (json.loads on bytes first guesses
# their encoding) and their base64 without b64decode's argument checks:
# both are on get_tuple's path.
_json = json.JSONDecoder().decode
_unb64 = binascii.a2b_base64
_b2a = binascii.b2a_base64


def _b64(b: bytes) -> str:
    # Artifact data goes to the client as base64 text already: the wire's
    # form, so its encoder need not call back for bytes.
    return binascii.b2a_base64(b, newline=False).decode("ascii")


# json.dumps(o, separators=(",", ":")), without building an encoder a call.
_compact = json.JSONEncoder(separators=(",", ":")).encode

# What follows an artifact's quoted id in a put's request, up to its data.
_ART_DATA = ',"kind":"langgraph","data":"'

# The serialized value of a channel a put has a new version of but no value.
_EMPTY = ("empty", b"")


# A checkpoint record in the current layout begins with this byte (one in
# the first layout is JSON, so begins with "{"), then a compact JSON header,
# a newline, and the serialized checkpoint, metadata and new channel values
# back to back as the serializer made them (the header gives each one's
# type and length): no base64 inside, no JSON around the bytes.
_REC2 = b"\x02"
# How many value locations ((session, namespace, channel, version) to the
# checkpoint whose record holds the value) a saver keeps for its puts.
_WHERE_KEPT = 1 << 16


class _Rec(NamedTuple):
    """A parsed checkpoint record."""

    cp: Tuple[str, bytes]
    md: Tuple[str, bytes]
    parent: Optional[str]
    # Channel -> (version as str, (type, bytes)): the values the record holds.
    vals: Dict[str, Tuple[str, Tuple[str, bytes]]]
    # Channel -> the checkpoint id whose record holds its value.
    at: Dict[str, str]


def _parse_record(raw: bytes) -> _Rec:
    if raw[:1] != _REC2:
        rec = _json(raw.decode("utf-8"))
        return _Rec((rec["cp"][0], _unb64(rec["cp"][1])), (rec["md"][0], _unb64(rec["md"][1])), rec.get("parent"), {}, {})
    i = raw.index(b"\n")
    h = _json(raw[1:i].decode("utf-8"))
    o = i + 1
    t, n = h["cp"]
    cp = (t, raw[o : o + n])
    o += n
    t, n = h["md"]
    md = (t, raw[o : o + n])
    o += n
    vals: Dict[str, Tuple[str, Tuple[str, bytes]]] = {}
    for ch, ver, t, n in h["v"]:
        vals[ch] = (ver, (t, raw[o : o + n]))
        o += n
    return _Rec(cp, md, h.get("parent"), vals, h.get("at") or {})


def _quoted(s: str) -> str:
    """s as a JSON string, as json.dumps(s, ensure_ascii=False) writes it.
    A key's only such character is mostly the quote, replaced here without
    the encoder (most keys are new: a version or a checkpoint id). A
    printable str holds no control character (nor a lone surrogate), and
    isprintable is cheaper than a regular expression's search."""
    if s.isprintable() and "\\" not in s:
        return '"' + s.replace('"', '\\"') + '"'
    return json.dumps(s, ensure_ascii=False)


# Quoted names (channels, serializer types), memoized: a put quotes each of
# its channels and types, from a set as small as the graph.
_QS: Dict[str, str] = {}
_QS_KEPT = 4096


def _memo_quoted(s: str) -> str:
    q = _quoted(s)
    if len(_QS) < _QS_KEPT:
        _QS[s] = q
    return q


def _plain(s: str) -> bool:
    """Whether s is written in JSON (and in a key) as it is, between quotes."""
    return s.isprintable() and '"' not in s and "\\" not in s


class _Prefixes(NamedTuple):
    """The parts of a put's request that depend on its session and namespace
    only."""

    # The request up to the checkpoint artifact's quoted id.
    save: str
    # The head's key, and its artifact from the id up to its data.
    hk: str
    head: str
    # The index entry up to its quoted id.
    entry: str
    # The checkpoint key's quoted form up to its id, when the namespace is
    # plain ASCII, and the longest id written into it so (-1: the key is
    # made by _key).
    ck: str
    ck_max: int


class CairnSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer over a cairn :class:`~cairn.Client`
    (embedded or through the daemon). See the module doc for the layout,
    and run graphs with ``durability="sync"``."""

    def __init__(
        self,
        client: Client,
        *,
        serde: Optional[SerializerProtocol] = None,
        session_prefix: str = "langgraph:",
        run_prefix: str = "langgraph-run:",
        blob_cache_bytes: int = 64 << 20,
    ) -> None:
        super().__init__(serde=serde)
        self.client = client
        self.session_prefix = session_prefix
        self.run_prefix = run_prefix
        self._lock = threading.Lock()
        self._runs_seen: set = set()
        # A channel value's key carries the channel's version, and LangGraph
        # never stores two values under one version of a channel (this
        # saver's versions also have a random part no later write reuses),
        # so values are cached, bounded by bytes; checkpoints, heads and
        # writes are always read.
        # A dict in use order (a hit is moved to the end), not an
        # OrderedDict: a put remembers every value it stores, and a dict's
        # inserts are the cheaper.
        # Keyed by (session, namespace, channel, version as str).
        self._blobs: Dict[Tuple[str, str, str, str], Any] = {}
        self._blob_bytes = 0
        self.blob_cache_bytes = blob_cache_bytes
        # The newest checkpoint id this saver stored or read per (session,
        # namespace), so that a put need not read the head first.
        self._heads: Dict[Tuple[str, str], str] = {}
        # False once the daemon answered that it lacks artifactsByID.
        self._by_id = True
        # Checkpoint records parsed, by their bytes (see _record).
        self._records: Dict[bytes, _Rec] = {}
        # Where a channel version's value is: (session, namespace, channel,
        # version) -> the checkpoint whose record holds it, for the values
        # this saver stored or read, so that a put names them without
        # reading its parent's record (bounded, oldest out first).
        self._where: Dict[Tuple[str, str, str, str], str] = {}
        # The request's prefixes per (session, namespace) (see _prefixes).
        self._pre: Dict[Tuple[str, str], _Prefixes] = {}

    # -- mapping -------------------------------------------------------------

    def session_id(self, thread_id: str) -> str:
        """The cairn session that holds ``thread_id``."""
        return self.session_prefix + str(thread_id)

    def _artifact(self, sid: str, aid: str) -> Optional[Tuple[bytes, int]]:
        try:
            r = self.client.artifact(sid, aid)
        except NotFoundError:
            return None
        return r["artifact"]["data"], r["generation"]  # type: ignore[return-value]

    def _dump(self, v: Any) -> List[str]:
        t, b = self.serde.dumps_typed(v)
        return [t, _b64(b)]

    def _load(self, tb: Sequence[str]) -> Any:
        return self.serde.loads_typed((tb[0], _unb64(tb[1])))

    @staticmethod
    def _art(aid: str, obj: Any) -> Dict[str, Any]:
        return {"id": aid, "kind": "langgraph", "data": _b64(_compact(obj).encode("utf-8"))}

    # -- reads ---------------------------------------------------------------

    def _read(self, sid: str, ids: List[str]) -> Tuple[Dict[str, bytes], int]:
        """The artifacts of ``ids`` the session holds, by id, and the
        generation they were read at (0: no such session): one
        artifactsByID call, more only past its id or reply size limits."""
        out: Dict[str, bytes] = {}
        gen = 0
        if not self._by_id:
            return self._read_each(sid, ids)
        try:
            while ids:
                r = self.client.artifacts_by_id(sid, ids[:_MAX_IDS])
                for a in r["artifacts"]:
                    out[a["id"]] = a["data"]
                gen = r["generation"]
                ids = ids[r["next"] :]
        except NotFoundError:
            return {}, 0
        except MethodNotFoundError:
            # A daemon older than artifactsByID: one read per id, as before.
            self._by_id = False
            return self._read_each(sid, ids)
        return out, gen

    def _read_each(self, sid: str, ids: List[str]) -> Tuple[Dict[str, bytes], int]:
        """_read with one artifact call per id, for a daemon that lacks
        artifactsByID (the reads then come from several generations, as
        they did before it)."""
        out: Dict[str, bytes] = {}
        gen = 0
        for aid in ids:
            try:
                r = self.client.artifact(sid, aid)
            except NotFoundError:
                continue
            out[aid] = r["artifact"]["data"]  # type: ignore[assignment]
            gen = max(gen, r["generation"])
        if gen == 0:
            gen = self._generation(sid)
        return out, gen

    def _generation(self, sid: str) -> int:
        try:
            return int(self.client.summary(sid)["generation"])
        except NotFoundError:
            return 0

    def _make_tuple(
        self,
        sid: str,
        thread_id: str,
        ns: str,
        cp_id: str,
        rec_raw: Optional[bytes],
        writes_raw: Optional[bytes],
        cfg: Optional[RunnableConfig] = None,
    ) -> Optional[CheckpointTuple]:
        if rec_raw is None:
            return None
        with self._lock:
            rec = self._records.get(rec_raw)
        seen = rec is not None
        if rec is None:
            rec = self._record(rec_raw)
        md_tb, parent = rec.md, rec.parent
        checkpoint: Checkpoint = self.serde.loads_typed(rec.cp)
        versions = checkpoint["channel_versions"]
        if not seen:
            # Where its values are, noted once per record parsed.
            self._note_where(sid, ns, cp_id, rec, versions)
        blobs = self._values_of(sid, ns, rec, versions)
        values: Dict[str, Any] = {}
        loads = self.serde.loads_typed
        for ch, tb in blobs.items():
            if tb[0] != "empty":
                values[ch] = loads(tb)
        checkpoint["channel_values"] = values
        return CheckpointTuple(
            config=cfg or {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cp_id}},
            checkpoint=checkpoint,
            metadata=loads(md_tb),
            parent_config=(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}} if parent else None
            ),
            pending_writes=[(w[0], w[1], self._load(w[2])) for w in _sorted_writes(writes_raw)],
        )

    def _record(self, raw: bytes) -> _Rec:
        """A checkpoint record parsed (either layout). Parsed records are
        kept by their bytes (bounded): get_tuple reads the same record again
        and again, and the bytes say whether it is the same."""
        with self._lock:
            got = self._records.get(raw)
        if got is not None:
            return got
        got = _parse_record(raw)
        with self._lock:
            self._records[raw] = got
            if len(self._records) > _RECORDS_KEPT:
                del self._records[next(iter(self._records))]
        return got

    def _tuple(self, thread_id: str, ns: str, cp_id: str, cfg: Optional[RunnableConfig] = None) -> Optional[CheckpointTuple]:
        sid = self.session_id(thread_id)
        ck, wk = _key("c", ns, cp_id), _key("w", ns, cp_id)
        got, _ = self._read(sid, [ck, wk])
        return self._make_tuple(sid, thread_id, ns, cp_id, got.get(ck), got.get(wk), cfg)

    def _values_of(self, sid: str, ns: str, rec: _Rec, versions: Mapping[str, Any]) -> Dict[str, Tuple[str, bytes]]:
        """The values of the channels in ``versions`` of the checkpoint whose
        record is ``rec``, as the serializer's (type, bytes), by channel: from
        the cache, the record itself, or one read of the records that hold
        the others (and their ``b<key>`` artifacts, which hold them in the
        first layout and once the record holding them is pruned)."""
        out: Dict[str, Tuple[str, bytes]] = {}
        miss: List[str] = []
        with self._lock:
            for ch, ver in versions.items():
                k = (sid, ns, ch, str(ver))
                tb = self._blobs.get(k)
                if tb is not None:
                    self._blobs[k] = self._blobs.pop(k)
                    out[ch] = tb
                else:
                    miss.append(ch)
        if not miss:
            return out
        ids: Dict[str, None] = {}
        keys: Dict[str, str] = {}
        rest: List[str] = []
        for ch in miss:
            sv = str(versions[ch])
            v = rec.vals.get(ch)
            if v is not None and v[0] == sv:
                out[ch] = v[1]
                self._remember((sid, ns, ch, sv), v[1])
                continue
            w = rec.at.get(ch)
            if w is not None:
                ids[_key("c", ns, w)] = None
            keys[ch] = _key("b", ns, ch, sv)
            ids[keys[ch]] = None
            rest.append(ch)
        if not rest:
            return out
        got, _ = self._read(sid, list(ids))
        for ch in rest:
            tb: Optional[Tuple[str, bytes]] = None
            w = rec.at.get(ch)
            raw = got.get(_key("c", ns, w)) if w is not None else None
            if raw is not None:
                v = self._record(raw).vals.get(ch)
                if v is not None and v[0] == str(versions[ch]):
                    tb = v[1]
            if tb is None:
                data = got.get(keys[ch])
                if data is None:
                    continue
                i = data.index(b"\0")
                tb = (data[:i].decode("utf-8"), data[i + 1 :])
            self._remember((sid, ns, ch, str(versions[ch])), tb)
            out[ch] = tb
        return out

    def _note_where(self, sid: str, ns: str, cp_id: str, rec: _Rec, versions: Mapping[str, Any]) -> None:
        """Remembers where the record ``rec`` of checkpoint ``cp_id`` says its
        channels' values are (for puts on top of it)."""
        if not rec.vals and not rec.at:
            return
        with self._lock:
            for ch, ver in versions.items():
                v = rec.vals.get(ch)
                if v is not None and v[0] == str(ver):
                    self._where[(sid, ns, ch, v[0])] = cp_id
                elif ch in rec.at:
                    self._where[(sid, ns, ch, str(ver))] = rec.at[ch]
            while len(self._where) > _WHERE_KEPT:
                del self._where[next(iter(self._where))]

    def _locate(self, sid: str, ns: str, cp: Checkpoint, new_versions: ChannelVersions, parent: Optional[str]) -> Dict[str, str]:
        """For each channel of ``cp`` a put does not store, the checkpoint
        whose record holds its value, as far as known: from what this saver
        stored or read, else from the parent's record (LangGraph's new
        versions are those that changed since the parent, so the parent
        names the others). A channel it cannot place is left out: its value
        is then a ``b<key>`` artifact (the first layout) or none."""
        at: Dict[str, str] = {}
        unknown: List[Tuple[str, str]] = []
        with self._lock:
            for ch, ver in cp["channel_versions"].items():
                if ch in new_versions:
                    continue
                k = (sid, ns, ch, str(ver))
                w = self._where.get(k)
                if w is None:
                    unknown.append((ch, str(ver)))
                else:
                    at[ch] = w
        if unknown and parent:
            got = self._artifact(sid, _key("c", ns, parent))
            if got is not None:
                rec = self._record(got[0])
                theirs = self.serde.loads_typed(rec.cp)["channel_versions"]
                for ch, ver in unknown:
                    if ch not in theirs or str(theirs[ch]) != ver:
                        continue
                    v = rec.vals.get(ch)
                    if v is not None and v[0] == ver:
                        at[ch] = parent
                    elif ch in rec.at:
                        at[ch] = rec.at[ch]
        return at

    def _remember(self, k: Tuple[str, str, str, str], tb: Tuple[str, bytes]) -> None:
        # A put replaces what the key held (a caller may store another
        # value under a version it used before, as the store does).
        n = len(tb[1])
        with self._lock:
            if k in self._blobs:
                self._blob_bytes -= len(self._blobs.pop(k)[1])
            if n > self.blob_cache_bytes // 4:
                return
            self._blobs[k] = tb
            self._blob_bytes += n
            while self._blob_bytes > self.blob_cache_bytes:
                old = self._blobs.pop(next(iter(self._blobs)))
                self._blob_bytes -= len(old[1])

    def _forget(self, sid: str) -> None:
        with self._lock:
            for k in [k for k in self._blobs if k[0] == sid]:
                self._blob_bytes -= len(self._blobs.pop(k)[1])
            for k in [k for k in self._heads if k[0] == sid]:
                del self._heads[k]

    def _writes(self, sid: str, ns: str, cp_id: str) -> Tuple[List[List[Any]], int]:
        """The checkpoint's pending writes in writes_sort_key order, and the
        generation they were read at (0: no such session)."""
        wk = _key("w", ns, cp_id)
        got, gen = self._read(sid, [wk])
        return _sorted_writes(got.get(wk)), gen

    def get_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        c = config["configurable"]
        thread_id = c["thread_id"]
        ns = c.get("checkpoint_ns", "")
        sid = self.session_prefix + str(thread_id)
        cp_id = get_checkpoint_id(config)
        if cp_id:
            return self._tuple(thread_id, ns, cp_id, config)
        # The head names the newest checkpoint. With the one this saver last
        # stored or read as a guess, the head, that checkpoint and its
        # writes come in one read; the guess is only used if the head still
        # names it (another process may have moved it on).
        hk = _key("h", ns)
        guess = self._heads.get((sid, ns))
        # In log order (a put writes the checkpoint, then the head; its
        # writes come later), so that cairn reads them in one span.
        ids = [_key("c", ns, guess), hk, _key("w", ns, guess)] if guess else [hk]
        got, _ = self._read(sid, ids)
        h = got.get(hk)
        if h is None:
            return None
        head = h.decode("utf-8")
        if head != guess:
            ck, wk = _key("c", ns, head), _key("w", ns, head)
            got, _ = self._read(sid, [ck, wk])
        self._heads[(sid, ns)] = head
        return self._make_tuple(sid, thread_id, ns, head, got.get(_key("c", ns, head)), got.get(_key("w", ns, head)))

    def _index(self, sid: str, first: int = _PAGE) -> Iterator[Tuple[int, Dict[str, Any]]]:
        """The session's index entries, newest first, with their message
        index, read from the tail a page at a time: ``first`` entries
        first (what a list's limit needs), then _PAGE at a time. A
        checkpoint put again (a retried put) has an entry per put: the
        newest stands for it, as the row a put replaces in SqliteSaver, and
        the older ones are skipped."""
        try:
            page = self.client.messages(sid, tail=max(1, min(first, _PAGE)))
        except NotFoundError:
            return
        seen: set[Tuple[str, str]] = set()
        while True:
            start = page["from"]
            for i, m in reversed(list(enumerate(page["messages"], start))):
                if (m["ns"], m["id"]) not in seen:
                    seen.add((m["ns"], m["id"]))
                    yield i, m
            if start == 0:
                return
            page = self.client.messages(sid, from_=max(0, start - _PAGE), to=start)

    def _thread_ids(self) -> List[str]:
        n = len(self.session_prefix)
        return sorted(s["session_id"][n:] for s in self.client.list_sessions() if s["session_id"].startswith(self.session_prefix))

    def list(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[Dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first. With a thread in ``config`` only the
        index of that thread is read, from its tail; ``config=None`` visits
        every thread."""
        if limit is not None and limit <= 0:
            return
        c = (config or {}).get("configurable", {})
        threads = [c["thread_id"]] if c.get("thread_id") is not None else self._thread_ids()
        ns_filter = c.get("checkpoint_ns")
        cp_filter = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        n = 0
        for tid in threads:
            sid = self.session_id(tid)
            batch: List[Dict[str, Any]] = []
            # Without filters the first entries are the answer.
            plain = ns_filter is None and not cp_filter and not before_id and not filter
            entries = self._index(sid, limit - n if plain and limit is not None else _PAGE)
            while True:
                # The matching entries are read a batch at a time (as many as
                # the limit still wants, at most _LIST_BATCH): one call for
                # their checkpoints and writes.
                want = _LIST_BATCH if limit is None else min(_LIST_BATCH, limit - n)
                for _, e in entries:
                    if ns_filter is not None and e["ns"] != ns_filter:
                        continue
                    if cp_filter and e["id"] != cp_filter:
                        continue
                    if before_id and e["id"] >= before_id:
                        continue
                    if filter:
                        md = self._load(e["md"])
                        if not all(md.get(k) == v for k, v in filter.items()):
                            continue
                    batch.append(e)
                    if len(batch) >= want:
                        break
                if not batch:
                    break
                ids = []
                for e in batch:
                    ids += [_key("c", e["ns"], e["id"]), _key("w", e["ns"], e["id"])]
                got, _ = self._read(sid, ids)
                for e in batch:
                    t = self._make_tuple(
                        sid, tid, e["ns"], e["id"], got.get(_key("c", e["ns"], e["id"])), got.get(_key("w", e["ns"], e["id"]))
                    )
                    if t is None:
                        continue
                    yield t
                    n += 1
                    if limit is not None and n >= limit:
                        return
                batch = []

    # -- writes --------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        c = config["configurable"]
        thread_id = c["thread_id"]
        ns = c.get("checkpoint_ns", "")
        sid = self.session_prefix + str(thread_id)
        cp = checkpoint.copy()
        values: Dict[str, Any] = cp.pop("channel_values")  # type: ignore[misc]
        cp_id = cp["id"]
        md = get_checkpoint_metadata(config, metadata)
        parent = c.get("checkpoint_id")
        dumps = self.serde.dumps_typed
        # The save request is written as JSON text here, piece by piece: the
        # artifacts' data is base64 already, so nothing is built twice or
        # scanned again by an encoder. The new channel values go into the
        # checkpoint's record.
        blobs = []
        payload = []
        for ch, ver in new_versions.items():
            sv = str(ver)
            tb = dumps(values[ch]) if ch in values else _EMPTY
            blobs.append((ch, sv, tb))
            payload.append(tb[1])
        cp_tb = dumps(cp)
        md_tb = dumps(md)
        versions = cp["channel_versions"]
        # A channel the put has no new version of is named in the record
        # with the checkpoint that holds its value.
        at = {} if versions.keys() <= new_versions.keys() else self._locate(sid, ns, cp, new_versions, parent)
        hkey = (sid, ns)
        pre = self._pre.get(hkey)
        if pre is None:
            pre = self._prefixes(hkey)
        # The quoted forms: names from a small set (channels, types) are
        # memoized; an id or a version is new (_quoted's own fast path).
        qs = _QS
        q_parent = "null" if parent is None else _quoted(parent)
        q_cp_id = _quoted(cp_id)
        vs = []
        for ch, sv, tb in blobs:
            q_ch = qs.get(ch) or _memo_quoted(ch)
            q_t = qs.get(tb[0]) or _memo_quoted(tb[0])
            vs.append("[%s,%s,%s,%d]" % (q_ch, _quoted(sv), q_t, len(tb[1])))
        q_mt = qs.get(md_tb[0]) or _memo_quoted(md_tb[0])
        hdr = '{"cp":[%s,%d],"md":[%s,%d],"parent":%s,"v":[%s]' % (
            qs.get(cp_tb[0]) or _memo_quoted(cp_tb[0]),
            len(cp_tb[1]),
            q_mt,
            len(md_tb[1]),
            q_parent,
            ",".join(vs),
        )
        if at:
            hdr += ',"at":{' + ",".join([_quoted(ch) + ":" + _quoted(w) for ch, w in at.items()]) + "}"
        rec = b"".join([_REC2, hdr.encode("utf-8", "backslashreplace"), b"}\n", cp_tb[1], md_tb[1], *payload])
        head = self._heads.get(hkey)
        if head is None or head >= cp_id:
            got = self._artifact(sid, pre.hk)
            head = got[0].decode("utf-8") if got else None
        moved = head is None or head < cp_id
        # The request as bytes around the record's base64, which is not
        # decoded into a str to be encoded back. The checkpoint's key is new
        # (no cache for it); under a plain namespace, with a plain id, it is
        # written straight into its quoted form.
        if len(cp_id) <= pre.ck_max and cp_id.isascii() and _plain(cp_id):
            q_ck = pre.ck + cp_id + '\\"]"'
        else:
            q_ck = _quoted(_new_key("c", ns, cp_id))
        post = '"}'
        if moved:
            post += pre.head + _b64(cp_id.encode("utf-8")) + '"}'
        run_id = md.get("run_id")
        # The index entry: {"ns", "id", "parent", "md"[, "run_id"]}.
        post += '%s%s,"parent":%s,"md":[%s,"%s"]' % (pre.entry, q_cp_id, q_parent, q_mt, _b64(md_tb[1]))
        if run_id:
            post += ',"run_id":' + _quoted(str(run_id))
        # Encoded as the client encodes a request (a lone surrogate becomes
        # its \u escape).
        req = b"".join([(pre.save + q_ck + _ART_DATA).encode("utf-8", "backslashreplace"), _b2a(rec, newline=False), (post + "}]}}").encode("utf-8", "backslashreplace")])
        call = getattr(self.client, "_call", None)
        if call is not None:
            # A Client: the request goes as it is, and the answer (the new
            # generation, which put does not need) is not decoded.
            call(b"save", req, False)
        else:
            self.client.save(sid, change=_json(req.decode("utf-8"))["change"])
        if moved:
            self._heads[hkey] = cp_id
        # Where the values are, and the values (the cache of _remember,
        # inline: one lock a put).
        cap = self.blob_cache_bytes
        with self._lock:
            where = self._where
            cache = self._blobs
            for ch, sv, tb in blobs:
                k = (sid, ns, ch, sv)
                where[k] = cp_id
                old = cache.pop(k, None)
                if old is not None:
                    self._blob_bytes -= len(old[1])
                n = len(tb[1])
                if n <= cap // 4:
                    cache[k] = tb
                    self._blob_bytes += n
            for ch, w in at.items():
                where[(sid, ns, ch, str(versions[ch]))] = w
            while len(where) > _WHERE_KEPT:
                del where[next(iter(where))]
            while self._blob_bytes > cap:
                old = cache.pop(next(iter(cache)))
                self._blob_bytes -= len(old[1])
        if run_id:
            self._note_run(str(run_id), thread_id)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cp_id}}

    def _prefixes(self, hkey: Tuple[str, str]) -> _Prefixes:
        """The request prefixes of puts to (session, namespace), made once
        and kept."""
        sid, ns = hkey
        hk = _key("h", ns)
        ck = ""
        ck_max = -1
        if _plain(ns) and ns.isascii():
            ck = '"c[\\"' + ns + '\\",\\"'
            # _key hashes an ASCII key only past 200 characters.
            ck_max = 200 - len('c["",""]') - len(ns)
        pre = _Prefixes(
            '{"session_id":' + _quoted(sid) + ',"change":{"put_artifacts":[{"id":',
            hk,
            ',{"id":' + _quoted(hk) + _ART_DATA,
            '],"append_messages":[{"ns":' + _quoted(ns) + ',"id":',
            ck,
            ck_max,
        )
        with self._lock:
            if len(self._pre) >= _RECORDS_KEPT:
                self._pre.clear()
            self._pre[hkey] = pre
        return pre

    def _note_run(self, run_id: str, thread_id: str) -> None:
        k = (run_id, thread_id)
        if k in self._runs_seen:
            return
        self.client.save(self.run_prefix + run_id, change={"append_messages": [{"thread_id": thread_id}]})
        self._runs_seen.add(k)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[Tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        c = config["configurable"]
        ns = c.get("checkpoint_ns", "")
        cp_id = c["checkpoint_id"]
        sid = self.session_id(c["thread_id"])
        replace = all(w[0] in WRITES_IDX_MAP for w in writes)
        new = [[task_id, ch, self._dump(v), task_path, WRITES_IDX_MAP.get(ch, i)] for i, (ch, v) in enumerate(writes)]
        # Read-modify-write of one artifact, made safe across processes by a
        # compare-and-swap on the session's generation.
        with self._lock:
            for _ in range(_CAS_TRIES):
                # gen 0: no session yet, which the save then requires.
                ws, gen = self._writes(sid, ns, cp_id)
                have = {(w[0], w[4]): i for i, w in enumerate(ws)}
                for w in new:
                    i = have.get((w[0], w[4]))
                    if i is None:
                        have[(w[0], w[4])] = len(ws)
                        ws.append(w)
                    elif replace:
                        ws[i] = w
                try:
                    self.client.save(
                        sid,
                        change={"put_artifacts": [self._art(_key("w", ns, cp_id), ws)]},
                        expect_generation=gen,
                    )
                    return
                except ConflictError:
                    continue
            raise ConflictError(f"put_writes: session {sid!r} kept changing; gave up after {_CAS_TRIES} tries")

    # -- deletes, copies, pruning -------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        sid = self.session_id(thread_id)
        self._forget(sid)
        try:
            self.client.delete(sid)
        except NotFoundError:
            pass

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """A cairn fork of the source session: every checkpoint, write and
        value is copied inside the engine."""
        src, dst = self.session_id(source_thread_id), self.session_id(target_thread_id)
        try:
            self.client.fork(src, dst)
        except NotFoundError:
            return
        runs = {e["run_id"] for _, e in self._index(dst) if e.get("run_id")}
        for r in runs:
            self._note_run(r, target_thread_id)

    def _rewrite(self, sid: str, keep: "callable") -> None:  # type: ignore[valid-type]
        """Drops the checkpoints whose index entry ``keep`` rejects, with
        their writes, in one save; values no kept checkpoint refers to go
        with them, and each namespace's head moves to its newest kept
        checkpoint. Reads the index, the artifact list and the kept
        checkpoints' records; a value a kept checkpoint refers to in a
        record that goes is kept as a ``b<key>`` artifact."""
        entries = [e for _, e in self._index(sid)]
        entries.reverse()
        kept = [e for e in entries if keep(e)]
        if len(kept) == len(entries):
            return
        heads: Dict[str, str] = {}
        for e in kept:
            if e["ns"] not in heads or heads[e["ns"]] < e["id"]:
                heads[e["ns"]] = e["id"]
        want = {_key("h", ns) for ns in heads}
        for e in kept:
            want.add(_key("c", e["ns"], e["id"]))
            want.add(_key("w", e["ns"], e["id"]))
        # The values the kept checkpoints refer to: in their own records, in
        # others' (kept, or copied out of them here), or b<key> artifacts.
        moved: Dict[str, Tuple[str, bytes]] = {}
        for e in kept:
            ns = e["ns"]
            got = self._artifact(sid, _key("c", ns, e["id"]))
            if got is None:
                continue
            rec = self._record(got[0])
            for ch, ver in self.serde.loads_typed(rec.cp)["channel_versions"].items():
                sv = str(ver)
                v = rec.vals.get(ch)
                if v is not None and v[0] == sv:
                    continue
                bk = _key("b", ns, ch, sv)
                want.add(bk)
                w = rec.at.get(ch)
                if w is None or _key("c", ns, w) in want or bk in moved:
                    continue
                held = self._artifact(sid, _key("c", ns, w))
                hv = self._record(held[0]).vals.get(ch) if held is not None else None
                if hv is not None and hv[0] == sv:
                    moved[bk] = hv[1]
        drop = [a["id"] for a in self.client.artifacts(sid)["artifacts"] if a["id"] not in want]
        self._forget(sid)
        self.client.save(
            sid,
            change={
                "truncate_messages": 0,
                "append_messages": kept,
                "delete_artifacts": drop,
                "put_artifacts": [
                    {"id": _key("h", ns), "kind": "langgraph", "data": cid.encode("utf-8")} for ns, cid in heads.items()
                ]
                + [{"id": k, "kind": "langgraph", "data": tb[0].encode("utf-8") + b"\0" + tb[1]} for k, tb in moved.items()],
            },
        )

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Deletes the checkpoints (and their writes) of the given runs, in
        the threads the runs wrote to."""
        runs = {str(r) for r in run_ids}
        for r in runs:
            rs = self.run_prefix + r
            threads = set()
            try:
                page = self.client.messages(rs)
                threads.update(m["thread_id"] for m in page["messages"])
                while page["more"]:
                    page = self.client.messages(rs, from_=page["next"])
                    threads.update(m["thread_id"] for m in page["messages"])
            except NotFoundError:
                continue
            for tid in threads:
                try:
                    self._rewrite(self.session_id(tid), lambda e: e.get("run_id") not in runs)
                except NotFoundError:
                    pass
            self.client.delete(rs)
            self._runs_seen = {k for k in self._runs_seen if k[0] != r}

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"`` keeps the newest checkpoint of each namespace
        (with its writes and values); ``"delete"`` deletes the threads."""
        for tid in thread_ids:
            if strategy == "delete":
                self.delete_thread(tid)
                continue
            if strategy != "keep_latest":
                raise ValueError(f"prune: unknown strategy {strategy!r}")
            sid = self.session_id(tid)
            heads: Dict[str, str] = {}
            try:
                for _, e in self._index(sid):
                    if e["ns"] not in heads or heads[e["ns"]] < e["id"]:
                        heads[e["ns"]] = e["id"]
                self._rewrite(sid, lambda e: heads.get(e["ns"]) == e["id"])
            except NotFoundError:
                pass

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, Any]:
        """Walks the parent chain once for all channels, reading each
        ancestor's checkpoint record and writes but only the seed values."""
        if not channels:
            return {}
        c = config["configurable"]
        thread_id = c["thread_id"]
        ns = c.get("checkpoint_ns", "")
        sid = self.session_id(thread_id)
        cp_id = get_checkpoint_id(config)
        if not cp_id:
            head = self._artifact(sid, _key("h", ns))
            cp_id = head[0].decode("utf-8") if head else None
        collected: Dict[str, List[Any]] = {ch: [] for ch in channels}
        seeds: Dict[str, Any] = {}
        remaining = set(channels)
        rec = self._artifact(sid, _key("c", ns, cp_id)) if cp_id else None
        cursor = self._record(rec[0]).parent if rec else None
        while cursor and remaining:
            ck, wk = _key("c", ns, cursor), _key("w", ns, cursor)
            got, _ = self._read(sid, [ck, wk])
            if ck not in got:
                break
            r = self._record(got[ck])
            ws = _sorted_writes(got.get(wk))
            for w in reversed(ws):
                if w[1] in remaining:
                    collected[w[1]].append((w[0], w[1], self._load(w[2])))
            versions = self.serde.loads_typed(r.cp)["channel_versions"]
            vals = self._values_of(sid, ns, r, {ch: versions[ch] for ch in remaining if ch in versions})
            for ch, tb in vals.items():
                if tb[0] != "empty":
                    seeds[ch] = self.serde.loads_typed(tb)
                    remaining.discard(ch)
            cursor = r.parent
        out: Dict[str, Any] = {}
        for ch in channels:
            entry: Dict[str, Any] = {"writes": list(reversed(collected[ch]))}
            if ch in seeds:
                entry["seed"] = seeds[ch]
            out[ch] = entry
        return out

    def get_next_version(self, current: Optional[str], channel: None = None) -> str:
        if current is None:
            v = 0
        elif isinstance(current, int):
            v = current
        else:
            v = int(current.split(".")[0])
        return f"{v + 1:032}.{random.random():016}"

    # -- async: the same calls on a worker thread -----------------------------

    async def aget_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[Dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> AsyncIterator[CheckpointTuple]:
        it = self.list(config, filter=filter, before=before, limit=limit)
        done = object()
        while True:
            t = await asyncio.to_thread(next, it, done)
            if t is done:
                return
            yield t  # type: ignore[misc]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[Tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, Any]:
        return await asyncio.to_thread(lambda: self.get_delta_channel_history(config=config, channels=channels))
