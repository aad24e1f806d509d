"""A LangGraph graph checkpointed in cairn: kill it mid-run, run it again,
and it resumes where it was.

    python langgraph_resume.py /path/to/workspace     # kill it (Ctrl-C, kill -9) during a step
    python langgraph_resume.py /path/to/workspace     # resumes at that step
"""

import operator
import sys
import time
from typing import Annotated, List, TypedDict

import cairn
from cairn.langgraph import CairnSaver
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    done: Annotated[List[str], operator.add]


def step(name: str):
    def run(state: State) -> dict:
        print(f"running {name} (done so far: {state['done']})", flush=True)
        time.sleep(1)  # stands for a model call or a tool
        return {"done": [name]}

    return run


builder = StateGraph(State)
names = ["plan", "research", "write", "review"]
for n in names:
    builder.add_node(n, step(n))
for a, b in zip([START] + names, names + [END]):
    builder.add_edge(a, b)

with cairn.connect(sys.argv[1]) as client:
    graph = builder.compile(checkpointer=CairnSaver(client))
    config = {"configurable": {"thread_id": "report-1"}}
    pending = graph.get_state(config).next
    if pending:
        print(f"resuming at {pending[0]}", flush=True)
        result = graph.invoke(None, config, durability="sync")
    elif graph.get_state(config).values:
        print("already finished", flush=True)
        result = graph.get_state(config).values
    else:
        result = graph.invoke({"done": []}, config, durability="sync")
    print("result:", result["done"], flush=True)
