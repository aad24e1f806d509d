"""The targeted reads (summary, messages, artifact, artifacts, run, runs,
run_events), resume_session's options and the delta edits (truncate_messages,
delete_artifacts, put_artifacts), in embedded and daemon mode: each read
answers exactly the matching slice of a whole resume_session."""

from __future__ import annotations

import base64
from typing import Any, Dict, List

import pytest

import cairn
from conftest import aio_connect, msg, run


def trace(seq: int, run_id: str, data: Any = None) -> Dict[str, Any]:
    t: Dict[str, Any] = {"seq": seq, "time": "2026-12-01T10:00:00Z", "type": "tool_call", "run_id": run_id}
    if data is not None:
        t["data"] = data
    return t


def varied(i: int) -> Dict[str, Any]:
    """Message i, of a size that varies with i (paging by bytes cuts unevenly)."""
    return {"role": "user", "content": f"m{i}:" + "y" * ((i * 37) % 300)}


def build(c: cairn.Client, sid: str = "s", n: int = 30) -> None:
    """A session with n messages over three saves, two artifacts (binary
    data, metadata), traces of run r1 and of no run, and run r1 checkpointed
    twice."""
    c.save(sid, change={"append_messages": [varied(i) for i in range(n // 2)]})
    c.save(
        sid,
        change={
            "append_artifacts": [
                {"id": "a1", "name": "blob.bin", "kind": "file", "data": bytes(range(256)), "metadata": {"lines": 0}},
                {"id": "a2", "name": "notes.md", "media_type": "text/markdown", "data": b"# notes\n", "metadata": ["x", 1]},
            ],
            "append_traces": [trace(1, "", {"note": "no run"})],
        },
    )
    c.begin_run(sid, "r1")
    c.save(sid, change={"append_traces": [trace(2, "r1", {"tool": "ls"}), trace(3, "r1", {"tool": "cat"})]})
    c.checkpoint("r1", 1, [varied(i) for i in range(n // 2, n // 2 + 3)], {"total_tokens": 5}, 1, {"turn": 1})
    c.save(sid, change={"append_traces": [trace(4, "r1", {"tool": "make"})]})
    c.checkpoint("r1", 2, [varied(i) for i in range(n // 2 + 3, n)], {"total_tokens": 9}, 2, {"turn": 2})


def walk_messages(c: cairn.Client, sid: str, **q: Any) -> List[List[Any]]:
    """Every page of a messages query, following next while more."""
    pages = []
    page = c.messages(sid, **q)
    pages.append(page["messages"])
    # The next page is the range from next on: tail and since_generation
    # selected where the range starts, and are not sent again.
    rest = {k: v for k, v in q.items() if k not in ("tail", "since_generation")}
    while page["more"]:
        assert page["next"] > page["from"], "a page must advance"
        page = c.messages(sid, **{**rest, "from_": page["next"]})
        pages.append(page["messages"])
    return pages


def test_reads_are_slices_of_resume_session(client: cairn.Client) -> None:
    build(client)
    whole = client.resume_session("s")
    snap = whole["snapshot"]
    gen = whole["generation"]
    msgs = snap["messages"]
    assert len(msgs) == 30 and whole["message_count"] == 30 and whole["messages_from"] == 0

    s = client.summary("s")
    assert s["session_id"] == "s" and s["generation"] == gen
    assert (s["message_count"], s["artifact_count"], s["trace_count"]) == (30, 2, len(snap["traces"]))
    assert s["live_bytes"] > 0 and s["size_bytes"] > 0

    page = client.messages("s")
    assert page == {"session_id": "s", "generation": gen, "total": 30, "from": 0, "next": 30, "more": False, "messages": msgs}
    assert client.messages("s", tail=5)["messages"] == msgs[-5:]
    assert client.messages("s", tail=5)["from"] == 25
    assert client.messages("s", tail=99)["messages"] == msgs
    assert client.messages("s", from_=3, to=9)["messages"] == msgs[3:9]
    assert client.messages("s", from_=28)["messages"] == msgs[28:]

    by_id = {a["id"]: a for a in snap["artifacts"]}
    for aid, full in by_id.items():
        got = client.artifact("s", aid)
        assert got["session_id"] == "s" and got["generation"] == gen
        a = got["artifact"]
        assert isinstance(a["data"], bytes)
        assert a["data"] == base64.b64decode(full["data"])
        assert {k: v for k, v in a.items() if k != "data"} == {k: v for k, v in full.items() if k != "data"}
    assert client.artifact("s", "a1")["artifact"]["data"] == bytes(range(256))
    assert client.artifact("s", "a2")["artifact"]["metadata"] == ["x", 1]

    listed = client.artifacts("s")
    assert listed["generation"] == gen
    assert listed["artifacts"] == [{k: v for k, v in a.items() if k != "data"} for a in snap["artifacts"]]

    runs = client.runs("s")
    assert runs["generation"] == gen and runs["runs"] == snap["runs"]
    r = client.run("r1")
    assert r["session_id"] == "s" and r["run"] == snap["runs"][0]
    assert r["checkpoint"]["turn"] == 2 and r["checkpoint"]["state"] == {"turn": 2}
    assert r["checkpoint"]["message_count"] == 30
    assert client.run("r1", session_id="s") == r

    ev = client.run_events("r1")
    assert ev["run_id"] == "r1" and ev["session_id"] == "s" and ev["generation"] == gen
    traces = [e["trace"] for e in ev["events"] if e["kind"] == "trace"]
    assert traces == [t for t in snap["traces"] if t.get("run_id") == "r1"]
    assert [e["checkpoint"]["turn"] for e in ev["events"] if e["kind"] == "checkpoint"] == [1, 2]
    # In commit order: two traces, checkpoint 1, a trace, checkpoint 2.
    assert [e["kind"] for e in ev["events"]] == ["trace", "trace", "checkpoint", "trace", "checkpoint"]
    assert [e["generation"] for e in ev["events"]] == sorted(e["generation"] for e in ev["events"])
    assert (ev["total"], ev["from"], ev["next"], ev["more"]) == (5, 0, 5, False)

    # resume_session's tail is the same slice messages(tail=) reads.
    t = client.resume_session("s", messages_tail=7)
    assert t["snapshot"]["messages"] == msgs[-7:] == client.messages("s", tail=7)["messages"]
    assert (t["message_count"], t["messages_from"]) == (30, 23)


def test_reads_of_missing_things(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    client.save("other", change={"append_messages": [msg(0)]})
    client.begin_run("s", "r1")
    for read in (
        lambda: client.summary("nope"),
        lambda: client.messages("nope"),
        lambda: client.artifacts("nope"),
        lambda: client.runs("nope"),
        lambda: client.run("r-none"),
    ):
        with pytest.raises(cairn.NotFoundError):
            read()
    with pytest.raises(cairn.NotFoundError, match="zz"):
        client.artifact("s", "zz")
    with pytest.raises(cairn.NotOwnerError):
        client.run("r1", session_id="other")
    with pytest.raises(cairn.InvalidArgumentError):
        client.messages("s", tail=2, from_=1)
    with pytest.raises(cairn.InvalidArgumentError):
        client.messages("s", from_=5, to=2)


def test_tail_after_truncate(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(i) for i in range(10)]})
    # Replace the messages from 6 on: truncate to 6, then append.
    g = client.save("s", change={"truncate_messages": 6, "append_messages": [msg(100), msg(101)]})["generation"]
    want = [msg(i) for i in range(6)] + [msg(100), msg(101)]
    assert client.resume_session("s")["snapshot"]["messages"] == want
    tail = client.messages("s", tail=3)
    assert tail["messages"] == [msg(5), msg(100), msg(101)]
    assert (tail["total"], tail["from"], tail["next"], tail["generation"]) == (8, 5, 8, g)
    # Truncation alone.
    client.save("s", change={"truncate_messages": 4})
    assert client.messages("s", tail=10)["messages"] == [msg(i) for i in range(4)]
    assert client.summary("s")["message_count"] == 4
    client.save("s", change={"truncate_messages": 0})
    empty = client.messages("s", tail=3)
    assert empty["messages"] == [] and (empty["total"], empty["more"]) == (0, False)
    gen = client.summary("s")["generation"]
    with pytest.raises(cairn.InvalidArgumentError):
        client.save("s", change={"truncate_messages": 1})
    assert client.summary("s")["generation"] == gen


def test_since_generation(client: cairn.Client) -> None:
    g1 = client.save("s", change={"append_messages": [msg(0), msg(1), msg(2)]})["generation"]
    g2 = client.save("s", change={"append_messages": [msg(3), msg(4)]})["generation"]
    page = client.messages("s", since_generation=g1)
    assert page["messages"] == [msg(3), msg(4)] and page["from"] == 3
    assert client.messages("s", since_generation=g2)["messages"] == []
    # A commit that changes no message adds none.
    client.save("s", change={"metadata": {"k": 1}})
    assert client.messages("s", since_generation=g2)["messages"] == []
    # Messages rewritten after g2 count as added after it.
    client.save("s", change={"truncate_messages": 2, "append_messages": [msg(9)]})
    page = client.messages("s", since_generation=g2)
    assert page["messages"] == [msg(9)] and page["from"] == 2
    assert client.messages("s", since_generation=g1)["messages"] == [msg(9)]
    # A page of a since_generation read goes on from next.
    client.save("s", change={"append_messages": [msg(10), msg(11)]})
    pages = walk_messages(client, "s", since_generation=g2, limit=1)
    assert pages == [[msg(9)], [msg(10)], [msg(11)]]


@pytest.mark.parametrize("cut", [{"limit": 7}, {"max_bytes": 400}, {"limit": 3, "max_bytes": 250}, {"max_bytes": 1}])
def test_paging_walks_the_whole_list(client: cairn.Client, cut: Dict[str, int]) -> None:
    n = 50
    client.save("s", change={"append_messages": [varied(i) for i in range(n)]})
    whole = client.resume_session("s")["snapshot"]["messages"]
    pages = walk_messages(client, "s", **cut)
    assert [m for p in pages for m in p] == whole
    assert len(pages) > 1
    assert all(p for p in pages), "every page holds at least one message"
    if "limit" in cut:
        assert all(len(p) <= cut["limit"] for p in pages)
    if cut.get("max_bytes") == 1:
        assert all(len(p) == 1 for p in pages)
    # A bounded range is walked to its end, not past it.
    pages = walk_messages(client, "s", from_=10, to=20, **cut)
    assert [m for p in pages for m in p] == whole[10:20]
    # So is a tail.
    pages = walk_messages(client, "s", tail=12, **cut)
    assert [m for p in pages for m in p] == whole[-12:]


@pytest.mark.parametrize("max_bytes", [None, 1, 700])
def test_iter_messages(client: cairn.Client, max_bytes: Any) -> None:
    n = 50
    client.save("s", change={"append_messages": [varied(i) for i in range(n)]})
    whole = client.resume_session("s")["snapshot"]["messages"]
    assert list(client.iter_messages("s", max_bytes=max_bytes)) == whole
    assert list(client.iter_messages("s", from_=10, to=20, max_bytes=max_bytes)) == whole[10:20]
    assert list(client.iter_messages("s", from_=n, max_bytes=max_bytes)) == []
    # A commit between two pages: the pages would not be of one generation.
    it = client.iter_messages("s", max_bytes=1)
    assert next(it) == whole[0]
    client.save("s", change={"truncate_messages": 5, "append_messages": [varied(99)]})
    with pytest.raises(cairn.ConflictError):
        list(it)


def test_messages_text_round_trips(client: cairn.Client) -> None:
    # A page is decoded from C memory as text: non-ASCII, escapes, a lone
    # surrogate (sent as its escape) and markup come back as saved.
    sent = [{"t": "é 😀 \u2028 \"q\" <b>&</b>", "s": "\ud800", "n": [1.5, None, True]}, "plain", 7]
    client.save("s", change={"append_messages": sent})
    assert client.messages("s")["messages"] == sent
    assert list(client.iter_messages("s")) == sent


def test_run_events_paging_and_since(client: cairn.Client) -> None:
    build(client)
    whole = client.run_events("r1")["events"]
    got: List[Any] = []
    page = client.run_events("r1", limit=2)
    got += page["events"]
    while page["more"]:
        assert len(page["events"]) <= 2
        page = client.run_events("r1", "s", from_=page["next"], limit=2)
        got += page["events"]
    assert got == whole
    one = client.run_events("r1", max_bytes=1)
    assert len(one["events"]) == 1 and one["more"]
    last = whole[-1]["generation"]
    assert client.run_events("r1", since_generation=last)["events"] == []
    after_first_cp = [e for e in whole if e["generation"] > whole[2]["generation"]]
    assert client.run_events("r1", since_generation=whole[2]["generation"])["events"] == after_first_cp


def test_run_runs_run_events_across_resume(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    client.begin_run("s", "r1")
    client.checkpoint("r1", 1, [msg(1)], {"total_tokens": 3}, 1, {"k": 1})
    r = client.run("r1")
    assert r["run"]["status"] == "running" and r["checkpoint"]["state"] == {"k": 1}
    assert "resumed_as" not in r
    client.resume_run("r1", new_run_id="r2")
    r1 = client.run("r1")
    assert r1["resumed_as"] == "r2"
    r2 = client.run("r2", "s")
    assert r2["run"]["parent_run_id"] == "r1" and r2["run"]["status"] == "running"
    assert "checkpoint" not in r2 or r2["checkpoint"] is None
    assert client.run_events("r2")["events"] == []
    client.checkpoint("r2", 2, [msg(2)], {"total_tokens": 5}, 2, {"k": 2})
    assert client.run("r2")["checkpoint"]["turn"] == 2
    assert [e["kind"] for e in client.run_events("r2")["events"]] == ["checkpoint"]
    client.complete_run("r2", "completed")
    assert client.run("r2")["run"]["status"] == "completed"
    runs = client.runs("s")["runs"]
    assert [x["run_id"] for x in runs] == ["r1", "r2"]
    assert runs == client.resume_session("s")["snapshot"]["runs"]


def test_artifact_put_replace_delete(client: cairn.Client) -> None:
    client.save(
        "s",
        change={"append_artifacts": [{"id": "a1", "data": b"one"}, {"id": "a2", "data": b"two", "metadata": {"v": 1}}]},
    )
    # put replaces a1 in place and inserts a3 at the end.
    client.save(
        "s",
        change={"put_artifacts": [{"id": "a1", "data": b"ONE!", "metadata": {"v": 2}}, {"id": "a3", "data": b"three"}]},
    )
    a1 = client.artifact("s", "a1")["artifact"]
    assert a1["data"] == b"ONE!" and a1["metadata"] == {"v": 2}
    assert client.artifact("s", "a3")["artifact"]["data"] == b"three"
    assert [a["id"] for a in client.artifacts("s")["artifacts"]] == ["a1", "a2", "a3"]
    assert client.artifacts("s")["artifacts"][0]["size"] == 4
    assert all("data" not in a for a in client.artifacts("s")["artifacts"])

    # delete then append in one change: the id is free again.
    client.save("s", change={"delete_artifacts": ["a2"]})
    with pytest.raises(cairn.NotFoundError):
        client.artifact("s", "a2")
    client.save("s", change={"delete_artifacts": ["a3"], "append_artifacts": [{"id": "a3", "data": b"new"}]})
    assert client.artifact("s", "a3")["artifact"]["data"] == b"new"
    assert [a["id"] for a in client.artifacts("s")["artifacts"]] == ["a1", "a3"]
    assert client.summary("s")["artifact_count"] == 2

    gen = client.summary("s")["generation"]
    with pytest.raises(cairn.NotFoundError, match="a2"):
        client.save("s", change={"delete_artifacts": ["a2"]})
    assert client.summary("s")["generation"] == gen
    # An artifact with no data reads as empty bytes.
    client.save("s", change={"put_artifacts": [{"id": "empty", "path": "out/x.txt"}]})
    assert client.artifact("s", "empty")["artifact"]["data"] == b""


def test_artifacts_by_id(client: cairn.Client) -> None:
    """Several artifacts with their data in one call: the named ones the
    session holds, in the order named, missing ids skipped; the id limit
    and a missing or deleted session are clear errors."""
    client.save("s", change={"append_artifacts": [{"id": "a", "data": b"\x00one"}, {"id": "b", "data": b"two", "metadata": {"v": 1}}, {"id": "e"}]})
    gen = client.save("s", change={"put_artifacts": [{"id": "a", "data": b"ONE"}]})["generation"]
    r = client.artifacts_by_id("s", ["x", "b", "a", "nope", "e"])
    assert [a["id"] for a in r["artifacts"]] == ["b", "a", "e"]
    assert [a["data"] for a in r["artifacts"]] == [b"two", b"ONE", b""]
    assert r["artifacts"][0]["metadata"] == {"v": 1} and r["artifacts"][1]["size"] == 3
    assert r["next"] == 5 and r["generation"] == gen and r["session_id"] == "s"
    assert client.artifacts_by_id("s", [])["artifacts"] == []
    assert client.artifacts_by_id("s", ["x"])["artifacts"] == []
    with pytest.raises(cairn.InvalidArgumentError, match="1024"):
        client.artifacts_by_id("s", [f"id{i}" for i in range(1025)])
    with pytest.raises(cairn.InvalidArgumentError, match="twice"):
        client.artifacts_by_id("s", ["a", "a"])
    with pytest.raises(cairn.NotFoundError):
        client.artifacts_by_id("nope", ["a"])
    client.delete("s")
    with pytest.raises(cairn.NotFoundError):
        client.artifacts_by_id("s", ["a"])


def test_appending_a_held_artifact_id_is_a_conflict(client: cairn.Client) -> None:
    client.save("s", change={"append_artifacts": [{"id": "report-7", "data": b"v1"}]})
    gen = client.summary("s")["generation"]
    with pytest.raises(cairn.ConflictError) as e:
        client.save("s", change={"append_artifacts": [{"id": "report-7", "data": b"v2"}], "append_messages": [msg(0)]})
    assert e.value.code == "conflict"
    assert "report-7" in e.value.message
    # Nothing of the refused change landed.
    assert client.summary("s")["generation"] == gen
    assert client.messages("s")["messages"] == []
    assert client.artifact("s", "report-7")["artifact"]["data"] == b"v1"
    # put replaces it.
    client.save("s", change={"put_artifacts": [{"id": "report-7", "data": b"v2"}]})
    assert client.artifact("s", "report-7")["artifact"]["data"] == b"v2"


def test_resume_session_options(client: cairn.Client, workspace: str) -> None:
    build(client)
    whole = client.resume_session("s")
    snap = whole["snapshot"]

    meta = client.resume_session("s", artifacts="metadata")["snapshot"]
    assert meta["artifacts"] == [{k: v for k, v in a.items() if k != "data"} for a in snap["artifacts"]]
    assert meta["messages"] == snap["messages"] and meta["traces"] == snap["traces"]
    assert not client.resume_session("s", artifacts="none")["snapshot"].get("artifacts")
    assert not client.resume_session("s", traces="none")["snapshot"].get("traces")

    lean = client.resume_session("s", messages_tail=0, artifacts="none", traces="none", drift=False, processes=False)
    assert lean["snapshot"]["messages"] == []
    assert (lean["message_count"], lean["messages_from"], lean["generation"]) == (30, 30, whole["generation"])
    assert lean["drift"]["tracked"] is False
    assert lean["processes"] == []
    assert lean["snapshot"]["runs"] == snap["runs"]
    assert lean["interrupted_runs"] == whole["interrupted_runs"]

    with pytest.raises(cairn.InvalidArgumentError):
        client.resume_session("s", artifacts="some")  # type: ignore[arg-type]
    # The old call still answers the whole session.
    again = client.resume_session("s")
    assert again["snapshot"] == snap and again["generation"] == whole["generation"]
    assert again["snapshot"]["artifacts"][0]["data"] == base64.b64encode(bytes(range(256))).decode()


def test_aio_reads(workspace: str, daemons: List[int]) -> None:
    """The asyncio client's reads and edits, in both modes."""

    async def main(mode: str) -> None:
        async with await aio_connect(workspace, mode, daemons) as c:
            sid = mode[0]
            await c.save(sid, change={"append_messages": [msg(i) for i in range(5)], "append_artifacts": [{"id": "a", "data": b"\x00\x01"}]})
            await c.save(sid, change={"truncate_messages": 3, "append_messages": [msg(9)], "put_artifacts": [{"id": "a", "data": b"\x02", "metadata": 1}]})
            assert (await c.messages(sid, tail=2))["messages"] == [msg(2), msg(9)]
            assert [m for m in (await c.messages(sid, from_=1, to=3, limit=1))["messages"]] == [msg(1)]
            assert (await c.summary(sid))["message_count"] == 4
            a = (await c.artifact(sid, "a"))["artifact"]
            assert a["data"] == b"\x02" and a["metadata"] == 1
            assert [x["id"] for x in (await c.artifacts(sid))["artifacts"]] == ["a"]
            assert [x["data"] for x in (await c.artifacts_by_id(sid, ["z", "a"]))["artifacts"]] == [b"\x02"]
            await c.begin_run(sid, "r" + sid)
            await c.checkpoint("r" + sid, 1, [msg(10)], {"total_tokens": 1}, 0, None, session_id=sid)
            assert (await c.run("r" + sid))["checkpoint"]["turn"] == 1
            assert [r["run_id"] for r in (await c.runs(sid))["runs"]] == ["r" + sid]
            assert (await c.run_events("r" + sid, sid, limit=1))["events"][0]["kind"] == "checkpoint"
            r = await c.resume_session(sid, messages_tail=1, artifacts="metadata", drift=False, processes=False)
            assert r["snapshot"]["messages"] == [msg(10)] and r["messages_from"] == 4
            assert "data" not in r["snapshot"]["artifacts"][0]
            await c.save(sid, change={"append_artifacts": [{"id": "dup-7"}]})
            with pytest.raises(cairn.ConflictError, match="dup-7"):
                await c.save(sid, change={"append_artifacts": [{"id": "dup-7"}]})

    run(main("embedded"))
    run(main("daemon"))
