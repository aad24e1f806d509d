"""A host's own agent loop on client.start_run: every completed tool turn is
a checkpoint. Kill it at any moment (even in the middle of a tool call) and
start it again: it resumes from the last completed turn, counters and all.

    python start_run_resume.py /path/to/workspace
"""

import sys
import time

import cairn

with cairn.connect(sys.argv[1]) as client:
    with client.start_run("agent-1", resume=True) as run:
        if run.resumed_from:
            print(f"resumed {run.resumed_from} at turn {run.turn_no}, "
                  f"{run.tool_calls} tool calls, {run.usage['input_tokens']} input tokens so far", flush=True)
        while run.turn_no < 5:
            n = run.turn_no + 1
            call = {"role": "assistant", "content": f"call tool for turn {n}"}   # your model's reply
            time.sleep(1)                                                        # your tool runs here
            result = {"role": "tool", "content": f"tool result {n}"}
            run.turn([call, result], usage={"input_tokens": 100}, tool_calls=1)
            print(f"turn {n} done", flush=True)
    print(f"run {run.run_id} completed: {run.turn_no} turns, {run.tool_calls} tool calls", flush=True)
