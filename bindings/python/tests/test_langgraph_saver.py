"""CairnSaver beyond the conformance suite: its reads stay flat as a thread
grows (the same calls, none of them a whole-session read, at 5 and at 300
checkpoints), the thread-to-session mapping, and a real graph run with
durability="sync" that a new saver (a new client) resumes."""

from __future__ import annotations

import operator
import sqlite3
from typing import Annotated, Any, Dict, List, TypedDict

import pytest

import cairn

# Imported, not importorskip: a missing framework package is a failure.
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from cairn.langgraph import CairnSaver

WHOLE = {"resume_session", "export", "export_file", "artifacts", "list_sessions"}


class Counting:
    """Forwards to a client and records each method called."""

    def __init__(self, c: cairn.Client) -> None:
        self._c = c
        self.calls: List[str] = []
        self.items_read = 0

    def __getattr__(self, name: str) -> Any:
        f = getattr(self._c, name)
        if not callable(f):
            return f

        def call(*a: Any, **k: Any) -> Any:
            self.calls.append(name)
            r = f(*a, **k)
            if name == "messages":
                self.items_read = max(self.items_read, len(r["messages"]))
            return r

        return call


def fill(saver: CairnSaver, tid: str, n: int) -> Dict[str, Any]:
    cfg: Dict[str, Any] = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": [f"m{j}" for j in range(3)], "step": i}
        cp["channel_versions"] = {"messages": saver.get_next_version(None, None), "step": saver.get_next_version(i, None)}
        cfg = saver.put(cfg, cp, {"source": "loop", "step": i}, cp["channel_versions"])
        saver.put_writes(cfg, [("step", i)], f"task{i}")
    return cfg


def test_reads_stay_flat(client: cairn.Client) -> None:
    counting = Counting(client)
    saver = CairnSaver(counting)  # type: ignore[arg-type]
    shapes = []
    for tid, n in (("small", 5), ("big", 300)):
        fill(saver, tid, n)
        counting.calls.clear()
        t = saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ""}})
        assert t is not None and t.checkpoint["channel_values"]["step"] == n - 1
        assert t.pending_writes == [(f"task{n-1}", "step", n - 1)]
        get_calls = list(counting.calls)
        counting.calls.clear()
        listed = list(saver.list({"configurable": {"thread_id": tid}}, limit=3))
        assert [x.metadata["step"] for x in listed] == [n - 1, n - 2, n - 3]
        list_calls = list(counting.calls)
        assert not WHOLE & set(get_calls + list_calls), get_calls + list_calls
        shapes.append((get_calls, list_calls))
    # The same calls whatever the thread's length.
    assert shapes[0] == shapes[1], shapes
    # The index page read by list is bounded, not the thread.
    assert list_calls.count("messages") == 1
    assert counting.items_read <= 64, counting.items_read
    # get_tuple is one read: the head, the checkpoint and its writes by id
    # (the channel values are those this saver put); list(limit=3) reads
    # three index entries and then their checkpoints and writes at once.
    assert get_calls == ["artifacts_by_id"], get_calls
    assert list_calls == ["messages", "artifacts_by_id"], list_calls
    assert counting.items_read == 3


def test_get_tuple_from_another_saver(client: cairn.Client) -> None:
    """A saver that has not seen the thread reads the head, then the
    checkpoint with its writes (the values it changed are in its record);
    once it knows the head, one read, and another saver moving the thread
    on costs it one more (the unchanged values are cached)."""
    writer = CairnSaver(client)
    cfg = fill(writer, "t", 4)
    counting = Counting(client)
    reader = CairnSaver(counting)  # type: ignore[arg-type]
    latest = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    t = reader.get_tuple(latest)
    assert t is not None and t.checkpoint["channel_values"] == {"messages": ["m0", "m1", "m2"], "step": 3}
    assert t.pending_writes == [("task3", "step", 3)]
    assert counting.calls == ["artifacts_by_id"] * 2, counting.calls
    counting.calls.clear()
    assert reader.get_tuple(latest) == t
    assert counting.calls == ["artifacts_by_id"], counting.calls
    cp = empty_checkpoint()
    cp["channel_values"] = {"step": 4}
    cp["channel_versions"] = {**t.checkpoint["channel_versions"], "step": writer.get_next_version(4, None)}
    writer.put(cfg, cp, {"source": "loop", "step": 4}, {"step": cp["channel_versions"]["step"]})
    counting.calls.clear()
    t2 = reader.get_tuple(latest)
    assert t2 is not None and t2.checkpoint["channel_values"] == {"messages": ["m0", "m1", "m2"], "step": 4}
    assert t2.pending_writes == []
    assert counting.calls == ["artifacts_by_id"] * 2, counting.calls
    # A named checkpoint: the checkpoint and its writes in one read.
    counting.calls.clear()
    named = reader.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": t.config["configurable"]["checkpoint_id"]}})
    assert named is not None and named.checkpoint == t.checkpoint and named.pending_writes == t.pending_writes
    assert counting.calls == ["artifacts_by_id"], counting.calls
    # A thread that does not exist.
    assert reader.get_tuple({"configurable": {"thread_id": "nope", "checkpoint_ns": ""}}) is None


