"""The native checkpoint path (cairn/_wire.py) against a real cairnd.

Every test compares the path with libcairn's (a Client made with
CAIRN_PY_WIRE=0) on the same daemon: results, errors (class, code,
message), stored bytes, and the request bytes themselves, captured on
the socket by a relaying proxy.
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import cairn
import cairn.aio
from cairn import _wire

from conftest import DAEMON, DAEMON_ARGS, connect_daemon, gone, sigstop, stop_daemon, wait_child


def with_env(value: Optional[str], fn: Callable[[], cairn.Client]) -> cairn.Client:
    """fn() with CAIRN_PY_WIRE set to value (None: unset)."""
    old = os.environ.pop(_wire.ENV, None)
    if value is not None:
        os.environ[_wire.ENV] = value
    try:
        return fn()
    finally:
        os.environ.pop(_wire.ENV, None)
        if old is not None:
            os.environ[_wire.ENV] = old


def lib_client(ws: str, **kw: Any) -> cairn.Client:
    """A daemon-mode Client without the native path (libcairn only)."""
    c = with_env("0", lambda: cairn.connect(ws, daemon=DAEMON, **kw))
    assert c._wire is None
    return c


def nat_client(ws: str, daemons: List[int], **kw: Any) -> cairn.Client:
    """connect_daemon with the native path on, whatever the environment
    says (the suite also runs with CAIRN_PY_WIRE=0)."""
    c = with_env(None, lambda: connect_daemon(ws, daemons, **kw))
    assert c._wire is not None
    return c


@pytest.fixture
def pair(workspace: str, daemons: List[int]) -> Iterator[Tuple[cairn.Client, cairn.Client]]:
    """(native, libcairn-only) daemon clients of one workspace's daemon."""
    nat = nat_client(workspace, daemons)
    lib = lib_client(workspace, daemon_args=DAEMON_ARGS)
    assert nat._wire is not None
    try:
        yield nat, lib
    finally:
        nat.close()
        lib.close()


def sent(c: cairn.Client) -> int:
    assert c._wire is not None
    return c._wire.sent


def raw_call(c: cairn.Client, method: str, params: Dict[str, Any]) -> bytes:
    """The JSON text libcairn answers, as it is."""
    r, n, e = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p()
    req = json.dumps(params).encode()
    rc = c._lib.cairn_call(c.handle, method.encode(), req, len(req), ctypes.byref(r), ctypes.byref(n), ctypes.byref(e))
    assert rc == 0, ctypes.string_at(e.value)
    try:
        return ctypes.string_at(r.value, n.value)
    finally:
        c._lib.cairn_free(r.value)


def outcome(fn: Callable[[], Any]) -> Any:
    """fn's result, or its exception as (class, code, message)."""
    try:
        return fn()
    except cairn.CairnError as e:
        return (type(e), e.code, e.message)


# Messages that test the JSON text's every corner: non-ASCII, lone
# surrogates (sent as \\udXXX escapes), control characters, the line
# separators JSON allows raw, big and negative numbers, nesting, empties.
ODD_MESSAGES: List[Any] = [
    {"role": "user", "content": "héllo 世界 🎉"},
    {"role": "assistant", "content": "lone \udc80 and \ud800 surrogates"},
    {"c": "\x00\x01\x1f\x7f \u2028\u2029 \"quoted\" back\\slash\n\t"},
    [1, -1, 2**63 - 1, -(2**63), 2**70, 0.1, -0.0, 1e300, True, False, None],
    {"nested": {"a": [{"b": [[], {}]}]}, "": ""},
    "a bare string",
    12345,
    None,
    {"k" * 300: "v" * 70_000},
]


def test_checkpoint_takes_the_path_and_matches_libcairn(pair: Tuple[cairn.Client, cairn.Client]) -> None:
    nat, lib = pair
    results: Dict[str, List[Any]] = {}
    for c, sid in ((nat, "s-nat"), (lib, "s-lib")):
        c.save(sid, change={"append_messages": [{"role": "system", "content": "x"}]})
        rid = c.begin_run(sid, run_id=f"r-{sid}")["run_id"]
        out = []
        for turn in range(1, 4):
            msgs = ODD_MESSAGES if turn == 2 else [{"role": "tool", "turn": turn}]
            out.append(c.checkpoint(rid, turn, msgs, {"input_tokens": turn, "output_tokens": 2, "total_tokens": 7, "cost": 0.25 * turn}, turn * 3, state={"step": turn, "s": "é\udc80"}))
        # Generators, tuples and the keyword session_id take the path too.
        out.append(c.checkpoint(rid, 4, (m for m in [{"g": 1}]), None, 0, state=None, session_id=sid))
        out.append(c.checkpoint(rid, 5, (), {"cost": 3}, 1, state=""))
        results[sid] = out
    assert sent(nat) == 5
    assert results["s-nat"] == results["s-lib"]
    assert list(results["s-nat"][0]) == ["generation", "message_count"]
    # What was stored is byte for byte the same: the messages, and the
    # runs' checkpoints (turn, usage, counts, state).
    a = raw_call(lib, "messages", {"session_id": "s-nat"})
    b = raw_call(lib, "messages", {"session_id": "s-lib"})
    assert a.replace(b"s-nat", b"s-lib") == b
    a = raw_call(lib, "run", {"run_id": "r-s-nat"})
    b = raw_call(lib, "run", {"run_id": "r-s-lib"})
    strip = lambda raw: json.loads(raw.replace(b"s-nat", b"s-lib"))
    ra, rb = strip(a), strip(b)
    for r in (ra, rb):
        for k in ("started_at", "created_at", "updated_at"):
            r["run"].pop(k, None)
            r.get("checkpoint", {}).pop(k, None)
    assert ra == rb
    assert nat.messages("s-nat")["messages"][2:2 + len(ODD_MESSAGES)] == ODD_MESSAGES


