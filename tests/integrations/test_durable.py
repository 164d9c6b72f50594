"""Durable conversations (``durable=True``): the Anthropic, OpenAI and PydanticAI adapters keep
their messages in the session's log and continue them after a reopen; a conversation that is not
durable writes nothing new."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from openai import AsyncOpenAI
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionUserMessageParam,
)
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.integrations.common import NESTED_TOO_DEEP
from session_schedule.integrations.openai import OpenAIConversation
from session_schedule.integrations.pydantic_ai import PydanticAIConversation, schedule_tools
from session_schedule.session.framework import (
    FRAMEWORK_MESSAGES_TYPE,
    FrameworkMessages,
    framework_messages,
)
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle, SessionStore
from session_schedule.session.sqlite import SqliteSessionStore
from session_schedule.session.turns import TURN_QUEUED_TYPE, turn_queued
from session_schedule.testing.clock import FakeClock
from tests.integrations.examples import load

OPENAI = load("openai_durable")
PYDANTIC_AI = load("pydantic_ai_durable")
SYSTEM: ChatCompletionSystemMessageParam = {"role": "system", "content": "be brief"}


def _endpoint(request: httpx2.Request) -> httpx2.Response:
    if json.loads(request.content)["messages"][-1]["content"] == "fail, please":
        return httpx2.Response(400, json={"error": {"message": "no", "type": "invalid"}})
    response: httpx2.Response = OPENAI.scripted_endpoint(request)
    return response


def _openai(
    session: SessionHandle, clock: FakeClock, *, durable: bool
) -> tuple[AsyncOpenAI, LiveSchedule, TurnQueue, OpenAIConversation]:
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    client = AsyncOpenAI(
        api_key="offline",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(_endpoint)),
    )
    conversation = OpenAIConversation(
        turns, client, ScheduleTools(schedule), model="m", messages=[SYSTEM], durable=durable
    )
    return client, schedule, turns, conversation


def _kept(session: SessionHandle) -> list[FrameworkMessages]:
    return [
        entry.payload
        for entry in session.entries
        if entry.type == FRAMEWORK_MESSAGES_TYPE and isinstance(entry.payload, FrameworkMessages)
    ]


@contextlib.asynccontextmanager
async def _store(kind: str, directory: Path) -> AsyncIterator[SessionStore]:
    if kind == "jsonl":
        yield JsonlSessionStore(directory)
    elif kind == "sqlite":
        yield SqliteSessionStore(directory / "sessions.sqlite")
    elif kind == "postgres":
        from session_schedule.session.postgres import PostgresSessionStore  # noqa: PLC0415
        from tests.postgres import migrated_schema, server_dsn  # noqa: PLC0415 - psycopg here

        dsn = server_dsn()
        with migrated_schema(dsn) as schema:
            async with PostgresSessionStore(dsn, schema=schema) as store:
                yield store
    else:
        yield MemorySessionStore()


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgres"])
async def test_an_openai_conversation_continues_after_a_reopen(kind: str, tmp_path: Path) -> None:
    async with _store(kind, tmp_path) as store:
        await _continues_after_a_reopen(store)


async def _continues_after_a_reopen(store: SessionStore) -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await store.create(now=clock.now())
    client, schedule, turns, conversation = _openai(session, clock, durable=True)
    async with client, schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        conversation.submit("fail, please")
        conversation.submit("My name is Ada.")
        await asyncio.wait_for(conversation.wait_answers(2), 5)
        before = conversation.messages
    kept = _kept(session)
    # One entry per completed turn, without the conversation's start; the failed turn has none.
    assert [entry.turn for entry in kept] == [0, 2]
    assert [message for entry in kept for message in entry.messages] == before[1:]
    await session.close()

    clock.advance(60)
    session = await store.open(session.id)
    client, schedule, turns, conversation = _openai(session, clock, durable=True)
    assert conversation.messages == before
    async with client, schedule, turns:
        (answer,) = await asyncio.wait_for(conversation.wait_answers(1), 5)
    assert (answer.turn.reminder, answer.text) == (True, "Time to stretch, Ada!")
    assert conversation.messages[: len(before)] == before
    assert len(_kept(session)) == 3
    await session.close()


async def test_a_conversation_that_is_not_durable_writes_no_messages_entry() -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    client, schedule, turns, conversation = _openai(session, clock, durable=False)
    async with client, schedule, turns:
        conversation.submit("My name is Ada.")
        await asyncio.wait_for(conversation.wait_answers(1), 5)
    assert [entry.type for entry in session.entries] == ["turn/queued", "turn/finished"]
    assert not conversation.durable


async def test_a_durable_conversation_runs_queued_turns_only() -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    client, _schedule, _turns, conversation = _openai(session, clock, durable=True)
    async with client:
        with pytest.raises(RuntimeError) as raised:
            await conversation.run("My name is Ada.")
    assert str(raised.value) == (
        "a durable conversation records the messages of a queued turn: submit the text to its "
        "TurnQueue instead of calling run()"
    )
    assert conversation.messages == [SYSTEM]
    assert len(session.entries) == 0


async def test_a_pydantic_ai_history_continues_after_a_reopen() -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    store = MemorySessionStore()
    session = await store.create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    agent = Agent(
        FunctionModel(PYDANTIC_AI.scripted_model), tools=schedule_tools(ScheduleTools(schedule))
    )
    conversation = PydanticAIConversation(turns, agent, durable=True)
    async with schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        conversation.submit("My name is Ada.")
        await asyncio.wait_for(conversation.wait_answers(2), 5)
    before = conversation.history
    assert [entry.framework for entry in _kept(session)] == ["pydantic-ai", "pydantic-ai"]
    await session.close()

    clock.advance(60)
    session = await store.open(session.id)
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    agent = Agent(
        FunctionModel(PYDANTIC_AI.scripted_model), tools=schedule_tools(ScheduleTools(schedule))
    )
    conversation = PydanticAIConversation(turns, agent, durable=True)
    assert conversation.history == before
    async with schedule, turns:
        (answer,) = await asyncio.wait_for(conversation.wait_answers(1), 5)
    assert (answer.turn.reminder, answer.text) == (True, "Time to stretch, Ada!")
    assert conversation.history[: len(before)] == before


async def test_a_turn_cut_by_a_crash_runs_again_and_its_messages_are_kept_once() -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    store = MemorySessionStore()
    session = await store.create(now=clock.now())
    # What a crash leaves: the turn queued, its messages recorded, its finish lost.
    hello: ChatCompletionUserMessageParam = {"role": "user", "content": "My name is Ada."}
    cut: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": "cut short"}
    session.append(TURN_QUEUED_TYPE, turn_queued("My name is Ada.", at=clock.now(), origin="host"))
    session.append(
        FRAMEWORK_MESSAGES_TYPE,
        framework_messages("openai", turn=0, at=clock.now(), messages=[hello, cut]),
    )
    await session.barrier()
    await session.close()

    session = await store.open(session.id)
    client, schedule, turns, conversation = _openai(session, clock, durable=True)
    assert conversation.messages == [SYSTEM]
    async with client, schedule, turns:
        (answer,) = await asyncio.wait_for(conversation.wait_answers(1), 5)
    assert (answer.turn.restored, answer.text) == (True, "Nice to meet you, Ada.")
    await session.close()

    session = await store.open(session.id)
    _client, _schedule, _turns, conversation = _openai(session, clock, durable=True)
    assert conversation.messages == [
        SYSTEM,
        hello,
        {"role": "assistant", "content": "Nice to meet you, Ada."},
    ]
    await _client.close()


def _deep(levels: int, inner: object = ()) -> object:
    """``levels`` arrays one inside the other, around ``inner`` (nothing by default)."""
    value: object = list(inner) if isinstance(inner, tuple) else [inner]
    for _ in range(levels - 1):
        value = [value]
    return value


_CREATE = {"prompt": "stretch", "at": None, "every_seconds": None, "daily_at": None}
_TOO_DEEP = (
    "the arguments nest arrays or objects more than 8 levels deep; send a flat JSON object such "
    'as {"prompt": "...", "after_seconds": 600}.'
)


@pytest.mark.parametrize(
    ("arguments", "kept", "code", "message"),
    [
        (
            {**_CREATE, "after_seconds": 10**5_000},
            {**_CREATE, "after_seconds": "100000000000… (a number written in 5001 characters)"},
            "invalid_rule",
            "after_seconds must be a positive whole number of seconds, got a number of 5,001 digits.",
        ),
        (
            {**_CREATE, "after_seconds": 60, "prompt": _deep(200)},
            # The message, its parts, the call and its arguments are the first 4 levels of 64.
            {**_CREATE, "after_seconds": 60, "prompt": _deep(60, NESTED_TOO_DEEP)},
            "invalid_selector",
            _TOO_DEEP,
        ),
    ],
)
async def test_arguments_the_log_cannot_hold_are_kept_shown_and_the_turn_completes(
    arguments: dict[str, object], kept: dict[str, object], code: str, message: str
) -> None:
    """A framework that decodes a tool call's arguments itself can hand over an integer longer
    than the log writes: the turn once failed when its messages were stored. The kept copy shows
    such a number as a string and cuts nesting past 64 levels (the log's encoder refuses about
    1,000), as the OpenAI and Anthropic adapters do when they read a response; the model got the
    tool's stable error."""
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    store = MemorySessionStore()
    session = await store.create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    results: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            assert last.outcome == "failed"
            results.append(last.model_response_str(wrap_if_error=False))
            return ModelResponse(parts=[TextPart("Could not.")])
        return ModelResponse(parts=[ToolCallPart("schedule_create", arguments, "call_1")])

    agent = Agent(FunctionModel(model), tools=schedule_tools(ScheduleTools(schedule)))
    conversation = PydanticAIConversation(turns, agent, durable=True)
    async with schedule, turns:
        conversation.submit("Remind me.")
        (answer,) = await asyncio.wait_for(conversation.wait_answers(1), 5)
    assert answer.text == "Could not."
    assert [json.loads(result) for result in results] == [
        {"ok": False, "error": {"code": code, "message": message}}
    ]
    [entry] = _kept(session)
    stored = entry.messages[1]["parts"]
    assert isinstance(stored, list)
    assert stored[0]["args"] == kept
    await session.close()

    session = await store.open(session.id)
    reopened = PydanticAIConversation(TurnQueue(session, clock=clock), agent, durable=True)
    [_request, response, _result, _answer] = reopened.history
    assert isinstance(response, ModelResponse)
    call = response.parts[0]
    assert isinstance(call, ToolCallPart)
    assert call.args == kept
    await session.close()
