"""Runs one Runner.run turn of an agent with a local stub model over a
CairnSession, in its own process; prints the final output. The stub answers
with every user message it was given, so the output shows the history the
session fed it. argv: workspace mode(embedded|daemon) session_id text."""

from __future__ import annotations

import asyncio
import os
import sys

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

from agents import Agent, Runner, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import ResponseOutputMessage, ResponseOutputText  # noqa: E402

import cairn  # noqa: E402
from cairn.agents import CairnSession  # noqa: E402


class EchoHistoryModel(Model):
    async def get_response(self, system_instructions, input, *args, **kwargs):  # type: ignore[no-untyped-def]
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        users = [i["content"] for i in items if isinstance(i, dict) and i.get("role") == "user"]
        text = "seen: " + " | ".join(str(u) for u in users)
        msg = ResponseOutputMessage(
            id=f"msg-{len(users)}",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
            role="assistant",
            status="completed",
            type="message",
        )
        return ModelResponse(output=[msg], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise NotImplementedError


async def main() -> None:
    ws, mode, sid, text = sys.argv[1:5]
    set_tracing_disabled(True)
    c = cairn.connect(ws, embedded=True) if mode == "embedded" else cairn.connect(ws, daemon_args=["--idle-timeout=20s"])
    try:
        agent = Agent(name="echo", instructions="echo", model=EchoHistoryModel())
        r = await Runner.run(agent, text, session=CairnSession(sid, c))
        print(r.final_output, flush=True)
    finally:
        c.close()


asyncio.run(main())
