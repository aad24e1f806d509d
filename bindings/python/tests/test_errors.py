"""Every error class: the mapping table, and each code provoked where cheap."""

from __future__ import annotations

import errno
import os
import pickle
import subprocess
import sys
import tempfile
import time
from typing import Iterator, List

import pytest

import cairn
from cairn.errors import from_return
from conftest import DAEMON, connect_daemon, msg, wait_child

CLASSES = {
    "internal": cairn.InternalError,
    "invalid_argument": cairn.InvalidArgumentError,
    "not_found": cairn.NotFoundError,
    "conflict": cairn.ConflictError,
    "schema_unsupported": cairn.SchemaUnsupportedError,
    "too_large": cairn.TooLargeError,
    "no_checkpoint": cairn.NoCheckpointError,
    "not_owner": cairn.NotOwnerError,
    "step_identity_changed": cairn.StepIdentityChangedError,
    "locked": cairn.LockedError,
    "unavailable": cairn.UnavailableError,
    "forked": cairn.ForkedError,
    "bad_handle": cairn.BadHandleError,
    "method_not_found": cairn.MethodNotFoundError,
    "bad_request": cairn.BadRequestError,
    "corrupt": cairn.CorruptError,
    "no_space": cairn.NoSpaceError,
}

# cairn.h's CAIRN_E_* values.
RCS = {
    "internal": -1,
    "invalid_argument": -2,
    "not_found": -3,
    "conflict": -4,
    "schema_unsupported": -5,
    "too_large": -6,
    "no_checkpoint": -7,
    "not_owner": -8,
    "step_identity_changed": -9,
    "locked": -10,
    "unavailable": -11,
    "forked": -12,
    "bad_handle": -13,
    "method_not_found": -14,
    "bad_request": -15,
    "corrupt": -17,
    "no_space": -18,
}


@pytest.mark.parametrize("code", sorted(CLASSES))
def test_mapping_table(code: str) -> None:
    cls = CLASSES[code]
    assert cairn.ERRORS[code] is cls
    assert cairn.error_class(code) is cls
    assert cls.code == code
    assert issubclass(cls, cairn.CairnError)
    assert cairn.RETURN_CODES[RCS[code]] == code
    # From the library's error JSON.
    e = from_return(RCS[code], ('{"code":"%s","message":"boom"}' % code).encode())
    assert type(e) is cls and e.code == code and e.message == "boom"
    assert str(e) == f"{code}: boom"
    # Without the JSON, the return code still names the class.
    e2 = from_return(RCS[code], None)
    assert type(e2) is cls and e2.code == code
    # Exceptions survive pickling (e.g. across process pools).
    e3 = pickle.loads(pickle.dumps(e))
    assert type(e3) is cls and e3.code == code and e3.message == "boom"


def test_mapping_is_complete() -> None:
    assert set(cairn.ERRORS) == set(CLASSES)
    assert set(cairn.RETURN_CODES.values()) == set(CLASSES)


def test_unknown_code_is_base_class() -> None:
    e = from_return(-99, b'{"code":"brand_new","message":"m"}')
    assert type(e) is cairn.CairnError and e.code == "brand_new"
    e = from_return(-2, b"not json")
    assert type(e) is cairn.InvalidArgumentError and e.message == "not json"


def test_not_found(client: cairn.Client) -> None:
    with pytest.raises(cairn.NotFoundError) as ei:
        client.resume_session("nope")
    assert ei.value.code == "not_found" and ei.value.message
    with pytest.raises(cairn.NotFoundError):
        client.delete("nope")
    with pytest.raises(cairn.NotFoundError):
        client.fork("nope", "copy")
    with pytest.raises(cairn.NotFoundError):
        client.begin_run("nope")


def test_conflict(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]}, expect_generation=0)
    with pytest.raises(cairn.ConflictError) as ei:
        client.save("s", change={"append_messages": [msg(1)]}, expect_generation=0)
    assert ei.value.code == "conflict"
    with pytest.raises(cairn.ConflictError):
        client.save("s", change={"append_messages": [msg(1)]}, expect_generation=5)
    client.save("t", change={"append_messages": [msg(0)]})
    with pytest.raises(cairn.ConflictError):
        client.fork("s", "t")


