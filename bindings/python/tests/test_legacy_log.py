"""A session log written by cairn before appends were checked against the
session (engine/testdata/legacy-dup-artifact/s-dup.log: its second commit
appends artifact "plan" again) still reads, forks, exports and imports, with
the later "plan" in place of the earlier; a new append of a held id raises
ConflictError naming it. Embedded and through the daemon."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import List

import pytest

import cairn
from conftest import REPO, connect_daemon

LOG = REPO / "engine" / "testdata" / "legacy-dup-artifact" / "s-dup.log"


def _ids(c: cairn.Client, sid: str) -> List[str]:
    return [a["id"] for a in c.artifacts(sid)["artifacts"]]


def _plan(c: cairn.Client, sid: str) -> bytes:
    return c.artifact(sid, "plan")["artifact"]["data"]


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_legacy_duplicate_artifact_id(mode: str, workspace: str, daemons: List[int]) -> None:
    sessions = Path(workspace) / ".cairn" / "sessions"
    sessions.mkdir(parents=True)
    shutil.copy(LOG, sessions / LOG.name)
    c = cairn.connect(workspace, embedded=True) if mode == "embedded" else connect_daemon(workspace, daemons)
    try:
        assert _ids(c, "dup") == ["plan", "notes"]
        assert _plan(c, "dup") == b"second plan"
        snap = c.resume_session("dup")["snapshot"]
        assert [a["id"] for a in snap["artifacts"]] == ["plan", "notes"]

        c.fork("dup", "dup-fork")
        assert _ids(c, "dup-fork") == ["plan", "notes"]

        env = c.export("dup")
        c.delete("dup")
        c.import_(env)
        assert _ids(c, "dup") == ["plan", "notes"]
        assert _plan(c, "dup") == b"second plan"

        with pytest.raises(cairn.ConflictError) as ei:
            c.save("dup", change={"append_artifacts": [{"id": "plan", "data": b"x"}]})
        assert '"plan"' in str(ei.value)
    finally:
        c.close()