def test_keys_are_those_stored_threads_use() -> None:
    """The saver's artifact ids are what it always wrote (json.dumps of the
    parts, hashed past 200 bytes), whichever way it builds them."""
    import hashlib
    import json

    from cairn.langgraph import _key

    def stored(kind: str, *parts: str) -> str:
        k = kind + json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
        if len(k.encode("utf-8")) > 200:
            k = kind + "#" + hashlib.sha256(k.encode("utf-8")).hexdigest()
        return k

    cases = [
        ("h",),
        ("h", ""),
        ("c", "", "1ef0c7e2-0b8f-6b4e-8001-5d1f3c2a9b7e"),
        ("b", "parent|child:1", "messages", "00000000000000000000000000000002.0.5210482436"),
        ("w", 'a"b', "c\\d", "tab\there", "\x00\x1f\x7f"),
        ("c", "é☃\u2028", "😀"),
        ("b", "x" * 300, "y"),
        ("c", "😀" * 49, ""),
        ("c", "😀" * 60, ""),
    ]
    for c in cases:
        assert _key(*c) == stored(*c), c


def test_thread_maps_to_a_session(client: cairn.Client) -> None:
    saver = CairnSaver(client)
    fill(saver, "t/1", 2)
    assert saver.session_id("t/1") == "langgraph:t/1"
    assert client.summary("langgraph:t/1")["message_count"] == 2


def test_a_checkpoint_put_again_is_one_checkpoint(client: cairn.Client) -> None:
    """A put repeated with the same checkpoint id (a host retrying a put
    whose outcome it did not learn) stands for one checkpoint, with the
    newest put's metadata, as in SqliteSaver, whose put replaces its row:
    list gives it once (with and without a limit, a filter or before), and
    prune keeps one index entry for it. Before, list read both entries'
    checkpoints in one artifactsByID call, which refuses an id named
    twice."""
    sql = sqlite3.connect(":memory:", check_same_thread=False)
    got = {}
    for name, saver in (("cairn", CairnSaver(client)), ("sqlite", SqliteSaver(sql))):
        cfg: Dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        mds = [{"step": 0}, {"step": 1}, {"step": 2, "try": 1}, {"step": 2, "try": 2}]
        cp = empty_checkpoint()
        for md in mds:
            if md.get("try") != 2:
                cp = empty_checkpoint()
                cp["channel_values"] = {"step": md["step"]}
                cp["channel_versions"] = {"step": saver.get_next_version(None, None)}
                prev = cfg
            cfg = saver.put(prev, cp, md, cp["channel_versions"])
        t = {"configurable": {"thread_id": "t"}}

        def steps(**kw: Any) -> List[Any]:
            return [(tup.metadata["step"], tup.metadata.get("try")) for tup in saver.list(t, **kw)]  # noqa: B023

        got[name] = (steps(), steps(limit=2), steps(filter={"try": 1}), steps(filter={"try": 2}), steps(before=cfg))
    assert got["cairn"] == got["sqlite"]
    assert got["cairn"][0] == [(2, 2), (1, None), (0, None)]
    sql.close()

    saver = CairnSaver(client)
    saver.prune(["t"])
    assert [tup.metadata for tup in saver.list({"configurable": {"thread_id": "t"}})] == [{"step": 2, "try": 2}]
    assert client.summary(saver.session_id("t"))["message_count"] == 1


