"""PydanticAI, durable: the reminder and the conversation both live in a JSONL session, so a
second run of the program delivers the reminder to the same conversation.

The first run asks for a reminder and introduces the person; the second run (a restart) opens
the same session, the reminder comes due, and the model, which has the earlier messages again,
answers by name. The message history is kept in the session's log, as ``framework/messages``
entries of ``ModelMessagesTypeAdapter`` JSON (``durable=True``), beside the reminders, with the
same barrier.

Runs offline: a ``FunctionModel`` plays the model.
``python examples/pydantic_ai_durable.py [DIRECTORY]``, twice.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from session_schedule import (
    Clock,
    JsonlSessionStore,
    LiveSchedule,
    ScheduleTools,
    SystemClock,
    TurnQueue,
)
from session_schedule.integrations.pydantic_ai import PydanticAIConversation, schedule_tools

FOLLOW_UP = "[session-schedule] Reminder follow-up"
NAME = "My name is "
CREATE = {
    "prompt": "Tell the user to stretch.",
    "after_seconds": 1,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


def scripted_model(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    """Sets a reminder when asked, greets the person, and acts on the reminder by the name the
    conversation holds."""
    said = [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    name = next((text[len(NAME) :].rstrip(".") for text in said if text.startswith(NAME)), "you")
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        return ModelResponse(parts=[TextPart("I will remind you in a second.")])
    if said[-1].startswith(FOLLOW_UP):
        return ModelResponse(parts=[TextPart(f"Time to stretch, {name}!")])
    if said[-1].startswith(NAME):
        return ModelResponse(parts=[TextPart(f"Nice to meet you, {name}.")])
    return ModelResponse(parts=[ToolCallPart("schedule_create", CREATE)])


async def main(directory: Path, clock: Clock | None = None) -> PydanticAIConversation:
    clock = clock or SystemClock()
    store = JsonlSessionStore(directory)
    earlier = await store.list()  # the session of a first run, if there was one
    if earlier:
        session = await store.open(earlier[0].id)
    else:
        session = await store.create(now=clock.now())
    async with session:
        turns = TurnQueue(session, clock=clock)  # a restart resumes any unfinished turn
        schedule = LiveSchedule(session, turns, clock=clock)
        tools = ScheduleTools(schedule)
        agent = Agent(FunctionModel(scripted_model), tools=schedule_tools(tools))
        conversation = PydanticAIConversation(turns, agent, durable=True)  # reads the history
        async with schedule, turns:
            if earlier:  # a restart: wait for what is still to come
                _now, reminders = await schedule.active()
                expected = len(turns.pending) + len(reminders)
            else:
                conversation.submit("Remind me to stretch in a second.")
                conversation.submit("My name is Ada.")
                expected = 2
            answers = await asyncio.wait_for(conversation.wait_answers(expected), timeout=30)
    if not answers:
        print("nothing more is due: remove", directory, "to start again")
    for answer in answers:
        print("reminder" if answer.turn.reminder else "prompt", "->", answer.text)
    return conversation


if __name__ == "__main__":
    default = Path(tempfile.gettempdir()) / "session-schedule-pydantic-ai-durable"
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
