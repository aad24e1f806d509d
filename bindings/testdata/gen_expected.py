#!/usr/bin/env python3
"""Writes expected_node.json and expected_rust.json from scenario.json, by
plain computation that does not use cairn: what the Node.js and Rust stages
must print (canonical JSON: sorted keys, no spaces, UTF-8). Rerun it only
when scenario.json changes, and review the diff."""
import base64
import hashlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def canonical(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pattern(p):
    return bytes((i * p["mul"] + p["add"]) % 256 for i in range(p["size"]))


def main():
    sc = json.load(open(os.path.join(HERE, "scenario.json"), encoding="utf-8"))
    snap = sc["snapshot"]
    arts = []
    for a in snap["artifacts"]:
        data = pattern(a["pattern"])
        arts.append({"id": a["id"], "name": a["name"], "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
    t1, t2 = sc["turns"]
    boundary = snap["messages"] + t1["new_messages"] + t2["new_messages"]
    node = {
        "session": {
            "messages": boundary,  # the checkpointed turns appended theirs
            "metadata": snap["metadata"],
            "agent": snap["agent"],
            "artifacts": arts,
            "interrupted_runs": [{"run_id": sc["run_id"], "turn": 2, "message_count": len(boundary),
                                  "usage": t2["usage"], "tool_calls_count": t2["tool_calls_count"]}],
        },
        "resumed_run": {
            "run_id": sc["new_run_id"], "resumed_from": sc["run_id"], "turn": 2,
            "usage": t2["usage"], "tool_calls_count": t2["tool_calls_count"], "state": t2["state"],
            "messages": boundary,
        },
    }
    steps = sc["workflow_steps"]
    done = sc["steps_done_by_python"]
    rust = {
        "completed_before": [s["step_id"] for s in steps[:done]],
        "ran": [s["step_id"] for s in steps[done:]],
        "results": [s["result"] for s in steps],
        "runs": [
            {"run_id": sc["run_id"], "status": "interrupted", "parent_run_id": None, "tool_calls_count": t2["tool_calls_count"]},
            {"run_id": sc["new_run_id"], "status": "completed", "parent_run_id": sc["run_id"],
             "tool_calls_count": sc["node_turn"]["tool_calls_count"]},
        ],
        "message_count": len(boundary) + len(sc["node_turn"]["new_messages"]),
        "workflow_after_finish": "not_found",
    }
    for name, v in (("expected_node.json", node), ("expected_rust.json", rust)):
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(canonical(v) + "\n")


if __name__ == "__main__":
    main()
