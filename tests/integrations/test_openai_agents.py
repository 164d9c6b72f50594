"""The OpenAI Agents SDK adapter: strict function tools, and reminders as new runs on the same
Session."""

from __future__ import annotations

import json

from agents import FunctionTool, RunContextWrapper

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.integrations.openai_agents import schedule_tools
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.clock import FakeClock
from tests.integrations.examples import FOLLOW_UP, load


async def test_the_tools_are_strict_and_answer_a_mistake_with_a_result() -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    built = schedule_tools(ScheduleTools(schedule))
    tools = {tool.name: tool for tool in built if isinstance(tool, FunctionTool)}
    assert len(tools) == len(built)
    assert list(tools) == [
        "schedule_create",
        "schedule_list",
        "schedule_delete",
        "schedule_update",
    ]
    create = tools["schedule_create"]
    assert create.strict_json_schema is True
    assert "default" not in json.dumps(create.params_json_schema)
    assert create.params_json_schema["required"] == [
        "prompt",
        "after_seconds",
        "at",
        "every_seconds",
        "daily_at",
        "calendar",
        "ends",
        "max_lateness_seconds",
    ]
    async with schedule:
        made = await create.on_invoke_tool(
            RunContextWrapper(context=None),  # type: ignore[arg-type]
            '{"prompt": "stretch", "after_seconds": 90, "at": null, "every_seconds": null}',
        )
        refused = await tools["schedule_delete"].on_invoke_tool(
            RunContextWrapper(context=None),  # type: ignore[arg-type]
            '{"id": 3}',
        )
    assert json.loads(made)["schedule"]["scheduledAt"] == "2026-11-29T20:01:30.000Z"
    assert json.loads(refused)["ok"] is False


async def test_the_example_delivers_the_reminder_into_the_same_session() -> None:
    conversation = await load("openai_agents_reminders").main()
    first, reminder = conversation.answers
    assert (first.turn.reminder, first.text) == (False, "I will remind you in a second.")
    assert (reminder.turn.reminder, reminder.text) == (True, "Time to stretch!")
    kinds: list[str] = []
    for item in await conversation.session.get_items():
        entry = dict(item)
        if entry.get("role") == "user":
            content = entry["content"]
            assert isinstance(content, str)
            kinds.append("reminder" if content.startswith(FOLLOW_UP) else "prompt")
        elif entry.get("type") == "function_call":
            kinds.append(f"call {entry['name']}")
        elif entry.get("type") == "function_call_output":
            output = entry["output"]
            assert isinstance(output, str)
            kinds.append(f"result ok={json.loads(output)['ok']}")
        else:
            assert entry.get("role") == "assistant"
            content = entry["content"]
            assert isinstance(content, list)
            kinds.append(f"text {content[0]['text']}")
    assert kinds == [
        "prompt",
        "call schedule_create",
        "result ok=True",
        "text I will remind you in a second.",
        "reminder",
        "text Time to stretch!",
    ]
