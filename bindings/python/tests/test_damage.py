"""A damaged session log through the binding: list shows it as corrupt,
reads answer CorruptError, verify reports it, repair plans without writing
and, applied, salvages the intact prefix and keeps the original bytes in
quarantine. In each mode, on a log damaged while no engine holds the store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

import pytest

import cairn
import cairn.types as types
from conftest import connect_daemon, msg
from test_schema import check

COMMITS = 20
MSG_BYTES = 5000


def log_path(ws: str, sid: str) -> Path:
    return Path(ws) / ".cairn" / "sessions" / f"s-{sid}.log"


def quarantined(ws: str) -> List[str]:
    q = Path(ws) / ".cairn" / "quarantine"
    return sorted(p.name for p in q.iterdir()) if q.is_dir() else []


def damage(ws: str) -> bytes:
    """Saves COMMITS commits of one ~5 KB message each to session "bad" and
    one to "good", closes the store, flips a bit in the middle of "bad"'s
    log (inside a middle commit, with intact commits after it) and returns
    the damaged bytes."""
    with cairn.connect(ws, embedded=True) as c:
        for i in range(COMMITS):
            c.save("bad", change={"append_messages": [msg(i, MSG_BYTES)]})
        c.save("good", change={"append_messages": [msg(0)]})
    path = log_path(ws, "bad")
    data = bytearray(path.read_bytes())
    assert len(data) > COMMITS * MSG_BYTES, "the log is smaller than its messages: compacted or not written"
    at = len(data) // 2
    assert len(data) // 3 <= at < 2 * len(data) // 3
    data[at] ^= 0x10
    path.write_bytes(bytes(data))
    return bytes(data)


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_corrupt_session_verify_and_repair(workspace: str, daemons: List[int], mode: str) -> None:
    damaged = damage(workspace)
    path = log_path(workspace, "bad")
    c = cairn.connect(workspace, embedded=True) if mode == "embedded" else connect_daemon(workspace, daemons)
    try:
        # Opening the store destroys nothing.
        assert path.read_bytes() == damaged

        listed = {s["session_id"]: s for s in c.list_sessions()}
        assert set(listed) == {"bad", "good"}
        assert listed["bad"]["state"] == "corrupt"
        assert listed["bad"]["problem"]
        assert "state" not in listed["good"] and "problem" not in listed["good"]
        assert not check(listed["bad"], types.Summary, "bad")
        with pytest.raises(cairn.CorruptError):
            c.resume_session("bad")
        with pytest.raises(cairn.CorruptError):
            c.messages("bad", tail=1)
        assert c.messages("good")["total"] == 1

        rep = c.verify()
        assert not check(rep, types.VerifyReport, "verify"), check(rep, types.VerifyReport, "verify")
        assert rep["ok"] is False
        assert rep["sessions"] == 2
        assert len(rep["problems"]) == 1, rep["problems"]
        p = rep["problems"][0]
        assert (p["kind"], p["id"], p["state"]) == ("session", "bad", "corrupt")
        assert p["path"].endswith(os.path.join(".cairn", "sessions", "s-bad.log"))
        assert p["size"] == len(damaged)
        assert 0 < p["generation"] < COMMITS

        before = quarantined(workspace)
        plan = c.repair("bad")
        assert not check(plan, types.RepairReport, "repair"), check(plan, types.RepairReport, "repair")
        assert plan["applied"] is False
        assert (plan["kind"], plan["id"], plan["state"]) == ("session", "bad", "corrupt")
        assert 0 < plan["generation"] < COMMITS
        assert plan["lost"] and plan["lost_bytes"] > 0
        assert plan["kept_bytes"] + plan["lost_bytes"] == len(damaged)
        # A plan writes nothing.
        assert path.read_bytes() == damaged
        assert quarantined(workspace) == before
        with pytest.raises(cairn.CorruptError):
            c.summary("bad")

        done = c.repair("bad", apply=True)
        assert not check(done, types.RepairReport, "repair"), check(done, types.RepairReport, "repair")
        assert done["applied"] is True
        assert done["generation"] == plan["generation"]
        gen = done["generation"]
        state = c.resume_session("bad")
        assert state["generation"] == gen
        assert state["snapshot"]["messages"] == [msg(i, MSG_BYTES) for i in range(gen)]
        assert c.save("bad", change={"append_messages": [msg(99)]})["generation"] == gen + 1
        assert c.summary("bad")["message_count"] == gen + 1
        assert "state" not in c.summary("bad")

        # The original bytes are in quarantine, whole.
        q = Path(done["quarantine"])
        assert q.parent == Path(workspace) / ".cairn" / "quarantine"
        assert q.read_bytes() == damaged
        after = c.verify()
        assert after["ok"] is True and after["problems"] == []
        assert str(q) in after["quarantine"]
    finally:
        c.close()


def test_repair_names_one_log(embedded: cairn.Client) -> None:
    embedded.save("s", change={"append_messages": [msg(0)]})
    with pytest.raises(cairn.InvalidArgumentError):
        embedded.repair()
    with pytest.raises(cairn.InvalidArgumentError):
        embedded.repair("s", workflow_id="w")
    # A healthy session has nothing to repair.
    with pytest.raises(cairn.InvalidArgumentError):
        embedded.repair("s", apply=True)
    with pytest.raises(cairn.NotFoundError):
        embedded.repair("missing")
    assert embedded.verify()["ok"] is True


def test_async_verify_and_repair(workspace: str) -> None:
    import asyncio

    import cairn.aio

    damaged = damage(workspace)

    async def go() -> None:
        c = await cairn.aio.connect(workspace, embedded=True)
        try:
            rep = await c.verify()
            assert [p["id"] for p in rep["problems"]] == ["bad"]
            plan = await c.repair("bad")
            assert plan["applied"] is False
            assert log_path(workspace, "bad").read_bytes() == damaged
            done = await c.repair("bad", apply=True)
            assert done["applied"] is True
            assert (await c.summary("bad"))["generation"] == done["generation"]
        finally:
            await c.close()

    asyncio.run(asyncio.wait_for(go(), timeout=60))


def test_verify_secrets(embedded: cairn.Client) -> None:
    """verify(secrets=True) lists where content holds a credential, redacted,
    and changes nothing; verify() alone does not scan."""
    tok = "ghp_4Nq8Lx2Vm9Wz7Kp1Rt3Ys6Bd0Fg5Jh2Ca8Ue4O"
    m = {"role": "user", "content": "token " + tok}
    embedded.save("s", change={"append_messages": ["hi", m], "metadata": {"github_token": "x-plain", "ticket": 7}})
    assert "secrets" not in embedded.verify()
    rep = embedded.verify(secrets=True)
    assert not check(rep, types.VerifyReport, "verify")
    scan = rep["secrets"]
    assert scan["found"] == 1 and scan["messages"] == 2
    f = scan["findings"][0]
    assert (f["session_id"], f["where"], f["index"], f["rule"], f["redacted"]) == ("s", "message", 1, "github_token", "ghp_…")
    assert tok not in str(rep)
    # The credential-named metadata key was never stored; the message is kept.
    res = embedded.resume_session("s")
    assert res["snapshot"]["metadata"] == {"ticket": 7}
    assert res["snapshot"]["messages"][1] == m
