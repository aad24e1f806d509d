#!/usr/bin/env python3
"""The Python side of the truncate/tail scenario (../truncate_tail.json).

write: save the initial messages and two artifacts, then in one change
truncate and append (replacing the messages from python_truncate_to on),
put one artifact and delete the other; print daemon_pid=PID.
read: read the tail Node.js left (after its own truncate and append) and
the summary, and check them against the scenario; print "ok".
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import cairn  # noqa: E402


def initial(n):
    return [{"role": "user", "content": f"message {i}"} for i in range(n)]


def main():
    mode, workspace, daemon = sys.argv[1], sys.argv[2], sys.argv[3]
    here = os.path.dirname(os.path.abspath(__file__))
    sc = json.load(open(os.path.join(here, "..", "truncate_tail.json"), encoding="utf-8"))
    sid = sc["session_id"]
    with cairn.connect(workspace, daemon=daemon, daemon_args=["--idle-timeout=120s"]) as c:
        if mode == "write":
            c.save(sid, change={
                "append_messages": initial(sc["initial_messages"]),
                "append_artifacts": [{"id": "keep", "data": b"v1"}, {"id": "drop", "data": b"x"}],
            })
            c.save(sid, change={
                "truncate_messages": sc["python_truncate_to"],
                "append_messages": sc["python_append"],
                "put_artifacts": [{"id": "keep", "data": b"v2 from python", "metadata": {"by": "python"}}],
                "delete_artifacts": ["drop"],
            })
            print(f"daemon_pid={c.status()['daemon']['pid']}", flush=True)
            return
        want_all = initial(sc["python_truncate_to"]) + sc["python_append"]
        want_all = want_all[: sc["node_truncate_to"]] + sc["node_append"]
        page = c.messages(sid, tail=sc["tail"])
        got = {k: page[k] for k in ("total", "from", "next", "more", "messages")}
        want = {
            "total": len(want_all),
            "from": len(want_all) - sc["tail"],
            "next": len(want_all),
            "more": False,
            "messages": want_all[-sc["tail"]:],
        }
        if got != want:
            sys.exit(f"python read a tail that differs from what Node.js wrote:\n got  {got}\n want {want}")
        s = c.summary(sid)
        if (s["message_count"], s["artifact_count"]) != (len(want_all), 1):
            sys.exit(f"python read a summary that differs: {s}")
        print("ok", flush=True)


if __name__ == "__main__":
    main()
