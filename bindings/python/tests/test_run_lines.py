"""Run lines (protocol/PROTOCOL.md, "Run lines"): after resume_run(r) -> r2,
the original run r takes no more writes. complete_run and checkpoint on it
raise NotOwnerError naming the successor, write nothing, and r2 stays the
live, resumable end of the line. Embedded and through the daemon."""

from __future__ import annotations

import pytest

import cairn
from conftest import msg


def _interrupted(c: cairn.Client, sid: str = "s") -> list:
    return [(ir["run_id"], ir.get("resumed_as")) for ir in c.resume_session(sid)["interrupted_runs"]]


def _status(c: cairn.Client, run_id: str, sid: str = "s") -> str:
    for r in c.resume_session(sid)["snapshot"]["runs"]:
        if r["run_id"] == run_id:
            return r["status"]
    raise AssertionError(f"session {sid} records no run {run_id}")


def test_superseded_run_is_not_owner(client: cairn.Client) -> None:
    c = client
    c.save("s", change={"append_messages": [msg(0)]})
    c.begin_run("s", "r")
    c.checkpoint("r", 1, [msg(1)], {"total_tokens": 10}, 1, {"step": 1})
    r2 = c.resume_run("r", new_run_id="r2")
    assert r2["run_id"] == "r2" and r2["resumed_from"] == "r"
    gen = c.resume_session("s")["generation"]

    # The bug: completing the original run used to succeed and strand r2.
    for status in ("completed", "failed", "interrupted"):
        for sid in (None, "s"):
            with pytest.raises(cairn.NotOwnerError) as ei:
                c.complete_run("r", status, session_id=sid)
            assert '"r2"' in str(ei.value)
    with pytest.raises(cairn.NotOwnerError) as ei:
        c.checkpoint("r", 2, [msg(2)])
    assert '"r2"' in str(ei.value)
    assert c.resume_session("s")["generation"] == gen, "a refused call wrote"
    assert _status(c, "r2") == "running"
    assert _interrupted(c) == [("r", "r2")]

    # The same resume again is idempotent.
    again = c.resume_run("r", new_run_id="r2")
    assert again == r2
    assert c.resume_session("s")["generation"] == gen

    # r2 carries the line on: its checkpoint consumes r's boundary.
    c.checkpoint("r2", 2, [msg(2)], {"total_tokens": 20}, 2)
    assert _interrupted(c) == [("r2", None)]
    with pytest.raises(cairn.NotOwnerError):
        c.complete_run("r", "interrupted")
    with pytest.raises(cairn.NoCheckpointError) as nc:
        c.resume_run("r")
    assert '"r2"' in str(nc.value)

    # Two steps on: errors name the successor and the line's latest run.
    c.resume_run("r2", new_run_id="r3")
    with pytest.raises(cairn.NotOwnerError) as ei:
        c.complete_run("r", "completed")
    assert '"r2"' in str(ei.value) and '"r3"' in str(ei.value)

    # Ending the head ends the line and releases its checkpoint.
    c.complete_run("r3", "completed")
    assert _interrupted(c) == []
    assert [_status(c, x) for x in ("r", "r2", "r3")] == ["interrupted", "interrupted", "completed"]
    assert all(s["checkpoints"] == 0 for s in c.list_sessions())


def test_resume_again_supersedes_pending_successor(client: cairn.Client) -> None:
    c = client
    c.save("s", change={"append_messages": [msg(0)]})
    c.begin_run("s", "r")
    c.checkpoint("r", 1, [msg(1)])
    c.resume_run("r", new_run_id="a")
    c.resume_run("r", new_run_id="b")  # "a" never checkpointed: superseded
    assert _status(c, "a") == "interrupted"
    with pytest.raises(cairn.NotOwnerError) as ei:
        c.complete_run("a", "completed")
    assert '"b"' in str(ei.value)
    with pytest.raises(cairn.NotOwnerError):
        c.checkpoint("a", 2, [])
    with pytest.raises(cairn.ConflictError):
        c.resume_run("r", new_run_id="a")  # the id is taken by a superseded run
    assert _interrupted(c) == [("r", "b")]
    res = c.checkpoint("b", 2, [msg(2)])
    assert res["message_count"] == 3
    assert _interrupted(c) == [("b", None)]
