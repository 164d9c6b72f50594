"""The PydanticAI adapter: strict tools, and reminders as new runs on the same history."""

from __future__ import annotations

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

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.integrations.pydantic_ai import schedule_tools
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.clock import FakeClock
from tests.integrations.examples import FOLLOW_UP, load


async def test_the_model_sees_strict_tools_without_defaults() -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    seen: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart("ok")])

    agent = Agent(FunctionModel(model), tools=schedule_tools(ScheduleTools(schedule)))
    await agent.run("hello")
    tools = {tool.name: tool for tool in seen[0].function_tools}
    assert list(tools) == [
        "schedule_create",
        "schedule_list",
        "schedule_delete",
        "schedule_update",
    ]
    create = tools["schedule_create"]
    assert create.strict is True
    assert "default" not in str(create.parameters_json_schema)
    assert create.parameters_json_schema["required"] == [
        "prompt",
        "after_seconds",
        "at",
        "every_seconds",
        "daily_at",
        "calendar",
        "ends",
        "max_lateness_seconds",
    ]


async def test_the_example_delivers_the_reminder_into_the_same_history() -> None:
    conversation = await load("pydantic_ai_reminders").main()
    first, reminder = conversation.answers
    assert (first.turn.reminder, first.text) == (False, "I will remind you in a second.")
    assert (reminder.turn.reminder, reminder.text) == (True, "Time to stretch!")
    assert reminder.turn.text.startswith(FOLLOW_UP)
    kinds: list[str] = []
    for message in conversation.history:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                kinds.append("reminder" if FOLLOW_UP in str(part.content) else "prompt")
            elif isinstance(part, ToolCallPart):
                kinds.append(f"call {part.tool_name}")
            elif isinstance(part, ToolReturnPart):
                assert isinstance(part.content, dict)
                kinds.append(f"result ok={part.content['ok']}")
            elif isinstance(part, TextPart):
                kinds.append(f"text {part.content}")
    assert kinds == [
        "prompt",
        "call schedule_create",
        "result ok=True",
        "text I will remind you in a second.",
        "reminder",
        "text Time to stretch!",
    ]
    assert isinstance(conversation.history[-2], ModelRequest)
