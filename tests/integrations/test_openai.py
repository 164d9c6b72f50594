"""The OpenAI Chat Completions adapter: strict tools, reminders as new turns on the same
messages list, and a failed turn that leaves the conversation valid."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest
from openai import AsyncOpenAI

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.integrations.openai import OpenAIConversation, schedule_tools
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.clock import FakeClock
from tests.integrations.examples import FOLLOW_UP, load

EXAMPLE = load("openai_reminders")


async def test_the_tools_are_strict_carry_no_default_and_match_the_catalog_adapter() -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    schedule = LiveSchedule(session, TurnQueue(session, clock=clock), clock=clock)
    tools = schedule_tools(ScheduleTools(schedule))
    assert tools == ScheduleTools(schedule).openai()
    assert [tool["function"]["name"] for tool in tools] == [
        "schedule_create",
        "schedule_list",
        "schedule_delete",
        "schedule_update",
    ]
    assert all(tool["function"].get("strict") is True for tool in tools)
    assert "default" not in json.dumps(tools)


async def test_a_reminder_is_a_new_turn_on_the_same_messages_in_virtual_time() -> None:
    requests: list[dict[str, object]] = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        requests.append(body)
        if body["messages"][-1]["content"] == "fail, please":
            return httpx2.Response(400, json={"error": {"message": "no", "type": "invalid"}})
        response: httpx2.Response = EXAMPLE.scripted_endpoint(request)
        return response

    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    client = AsyncOpenAI(
        api_key="offline",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)),
    )
    system = {"role": "system", "content": "be brief"}
    conversation = OpenAIConversation(
        turns,
        client,
        ScheduleTools(schedule),
        model="m",
        messages=[{"role": "system", "content": "be brief"}],
        time_zone="Europe/Paris",
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
    assert len(after_failure) == 5  # the system message, one exchange; the failed turn is gone
    assert all(request["tools"] == schedule_tools(ScheduleTools(schedule)) for request in requests)
    reminder_request = requests[-1]["messages"]
    assert isinstance(reminder_request, list)
    assert reminder_request[0] == system
    # Every request tells the model the time and the person's zone, after the system message;
    # the conversation does not keep it.
    assert all(request["messages"][1]["role"] == "system" for request in requests)  # type: ignore[index]
    context = reminder_request.pop(1)
    assert context["role"] == "system"
    assert context["content"].startswith("Current time: 2026-11-29T20:00:01.000Z (UTC).\n")
    assert "the user's time zone is Europe/Paris" in context["content"]
    assert all(message["role"] != "system" for message in after_failure[1:])
    assert reminder_request[:5] == after_failure
    assert reminder_request[5]["content"].startswith(FOLLOW_UP)


async def test_the_example_delivers_the_reminder_into_the_same_messages() -> None:
    conversation = await EXAMPLE.main()
    first, reminder = conversation.answers
    assert (first.turn.reminder, first.text) == (False, "I will remind you in a second.")
    assert (reminder.turn.reminder, reminder.text) == (True, "Time to stretch!")
    kinds: list[str] = []
    for message in conversation.messages:
        if message["role"] == "user":
            content = message["content"]
            assert isinstance(content, str)
            kinds.append("reminder" if content.startswith(FOLLOW_UP) else "prompt")
        elif message["role"] == "tool":
            content = message["content"]
            assert isinstance(content, str)
            kinds.append(f"result ok={json.loads(content)['ok']}")
        else:
            assert message["role"] == "assistant"
            kinds.extend(
                f"call {call['function']['name']}" for call in message.get("tool_calls", ())
            )
            if message.get("content"):
                kinds.append(f"text {message.get('content')}")
    assert kinds == [
        "prompt",
        "call schedule_create",
        "result ok=True",
        "text I will remind you in a second.",
        "reminder",
        "text Time to stretch!",
    ]


async def test_a_turn_that_keeps_calling_tools_fails_and_leaves_no_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def endpoint(request: httpx2.Request) -> httpx2.Response:
        function = {"name": "schedule_list", "arguments": "{}"}
        call = {"id": "call_1", "type": "function", "function": function}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
        return httpx2.Response(200, json={**body, "choices": [choice]})

    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    client = AsyncOpenAI(
        api_key="offline", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint))
    )
    conversation = OpenAIConversation(
        turns, client, ScheduleTools(schedule), model="m", max_tool_rounds=2
    )
    async with client, schedule, turns:
        conversation.submit("list them forever")
        await turns.wait_idle()
    assert conversation.messages == []
    assert conversation.answers == ()
    assert "the model was still calling tools after 2 requests" in caplog.text


LONE_SURROGATES = {
    "in the call id": ('{"prompt": "stretch", "after_seconds": 60}', "call_\ud800"),
    "in the arguments": ('{"prompt": "\ud800", "after_seconds": 60}', "call_1"),
}


@pytest.mark.parametrize("kind", list(LONE_SURROGATES))
async def test_a_lone_surrogate_from_the_model_still_gets_the_tools_result_back(
    kind: str,
) -> None:
    """A lone surrogate in a call's id or arguments once made the next request fail to encode
    after the tool had run: the reminder was set, the turn failed and the model never learnt
    either. The conversation keeps the call with the surrogate escaped, and the result refers
    to it."""
    arguments, call_id = LONE_SURROGATES[kind]
    requests: list[dict[str, object]] = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        requests.append(json.loads(request.content))
        if len(requests) == 1:
            function = {"name": "schedule_create", "arguments": arguments}
            call = {"id": call_id, "type": "function", "function": function}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        else:
            message = {"role": "assistant", "content": "done"}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
        # ensure_ascii: the surrogate travels as the JSON escape a model's output holds.
        content = json.dumps({**body, "choices": [choice]}, ensure_ascii=True).encode()
        return httpx2.Response(200, content=content, headers={"content-type": "application/json"})

    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    client = AsyncOpenAI(
        api_key="offline",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)),
    )
    tools = ScheduleTools(schedule)
    conversation = OpenAIConversation(turns, client, tools, model="m")
    async with client, schedule, turns:
        conversation.submit("Remind me to stretch.")
        answers = await asyncio.wait_for(conversation.wait_answers(1), 5)
        listed = await tools.call("schedule_list", {})
    assert [answer.text for answer in answers] == ["done"]
    assert len(requests) == 2
    messages = requests[1]["messages"]
    assert isinstance(messages, list)
    sent_call, sent_result = messages[-2:]
    sent_id = sent_call["tool_calls"][0]["id"]
    assert sent_result["tool_call_id"] == sent_id
    result = json.loads(sent_result["content"])
    active = [view["id"] for view in listed["schedules"]]  # type: ignore[attr-defined]
    if kind == "in the call id":
        assert sent_id == "call_\\ud800"
        assert result["schedule"]["id"] == "sch_1"
        assert active == ["sch_1"]
    else:
        assert sent_call["tool_calls"][0]["function"]["arguments"] == (
            '{"prompt": "\\ud800", "after_seconds": 60}'
        )
        assert result == {
            "ok": False,
            "error": {
                "code": "invalid_prompt",
                "message": "`prompt` contains the lone surrogate U+D800 at index 0, half of a "
                "character that cannot be encoded; send the whole character or remove it.",
            },
        }
        assert active == []
