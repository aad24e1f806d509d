"""Where a durable put's time goes, interleaved call by call so that every
row sees the same machine: SqliteSaver with synchronous=FULL, CairnSaver
embedded, and the parts of CairnSaver's put on their own:

  commit alone   the save a put sends (its JSON bytes, made beforehand),
                 straight to libcairn: no saver, no request encoding
  saver alone    CairnSaver.put against a client whose save does nothing
                 (LangGraph's serializer, the keys, the request's values)
  fdatasync      a 1.5 KiB overwrite + fdatasync of a file in the same
                 directory (the disk's floor for one durable write)

    CAIRN_LIBRARY=<libcairn.so> python3 bench/adapters/putfloor.py <dir holding the cairn package> [rounds] [per round]

Medians per round in microseconds, CPU per call from getrusage (the whole
process: libcairn's Go threads included)."""

import json
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

sys.path.insert(0, sys.argv[1])
import cairn  # noqa: E402
from cairn.langgraph import CairnSaver  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Capture:
    """A client whose save records the request and does nothing."""

    def __init__(self) -> None:
        self.last: Any = None

    def save(self, sid: str, snapshot: Any = None, *, change: Any = None, expect_generation: Any = None) -> Dict[str, int]:
        self.last = (sid, change)
        return {"generation": 1}

    def artifact(self, sid: str, aid: str) -> Any:
        raise cairn.NotFoundError("none")


def main() -> None:
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    per = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    tmp = tempfile.mkdtemp(prefix="cairn-putfloor-")
    try:
        os.makedirs(os.path.join(tmp, "e"))
        ce = cairn.connect(os.path.join(tmp, "e"), embedded=True)
        conn = sqlite3.connect(os.path.join(tmp, "full.db"), check_same_thread=False)
        full = SqliteSaver(conn)
        full.setup()
        conn.execute("PRAGMA synchronous=FULL")
        cap = _Capture()
        savers: Dict[str, Any] = {"SqliteSaver synchronous=FULL": full, "CairnSaver embedded": CairnSaver(ce), "saver alone": CairnSaver(cap)}  # type: ignore[arg-type]
        state = {n: {"cfg": {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, "ver": None, "i": 0} for n in savers}

        def put(n: str) -> Callable[[], None]:
            def f() -> None:
                s, st = savers[n], state[n]
                cp = empty_checkpoint()
                st["ver"] = s.get_next_version(st["ver"], None)
                cp["channel_values"] = {"messages": ["hello world"] * 4, "step": st["i"]}
                cp["channel_versions"] = {"messages": st["ver"], "step": st["ver"]}
                st["cfg"] = s.put(st["cfg"], cp, {"source": "loop", "step": st["i"]}, cp["channel_versions"])
                st["i"] += 1

            return f

        # The requests of "commit alone": what the saver sends, made with
        # the capturing saver beforehand, to a session of their own.
        reqs: List[bytes] = []
        for _ in range(rounds * per + 20):
            put("saver alone")()
            sid, change = cap.last
            reqs.append(json.dumps({"session_id": "raw", "change": change}, separators=(",", ":")).encode())
        it = iter(reqs)

        def commit() -> None:
            ce._call(b"save", next(it), False)

        fd = os.open(os.path.join(tmp, "floor"), os.O_RDWR | os.O_CREAT, 0o600)
        os.pwrite(fd, b"\0" * (1 << 20), 0)
        os.fsync(fd)
        off = [0]
        block = b"x" * 1500

        def sync() -> None:
            os.pwrite(fd, block, off[0])
            os.fdatasync(fd)
            off[0] = (off[0] + 1500) % ((1 << 20) - 1500)

        rows: Dict[str, Callable[[], None]] = {n: put(n) for n in savers}
        rows["commit alone"] = commit
        rows["fdatasync 1.5 KiB overwrite"] = sync
        for f in rows.values():  # warm up
            for _ in range(20):
                f()
        meds: Dict[str, List[float]] = {n: [] for n in rows}
        cpus: Dict[str, List[float]] = {n: [] for n in rows}
        for _ in range(rounds):
            ts: Dict[str, List[float]] = {n: [] for n in rows}
            cs: Dict[str, float] = {n: 0.0 for n in rows}
            for _ in range(per):
                for n, f in rows.items():
                    c0, t0 = cpu(), time.perf_counter()
                    f()
                    ts[n].append(time.perf_counter() - t0)
                    cs[n] += cpu() - c0
            for n in rows:
                meds[n].append(statistics.median(ts[n]) * 1e6)
                cpus[n].append(cs[n] / per * 1e6)
        base = statistics.median(meds["SqliteSaver synchronous=FULL"])
        print(f"{'':30} {'median':>7} {'rounds (median us)':>32} {'CPU us':>7} {'vs FULL':>8}")
        for n in rows:
            m = statistics.median(meds[n])
            rs = " ".join(f"{x:.0f}" for x in meds[n])
            print(f"{n:30} {m:>7.0f} {rs:>32} {statistics.median(cpus[n]):>7.0f} {m / base:>7.2f}x", flush=True)
        os.close(fd)
        ce.close()
        conn.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
