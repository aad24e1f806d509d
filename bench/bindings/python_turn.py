#!/usr/bin/env python3
"""An agent's turn through the Python binding: a run checkpoint carrying two
messages (about 2 KB and 6 KB of JSON), usage, the tool-call count and a
small loop state, saved durably before the next turn, embedded and through
cairnd. Prints one JSON line per mode with the median and p99 in µs.

    python3 bench/bindings/python_turn.py [--repo DIR] [--turns N]

--repo picks the tree whose binding, libcairn and cairnd are measured (its
build/ must hold them), so one script compares two trees turn for turn.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from python_bench import connected, summary


def turn_messages(i: int):
    user = {"role": "user", "content": "x" * 2000, "turn": i}
    assistant = {
        "role": "assistant",
        "content": [{"type": "text", "text": "y" * 3000},
                    {"type": "tool_use", "id": f"t{i}", "name": "edit", "input": {"path": "src/a.go", "patch": "z" * 3000}}],
    }
    return [user, assistant]


def run(cairn, mode: str, turns: int, daemon: str) -> dict:
    with connected(cairn, mode, daemon, "cairn-turn") as c:
        c.save("bench", change={"append_messages": [{"role": "system", "content": "you are an agent"}]})
        run_id = c.begin_run("bench")["run_id"]
        times = []
        for i in range(1, turns + 1):
            msgs = turn_messages(i)
            usage = {"input_tokens": 1000 * i, "output_tokens": 200 * i, "total_tokens": 1200 * i, "cost": 0.001 * i}
            t0 = time.perf_counter_ns()
            c.checkpoint(run_id, i, msgs, usage=usage, tool_calls_count=i, state={"step": "after_tool", "turn": i})
            times.append(time.perf_counter_ns() - t0)
    return {"mode": mode, "turns": turns, **summary(times)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[2]))
    ap.add_argument("--turns", type=int, default=1000)
    a = ap.parse_args()
    repo = Path(a.repo).resolve()
    sys.path.insert(0, str(repo / "bindings" / "python"))
    os.environ["CAIRN_LIBRARY"] = str(repo / "build" / "libcairn.so")
    import cairn  # noqa: E402

    for mode in ("embedded", "daemon"):
        r = run(cairn, mode, a.turns, str(repo / "build" / "cairnd"))
        r["repo"] = str(repo)
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
