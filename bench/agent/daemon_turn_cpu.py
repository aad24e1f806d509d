#!/usr/bin/env python3
"""CPU per agent turn through libcairn in daemon mode: the client's (this
process: Python, ctypes and libcairn) and cairnd's, with the median turn.

    python3 bench/agent/daemon_turn_cpu.py [--turns 2000] [DIR ...]

Also cairnd's context switches per turn (its threads', voluntary and not).
Each DIR holds a libcairn.so and a cairnd (default: build/); give several to
compare builds in one run, each in its own process, rounds interleaved.
A turn is bench/bindings/python_turn.py's: one checkpoint carrying two
messages (~8 KiB of JSON), after 200 warm-up turns.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def switches(pid: int) -> int:
    """Context switches (voluntary and not) of process pid's live threads."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if "ctxt_switches:" in line:
                        n += int(line.split()[1])
        except FileNotFoundError:
            pass
    return n


def one(lib: str, turns: int) -> None:
    os.environ["CAIRN_LIBRARY"] = os.path.join(lib, "libcairn.so")
    sys.path[:0] = [str(REPO / "bench" / "bindings"), str(REPO / "bindings" / "python"), str(REPO / "bench" / "agent")]
    import cairn
    from agent_bench import proc_cpu_s
    from python_bench import connected
    from python_turn import turn_messages

    with connected(cairn, "daemon", os.path.join(lib, "cairnd"), "cairn-dcpu") as c:
        pid = c.status()["daemon"]["pid"]
        c.save("s", change={"append_messages": [{"role": "system", "content": "you are an agent"}]})
        run = c.begin_run("s")["run_id"]
        for i in range(1, 201):
            c.checkpoint(run, i, turn_messages(i), usage={"input_tokens": i}, tool_calls_count=i, state={"t": i})
        msgs = [turn_messages(i) for i in range(201, 201 + turns)]
        walls = []
        s0, d0, c0 = switches(pid), proc_cpu_s(pid), time.process_time()
        for k, i in enumerate(range(201, 201 + turns)):
            t0 = time.perf_counter_ns()
            c.checkpoint(run, i, msgs[k], usage={"input_tokens": i}, tool_calls_count=i, state={"t": i})
            walls.append(time.perf_counter_ns() - t0)
        client = (time.process_time() - c0) / turns * 1e6
        daemon = (proc_cpu_s(pid) - d0) / turns * 1e6
        sw = (switches(pid) - s0) / turns
    walls.sort()
    print(f"{os.path.basename(lib):8} median {walls[len(walls) // 2] / 1000:5.0f} us  client cpu {client:4.0f} us  "
          f"cairnd cpu {daemon:4.0f} us  cairnd switches {sw:4.1f}/turn  load {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("dirs", nargs="*", default=[str(REPO / "build")])
    a = ap.parse_args()
    if a.one:
        one(a.one, a.turns)
        return
    for _ in range(a.rounds):
        for d in a.dirs:
            subprocess.run([sys.executable, __file__, "--turns", str(a.turns), "--one", os.path.abspath(d)], check=True)


if __name__ == "__main__":
    main()
