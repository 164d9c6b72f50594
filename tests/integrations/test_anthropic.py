"""The Anthropic adapter: strict tools, reminders as new turns on the same messages list, and
a failed turn that leaves the conversation valid."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import httpx2
import pytest
from anthropic import AsyncAnthropic

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.integrations.anthropic import AnthropicConversation, schedule_tools
from session_schedule.integrations.common import Answer
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.clock import FakeClock
from tests.integrations.examples import FOLLOW_UP, load

EXAMPLE = load("anthropic_reminders")


async def test_the_tools_are_strict_and_carry_no_default() -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    schedule = LiveSchedule(session, TurnQueue(session, clock=clock), clock=clock)
    tools = schedule_tools(ScheduleTools(schedule))
    assert [tool["name"] for tool in tools] == [
        "schedule_create",
        "schedule_list",
        "schedule_delete",
        "schedule_update",
    ]
    assert all(tool.get("strict") is True for tool in tools)
    assert "default" not in json.dumps(tools)
    assert tools[0]["input_schema"]["required"] == [
        "prompt",
        "after_seconds",
        "at",
        "every_seconds",
        "daily_at",
        "calendar",
        "ends",
        "max_lateness_seconds",
    ]


async def test_a_reminder_is_a_new_turn_on_the_same_messages_in_virtual_time() -> None:
    requests: list[dict[str, object]] = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        requests.append(body)
        if body["messages"][-1]["content"] == "fail, please":
            return httpx2.Response(
                400,
                json={"type": "error", "error": {"type": "invalid_request_error", "message": "no"}},
            )
        response: httpx2.Response = EXAMPLE.scripted_endpoint(request)
        return response

    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    client = AsyncAnthropic(
        api_key="offline",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)),
    )
    conversation = AnthropicConversation(
        turns, client, ScheduleTools(schedule), model="m", system="be brief"
    )
    async with client, schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        conversation.submit("fail, please")
        await turns.wait_idle()
        after_failure = conversation.messages
        await schedule.settled()
        clock.advance(1)
        answers = await asyncio.wait_for(conversation.wait_answers(2), 5)
    assert [answer.text for answer in answers] == [
        "I will remind you in a second.",
        "Time to stretch!",
    ]
    assert len(after_failure) == 4  # the failed turn left nothing behind
    assert all(request["tools"] == schedule_tools(ScheduleTools(schedule)) for request in requests)
    # Every request tells the model the time, after the host's system text.
    assert all(
        str(request["system"]).startswith("be brief\n\nCurrent time: 2026-11-29T20:00:0")
        for request in requests
    )
    assert requests[-1]["system"] == "be brief\n\nCurrent time: 2026-11-29T20:00:01.000Z (UTC)."
    reminder_request = requests[-1]["messages"]
    assert isinstance(reminder_request, list)
    assert reminder_request[:4] == after_failure
    assert reminder_request[4]["content"].startswith(FOLLOW_UP)


async def test_the_example_delivers_the_reminder_into_the_same_messages() -> None:
    conversation = await EXAMPLE.main()
    first, reminder = conversation.answers
    assert (first.turn.reminder, first.text) == (False, "I will remind you in a second.")
    assert (reminder.turn.reminder, reminder.text) == (True, "Time to stretch!")
    kinds: list[str] = []
    for message in conversation.messages:
        content = message["content"]
        if isinstance(content, str):
            kinds.append("reminder" if content.startswith(FOLLOW_UP) else "prompt")
            continue
        for block in content:
            if block["type"] == "tool_use":
                kinds.append(f"call {block['name']}")
            elif block["type"] == "tool_result":
                kinds.append(f"result ok={json.loads(block['content'])['ok']}")
            else:
                kinds.append(f"{message['role']} {block['text']}")
    assert kinds == [
        "prompt",
        "call schedule_create",
        "result ok=True",
        "assistant I will remind you in a second.",
        "reminder",
        "assistant Time to stretch!",
    ]


async def test_a_turn_that_keeps_calling_tools_fails_and_leaves_no_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def endpoint(request: httpx2.Request) -> httpx2.Response:
        call = {"type": "tool_use", "id": "toolu_1", "name": "schedule_list", "input": {}}
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m"}
        usage = {"input_tokens": 1, "output_tokens": 1}
        body = {**message, "content": [call], "stop_reason": "tool_use", "usage": usage}
        return httpx2.Response(200, json=body)

    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    client = AsyncAnthropic(
        api_key="offline", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint))
    )
    conversation = AnthropicConversation(
        turns, client, ScheduleTools(schedule), model="m", max_tool_rounds=2
    )
    async with client, schedule, turns:
        conversation.submit("list them forever")
        await turns.wait_idle()
    assert conversation.messages == []
    assert conversation.answers == ()
    assert "the model was still calling tools after 2 requests" in caplog.text


HOSTILE_INPUTS = {
    "lone surrogate": (
        b'{"prompt": "\\ud800 stretch", "after_seconds": 60, "at": null, "every_seconds": null, '
        b'"daily_at": null}',
        "invalid_prompt",
    ),
    "10,000 deep": (b'{"prompt": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "invalid_selector"),
    "5,000 digits": (
        b'{"prompt": "stretch", "after_seconds": ' + b"9" * 5_000 + b"}",
        "invalid_selector",
    ),
    "1e400": (b'{"prompt": "stretch", "after_seconds": 1e400}', "invalid_selector"),
    "NaN": (b'{"prompt": "stretch", "after_seconds": NaN}', "invalid_selector"),
    "not an object": (b'"stretch in a minute"', "invalid_selector"),
}


@pytest.mark.parametrize("kind", list(HOSTILE_INPUTS))
async def test_hostile_tool_use_input_gets_the_tools_stable_error(kind: str) -> None:
    """Such input once made the SDK's JSON reader raise, or the next request fail to encode:
    the turn failed and the model never learnt why."""
    tool_input, code = HOSTILE_INPUTS[kind]
    answers, requests = (turn := await _one_tool_use(tool_input)).answers, turn.requests
    assert [answer.text for answer in answers] == ["sorry"]
    assert len(requests) == 2
    result = requests[1]["messages"][-1]["content"][0]  # type: ignore[index]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "tu_1"
    assert result["is_error"] is True
    assert json.loads(result["content"])["error"]["code"] == code


async def test_a_refused_tool_call_goes_back_flagged_is_error_with_the_same_text() -> None:
    """The Messages API's ``is_error`` was never set: the refusal read as a success."""
    turn = await _one_tool_use(b'{"prompt": "", "after_seconds": 60}')
    assert turn.requests[1]["messages"][-1] == {  # type: ignore[index]
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "tu_1",
                "content": '{"ok":false,"error":{"code":"invalid_prompt","message":"`prompt` is '
                'empty; say what the reminder should prompt you to do."}}',
                "is_error": True,
            }
        ],
    }


