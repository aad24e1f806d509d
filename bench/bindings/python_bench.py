#!/usr/bin/env python3
"""Latency of the Python binding: a no-op status and a 1 KB delta save, in
embedded and daemon modes, each on a fresh temp workspace.

Prints one JSON line per (mode, op):
  {"lang":"python","mode":"embedded|daemon","op":"status|save_1kb","median_us":...,"p99_us":...,"n":...}

Run from anywhere in the repo after `make lib` and `go build -o build/cairnd ./cmd/cairnd`:
  python3 bench/bindings/python_bench.py [--scale 1.0]
The daemon this script starts is stopped (SIGTERM) before it exits.
python_turn.py uses connected() and summary(), and bench/reads/reads_bench.py
uses stop(); importing this module does not import cairn (the caller picks the
tree whose binding is measured).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, Iterator, List

REPO = Path(__file__).resolve().parents[2]

# One ~1 KB message (its JSON encoding is 1024 bytes).
_PAD = 1024 - len(json.dumps({"role": "assistant", "content": ""}, separators=(",", ":")))
MESSAGE = {"role": "assistant", "content": "x" * _PAD}


def measure(fn: Callable[[], object], n: int, warmup: int) -> Dict[str, float]:
    for _ in range(warmup):
        fn()
    clock = time.perf_counter_ns
    samples: List[int] = []
    append = samples.append
    for _ in range(n):
        t = clock()
        fn()
        append(clock() - t)
    return {**summary(samples), "n": n}


def summary(samples: List[int]) -> Dict[str, float]:
    """The median and p99 of samples in ns, in µs."""
    samples = sorted(samples)
    return {
        "median_us": round(samples[len(samples) // 2] / 1000, 2),
        "p99_us": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000, 2),
    }


@contextlib.contextmanager
def connected(cairn: ModuleType, mode: str, daemon: str, prefix: str) -> Iterator[Any]:
    """A client of the binding cairn in mode ("embedded" or "daemon", started
    from the cairnd at daemon) on a fresh temp workspace; on exit the client
    is closed, the daemon stopped and the workspace removed."""
    ws = tempfile.mkdtemp(prefix=f"{prefix}-{mode[0]}-")
    pid = 0
    try:
        if mode == "embedded":
            c = cairn.connect(ws, embedded=True)
        else:
            c = cairn.connect(ws, daemon=daemon, daemon_args=["--idle-timeout=60s"])
        try:
            if mode != "embedded":
                pid = c.status()["daemon"]["pid"]
            yield c
        finally:
            c.close()
    finally:
        if pid:
            stop(pid)
        shutil.rmtree(ws, ignore_errors=True)


def run_mode(cairn: ModuleType, mode: str, scale: float, daemon: str) -> None:
    if mode == "embedded":
        n_status, n_save = int(20000 * scale), int(2000 * scale)
    else:
        n_status, n_save = int(5000 * scale), int(2000 * scale)
    with connected(cairn, mode, daemon, "cairn-pybench") as c:
        status = c.status
        r = measure(status, max(n_status, 10), max(n_status // 10, 10))
        print(json.dumps({"lang": "python", "mode": mode, "op": "status", **r}, separators=(",", ":")), flush=True)

        save = c.save
        change = {"append_messages": [MESSAGE]}
        c.save("bench", change=change)
        r = measure(lambda: save("bench", change=change), max(n_save, 10), max(n_save // 10, 10))
        print(json.dumps({"lang": "python", "mode": mode, "op": "save_1kb", **r}, separators=(",", ":")), flush=True)


def stop(pid: int, timeout: float = 10.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the iteration counts")
    ap.add_argument("--mode", choices=["embedded", "daemon", "both"], default="both")
    ap.add_argument("--daemon", default=os.environ.get("CAIRN_DAEMON") or str(REPO / "build" / "cairnd"))
    a = ap.parse_args()
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import cairn

    for mode in ("embedded", "daemon"):
        if a.mode in (mode, "both"):
            run_mode(cairn, mode, a.scale, a.daemon)


if __name__ == "__main__":
    main()
