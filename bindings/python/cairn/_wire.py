"""The binding's own wire client for daemon-mode ``Client.checkpoint``.

A checkpoint is the call an agent makes every turn. Through libcairn it
crosses ctypes, cgo and the Go client's goroutines, and that Go runtime
inside every agent process costs more CPU than the rest of the call; so a
daemon-mode Client speaks the wire protocol (``protocol/PROTOCOL.md``)
itself for that one method, on a connection of its own to the workspace's
cairnd: a WebSocket over the Unix socket, one CBOR request, one CBOR
answer. Everything else keeps going through libcairn.

The path only ever takes a call it can make exactly as libcairn would:

- the request is the bytes libcairn's Go client sends (its
  ``AppendCheckpointParams``), so the daemon cannot tell the two apart;
  params libcairn would decode differently or refuse before sending (a
  non-int turn, a float token count, an unknown usage key, NaN, a lone
  surrogate in an id, a request near the message size limit) go through
  libcairn, which decides and words the error as before;
- when no connection can be had (no daemon, a daemon on its way out, a
  503), or a send fails before the whole frame left, the call goes
  through libcairn, which auto-starts cairnd and reports errors as
  before; the next checkpoint dials again;
- a daemon's error answer raises the class, code and message libcairn
  raises for it; a connection lost once the whole request was sent
  raises :class:`~cairn.UnavailableError` (the outcome is unknown,
  PROTOCOL.md section 10), as libcairn does, and the connection is dropped;
- with the Client's ``call_timeout``, a call whose dial, send and answer
  are not all done within it (one deadline for the three, however the
  daemon's bytes trickle in) raises libcairn's no-answer UnavailableError
  (outcome unknown) and is not handed to libcairn, which would wait on the
  same daemon again;
- another thread's call in progress on the connection, a forked child (the
  parent's socket is never used there; libcairn raises ForkedError), a
  closed Client: libcairn.

``CAIRN_PY_WIRE=0`` in the environment when a Client is made turns the
path off for that Client.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import math
import os
import select
import socket
import struct
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import CairnError, UnavailableError, error_class

__all__ = ["enabled", "socket_path", "Wire", "encode_checkpoint"]

#: ENV is the environment variable that turns the path off ("0").
ENV = "CAIRN_PY_WIRE"

# MAX_SOCKET_PATH is sun_path's 108 bytes less the NUL (PROTOCOL.md §1).
MAX_SOCKET_PATH = 107

# DEFAULT_MAX_MESSAGE is the Go client's default message size limit; a
# daemon's hello may lower it.
DEFAULT_MAX_MESSAGE = 64 << 20

# SIZE_SLACK keeps requests this close to the limit for libcairn: its
# request ids are not ours, so its message may be a few bytes longer or
# shorter, and it alone decides (and words) too_large at the boundary.
SIZE_SLACK = 64

# CONNECT_TIMEOUT bounds dialing, the upgrade and hello; a daemon that is
# slower than that is left to libcairn (which waits up to 15 s).
CONNECT_TIMEOUT = 5.0
# SEND_TIMEOUT bounds writing one request: the daemon's own frame deadline
# (a frame begun and not finished within it is dropped, unprocessed).
SEND_TIMEOUT = 30.0
# ANSWER_TIMEOUT bounds the wait for an answer once the request was sent,
# unless the Client has a call_timeout (which then bounds the send too; 0:
# no bound). It is libcairn's default call_timeout_ms: it only turns a hung
# daemon into UnavailableError (outcome unknown), never an early failure
# of a slow commit.
ANSWER_TIMEOUT = 300.0
# RETRY_GAP is how long after a failed dial the path leaves calls to
# libcairn before dialing again, so a daemon that refuses (503) is not
# asked once a turn.
RETRY_GAP = 0.25

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_INT64 = 1 << 63


def enabled() -> bool:
    """Whether the environment allows the path (CAIRN_PY_WIRE is not "0")."""
    return os.environ.get(ENV, "").strip() not in ("0", "false", "no", "off")


def socket_path(workspace: str) -> Optional[str]:
    """The socket a client of workspace dials (PROTOCOL.md §1): the path in
    ``.cairn/cairnd.addr`` when that file exists, else
    ``.cairn/cairnd.sock``. None when neither can serve: a default path
    too long for sun_path without an addr file means no daemon runs (one
    would have written the file), and an unreadable or malformed addr file
    is libcairn's to report."""
    ws = os.path.realpath(workspace)
    d = os.path.join(ws, ".cairn")
    try:
        with open(os.path.join(d, "cairnd.addr"), "rb") as f:
            raw = f.read(4096)
    except FileNotFoundError:
        p = os.path.join(d, "cairnd.sock")
        return p if len(os.fsencode(p)) <= MAX_SOCKET_PATH else None
    except OSError:
        return None
    try:
        p = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    if not os.path.isabs(p) or len(p.encode("utf-8")) > MAX_SOCKET_PATH:
        return None
    return p


