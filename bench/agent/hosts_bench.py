#!/usr/bin/env python3
"""Agent hosts on one cairnd: Python, Node.js (and Rust) agent processes
against Python sqlite3 agents on one shared file.

Each contestant is n agent processes on their own sessions, all started
together (agent_bench.py's fleet), each making the agent workload's turns
(two messages of about 2 and 6 KB, usage and a run checkpoint, saved
before the next turn). A cairn host runs twice: through its binding's own
checkpoint connection (the default) and through libcairn
(CAIRN_PY_WIRE=0, CAIRN_NODE_WIRE=0, CAIRN_RUST_WIRE=0). Printed per
contestant and agent count: turns/s in total and as a ratio to SQLite's
in the same run, the agents' median turn, and CPU per turn (the agents'
own, and with the daemon's).

    build/venv/bin/python bench/agent/hosts_bench.py [--agents 1,8] [--agent-turns 500]
        [--kinds sqlite,python,python-lib,node,node-lib,rust,rust-lib]

The Rust kinds need `cargo build --release --example agent_turns` in
bindings/rust first (make bench-hosts does it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent_bench as ab  # noqa: E402

REPO = ab.REPO
NODE_AGENT = REPO / "bench" / "agent" / "node_agent.js"
RUST_AGENT = REPO / "bindings" / "rust" / "target" / "release" / "examples" / "agent_turns"
KINDS = ("sqlite", "python", "python-lib", "node", "node-lib", "rust", "rust-lib")
OFF = {"python-lib": "CAIRN_PY_WIRE", "node-lib": "CAIRN_NODE_WIRE", "rust-lib": "CAIRN_RUST_WIRE"}


def write_turns(path: str, turns: int) -> None:
    """The turns file the Node.js and Rust workers read: element k is turn
    k+1's messages, usage and state, as agent_bench.py's CairnAgent sends."""
    with open(path, "w") as f:
        json.dump([{"messages": ab.turn_messages(i), "usage": ab.usage_of(i), "state": ab.state_of(i)}
                   for i in range(1, turns + 1)], f)


def command(kind: str, turns: int, turns_file: str) -> Optional[Callable[[str, str], List[str]]]:
    """The agent process command of a Node.js or Rust kind, as
    concurrency's argv(target, sid); None for the Python kinds, which are
    agent_bench.py's own workers."""
    base = kind.split("-")[0]
    if base == "node":
        return lambda ws, sid: ["node", str(NODE_AGENT), ws, sid, str(turns), turns_file]
    if base == "rust":
        return lambda ws, sid: [str(RUST_AGENT), ws, sid, str(turns), turns_file]
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="1,8", help="agent process counts (default 1,8)")
    ap.add_argument("--agent-turns", type=int, default=500, help="turns per agent process (default 500)")
    ap.add_argument("--kinds", default=",".join(k for k in KINDS if not k.startswith("rust") or RUST_AGENT.exists()),
                    help="contestants, of " + ",".join(KINDS) + " (default: all that are built)")
    ap.add_argument("--daemon", default=os.environ.get("CAIRN_DAEMON") or str(REPO / "build" / "cairnd"))
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    if set(kinds) - set(KINDS):
        ap.error(f"--kinds: not a contestant: {a.kinds}")
    if "sqlite" not in kinds:
        kinds.insert(0, "sqlite")
    if any(k.startswith("rust") for k in kinds) and not RUST_AGENT.exists():
        ap.error(f"{RUST_AGENT} is not built: cd bindings/rust && cargo build --release --example agent_turns")
    agents = [int(x) for x in a.agents.split(",") if x]
    os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))
    os.environ.setdefault("CAIRN_DAEMON", a.daemon)
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import cairn

    start_load = ab.load()
    root = tempfile.mkdtemp(prefix="cairn-hosts-")
    rows: List[Dict[str, Any]] = []
    try:
        turns_file = os.path.join(root, "turns.json")
        write_turns(turns_file, a.agent_turns)
        for n in agents:
            for kind in kinds:
                env = dict(os.environ)
                for k in OFF.values():
                    env.pop(k, None)
                if kind in OFF:
                    env[OFF[kind]] = "0"
                t0 = time.monotonic()
                argv = command(kind, a.agent_turns, turns_file)
                worker = kind if argv is not None or kind == "sqlite" else "daemon"
                r = ab.concurrency(cairn, root, worker, n, a.agent_turns, a.daemon, argv=argv, env=env)
                wire = [o["wire_sent"] for o in r["outs"] if "wire_sent" in o]
                if kind in ("node", "rust") and sum(wire) != n * a.agent_turns:
                    raise RuntimeError(f"{kind}: {sum(wire)} of {n * a.agent_turns} checkpoints went by the binding's own connection")
                if kind in ("node-lib", "rust-lib") and sum(wire):
                    raise RuntimeError(f"{kind}: {sum(wire)} checkpoints went by the binding's own connection")
                rows.append({"kind": kind, "agents": n, **{k: v for k, v in r.items() if k != "outs"}})
                ab.log(f"{kind} x{n}: {r['turns_per_s']:.0f} turns/s in {time.monotonic() - t0:.0f}s ({ab.load()})")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"# agent hosts on one cairnd vs sqlite3 agents; {start_load} at start, {ab.load()} at the end")
    print(f"# {os.cpu_count()} CPUs; {a.agent_turns} turns per agent")
    print()
    print(f"{'host':12} {'agents':>6} {'turns/s':>8} {'x sqlite':>9} {'median us':>10} {'agent cpu us':>13} {'all cpu us':>11}")
    for r in rows:
        sq = next(x for x in rows if x["kind"] == "sqlite" and x["agents"] == r["agents"])
        print(f"{r['kind']:12} {r['agents']:>6} {r['turns_per_s']:>8.0f} {r['turns_per_s'] / sq['turns_per_s']:>8.2f}x"
              f" {r['median_us']:>10.0f} {r['agent_cpu_us']:>13.0f} {r['cpu_us']:>11.0f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
