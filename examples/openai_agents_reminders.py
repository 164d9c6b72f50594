"""The OpenAI Agents SDK: a reminder set through the agent's tool call comes back, a second
later, as a new run on the same Session, and the model's answer is stored in it.

Runs offline: a scripted ``Model`` plays the model. ``python examples/openai_agents_reminders.py``
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from agents import (
    Agent,
    AgentOutputSchemaBase,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Tool,
    TResponseInputItem,
    Usage,
)
from agents.items import TResponseStreamEvent
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponsePromptParam,
)

from session_schedule import LiveSchedule, MemorySessionStore, ScheduleTools, SystemClock, TurnQueue
from session_schedule.integrations.openai_agents import AgentsConversation, schedule_tools

FOLLOW_UP = "[session-schedule] Reminder follow-up"
CREATE = {
    "prompt": "Tell the user to stretch.",
    "after_seconds": 1,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


class ScriptedModel(Model):
    """Sets a reminder when asked; acts on it when it comes back."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],  # noqa: A002 (the interface's name)
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        item: object = input if isinstance(input, str) else input[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            return _answer("I will remind you in a second.")
        content = item.get("content") if isinstance(item, dict) else item
        if isinstance(content, str) and content.startswith(FOLLOW_UP):
            return _answer("Time to stretch!")
        call = ResponseFunctionToolCall(
            type="function_call",
            call_id="call_1",
            name="schedule_create",
            arguments=json.dumps(CREATE),
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],  # noqa: A002 (the interface's name)
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the scripted model answers Runner.run, not run_streamed")


def _answer(text: str) -> ModelResponse:
    content = ResponseOutputText(type="output_text", text=text, annotations=[])
    message = ResponseOutputMessage(
        type="message", id="msg_1", role="assistant", status="completed", content=[content]
    )
    return ModelResponse(output=[message], usage=Usage(), response_id=None)


async def main() -> AgentsConversation:
    session = await MemorySessionStore().create(now=SystemClock().now())
    turns = TurnQueue(session)
    schedule = LiveSchedule(session, turns)
    tools = ScheduleTools(schedule)
    agent: Agent[None] = Agent(name="assistant", model=ScriptedModel(), tools=schedule_tools(tools))
    conversation = AgentsConversation(turns, agent, run_config=RunConfig(tracing_disabled=True))
    async with schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        answers = await asyncio.wait_for(conversation.wait_answers(2), timeout=30)
    for answer in answers:
        print("reminder" if answer.turn.reminder else "prompt", "->", answer.text)
    return conversation


if __name__ == "__main__":
    asyncio.run(main())
