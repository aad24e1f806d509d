"""export_file and import_file: a session streamed to a file and back, in
embedded and daemon mode and through cairn.aio."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import cairn
import cairn.aio
from conftest import msg, run


def test_export_file_import_file_round_trip(client: cairn.Client, workspace: str) -> None:
    client.save(
        "s",
        change={
            "append_messages": [msg(i) for i in range(20)],
            "append_artifacts": [{"id": "a1", "data": bytes(range(256)), "metadata": {"k": 1}}],
        },
    )
    client.save("s", change={"truncate_messages": 15, "append_messages": [msg(99)]})
    client.begin_run("s", "r1")
    client.checkpoint("r1", 1, [msg(100)], {"total_tokens": 2}, 1, {"at": 1})
    before = client.resume_session("s", drift=False, processes=False)
    path = os.path.join(workspace, "out", "s.json")
    os.mkdir(os.path.dirname(path))

    done = client.export_file("s", path)
    assert done == {"path": path, "bytes": os.path.getsize(path), "generation": before["generation"]}
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == client.export("s")

    client.delete("s")
    with pytest.raises(cairn.NotFoundError):
        client.summary("s")
    imp = client.import_file(path)
    assert imp["session_id"] == "s"
    assert client.messages("s")["messages"] == before["snapshot"]["messages"]
    assert client.messages("s", tail=2)["messages"] == [msg(99), msg(100)]
    a = client.artifact("s", "a1")["artifact"]
    assert a["data"] == bytes(range(256)) and a["metadata"] == {"k": 1}
    # The loop checkpoint travelled with it: the run resumes where it stopped.
    assert client.run("r1")["checkpoint"]["state"] == {"at": 1}
    assert client.resume_run("r1", "s", "r2")["state"] == {"at": 1}


def test_export_file_relative_path_is_the_callers(client: cairn.Client, workspace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative path is resolved in the calling process (a daemon's
    working directory is not the caller's)."""
    client.save("s", change={"append_messages": [msg(0)]})
    monkeypatch.chdir(workspace)
    done = client.export_file("s", Path("rel.json"))
    assert done["path"] == os.path.join(workspace, "rel.json")
    assert os.path.isfile(done["path"])
    client.delete("s")
    assert client.import_file("rel.json")["session_id"] == "s"


def test_import_file_missing(client: cairn.Client, workspace: str) -> None:
    with pytest.raises(cairn.NotFoundError):
        client.import_file(os.path.join(workspace, "nope.json"))
    with pytest.raises(cairn.NotFoundError):
        client.export_file("nope", os.path.join(workspace, "x.json"))


def test_aio_export_file_import_file(workspace: str) -> None:
    async def main() -> None:
        async with await cairn.aio.connect(workspace, embedded=True) as c:
            await c.save("s", change={"append_messages": [msg(0), msg(1)]})
            path = os.path.join(workspace, "s.json")
            assert (await c.export_file("s", path))["path"] == path
            await c.delete("s")
            assert (await c.import_file(path))["session_id"] == "s"
            assert (await c.messages("s"))["messages"] == [msg(0), msg(1)]

    run(main())
