"""A LangGraph graph run in its own process, for the crash test.
argv: saver(cairn-embedded|cairn-daemon|sqlite) store_path phase(run|resume)
The graph: start -> a -> (fast, slow in parallel) -> join. Every node
execution is appended to store_path/exec.log. In phase "run", "slow" prints
"IN_SLOW" and blocks (it is SIGKILLed there, after "fast" finished in the
same step). Phase "resume" prints the state before resuming and the final
state, as JSON."""

from __future__ import annotations

import json
import operator
import os
import sqlite3
import sys
import time
from typing import Annotated, List, TypedDict

from langgraph.graph import END, START, StateGraph

kind, path, phase = sys.argv[1:4]
LOG = os.path.join(path, "exec.log")


class State(TypedDict):
    log: Annotated[List[str], operator.add]


def node(name: str):  # type: ignore[no-untyped-def]
    def run(s: State) -> dict:
        with open(LOG, "a") as f:
            f.write(name + "\n")
        if name == "slow" and phase == "run":
            # Killed once "fast", run in the same step, has its write
            # stored: the step is half done.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                t = SAVER.get_tuple({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})
                if t and any(w[1] == "log" and w[2] == ["fast"] for w in t.pending_writes or []):
                    break
                time.sleep(0.01)
            print("IN_SLOW", flush=True)
            time.sleep(120)
        return {"log": [name]}

    return run


def build(saver):  # type: ignore[no-untyped-def]
    g = StateGraph(State)
    for n in ("a", "fast", "slow", "join"):
        g.add_node(n, node(n))
    g.add_edge(START, "a")
    g.add_edge("a", "fast")
    g.add_edge("a", "slow")
    g.add_edge(["fast", "slow"], "join")
    g.add_edge("join", END)
    return g.compile(checkpointer=saver)


def main(saver) -> None:  # type: ignore[no-untyped-def]
    global SAVER
    SAVER = saver
    g = build(saver)
    cfg = {"configurable": {"thread_id": "t1"}}
    if phase == "run":
        g.invoke({"log": ["in"]}, cfg, durability="sync")
        return
    before = g.get_state(cfg)
    out = g.invoke(None, cfg, durability="sync")
    print(json.dumps({"before_next": sorted(before.next), "before_log": before.values.get("log"),
                      "final": out["log"], "exec": open(LOG).read().split()}), flush=True)


if kind == "sqlite":
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(os.path.join(path, "cp.sqlite"), check_same_thread=False)
    main(SqliteSaver(conn))
else:
    import cairn
    from cairn.langgraph import CairnSaver

    c = cairn.connect(path, embedded=True) if kind == "cairn-embedded" else cairn.connect(path, daemon_args=["--idle-timeout=20s"])
    main(CairnSaver(c))
    c.close()
