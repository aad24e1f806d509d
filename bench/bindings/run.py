#!/usr/bin/env python3
"""Runs the binding benchmarks (Go baseline, Python, Node.js, Rust) one
after the other in this run and prints their figures side by side, with the
ratios the targets of issue 5 are stated in. `make bench-bindings` runs it
after building libcairn and cairnd.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAIRND = os.path.join(ROOT, "build", "cairnd")

RUNS = [
    ("go", ["go", "run", "./bench/bindings/gobench", "-daemon", CAIRND], ROOT),
    ("python", [sys.executable, "bench/bindings/python_bench.py"], ROOT),
    ("node", ["node", "bench/bindings/node_bench.js"], ROOT),
    ("rust", ["cargo", "run", "--quiet", "--release", "--example", "bench"], os.path.join(ROOT, "bindings", "rust")),
]

TARGETS = {  # (mode, op) -> absolute median target in microseconds, per language
    "python": {("embedded", "status"): 10},
    "node": {("embedded", "status"): 20},
    "rust": {("embedded", "status"): 5},
}


def main():
    figures = {}
    env = dict(os.environ, CAIRN_DAEMON=CAIRND)
    for lang, cmd, cwd in RUNS:
        print(f"running {lang}: {' '.join(cmd)}", file=sys.stderr)
        out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            print(out.stdout, out.stderr, file=sys.stderr)
            sys.exit(f"{lang} benchmark failed")
        for line in out.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                f = json.loads(line)
                figures[(f["lang"], f["mode"], f["op"])] = f
    print(f"{'lang':8} {'mode':9} {'op':9} {'median us':>10} {'p99 us':>10}  note")
    ok = True
    for lang, _, _ in RUNS:
        for mode in ("embedded", "daemon"):
            for op in ("status", "save_1kb"):
                f = figures.get((lang, mode, op))
                if not f:
                    print(f"{lang:8} {mode:9} {op:9} {'missing':>10}")
                    ok = False
                    continue
                note = ""
                target = TARGETS.get(lang, {}).get((mode, op))
                if target is not None:
                    met = f["median_us"] <= target
                    ok &= met
                    note = f"target <= {target} us: {'met' if met else 'NOT met'}"
                if lang != "go" and mode == "daemon" and op == "save_1kb":
                    base = figures.get(("go", "daemon", "save_1kb"))
                    if base:
                        ratio = f["median_us"] / base["median_us"]
                        met = ratio <= 1.5
                        ok &= met
                        note = f"{ratio:.2f}x the Go client (target <= 1.5x): {'met' if met else 'NOT met'}"
                print(f"{lang:8} {mode:9} {op:9} {f['median_us']:10.1f} {f['p99_us']:10.1f}  {note}")
    print("all targets met" if ok else "some targets NOT met")


if __name__ == "__main__":
    main()