class State(TypedDict):
    log: Annotated[List[str], operator.add]


def graph(saver: CairnSaver) -> Any:
    g = StateGraph(State)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile(checkpointer=saver, interrupt_before=["b"])


@pytest.mark.parametrize("mode", ["embedded"])
def test_graph_resumes_with_a_new_saver(mode: str, workspace: str) -> None:
    cfg = {"configurable": {"thread_id": "g1"}}
    with cairn.connect(workspace, embedded=True) as c:
        out = graph(CairnSaver(c)).invoke({"log": ["start"]}, cfg, durability="sync")
        assert out["log"] == ["start", "a"]
    with cairn.connect(workspace, embedded=True) as c:
        g = graph(CairnSaver(c))
        assert g.get_state(cfg).next == ("b",)
        out = g.invoke(None, cfg, durability="sync")
        assert out["log"] == ["start", "a", "b"]
        assert len(list(g.get_state_history(cfg))) >= 4


class Older(Counting):
    """A client whose daemon predates artifactsByID."""

    def __getattr__(self, name: str) -> Any:
        if name == "artifacts_by_id":

            def missing(*a: Any, **k: Any) -> Any:
                self.calls.append(name)
                raise cairn.MethodNotFoundError("method_not_found", "artifactsByID")

            return missing
        return super().__getattr__(name)


def test_saver_on_a_daemon_without_artifacts_by_id(client: cairn.Client) -> None:
    """Against a daemon that lacks artifactsByID the saver reads one
    artifact at a time, as it did before, with the same answers."""
    older = Older(client)
    saver = CairnSaver(older)  # type: ignore[arg-type]
    fill(saver, "t", 5)
    t = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    assert t is not None and t.checkpoint["channel_values"] == {"messages": ["m0", "m1", "m2"], "step": 4}
    assert t.pending_writes == [("task4", "step", 4)]
    assert [x.metadata["step"] for x in saver.list({"configurable": {"thread_id": "t"}}, limit=3)] == [4, 3, 2]
    # It asked once, then stopped asking.
    assert older.calls.count("artifacts_by_id") == 1, older.calls
    assert "artifact" in older.calls
    assert saver.get_tuple({"configurable": {"thread_id": "nope", "checkpoint_ns": ""}}) is None


def old_put(client: cairn.Client, serde: Any, cfg: Dict[str, Any], cp: Any, md: Dict[str, Any], new_versions: Dict[str, Any]) -> Dict[str, Any]:
    """A put as the saver wrote it before a put's channel values moved into
    the checkpoint's record (the first layout): each value an artifact
    b<key>, the record JSON with the checkpoint and metadata as base64, the
    head, the index message."""
    import base64
    import json

    from cairn.langgraph import _key

    c = cfg["configurable"]
    ns = c.get("checkpoint_ns", "")
    cp = cp.copy()
    values = cp.pop("channel_values")
    parent = c.get("checkpoint_id")

    def dump(v: Any) -> List[str]:
        t, b = serde.dumps_typed(v)
        return [t, base64.b64encode(b).decode("ascii")]

    arts = []
    for ch, ver in new_versions.items():
        t, b = serde.dumps_typed(values[ch]) if ch in values else ("empty", b"")
        arts.append({"id": _key("b", ns, ch, str(ver)), "kind": "langgraph", "data": t.encode() + b"\0" + b})
    record = {"cp": dump(cp), "md": dump(md), "parent": parent}
    arts.append({"id": _key("c", ns, cp["id"]), "kind": "langgraph", "data": json.dumps(record, separators=(",", ":")).encode()})
    arts.append({"id": _key("h", ns), "kind": "langgraph", "data": cp["id"].encode()})
    entry = {"ns": ns, "id": cp["id"], "parent": parent, "md": dump(md)}
    client.save("langgraph:" + c["thread_id"], change={"put_artifacts": arts, "append_messages": [entry]})
    return {"configurable": {"thread_id": c["thread_id"], "checkpoint_ns": ns, "checkpoint_id": cp["id"]}}


