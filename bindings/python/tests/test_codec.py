"""The client's JSON request encoder and result decoder are the json module's
own, minus its Python-level wrappers: they must give exactly what
JSONEncoder(...).encode and json.loads give, for every input (seeded random
values, bounded in number and size)."""

from __future__ import annotations

import ctypes
import json
import math
import random
from typing import Any, Callable, List

import pytest

import cairn
from cairn import client as cc

_REF = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=cc._default).encode

# Characters that take every branch of the string encoder: plain ASCII, the
# short escapes, other control characters, DEL, Latin-1, the BMP, astral
# planes and lone surrogates (which the final UTF-8 step writes as \u escapes).
_CHARS = (
    "ab z09~ "
    + '"\\/'
    + "\b\f\n\r\t\x00\x01\x1f"
    + "\x7f\x80\xa0\xe9\xff"
    + "\u0100\u2028\u2029\u20ac\ufeff\uffff"
    + "\U0001f600\U0010ffff"
    + "\ud800\udbff\udc00\udfff"
)


class _Str(str):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _Radd(str):
    # A str whose + and len are not str's: json encodes its characters all
    # the same.
    def __radd__(self, other: Any) -> str:
        return "not JSON"

    def __len__(self) -> int:
        raise TypeError("no len")


class _List(list):  # type: ignore[type-arg]
    pass


class _Int(int):
    pass


class _Float(float):
    pass


class _Opaque:
    pass


def _text(rng: random.Random) -> str:
    n = rng.choice((0, 1, 2, 5, 20, 300))
    if rng.random() < 0.3:  # one character repeated: the long runs of a message
        return rng.choice(_CHARS) * n
    return "".join(rng.choice(_CHARS) for _ in range(n))


def _scalar(rng: random.Random) -> Any:
    k = rng.randrange(13)
    if k == 0:
        return rng.randrange(-(10**30), 10**30)
    if k == 1:
        return rng.choice((0, -1, 1, 2**63, -(2**63) - 1, True, False, None))
    if k == 2:
        return rng.choice((0.0, -0.0, 1e-310, 1.5, 1e300, math.inf, -math.inf, math.nan, rng.uniform(-1e6, 1e6)))
    if k == 3:
        return _Str(_text(rng))
    if k == 4:
        return _Int(rng.randrange(-1000, 1000))
    if k == 5:
        return _Float(rng.random())
    if k == 6:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(8)))  # default: base64
    return _text(rng)