def test_errors_match_libcairn(workspace: str, daemons: List[int]) -> None:
    # A daemon with a small session limit makes the daemon's too_large
    # cheap, and a small message limit libcairn's own.
    args = DAEMON_ARGS + ["--max-session-bytes=200000", "--max-message-size=262144"]
    nat = nat_client(workspace, daemons, daemon_args=args)
    lib = lib_client(workspace, daemon_args=args)
    try:
        nat.save("s", change={"append_messages": [{"role": "system"}]})
        nat.save("t", change={"append_messages": [{"role": "system"}]})
        old = nat.begin_run("s", run_id="old")["run_id"]
        nat.checkpoint(old, 1, [{"m": 1}], None, 0)
        new = nat.resume_run(old, new_run_id="new")["run_id"]
        done = nat.begin_run("s", run_id="done")["run_id"]
        nat.complete_run(done, "completed")
        live = nat.begin_run("s", run_id="live")["run_id"]
        nat.checkpoint(live, 1, [{"m": 1}], None, 0)
        big = [{"x": "y" * 60_000}]
        cases: List[Tuple[str, Callable[[cairn.Client], Any], bool]] = [
            # (name, call, whether the native path sends it)
            ("unknown run", lambda c: c.checkpoint("nope", 1, []), True),
            ("superseded run", lambda c: c.checkpoint(old, 2, [{"m": 2}]), True),
            ("ended run", lambda c: c.checkpoint(done, 1, []), True),
            ("other session", lambda c: c.checkpoint(live, 2, [], session_id="t"), True),
            ("no such session", lambda c: c.checkpoint(live, 2, [], session_id="nope"), True),
            ("empty run id", lambda c: c.checkpoint("", 1, []), True),
            ("long run id", lambda c: c.checkpoint("r" * 300, 1, []), True),
            ("nul in run id", lambda c: c.checkpoint("a\x00b", 1, []), True),
            ("negative turn", lambda c: c.checkpoint(live, -1, []), True),
            ("session limit", lambda c: c.checkpoint(live, 2, big + big + big + big), True),
            # libcairn decides these before (or instead of) sending:
            ("message limit", lambda c: c.checkpoint(live, 2, [{"x": "y" * 300_000}]), False),
            ("bool turn", lambda c: c.checkpoint(live, True, []), False),
            ("float turn", lambda c: c.checkpoint(live, 2.0, []), False),
            ("huge turn", lambda c: c.checkpoint(live, 2**64, []), False),
            ("float tokens", lambda c: c.checkpoint(live, 2, [], {"input_tokens": 1.5}), False),
            ("unknown usage key", lambda c: c.checkpoint(live, 2, [], {"tokens": 1}), False),
            ("usage not a dict", lambda c: c.checkpoint(live, 2, [], [1, 2]), False),
            ("NaN in a message", lambda c: c.checkpoint(live, 2, [{"v": float("nan")}]), False),
            ("infinity in the state", lambda c: c.checkpoint(live, 2, [], None, 0, {"v": -float("inf")}), False),
            ("infinite cost", lambda c: c.checkpoint(live, 2, [], {"cost": float("inf")}), False),
            ("run id not a str", lambda c: c.checkpoint(7, 1, []), False),  # type: ignore[arg-type]
            ("surrogate in run id", lambda c: c.checkpoint("r\udc80", 1, []), False),
        ]
        for name, call, native in cases:
            before = sent(nat)
            got = outcome(lambda: call(nat))
            want = outcome(lambda: call(lib))
            if name == "session limit":
                # The commit's size counts its time stamp, whose text is
                # as long as its nanoseconds need: it varies by a byte.
                got, want = (got[:2], re.sub(r"of \d+ more", "", got[2])), (want[:2], re.sub(r"of \d+ more", "", want[2]))
            assert got == want, name
            assert isinstance(got, tuple), f"{name}: expected an error, got {got}"
            assert sent(nat) - before == int(native), name
        # The connection goes on after every error.
        before = sent(nat)
        assert nat.checkpoint(live, 2, [{"m": 2}], None, 0)["message_count"] == 4
        assert sent(nat) == before + 1
        # A Python value json cannot encode fails the same way, unsent.
        with pytest.raises(TypeError):
            nat.checkpoint(live, 3, [object()])
        loop: List[Any] = []
        loop.append(loop)
        for c in (nat, lib):
            with pytest.raises(ValueError, match="Circular reference"):
                c.checkpoint(live, 3, [loop])
        assert sent(nat) == before + 1
        # The words NaN and Infinity in a string are JSON like any other:
        # sent by the path.
        words = [{"content": "NaN, Infinity and -Infinity are words here " * 10}]
        assert nat.checkpoint(live, 3, words, None, 0)["message_count"] == 5
        assert sent(nat) == before + 2
        assert new
    finally:
        nat.close()
        lib.close()


def test_masking_in_c_and_in_python_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """libcairn's cairn_ws_mask and the Python fallback (an older library
    without it) make the same frames, whose payload unmasks to the bytes
    given, at every length class of the frame header."""
    assert _wire._c_mask() is not None

    def frames() -> List[bytes]:
        c = _wire._Conn.__new__(_wire._Conn)
        c.keys = bytes(range(1, 201))
        return [bytes(c._frame(2, bytes((i * 7 + 3) & 255 for i in range(n)))) for n in (0, 1, 3, 4, 5, 8, 9, 125, 126, 8422, 65535, 65536, 70001)]

    with_c = frames()
    monkeypatch.setattr(_wire, "_mask_fn", False)
    assert _wire._c_mask() is None
    assert frames() == with_c
    for f, n in zip(with_c, (0, 1, 3, 4, 5, 8, 9, 125, 126, 8422, 65535, 65536, 70001)):
        at = 2 if n < 126 else 4 if n < 65536 else 10
        key, body = f[at : at + 4], f[at + 4 :]
        assert len(body) == n
        assert bytes(b ^ key[i % 4] for i, b in enumerate(body)) == bytes((i * 7 + 3) & 255 for i in range(n))


# -- the request bytes, as libcairn sends them -----------------------------