def test_threads_in_the_first_layout(client: cairn.Client) -> None:
    """A thread written in the first layout reads as it did; puts on top
    of it (values in the records, those unchanged still in the old
    artifacts) read back from a fresh saver; prune keeps a value whose
    record goes; get_delta_channel_history walks both layouts."""
    saver = CairnSaver(client)
    cfg: Dict[str, Any] = {"configurable": {"thread_id": "old", "checkpoint_ns": ""}}
    msgs = ["m0", "m1", "m2"]
    ver = {"messages": saver.get_next_version(None, None), "step": saver.get_next_version(None, None)}
    ids = []

    def cp_with(step: int, new: Dict[str, Any]) -> Any:
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": new.get("messages", msgs), "step": step}
        cp["channel_versions"] = dict(ver)
        return cp

    for i in range(3):
        new = {"messages": ver["messages"], "step": ver["step"]} if i == 0 else {"step": ver["step"]}
        cfg = old_put(client, saver.serde, cfg, cp_with(i, {}), {"source": "loop", "step": i}, new)
        ids.append(cfg["configurable"]["checkpoint_id"])
        ver["step"] = saver.get_next_version(ver["step"], None)
    saver.put_writes(cfg, [("step", 9)], "task2")

    def fresh() -> CairnSaver:
        return CairnSaver(client)

    latest = {"configurable": {"thread_id": "old", "checkpoint_ns": ""}}
    t = fresh().get_tuple(latest)
    assert t is not None and t.checkpoint["channel_values"] == {"messages": msgs, "step": 2}
    assert t.pending_writes == [("task2", "step", 9)]
    first = fresh().get_tuple({"configurable": {"thread_id": "old", "checkpoint_ns": "", "checkpoint_id": ids[0]}})
    assert first is not None and first.checkpoint["channel_values"] == {"messages": msgs, "step": 0}
    assert [x.checkpoint["channel_values"]["step"] for x in fresh().list(latest)] == [2, 1, 0]

    # Puts on top: step changes (in the record), messages does not (an
    # artifact of the first layout, which the new records cannot name).
    s2 = fresh()
    s2.get_tuple(latest)
    for i in (3, 4):
        cfg = s2.put(cfg, cp_with(i, {}), {"source": "loop", "step": i}, {"step": ver["step"]})
        ids.append(cfg["configurable"]["checkpoint_id"])
        ver["step"] = saver.get_next_version(ver["step"], None)
    t = fresh().get_tuple(latest)
    assert t is not None and t.checkpoint["channel_values"] == {"messages": msgs, "step": 4}
    hist = fresh().get_delta_channel_history(config=t.config, channels=["messages", "step"])
    assert hist["messages"]["seed"] == msgs and hist["step"]["seed"] == 3

    # messages changes in checkpoint 5 (its record holds it); 6 names 5's
    # record for it. keep_latest keeps 6 alone: the value moves out of 5's
    # record, which goes, into an artifact of its own.
    new_msgs = msgs + ["m3"]
    ver["messages"] = saver.get_next_version(ver["messages"], None)
    cfg = s2.put(cfg, cp_with(5, {"messages": new_msgs}), {"source": "loop", "step": 5}, dict(ver))
    ids.append(cfg["configurable"]["checkpoint_id"])
    ver["step"] = saver.get_next_version(ver["step"], None)
    cfg = CairnSaver(client).put(cfg, cp_with(6, {"messages": new_msgs}), {"source": "loop", "step": 6}, {"step": ver["step"]})
    t = fresh().get_tuple(latest)
    assert t is not None and t.checkpoint["channel_values"] == {"messages": new_msgs, "step": 6}
    fresh().prune(["old"])
    t = fresh().get_tuple(latest)
    assert t is not None and t.checkpoint["channel_values"] == {"messages": new_msgs, "step": 6}
    assert fresh().get_tuple({"configurable": {"thread_id": "old", "checkpoint_ns": "", "checkpoint_id": ids[5]}}) is None
    assert [x.checkpoint["channel_values"]["step"] for x in fresh().list(latest)] == [6]


