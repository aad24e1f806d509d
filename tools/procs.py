"""Process helpers shared by the install tests, the README test and the
install benchmark (scripts run by path, which put tools/ on sys.path)."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether pid runs; a zombie (killed, not yet reaped by its parent) does not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_daemons(tag: str) -> None:
    """SIGKILLs every cairnd whose command line names tag (its workspace or
    a folder above it), including one a failed step started."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes()
        except OSError:
            continue
        if tag.encode() in cmd and b"cairnd" in cmd:
            try:
                os.kill(int(p.name), signal.SIGKILL)
            except ProcessLookupError:
                pass