def test_schema_unsupported(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    env = client.export("s")
    env["schema_version"] = 999
    client.delete("s")
    with pytest.raises(cairn.SchemaUnsupportedError) as ei:
        client.import_(env)
    assert ei.value.code == "schema_unsupported"


def test_invalid_argument(client: cairn.Client) -> None:
    with pytest.raises(cairn.InvalidArgumentError):
        client.save("", change={"append_messages": [msg(0)]})
    with pytest.raises(cairn.InvalidArgumentError):
        client.call("save", {"session_id": "s", "change": {}, "bogus_field": 1})
    with pytest.raises(cairn.InvalidArgumentError):
        client.subscribe(["no.such.event"])
    with pytest.raises(cairn.InvalidArgumentError):
        client.complete_run("r", "no-such-status")


def test_invalid_argument_on_connect(workspace: str) -> None:
    with pytest.raises(cairn.InvalidArgumentError):
        cairn.connect(os.path.join(workspace, "does-not-exist"), embedded=True)


def test_no_checkpoint(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    client.begin_run("s", "r")
    with pytest.raises(cairn.NoCheckpointError) as ei:
        client.resume_run("r")
    assert ei.value.code == "no_checkpoint"


def test_not_owner(client: cairn.Client) -> None:
    client.save("a", change={"append_messages": [msg(0)]})
    client.save("b", change={"append_messages": [msg(0)]})
    client.begin_run("a", "r")
    client.checkpoint("r", 1, [msg(1)], {}, 0)
    with pytest.raises(cairn.NotOwnerError) as ei:
        client.resume_run("r", session_id="b")
    assert ei.value.code == "not_owner"


def test_step_identity_changed(client: cairn.Client) -> None:
    client.save("s", change={"append_messages": [msg(0)]})
    client.begin_workflow("wf", [{"step_id": "a", "identity": "v1"}], "s")
    client.complete_step("wf", "a", "v1", 1, "s")
    with pytest.raises(cairn.StepIdentityChangedError) as ei:
        client.begin_workflow("wf", [{"step_id": "a", "identity": "v2"}], "s")
    assert ei.value.code == "step_identity_changed"


def test_method_not_found(client: cairn.Client) -> None:
    with pytest.raises(cairn.MethodNotFoundError) as ei:
        client.call("noSuchMethod")
    assert ei.value.code == "method_not_found"


def test_bad_handle_after_close(workspace: str) -> None:
    c = cairn.connect(workspace, embedded=True)
    c.close()
    with pytest.raises(cairn.BadHandleError) as ei:
        c.status()
    assert ei.value.code == "bad_handle"
    with pytest.raises(cairn.BadHandleError):
        c.save("s", change={"append_messages": [msg(0)]})


def test_locked_embedded_vs_daemon(workspace: str, daemons: List[int]) -> None:
    with connect_daemon(workspace, daemons):
        with pytest.raises(cairn.LockedError) as ei:
            cairn.connect(workspace, embedded=True)
        assert ei.value.code == "locked"
        # It names the daemon's pid and how to stop it.
        assert f"cairnd pid {daemons[0]}" in ei.value.message, ei.value.message
        assert "daemon stop" in ei.value.message, ei.value.message


def test_locked_daemon_mode_vs_embedded_process(workspace: str) -> None:
    # Another process holds the workspace in embedded mode: a daemon-mode
    # connect fails at once with its pid, without starting a daemon. (It
    # used to start one, which exited, and wait out the 5 s start timeout;
    # the bound asserted is that wait, not a measured speed.)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, cairn\n"
         "c = cairn.connect(sys.argv[1], embedded=True)\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n"
         "c.close()\n",
         workspace],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(cairn.__file__)))})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        start = time.monotonic()
        with pytest.raises(cairn.LockedError) as ei:
            cairn.connect(workspace, daemon=DAEMON)
        took = time.monotonic() - start
        assert ei.value.code == "locked"
        assert f"pid {holder.pid}" in ei.value.message and "embedded mode" in ei.value.message
        assert took < 5.0, f"failed after {took:.1f}s, not before the 5 s start timeout"
        assert not os.path.exists(os.path.join(workspace, ".cairn", "cairnd.log"))
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_locked_two_embedded_processes(workspace: str) -> None:
    # In one process a second embedded open of the same workspace is refused
    # as well (the store lock is per workspace).
    with cairn.connect(workspace, embedded=True):
        with pytest.raises(cairn.LockedError):
            cairn.connect(workspace, embedded=True)


