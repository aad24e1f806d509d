#!/usr/bin/env python3
"""Splits the Python side of an agent turn through the binding, embedded and
through cairnd: building and JSON-encoding the request (what
Client.checkpoint does before the call), the ctypes call into libcairn
(everything Go does, and for the daemon the round trip), and decoding the
result; then the whole checkpoint() call, and a cProfile of it.

    python3 bench/agent/pyturn_prof.py [--turns 1000] [--cprofile]

Uses the binding's private helpers (cairn.client._params, Client._fn_buf and
the pooled out-parameters, or Client._fn with a binding that has none) to
time the parts as Client._call strings them together.
"""
from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import os
import pstats
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "bindings"))
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("CAIRN_LIBRARY", str(REPO / "build" / "libcairn.so"))
from python_bench import connected  # noqa: E402
from python_turn import turn_messages  # noqa: E402

import cairn  # noqa: E402
from cairn import client as cc  # noqa: E402


def med(xs):
    s = sorted(xs)
    return s[len(s) // 2] / 1000


def split(c, run_id: str, turns: int, start: int):
    enc, call, dec, whole = [], [], [], []
    clock = time.perf_counter_ns
    for k in range(start, start + turns):
        i = 2 * k - 1  # turns must grow: the split call takes the odd ones
        msgs = turn_messages(i)
        usage = {"input_tokens": 1000 * i, "output_tokens": 200 * i, "total_tokens": 1200 * i, "cost": 0.001 * i}
        t0 = clock()
        req = cc._params({"run_id": run_id, "turn": i, "new_messages": list(msgs), "tool_calls_count": i},
                         usage=usage, state={"step": "after_tool", "turn": i})
        if getattr(c, "_fn_buf", None) is not None:
            # cairn_call_buf, with the client's pooled out-parameters and
            # result buffer.
            o = cc._outs.pop() if cc._outs else cc._Out()
            t1 = clock()
            rc = c._fn_buf(c._h, b"checkpoint", req, len(req), *o.args)
            t2 = clock()
            assert rc == 0 and o.r.value is None, rc
            out = cc._parse(o.buf[: o.n.value].decode("utf-8", "surrogatepass"))
            t3 = clock()
            cc._outs.append(o)
        else:
            t1 = clock()
            r, n, e = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p()
            rc = c._fn(c._h, b"checkpoint", req, len(req), ctypes.byref(r), ctypes.byref(n), ctypes.byref(e))
            t2 = clock()
            assert rc == 0, rc
            out = cc._loads(ctypes.string_at(r.value, n.value))
            c._free(r.value)
            t3 = clock()
        enc.append(t1 - t0)
        call.append(t2 - t1)
        dec.append(t3 - t2)
        assert out["generation"] > 0
        # the whole public call, interleaved with the split one
        j = i + 1
        msgs = turn_messages(j)
        t0 = clock()
        c.checkpoint(run_id, j, msgs, usage=usage, tool_calls_count=i, state={"step": "after_tool", "turn": i})
        whole.append(clock() - t0)
    return {"encode": med(enc), "ctypes call": med(call), "decode result": med(dec), "whole checkpoint()": med(whole),
            "request bytes": len(req)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--cprofile", action="store_true")
    a = ap.parse_args()
    for mode in ("embedded", "daemon"):
        with connected(cairn, mode, str(REPO / "build" / "cairnd"), "cairn-prof") as c:
            c.save("agent", change={"append_messages": [{"role": "system", "content": "you are an agent"}]})
            run_id = c.begin_run("agent")["run_id"]
            r = split(c, run_id, a.turns, 1)
            print(mode, " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()), flush=True)
            if a.cprofile:
                pr = cProfile.Profile()
                pr.enable()
                for i in range(2 * a.turns + 2, 2 * a.turns + 2 + a.turns // 2):
                    c.checkpoint(run_id, i, turn_messages(i), usage={"input_tokens": i}, tool_calls_count=i, state={"t": i})
                pr.disable()
                s = io.StringIO()
                pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(8)
                print(s.getvalue())


if __name__ == "__main__":
    main()
