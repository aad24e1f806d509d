"""handoff, runtime_check, runtime_restart, changes and resume_session's
processes, in embedded and daemon mode, against a real libcairn.

The processes are conftest's record_runtime ones. Every process a restart
starts is killed (its process group) at teardown (conftest's started).
"""

from __future__ import annotations

import os
from typing import List

import pytest

import cairn
from conftest import PREVIEW, msg, record_runtime


def test_resume_session_reports_processes(client: cairn.Client) -> None:
    client.save("plain", change={"append_messages": [msg(0)]})
    assert client.resume_session("plain")["processes"] == []
    record_runtime(client)
    procs = {p["name"]: p for p in client.resume_session("s")["processes"]}
    assert set(procs) == {"web", "broken"}
    assert procs["web"]["state"] == "unhealthy"
    assert "test -f ready" in procs["web"]["detail"]


def test_runtime_check_and_restart(client: cairn.Client, workspace: str, started: List[int]) -> None:
    record_runtime(client)
    chk = client.runtime_check("s", timeout_ms=5000)
    assert [(p["name"], p["state"]) for p in chk["processes"]] == [("web", "unhealthy"), ("broken", "unhealthy")]
    assert chk["previews"] == [{"url": PREVIEW["url"], "process": "web", "state": "unhealthy"}]
    assert not os.path.exists(os.path.join(workspace, "ready")), "runtime_check started something"

    r = client.runtime_restart("s", "web", timeout_ms=20000)
    if "pid" in r:
        started.append(r["pid"])
    assert r["name"] == "web"
    assert (r["outcome"], r["state"]) == ("started", "healthy"), r
    assert r["pid"] > 0 and r["took_ms"] >= 0
    assert r["log"] == os.path.join(workspace, ".cairn", "logs", "web.log")
    assert os.path.exists(os.path.join(workspace, "ready"))

    chk = client.runtime_check("s")
    assert {p["name"]: p["state"] for p in chk["processes"]} == {"web": "healthy", "broken": "unhealthy"}
    assert chk["previews"][0]["state"] == "healthy"
    assert {p["name"]: p["state"] for p in client.resume_session("s")["processes"]}["web"] == "healthy"

    # A healthy process is never started twice.
    again = client.runtime_restart("s", "web")
    assert (again["outcome"], again["state"]) == ("already_healthy", "healthy")
    assert "pid" not in again


def test_runtime_restart_failure_is_a_result(client: cairn.Client) -> None:
    record_runtime(client)
    r = client.runtime_restart("s", "broken", timeout_ms=10000)
    assert (r["outcome"], r["state"]) == ("failed", "not_running"), r
    assert r["error"]


def test_runtime_errors(client: cairn.Client) -> None:
    record_runtime(client)
    with pytest.raises(cairn.NotFoundError):
        client.runtime_restart("s", "nope")
    with pytest.raises(cairn.NotFoundError):
        client.runtime_check("no-such-session")
    with pytest.raises(cairn.InvalidArgumentError):
        client.runtime_check("s", timeout_ms=-1)


def test_handoff(client: cairn.Client, workspace: str) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    with open(os.path.join(workspace, "new.txt"), "w") as f:
        f.write("x")
    client.save("s", change={"append_messages": [msg(1)]})
    h = client.handoff("s")
    assert (h["session_id"], h["generation"], h["complete"]) == ("s", 2, False)
    assert h["markdown"].startswith("# Handoff: s")
    keys = [m["key"] for m in h["missing"]]
    assert "next_step" in keys and "verification" in keys
    assert all(m["message"] for m in h["missing"])
    assert h["files"]["tracked"] and h["files"]["added"] == ["new.txt"]

    client.save(
        "s",
        change={
            "handoff": {
                "done": ["wrapped every method"],
                "restart": {"commands": ["make run"]},
                "reviewed_version": {"vcs": "git", "commit": "abc1234"},
                "risks": ["none"],
                "next_step": {"task": "merge", "done_when": "main is green"},
            },
            "upsert_verifications": [{"id": "v1", "checks": [{"name": "tests", "command": "make test", "status": "passed"}]}],
        },
    )
    h = client.handoff("s")
    assert (h["complete"], h["missing"]) == (True, [])
    assert "make test" in h["markdown"] and "main is green" in h["markdown"]
    with pytest.raises(cairn.NotFoundError):
        client.handoff("no-such-session")


def test_changes(client: cairn.Client, workspace: str) -> None:
    first = client.changes()
    assert first["fresh_instance"] and first["clock"]
    assert (first["modified"], first["deleted"]) == ([], [])
    with open(os.path.join(workspace, "a.txt"), "w") as f:
        f.write("a")
    cs = client.changes(first["clock"])
    assert not cs["fresh_instance"]
    assert (cs["added"], cs["modified"], cs["deleted"]) == (["a.txt"], [], [])
    assert cs["clock"] != first["clock"]

    os.remove(os.path.join(workspace, "a.txt"))
    later = client.changes(cs["clock"])
    assert (later["added"], later["modified"], later["deleted"]) == ([], [], ["a.txt"])
    # Nothing changed since the last clock.
    assert client.changes(later["clock"])["deleted"] == []
    with pytest.raises(cairn.InvalidArgumentError):
        client.changes("not a clock")
