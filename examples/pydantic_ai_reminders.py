"""PydanticAI: a reminder set through the agent's tool call comes back, a second later, as a new
run on the same conversation, and the model's answer joins the message history.

Runs offline: a ``FunctionModel`` plays the model. ``python examples/pydantic_ai_reminders.py``
"""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from session_schedule import LiveSchedule, MemorySessionStore, ScheduleTools, SystemClock, TurnQueue
from session_schedule.integrations.pydantic_ai import PydanticAIConversation, schedule_tools

FOLLOW_UP = "[session-schedule] Reminder follow-up"
CREATE = {
    "prompt": "Tell the user to stretch.",
    "after_seconds": 1,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


def scripted_model(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    """Sets a reminder when asked; acts on it when it comes back."""
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        return ModelResponse(parts=[TextPart("I will remind you in a second.")])
    if FOLLOW_UP in str(getattr(last, "content", "")):
        return ModelResponse(parts=[TextPart("Time to stretch!")])
    return ModelResponse(parts=[ToolCallPart("schedule_create", CREATE)])


async def main() -> PydanticAIConversation:
    session = await MemorySessionStore().create(now=SystemClock().now())
    turns = TurnQueue(session)
    schedule = LiveSchedule(session, turns)
    tools = ScheduleTools(schedule)
    agent = Agent(FunctionModel(scripted_model), tools=schedule_tools(tools))
    conversation = PydanticAIConversation(turns, agent)  # binds its run_turn to the queue
    async with schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        answers = await asyncio.wait_for(conversation.wait_answers(2), timeout=30)
    for answer in answers:
        print("reminder" if answer.turn.reminder else "prompt", "->", answer.text)
    return conversation


if __name__ == "__main__":
    asyncio.run(main())