class Relay:
    """A Unix socket that relays every connection to target and records
    what each client sent."""

    def __init__(self, path: str, target: str) -> None:
        self.target = target
        self.streams: List[bytearray] = []
        self.lock = threading.Lock()
        self.socks: List[socket.socket] = []
        self.clients: List[Tuple[bytearray, socket.socket]] = []
        self.frozen: List[socket.socket] = []
        # cut, when set, makes the relay drop the next answer the daemon
        # sends and close that connection both ways (then clears itself).
        self.cut = threading.Event()
        self.ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ln.bind(path)
        self.ln.listen(8)
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                a, _ = self.ln.accept()
            except OSError:
                return
            b = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            b.connect(self.target)
            rec = bytearray()
            with self.lock:
                self.streams.append(rec)
                self.socks += [a, b]
                self.clients.append((rec, a))
            for src, dst, r in ((a, b, rec), (b, a, None)):
                t = threading.Thread(target=self._pump, args=(src, dst, r), daemon=True)
                t.start()
                self.threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, rec: Optional[bytearray]) -> None:
        while True:
            try:
                d = src.recv(65536)
            except OSError:
                d = b""
            if not d:
                if src in self.frozen:
                    return  # the daemon must not see the end: nothing else changes
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            if rec is None and self.cut.is_set():
                self.cut.clear()
                for x in (src, dst):
                    try:
                        x.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            if rec is not None:
                with self.lock:
                    rec += d
            try:
                dst.sendall(d)
            except OSError:
                return

    def native(self) -> socket.socket:
        """The relay's end of the newest connection that is not libcairn's
        (whose upgrade request names Go's HTTP client)."""
        with self.lock:
            return [a for rec, a in self.clients if b"Go-http-client" not in rec][-1]

    def inject(self, frame: bytes) -> None:
        """Sends frame to the native client as if the daemon had."""
        self.native().sendall(frame)

    def refuse_writes(self) -> None:
        """Makes the native client's sends fail (EPIPE), as a connection
        the daemon stopped reading does, without closing it."""
        a = self.native()
        self.frozen.append(a)
        a.shutdown(socket.SHUT_RD)

    def close(self) -> None:
        try:
            self.ln.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        self.ln.close()
        with self.lock:
            for s in self.socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        for t in self.threads:
            t.join(5)
        for s in self.socks:
            s.close()

    def messages(self) -> List[List[bytes]]:
        """Each connection's client messages, unmasked."""
        return self._frames(False)

    def control(self) -> List[List[bytes]]:
        """Each connection's client pong payloads, unmasked."""
        return self._frames(True)

    def _frames(self, pongs: bool) -> List[List[bytes]]:
        out = []
        with self.lock:
            streams = [bytes(s) for s in self.streams]
        for s in streams:
            i = s.index(b"\r\n\r\n") + 4
            msgs, parts = [], []
            while i < len(s):
                b0, b1 = s[i], s[i + 1]
                assert b1 & 0x80, "a client frame must be masked"
                n, i = b1 & 0x7F, i + 2
                if n == 126:
                    n, i = int.from_bytes(s[i:i + 2], "big"), i + 2
                elif n == 127:
                    n, i = int.from_bytes(s[i:i + 8], "big"), i + 8
                key, i = s[i:i + 4], i + 4
                payload = bytes(x ^ key[j % 4] for j, x in enumerate(s[i:i + n]))
                i += n
                if pongs:
                    if b0 & 0x0F == 10:
                        msgs.append(payload)
                elif b0 & 0x0F in (0, 1, 2):
                    parts.append(payload)
                    if b0 & 0x80:
                        msgs.append(b"".join(parts))
                        parts = []
            out.append(msgs)
        return out


def checkpoint_params(msg: bytes) -> Optional[bytes]:
    """A checkpoint request's params (the CBOR after its "params" key),
    None for another message. A request is {id, method, params}, in that
    order, as both clients encode it."""
    marker = b"\x66method\x6acheckpoint\x66params"
    i = msg.find(marker)
    return None if i < 0 else msg[i + len(marker):]


@pytest.fixture
def relayed(workspace: str, daemons: List[int]) -> Iterator[Tuple[cairn.Client, "Relay", str, cairn.Client]]:
    """(srv, relay, front, nat): srv a native client of the workspace's
    daemon; relay a Relay to that daemon; front a workspace whose clients
    dial the relay (PROTOCOL.md §1: its cairnd.addr names the socket); nat
    a native client of front. All of it is closed and removed after."""
    srv = nat_client(workspace, daemons)
    relay_dir = tempfile.mkdtemp(prefix="cairn-relay-")
    front = tempfile.mkdtemp(prefix="cairn-front-")
    relay: Optional[Relay] = None
    nat: Optional[cairn.Client] = None
    try:
        relay = Relay(os.path.join(relay_dir, "r.sock"), _wire.socket_path(workspace) or "")
        os.mkdir(os.path.join(front, ".cairn"))
        Path(front, ".cairn", "cairnd.addr").write_text(os.path.join(relay_dir, "r.sock") + "\n")
        nat = with_env(None, lambda: cairn.connect(front, auto_start=False))
        yield srv, relay, front, nat
    finally:
        if nat is not None:
            nat.close()
        srv.close()
        if relay is not None:
            relay.close()
        shutil.rmtree(relay_dir, ignore_errors=True)
        shutil.rmtree(front, ignore_errors=True)


def test_request_bytes_equal_libcairn(relayed: Tuple[cairn.Client, "Relay", str, cairn.Client]) -> None:
    """The path's request is, byte for byte, what libcairn's Go client
    (protocol.AppendCheckpointParams) sends for the same call."""
    srv, relay, front, nat = relayed
    lib = lib_client(front, auto_start=False)
    try:
        def calls(sid: str) -> List[Tuple[Any, ...]]:
            srv.save(sid, change={"append_messages": [{"role": "system"}]})
            rid = srv.begin_run(sid, run_id="r" + sid)["run_id"]
            return [
                (rid, 1, [], None, 0, None, None),
                (rid, 2, ODD_MESSAGES, {"input_tokens": 10, "output_tokens": 2**40, "total_tokens": -3, "cost": 1.1}, 2**62, {"s": ["é", 1.5]}, sid),
                (rid, 300, [{"a": "b" * 200}] * 30, {"cost": 7}, 70000, "state text", None),
                (rid, 2**33, [{"c": i} for i in range(25)], {"input_tokens": 2**32, "cost": -0.0}, 24, 0, ""),
            ]

        made = {}
        for c, sid in ((nat, "s-nat"), (lib, "s-lib")):
            made[sid] = calls(sid)
            for a in made[sid]:
                c.checkpoint(a[0], a[1], a[2], a[3], a[4], a[5], session_id=a[6])
        assert sent(nat) == 4
        got: List[List[bytes]] = []
        for msgs in relay.messages():
            ps = [p for p in map(checkpoint_params, msgs) if p is not None]
            if ps:
                got.append(ps)
        assert [len(g) for g in got] == [4, 4]
        # What each client sent is what encode_checkpoint makes of its
        # calls: the path's and libcairn's Go encoder's bytes are the same.
        by_sid = {("s-nat" if b"rs-nat" in ps[0] else "s-lib"): ps for ps in got}
        assert sorted(by_sid) == ["s-lib", "s-nat"]
        for sid, ps in by_sid.items():
            for a, p in zip(made[sid], ps):
                enc = _wire.encode_checkpoint(cairn.client._dumps, a[0], a[1], list(a[2]), a[3], a[4], a[5], a[6])
                assert enc is not None and b"".join(enc) == p, (sid, a[1])
    finally:
        lib.close()


