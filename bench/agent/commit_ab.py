#!/usr/bin/env python3
"""Interleaved A/B of the embedded commit's cost between two builds of
libcairn: for each round, each library in turn runs the embedded agent turn
(agent_bench.py --turns 1000 --open-mib 0 --skip resume,open,concurrency)
and the durable put's parts (bench/adapters/putfloor.py 5 200), both from
the checkout this script is in, so that only the library differs. Prints
each run's rows, then per library the medians over the rounds and each
round's ratio to SQLite in the same run.

    python3 bench/agent/commit_ab.py <python with langgraph> A=<libcairn.so> B=<libcairn.so> [rounds]

The python given runs putfloor.py (it needs LangGraph: make venv-adapters);
agent_bench.py runs under the python running this script.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(cmd, lib):
    env = dict(os.environ, CAIRN_LIBRARY=lib)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"{cmd} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def load():
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    vpy = sys.argv[1]
    libs = [a.split("=", 1) for a in sys.argv[2:4]]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    rows = {}  # (name, row) -> [(median us, cpu us)]
    for r in range(1, rounds + 1):
        for name, lib in libs:
            print(f"=== round {r} {name} agent_bench, load {load()}", flush=True)
            out = run([sys.executable, str(REPO / "bench/agent/agent_bench.py"), "--turns", "1000",
                       "--open-mib", "0", "--skip", "resume,open,concurrency"], lib)
            for line in out.splitlines():
                f = line.split()
                if f and f[0] in ("per", "sqlite", "embedded", "floor", "overwrite"):
                    print(line)
                if f and f[0] in ("sqlite", "embedded"):
                    rows.setdefault((name, "turn " + f[0]), []).append((float(f[2]), float(f[6])))
            print(f"=== round {r} {name} putfloor, load {load()}", flush=True)
            out = run([vpy, str(REPO / "bench/adapters/putfloor.py"), str(REPO / "bindings/python"), "5", "200"], lib)
            for line in out.splitlines():
                f = line.split()
                if not f:
                    continue
                print(line)
                for key, label in (("SqliteSaver", "put sqlite FULL"), ("CairnSaver", "put cairn"), ("commit", "commit alone")):
                    if f[0] == key:
                        rows.setdefault((name, label), []).append((float(f[-8]), float(f[-2])))
    print(f"# medians over {rounds} rounds (us), load {load()}")
    for (name, row), v in sorted(rows.items()):
        print(f"{name:3} {row:16} wall {statistics.median(x[0] for x in v):6.0f}  CPU {statistics.median(x[1] for x in v):6.0f}"
              f"   CPU by round: {' '.join(str(int(x[1])) for x in v)}")
    for name, _ in libs:
        for what, a, b in (("turn", "turn embedded", "turn sqlite"), ("put", "put cairn", "put sqlite FULL")):
            x, y = rows.get((name, a), []), rows.get((name, b), [])
            print(f"{name:3} {what} x SQLite, wall: {' '.join(f'{p[0] / q[0]:.2f}' for p, q in zip(x, y))};"
                  f" CPU: {' '.join(f'{p[1] / q[1]:.2f}' for p, q in zip(x, y))}")


if __name__ == "__main__":
    main()