@pytest.mark.parametrize("odd", ['q"b\\s\n\t\x01é☃', 'q"é☃'])
def test_put_request_escapes(client: cairn.Client, odd: str) -> None:
    """put writes its request's JSON by hand: namespaces, channels, ids,
    thread ids and metadata that need escaping (quotes, backslashes,
    control characters, non-ASCII) come back as they went in."""
    saver = CairnSaver(client)
    cfg: Dict[str, Any] = {"configurable": {"thread_id": "t" + odd, "checkpoint_ns": "ns" + odd}}
    want = []
    for i in range(3):
        cp = empty_checkpoint()
        cp["channel_values"] = {"ch" + odd: [odd, i]}
        cp["channel_versions"] = {"ch" + odd: saver.get_next_version(i or None, None)}
        md = {"source": "loop", "step": i, "note" + odd: odd, "run_id": "r" + odd}
        cfg = saver.put(cfg, cp, md, cp["channel_versions"])
        want.append(cfg["configurable"]["checkpoint_id"])
    fresh = CairnSaver(client)
    t = fresh.get_tuple({"configurable": {"thread_id": "t" + odd, "checkpoint_ns": "ns" + odd}})
    assert t is not None and t.checkpoint["channel_values"] == {"ch" + odd: [odd, 2]}
    assert t.metadata["note" + odd] == odd and t.parent_config is not None
    assert t.parent_config["configurable"]["checkpoint_id"] == want[1]
    got = list(fresh.list({"configurable": {"thread_id": "t" + odd}}, filter={"note" + odd: odd}))
    assert [x.config["configurable"]["checkpoint_id"] for x in got] == want[::-1]
    fresh.delete_for_runs(["r" + odd])
    assert fresh.get_tuple({"configurable": {"thread_id": "t" + odd, "checkpoint_ns": "ns" + odd}}) is None


class Public:
    """A client seen through its public methods only (no _call): put then
    hands its change to save."""

    def __init__(self, c: cairn.Client) -> None:
        self._c = c

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._c, name)


@pytest.mark.parametrize("ns", ["", "abc", "n" * 150, "é", 'q"\\'])
@pytest.mark.parametrize("via", ["call", "save"])
def test_put_keys_at_their_limits(client: cairn.Client, ns: str, via: str) -> None:
    """put writes a checkpoint's key straight into its request when the
    namespace and the id need no escaping and the key is short enough not to
    be hashed: every checkpoint lands under _key's key (the one every read,
    and an older saver, looks up), on both sides of the hashing limit and
    with ids that need escaping, through _call and through save."""
    from cairn.langgraph import _key

    saver = CairnSaver(client if via == "call" else Public(client))  # type: ignore[arg-type]
    tid = "limits-" + via + str(len(ns)) + ns.encode("unicode_escape").decode("ascii").replace('"', "q")
    base = empty_checkpoint()["id"]
    room = 200 - len(_key("c", ns, ""))
    suffixes = ["", "a" * (room - len(base) - 1), "a" * (room - len(base)), "a" * (room - len(base) + 1), "é", 'q"', "\\b", "z" * 300]
    cfg: Dict[str, Any] = {"configurable": {"thread_id": tid, "checkpoint_ns": ns}}
    ids = []
    for i, suf in enumerate(suffixes):
        cp = empty_checkpoint()
        cp["id"] = base + str(i) + suf
        cp["channel_values"] = {"step": i}
        cp["channel_versions"] = {"step": saver.get_next_version(i or None, None)}
        cfg = saver.put(cfg, cp, {"source": "loop", "step": i}, cp["channel_versions"])
        ids.append(cp["id"])
    sid = saver.session_id(tid)
    fresh = CairnSaver(client)
    for i, cp_id in enumerate(ids):
        client.artifact(sid, _key("c", ns, cp_id))  # NotFoundError if put wrote another key
        t = fresh.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cp_id}})
        assert t is not None and t.checkpoint["channel_values"] == {"step": i} and t.metadata["step"] == i
        assert (t.parent_config or {}).get("configurable", {}).get("checkpoint_id") == (ids[i - 1] if i else None)
    got = [x.config["configurable"]["checkpoint_id"] for x in fresh.list({"configurable": {"thread_id": tid, "checkpoint_ns": ns}})]
    assert got == ids[::-1]
