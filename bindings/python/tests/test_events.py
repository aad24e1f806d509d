"""subscribe: events in commit order, filtering, closing."""

from __future__ import annotations

import threading
import time
from typing import List

import cairn
from cairn.types import Event
from conftest import msg


def collect(sub: cairn.Subscription, n: int, timeout: float = 20) -> List[Event]:
    out: List[Event] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        ev = sub.next_event(timeout=deadline - time.monotonic())
        if ev is not None:
            out.append(ev)
    return out


def test_events_in_commit_order(client: cairn.Client) -> None:
    with client.subscribe(["session.committed"]) as sub:
        for i in range(20):
            client.save("s", change={"append_messages": [msg(i)]})
        evs = collect(sub, 20)
    assert [e["event"] for e in evs] == ["session.committed"] * 20
    assert [e["data"]["generation"] for e in evs] == list(range(1, 21))
    assert {e["data"]["session_id"] for e in evs} == {"s"}
    assert sub.closed and sub.dropped == 0


def test_all_event_kinds(client: cairn.Client) -> None:
    sub = client.subscribe()
    try:
        client.save("s", change={"append_messages": [msg(0)]})
        client.begin_run("s", "r")
        client.checkpoint("r", 1, [msg(1)], {}, 0)
        client.resume_run("r", new_run_id="r2")
        client.complete_run("r2", "completed")
        client.begin_workflow("wf", [{"step_id": "a", "identity": "x"}], "s")
        client.complete_step("wf", "a", "x", 1, "s")
        client.delete("s")
        want = {
            "session.committed",
            "run.checkpointed",
            "run.resumed",
            "run.completed",
            "workflow.step_completed",
            "session.deleted",
        }
        seen: List[str] = []
        deadline = time.monotonic() + 20
        while not want <= set(seen) and time.monotonic() < deadline:
            ev = sub.next_event(timeout=1)
            if ev:
                seen.append(ev["event"])
        assert want <= set(seen), seen
        assert seen[-1] == "session.deleted"
        cp = seen.index("run.checkpointed")
        assert seen.index("run.resumed") > cp and seen.index("run.completed") > seen.index("run.resumed")
    finally:
        sub.close()


def test_filter(client: cairn.Client) -> None:
    with client.subscribe(["session.deleted"]) as sub:
        client.save("a", change={"append_messages": [msg(0)]})
        client.delete("a")
        evs = collect(sub, 1)
        assert evs == [{"event": "session.deleted", "data": {"session_id": "a"}}]
        assert sub.next_event(timeout=0.05) is None  # nothing else came


def test_iterator_ends_when_closed_from_another_thread(client: cairn.Client) -> None:
    sub = client.subscribe(poll_interval=5)
    got: List[Event] = []
    done = threading.Event()

    def consume() -> None:
        for ev in sub:
            got.append(ev)
        done.set()

    th = threading.Thread(target=consume)
    th.start()
    client.save("s", change={"append_messages": [msg(0)]})
    deadline = time.monotonic() + 20
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    sub.close()  # unblocks the waiting nextEvent well before poll_interval
    assert done.wait(timeout=4)
    th.join(timeout=10)
    assert got and got[0]["event"] == "session.committed"
    assert list(sub) == []
    sub.close()  # idempotent


def test_closing_client_ends_subscription(workspace: str) -> None:
    c = cairn.connect(workspace, embedded=True)
    sub = c.subscribe()
    c.close()
    assert sub.next_event(timeout=1) is None and sub.closed
    assert list(sub) == []
    sub.close()  # no error after the client is gone