def test_connection_lost_after_the_request_was_sent(relayed: Tuple[cairn.Client, "Relay", str, cairn.Client]) -> None:
    """The whole request left, then the connection went before the answer:
    UnavailableError as libcairn raises it (the outcome is unknown; here
    the daemon did commit), and the next call dials again."""
    srv, relay, front, nat = relayed
    lib = lib_client(front, auto_start=False)
    try:
        errs = {}
        for c, sid in ((nat, "s-nat"), (lib, "s-lib")):
            srv.save(sid, change={"append_messages": [{"role": "system"}]})
            rid = srv.begin_run(sid)["run_id"]
            c.checkpoint(rid, 1, [{"t": 1}])
            relay.cut.set()
            with pytest.raises(cairn.UnavailableError) as ei:
                c.checkpoint(rid, 2, [{"t": 2}])
            errs[sid] = ei.value
            assert not relay.cut.is_set()
            # The daemon had the request: it committed it.
            assert [m.get("t") for m in srv.messages(sid)["messages"]] == [None, 1, 2]
            assert c.checkpoint(rid, 3, [{"t": 3}])["message_count"] == 4
        assert sent(nat) == 3
        a, b = errs["s-nat"], errs["s-lib"]
        assert (type(a), a.code) == (type(b), b.code) == (cairn.UnavailableError, "unavailable")
        assert a.message.startswith("protocol: connection lost: ") and b.message.startswith("protocol: connection lost: ")
    finally:
        lib.close()


def first_checkpoint(srv: cairn.Client, nat: cairn.Client) -> Tuple[str, Any]:
    """Session "s" with a run, made through srv, checkpointed once through
    nat's native path: the run id and nat's native connection."""
    srv.save("s", change={"append_messages": [{"role": "system"}]})
    rid = srv.begin_run("s")["run_id"]
    nat.checkpoint(rid, 1, [{"t": 1}])
    assert nat._wire is not None and nat._wire._conn is not None
    return rid, nat._wire._conn


def test_frames_between_calls(relayed: Tuple[cairn.Client, "Relay", str, cairn.Client]) -> None:
    """What arrives between two calls is read before the next request is
    sent: a ping is answered with its pong, and a close frame (a daemon
    going away) makes the call dial again instead of sending on a
    connection the daemon has given up."""
    srv, relay, _, nat = relayed
    rid, conn = first_checkpoint(srv, nat)
    relay.inject(b"\x89\x04ping")
    time.sleep(0.1)
    assert nat.checkpoint(rid, 2, [{"t": 2}])["message_count"] == 3
    assert nat._wire._conn is conn and sent(nat) == 2
    # The native stream (the newest) holds the pong, unmasked "ping".
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any(b"ping" in m for m in relay.control()):
            break
        time.sleep(0.01)
    assert [b"ping"] in relay.control()
    # A close frame, the socket left open: the next call redials.
    relay.inject(b"\x88\x02\x03\xe9")
    time.sleep(0.1)
    assert nat.checkpoint(rid, 3, [{"t": 3}])["message_count"] == 4
    assert nat._wire._conn is not conn and sent(nat) == 3


def test_send_failure_goes_through_libcairn(relayed: Tuple[cairn.Client, "Relay", str, cairn.Client]) -> None:
    """A request that could not be sent was not made: the call goes
    through libcairn, and the next one dials a new connection."""
    srv, relay, _, nat = relayed
    rid, conn = first_checkpoint(srv, nat)
    relay.refuse_writes()
    assert nat.checkpoint(rid, 2, [{"t": 2}])["message_count"] == 3
    assert sent(nat) == 1 and nat._wire._conn is None
    assert nat.checkpoint(rid, 3, [{"t": 3}])["message_count"] == 4
    assert sent(nat) == 2 and nat._wire._conn not in (None, conn)
    assert [m.get("t") for m in srv.messages("s")["messages"]] == [None, 1, 2, 3]


# -- connections lost, daemons gone, forks, threads ------------------------


def wait_gone(pid: int) -> None:
    assert gone(pid, 10), f"pid {pid} still there"


def test_daemon_killed_between_checkpoints(workspace: str, daemons: List[int]) -> None:
    c = nat_client(workspace, daemons)
    try:
        c.save("s", change={"append_messages": [{"role": "system"}]})
        rid = c.begin_run("s")["run_id"]
        assert c.checkpoint(rid, 1, [{"t": 1}])["message_count"] == 2
        assert sent(c) == 1
        os.kill(daemons[-1], signal.SIGKILL)
        wait_gone(daemons[-1])
        # The native connection is dead and no daemon answers: libcairn
        # takes the call and starts a new daemon. When libcairn's own
        # connection has not seen the kill yet (its reader goroutine
        # notices it when it next runs), the request's write fails there
        # and libcairn sends it again on a new connection (PROTOCOL.md
        # section 10): the call succeeds either way.
        r = c.checkpoint(rid, 2, [{"t": 2}])
        assert r["message_count"] == 3
        assert sent(c) == 1
        daemons.append(c.status()["daemon"]["pid"])
        assert daemons[-1] != daemons[-2]
        # Then the path dials the new daemon.
        time.sleep(_wire.RETRY_GAP + 0.05)
        assert c.checkpoint(rid, 3, [{"t": 3}])["message_count"] == 4
        assert sent(c) == 2
        assert [m.get("t") for m in c.messages("s")["messages"]] == [None, 1, 2, 3]
    finally:
        c.close()