async def test_a_tool_call_that_succeeds_goes_back_without_is_error() -> None:
    turn = await _one_tool_use(b'{"prompt": "stretch", "after_seconds": 60}')
    result = turn.requests[1]["messages"][-1]["content"][0]  # type: ignore[index]
    assert sorted(result) == ["content", "tool_use_id", "type"]
    assert json.loads(result["content"])["ok"] is True


NUMBERS = {
    "1e400": b"1e400",
    "-1e400": b"-1e400",
    "NaN": b"NaN",
    "-Infinity": b"-Infinity",
    "5,000 digits": b"9" * 5_000,
    "2,000 digits": b"9" * 2_000,
}


@pytest.mark.parametrize("kind", list(NUMBERS))
async def test_a_number_no_request_can_carry_gets_the_error_call_gives_for_its_text(
    kind: str,
) -> None:
    """``1e400`` and ``NaN`` once failed the turn (the next request could not encode them),
    and a 5,000-digit number came back ``invalid_rule`` with a shortened text where ``call``
    answers ``invalid_selector``: the tool now reads the input as the model wrote it."""
    tool_input = b'{"prompt": "stretch", "after_seconds": ' + NUMBERS[kind] + b"}"
    turn = await _one_tool_use(tool_input)
    assert [answer.text for answer in turn.answers] == ["sorry"]
    result = turn.requests[1]["messages"][-1]["content"][0]  # type: ignore[index]
    assert json.loads(result["content"]) == turn.direct
    assert turn.direct["ok"] is False
    echoed = turn.requests[1]["messages"][-2]["content"][0]["input"]["after_seconds"]  # type: ignore[index]
    assert isinstance(echoed, str)  # the model sees what it wrote, as text
    assert turn.active == []


