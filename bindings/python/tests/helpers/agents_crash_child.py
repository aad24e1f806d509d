"""One Runner.run of an agent whose stub model calls a tool, over a session
of the given kind, in its own process. argv: kind (sqlite | cairn-embedded
| cairn-daemon) dir phase (first | run | resume).

- first: Runner.run(agent, "hello"), a whole turn (tool call, tool output,
  answer); prints the final output.
- run: Runner.run(agent, "start"); the tool prints IN_TOOL and then blocks
  forever, so the parent SIGKILLs the process in the middle of the step.
- resume: prints the session's items (the state the new process starts
  from) as one JSON line, runs Runner.run(agent, "continue") over the same
  session, prints the final output, then the items again as one JSON line.

The stub model is deterministic (fixed ids), so two stores that kept the
same items give byte-identical histories.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import cairn  # noqa: E402
from cairn.agents import CairnSession  # noqa: E402

KIND, DIR, PHASE = sys.argv[1:4]


def kind_of(i: object) -> str:
    if not isinstance(i, dict):
        return "?"
    return str(i.get("type") or i.get("role"))


class ToolThenAnswerModel(Model):
    """Calls the tool after a user message; answers after a tool output.
    Each reply names what it saw, so the history shapes the output."""

    async def get_response(self, system_instructions, input, *args, **kwargs):  # type: ignore[no-untyped-def]
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        seen = [kind_of(i) for i in items]
        n = len(items)
        if items and kind_of(items[-1]) == "function_call_output":
            out = ResponseOutputMessage(
                id=f"msg-{n}",
                content=[ResponseOutputText(text="saw " + ",".join(seen), type="output_text", annotations=[])],
                role="assistant",
                status="completed",
                type="message",
            )
        else:
            out = ResponseFunctionToolCall(
                id=f"fc-{n}", call_id=f"call-{n}", name="slow_tool", arguments="{}",
                type="function_call", status="completed",
            )
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise NotImplementedError


@function_tool
async def slow_tool() -> str:
    """A tool that blocks in the run phase, so the step is interrupted."""
    if PHASE == "run":
        print("IN_TOOL", flush=True)
        while True:  # the parent SIGKILLs us here
            await asyncio.sleep(0.05)
    return "tool-ok"


async def main() -> None:
    set_tracing_disabled(True)
    client = None
    if KIND == "sqlite":
        session = SQLiteSession("conv", os.path.join(DIR, "agents.db"))
    else:
        if KIND == "cairn-embedded":
            client = cairn.connect(DIR, embedded=True)
        else:
            client = cairn.connect(DIR, daemon_args=["--idle-timeout=20s"])
        session = CairnSession("conv", client)
    try:
        if PHASE == "resume":
            print(json.dumps(await session.get_items()), flush=True)
        agent = Agent(name="tools", instructions="use the tool", model=ToolThenAnswerModel(), tools=[slow_tool])
        text = {"first": "hello", "run": "start", "resume": "continue"}[PHASE]
        r = await Runner.run(agent, text, session=session)
        print(r.final_output, flush=True)
        if PHASE == "resume":
            print(json.dumps(await session.get_items()), flush=True)
    finally:
        if client is not None:
            client.close()
        if isinstance(session, SQLiteSession):
            session.close()


asyncio.run(main())
