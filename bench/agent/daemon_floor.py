#!/usr/bin/env python3
"""The floor under cairn's daemon path: N agent processes run the agent
workload's turn (agent_bench.py's: two messages of about 2 and 6 KB, usage,
a small state, durable before the next turn) against each contestant in turn,
round after round:

- sqlite: Python sqlite3 on one shared file (WAL, synchronous=FULL), as
  agent_bench.py's concurrency part;
- floor: bench/agent/daemon_floor.c, a one-thread epoll server that takes
  each request as a length and the bytes, writes everything it read in one
  pass of its loop with one pwrite and one fdatasync (group commit into
  preallocated zeros) and answers 8 bytes. Its client is plain Python: the
  checkpoint's params encoded with the binding's own JSON encoder, sendall,
  recv. That is what any client-daemon design pays on this machine for the
  turn: the Python work, two processes' wake-ups and one shared flush;
- gofloor: bench/gofloor, the same server written as a Go daemon is (a
  goroutine per connection reading through the runtime's poller, the
  first request to find no commit in progress committing every request
  queued), with the same client: what the Go runtime adds to the floor;
- wsfloor: bench/gofloor -ws, the Go floor speaking cairn's protocol (a
  WebSocket, CBOR requests decoded as cairnd decodes them, CBOR answers),
  with the Python binding's own checkpoint path (cairn/_wire.py) as its
  client: what the protocol adds to the Go floor, and below cairnd by
  cairnd's engine and store alone;
- cborfloor: bench/gofloor -cbor, the same CBOR requests and answers
  after a 4-byte length instead of in WebSocket frames, its client the
  binding's encoder (cairn/_wire.encode_checkpoint) and answer reader
  with sendall and recv: what the WebSocket framing adds, on both sides;
- cairn: the binding in daemon mode against cairnd.

For each it prints turns/s (all agents together), the ratio to sqlite in
the same round, and the CPU per turn of the clients and of the server.

    make bench-daemon-floor
    python3 bench/agent/daemon_floor.py [--agents 1,8,32] [--turns 200] [--rounds 2]

CAIRN_LIBRARY and --daemon pick the libcairn and cairnd measured (default:
build/); --servers runs some of them only.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "agent"))
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))
import agent_bench as ab  # noqa: E402

KINDS = ("sqlite", "floor", "gofloor", "cborfloor", "wsfloor", "cairn")


class FloorAgent:
    """The floor's client: the turn's params as Client.checkpoint builds and
    encodes them, sent with a length; the answer is 8 bytes."""

    def __init__(self, path: str, sid: str) -> None:
        from cairn import client as cc

        self.dumps = cc._dumps
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.run_id = f"run-{sid}"

    def turn(self, i: int, msgs: List[Any]) -> None:
        body = self.dumps({"run_id": self.run_id, "turn": i, "new_messages": msgs, "tool_calls_count": i,
                           "usage": ab.usage_of(i), "state": ab.state_of(i)})
        self.s.sendall(struct.pack("<I", len(body)) + body)
        self.recv(8)

    def recv(self, n: int) -> bytes:
        got = b""
        while len(got) < n:
            b = self.s.recv(n - len(got))
            if not b:
                raise RuntimeError("floor server closed the connection")
            got += b
        return got

    def close(self) -> None:
        self.s.close()


class WSFloorAgent:
    """The wsfloor's client: the Python binding's own checkpoint path
    (cairn/_wire.Wire), the call Client.checkpoint makes in daemon mode,
    against the server at workspace/.cairn/cairnd.sock."""

    def __init__(self, workspace: str, sid: str) -> None:
        from cairn import _wire
        from cairn import client as cc

        self.wire = _wire.Wire(lambda: workspace)
        self.encode = _wire.encode_checkpoint
        self.dumps = cc._dumps_finite
        self.run_id = f"run-{sid}"

    def turn(self, i: int, msgs: List[Any]) -> None:
        run_id, usage, state = self.run_id, ab.usage_of(i), ab.state_of(i)
        r = self.wire.checkpoint(lambda: self.encode(self.dumps, run_id, i, msgs, usage, i, state, None))
        if r is None:
            raise RuntimeError("the wire path did not send the checkpoint")

    def close(self) -> None:
        self.wire.close()


class CBORFloorAgent(FloorAgent):
    """The cborfloor's client: the request the binding's own checkpoint
    path sends (cairn/_wire.py's encoding, byte for byte), after a 4-byte
    length instead of in a WebSocket frame; the answer, after its length,
    read by the same path's answer reader."""

    def __init__(self, path: str, sid: str) -> None:
        from cairn import _wire
        from cairn import client as cc

        super().__init__(path, sid)
        self.w = _wire
        self.dumps = cc._dumps_finite
        self.rid = 0

    def turn(self, i: int, msgs: List[Any]) -> None:
        w = self.w
        params = w.encode_checkpoint(self.dumps, self.run_id, i, msgs, ab.usage_of(i), i, ab.state_of(i), None)
        if params is None:
            raise RuntimeError("the checkpoint could not be encoded")
        self.rid += 1
        msg = b"".join([w._REQ_HEAD, w._head(0, self.rid), w._REQ_CHECKPOINT, *params])
        self.s.sendall(struct.pack("<I", len(msg)) + msg)
        (n,) = struct.unpack("<I", self.recv(4))
        w._checkpoint_answer(self.recv(n))


def worker(kind: str, target: str, sid: str, turns: int) -> None:
    """One agent process (agent_bench.fleet)."""
    if kind == "cairn":
        import cairn

        c = cairn.connect(target, auto_start=False)
        ab.run_turns(ab.CairnAgent(c, sid), turns)
        c.close()
        return
    if kind == "wsfloor":
        agent: Any = WSFloorAgent(target, sid)
    elif kind == "cborfloor":
        agent = CBORFloorAgent(target, sid)
    elif kind in ("floor", "gofloor"):
        agent = FloorAgent(target, sid)
    else:
        agent = ab.SQLiteAgent(target, sid, busy_ms=60_000)
    ab.run_turns(agent, turns)
    agent.close()


def run(kind: str, n: int, turns: int, root: str, a: argparse.Namespace) -> Dict[str, float]:
    d = tempfile.mkdtemp(prefix=f"{kind}-{n}-", dir=root)
    server = None
    pid = 0
    try:
        if kind == "cairn":
            import cairn

            c0 = cairn.connect(d, daemon=a.daemon, daemon_args=["--idle-timeout=600s"])
            pid = c0.status()["daemon"]["pid"]
            target = d
        elif kind in ("floor", "gofloor", "cborfloor", "wsfloor"):
            target = os.path.join(d, "floor.sock")
            binary = a.floor_bin if kind == "floor" else a.gofloor_bin
            sock, flags = target, {"cborfloor": ["-cbor"], "wsfloor": ["-ws"]}.get(kind, [])
            if kind == "wsfloor":
                # The binding's path dials <workspace>/.cairn/cairnd.sock.
                os.mkdir(os.path.join(d, ".cairn"))
                sock, target = os.path.join(d, ".cairn", "cairnd.sock"), d
            argv = [binary, *flags, sock, os.path.join(d, "floor.data")]
            # The Go floors run with the runtime's monitor quieted as cairnd
            # runs (cmd/cairnd/sysmon_unix.go): no deep sleep between requests.
            env = dict(os.environ, GODEBUG="schedtrace=2147483647") if kind != "floor" else None
            server = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
            if server.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{binary} did not start")
            pid = server.pid
        else:
            target = ab.shared_sqlite(os.path.join(d, "shared.sqlite"))
        outs, s_cpu = ab.fleet(lambda k: [sys.executable, __file__, "--worker", kind, target, f"agent-{k:02d}", str(turns)], n, pid)
    finally:
        if kind == "cairn" and pid:
            c0.close()
            ab.stop(pid, timeout=20.0)
        if server is not None:
            server.kill()
            server.wait()
        shutil.rmtree(d, ignore_errors=True)
    total = n * turns
    return {"turns_per_s": ab.rate(outs, total), "client_us": sum(o["cpu_s"] for o in outs) * 1e6 / total,
            "server_us": s_cpu * 1e6 / total}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="1,8,32")
    ap.add_argument("--turns", type=int, default=3200, help="turns per run, split evenly among the agents (at least 100 each)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--servers", default=",".join(KINDS), help="which of sqlite, floor, gofloor, cborfloor, wsfloor, cairn to run")
    ap.add_argument("--daemon", default=str(REPO / "build" / "cairnd"))
    ap.add_argument("--floor-bin", default=str(REPO / "build" / "daemon-floor"))
    ap.add_argument("--gofloor-bin", default=str(REPO / "build" / "gofloor"))
    a = ap.parse_args()
    ns = [int(x) for x in a.agents.split(",")]
    kinds = [k for k in KINDS if k in a.servers.split(",")]
    root = tempfile.mkdtemp(prefix="cairn-daemon-floor-")
    rows: Dict[Tuple[str, int], List[Dict[str, float]]] = {}
    print(f"# {os.cpu_count()} CPUs; agents {ns}, {a.turns} turns a run; {a.rounds} rounds; {ab.load()}", flush=True)
    print("round  agents  server    turns/s  x sqlite  cpu us/turn client  server", flush=True)
    try:
        for r in range(1, a.rounds + 1):
            for n in ns:
                got = {kind: run(kind, n, max(100, a.turns // n), root, a) for kind in kinds}
                for kind in kinds:
                    x = got[kind]
                    x["x_sqlite"] = x["turns_per_s"] / got["sqlite"]["turns_per_s"] if "sqlite" in got else float("nan")
                    rows.setdefault((kind, n), []).append(x)
                    print(f"{r:5d}  {n:6d}  {kind:7s}  {x['turns_per_s']:8.0f}  {x['x_sqlite']:8.2f}"
                          f"  {x['client_us']:18.0f}  {x['server_us']:6.0f}   ({ab.load()})", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("# medians over the rounds", flush=True)
    for n in ns:
        for kind in kinds:
            xs = rows[(kind, n)]
            med = {k: statistics.median(x[k] for x in xs) for k in xs[0]}
            print(f"  all  {n:6d}  {kind:7s}  {med['turns_per_s']:8.0f}  {med['x_sqlite']:8.2f}"
                  f"  {med['client_us']:18.0f}  {med['server_us']:6.0f}", flush=True)


if __name__ == "__main__":
    main()
