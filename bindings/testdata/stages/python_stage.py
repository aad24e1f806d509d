#!/usr/bin/env python3
"""Stage 1 of the cross-language scenario (../scenario.json), in Python:
save the session, run two checkpointed turns, complete half the workflow,
export the session (with its loop checkpoint and workflow) to EXPORT_JSON,
then say READY and wait to be killed with SIGKILL by the driver.

usage: python_stage.py WORKSPACE CAIRND EXPORT_JSON"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import cairn  # noqa: E402


def pattern(p):
    return bytes((i * p["mul"] + p["add"]) % 256 for i in range(p["size"]))


def main():
    workspace, daemon, export_path = sys.argv[1], sys.argv[2], sys.argv[3]
    here = os.path.dirname(os.path.abspath(__file__))
    sc = json.load(open(os.path.join(here, "..", "scenario.json"), encoding="utf-8"))
    c = cairn.connect(workspace, daemon=daemon, daemon_args=["--idle-timeout=120s"])
    snap = dict(sc["snapshot"])
    snap["artifacts"] = [
        {k: v for k, v in a.items() if k != "pattern"} | {"data": pattern(a["pattern"])} for a in sc["snapshot"]["artifacts"]
    ]
    sid = sc["session_id"]
    c.save(sid, snapshot=snap)
    c.begin_run(sid, sc["run_id"])
    for t in sc["turns"]:
        c.checkpoint(sc["run_id"], t["turn"], t["new_messages"], usage=t["usage"], tool_calls_count=t["tool_calls_count"], state=t["state"])
    steps = sc["workflow_steps"]
    c.begin_workflow(sc["workflow_id"], [{"step_id": s["step_id"], "identity": s["identity"]} for s in steps], session_id=sid)
    for s in steps[: sc["steps_done_by_python"]]:
        c.complete_step(sc["workflow_id"], s["step_id"], s["identity"], s["result"], session_id=sid)
    env = c.export(sid)
    if not env.get("checkpoints") or not env.get("workflows"):
        raise SystemExit("python stage: the export carries no loop checkpoint or workflow")
    with open(export_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(env, f, ensure_ascii=False)
    os.replace(export_path + ".tmp", export_path)
    print(f"daemon_pid={c.status()['daemon']['pid']}", flush=True)
    print("READY", flush=True)
    time.sleep(600)  # the driver kills this process with SIGKILL


if __name__ == "__main__":
    main()
