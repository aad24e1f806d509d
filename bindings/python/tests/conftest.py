"""Shared fixtures: fresh short-path workspaces, embedded and daemon clients
(sync and asyncio), the runtime record_runtime saves and the processes a
restart started.

Daemon-mode fixtures start cairnd with --idle-timeout=20s and, at teardown,
read its pid from status(), SIGTERM it and wait until it is gone.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

import cairn
import cairn.aio

REPO = Path(__file__).resolve().parents[3]
DAEMON = os.environ.get("CAIRN_DAEMON") or str(REPO / "build" / "cairnd")
DAEMON_ARGS = ["--idle-timeout=20s"]


# Whether /proc is there to tell a zombie by (Linux; not macOS).
HAVE_PROC = os.path.isdir("/proc/self")


def exited(pid: int) -> bool:
    """Whether pid has exited: no such process, or a zombie whose threads
    have all exited (the main thread of a process killed by a signal turns
    zombie while the others may still be closing its descriptors). A daemon
    started by a process that was killed since is reparented to PID 1,
    which may take a second or more to reap it; its exit (its locks and
    descriptors given back) is what the caller waits for."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    if not HAVE_PROC:
        return False  # no /proc (macOS): alive until reaped
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            status = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
    except (FileNotFoundError, ProcessLookupError):  # reaped before the open, or before the read (ESRCH)
        return True
    return status.get(b"State", b"").split()[:1] == [b"Z"] and status.get(b"Threads", b"").strip() == b"1"


def gone(pid: int, timeout: float) -> bool:
    """Waits up to timeout seconds for process pid to exit, reaping it if it
    is our child (libcairn also waits for the daemons it starts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if exited(pid):
            return True
        time.sleep(0.01)
    return False


def stop_daemon(pid: int, timeout: float = 10.0) -> None:
    """SIGTERMs the daemon and waits until it is gone (SIGKILL after timeout)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if gone(pid, timeout):
        return
    os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"daemon {pid} did not stop on SIGTERM within {timeout}s")


def sigstop(pid: int, timeout: float = 30.0) -> None:
    """Stops pid with SIGSTOP and returns once every one of its threads is
    stopped. kill(2) returns before that: the thread the kernel woke for
    the signal stops the others, which run on until it does, so a daemon
    on a busy machine can still answer a connection made just after kill
    returned."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while not _all_stopped(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"pid {pid}: not every thread stopped within {timeout}s of SIGSTOP")
        time.sleep(0.001)


def _all_stopped(pid: int) -> bool:
    """Whether every thread of pid is stopped by a signal ('T' in
    /proc/<pid>/task/<tid>/stat)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
        for tid in tids:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                stat = f.read()
            i = stat.rindex(b")")  # the state follows the command's name
            if stat[i + 2 : i + 3] != b"T":
                return False
    except (OSError, ValueError):
        return False
    return bool(tids)