def _value(rng: random.Random, depth: int = 0) -> Any:
    if depth > 4 or rng.random() < 0.4:
        return _scalar(rng)
    k = rng.randrange(6)
    items = [_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    if k == 0:
        return items
    if k == 1:
        return tuple(items)
    if k == 2:
        return _List(items)
    keys: List[Any] = []
    for _ in items:
        keys.append(rng.choice((_text(rng), _text(rng), rng.randrange(100), 1.25, True, None, _Str("s"))))
    d = dict(zip(keys, items))
    return _Dict(d) if k == 3 else d


def _outcome(f: Callable[[], Any]) -> Any:
    try:
        return ("ok", f())
    except Exception as e:  # the same error, or the same bytes
        return ("error", type(e), str(e))


def test_encode_matches_json_encoder() -> None:
    rng = random.Random(20261202)
    for _ in range(3000):
        v = _value(rng)
        want = _outcome(lambda: _REF(v).encode("utf-8", "backslashreplace"))
        assert _outcome(lambda: cc._dumps(v)) == want, repr(v)


@pytest.mark.parametrize(
    "v",
    [
        "a str alone",
        "\ud800",
        {"k": _Opaque()},  # default's TypeError
        {(1, 2): 3},  # a key JSON has no form for
        {"nan": math.nan, "inf": [math.inf, -math.inf]},
        {"set": {1}, "frozenset": frozenset(), "memoryview": memoryview(b"ab")},
    ],
)
def test_encode_edge_cases(v: Any) -> None:
    assert _outcome(lambda: cc._dumps(v)) == _outcome(lambda: _REF(v).encode("utf-8", "backslashreplace"))


def test_encode_long_strings() -> None:
    # _encode_str's own path (long ASCII text): one character that must be
    # escaped, or is not ASCII, anywhere in a long run still is; a long run
    # of text that needs none is quoted as it is; a str subclass is json's.
    n = cc._LONG_STR
    odd = [chr(c) for c in range(0x20)] + ['"', "\\", "\x7f", "\x80", "\u2028", "\ud800", "\U0001f600"]
    values: List[Any] = []
    for length in (n - 1, n, n + 1, 3 * n):
        values.append("x" * length)
        for c in odd:
            for at in (0, length // 2, length - 1):
                values.append("x" * at + c + "x" * (length - at - 1))
    values += [_Str("y" * (2 * n)), _Radd("z" * (2 * n))]
    for v in values:
        for w in (v, {v: [v]}):
            assert cc._dumps(w) == _REF(w).encode("utf-8", "backslashreplace"), repr(w)[:80]
    text = "ok " * n
    assert cc._encode_str(text) == '"' + text + '"'


def test_encode_circular_is_refused_every_time() -> None:
    # check_circular's markers start empty on each call, also after a failure.
    a: List[Any] = []
    a.append(a)
    for _ in range(2):
        with pytest.raises(ValueError, match="Circular reference"):
            cc._dumps({"a": a})
    shared = [1]
    assert cc._dumps([shared, shared]) == b"[[1],[1]]"


def _at(b: bytes) -> Any:
    buf = ctypes.create_string_buffer(b, len(b) + 1)
    return cc._result(ctypes.addressof(buf), len(b))


def _key(v: Any) -> str:
    # NaN != NaN: compare what the values encode to.
    return json.dumps(v, ensure_ascii=True)


def test_encoder_falls_back_when_the_c_entry_point_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    # json.encoder.c_make_encoder is private: a Python whose version of it
    # takes other arguments, or encodes differently, gets the public encoder.
    assert cc._c_encoder_agrees()

    def other_arity(*args: Any) -> Any:
        raise TypeError("c_make_encoder() takes 10 arguments")

    monkeypatch.setattr(cc, "_c_make_encoder", other_arity)
    assert not cc._c_encoder_agrees()
    monkeypatch.setattr(cc, "_c_make_encoder", lambda *a: (lambda o, level: ["{}"]))
    assert not cc._c_encoder_agrees()
    monkeypatch.setattr(cc, "_c_make_encoder", None)
    assert not cc._c_encoder_agrees()


def test_result_matches_json_loads() -> None:
    rng = random.Random(17)
    for _ in range(2000):
        v = _value(rng)
        try:
            text = json.dumps(v, ensure_ascii=rng.random() < 0.5, default=cc._default)
        except (TypeError, ValueError):
            continue
        if rng.random() < 0.2:
            text = rng.choice(("", " ", "\n ")) + text + rng.choice(("", " ", "\r\n"))
        b = text.encode("utf-8", "surrogatepass")
        assert _key(_at(b)) == _key(json.loads(b)), text


@pytest.mark.parametrize(
    "b",
    [b"", b" ", b"{", b"[1,", b"1 2", b"{} x", b'{"a":1}}', b"nul", b'"\\x"', b"\xff", b"NaN", b"-Infinity", b' {"a": [1, 2.5]} '],
)
def test_result_errors_and_whitespace(b: bytes) -> None:
    got = _outcome(lambda: _at(b))
    want = _outcome(lambda: json.loads(b))
    if got[0] == "ok":
        assert want[0] == "ok" and _key(got[1]) == _key(want[1])
    else:
        assert got[:2] == want[:2], (got, want)


class _CountingFree:
    """Stands in for Client._free, counting the buffers freed."""

    def __init__(self, free: Callable[[Any], None]) -> None:
        self.free = free
        self.calls = 0

    def __call__(self, p: Any) -> None:
        self.calls += 1
        self.free(p)


def test_result_in_the_callers_buffer(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A result that fits in the call's buffer is read from it (nothing to
    # free); one byte more is allocated by libcairn and freed.
    assert client._fn_buf is not None, "libcairn without cairn_call_buf"
    client.save("s", change={"append_messages": [1]})
    want = json.dumps(client.call("summary", {"session_id": "s"}), separators=(",", ":"))
    free = _CountingFree(client._free)
    monkeypatch.setattr(client, "_free", free)
    for size, frees in ((len(want), 0), (len(want) - 1, 1), (len(want) + 100, 0)):
        monkeypatch.setattr(cc, "_outs", [])  # new _Outs, of this size
        monkeypatch.setattr(cc, "_RESULT_BUF", size)
        free.calls = 0
        for _ in range(3):  # the second and third reuse the pooled _Out
            got = client.call("summary", {"session_id": "s"})
            assert json.dumps(got, separators=(",", ":")) == want
            assert client._call(b"summary", b'{"session_id":"s"}', False) is None
        assert free.calls == 6 * frees, size
        assert len(cc._outs) == 1
    with pytest.raises(cairn.NotFoundError, match='session "missing" not found'):
        client.call("summary", {"session_id": "missing"})
    assert len(cc._outs) == 1  # given back after an error too


def test_older_library_without_call_buf(embedded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A libcairn without cairn_call_buf: every call goes through cairn_call.
    monkeypatch.setattr(embedded, "_fn_buf", None)
    monkeypatch.setattr(cc, "_outs", [])
    assert embedded.save("s", change={"append_messages": [1]}) == {"generation": 1}
    assert embedded.resume_session("s")["snapshot"]["messages"] == [1]
    with pytest.raises(cairn.NotFoundError, match='session "missing" not found'):
        embedded.summary("missing")
    assert cc._outs == []


def test_calls_from_many_threads_share_the_pool(embedded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(cc, "_outs", [])
    monkeypatch.setattr(cc, "_OUTS_KEPT", 4)

    gens: List[int] = []
    errors: List[BaseException] = []

    def work() -> None:
        try:
            for _ in range(25):
                gens.append(embedded.save("t", change={"append_messages": [0]})["generation"])
        except BaseException as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not errors
    assert sorted(gens) == list(range(1, 151))
    assert 1 <= len(cc._outs) <= 4  # no more kept than _OUTS_KEPT


def test_langgraph_quoted_matches_json_dumps() -> None:
    lg = pytest.importorskip("cairn.langgraph")
    rng = random.Random(18)
    cases = ["", "messages", 'c["","1ef"]', "a\\b", "\x7f", "\u2028", "\ud800", "\t", " ", "é", "\U0001f600"]
    cases += [_text(rng) for _ in range(3000)]
    for s in cases:
        assert lg._quoted(s) == json.dumps(s, ensure_ascii=False), repr(s)


def test_checkpoint_request_is_what_params_makes(embedded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # checkpoint writes _params' rule out by hand: the same request bytes.
    sent: List[bytes] = []
    monkeypatch.setattr(embedded, "_call", lambda method, req, decode=True: sent.append(req))
    msgs = [{"role": "user", "content": "hi"}]
    cases = [
        ("r", 1, msgs, None, 0, None, None),
        ("r", 2, tuple(msgs), {"input_tokens": 3}, 4, {"s": 1}, "sess"),
        ("r", 3, iter(msgs), "", 0, "", ""),
        ("r", 4, _List(msgs), {}, 1, 0, None),
        ("r", 5, [], _Str(""), 2, [], _Str("")),
        ("r", 6, msgs, 0, 0, False, 0),  # falsy, but neither None nor ""
    ]
    for run_id, turn, m, usage, tc, state, sid in cases:
        m2 = list(m) if not isinstance(m, (list, tuple)) else m
        embedded.checkpoint(run_id, turn, m2, usage=usage, tool_calls_count=tc, state=state, session_id=sid)
        want = cc._params(
            {"run_id": run_id, "turn": turn, "new_messages": list(m2), "tool_calls_count": tc}, usage=usage, state=state, session_id=sid
        )
        assert sent.pop() == want