def test_daemon_stopped_mid_stream(workspace: str, daemons: List[int]) -> None:
    """SIGTERM while a thread checkpoints natively as fast as it can: each
    call succeeds or raises UnavailableError (libcairn's code for a lost
    connection or a daemon shutting down), and checkpoints go on after."""
    c = nat_client(workspace, daemons)
    try:
        c.save("s", change={"append_messages": [{"role": "system"}]})
        rid = c.begin_run("s")["run_id"]
        ok, lost, other = [], [], []
        stop = threading.Event()
        turn = [0]

        def loop() -> None:
            while not stop.is_set() and turn[0] < 100_000:
                turn[0] += 1
                try:
                    ok.append(c.checkpoint(rid, turn[0], [{"t": turn[0]}])["message_count"])
                except cairn.UnavailableError as e:
                    lost.append(e.message)
                except BaseException as e:  # pragma: no cover - reported below
                    other.append(repr(e))

        t = threading.Thread(target=loop)
        t.start()
        while len(ok) < 20:
            time.sleep(0.005)
        first = daemons[-1]
        os.kill(first, signal.SIGTERM)
        wait_gone(first)
        n = len(ok)
        deadline = time.monotonic() + 30
        while len(ok) < n + 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.set()
        t.join(30)
        assert not other, other
        assert len(ok) >= n + 20
        daemons.append(c.status()["daemon"]["pid"])
        assert daemons[-1] != first
        for m in lost:
            assert m, "an UnavailableError without a message"
        # Every acknowledged checkpoint is stored, in order; a lost one
        # may or may not be (its outcome is unknown).
        stored = [m["t"] for m in c.messages("s")["messages"][1:]]
        assert stored == sorted(stored)
        assert set(ok) <= set(range(1, len(stored) + 2))
        assert len(ok) <= len(stored) <= len(ok) + len(lost)
    finally:
        c.close()


def test_fork_child_never_uses_the_parents_connection(pair: Tuple[cairn.Client, cairn.Client]) -> None:
    nat, _ = pair
    nat.save("s", change={"append_messages": [{"role": "system"}]})
    rid = nat.begin_run("s")["run_id"]
    nat.checkpoint(rid, 1, [{"t": 1}])
    assert nat._wire is not None
    conn = nat._wire._conn
    assert conn is not None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe and exit code only
        code = 1
        try:
            os.close(r)
            try:
                nat.checkpoint(rid, 2, [{"t": "child"}])
                code = 2
            except cairn.ForkedError:
                code = 0
            os.write(w, str(nat._wire.sent).encode())
        except BaseException:
            code = 5
        finally:
            os._exit(code)
    os.close(w)
    status = wait_child(pid, "using the native path")
    child_sent = os.read(r, 64)
    os.close(r)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert child_sent == b"1"  # the child sent nothing on the parent's socket
    # The parent's connection is untouched and goes on.
    assert nat.checkpoint(rid, 2, [{"t": 2}])["message_count"] == 3
    assert nat._wire._conn is conn and sent(nat) == 2
    assert [m.get("t") for m in nat.messages("s")["messages"]] == [None, 1, 2]


def test_a_call_through_libcairn_is_encoded_once(pair: Tuple[cairn.Client, cairn.Client], monkeypatch: pytest.MonkeyPatch) -> None:
    """The path encodes a checkpoint only once it holds the connection: a
    call that another thread's call sends through libcairn is not encoded
    for the path first."""
    nat, _ = pair
    nat.save("s", change={"append_messages": [{"role": "system"}]})
    rid = nat.begin_run("s")["run_id"]
    calls = []
    real = _wire.encode_checkpoint

    def counting(*a: Any) -> Any:
        calls.append(a[2])
        return real(*a)

    monkeypatch.setattr(_wire, "encode_checkpoint", counting)
    assert nat._wire is not None
    with nat._wire._lock:  # another thread's call in progress
        assert nat.checkpoint(rid, 1, [{"t": 1}])["message_count"] == 2
    assert calls == [] and sent(nat) == 0
    assert nat.checkpoint(rid, 2, [{"t": 2}])["message_count"] == 3
    assert calls == [2] and sent(nat) == 1


def test_threads_share_one_client(pair: Tuple[cairn.Client, cairn.Client]) -> None:
    nat, _ = pair
    n_threads, turns = 8, 25
    runs = []
    for i in range(n_threads):
        nat.save(f"s{i}", change={"append_messages": [{"role": "system"}]})
        runs.append(nat.begin_run(f"s{i}")["run_id"])
    errors: List[str] = []
    counts: Dict[int, List[int]] = {i: [] for i in range(n_threads)}
    go = threading.Barrier(n_threads)

    def work(i: int) -> None:
        try:
            go.wait(10)
            for t in range(1, turns + 1):
                counts[i].append(nat.checkpoint(runs[i], t, [{"i": i, "t": t}], {"input_tokens": t}, t)["message_count"])
        except BaseException as e:
            errors.append(repr(e))

    ts = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n_threads)]
    for t in ts:
        t.start()
    deadline = time.monotonic() + 60
    for t in ts:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in ts), "a call never got its answer"
    assert not errors, errors
    for i in range(n_threads):
        assert counts[i] == list(range(2, turns + 2))
        assert [m.get("t") for m in nat.messages(f"s{i}")["messages"][1:]] == list(range(1, turns + 1))
    # Some went natively; a call finding another in progress used libcairn.
    assert 0 < sent(nat) <= n_threads * turns


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_close_releases_the_connection(workspace: str, daemons: List[int]) -> None:
    c = nat_client(workspace, daemons)
    c.save("s", change={"append_messages": [{"role": "system"}]})
    rid = c.begin_run("s")["run_id"]
    handles, fds = cairn.open_handles(), open_fds()
    c.checkpoint(rid, 1, [])
    assert sent(c) == 1 and open_fds() == fds + 1
    c.close()
    assert open_fds() == fds - 1  # libcairn's connection and ours are gone
    assert cairn.open_handles() == handles - 1
    lib = lib_client(workspace)
    try:
        with pytest.raises(cairn.BadHandleError) as a:
            c.checkpoint(rid, 2, [])
        lib.close()
        with pytest.raises(cairn.BadHandleError) as b:
            lib.checkpoint(rid, 2, [])
        assert (a.value.code, a.value.message) == (b.value.code, b.value.message)
    finally:
        lib.close()