# -- CBOR (RFC 8949), the little the checkpoint needs ---------------------


def _head(major: int, n: int) -> bytes:
    # The shortest head, as the Go encoder writes it.
    m = major << 5
    if n < 24:
        return bytes((m | n,))
    if n < 0x100:
        return bytes((m | 24, n))
    if n < 0x10000:
        return struct.pack(">BH", m | 25, n)
    if n < 0x100000000:
        return struct.pack(">BI", m | 26, n)
    return struct.pack(">BQ", m | 27, n)


def _int(n: int) -> bytes:
    return _head(1, -1 - n) if n < 0 else _head(0, n)


def _text(s: str) -> bytes:
    b = s.encode("utf-8")
    return _head(3, len(b)) + b


_K_RUN_ID = _text("run_id")
_K_SESSION_ID = _text("session_id")
_K_TURN = _text("turn")
_K_NEW_MESSAGES = _text("new_messages")
_K_USAGE = _text("usage") + _head(5, 4)
_K_INPUT = _text("input_tokens")
_K_OUTPUT = _text("output_tokens")
_K_TOTAL = _text("total_tokens")
_K_COST = _text("cost") + b"\xfb"
_K_TOOL_CALLS = _text("tool_calls_count")
_K_STATE = _text("state")
_USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens", "cost")
_REQ_HEAD = _head(5, 3) + _text("id")
# A request's "method" key, its name and the "params" key, in the order
# both clients write a request.
_REQ_HELLO = _text("method") + _text("hello") + _text("params")
_REQ_CHECKPOINT = _text("method") + _text("checkpoint") + _text("params")
_pack_d = struct.Struct(">d").pack


def _plain_int(v: Any) -> bool:
    # An int the Go client decodes into an int64 as it is (not a bool,
    # not an int subclass whose JSON may differ).
    return type(v) is int and -_INT64 <= v < _INT64


def encode_checkpoint(
    dumps: Callable[[Any], bytes],
    run_id: Any,
    turn: Any,
    new_messages: List[Any],
    usage: Any,
    tool_calls_count: Any,
    state: Any,
    session_id: Any,
) -> Optional[List[bytes]]:
    """The CBOR of a checkpoint's params, as pieces to join: what
    libcairn's Go client sends for the JSON params Client.checkpoint makes
    of the same arguments (protocol.AppendCheckpointParams). None when the
    arguments are not ones it can encode exactly so (see the module doc).
    dumps is the binding's JSON encoder in the form that raises ValueError
    for a NaN or an infinity (client._dumps_finite)."""
    if type(run_id) is not str or not _plain_int(turn) or not _plain_int(tool_calls_count):
        return None
    if session_id is None or (type(session_id) is str and session_id == ""):
        session_id = ""
    elif type(session_id) is not str:
        return None
    try:
        rid = run_id.encode("utf-8")
        sid = session_id.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: Go would decode it to U+FFFD
        return None
    ui = uo = ut = 0
    cost = 0.0
    if usage is not None:
        if type(usage) is not dict:
            return None
        for k, v in usage.items():
            if k == "cost":
                if type(v) is float:
                    if not math.isfinite(v):
                        return None
                    cost = v
                elif type(v) is int and -(1 << 53) <= v <= 1 << 53:
                    cost = float(v)
                else:
                    return None
            elif k in _USAGE_KEYS and _plain_int(v):
                if k == "input_tokens":
                    ui = v
                elif k == "output_tokens":
                    uo = v
                else:
                    ut = v
            else:
                return None
    # dumps raises ValueError for a NaN or an infinity (not JSON: libcairn
    # refuses them before sending) and for a circular reference: such a
    # value is left to libcairn, which reports it as before.
    st = b""
    if state is not None and not (isinstance(state, str) and state == ""):
        try:
            st = dumps(state)
        except ValueError:
            return None
    out = [_head(5, 5 + bool(sid) + bool(st)), _K_RUN_ID, _head(3, len(rid)), rid]
    if sid:
        out += (_K_SESSION_ID, _head(3, len(sid)), sid)
    out += (_K_TURN, _int(turn), _K_NEW_MESSAGES, _head(4, len(new_messages)))
    for m in new_messages:
        try:
            b = dumps(m)
        except ValueError:
            return None
        out += (_head(2, len(b)), b)
    out += (
        _K_USAGE, _K_INPUT, _int(ui), _K_OUTPUT, _int(uo), _K_TOTAL, _int(ut), _K_COST, _pack_d(cost),
        _K_TOOL_CALLS, _int(tool_calls_count),
    )
    if st:
        out += (_K_STATE, _head(2, len(st)), st)
    return out