def test_unavailable_without_auto_start(workspace: str) -> None:
    with pytest.raises(cairn.UnavailableError) as ei:
        cairn.connect(workspace, auto_start=False)
    assert ei.value.code == "unavailable"


def test_unavailable_after_daemon_stops(workspace: str, daemons: List[int]) -> None:
    from conftest import stop_daemon

    with connect_daemon(workspace, daemons):
        # A client without auto-start does not bring a stopped daemon back.
        c = cairn.connect(workspace, auto_start=False)
    try:
        stop_daemon(daemons[0])
        with pytest.raises(cairn.UnavailableError):
            c.status()
    finally:
        c.close()


def test_too_large(workspace: str, daemons: List[int]) -> None:
    # A daemon with a 64 KiB message limit makes too_large cheap to reach.
    c = connect_daemon(workspace, daemons, daemon_args=["--idle-timeout=20s", "--max-message-size=65536"])
    try:
        with pytest.raises(cairn.TooLargeError) as ei:
            c.save("s", change={"append_messages": [msg(0, size=100_000)]})
        assert ei.value.code == "too_large"
        c.save("s", change={"append_messages": [msg(0, size=1000)]})
    finally:
        c.close()


def test_forked_child_fails_fast(embedded: cairn.Client) -> None:
    embedded.save("s", change={"append_messages": [msg(0)]})
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code only
        code = 1
        try:
            try:
                embedded.status()
                code = 2
            except cairn.ForkedError as e:
                code = 0 if e.code == "forked" and "fork" in e.message else 3
            # A fresh connect in the child is refused the same way.
            try:
                cairn.connect(".", embedded=True)
                code = code or 4
            except cairn.ForkedError:
                pass
        except BaseException:
            code = 5
        finally:
            os._exit(code)
    status = wait_child(pid, "calling libcairn")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # The parent's handle still works.
    assert embedded.resume_session("s")["generation"] == 1


@pytest.fixture
def small_disk() -> Iterator[str]:
    """A workspace on a 2 MiB tmpfs (root only), unmounted at teardown."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; test_mapping_table covers no_space")
    d = tempfile.mkdtemp(prefix="cairn-py-full-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "cairn-diskfull", d], capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(d)
        pytest.skip(f"cannot mount a tmpfs ({r.stderr.strip()}); test_mapping_table covers no_space")
    try:
        ws = os.path.join(d, "ws")
        os.mkdir(ws)
        yield ws
    finally:
        # Lazily: a daemon may still hold the workspace while it stops.
        subprocess.run(["umount", "-l", d], check=True)
        os.rmdir(d)


def fill(path: str) -> None:
    """Appends to path until the file system refuses even one byte."""
    with open(path, "ab", buffering=0) as f:
        for chunk in (64 << 10, 4 << 10, 1):
            while True:
                try:
                    f.write(b"\0" * chunk)
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_no_space(mode: str, daemons: List[int], small_disk: str) -> None:
    c = cairn.connect(small_disk, embedded=True) if mode == "embedded" else connect_daemon(small_disk, daemons)
    try:
        c.save("s", change={"append_messages": [msg(0, 8 << 10)]})
        filler = os.path.join(os.path.dirname(small_disk), "filler")
        fill(filler)
        with pytest.raises(cairn.NoSpaceError) as ei:
            c.save("s", change={"append_messages": [msg(1, 8 << 10)]})
        assert ei.value.code == "no_space"
        assert "no space left on the device holding " in ei.value.message, ei.value.message
        assert "s-s.log" in ei.value.message and ".tmp-" not in ei.value.message, ei.value.message
        with pytest.raises(cairn.NoSpaceError):
            c.save("t", change={"append_messages": [msg(0, 8 << 10)]})
        os.remove(filler)
        # Space freed: the same client (and daemon) takes writes again.
        assert c.save("s", change={"append_messages": [msg(2, 8 << 10)]})["generation"] == 2
        c.save("t", change={"append_messages": [msg(0, 8 << 10)]})
        assert len(c.resume_session("s")["snapshot"]["messages"]) == 2
    finally:
        c.close()
