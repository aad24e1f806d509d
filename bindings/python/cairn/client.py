"""The synchronous cairn client over libcairn's C ABI (ctypes)."""

from __future__ import annotations

import base64
import binascii
import ctypes
import json
import math
import os
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Literal,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _lib, _wire
from .errors import CairnError, ConflictError, InvalidArgumentError, from_return

if TYPE_CHECKING:  # pragma: no cover
    from .runloop import RunLoop
from .types import (
    JSON,
    ArtifactData,
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
    StepFn,
    StepSpec,
    Summary,
    Usage,
    VerifyReport,
)

__all__ = ["Client", "Subscription", "Step", "StepLike", "connect", "version", "open_handles"]

PathLike = Union[str, "os.PathLike[str]"]

_c_void_p = ctypes.c_void_p
_c_size_t = ctypes.c_size_t
_byref = ctypes.byref
_string_at = ctypes.string_at
_loads = json.loads
# _scan is json.loads' parser without its Python-level wrappers (encoding
# detection, whitespace skipping): a few microseconds a call, cold, after
# the call into libcairn has evicted the caches.
_scan = json.JSONDecoder().scan_once


def _text_at() -> Optional[Callable[[int, int], str]]:
    # CPython decodes C memory straight into a str: a page of messages is
    # then copied once on its way to the parser, where string_at would copy
    # it into bytes first (and json.loads decode those).
    try:
        f = ctypes.pythonapi.PyUnicode_DecodeUTF8
    except (AttributeError, ValueError):  # not CPython
        return None
    f.restype = ctypes.py_object
    f.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_char_p]
    # surrogatepass, as json.loads decodes bytes.
    return lambda p, n: f(p, n, b"surrogatepass")  # type: ignore[no-any-return]


_decode_text = _text_at()


def _result(p: int, n: int) -> Any:
    """The JSON value of the n bytes of libcairn's answer at p, as
    json.loads would return it."""
    return _parse(_decode_text(p, n) if _decode_text is not None else _string_at(p, n).decode("utf-8", "surrogatepass"))


def _parse(s: str) -> Any:
    """json.loads(s)."""
    try:
        o, end = _scan(s, 0)
        if end == len(s):
            return o
    except StopIteration:
        pass
    # Not one bare JSON value: json.loads skips the whitespace, or raises
    # its error.
    return _loads(s)


# _RESULT_BUF is the size of the buffers cairn_call_buf writes results of
# up to that many bytes into (a save's or a checkpoint's answer is a few
# dozen): those cost no call to cairn_free and no ctypes call to read them.
_RESULT_BUF = 512


class _Out:
    """The out-parameters of one cairn_call_buf, reused through _outs:
    making the ctypes objects and their byrefs costs about a microsecond."""

    __slots__ = ("r", "n", "e", "buf", "args")

    def __init__(self) -> None:
        self.r = _c_void_p()
        self.n = _c_size_t()
        self.e = _c_void_p()
        self.buf = ctypes.create_string_buffer(_RESULT_BUF)
        self.args = (self.buf, _RESULT_BUF, _byref(self.r), _byref(self.n), _byref(self.e))


# _outs holds the _Outs no call is using. A call pops one (or makes one)
# and puts it back when done; list.pop and list.append are atomic, so no
# two calls share one, whether they run on other threads or in a signal
# handler that interrupted a call on this one. It keeps as many as ran at
# once, up to _OUTS_KEPT.
_outs: List[_Out] = []
_OUTS_KEPT = 64

# _PAGE_BYTES is iter_messages' default page size (message bytes).
_PAGE_BYTES = 4 << 20


def _default(o: Any) -> Any:
    # Binary artifact data travels as base64 text.
    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(o).decode("ascii")
    if isinstance(o, (tuple, set, frozenset)):
        return list(o)
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


_c_make_encoder = json.encoder.c_make_encoder
_encode_basestring = json.encoder.encode_basestring

# _LONG_STR is the length from which _encode_str looks for characters to
# escape itself; below it json's own function is quicker.
_LONG_STR = 256
# _ESCAPED holds the ASCII characters JSON escapes: the controls, the quote
# and the backslash.
_ESCAPED = bytes(range(0x20)) + b'"\\'


def _encode_str(s: str) -> str:
    # json.encoder.encode_basestring, quicker on long ASCII text: json's C
    # function reads a string character by character, twice (about 2.6 ns a
    # character here: 21 us of an agent turn's 8 KB of message text), while
    # bytes.translate deletes the characters that need escaping in a single
    # table pass. When it deleted none, the text goes between quotes as it
    # is. Anything else (short, non-ASCII, a str subclass, which may
    # override the methods used here) is json's to encode.
    if type(s) is str and len(s) >= _LONG_STR and s.isascii():
        b = s.encode("ascii")
        if len(b.translate(None, _ESCAPED)) == len(b):
            return '"' + s + '"'
    return _encode_basestring(s)  # type: ignore[no-any-return]


