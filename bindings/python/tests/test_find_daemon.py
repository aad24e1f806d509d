"""Finding cairnd: with no CAIRN_DAEMON and no cairnd on PATH, a daemon-mode
connect starts the cairnd that sits next to the loaded libcairn (as an
installed package ships them), not one next to the python executable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import DAEMON, REPO, stop_daemon
from cairn import _lib

BUILT = REPO / "build" / _lib.LIBRARY_NAME

CHILD = r"""
import json, cairn
with cairn.connect(WS, daemon_args=["--idle-timeout=20s"]) as c:
    print(json.dumps(c.status()["daemon"]))
"""


def test_daemon_next_to_library() -> None:
    with tempfile.TemporaryDirectory(prefix="cairn-find-") as d:
        pkg = Path(d) / "pkg"
        ws = Path(d) / "ws"
        pkg.mkdir()
        ws.mkdir()
        shutil.copy2(BUILT, pkg / _lib.LIBRARY_NAME)
        shutil.copy2(DAEMON, pkg / "cairnd")
        path = "/usr/bin:/bin"
        assert shutil.which("cairnd", path=path) is None, "a cairnd on the clean PATH would hide the library lookup"
        env = {
            "PATH": path,
            "HOME": d,
            "CAIRN_LIBRARY": str(pkg / _lib.LIBRARY_NAME),
            "PYTHONPATH": str(REPO / "bindings" / "python"),
        }
        code = "WS = %r\n%s" % (str(ws), CHILD)
        p = subprocess.run([sys.executable, "-c", code], env=env, cwd=d, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        pid = json.loads(p.stdout)["pid"]
        try:
            assert os.readlink(f"/proc/{pid}/exe") == str(pkg / "cairnd")
        finally:
            stop_daemon(pid)