class _Decoder:
    """A CBOR decoder for what the daemon answers: definite lengths, no
    tags (PROTOCOL.md §2). Byte strings decode to bytes, maps to dicts."""

    __slots__ = ("b", "i")

    def __init__(self, b: bytes, i: int = 0) -> None:
        self.b = b
        self.i = i

    def _arg(self, info: int) -> int:
        b, i = self.b, self.i
        if info < 24:
            return info
        if info == 24:
            self.i = i + 1
            return b[i]
        if info == 25:
            self.i = i + 2
            return int.from_bytes(b[i : i + 2], "big")
        if info == 26:
            self.i = i + 4
            return int.from_bytes(b[i : i + 4], "big")
        if info == 27:
            self.i = i + 8
            return int.from_bytes(b[i : i + 8], "big")
        raise ValueError("indefinite length or reserved info")

    def item(self, depth: int = 0) -> Any:
        if depth > 64:
            raise ValueError("nested too deeply")
        b = self.b
        if self.i >= len(b):
            raise ValueError("truncated")
        ib = b[self.i]
        self.i += 1
        major, info = ib >> 5, ib & 31
        if major == 7:
            if info == 20:
                return False
            if info == 21:
                return True
            if info in (22, 23):
                return None
            i = self.i
            if info == 25:
                self.i = i + 2
                return struct.unpack(">e", b[i : i + 2])[0]
            if info == 26:
                self.i = i + 4
                return struct.unpack(">f", b[i : i + 4])[0]
            if info == 27:
                self.i = i + 8
                return struct.unpack(">d", b[i : i + 8])[0]
            raise ValueError("unsupported simple value")
        n = self._arg(info)
        if self.i > len(b):
            raise ValueError("truncated")
        if major == 0:
            return n
        if major == 1:
            return -1 - n
        if major in (2, 3):
            i = self.i
            if i + n > len(b):
                raise ValueError("truncated")
            self.i = i + n
            s = b[i : i + n]
            return s if major == 2 else s.decode("utf-8")
        if major == 4:
            return [self.item(depth + 1) for _ in range(n)]
        if major == 5:
            d: Dict[Any, Any] = {}
            for _ in range(n):
                k = self.item(depth + 1)
                d[k] = self.item(depth + 1)
            return d
        raise ValueError("tag")


def decode(b: bytes) -> Any:
    """The one CBOR item b holds."""
    d = _Decoder(b)
    v = d.item()
    if d.i != len(b):
        raise ValueError("trailing bytes")
    return v


_ANSWER_ID = _head(5, 2) + _text("id")
_ANSWER_RESULT = _text("result") + _head(5, 2) + _text("generation")
_ANSWER_COUNT = _text("message_count")


def _uint(b: bytes, i: int) -> Tuple[int, int]:
    # The unsigned int at b[i] and where it ends; (-1, i) if there is none.
    if i >= len(b) or b[i] >> 5:
        return -1, i
    d = _Decoder(b, i + 1)
    return d._arg(b[i] & 31), d.i


# -- the connection --------------------------------------------------------


# _mask_fn is libcairn's cairn_ws_mask once looked up (False: the library
# has none). Masking 8 KB in C costs a ctypes call; in Python (int XOR) it
# costs about 15 us.
_mask_fn: Any = None
_c_char = ctypes.c_char
_addressof = ctypes.addressof