async def test_an_out_of_range_number_is_refused_with_the_whole_message() -> None:
    turn = await _one_tool_use(b'{"prompt": "stretch", "after_seconds": 1e400}')
    requests = turn.requests
    assert [answer.text for answer in turn.answers] == ["sorry"]
    result = requests[1]["messages"][-1]["content"][0]  # type: ignore[index]
    assert json.loads(result["content"]) == {
        "ok": False,
        "error": {
            "code": "invalid_selector",
            "message": "a number in the arguments is too large to represent; send numbers such "
            'as {"prompt": "...", "after_seconds": 600}.',
        },
    }
    assert requests[1]["messages"][-2]["content"][0]["input"] == {  # type: ignore[index]
        "prompt": "stretch",
        "after_seconds": "1e400",
    }


async def test_a_tool_use_id_with_a_lone_surrogate_gets_its_result_back() -> None:
    """The id once made the next request fail to encode after the tool had run: the
    reminder was set and the model never learnt it."""
    turn = await _one_tool_use(
        b'{"prompt": "stretch", "after_seconds": 60}', tool_id=b'"tu_\\ud800"'
    )
    requests = turn.requests
    assert [answer.text for answer in turn.answers] == ["sorry"]
    use = requests[1]["messages"][-2]["content"][0]  # type: ignore[index]
    result = requests[1]["messages"][-1]["content"][0]  # type: ignore[index]
    assert use["id"] == result["tool_use_id"] == "tu_\\ud800"
    assert json.loads(result["content"])["schedule"]["id"] == "sch_1"
    assert turn.active == ["sch_1"]


@dataclasses.dataclass(frozen=True)
class OneToolUse:
    answers: tuple[Answer, ...]
    requests: list[dict[str, object]]
    """The requests' bodies, decoded."""
    active: list[object]
    """The ids of the active reminders after the turn."""
    direct: dict[str, object]
    """What ``ScheduleTools.call`` answers for the same input as JSON text, after the turn."""


async def _one_tool_use(tool_input: bytes, *, tool_id: bytes = b'"tu_1"') -> OneToolUse:
    """One turn in which the model calls ``schedule_create`` with ``tool_input`` (its JSON as
    the API would send it), then answers "sorry"."""
    requests: list[dict[str, object]] = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        requests.append(json.loads(request.content))
        usage = b'"usage": {"input_tokens": 1, "output_tokens": 1}'
        if len(requests) == 1:
            body = (
                b'{"id": "m1", "type": "message", "role": "assistant", "model": "m", '
                b'"stop_reason": "tool_use", "stop_sequence": null, ' + usage + b', "content": '
                b'[{"type": "tool_use", "id": ' + tool_id + b', "name": "schedule_create", '
                b'"input": ' + tool_input + b"}]}"
            )
        else:
            body = (
                b'{"id": "m2", "type": "message", "role": "assistant", "model": "m", '
                b'"stop_reason": "end_turn", "stop_sequence": null, ' + usage + b', "content": '
                b'[{"type": "text", "text": "sorry"}]}'
            )
        return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    client = AsyncAnthropic(
        api_key="offline",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)),
    )
    tools = ScheduleTools(schedule)
    conversation = AnthropicConversation(turns, client, tools, model="m")
    async with client, schedule, turns:
        conversation.submit("Remind me to stretch.")
        answers = await asyncio.wait_for(conversation.wait_answers(1), 5)
        listed = await tools.call("schedule_list", {})
        direct = await tools.call("schedule_create", tool_input)
    active = [view["id"] for view in listed["schedules"]]  # type: ignore[attr-defined]
    return OneToolUse(answers=answers, requests=requests, active=active, direct=direct)
