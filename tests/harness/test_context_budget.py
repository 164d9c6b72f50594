"""Each model request is bounded: the system message, the turn being answered, and the newest
earlier messages that fit, never parting a tool call from its results."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest

from session_schedule.harness.agent import MAX_TOOL_ROUNDS, ChatAgent
from session_schedule.harness.chat import live_chat
from session_schedule.harness.model import ChatMessage, ModelError, ModelReply
from session_schedule.harness.transcript import (
    OMITTED_NOTE,
    bounded_context,
    chat_messages,
    summarised_result,
)
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.message import ToolCall
from session_schedule.testing.clock import FakeClock
from tests.harness.test_agent import START, ScriptedModel, create_call

SYSTEM: ChatMessage = {"role": "system", "content": "s" * 100}


def size(messages: Sequence[ChatMessage]) -> int:
    return sum(len(msgspec.json.encode(message).decode()) for message in messages)


def user(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


def assistant(text: str) -> ChatMessage:
    return {"role": "assistant", "content": text}


def calls(*ids: str) -> ChatMessage:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "schedule_list", "arguments": "{}"}}
            for i in ids
        ],
    }


def result(call_id: str, text: str) -> ChatMessage:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


NOTE = user(OMITTED_NOTE)


HISTORY: list[ChatMessage] = [
    user("first " + "x" * 200),
    assistant("a1 " + "x" * 200),
    calls("c1", "c2"),
    result("c1", "r1 " + "x" * 300),
    result("c2", "r2"),
    assistant("after the calls"),
    user("second"),
    assistant("a2"),
]
TURN: list[ChatMessage] = [user("third"), user("and a fourth, sent during the turn")]


def test_a_request_within_the_budget_is_the_whole_transcript() -> None:
    messages = [*HISTORY, *TURN]
    assert bounded_context(SYSTEM, messages, size([SYSTEM, *messages])) == [SYSTEM, *messages]


def test_the_newest_messages_that_fit_are_kept_with_a_note_at_the_cut() -> None:
    messages = [*HISTORY, *TURN]
    kept = HISTORY[5:]
    budget = size([SYSTEM, NOTE, *kept, *TURN])
    assert bounded_context(SYSTEM, messages, budget) == [SYSTEM, NOTE, *kept, *TURN]
    assert bounded_context(SYSTEM, messages, budget - 1) == [
        SYSTEM,
        NOTE,
        *HISTORY[6:],
        *TURN,
    ]


def test_a_tool_call_is_kept_with_all_its_results_or_left_out_with_them() -> None:
    messages = [*HISTORY, *TURN]
    # Room for the second result and everything after it, but not for the call and its first
    # result: the call and both results are left out together.
    budget = size([SYSTEM, NOTE, *HISTORY[4:], *TURN])
    assert bounded_context(SYSTEM, messages, budget) == [SYSTEM, NOTE, *HISTORY[5:], *TURN]
    budget = size([SYSTEM, NOTE, *HISTORY[2:], *TURN])
    assert bounded_context(SYSTEM, messages, budget) == [SYSTEM, NOTE, *HISTORY[2:], *TURN]


def test_the_turn_being_answered_keeps_its_tool_rounds_even_over_the_budget() -> None:
    turn = [*TURN, calls("c3"), result("c3", "y" * 500)]
    request = bounded_context(SYSTEM, [*HISTORY, *turn], 10)
    assert request == [SYSTEM, NOTE, *turn]


def test_a_transcript_without_a_user_message_is_cut_from_the_newest() -> None:
    messages = [assistant("x" * 1000), assistant("y")]
    request = bounded_context(SYSTEM, messages, size([SYSTEM, NOTE, messages[1]]))
    assert request == [SYSTEM, NOTE, messages[1]]


def test_the_budget_must_be_positive() -> None:
    with pytest.raises(ValueError) as raised:
        ChatAgent(None, clock=FakeClock(START), model=None, max_context_chars=0)  # type: ignore[arg-type]
    assert str(raised.value) == "max_context_chars must be positive, not 0"


async def test_a_five_minute_reminder_for_a_day_keeps_every_request_within_the_budget() -> None:
    budget = 6_000
    model = ScriptedModel(
        replies=[
            create_call('{"prompt": "Drink some water.", "every_seconds": 300}'),
            ModelReply(content="I'll remind you every five minutes."),
            *[ModelReply(content=f"Reminder {n}: drink some water.") for n in range(288)],
        ]
    )
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    async with live_chat(session, model=model, clock=clock, max_context_chars=budget) as live:
        live.agent.submit("remind me to drink water every five minutes")
        for _ in range(288):
            await live.agent.wait_idle()
            await live.schedule.settled()
            clock.advance(300)
            await live.schedule.settled()
        await live.agent.wait_idle()
        transcript = live.agent.transcript
    await session.close()
    assert len(model.seen) == 290
    assert len(transcript) == 4 + 2 * 288
    assert max(size(request) for request in model.seen) <= budget
    last = model.seen[-1]
    assert last[0]["role"] == "system"
    assert last[-1] == {"role": "user", "content": transcript[-2].content}
    omitted = last[1]["content"]
    assert isinstance(omitted, str)
    kept = len(last) - 2
    assert omitted == OMITTED_NOTE
    # The newest messages, in order, up to the follow-up being answered.
    assert [m["content"] for m in last[2:]] == [t.content for t in transcript[-1 - kept : -1]]
    # Unbounded, the last request would have carried the whole day.
    assert size([last[0], *chat_messages(transcript[:-1])]) > 20 * budget


def test_older_tool_results_of_the_turn_are_summarised_when_the_turn_is_over_the_budget() -> None:
    rounds: list[ChatMessage] = []
    for n in range(1, 9):
        rounds += [calls(f"c{n}"), result(f"c{n}", f"r{n} " + "z" * 50_000)]
    turn = [user("what is set?"), *rounds]
    budget = 60_000
    request = bounded_context(SYSTEM, [*HISTORY, *turn], budget)
    newest = rounds[-1]
    # Every message of the turn is there, in order, calls with their results...
    assert [m["role"] for m in request] == ["system", "user", "user", *[m["role"] for m in rounds]]
    assert request[-1] == newest  # ... the newest result whole ...
    assert size(request) <= budget + size([newest])
    # ... and as many older results as it took summarised, oldest first, by reference.
    summary = summarised_result("schedule_list", len("r1 ") + 50_000)
    assert summary == (
        "[the result of this schedule_list call (50003 characters) is left out to keep the "
        "request short; it is in the conversation's log, and calling schedule_list again "
        "returns it anew]"
    )
    results = [m for m in request if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == [f"c{n}" for n in range(1, 9)]
    assert results[0] == {"role": "tool", "tool_call_id": "c1", "content": summary}
    assert results[-2]["content"] == summary
    # Unbounded, the request would have carried all eight results.
    assert size([SYSTEM, *turn]) > 6 * budget


def test_a_turn_within_the_budget_keeps_its_results_whole() -> None:
    turn = [user("what is set?"), calls("c1"), result("c1", "a" * 100), calls("c2")]
    turn.append(result("c2", "b" * 100))
    assert bounded_context(SYSTEM, turn, size([SYSTEM, *turn])) == [SYSTEM, *turn]


async def test_listing_a_full_session_round_after_round_keeps_every_request_bounded() -> None:
    """The worst the model can do with schedule_list: 100 reminders of 4,000 characters, listed
    page after page for the eight tool rounds of a turn (one call once put 457,000 characters
    in a request, eight rounds 11.4 million)."""
    budget = 60_000
    pages: list[ModelReply | ModelError] = [
        ModelReply(
            content="",
            tool_calls=(ToolCall(id=f"list_{n}", name="schedule_list", arguments="{}"),),
        )
        for n in range(MAX_TOOL_ROUNDS)
    ]
    model = ScriptedModel(replies=pages)
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    async with live_chat(session, model=model, clock=clock, max_context_chars=budget) as live:
        for index in range(100):
            prompt = f"reminder {index} " + "w" * 3_980
            created = await live.tools.call(
                "schedule_create", {"prompt": prompt, "after_seconds": 3_600 + index}
            )
            assert created["ok"] is True
        live.agent.submit("list everything that is set")
        await live.agent.wait_idle()
    await session.close()
    assert len(model.seen) == MAX_TOOL_ROUNDS
    largest_result = max(
        len(str(m["content"])) for request in model.seen for m in request if m["role"] == "tool"
    )
    largest = max(size(request) for request in model.seen)
    print(f"largest request: {largest} characters; largest tool result: {largest_result}")
    assert largest_result <= 16_000 + 4_200 + 200  # a page: 16,000 characters past the first
    assert largest <= budget + largest_result
