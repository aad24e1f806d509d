"""Where a durable put's time goes, interleaved call by call so that every
row sees the same machine: SqliteSaver with synchronous=FULL, CairnSaver
embedded, and the parts of CairnSaver's put on their own:

  commit alone   the save a put sends (its JSON bytes, made beforehand),
                 straight to libcairn: no saver, no request encoding
  saver alone    CairnSaver.put against a client whose save does nothing
                 (LangGraph's serializer, the keys, the request's JSON text)
  fdatasync      a 1.5 KiB overwrite + fdatasync of a file in the same
                 directory (the disk's floor for one durable write)

    CAIRN_LIBRARY=<libcairn.so> python3 bench/adapters/putfloor.py <dir holding the cairn package> [rounds] [per round]

With --go-floor=<goembedfloor.so> (bench/goembedfloor, make
bench-embedded-floor builds it) the script runs instead, in a process
without libcairn (a process holds one Go runtime): SqliteSaver FULL,
"saver alone", and "saver + Go floor": CairnSaver.put whose save request
is handed through ctypes to a Go c-shared library that only writes it
into synced zeros and fdatasyncs it. That is the least a put through any
embedded Go library costs: the saver's Python, the crossing into the Go
runtime, one durable write.

Medians per round in microseconds, CPU per call from getrusage (the whole
process: libcairn's Go threads included)."""

import json
import os
import shutil
import sys
import tempfile
from typing import Any, Callable, Dict, List

GO_FLOOR = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--go-floor=")), "")
sys.argv[1:] = [a for a in sys.argv[1:] if not a.startswith("--go-floor=")]
sys.path.insert(0, sys.argv[1])
import cairn  # noqa: E402  (the package named, before bench's own path)
from bench import Putter, interleaved, print_interleaved, sqlite_saver  # noqa: E402  (this script's directory)
from cairn.langgraph import CairnSaver  # noqa: E402


class _Capture:
    """A client whose save records the request and does nothing."""

    def __init__(self) -> None:
        self.last: Any = None

    def save(self, sid: str, snapshot: Any = None, *, change: Any = None, expect_generation: Any = None) -> Dict[str, int]:
        self.last = (sid, change)
        return {"generation": 1}

    def _call(self, method: bytes, req: bytes, decode: bool = True) -> None:
        # CairnSaver.put's way to save: the request as JSON text.
        self.last = req

    def artifact(self, sid: str, aid: str) -> Any:
        raise cairn.NotFoundError("none")


class _GoFloorClient(_Capture):
    """A client whose save hands the request to bench/goembedfloor's
    floor_commit: one pwrite into synced zeros and one fdatasync."""

    def __init__(self, lib: str, path: str) -> None:
        super().__init__()
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goembedfloor"))
        from floorlib import open_floor

        self.commit = open_floor(lib, path)

    def _call(self, method: bytes, req: bytes, decode: bool = True) -> None:
        self.commit(req)


def go_floor(lib: str, rounds: int, per: int) -> None:
    tmp = tempfile.mkdtemp(prefix="cairn-putfloor-")
    try:
        full = sqlite_saver(os.path.join(tmp, "full.db"), full=True)
        savers: Dict[str, Any] = {
            "SqliteSaver synchronous=FULL": full,
            "saver + Go floor": CairnSaver(_GoFloorClient(lib, os.path.join(tmp, "gofloor"))),  # type: ignore[arg-type]
            "saver alone": CairnSaver(_Capture()),  # type: ignore[arg-type]
        }
        rows: Dict[str, Callable[[], None]] = {n: Putter(s, "t") for n, s in savers.items()}
        meds, cpus = interleaved(rows, rounds, per)
        print_interleaved(meds, cpus, 30)
        full.conn.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    per = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    if GO_FLOOR:
        go_floor(GO_FLOOR, rounds, per)
        return
    tmp = tempfile.mkdtemp(prefix="cairn-putfloor-")
    try:
        os.makedirs(os.path.join(tmp, "e"))
        ce = cairn.connect(os.path.join(tmp, "e"), embedded=True)
        full = sqlite_saver(os.path.join(tmp, "full.db"), full=True)
        cap = _Capture()
        savers: Dict[str, Any] = {"SqliteSaver synchronous=FULL": full, "CairnSaver embedded": CairnSaver(ce), "saver alone": CairnSaver(cap)}  # type: ignore[arg-type]
        putters = {n: Putter(s, "t") for n, s in savers.items()}

        # The requests of "commit alone": what the saver sends, made with
        # the capturing saver beforehand, to a session of their own.
        reqs: List[bytes] = []
        for _ in range(rounds * per + 20):
            putters["saver alone"]()
            change = json.loads(cap.last)["change"]
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

        rows: Dict[str, Callable[[], None]] = dict(putters)
        rows["commit alone"] = commit
        rows["fdatasync 1.5 KiB overwrite"] = sync
        meds, cpus = interleaved(rows, rounds, per)
        print_interleaved(meds, cpus, 30)
        os.close(fd)
        ce.close()
        full.conn.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
