"""An OpenAI Agents SDK conversation kept in cairn: kill the process between
or during turns, start it again, and the agent still has the history.

    python agents_resume.py /path/to/workspace "first question"
    python agents_resume.py /path/to/workspace "second question"   # sees both

The model here is a local stand-in that answers with what it was sent, so
the example runs offline; use any SDK model instead (Agent(model=...)).
"""

import asyncio
import sys

from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import cairn
from cairn.agents import CairnSession


class Recap(Model):
    async def get_response(self, system_instructions, input, *args, **kwargs):
        asked = [i["content"] for i in input if isinstance(i, dict) and i.get("role") == "user"]
        text = f"you have asked {len(asked)} question(s): {asked}"
        out = ResponseOutputMessage(id="m", role="assistant", status="completed", type="message",
                                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])])
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


async def main() -> None:
    set_tracing_disabled(True)
    with cairn.connect(sys.argv[1]) as client:
        agent = Agent(name="assistant", model=Recap())
        result = await Runner.run(agent, sys.argv[2], session=CairnSession("chat-1", client))
        print(result.final_output)


asyncio.run(main())
