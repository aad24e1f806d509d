#!/usr/bin/env python3
"""CairnSaver.put's own Python, two checkouts' bindings in one process: each
saver puts against a client that keeps the request and does nothing, the
two alternating call by call, with a real 1.5 KiB overwrite + fdatasync
before every call ("cold": in a real put the saver runs right after the
previous put's wait on the disk, its code and data out of the caches), then
the same puts back to back ("warm"). Nothing reaches libcairn, so no
library is needed.

    <python with langgraph> bench/adapters/saver_cold_ab.py A_ROOT B_ROOT [puts per round] [rounds]

Prints per round the median thread CPU of a put (time.thread_time) for
each side, cold and warm, in microseconds.
"""
from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from checkouts import load
from langgraph.checkpoint.base import empty_checkpoint


class Capture:
    """A client whose save keeps the request and does nothing."""

    def __init__(self, not_found: Any) -> None:
        self.not_found = not_found
        self.last: Any = None

    def _call(self, method: bytes, req: bytes, decode: bool = True) -> None:
        self.last = req

    def save(self, sid: str, snapshot: Any = None, *, change: Any = None, expect_generation: Any = None) -> Dict[str, int]:
        self.last = change
        return {"generation": 1}

    def artifact(self, sid: str, aid: str) -> Any:
        raise self.not_found("none")


def inputs(saver: Any, n: int, tid: str) -> List[Tuple[Any, Any, Any, Any]]:
    """The arguments of n puts on one thread, each the checkpoint of
    bench.py's durable part (two channels, both changed)."""
    out = []
    ver = None
    cfg: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        ver = saver.get_next_version(ver, None)
        cp["channel_values"] = {"messages": ["hello world"] * 4, "step": i}
        cp["channel_versions"] = {"messages": ver, "step": ver}
        out.append((cfg, cp, {"source": "loop", "step": i}, cp["channel_versions"]))
        cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cp["id"]}}
    return out


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    roots = {"A": sys.argv[1], "B": sys.argv[2]}
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    savers: Dict[str, Any] = {}
    for k, root in roots.items():
        m = load("cairn_" + k.lower(), root)
        savers[k] = sys.modules[m.__name__ + ".langgraph"].CairnSaver(Capture(m.NotFoundError))
    tmp = tempfile.mkdtemp(prefix="cairn-saver-cold-")
    try:
        fd = os.open(os.path.join(tmp, "floor"), os.O_RDWR | os.O_CREAT, 0o600)
        os.pwrite(fd, b"\0" * (1 << 20), 0)
        os.fsync(fd)
        block = b"x" * 1500
        tt = time.thread_time_ns
        print(f"# {rounds} rounds of {n} puts a side; A={roots['A']} B={roots['B']}")
        for r in range(rounds):
            ins = {k: inputs(s, n + 1, f"c{r}") for k, s in savers.items()}
            cold: Dict[str, List[int]] = {k: [] for k in savers}
            warm: Dict[str, List[int]] = {k: [] for k in savers}
            for k, s in savers.items():
                s.put(*ins[k][0])
            for i in range(1, n + 1):
                for k, s in savers.items():
                    os.pwrite(fd, block, (i * 1500) % ((1 << 20) - 1500))
                    os.fdatasync(fd)
                    t0 = tt()
                    s.put(*ins[k][i])
                    cold[k].append(tt() - t0)
            ins = {k: inputs(s, n + 1, f"w{r}") for k, s in savers.items()}
            for k, s in savers.items():
                s.put(*ins[k][0])
                for i in range(1, n + 1):
                    t0 = tt()
                    s.put(*ins[k][i])
                    warm[k].append(tt() - t0)
            cells = "  ".join(f"{k} cold {statistics.median(cold[k]) / 1e3:5.1f} warm {statistics.median(warm[k]) / 1e3:5.1f}" for k in savers)
            print(f"round {r}: {cells}", flush=True)
        print(f"# load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
        os.close(fd)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