def wait_child(pid: int, what: str, timeout: float = 20.0) -> int:
    """Waits for the forked child pid and returns its wait status; kills it
    and fails the test if it has not exited within timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        wpid, status = os.waitpid(pid, os.WNOHANG)
        if wpid:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"forked child hung {what}")
        time.sleep(0.01)


@pytest.fixture
def workspace() -> Iterator[str]:
    # Short paths under the temp dir keep the daemon's socket path short.
    d = tempfile.mkdtemp(prefix="cairn-py-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemons() -> Iterator[List[int]]:
    """A list tests append daemon pids to; each is stopped at teardown."""
    pids: List[int] = []
    yield pids
    for pid in pids:
        stop_daemon(pid)


def connect_daemon(ws: str, daemons: List[int], **kw: object) -> cairn.Client:
    c = cairn.connect(ws, daemon=DAEMON, daemon_args=kw.pop("daemon_args", DAEMON_ARGS), **kw)  # type: ignore[arg-type]
    daemons.append(c.status()["daemon"]["pid"])
    return c


async def aio_connect(ws: str, mode: str, daemons: List[int]) -> cairn.aio.AsyncClient:
    """An asyncio client in mode "embedded" or "daemon" (whose pid is
    appended to daemons)."""
    if mode == "embedded":
        return await cairn.aio.connect(ws, embedded=True)
    c = await cairn.aio.connect(ws, daemon=DAEMON, daemon_args=DAEMON_ARGS)
    daemons.append((await c.status())["daemon"]["pid"])
    return c


def run(coro: Any) -> Any:
    """Runs the coroutine on a new event loop, failing after 60 s."""
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


@pytest.fixture
def embedded(workspace: str) -> Iterator[cairn.Client]:
    c = cairn.connect(workspace, embedded=True)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def daemon_client(workspace: str, daemons: List[int]) -> Iterator[cairn.Client]:
    c = connect_daemon(workspace, daemons)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(params=["embedded", "daemon"])
def client(request: pytest.FixtureRequest, workspace: str, daemons: List[int]) -> Iterator[cairn.Client]:
    """A client in each mode."""
    if request.param == "embedded":
        c = cairn.connect(workspace, embedded=True)
    else:
        c = connect_daemon(workspace, daemons)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(autouse=True)
def no_leaked_handles() -> Iterator[None]:
    """Every test gives back the handles it opened."""
    before = cairn.open_handles()
    yield
    assert cairn.open_handles() == before


def msg(i: int, size: int = 0) -> dict:
    m: dict = {"role": "user", "content": f"message {i}"}
    if size:
        m["content"] = ("x" * size)[:size]
    return m


# The runtime record_runtime saves. "web" runs in the workspace; its health
# check fails until a restart has started it. "broken" exits at once, so its
# health check never passes.
WEB = {
    "name": "web",
    "command": ["sh", "-c", "touch ready && exec sleep 60"],
    "health_check": {"command": ["test", "-f", "ready"]},
}
BROKEN = {
    "name": "broken",
    "command": ["sh", "-c", "exit 3"],
    "health_check": {"command": ["test", "-f", "never"]},
}
PREVIEW = {"url": "http://127.0.0.1:9/", "process": "web"}
RUNTIME = {"processes": [WEB, BROKEN], "previews": [PREVIEW]}


def record_runtime(c: cairn.Client, sid: str = "s") -> None:
    """Saves a message and RUNTIME (WEB, BROKEN, PREVIEW) to session sid."""
    c.save(sid, change={"append_messages": [msg(0)], "runtime": RUNTIME})


@pytest.fixture
def started() -> Iterator[List[int]]:
    """Pids of processes a test started through runtime_restart; each one's
    process group is killed at teardown."""
    pids: List[int] = []
    yield pids
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def kill_at(p: "subprocess.Popen[str]", marker: str) -> None:
    """Waits for p's first line of output, which must be marker (the child
    has reached the point to be killed at), then SIGKILLs it and checks it
    died of that."""
    try:
        line = p.stdout.readline()  # type: ignore[union-attr]
        assert line.strip() == marker, (line, p.stderr.read() if p.poll() is not None else "")  # type: ignore[union-attr]
        p.send_signal(signal.SIGKILL)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)
        p.stdout.close()  # type: ignore[union-attr]
        p.stderr.close()  # type: ignore[union-attr]
    assert p.returncode == -signal.SIGKILL


def against_sqlite(scenario: Callable[[str, str], Any], prefix: str, daemons: List[int]) -> Dict[str, Any]:
    """Runs scenario(kind, dir) for kind sqlite, cairn-embedded and
    cairn-daemon, each in a temp dir of its own, and returns the results by
    kind; the daemon a cairn-daemon run started is stopped at teardown."""
    results: Dict[str, Any] = {}
    for kind in ("sqlite", "cairn-embedded", "cairn-daemon"):
        d = tempfile.mkdtemp(prefix=prefix)
        try:
            results[kind] = scenario(kind, d)
        finally:
            if kind == "cairn-daemon":
                try:
                    c = cairn.connect(d, daemon=DAEMON, auto_start=False)
                    daemons.append(c.status()["daemon"]["pid"])
                    c.close()
                except cairn.CairnError:
                    pass
            shutil.rmtree(d, ignore_errors=True)
    return results
