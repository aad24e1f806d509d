"""Every method of cairn.Client, in embedded and daemon mode."""

from __future__ import annotations

import base64
import json

import pytest

import cairn
from conftest import msg


def test_status(client: cairn.Client, workspace: str) -> None:
    st = client.status()
    assert st["mode"] == ("embedded" if client.embedded else "daemon")
    assert st["workspace"] == workspace
    assert st["version"] == cairn.version()
    if not client.embedded:
        assert st["daemon"]["pid"] > 0
        assert st["daemon"]["state"] == "serving"
    assert "protocol_version" in client.hello()


def test_save_snapshot_delta_and_resume(client: cairn.Client) -> None:
    assert client.save("s1", {"session_id": "s1", "messages": [msg(0)]}) == {"generation": 1}
    g = client.save("s1", change={"append_messages": [msg(1), msg(2)]}, expect_generation=1)
    assert g["generation"] == 2
    r = client.resume_session("s1")
    assert r["generation"] == 2
    assert r["snapshot"]["session_id"] == "s1"
    assert r["snapshot"]["messages"] == [msg(0), msg(1), msg(2)]
    assert r["interrupted_runs"] == []


def test_unicode_and_binary_artifacts(client: cairn.Client) -> None:
    blob = bytes(range(256)) * 4
    text = "héllo wörld — 日本語 🚀 \u2028"
    client.save(
        "u",
        change={
            "append_messages": [{"content": text}],
            "append_artifacts": [{"id": "a1", "name": "blob.bin", "data": blob}],
            "metadata": {"k": {"nested": [1, 2.5, None, True]}},
        },
    )
    snap = client.resume_session("u")["snapshot"]
    assert snap["messages"] == [{"content": text}]
    assert base64.b64decode(snap["artifacts"][0]["data"]) == blob
    assert snap["metadata"] == {"k": {"nested": [1, 2.5, None, True]}}


def test_runs_checkpoint_complete_resume(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    run = client.begin_run("s", "r1")
    assert run["run_id"] == "r1"
    cp = client.checkpoint(
        "r1", 1, [msg(1), msg(2)], {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}, 2, {"step": 1}
    )
    assert cp["message_count"] == 3
    rs = client.resume_session("s")
    assert [r["run_id"] for r in rs["interrupted_runs"]] == ["r1"]
    assert rs["interrupted_runs"][0]["turn"] == 1

    rr = client.resume_run("r1", session_id="s", new_run_id="r2")
    assert rr["run_id"] == "r2"
    assert rr["resumed_from"] == "r1"
    assert rr["session_id"] == "s"
    assert rr["messages"] == [msg(0), msg(1), msg(2)]
    assert rr["turn"] == 1
    assert rr["usage"]["total_tokens"] == 15
    assert rr["tool_calls_count"] == 2
    assert rr["state"] == {"step": 1}

    client.checkpoint("r2", 2, [msg(3)], {"total_tokens": 20}, 3, session_id="s")
    done = client.complete_run("r2", "completed", {"total_tokens": 30}, 4)
    assert done["generation"] > cp["generation"]
    runs = {r["run_id"]: r for r in client.export("s")["runs"]}
    assert runs["r2"]["status"] == "completed"
    assert runs["r2"]["tool_calls_count"] == 4

    auto = client.begin_run("s")
    assert auto["run_id"] and auto["run_id"] != "r1"


def test_workflow_methods(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    steps = [{"step_id": "a", "identity": "ia"}, {"step_id": "b", "identity": "ib"}]
    assert client.begin_workflow("wf", steps, "s")["completed"] == []
    client.complete_step("wf", "a", "ia", {"out": [1, 2]}, "s")
    done = client.begin_workflow("wf", steps, "s")["completed"]
    assert [(d["step_id"], d["identity"], d["result"]) for d in done] == [("a", "ia", {"out": [1, 2]})]
    client.complete_step("wf", "b", "ib", session_id="s")  # no result
    assert len(client.begin_workflow("wf", steps, "s")["completed"]) == 2
    client.finish_workflow("wf")
    # A finished workflow starts over.
    assert client.begin_workflow("wf", steps, "s")["completed"] == []


def test_list_delete_fork(client: cairn.Client) -> None:
    assert client.list_sessions() == []
    client.save("a", change={"append_messages": [msg(0)]})
    client.save("a", change={"append_messages": [msg(1)]})
    client.save("b", change={"append_messages": [msg(0)]})
    ls = {s["session_id"]: s for s in client.list_sessions()}
    assert set(ls) == {"a", "b"}
    assert ls["a"]["generation"] == 2 and ls["a"]["message_count"] == 2

    f = client.fork("a", "a-at-1", at_generation=1)
    assert f["session_id"] == "a-at-1"
    assert client.resume_session("a-at-1")["snapshot"]["messages"] == [msg(0)]
    client.fork("a", "a-latest")
    assert client.resume_session("a-latest")["snapshot"]["messages"] == [msg(0), msg(1)]

    client.delete("b")
    assert {s["session_id"] for s in client.list_sessions()} == {"a", "a-at-1", "a-latest"}
    with pytest.raises(cairn.NotFoundError):
        client.resume_session("b")


def test_export_import(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0), {"content": "ünï"}]})
    run = client.begin_run("s", "r")
    client.checkpoint(run["run_id"], 1, [msg(1)], {}, 0)
    env = client.export("s")
    assert env["schema_version"] == 1
    assert env["session"]["session_id"] == "s"

    client.delete("s")
    imp = client.import_(env)
    assert imp["session_id"] == "s"
    assert client.resume_session("s")["snapshot"]["messages"] == [msg(0), {"content": "ünï"}, msg(1)]
    # The envelope as JSON text (str or bytes) imports too.
    client.delete("s")
    assert client.import_(json.dumps(env))["session_id"] == "s"
    client.delete("s")
    assert client.import_(json.dumps(env).encode())["session_id"] == "s"
    with pytest.raises(cairn.ConflictError):
        client.import_(env)


