"""connect(store=...) keeps the sessions in PostgreSQL: two workspaces (two
"hosts") share them, in daemon and embedded mode, and a run moves between
them only with takeover while its host's lease is live.

The server is internal/pgtest/pgserve (CAIRN_PGSERVE, else ``go run``), a
real PostgreSQL from the machine's binaries; without them the test fails,
unless CAIRN_SKIP_PG=1 says to skip on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest

import cairn
from conftest import REPO, connect_daemon


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    exe = os.environ.get("CAIRN_PGSERVE")
    cmd = [exe] if exe else ["go", "run", "./internal/pgtest/pgserve"]
    p = subprocess.Popen(cmd + ["pybind"], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdin is not None
    url = p.stdout.readline().strip()
    if not url:
        rc = p.wait(timeout=120)
        if rc == 4:
            pytest.skip("CAIRN_SKIP_PG=1: no PostgreSQL")
        pytest.fail(f"pgserve exited {rc} without a database")
    try:
        yield url
    finally:
        p.stdin.close()
        p.wait(timeout=60)


@pytest.fixture
def two_workspaces() -> Iterator[List[str]]:
    ds = [tempfile.mkdtemp(prefix="cairn-pg-") for _ in range(2)]
    yield ds
    for d in ds:
        shutil.rmtree(d, ignore_errors=True)


def test_store_shared_by_two_workspaces(pg_url: str, two_workspaces: List[str], daemons: List[int]) -> None:
    ws_a, ws_b = two_workspaces
    a = connect_daemon(ws_a, daemons, store=pg_url)
    a.save("py-s", change={"append_messages": [{"role": "user", "content": "hi"}]})
    run = a.begin_run("py-s", run_id="py-run")
    a.checkpoint(run["run_id"], 1, [{"turn": 1}], tool_calls_count=1)
    assert not (Path(ws_a) / ".cairn" / "sessions").exists()

    b = cairn.connect(ws_b, embedded=True, store=pg_url)
    try:
        assert b.messages("py-s")["total"] == 2
        # Host A's daemon is alive and holds the run's lease.
        with pytest.raises(cairn.ConflictError):
            b.resume_run("py-run", session_id="py-s")
        res = b.resume_run("py-run", session_id="py-s", takeover=True)
        assert res["turn"] == 1 and res["tool_calls_count"] == 1
        with pytest.raises(cairn.NotOwnerError):
            a.checkpoint("py-run", 2, [{"turn": 2}], tool_calls_count=2)
    finally:
        b.close()
        a.close()