def test_env_turns_the_path_off(workspace: str, daemons: List[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_PY_WIRE", "0")
    c = connect_daemon(workspace, daemons)
    try:
        assert c._wire is None
        c.save("s", change={"append_messages": [{"role": "system"}]})
        assert c.checkpoint(c.begin_run("s")["run_id"], 1, [{}])["message_count"] == 2
    finally:
        c.close()
    monkeypatch.delenv("CAIRN_PY_WIRE")
    e = cairn.connect(workspace, daemon=DAEMON)
    try:
        assert e._wire is not None
    finally:
        e.close()


def test_embedded_has_no_path(workspace: str) -> None:
    c = cairn.connect(workspace, embedded=True)
    try:
        assert c._wire is None
    finally:
        c.close()


def test_socket_path_rules(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    (ws / ".cairn").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(ws)
    real = os.path.realpath(ws)
    assert _wire.socket_path(str(link)) == os.path.join(real, ".cairn", "cairnd.sock")
    (ws / ".cairn" / "cairnd.addr").write_text("/run/x/abc.sock\n")
    assert _wire.socket_path(str(ws)) == "/run/x/abc.sock"
    (ws / ".cairn" / "cairnd.addr").write_text("relative.sock")
    assert _wire.socket_path(str(ws)) is None
    deep = tmp_path / ("d" * 100)
    (deep / ".cairn").mkdir(parents=True)
    assert _wire.socket_path(str(deep)) is None  # too long, and no addr file


def test_message_limit_from_hello(workspace: str, daemons: List[int]) -> None:
    """The path adopts a daemon's lower message limit (hello), so it never
    sends what the daemon would close the connection for."""
    c = nat_client(workspace, daemons, daemon_args=DAEMON_ARGS + ["--max-message-size=8192"])
    try:
        c.save("s", change={"append_messages": [{"role": "system"}]})
        rid = c.begin_run("s")["run_id"]
        c.checkpoint(rid, 1, [{"x": "y" * 1000}])
        assert c._wire is not None and c._wire._conn is not None
        assert c._wire._conn.max_size == 8192
        assert sent(c) == 1
        with pytest.raises(cairn.TooLargeError):
            c.checkpoint(rid, 2, [{"x": "y" * 9000}])
        assert sent(c) == 1
        conn = c._wire._conn
        c.checkpoint(rid, 2, [{"x": "z"}])
        assert sent(c) == 2 and c._wire._conn is conn
    finally:
        c.close()


def test_discovered_and_symlinked_workspaces(workspace: str, daemons: List[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The path dials the daemon of the workspace libcairn resolved: one
    found from the current directory (connect() without a workspace), and
    one named through a symlink."""
    srv = nat_client(workspace, daemons)
    try:
        srv.save("s", change={"append_messages": [{"role": "system"}]})
        rid = srv.begin_run("s")["run_id"]
        sub = Path(workspace, "deep", "er")
        sub.mkdir(parents=True)
        monkeypatch.chdir(sub)
        found = with_env(None, lambda: cairn.connect(auto_start=False))
        link = tmp_path / "ws-link"
        link.symlink_to(workspace)
        linked = with_env(None, lambda: cairn.connect(str(link), auto_start=False))
        try:
            assert found.checkpoint(rid, 1, [{"t": 1}])["message_count"] == 2
            assert linked.checkpoint(rid, 2, [{"t": 2}])["message_count"] == 3
            assert sent(found) == 1 and sent(linked) == 1
            assert cairn.open_handles() >= 3
        finally:
            found.close()
            linked.close()
        assert [m.get("t") for m in srv.messages("s")["messages"]] == [None, 1, 2]
    finally:
        srv.close()


def _ends_within(limit: float, what: str, f: Callable[[], Any]) -> Tuple[Any, float]:
    """What f returns or raises, and how long it took; fails the test when
    f is still going after limit seconds (it then runs on, in a daemon
    thread that the test's cleanup ends)."""
    box: List[Any] = []

    def run() -> None:
        try:
            box.append(f())
        except BaseException as e:
            box.append(e)

    start = time.monotonic()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit)
    assert box, f"{what} still going after {limit:g} s"
    return box[0], time.monotonic() - start


def within(seconds: float, fn: Callable[[], Any]) -> Tuple[float, Any]:
    """(elapsed, outcome(fn)); fails the test when fn has not returned
    within seconds (a call that would wait for ever)."""
    got, took = _ends_within(seconds, "the call", lambda: outcome(fn))
    if isinstance(got, BaseException):
        raise got
    return took, got


def test_go_duration() -> None:
    cases = {0.4: "400ms", 0.001: "1ms", 1: "1s", 1.5: "1.5s", 59.999: "59.999s", 60: "1m0s", 90.25: "1m30.25s", 300: "5m0s", 3600: "1h0m0s", 86400: "24h0m0s"}
    assert {s: _wire.go_duration(s) for s in cases} == cases


def test_call_timeout_on_a_stopped_daemon(workspace: str, daemons: List[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """With call_timeout, a daemon that does not answer (SIGSTOP) fails a
    checkpoint on the path's connection, and calls through libcairn, with
    libcairn's UnavailableError once the bound passes; a checkpoint whose
    send the daemon does not take fails so too, without going on to
    libcairn (which would wait again). After SIGCONT both clients work."""
    nat = nat_client(workspace, daemons, call_timeout=0.4)
    lib = lib_client(workspace, daemon_args=DAEMON_ARGS, call_timeout=0.4)
    pid = daemons[-1]
    stopped = False
    try:
        nat.save("s", change={"append_messages": [{"role": "system"}]})
        rid = nat.begin_run("s")["run_id"]
        assert nat.checkpoint(rid, 1, [{"t": 1}])["message_count"] == 2
        assert sent(nat) == 1
        sigstop(pid)
        stopped = True

        def unavailable(method: str) -> Tuple[Any, str, str]:
            return (cairn.UnavailableError, "unavailable", _wire.no_answer_message(method, 0.4))

        through_lib: List[bytes] = []
        real_call = nat._call
        monkeypatch.setattr(nat, "_call", lambda m, *a, **k: (through_lib.append(m), real_call(m, *a, **k))[1])
        # 16 MiB cannot sit in the socket's buffers: the send blocks.
        big = {"role": "user", "content": "x" * (16 << 20)}
        took, got = within(10, lambda: nat.checkpoint(rid, 2, [big]))
        assert got == unavailable("checkpoint") and took >= 0.4
        assert nat._wire is not None and nat._wire._conn is None
        # The next dial is taken by the kernel and never answered.
        time.sleep(_wire.RETRY_GAP + 0.05)
        took, got = within(10, lambda: nat.checkpoint(rid, 2, [{"t": 2}]))
        assert got == unavailable("checkpoint") and took >= 0.4
        assert through_lib == [] and sent(nat) == 1
        took, got = within(10, lambda: lib.checkpoint(rid, 2, [{"t": 2}]))
        assert got == unavailable("checkpoint") and took >= 0.4
        assert within(10, lambda: lib.save("s", change={"append_messages": [big]}))[1] == unavailable("save")

        os.kill(pid, signal.SIGCONT)
        stopped = False
        # The turn-2 checkpoints whose answers did not come may still be
        # carried out as the daemon catches up (their outcome is unknown):
        # go on in a run of a session of its own.
        nat.save("s2", change={"append_messages": [{"role": "system"}]})
        rid2 = nat.begin_run("s2")["run_id"]
        time.sleep(_wire.RETRY_GAP + 0.05)
        assert nat.checkpoint(rid2, 1, [{"t": 1}])["message_count"] == 2 and sent(nat) == 2
        assert lib.checkpoint(rid2, 2, [{"t": 2}])["message_count"] == 3
        stored = [m.get("content") for m in nat.messages("s")["messages"]]
        assert big["content"] not in stored
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        nat.close()
        lib.close()


def test_call_timeout_default_and_zero_on_the_path(workspace: str, daemons: List[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without call_timeout the path's checkpoint waits for its answer as
    long as libcairn's default (ANSWER_TIMEOUT, shortened here), then
    raises libcairn's UnavailableError; with call_timeout=0 it waits as
    long as the daemon takes, and gets its answer once the daemon runs
    again."""
    monkeypatch.setattr(_wire, "ANSWER_TIMEOUT", 0.4)
    default = nat_client(workspace, daemons)
    zero = nat_client(workspace, daemons, call_timeout=0)
    pid = daemons[-1]
    stopped = False
    try:
        default.save("s", change={"append_messages": [{"role": "system"}]})
        zero.save("z", change={"append_messages": [{"role": "system"}]})
        rid, zid = default.begin_run("s")["run_id"], zero.begin_run("z")["run_id"]
        assert default.checkpoint(rid, 1, [{"t": 1}])["message_count"] == 2
        assert zero.checkpoint(zid, 1, [{"t": 1}])["message_count"] == 2
        sigstop(pid)
        stopped = True
        waiting: List[Any] = []
        t = threading.Thread(target=lambda: waiting.append(outcome(lambda: zero.checkpoint(zid, 2, [{"t": 2}]))), daemon=True)
        t.start()
        took, got = within(10, lambda: default.checkpoint(rid, 2, [{"t": 2}]))
        assert got == (cairn.UnavailableError, "unavailable", _wire.no_answer_message("checkpoint", 0.4)) and took >= 0.4
        t.join(1.0)
        assert waiting == [], "a checkpoint with call_timeout=0 gave up on a stopped daemon"
        os.kill(pid, signal.SIGCONT)
        stopped = False
        t.join(10)
        assert waiting and waiting[0]["message_count"] == 3, waiting
        assert sent(default) == 2 and sent(zero) == 2
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        default.close()
        zero.close()


def test_call_timeout_is_checked(workspace: str) -> None:
    for bad in (-1, 86_400.001):
        with pytest.raises(cairn.InvalidArgumentError, match="call_timeout_ms"):
            cairn.connect(workspace, daemon=DAEMON, auto_start=False, call_timeout=bad)
    for bad in (float("nan"), float("inf"), "1", True):
        with pytest.raises(cairn.InvalidArgumentError, match="call_timeout"):
            cairn.connect(workspace, daemon=DAEMON, auto_start=False, call_timeout=bad)  # type: ignore[arg-type]
    cairn.connect(workspace, embedded=True, call_timeout=1).close()
    with pytest.raises(cairn.InvalidArgumentError, match="call_timeout_ms"):
        asyncio.run(cairn.aio.connect(workspace, daemon=DAEMON, auto_start=False, call_timeout=-1))


def _bounded_conn(sock: socket.socket, bound: float) -> Any:
    """A _Conn on sock, as one dialed with call_timeout=bound leaves it,
    without a dial (the other end is the test's)."""
    c = _wire._Conn.__new__(_wire._Conn)
    c.answer_timeout = c.send_timeout = bound
    c.bounded_send = True
    c.sock = sock
    c.buf = c.keys = b""
    c.max_size = _wire.DEFAULT_MAX_MESSAGE
    c.by, c.reads = None, 0
    c.poll = select.poll()
    c.poll.register(sock.fileno(), select.POLLIN)
    c._timeouts(bound, bound)
    return c


def test_a_call_timeout_bounds_the_whole_send() -> None:
    """With a call timeout, the send's bound is for the whole frame, not
    for each send() nor for each wait for room: a reader that takes
    nothing, and one that keeps taking a little (which would keep a
    blocking send() with SO_SNDTIMEO going for as long as the frame takes,
    about 50 s here), both end the send once the bound passes."""
    for trickle in (False, True):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        stop = threading.Event()

        def read() -> None:
            while trickle and not stop.wait(0.05):
                try:
                    b.recv(16 << 10)
                except OSError:
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            c = _bounded_conn(a, 0.3)
            got, took = _ends_within(5, f"a bounded send (trickle {trickle})", lambda: c._send_all(b"x" * (16 << 20)))
            assert isinstance(got, _wire._NoAnswer), got
            assert took >= 0.3
        finally:
            stop.set()
            a.close()
            b.close()
            reader.join(5)


@pytest.mark.parametrize("dribble", ["answer", "pings"])
def test_a_call_timeout_bounds_the_whole_answer(dribble: str) -> None:
    """With a call timeout, the bound is for the whole answer, not for each
    recv (SO_RCVTIMEO): a daemon that sends part of an answer and then a
    byte every 50 ms, or only pings every 50 ms, keeps each recv under the
    bound; the read still ends with the no-answer error once it passes."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stop = threading.Event()

    def dribbler() -> None:
        try:
            if dribble == "answer":
                b.send(bytes((0x82, 126)) + (1000).to_bytes(2, "big") + _wire._ANSWER_ID)
            while not stop.wait(0.05):
                b.send(b"\x00" if dribble == "answer" else b"\x89\x00")
        except OSError:
            return

    def drain() -> None:  # the pongs
        while not stop.is_set():
            try:
                if not b.recv(4096):
                    return
            except OSError:
                return

    threads = [threading.Thread(target=f, daemon=True) for f in (dribbler, drain)]
    try:
        c = _bounded_conn(a, 0.3)
        for t in threads:
            t.start()
        got, took = _ends_within(5, f"a bounded answer's read ({dribble})", lambda: c.read_answer(1))
        assert isinstance(got, _wire._NoAnswer), got
        assert took >= 0.3
        assert c.by is None
    finally:
        stop.set()
        a.close()
        b.close()
        for t in threads:
            t.join(5)


def _upgrade_answer(head: bytes) -> bytes:
    """cairnd's answer to the WebSocket upgrade request head, without the
    blank line that ends it."""
    key = re.search(rb"Sec-WebSocket-Key: (\S+)", head)
    assert key is not None
    accept = base64.b64encode(hashlib.sha1(key.group(1) + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    return (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\nSec-WebSocket-Protocol: cairn.v1\r\n")


def _slow_daemon(path: str, serve: Callable[[socket.socket, threading.Event], None]) -> Callable[[], None]:
    """A fake daemon on a Unix socket at path: serve(conn, stop) runs on the
    first connection, in a thread. Returns what stops it (stop set, the
    socket closed, the thread joined)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    stop = threading.Event()

    def run() -> None:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        with conn:
            try:
                serve(conn, stop)
            except OSError:
                return

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def end() -> None:
        stop.set()
        srv.close()
        t.join(5)

    return end


def _read_head(conn: socket.socket) -> bytes:
    head = b""
    while b"\r\n\r\n" not in head:
        more = conn.recv(4096)
        if not more:
            raise OSError("closed")
        head += more
    return head


@pytest.mark.parametrize("stage", ["upgrade", "hello"])
def test_a_call_timeout_bounds_the_whole_dial(stage: str) -> None:
    """The dial's bound (the call timeout) is for the whole dial, not for
    each recv: a daemon that answers the upgrade a byte every 50 ms, or
    answers it and then dribbles the hello's answer, still has the dial
    end with the no-answer error once the bound passes."""

    def serve(conn: socket.socket, stop: threading.Event) -> None:
        answer = _upgrade_answer(_read_head(conn))
        if stage == "hello":
            conn.sendall(answer + b"\r\n" + bytes((0x82, 126)) + (1000).to_bytes(2, "big") + _wire._ANSWER_ID)
            answer = b"\x00" * 100000
        for i in range(len(answer)):
            if stop.wait(0.05):
                return
            conn.send(answer[i : i + 1])

    d = tempfile.mkdtemp(prefix="cairn-dial")
    end = _slow_daemon(os.path.join(d, "s"), serve)
    try:
        got, took = _ends_within(5, f"a bounded dial ({stage})", lambda: _wire._Conn(os.path.join(d, "s"), 0.3))
        assert isinstance(got, (TimeoutError, _wire._NoAnswer)), got
        assert took >= 0.3
    finally:
        end()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("slow", ["hello", "read"])
def test_a_call_timeout_bounds_the_whole_call(slow: str) -> None:
    """A call timeout bounds a checkpoint as a whole, as libcairn's does:
    the dial, the send and the answer share one deadline. A daemon that
    answers the hello after 1.4 s, or reads a 4 MiB request only after
    1.4 s, and then never answers, fails the call at 1.5 s, not at the time
    those took plus another 1.5 s for the answer (2.9 s at least: the
    limit is just below, which leaves a loaded machine 1.3 s)."""
    bound, pause = 1.5, 1.4

    def serve(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(_upgrade_answer(_read_head(conn)) + b"\r\n")
        conn.recv(64)  # the hello (a few dozen bytes)
        if slow == "hello" and stop.wait(pause):
            return
        hello = _wire._ANSWER_ID + b"\x01" + _wire._text("result") + b"\xa0"
        conn.sendall(bytes((0x82, len(hello))) + hello)
        if slow == "read" and stop.wait(pause):
            return
        conn.settimeout(0.05)
        while not stop.is_set():  # read all, answer nothing
            try:
                if not conn.recv(1 << 20):
                    return
            except TimeoutError:
                pass

    d = tempfile.mkdtemp(prefix="cairn-call")
    os.makedirs(os.path.join(d, ".cairn"))
    end = _slow_daemon(os.path.join(d, ".cairn", "cairnd.sock"), serve)
    w = _wire.Wire(lambda: d, bound)
    msg = {"role": "tool", "content": "x" * ((4 << 20) if slow == "read" else 10)}
    dumps = lambda v: json.dumps(v).encode()  # noqa: E731
    try:
        got, took = _ends_within(10, f"a bounded checkpoint (slow {slow})",
                                 lambda: w.checkpoint(lambda: _wire.encode_checkpoint(dumps, "r", 1, [msg], None, 0, None, "")))
        assert isinstance(got, cairn.UnavailableError), got
        assert "no answer to checkpoint from cairnd within 1.5s" in str(got), got
        assert w.sent == 1
        assert bound <= took < pause + bound - 0.1, f"the checkpoint failed after {took:.2f} s"
    finally:
        w.close()
        end()
        shutil.rmtree(d, ignore_errors=True)
