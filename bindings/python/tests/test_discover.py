"""connect() without a workspace finds it as the cairn command does: from a
subfolder, the nearest folder above holding .cairn/ (else the repository
root, else the current directory), never a new .cairn/ where it runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, List

import pytest

import cairn
import cairn.aio
from conftest import DAEMON, DAEMON_ARGS, run


@pytest.fixture
def in_subfolder(workspace: str) -> Iterator[Path]:
    """cwd is workspace/src/pkg; workspace holds .cairn/ (`cairn init`'s
    effect)."""
    ws = Path(workspace).resolve()
    (ws / ".cairn").mkdir(mode=0o700)
    sub = ws / "src" / "pkg"
    sub.mkdir(parents=True)
    old = os.getcwd()
    os.chdir(sub)
    try:
        yield ws
    finally:
        os.chdir(old)


def saved_in(ws: Path, sub: Path, embedded: bool = True) -> None:
    """The session is in ws's store (a fresh open of ws by its path reads
    it: embedded, or through the daemon already serving ws) and the
    subfolder got no store of its own."""
    assert not (sub / ".cairn").exists(), f"connect() made {sub / '.cairn'}"
    with cairn.connect(ws, embedded=embedded, auto_start=False) as c:
        s = c.resume_session("s1", drift=False, processes=False)
    assert [m["content"] for m in s["snapshot"]["messages"]] == ["from a subfolder"]


MSG = {"append_messages": [{"role": "user", "content": "from a subfolder"}]}


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_connect_discovers_parent_workspace(in_subfolder: Path, daemons: List[int], mode: str) -> None:
    ws = in_subfolder
    if mode == "embedded":
        c = cairn.connect(embedded=True)
    else:
        c = cairn.connect(daemon=DAEMON, daemon_args=DAEMON_ARGS)
        daemons.append(c.status()["daemon"]["pid"])
    with c:
        assert c.workspace == str(ws)
        c.save("s1", change=MSG)
    saved_in(ws, ws / "src" / "pkg", embedded=mode == "embedded")


def test_connect_discovers_repository_root(workspace: str) -> None:
    # No .cairn/ anywhere: the repository root (.git) is the workspace.
    ws = Path(workspace).resolve()
    (ws / ".git").mkdir()
    sub = ws / "a" / "b"
    sub.mkdir(parents=True)
    old = os.getcwd()
    os.chdir(sub)
    try:
        with cairn.connect(embedded=True) as c:
            assert c.workspace == str(ws)
            c.save("s1", change=MSG)
    finally:
        os.chdir(old)
    saved_in(ws, sub)


def test_aio_connect_discovers(in_subfolder: Path) -> None:
    async def go() -> str:
        async with await cairn.aio.connect(embedded=True) as c:
            await c.save("s1", change=MSG)
            return str(c.workspace)

    assert run(go()) == str(in_subfolder)
    saved_in(in_subfolder, in_subfolder / "src" / "pkg")
