"""The OpenAI Agents SDK, durable: the reminder lives in a JSONL session and the conversation in
the SDK's own ``SQLiteSession`` file beside it, so a second run of the program delivers the
reminder to the same conversation.

The first run asks for a reminder and introduces the person; the second run (a restart) opens
the same session, the reminder comes due, and the model, which has the earlier items again,
answers by name.

Runs offline: a scripted ``Model`` plays the model.
``python examples/openai_agents_durable.py [DIRECTORY]``, twice.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from agents import (
    Agent,
    AgentOutputSchemaBase,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    SQLiteSession,
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

from session_schedule import (
    Clock,
    JsonlSessionStore,
    LiveSchedule,
    ScheduleTools,
    SystemClock,
    TurnQueue,
)
from session_schedule.integrations.openai_agents import AgentsConversation, schedule_tools

FOLLOW_UP = "[session-schedule] Reminder follow-up"
NAME = "My name is "
CREATE = {
    "prompt": "Tell the user to stretch.",
    "after_seconds": 1,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


class ScriptedModel(Model):
    """Sets a reminder when asked, greets the person, and acts on the reminder by the name the
    conversation holds."""

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
        items: list[object] = [input] if isinstance(input, str) else list(input)
        said = [text for text in map(_user_text, items) if text is not None]
        name = next(
            (text[len(NAME) :].rstrip(".") for text in said if text.startswith(NAME)), "you"
        )
        item = items[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            return _answer("I will remind you in a second.")
        content = item.get("content") if isinstance(item, dict) else item
        if isinstance(content, str) and content.startswith(FOLLOW_UP):
            return _answer(f"Time to stretch, {name}!")
        if isinstance(content, str) and content.startswith(NAME):
            return _answer(f"Nice to meet you, {name}.")
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


def _user_text(item: object) -> str | None:
    """What the person (or a reminder) said in ``item``, if it is a user message."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and item.get("role") == "user":
        content = item.get("content")
        return content if isinstance(content, str) else None
    return None


def _answer(text: str) -> ModelResponse:
    content = ResponseOutputText(type="output_text", text=text, annotations=[])
    message = ResponseOutputMessage(
        type="message", id="msg_1", role="assistant", status="completed", content=[content]
    )
    return ModelResponse(output=[message], usage=Usage(), response_id=None)


async def main(directory: Path, clock: Clock | None = None) -> AgentsConversation:
    clock = clock or SystemClock()
    store = JsonlSessionStore(directory)
    earlier = await store.list()  # the session of a first run, if there was one
    if earlier:
        session = await store.open(earlier[0].id)
    else:
        session = await store.create(now=clock.now())
    # The SDK's own history, in a SQLite file beside the reminders, under the session's id.
    history = SQLiteSession(session.id, directory / "conversations.sqlite")
    async with session:
        turns = TurnQueue(session, clock=clock)  # a restart resumes any unfinished turn
        schedule = LiveSchedule(session, turns, clock=clock)
        tools = ScheduleTools(schedule)
        agent: Agent[None] = Agent(
            name="assistant", model=ScriptedModel(), tools=schedule_tools(tools)
        )
        conversation = AgentsConversation(
            turns, agent, session=history, run_config=RunConfig(tracing_disabled=True)
        )
        async with schedule, turns:
            if earlier:  # a restart: wait for what is still to come
                _now, reminders = await schedule.active()
                expected = len(turns.pending) + len(reminders)
            else:
                conversation.submit("Remind me to stretch in a second.")
                conversation.submit("My name is Ada.")
                expected = 2
            answers = await asyncio.wait_for(conversation.wait_answers(expected), timeout=30)
    history.close()
    if not answers:
        print("nothing more is due: remove", directory, "to start again")
    for answer in answers:
        print("reminder" if answer.turn.reminder else "prompt", "->", answer.text)
    return conversation


if __name__ == "__main__":
    default = Path(tempfile.gettempdir()) / "session-schedule-openai-agents-durable"
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
