"""The PydanticAI adapter: strict tools, and reminders as new runs on the same history."""

from __future__ import annotations

import json

import pytest
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
                # The result as JSON text, hidden characters escaped, as every adapter sends it.
                assert isinstance(part.content, str)
                kinds.append(f"result ok={json.loads(part.content)['ok']}")
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


HOSTILE = {
    "10,000 deep": (
        '{"prompt": ' + "[" * 10_000 + "]" * 10_000 + "}",
        '{"ok":false,"error":{"code":"invalid_selector","message":"the arguments nest arrays or '
        'objects more than 8 levels deep; send a flat JSON object such as {\\"prompt\\": '
        '\\"...\\", \\"after_seconds\\": 600}."}}',
    ),
    "5,000 digits": (
        '{"prompt": "stretch", "after_seconds": ' + "9" * 5_000 + "}",
        '{"ok":false,"error":{"code":"invalid_selector","message":"a number in the arguments is '
        'too large to represent; send numbers such as {\\"prompt\\": \\"...\\", '
        '\\"after_seconds\\": 600}."}}',
    ),
    "a lone surrogate": (
        '{"prompt": "a\\ud800b", "after_seconds": 60}',
        '{"ok":false,"error":{"code":"invalid_prompt","message":"`prompt` contains the lone '
        "surrogate U+D800 at index 1, half of a character that cannot be encoded; send the whole "
        'character or remove it."}}',
    ),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
async def test_hostile_arguments_get_the_tools_stable_error(kind: str) -> None:
    arguments, expected = HOSTILE[kind]
    part = await _answer(arguments)
    assert (part.outcome, part.content) == ("failed", expected)


async def test_a_refused_call_is_a_failed_tool_return_with_the_same_text() -> None:
    """It was ``outcome="success"``: PydanticAI could not send the refusal through a
    provider's error flag. A provider without one gets PydanticAI's ``{"error": ...}`` form."""
    text = (
        '{"ok":false,"error":{"code":"invalid_prompt","message":"`prompt` is empty; say what '
        'the reminder should prompt you to do."}}'
    )
    part = await _answer('{"prompt": "", "after_seconds": 60}')
    assert (part.outcome, part.content) == ("failed", text)
    assert part.model_response_str(wrap_if_error=False) == text
    assert json.loads(part.model_response_str()) == {"error": text}
    made = await _answer('{"prompt": "stretch", "after_seconds": 60}')
    assert made.outcome == "success"
    assert isinstance(made.content, str)
    assert json.loads(made.content)["ok"] is True


async def test_a_result_escapes_hidden_characters_as_the_frame_does() -> None:
    part = await _answer(
        '{"prompt": "buy milk\U000e0041\u202e", "after_seconds": 60, "at": null, '
        '"every_seconds": null, "daily_at": null, "calendar": null, "ends": null, '
        '"max_lateness_seconds": null}'
    )
    answer = part.model_response_str()
    assert "\U000e0041" not in answer
    assert "\u202e" not in answer
    assert '"prompt":"buy milk\\udb40\\udc41\\u202e"' in answer


async def _answer(arguments: str) -> ToolReturnPart:
    """The tool return the model gets back after calling ``schedule_create`` with
    ``arguments`` (the run goes on to the model's answer)."""
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    schedule = LiveSchedule(session, TurnQueue(session, clock=clock), clock=clock)
    answers: list[ToolReturnPart] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("schedule_create", arguments, "call_1")])
        part = messages[-1].parts[0]
        assert isinstance(part, ToolReturnPart)
        answers.append(part)
        return ModelResponse(parts=[TextPart("ok")])

    agent = Agent(FunctionModel(model), tools=schedule_tools(ScheduleTools(schedule)))
    result = await agent.run("hello")
    await session.close()
    assert result.output == "ok"
    return answers[0]