def _c_mask() -> Any:
    global _mask_fn
    if _mask_fn is None:
        from . import _lib

        _mask_fn = getattr(_lib.load(), "cairn_ws_mask", False)
    return _mask_fn or None


class _Lost(Exception):
    """The connection is gone; the text says how (after "connection lost: ")."""


class _NoAnswer(_Lost):
    # The answer (or, with a call timeout, the send) did not come in time:
    # worded as libcairn's NoAnswerError (protocol).
    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(no_answer_message(method, seconds))


def no_answer_message(method: str, seconds: float) -> str:
    """libcairn's message for a call that got no answer within seconds."""
    return (
        f"protocol: no answer to {method} from cairnd within {go_duration(seconds)}: "
        "the outcome is unknown (a request that reached the daemon may still be carried out)"
    )


def go_duration(seconds: float) -> str:
    """seconds, to the millisecond, as Go's time.Duration prints it
    (400ms, 1.5s, 5m0s, 1h0m0s)."""
    ms = round(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms"
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    sec = str(ms // 1000)
    if ms % 1000:
        sec += "." + f"{ms % 1000:03d}".rstrip("0")
    if h:
        return f"{h}h{m}m{sec}s"
    if m:
        return f"{m}m{sec}s"
    return f"{sec}s"


class _SendFailed(Exception):
    """A request's frame did not leave whole: nothing was processed."""


_timeval = struct.Struct("@ll").pack


def _ready_by(p: select.poll, deadline: float) -> bool:
    """Whether the socket p polls becomes ready by deadline (a
    time.monotonic()); False once it has passed."""
    left = deadline - time.monotonic()
    return left > 0 and bool(p.poll(math.ceil(left * 1000)))


def _set_timeouts(s: socket.socket, recv: float, send: float) -> None:
    # Kernel timeouts on a blocking socket: a recv is one system call,
    # where socket.settimeout would poll before each.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(int(recv), int(recv % 1 * 1e6)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(int(send), int(send % 1 * 1e6)))


class _Conn:
    """One WebSocket connection to cairnd, used by one call at a time."""

    def __init__(self, path: str, call_timeout: Optional[float] = None, call_by: Optional[float] = None) -> None:
        # call_timeout (the Client's) bounds the dial, the send and the
        # answer; None: CONNECT_TIMEOUT, SEND_TIMEOUT and ANSWER_TIMEOUT
        # (libcairn's default); 0: the answer is waited for as long as the
        # daemon takes (SO_RCVTIMEO 0), the dial and the send as for None.
        # call_by: the deadline of the call that dials (a time.monotonic()),
        # which the dial ends by too.
        self.connect_timeout = call_timeout or CONNECT_TIMEOUT
        self.answer_timeout = ANSWER_TIMEOUT if call_timeout is None else call_timeout
        self.send_timeout = call_timeout or SEND_TIMEOUT
        self.bounded_send = bool(call_timeout)
        self.sock: Optional[socket.socket] = None
        self.buf = b""
        self.next_id = 1
        self.max_size = DEFAULT_MAX_MESSAGE
        self.keys = b""
        # by: the deadline of what is under way, which its sends and reads
        # share however the daemon's bytes trickle in: the dial (within
        # connect_timeout, and by call_by), a call with a call timeout
        # (Wire.checkpoint sets it), or an answer read_answer waits for
        # within answer_timeout; None: none.
        self.by: Optional[float] = time.monotonic() + self.connect_timeout
        if call_by is not None:
            self.by = min(self.by, call_by)
        self.recv_timeout = 0.0  # the socket's SO_RCVTIMEO (0: none)
        self.reads = 0  # recvs made by the read_answer under way
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self._left())
            s.connect(path)
            self.sock = s
            self.poll = select.poll()
            self.poll.register(s.fileno(), select.POLLIN)
            self._upgrade()
            s.settimeout(None)
            left = self._left()
            self._timeouts(left, left)
            self._hello()
            self._timeouts(self.answer_timeout, self.send_timeout)
        except BaseException:
            self.sock = None
            s.close()
            raise
        self.by = None

    def close(self, graceful: bool = False) -> None:
        """Closes the socket; graceful sends a close frame (1000) first,
        without waiting, as the Go client does on close."""
        s, self.sock = self.sock, None
        if s is None:
            return
        if graceful:
            try:
                s.send(self._frame(8, b"\x03\xe8"), socket.MSG_DONTWAIT)
            except OSError:
                pass
        s.close()

    def _upgrade(self) -> None:
        key = base64.b64encode(os.urandom(16))
        s = self.sock
        assert s is not None
        s.sendall(
            b"GET / HTTP/1.1\r\nHost: cairnd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Protocol: cairn.v1\r\n\r\n"
        )
        data = b""
        while b"\r\n\r\n" not in data:
            if len(data) > 65536:
                raise _Lost("upgrade answer headers too long")
            s.settimeout(self._left())
            more = s.recv(4096)
            if not more:
                raise _Lost("the daemon closed the connection during the upgrade")
            data += more
        head, _, self.buf = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = lines[0].split(b" ", 2)
        if len(status) < 2 or status[1] != b"101":
            raise _Lost("upgrade refused: " + lines[0].decode("latin-1"))
        h: Dict[bytes, bytes] = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            h[k.strip().lower()] = v.strip()
        accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
        if (
            h.get(b"upgrade", b"").lower() != b"websocket"
            or b"upgrade" not in h.get(b"connection", b"").lower()
            or h.get(b"sec-websocket-accept") != accept
            or h.get(b"sec-websocket-protocol") != b"cairn.v1"
        ):
            raise _Lost("bad upgrade answer")

    def _left(self) -> float:
        # What is left until by; TimeoutError once it passed.
        assert self.by is not None
        left = self.by - time.monotonic()
        if left <= 0:
            raise TimeoutError("the bound passed")
        return max(left, 0.001)  # a timeval of 0 would mean no bound

    def _timeouts(self, recv: float, send: float) -> None:
        assert self.sock is not None
        _set_timeouts(self.sock, recv, send)
        self.recv_timeout = recv

    def _hello(self) -> None:
        from . import __version__

        params = _head(5, 2) + _text("protocol_version") + _head(0, 1) + _text("client") + _text("cairn-python " + __version__)
        rid = self.send_request(_REQ_HELLO, [params])
        assert rid is not None  # a hello is far below any size limit
        ans = decode(self.read_answer(rid))
        res = ans.get("result") if isinstance(ans, dict) else None
        if not isinstance(res, dict):
            raise _Lost("hello failed")
        limits = res.get("limits")
        if isinstance(limits, dict):
            m = limits.get("max_message_size")
            if type(m) is int and 0 < m < self.max_size:
                self.max_size = m

    def _mask_key(self) -> bytes:
        # RFC 6455 §5.3: a fresh, unpredictable key per frame, taken from
        # a block of urandom (one system call per thousand frames).
        k = self.keys
        if len(k) < 4:
            k = os.urandom(4096)
        self.keys = k[4:]
        return k[:4]

    def _frame(self, opcode: int, payload: bytes) -> bytes:
        n = len(payload)
        if n < 126:
            hdr = bytes((0x80 | opcode, 0x80 | n))
        elif n < 0x10000:
            hdr = struct.pack(">BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            hdr = struct.pack(">BBQ", 0x80 | opcode, 0x80 | 127, n)
        key = self._mask_key()
        if not n:
            return hdr + key
        mask = _c_mask()
        if mask is not None:
            f = bytearray(hdr + key + payload)
            mask(_addressof(_c_char.from_buffer(f, len(f) - n)), n, key)
            return f
        reps = key * ((n >> 2) + 1)
        return hdr + key + (int.from_bytes(payload, "big") ^ int.from_bytes(reps[:n], "big")).to_bytes(n, "big")

    def _send_all(self, frame: bytes) -> None:
        # Raises _SendFailed when not all of frame left (the daemon then
        # drops the partial frame unread: no request was made), or
        # _NoAnswer when a call timeout's send bound passed: the daemon is
        # not reading, and libcairn would wait on it again.
        s = self.sock
        assert s is not None
        try:
            if self.bounded_send:
                self._send_within(s, frame)
            else:
                sent = s.send(frame)
                if sent < len(frame):
                    view = memoryview(frame)
                    while sent < len(frame):
                        sent += s.send(view[sent:])
        except BlockingIOError as e:  # SO_SNDTIMEO, or the call's send bound, passed
            if self.bounded_send:
                raise _NoAnswer("checkpoint", self.send_timeout) from e
            raise _SendFailed(str(e)) from e
        except OSError as e:
            raise _SendFailed(str(e)) from e

    def _send_within(self, s: socket.socket, frame: bytes) -> None:
        # A call timeout bounds the whole send. SO_SNDTIMEO cannot: it
        # bounds each wait for room in the socket's buffer, so a daemon
        # that keeps reading a little keeps one send() going for as long
        # as the frame takes. Sends that never wait (MSG_DONTWAIT), and
        # between them a poll for room for what is left of the bound. A
        # frame that fits is one send(), as without a bound.
        deadline = self.by if self.by is not None else time.monotonic() + self.send_timeout
        view = memoryview(frame)
        sent = 0
        p: Optional[select.poll] = None
        while True:
            try:
                sent += s.send(view[sent:], socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
            if sent == len(frame):
                return
            if p is None:
                p = select.poll()
                p.register(s.fileno(), select.POLLOUT)
            if not _ready_by(p, deadline):
                raise BlockingIOError("the send bound passed")

    def send_request(self, method: bytes, params: List[bytes]) -> Optional[int]:
        """Sends one request (method: its method's _REQ_ bytes; params:
        the CBOR of its params, in pieces) and returns its id; None
        (nothing sent) when it is too close to the message size limit for
        this path."""
        rid = self.next_id
        msg = b"".join([_REQ_HEAD, _head(0, rid), method, *params])
        if len(msg) > self.max_size - SIZE_SLACK:
            return None
        self.next_id = rid + 1
        self._send_all(self._frame(2, msg))
        return rid

    def idle_check(self) -> None:
        """Reads what arrived since the last call without waiting: a close
        frame, EOF or a reset means the connection is gone (raise _Lost)
        before anything is sent on it; pings are answered."""
        s = self.sock
        assert s is not None
        # poll, not a recv that fails: no exception to make when, as
        # nearly always, nothing has arrived.
        while self.poll.poll(0):
            try:
                more = s.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError as e:
                raise _Lost(str(e)) from e
            if not more:
                raise _Lost("EOF")
            self.buf += more
        while self.buf:
            # Whole frames only; a partial one waits for the next read.
            if self._frame_len() is None:
                break
            self._read_message(None)

    def _frame_len(self) -> Optional[int]:
        b = self.buf
        if len(b) < 2:
            return None
        n = b[1] & 0x7F
        at = 2
        if n == 126:
            if len(b) < 4:
                return None
            n, at = int.from_bytes(b[2:4], "big"), 4
        elif n == 127:
            if len(b) < 10:
                return None
            n, at = int.from_bytes(b[2:10], "big"), 10
        return at + n if len(b) >= at + n else None

    def _fill(self, n: int) -> None:
        # Reads until buf holds at least n bytes. Under a deadline (by),
        # the first read of an answer may be a plain recv (read_answer
        # says); the reads after it wait for what is left until by, as
        # SO_RCVTIMEO bounds each recv: a daemon that sends part of an
        # answer and then a byte now and then would keep it going.
        s = self.sock
        assert s is not None
        while len(self.buf) < n:
            if self.by is not None:
                if self.reads and not _ready_by(self.poll, self.by):
                    raise _NoAnswer("checkpoint", self.answer_timeout)
                self.reads += 1
            try:
                more = s.recv(max(65536, n - len(self.buf)))
            except BlockingIOError as e:  # SO_RCVTIMEO passed
                raise _NoAnswer("checkpoint", self.answer_timeout) from e
            except OSError as e:
                raise _Lost(str(e)) from e
            if not more:
                raise _Lost("failed to get reader: failed to read frame header: EOF")
            self.buf += more

    def _read_message(self, want: Optional[int]) -> Optional[bytes]:
        """Reads one data message (control frames in between are
        handled) and returns it, or None for a message that is not the
        answer to want (a push, a text message, another id)."""
        parts: List[bytes] = []
        size = 0
        text = False
        while True:
            self._fill(2)
            b = self.buf
            b0, b1 = b[0], b[1]
            if b1 & 0x80:
                raise _Lost("the daemon sent a masked frame")
            n, at = b1 & 0x7F, 2
            if n == 126:
                self._fill(4)
                n, at = int.from_bytes(self.buf[2:4], "big"), 4
            elif n == 127:
                self._fill(10)
                n, at = int.from_bytes(self.buf[2:10], "big"), 10
            if n > self.max_size + 16:
                raise _Lost("a message over the size limit")
            self._fill(at + n)
            b = self.buf
            payload, self.buf = b[at : at + n], b[at + n :]
            op = b0 & 0x0F
            if op not in (0, 1, 2, 8, 9, 10):
                raise _Lost(f"a frame with reserved opcode {op}")
            if op == 8:
                code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                reason = payload[2:].decode("utf-8", "replace")
                raise _Lost(f"failed to get reader: received close frame: status = {_status_name(code)} and reason = {reason!r}".replace("'", '"'))
            if op in (9, 10):
                if op == 9:
                    self._send_all(self._frame(10, payload))
                if want is None and not parts and self._frame_len() is None:
                    return None  # idle_check: nothing more has arrived
                continue
            if op in (1, 2) and parts:
                raise _Lost("a new message inside a fragmented one")
            if op == 0 and not parts:
                raise _Lost("a continuation frame without a message")
            parts.append(payload)
            size += n
            if size > self.max_size + 16:
                raise _Lost("a message over the size limit")
            if op in (1, 2):
                text = op == 1
            if b0 & 0x80:
                break
        if text:
            return None
        msg = parts[0] if len(parts) == 1 else b"".join(parts)
        if want is None:
            return None
        if not msg.startswith(_ANSWER_ID):
            try:
                ans = decode(msg)
            except (ValueError, UnicodeDecodeError):
                return None
            return msg if isinstance(ans, dict) and ans.get("id") == want else None
        rid, _ = _uint(msg, len(_ANSWER_ID))
        return msg if rid == want else None

    def read_answer(self, rid: int) -> bytes:
        """The answer to request rid, skipping pushes and pings, by the
        deadline under way (the dial's, the call's) or else within
        answer_timeout (0: no bound), however its bytes trickle in."""
        own = self.by is None and self.answer_timeout > 0
        if own:
            self.by = time.monotonic() + self.answer_timeout
        # The first recv waits under SO_RCVTIMEO alone, unless less than
        # that is left until by (the dial or the call's send took some of
        # it): then it too polls first.
        self.reads = 0
        if self.by is not None and (not self.recv_timeout or self.by - time.monotonic() < self.recv_timeout - 0.001):
            self.reads = 1
        try:
            while True:
                msg = self._read_message(rid)
                if msg is not None:
                    return msg
        finally:
            if own:
                self.by = None


_STATUS = {1000: "StatusNormalClosure", 1001: "StatusGoingAway", 1008: "StatusPolicyViolation", 1009: "StatusMessageTooBig", 1011: "StatusInternalError"}


def _status_name(code: int) -> str:
    # How the Go client (coder/websocket) names a close status in its error.
    return _STATUS.get(code, f"StatusCode({code})")


def _checkpoint_answer(msg: bytes) -> Dict[str, Any]:
    """The result of a checkpoint's answer, or the error it raises."""
    # The usual answer, as the daemon encodes it (appendSuccess,
    # appendCheckpointResult), read without the general decoder.
    _, i = _uint(msg, len(_ANSWER_ID))
    if msg.startswith(_ANSWER_RESULT, i):
        gen, i = _uint(msg, i + len(_ANSWER_RESULT))
        if gen >= 0 and msg.startswith(_ANSWER_COUNT, i):
            i += len(_ANSWER_COUNT)
            if i < len(msg) and msg[i] >> 5 in (0, 1):
                d = _Decoder(msg, i)
                count = d.item()
                if d.i == len(msg):
                    return {"generation": gen, "message_count": count}
    try:
        ans = decode(msg)
    except (ValueError, UnicodeDecodeError) as e:
        raise _Lost(f"an answer that is not CBOR: {e}") from e
    if not isinstance(ans, dict):
        raise _Lost("an answer that is not a map")
    err = ans.get("error")
    if isinstance(err, dict):
        # As libcairn reports a daemon's error: its code (an unknown one
        # keeps its text, with the base class) and message; data is not
        # passed on.
        code = str(err.get("code") or "") or "internal"
        message = err.get("message")
        return _raise(error_class(code)(code, message if isinstance(message, str) else ""))
    res = ans.get("result")
    if not isinstance(res, dict):
        raise _Lost("an answer with neither result nor error")
    return {"generation": int(res.get("generation") or 0), "message_count": int(res.get("message_count") or 0)}


def _raise(e: CairnError) -> Any:
    raise e


class Wire:
    """The native checkpoint path of one daemon-mode Client."""

    def __init__(self, workspace: Callable[[], Optional[str]], call_timeout: Optional[float] = None) -> None:
        self._workspace = workspace
        self._call_timeout = call_timeout
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._conn: Optional[_Conn] = None
        self._closed = False
        self._retry_at = 0.0
        #: sent counts the checkpoints this path sent (tests read it).
        self.sent = 0

    def close(self) -> None:
        """Closes the connection (idempotent). A call in progress on
        another thread closes it when it is done."""
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                self._drop(graceful=True)
            finally:
                self._lock.release()

    def _drop(self, graceful: bool = False) -> None:
        # Never in a forked child: the socket is the parent's.
        c, self._conn = self._conn, None
        if c is not None and os.getpid() == self._pid:
            c.close(graceful)

    def _connect(self, call_by: Optional[float]) -> Optional[_Conn]:
        if time.monotonic() < self._retry_at:
            return None
        try:
            ws = self._workspace()
            path = socket_path(ws) if ws else None
            if path is None:
                raise _Lost("no socket")
            return _Conn(path, self._call_timeout, call_by)
        except (TimeoutError, BlockingIOError, _NoAnswer) as e:
            self._retry_at = time.monotonic() + RETRY_GAP
            if not self._call_timeout:
                return None
            # A daemon that takes the connection and does not answer it
            # (stopped, stuck): libcairn would wait on it again.
            raise _NoAnswer("checkpoint", self._call_timeout) from e
        except (OSError, _Lost, _SendFailed, ValueError, UnicodeDecodeError, CairnError):
            self._retry_at = time.monotonic() + RETRY_GAP
            return None

    def checkpoint(self, encode: Callable[[], Optional[List[bytes]]]) -> Optional[Dict[str, Any]]:
        """Sends a checkpoint whose params encode() makes (encode_checkpoint's
        pieces) and returns its result; None means nothing was sent: use
        libcairn. encode runs only once this call holds a connection, so a
        call that goes through libcairn is encoded once, by libcairn's
        path; when it returns None the call goes through libcairn too."""
        if self._closed or os.getpid() != self._pid:
            return None
        if not self._lock.acquire(blocking=False):
            return None
        # With a call timeout, one deadline for the whole call: the dial (if
        # any), the send and the answer share it, as in libcairn.
        call_by = time.monotonic() + self._call_timeout if self._call_timeout else None
        c: Optional[_Conn] = None
        try:
            if self._closed:
                return None
            c = self._conn
            if c is not None:
                try:
                    c.idle_check()
                except (_Lost, _SendFailed):
                    self._drop()
                    c = None
            if c is None:
                c = self._conn = self._connect(call_by)
                if c is None:
                    return None
            params = encode()
            if params is None:
                return None
            c.by = call_by
            try:
                rid = c.send_request(_REQ_CHECKPOINT, params)
            except _SendFailed:
                self._drop()
                return None
            if rid is None:
                return None
            self.sent += 1
            try:
                msg = c.read_answer(rid)
                res = _checkpoint_answer(msg)
            except _NoAnswer:
                raise  # a _Lost, worded below
            except (_Lost, _SendFailed) as e:  # _SendFailed: a pong that did not leave
                self._drop()
                raise UnavailableError("unavailable", f"protocol: connection lost: {e}") from None
            except CairnError:
                raise
            except BaseException:
                # Interrupted (KeyboardInterrupt) with the answer unread:
                # the connection's state is unknown.
                self._drop()
                raise
            return res
        except _NoAnswer as e:
            # The dial, the send or the answer did not come within the
            # bound: libcairn's no-answer error, never handed on to
            # libcairn (which would wait on the same daemon again).
            self._drop()
            raise UnavailableError("unavailable", str(e)) from None
        finally:
            if c is not None:
                c.by = None
            if self._closed:
                self._drop()
            self._lock.release()
