"""CairnSaver beyond the conformance suite: its reads stay flat as a thread
grows (the same calls, none of them a whole-session read, at 5 and at 300
checkpoints), the thread-to-session mapping, and a real graph run with
durability="sync" that a new saver (a new client) resumes."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Dict, List, TypedDict

import pytest

import cairn

# Imported, not importorskip: a missing framework package is a failure.
from langgraph.checkpoint.base import empty_checkpoint
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


def test_thread_maps_to_a_session(client: cairn.Client) -> None:
    saver = CairnSaver(client)
    fill(saver, "t/1", 2)
    assert saver.session_id("t/1") == "langgraph:t/1"
    assert client.summary("langgraph:t/1")["message_count"] == 2


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
