"""One saver's put, get_tuple and list(limit=10) against SqliteSaver with
synchronous=FULL, embedded, with the CPU of each (getrusage: the whole
process), to compare two builds in one sitting:

    CAIRN_LIBRARY=<libcairn.so> python3 bench/adapters/getput.py <dir holding the cairn package> [puts] [label]

200 puts, then 2,000 get_tuple calls of the latest checkpoint and 200
list(limit=10) calls; medians in microseconds."""

import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any, Dict

sys.path.insert(0, sys.argv[1])
import cairn  # noqa: E402
from cairn.langgraph import CairnSaver  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    label = sys.argv[3] if len(sys.argv) > 3 else ""
    tmp = tempfile.mkdtemp(prefix="cairn-getput-")
    try:
        os.makedirs(os.path.join(tmp, "e"))
        ce = cairn.connect(os.path.join(tmp, "e"), embedded=True)
        conn = sqlite3.connect(os.path.join(tmp, "full.db"), check_same_thread=False)
        full = SqliteSaver(conn)
        full.setup()
        conn.execute("PRAGMA synchronous=FULL")
        savers: Dict[str, Any] = {"cairn": CairnSaver(ce), "sqlfull": full}
        for name, s in savers.items():
            cfg: Dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            ver = None
            ts = []
            c0 = cpu()
            for i in range(n):
                cp = empty_checkpoint()
                ver = s.get_next_version(ver, None)
                cp["channel_values"] = {"messages": ["hello world"] * 4, "step": i}
                cp["channel_versions"] = {"messages": ver, "step": ver}
                t = time.perf_counter()
                cfg = s.put(cfg, cp, {"source": "loop", "step": i}, cp["channel_versions"])
                ts.append(time.perf_counter() - t)
            put_cpu = (cpu() - c0) / n * 1e6
            put_med = statistics.median(ts) * 1e6
            latest = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            ts = []
            c0 = cpu()
            for _ in range(2000):
                t = time.perf_counter()
                s.get_tuple(latest)
                ts.append(time.perf_counter() - t)
            get_cpu = (cpu() - c0) / 2000 * 1e6
            get_med = statistics.median(ts) * 1e6
            ts = []
            for _ in range(200):
                t = time.perf_counter()
                list(s.list(latest, limit=10))
                ts.append(time.perf_counter() - t)
            print(
                f"{label} {name:8} put {put_med:7.0f} us (cpu {put_cpu:5.0f})  get_tuple {get_med:6.1f} us (cpu {get_cpu:5.1f})"
                f"  list10 {statistics.median(ts) * 1e6:7.0f}",
                flush=True,
            )
        ce.close()
        conn.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