def _encode_c(o: Any, allow_nan: bool = True) -> str:
    # JSONEncoder(ensure_ascii=False, separators=(",", ":"),
    # default=_default, allow_nan=allow_nan).encode without its
    # Python-level wrappers: the same C encoder, made with the same
    # arguments (markers: a fresh dict, as check_circular wants), except
    # that strings go through _encode_str.
    if isinstance(o, str):
        return _encode_str(o)
    return "".join(_c_make_encoder({}, _default, _encode_str, None, ":", ",", False, False, allow_nan)(o, 0))


_encode_std = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_default).encode
_encode_std_finite = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_default, allow_nan=False).encode


def _c_encoder_agrees() -> bool:
    # c_make_encoder is json's private entry point: on a Python whose
    # arguments for it differ, the public encoder is used instead of
    # failing (or, worse, encoding differently) on every call.
    probe = {"a": [1, 2.5, None, True, "é\n\"\\"], "b": {"c": ""}}
    try:
        return _c_make_encoder is not None and _encode_c(probe) == _encode_std(probe)
    except Exception:
        return False


_encode: Callable[[Any], str] = _encode_c if _c_encoder_agrees() else _encode_std


def _dumps(o: Any) -> bytes:
    # A lone surrogate becomes the JSON escape \udXXX (what ensure_ascii
    # would write), so any Python str encodes.
    return _encode(o).encode("utf-8", "backslashreplace")


def _dumps_finite(o: Any) -> bytes:
    """_dumps, except that a NaN or an infinity raises ValueError instead
    of being written as NaN or Infinity, which are not JSON (libcairn
    refuses a request holding them)."""
    s = _encode_c(o, False) if _encode is _encode_c else _encode_std_finite(o)
    return s.encode("utf-8", "backslashreplace")


def _params(p: Dict[str, Any], **optional: Any) -> bytes:
    """Encodes the params p plus every optional one that is set (neither
    None nor the empty string)."""
    p.update({k: v for k, v in optional.items() if v is not None and not (isinstance(v, str) and v == "")})
    return _dumps(p)


def _artifact_data(a: Dict[str, Any]) -> ArtifactData:
    """The artifact a with its base64 data decoded to bytes (b"" when it has
    none)."""
    a["data"] = base64.b64decode(a.get("data") or b"")
    return a  # type: ignore[return-value]


def _take_error(lib: ctypes.CDLL, rc: int, e: ctypes.c_void_p) -> CairnError:
    p = e.value
    raw = None
    if p:
        raw = _string_at(p)
        lib.cairn_free(p)
    return from_return(rc, raw)


def version() -> str:
    """The version of the loaded libcairn (e.g. ``"0.1.0"``)."""
    v = _lib.load().cairn_version()
    return v.decode("utf-8") if v else ""


def open_handles() -> int:
    """How many libcairn handles are open in this process (for leak checks)."""
    return int(_lib.load().cairn_open_handles())


def _close_handle(lib: ctypes.CDLL, handle: int) -> None:
    # Finalizer for a Client that was never closed; errors (a forked child,
    # an already closed handle) are ignored.
    try:
        lib.cairn_close(handle, None)
    except Exception:  # pragma: no cover
        pass


def _workspace_of(ref: "weakref.ReferenceType[Client]") -> Optional[str]:
    # The workspace of the Client ref refers to, for its wire connection.
    c = ref()
    return None if c is None or c.closed else c.workspace


class Step(NamedTuple):
    """One step of :meth:`Client.parallel_resumable`.

    ``identity`` is a digest of the step's spec: rerunning a workflow with a
    completed step whose identity changed fails with
    :class:`~cairn.StepIdentityChangedError` before anything runs.
    """

    step_id: str
    identity: str
    fn: StepFn


#: A Step, a (step_id, identity, fn) tuple, or a mapping with those keys.
StepLike = Union[Step, Tuple[str, str, StepFn], Mapping[str, Any]]


def _step(s: StepLike) -> Step:
    if isinstance(s, Step):
        return s
    if isinstance(s, Mapping):
        try:
            return Step(str(s["step_id"]), str(s["identity"]), s["fn"])
        except KeyError as e:
            raise TypeError(f"step spec needs step_id, identity and fn: missing {e}") from None
    step_id, identity, fn = s
    return Step(step_id, identity, fn)


def _steps(specs: Iterable[StepLike]) -> List[Step]:
    steps = [_step(s) for s in specs]
    for s in steps:
        if not callable(s.fn):
            raise TypeError(f"step {s.step_id!r}: fn is not callable")
    return steps