def test_generic_call(client: cairn.Client) -> None:
    assert client.call("status")["mode"] in ("embedded", "daemon")
    client.call("save", {"session_id": "x", "change": {"append_messages": [1]}})
    assert client.call("list")["sessions"][0]["session_id"] == "x"


def test_context_manager_and_close(workspace: str) -> None:
    before = cairn.open_handles()
    with cairn.connect(workspace, embedded=True) as c:
        assert cairn.open_handles() == before + 1
        assert not c.closed
        assert "embedded" in repr(c)
    assert c.closed
    assert cairn.open_handles() == before
    c.close()  # idempotent
    # The lock is released: the workspace opens again.
    with cairn.connect(workspace, embedded=True) as c2:
        c2.status()


def test_embedded_persists_across_handles(workspace: str) -> None:
    with cairn.connect(workspace, embedded=True) as c:
        c.save("s", change={"append_messages": [msg(0)]})
    with cairn.connect(workspace, embedded=True) as c:
        assert c.resume_session("s")["generation"] == 1


def test_daemon_auto_start_and_shared_state(workspace: str, daemons: list) -> None:
    from conftest import DAEMON, DAEMON_ARGS, stop_daemon

    # Nothing runs yet: without auto-start the connect fails.
    with pytest.raises(cairn.UnavailableError):
        cairn.connect(workspace, daemon=DAEMON, auto_start=False)
    c1 = cairn.connect(workspace, daemon=DAEMON, daemon_args=DAEMON_ARGS)
    try:
        pid = c1.status()["daemon"]["pid"]
        daemons.append(pid)
        c1.save("s", change={"append_messages": [msg(0)]})
        # A second client reaches the same daemon, auto-start off.
        with cairn.connect(workspace, auto_start=False) as c2:
            assert c2.status()["daemon"]["pid"] == pid
            assert c2.resume_session("s")["generation"] == 1
        # When the daemon goes away, an auto-starting client brings it back.
        stop_daemon(pid)
        st = c1.status()
        daemons.append(st["daemon"]["pid"])
        assert st["daemon"]["pid"] != pid
        assert c1.resume_session("s")["generation"] == 1
    finally:
        c1.close()
