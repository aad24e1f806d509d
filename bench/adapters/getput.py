"""One saver's put, get_tuple and list(limit=10) against SqliteSaver with
synchronous=FULL, embedded, with the CPU of each (getrusage: the whole
process), to compare two builds in one sitting:

    CAIRN_LIBRARY=<libcairn.so> python3 bench/adapters/getput.py <dir holding the cairn package> [puts] [label]

200 puts, then 2,000 get_tuple calls of the latest checkpoint and 200
list(limit=10) calls; medians in microseconds. A put is bench.py's
(Putter): its time includes building the checkpoint, a few microseconds
the same for both savers."""

import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Dict

sys.path.insert(0, sys.argv[1])
import cairn  # noqa: E402  (the package named, before bench's own path)
from bench import Putter, _cpu as cpu, sqlite_saver  # noqa: E402  (this script's directory)
from cairn.langgraph import CairnSaver  # noqa: E402


def main() -> None:
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    label = sys.argv[3] if len(sys.argv) > 3 else ""
    tmp = tempfile.mkdtemp(prefix="cairn-getput-")
    try:
        os.makedirs(os.path.join(tmp, "e"))
        ce = cairn.connect(os.path.join(tmp, "e"), embedded=True)
        full = sqlite_saver(os.path.join(tmp, "full.db"), full=True)
        savers: Dict[str, Any] = {"cairn": CairnSaver(ce), "sqlfull": full}
        for name, s in savers.items():
            put = Putter(s, "t")
            ts = []
            c0 = cpu()
            for _ in range(n):
                t = time.perf_counter()
                put()
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
        full.conn.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