class Client:
    """A handle on a cairn workspace, in daemon or embedded mode.

    Create one with :func:`connect`. Every method is safe to call from many
    threads at once. Use it as a context manager, or call :meth:`close`.
    Methods raise :class:`~cairn.CairnError` subclasses.

    The fork rule: libcairn's Go runtime does not survive ``fork()`` without
    ``exec()``. A client used in a forked child raises
    :class:`~cairn.ForkedError`; open clients in the process that uses them
    (after forking workers, or in the exec'd child).
    """

    def __init__(
        self,
        lib: ctypes.CDLL,
        handle: int,
        workspace: Optional[str],
        embedded: bool,
        call_timeout: Optional[float] = None,
    ) -> None:
        self._lib = lib
        self._h = handle
        self._fn = lib.cairn_call
        self._fn_buf = getattr(lib, "cairn_call_buf", None)  # None: an older libcairn
        self._free = lib.cairn_free
        self._workspace = workspace
        self.embedded = embedded
        self._close_lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_handle, lib, handle)
        # _wire is daemon mode's own connection for checkpoint (cairn/_wire.py).
        self._wire: Optional[_wire.Wire] = None
        if not embedded and _wire.enabled():
            ref = weakref.ref(self)
            self._wire = _wire.Wire(lambda: _workspace_of(ref), call_timeout)
            weakref.finalize(self, self._wire.close)

    # -- plumbing ---------------------------------------------------------

    @property
    def handle(self) -> int:
        """The libcairn handle number."""
        return self._h

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def workspace(self) -> Optional[str]:
        """The workspace's absolute path. When :func:`connect` discovered it,
        the library is asked once (daemon mode: a round trip), so a connect
        that never needs it pays nothing; None once closed before asking."""
        if self._workspace is None and not self._closed:
            self._workspace = str(self.status()["workspace"])
        return self._workspace

    def _call(self, method: bytes, req: Optional[bytes], decode: bool = True) -> Any:
        # decode=False: a call whose result ({}) is not needed.
        fn = self._fn_buf
        if fn is None:
            return self._call_alloc(method, req, decode)
        try:
            o = _outs.pop()
        except IndexError:
            o = _Out()
        try:
            rc = fn(self._h, method, req, len(req) if req else 0, *o.args)
            if rc:
                raise _take_error(self._lib, rc, o.e)
            p = o.r.value
            if p is None:  # the result is in o.buf
                return _parse(o.buf[: o.n.value].decode("utf-8", "surrogatepass")) if decode else None
            try:
                return _result(p, o.n.value) if decode else None
            finally:
                self._free(p)
        finally:
            if len(_outs) < _OUTS_KEPT:
                _outs.append(o)

    def _call_alloc(self, method: bytes, req: Optional[bytes], decode: bool = True) -> Any:
        # _call through cairn_call: every result in memory to free.
        r = _c_void_p()
        n = _c_size_t()
        e = _c_void_p()
        rc = self._fn(self._h, method, req, len(req) if req else 0, _byref(r), _byref(n), _byref(e))
        if rc:
            raise _take_error(self._lib, rc, e)
        p = r.value
        if not p:
            return None
        try:
            return _result(p, n.value) if decode else None
        finally:
            self._free(p)

    # _read is _call for a read whose answer may be large (a page of
    # messages); _call decodes C memory straight into a str for every answer.
    _read = _call

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None) -> Any:
        """Calls any C-API method by name with JSON params; returns the decoded result."""
        return self._call(method.encode("utf-8"), None if params is None else _dumps(params))

    def close(self) -> None:
        """Closes the handle. Embedded mode releases the workspace lock; daemon
        mode closes the connection (the daemon keeps running). Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._finalizer.detach()
        if self._wire is not None:
            self._wire.close()
        e = _c_void_p()
        rc = self._lib.cairn_close(self._h, _byref(e))
        if rc:
            raise _take_error(self._lib, rc, e)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "embedded" if self.embedded else "daemon"
        state = " closed" if self._closed else ""
        return f"<cairn.Client {mode} {self._workspace!r} handle={self._h}{state}>"

    # -- status -----------------------------------------------------------

    def status(self) -> LibStatus:
        """``{mode, version, workspace, pid, daemon?}``; ``daemon`` (daemon
        mode) is the daemon's status, with its ``pid``."""
        return self._call(b"status", None)  # type: ignore[no-any-return]

    def hello(self) -> HelloResult:
        """The daemon's (or the embedded engine's) hello: versions, capabilities."""
        return self._call(b"hello", None)  # type: ignore[no-any-return]

    # -- sessions ---------------------------------------------------------

    def save(
        self,
        session_id: str,
        snapshot: Optional[Mapping[str, Any]] = None,
        *,
        change: Optional[Mapping[str, Any]] = None,
        expect_generation: Optional[int] = None,
    ) -> SaveResult:
        """Saves a whole ``snapshot`` or a delta ``change`` (exactly one).

        ``change`` fields: ``append_messages``, ``append_traces``,
        ``append_artifacts``, ``upsert_runs``, ``metadata``, ``agent``,
        ``handoff``, ``replace``, ``truncate_messages``,
        ``delete_artifacts``, ``put_artifacts``, ... (:class:`~cairn.types.Change`).
        ``truncate_messages: i`` keeps the first i messages, before
        ``append_messages`` is applied: both together replace the messages
        from i on. ``delete_artifacts`` applies before ``append_artifacts``,
        ``put_artifacts`` (insert or replace by id) after it. Appending an
        artifact id the session holds raises :class:`~cairn.ConflictError`
        naming it; truncating past the end
        :class:`~cairn.InvalidArgumentError`; deleting a missing artifact
        :class:`~cairn.NotFoundError`. With ``expect_generation`` the save is a
        compare-and-swap (0: the session must not exist yet); a mismatch
        raises :class:`~cairn.ConflictError`.
        """
        req = _params({"session_id": session_id}, snapshot=snapshot, change=change, expect_generation=expect_generation)
        return self._call(b"save", req)  # type: ignore[no-any-return]

    def resume_session(
        self,
        session_id: str,
        *,
        messages_tail: Optional[int] = None,
        artifacts: Literal["full", "metadata", "none"] = "full",
        traces: Literal["all", "none"] = "all",
        drift: bool = True,
        processes: bool = True,
    ) -> ResumeSessionResult:
        """The session's snapshot, generation, workspace drift, interrupted
        runs, and the state of its recorded processes (``processes``, from
        their health checks run now; nothing is restarted).

        The options narrow the answer: ``messages_tail`` keeps the last N
        messages (``messages_from`` and ``message_count`` say which of how
        many); ``artifacts`` ``"full"``, ``"metadata"`` (no data) or
        ``"none"``; ``traces`` ``"all"`` or ``"none"``; ``drift=False`` skips
        the workspace comparison (``drift.tracked`` is then False) and
        ``processes=False`` the health checks. The defaults answer the
        whole session, as before.
        """
        p: Dict[str, Any] = {"session_id": session_id}
        # Only what differs from the defaults is sent.
        if messages_tail is not None:
            p["messages_tail"] = messages_tail
        if artifacts != "full":
            p["artifacts"] = artifacts
        if traces != "all":
            p["traces"] = traces
        if not drift:
            p["drift"] = False
        if not processes:
            p["processes"] = False
        return self._read(b"resumeSession", _dumps(p))  # type: ignore[no-any-return]

    # -- targeted reads: each costs what it returns -----------------------

    def summary(self, session_id: str) -> Summary:
        """The session's generation, counts, sizes and times; no content."""
        return self._call(b"summary", _dumps({"session_id": session_id}))  # type: ignore[no-any-return]

    def messages(
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
        """A page of the session's messages: ``[from_, to)`` by index (default
        all), or the last ``tail``, or those added after generation
        ``since_generation``. ``limit`` (count) and ``max_bytes`` (message
        bytes) cut the page short, never below one message. The page holds
        messages ``from`` .. ``next - 1`` of ``total``; when ``more``, ask
        again with ``from_=page["next"]`` (the same ``to``, and no ``tail``
        or ``since_generation``: they are not combined with ``from_``) for
        the rest.
        """
        req = _params(
            {"session_id": session_id},
            tail=tail,
            to=to,
            since_generation=since_generation,
            limit=limit,
            max_bytes=max_bytes,
            **{"from": from_},
        )
        return self._read(b"messages", req)  # type: ignore[no-any-return]

    def iter_messages(
        self,
        session_id: str,
        *,
        from_: Optional[int] = None,
        to: Optional[int] = None,
        max_bytes: Optional[int] = None,
    ) -> Iterator[Any]:
        """Yields the session's messages ``[from_, to)`` (default: all), reading
        them in pages of :meth:`messages` of ``max_bytes`` of messages
        (default 4 MiB: pages of a few MiB read fastest, where a page as
        large as the reply limit allows spends its time allocating memory).
        ``list(c.iter_messages(sid))`` is the whole conversation, however
        large, where one :meth:`resume_session` would be too large.

        The pages are of one generation: the range is fixed by the first page
        (``to`` defaults to its ``total``), and a commit between two pages
        raises :class:`~cairn.ConflictError` (read again).
        """
        if max_bytes is None:
            max_bytes = _PAGE_BYTES
        page = self.messages(session_id, from_=from_, to=to, max_bytes=max_bytes)
        gen, end = page["generation"], to if to is not None else page["total"]
        while True:
            yield from page["messages"]
            if not page["more"] or page["next"] >= end:
                return
            page = self.messages(session_id, from_=page["next"], to=end, max_bytes=max_bytes)
            if page["generation"] != gen:
                raise ConflictError(
                    "conflict",
                    f"session {session_id!r} went from generation {gen} to {page['generation']} while its messages were read in pages",
                )

    def artifact(self, session_id: str, artifact_id: str) -> ArtifactDataResult:
        """One artifact with its data, decoded to bytes (``["artifact"]["data"]``).
        An id the session does not hold raises :class:`~cairn.NotFoundError`."""
        r = self._call(b"artifact", _dumps({"session_id": session_id, "artifact_id": artifact_id}))
        _artifact_data(r["artifact"])
        return r  # type: ignore[no-any-return]

    def artifacts(self, session_id: str) -> ArtifactsResult:
        """The session's artifacts without their data: id, kind, name, media
        type, run, sha256, size, path and metadata."""
        return self._call(b"artifacts", _dumps({"session_id": session_id}))  # type: ignore[no-any-return]

    def artifacts_by_id(self, session_id: str, artifact_ids: List[str]) -> ArtifactsByIDDataResult:
        """The named artifacts the session holds, with their data decoded to
        bytes, in the order named, all from one generation; ids it does not
        hold are skipped. At most 1,024 distinct ids. ``next`` is how many of
        ``artifact_ids`` the answer covers: all of them unless the next
        artifact would have passed the reply size limit, in which case ask
        again for ``artifact_ids[next:]``."""
        r = self._read(b"artifactsByID", _dumps({"session_id": session_id, "artifact_ids": artifact_ids}))
        for a in r["artifacts"]:
            a["data"] = binascii.a2b_base64(a.get("data") or b"")
        return r  # type: ignore[no-any-return]

    def run(self, run_id: str, session_id: Optional[str] = None) -> RunResult:
        """One run with its latest loop checkpoint (``checkpoint``, when it has
        one) and the run that resumed it (``resumed_as``, if any). A
        ``session_id`` that does not record the run raises
        :class:`~cairn.NotOwnerError`."""
        return self._call(b"run", _params({"run_id": run_id}, session_id=session_id))  # type: ignore[no-any-return]

    def runs(self, session_id: str) -> RunsResult:
        """The session's runs."""
        return self._call(b"runs", _dumps({"session_id": session_id}))  # type: ignore[no-any-return]

    def run_events(
        self,
        run_id: str,
        session_id: Optional[str] = None,
        *,
        from_: Optional[int] = None,
        since_generation: Optional[int] = None,
        limit: Optional[int] = None,
        max_bytes: Optional[int] = None,
    ) -> RunEventsResult:
        """A page of the run's events: its traces and its kept loop
        checkpoints, in commit order, from index ``from_`` (or those committed
        after ``since_generation``), cut short by ``limit`` and ``max_bytes``.
        Paged as :meth:`messages`."""
        req = _params(
            {"run_id": run_id},
            session_id=session_id,
            since_generation=since_generation,
            limit=limit,
            max_bytes=max_bytes,
            **{"from": from_},
        )
        return self._call(b"runEvents", req)  # type: ignore[no-any-return]

    def list_sessions(self) -> List[Summary]:
        """Summaries of every session in the workspace."""
        return self._call(b"list", None)["sessions"]  # type: ignore[no-any-return]

    def delete(self, session_id: str) -> None:
        self._call(b"delete", _dumps({"session_id": session_id}), decode=False)

    def fork(self, session_id: str, new_id: str, at_generation: Optional[int] = None) -> ForkResult:
        """Copies a session (at a generation; default latest) to ``new_id``."""
        req = _params({"session_id": session_id, "new_id": new_id}, at_generation=at_generation or None)
        return self._call(b"fork", req)  # type: ignore[no-any-return]

    def export(self, session_id: str) -> Envelope:
        """The session's portable JSON envelope."""
        return self._call(b"export", _dumps({"session_id": session_id}))["envelope"]  # type: ignore[no-any-return]

    def import_(self, envelope: Union[Mapping[str, Any], str, bytes]) -> ImportResult:
        """Imports an envelope (or a bare session snapshot): a dict, or its JSON text."""
        if isinstance(envelope, str):
            envelope = envelope.encode("utf-8")
        if isinstance(envelope, (bytes, bytearray)):
            req = b'{"envelope":' + bytes(envelope) + b"}"
        else:
            req = _dumps({"envelope": envelope})
        return self._call(b"import", req)  # type: ignore[no-any-return]

    def export_file(self, session_id: str, path: PathLike) -> ExportFileResult:
        """Writes the session's envelope to the file ``path`` as it goes (no
        size limit: nothing is built in memory), where the engine runs. The
        file is replaced only once it is whole."""
        req = _dumps({"session_id": session_id, "path": os.path.abspath(os.fspath(path))})
        return self._call(b"exportFile", req)  # type: ignore[no-any-return]

    def import_file(self, path: PathLike) -> ImportResult:
        """Imports the envelope in the file ``path`` (as :meth:`export_file`
        writes it), read where the engine runs."""
        return self._call(b"importFile", _dumps({"path": os.path.abspath(os.fspath(path))}))  # type: ignore[no-any-return]

    # -- verify and repair -------------------------------------------------

    def verify(self, *, secrets: bool = False) -> VerifyReport:
        """Reads and checks every record of every log the store keeps (and
        the workspace manifests): what it checked, each damaged or unreadable
        file (``problems``; ``ok`` when none) and what quarantine holds.
        With ``secrets``, also scans every session's content for
        credential-shaped strings and says where each is (``secrets``),
        redacted; nothing is changed."""
        return self._call(b"verify", _dumps({"secrets": True}) if secrets else None)  # type: ignore[no-any-return]

    def repair(
        self,
        session_id: Optional[str] = None,
        *,
        workflow_id: Optional[str] = None,
        apply: bool = False,
    ) -> RepairReport:
        """Salvages the damaged log of one session (or, with ``workflow_id``,
        one workflow): keeps what can be proven intact and says what it
        cannot keep (``lost``). Writes nothing unless ``apply``; with it, the
        original bytes are kept in ``quarantine``. Name one of the two ids."""
        req = _params({}, session_id=session_id, workflow_id=workflow_id, apply=apply or None)
        return self._call(b"repair", req)  # type: ignore[no-any-return]

    def handoff(self, session_id: str) -> HandoffResult:
        """HANDOFF.md (``markdown``) rendered from the session's latest
        generation, the required parts it lacks (``missing``; ``complete``
        when none) and the files changed in the session (``files``)."""
        return self._call(b"handoff", _dumps({"session_id": session_id}))  # type: ignore[no-any-return]

    # -- runtime and workspace --------------------------------------------

    def runtime_check(self, session_id: str, timeout_ms: Optional[int] = None) -> RuntimeCheckResult:
        """Runs the health check of every process the session records, now
        (``timeout_ms`` each; default the engine's), and reports each preview
        with its process's state. Starts nothing."""
        req = _params({"session_id": session_id}, timeout_ms=timeout_ms)
        return self._call(b"runtime.check", req)  # type: ignore[no-any-return]

    def runtime_restart(self, session_id: str, name: str, timeout_ms: Optional[int] = None) -> RestartResult:
        """Brings the recorded process ``name`` back where the engine runs (the
        daemon, or this process when embedded), unless its health check
        passes (``outcome`` ``"already_healthy"``). ``timeout_ms`` bounds the
        wait for the health check. A process that does not come up is
        ``outcome`` ``"failed"`` with ``error``, not an exception; an unknown
        session or process raises :class:`~cairn.NotFoundError`."""
        req = _params({"session_id": session_id, "name": name}, timeout_ms=timeout_ms)
        return self._call(b"runtime.restart", req)  # type: ignore[no-any-return]

    def changes(self, since: Optional[str] = None) -> ChangeSet:
        """The workspace paths changed after the clock ``since`` (every path,
        as added, with ``fresh_instance``, when ``since`` is None or unknown),
        and the ``clock`` to pass next time. Raises
        :class:`~cairn.UnavailableError` when the workspace is not tracked."""
        return self._call(b"changes", _params({}, since=since))  # type: ignore[no-any-return]

    # -- runs -------------------------------------------------------------

    def begin_run(self, session_id: str, run_id: Optional[str] = None) -> BeginRunResult:
        """Starts a run; the engine picks a unique ``run_id`` when none is given."""
        req = _params({"session_id": session_id}, run_id=run_id)
        return self._call(b"beginRun", req)  # type: ignore[no-any-return]

    def checkpoint(
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
        """Records the boundary after a completed tool turn. ``usage`` and
        ``tool_calls_count`` are the run's totals so far."""
        if type(new_messages) is not list:
            new_messages = list(new_messages)
        w = self._wire
        if w is not None:
            # Daemon mode sends it itself when it can (cairn/_wire.py);
            # None: through libcairn, as before.
            r = w.checkpoint(
                lambda: _wire.encode_checkpoint(_dumps_finite, run_id, turn, new_messages, usage, tool_calls_count, state, session_id)
            )
            if r is not None:
                return r  # type: ignore[return-value]
        # _params' rule (an optional value is sent unless None or ""),
        # written out: a turn's every call pays for it, about 2.5 us cold.
        # The caller's list is only read: no copy of it.
        p: Dict[str, Any] = {
            "run_id": run_id,
            "turn": turn,
            "new_messages": new_messages,
            "tool_calls_count": tool_calls_count,
        }
        if usage is not None and not (isinstance(usage, str) and usage == ""):
            p["usage"] = usage
        if state is not None and not (isinstance(state, str) and state == ""):
            p["state"] = state
        if session_id is not None and not (isinstance(session_id, str) and session_id == ""):
            p["session_id"] = session_id
        return self._call(b"checkpoint", _dumps(p))  # type: ignore[no-any-return]

    def complete_run(
        self,
        run_id: str,
        status: str,
        usage: Optional[Usage] = None,
        tool_calls_count: Optional[int] = None,
        *,
        session_id: Optional[str] = None,
    ) -> CompleteRunResult:
        """Ends a run with ``status`` ``"completed"``, ``"failed"`` or ``"interrupted"``."""
        req = _params({"run_id": run_id, "status": status}, usage=usage, tool_calls_count=tool_calls_count, session_id=session_id)
        return self._call(b"completeRun", req)  # type: ignore[no-any-return]

    def resume_run(
        self, run_id: str, session_id: Optional[str] = None, new_run_id: Optional[str] = None,
        takeover: bool = False,
    ) -> ResumeRunResult:
        """Resumes a run from its latest loop checkpoint as a new run (takeover: on a
        shared store, take the run from a host that still holds it, because it is gone)."""
        req = _params({"run_id": run_id}, session_id=session_id, new_run_id=new_run_id, takeover=takeover or None)
        return self._call(b"resumeRun", req)  # type: ignore[no-any-return]

    # -- workflows --------------------------------------------------------

    def begin_workflow(
        self,
        workflow_id: str,
        steps: Sequence[Union[StepSpec, StepLike, Tuple[str, str]]],
        session_id: Optional[str] = None,
    ) -> BeginWorkflowResult:
        """Opens (or reopens) a workflow; returns the steps already completed."""
        specs = [
            {"step_id": s["step_id"], "identity": s["identity"]}
            if isinstance(s, Mapping)
            else {"step_id": s[0], "identity": s[1]}  # Step or (step_id, identity[, fn])
            for s in steps
        ]
        req = _params({"workflow_id": workflow_id, "steps": specs}, session_id=session_id)
        return self._call(b"beginWorkflow", req)  # type: ignore[no-any-return]

    def complete_step(
        self,
        workflow_id: str,
        step_id: str,
        identity: str,
        result: JSON = None,
        session_id: Optional[str] = None,
    ) -> None:
        """Records one successful step and its (JSON) result."""
        req = _params({"workflow_id": workflow_id, "step_id": step_id, "identity": identity}, result=result, session_id=session_id)
        self._call(b"completeStep", req, decode=False)

    def finish_workflow(self, workflow_id: str) -> None:
        self._call(b"finishWorkflow", _dumps({"workflow_id": workflow_id}), decode=False)

    def parallel_resumable(
        self,
        specs: Iterable[StepLike],
        workflow_id: str,
        *,
        session_id: Optional[str] = None,
        max_workers: Optional[int] = None,
    ) -> List[Any]:
        """Runs a resumable workflow's remaining steps concurrently.

        ``specs`` are :class:`Step` values (or ``(step_id, identity, fn)``
        tuples, or mappings with those keys). The workflow is begun with the
        specs' ids and identities (so :class:`~cairn.StepIdentityChangedError`
        is raised before anything runs); every step not yet completed runs on
        a thread pool, and each success is recorded as it lands. Returns the
        results in spec order: recorded ones (decoded from JSON) for steps
        completed earlier, ``fn()``'s return value for the others. If a step
        fails, the others still finish (and are recorded), then the first
        failure is raised: a rerun runs only the steps that did not succeed.
        The workflow is not finished; call :meth:`finish_workflow`.
        """
        steps = _steps(specs)
        begun = self.begin_workflow(workflow_id, steps, session_id)
        recorded = {r["step_id"]: r.get("result") for r in begun["completed"]}
        results: List[Any] = [None] * len(steps)
        todo: List[int] = []
        for i, s in enumerate(steps):
            if s.step_id in recorded:
                results[i] = recorded[s.step_id]
            else:
                todo.append(i)
        if not todo:
            return results

        def run(i: int) -> Any:
            s = steps[i]
            v = s.fn()
            self.complete_step(workflow_id, s.step_id, s.identity, v, session_id)
            return v

        failures: List[BaseException] = []
        failures_lock = threading.Lock()

        def landed(f: "Future[Any]") -> None:
            exc = f.exception()
            if exc is not None:
                with failures_lock:
                    failures.append(exc)

        workers = max_workers or min(len(todo), 32)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"cairn-{workflow_id}") as pool:
            futures = {}
            for i in todo:
                f = pool.submit(run, i)
                f.add_done_callback(landed)
                futures[i] = f
            wait(list(futures.values()))
        if failures:
            raise failures[0]
        for i, f in futures.items():
            results[i] = f.result()
        return results

    def start_run(
        self,
        session_id: str,
        *,
        resume: bool = False,
        run_id: Optional[str] = None,
        on_error: Literal["resume", "fail"] = "resume",
    ) -> "RunLoop":
        """A run of the host's own loop that checkpoints every tool turn:
        ``with client.start_run("s1", resume=True) as run: ... run.turn(msgs,
        usage=..., tool_calls=...)``. ``resume`` picks up the session's
        interrupted run (else begins one); a clean exit completes the run,
        an exception leaves it resumable (``on_error="fail"``: ends it
        failed). See :mod:`cairn.runloop`."""
        from .runloop import RunLoop

        return RunLoop(self, session_id, resume=resume, run_id=run_id, on_error=on_error)

    # -- events -----------------------------------------------------------

    def subscribe(self, events: Optional[Iterable[str]] = None, *, poll_interval: float = 0.5) -> "Subscription":
        """Subscribes to events (all, or the named types: ``session.committed``,
        ``session.deleted``, ``run.checkpointed``, ``run.completed``,
        ``run.resumed``, ``workflow.step_completed``).

        Returns an iterator of :class:`~cairn.types.Event` in commit order;
        closing it (or the client) unsubscribes and ends the iteration. It
        waits for events in slices of ``poll_interval`` seconds, so Ctrl-C is
        seen between slices.
        """
        p: Dict[str, Any] = {}
        if events is not None:
            p["events"] = list(events)
        r = self._call(b"subscribe", _dumps(p) if p else None)
        return Subscription(self, int(r["subscription"]), poll_interval)


class Subscription(Iterator[Event]):
    """An iterator of events from :meth:`Client.subscribe`.

    ``dropped`` counts events the library dropped because this subscription
    fell too far behind.
    """

    def __init__(self, client: Client, sub_id: int, poll_interval: float) -> None:
        self._client = client
        self.id = sub_id
        self._poll_ms = max(1, int(poll_interval * 1000))
        self._closed = False
        self.dropped = 0

    @property
    def closed(self) -> bool:
        return self._closed

    def _next(self, timeout_ms: int) -> Optional[Event]:
        try:
            r = self._client._call(
                b"nextEvent", b'{"subscription":%d,"timeout_ms":%d}' % (self.id, max(1, timeout_ms))
            )
        except CairnError as e:
            if e.code != "bad_handle":
                raise
            # The client was closed: so is the subscription.
            self._closed = True
            return None
        self.dropped = r.get("dropped", 0)
        if r.get("closed"):
            self._closed = True
            return None
        return r.get("event")  # type: ignore[no-any-return]

    def next_event(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event, or None when ``timeout`` seconds pass first (None:
        wait as long as it takes) or the subscription is closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._closed:
            ms = self._poll_ms
            if deadline is not None:
                left = int((deadline - time.monotonic()) * 1000)
                if left <= 0:
                    return None
                ms = min(ms, left)
            ev = self._next(ms)
            if ev is not None:
                return ev
        return None

    def __iter__(self) -> "Subscription":
        return self

    def __next__(self) -> Event:
        ev = self.next_event()
        if ev is None:
            raise StopIteration
        return ev

    def close(self) -> None:
        """Unsubscribes: a waiting iteration ends. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._client._call(b"unsubscribe", b'{"subscription":%d}' % self.id, decode=False)
        except CairnError as e:
            if e.code not in ("not_found", "bad_handle", "forked"):
                raise

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def connect(
    workspace: Optional[PathLike] = None,
    embedded: bool = False,
    daemon: Optional[PathLike] = None,
    daemon_args: Optional[Sequence[str]] = None,
    auto_start: bool = True,
    store: Optional[str] = None,
    call_timeout: Optional[float] = None,
) -> Client:
    """Opens a client on ``workspace``.

    Without ``workspace`` (None) the workspace is found as git finds a
    repository, and as the ``cairn`` command does: the nearest folder at or
    above the current directory that holds ``.cairn/``, else the nearest
    repository root (``.git``), else the current directory.

    Daemon mode (the default) talks to the workspace's cairnd, starting it
    (``daemon``: the executable; default ``$CAIRN_DAEMON``, then next to
    the loaded libcairn, then next to the python executable, then ``PATH``; ``daemon_args`` e.g. ``["--idle-timeout=30s"]``)
    unless ``auto_start`` is False, in which case a missing daemon raises
    :class:`~cairn.UnavailableError`; when another process holds the workspace
    in embedded mode it raises :class:`~cairn.LockedError` naming that pid at
    once. ``embedded=True`` runs the engine in this
    process and takes the workspace's store lock
    (:class:`~cairn.LockedError` when a daemon or another process holds it).
    ``store``, a ``postgres://`` URL, keeps the sessions in that PostgreSQL
    database, shared with every host that uses it.

    ``call_timeout`` (seconds; daemon mode) bounds how long a call waits
    for the daemon, its request's sending included: a daemon that is
    stopped or stuck then raises :class:`~cairn.UnavailableError` ("no
    answer to <method> from cairnd within ..."), and the call's outcome is
    unknown (a request that reached the daemon may still be carried out; a
    save's ``expect_generation`` tells). Default None: 5 minutes,
    libcairn's default, long enough that only a daemon that is stopped or
    stuck reaches it; 0: wait as long as the daemon takes. At most one day;
    embedded mode ignores it. It never bounds the methods whose work grows
    with the store or that have a timeout of their own (``verify``,
    ``repair``, export, import, ``fork``, ``runtime_check``,
    ``runtime_restart``).
    """
    lib = _lib.load()
    opts: Dict[str, Any] = {}
    ws: Optional[str] = None
    if workspace is not None:
        ws = os.fspath(workspace)
        opts["workspace"] = ws
    if embedded:
        opts["embedded"] = True
    if daemon is None and not os.environ.get("CAIRN_DAEMON"):
        daemon = _lib.daemon_next_to_library()
    if daemon is not None:
        opts["daemon"] = os.fspath(daemon)
    if daemon_args:
        opts["daemon_args"] = [str(a) for a in daemon_args]
    if not auto_start:
        opts["auto_start"] = False
    if store:
        opts["store"] = store
    if call_timeout is not None:
        if isinstance(call_timeout, bool) or not isinstance(call_timeout, (int, float)) or not math.isfinite(call_timeout):
            raise InvalidArgumentError("invalid_argument", f"call_timeout must be a finite number of seconds, not {call_timeout!r}")
        # Whole milliseconds, rounded up so that a small bound stays one;
        # libcairn checks the range.
        opts["call_timeout_ms"] = math.ceil(call_timeout * 1000)
    h = ctypes.c_uint64()
    e = _c_void_p()
    rc = lib.cairn_open(_dumps(opts), _byref(h), _byref(e))
    if rc:
        raise _take_error(lib, rc, e)
    ms = opts.get("call_timeout_ms")
    bound = None if ms is None else ms / 1000
    return Client(lib, h.value, None if ws is None else os.path.abspath(ws), embedded, bound)
