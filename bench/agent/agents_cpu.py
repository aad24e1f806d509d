#!/usr/bin/env python3
"""CPU per turn of N agent processes through one cairnd, split by thread,
for several builds or settings, rounds interleaved.

    python3 bench/agent/agents_cpu.py [--agents 1,32] [--turns 100] [--rounds 3] VARIANT ...

A VARIANT is DIR or DIR:NAME=VALUE,NAME=VALUE: DIR holds libcairn.so and
cairnd (each variant starts its own cairnd from its DIR); the variables are
set in the agent processes only (not in cairnd). Each agent is a Python
process that runs agent_bench.py's turn (one checkpoint with ~8 KiB of
messages) --turns times after a few warm-up turns. Printed per variant and
agent count: turns/s, CPU per turn of the agents (the Python thread and the
other threads, which are the Go runtime's; from /proc/self/task/*/schedstat),
cairnd's, and the voluntary and involuntary context switches per turn of
the agents' Python threads. AGENTS_CPU_THREADS=1 also prints every thread
of agent 0 (CPU, time slices, switches) to stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "agent"))
from agent_bench import proc_cpu_s  # noqa: E402


def threads_cpu(pid: int = 0) -> Dict[str, float]:
    """The CPU seconds of process pid (0: this one), from its live threads'
    /proc/<pid>/task/*/schedstat: its main thread's and the others'."""
    main = other = 0.0
    me = pid or os.getpid()
    for tid in os.listdir(f"/proc/{me}/task"):
        try:
            with open(f"/proc/{me}/task/{tid}/schedstat") as f:
                s = int(f.read().split()[0]) / 1e9
        except OSError:
            continue
        if int(tid) == me:
            main += s
        else:
            other += s
    return {"main": main, "other": other}


def switches() -> Dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                k, v = line.split(":")
                out[k.split("_")[0]] = int(v)
    return out


def worker(target: str, sid: str, turns: int) -> None:
    sys.path[:0] = [str(REPO / "bindings" / "python"), str(REPO / "bench" / "agent"), str(REPO / "bench" / "bindings")]
    import cairn
    from agent_bench import CairnAgent
    from python_turn import turn_messages

    c = cairn.connect(target, auto_start=False)
    agent = CairnAgent(c, sid)
    warm = 5
    msgs = [turn_messages(i) for i in range(1, turns + warm + 1)]
    for i in range(1, warm + 1):
        agent.turn(i, msgs[i - 1])
    print("ready", flush=True)
    sys.stdin.readline()
    t0, c0, th0, sw0 = time.monotonic(), time.process_time(), threads_cpu(), switches()
    for i in range(warm + 1, warm + turns + 1):
        agent.turn(i, msgs[i - 1])
    t1, c1, th1, sw1 = time.monotonic(), time.process_time(), threads_cpu(), switches()
    if os.environ.get("AGENTS_CPU_THREADS") and sid.endswith("00"):
        for tid in sorted(os.listdir("/proc/self/task"), key=int):
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns, _, slices = f.read().split()
            st = open(f"/proc/self/task/{tid}/status").read().split("\n")
            sw = [l.split()[1] for l in st if "ctxt_switches" in l]
            print(f"  tid {tid} cpu {int(ns) / 1e6:8.1f} ms slices {slices} vol/invol {'/'.join(sw)}", file=sys.stderr)
    print(json.dumps({"start": t0, "end": t1, "cpu_s": c1 - c0,
                      "main_s": th1["main"] - th0["main"], "other_s": th1["other"] - th0["other"],
                      "vol": sw1["voluntary"] - sw0["voluntary"], "invol": sw1["nonvoluntary"] - sw0["nonvoluntary"]}),
          flush=True)
    c.close()


def one(variant: str, n: int, turns: int) -> str:
    d, _, envs = variant.partition(":")
    d = os.path.abspath(d)
    env_over = dict(kv.split("=", 1) for kv in envs.split(",") if kv)
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    sys.path.insert(0, str(REPO / "bench" / "bindings"))
    os.environ["CAIRN_LIBRARY"] = os.path.join(d, "libcairn.so")
    root = tempfile.mkdtemp(prefix="agents-cpu-")
    procs: List[subprocess.Popen] = []
    import cairn

    c0 = cairn.connect(root, daemon=os.path.join(d, "cairnd"), daemon_args=["--idle-timeout=600s"])
    pid = c0.status()["daemon"]["pid"]
    try:
        env = dict(os.environ, **env_over)
        for k in range(n):
            procs.append(subprocess.Popen([sys.executable, __file__, "--worker", root, "--session", f"agent-{k:02d}",
                                           "--turns", str(turns)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          text=True, env=env))
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("worker did not start")
        d0 = proc_cpu_s(pid)
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [json.loads(p.stdout.readline()) for p in procs]
        d1 = proc_cpu_s(pid)
        for p in procs:
            p.wait(timeout=120)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        c0.close()
        from python_bench import stop
        stop(pid, timeout=20.0)
        shutil.rmtree(root, ignore_errors=True)
    total = n * turns
    span = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    per = lambda k: sum(o[k] for o in outs) / total * 1e6  # noqa: E731
    return (f"{variant:40} x{n:<3} {total / span:6.0f} turns/s  cpu/turn client {per('cpu_s'):4.0f} "
            f"(py thread {per('main_s'):4.0f}, other threads {per('other_s'):4.0f}) cairnd {(d1 - d0) / total * 1e6:4.0f} us  "
            f"switches/turn vol {sum(o['vol'] for o in outs) / total:4.1f} invol {sum(o['invol'] for o in outs) / total:4.1f}  "
            f"load {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="1,32")
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--session", help=argparse.SUPPRESS)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("variants", nargs="*", default=[str(REPO / "build")])
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.session, a.turns)
        return
    if a.one:
        print(one(a.one, a.n, a.turns), flush=True)
        return
    for _ in range(a.rounds):
        for n in [int(x) for x in a.agents.split(",") if x]:
            for v in a.variants:
                subprocess.run([sys.executable, __file__, "--one", v, "--n", str(n), "--turns", str(a.turns)], check=True)


if __name__ == "__main__":
    main()
