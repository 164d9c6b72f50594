"""Every adapter passes the turn's occurrence keys — its idempotency key — to each run, in the
form its framework uses for run metadata."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import cast

import pytest
from agents import Agent, RunConfig, Runner
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from pydantic_ai import Agent as PydanticAgent

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.integrations.common import (
    OCCURRENCES_METADATA_KEY,
    TURN_METADATA_KEY,
    Conversation,
    turn_metadata,
)
from session_schedule.integrations.langchain import LangGraphConversation, MessagesGraph
from session_schedule.integrations.openai_agents import AgentsConversation
from session_schedule.integrations.pydantic_ai import PydanticAIConversation
from session_schedule.runtime.turns import Turn
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"
KEY = "sch_1@2026-11-29T20:01:00.000Z"


@dataclass
class World:
    clock: FakeClock
    turns: TurnQueue
    schedule: LiveSchedule
    tools: ScheduleTools


@pytest.fixture
async def world() -> AsyncIterator[World]:
    clock = FakeClock(START)
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    yield World(clock, turns, schedule, ScheduleTools(schedule))
    await turns.close()
    await schedule.close()


async def _a_prompt_then_a_reminder(world: World, conversation: Conversation) -> None:
    """The host's prompt sets a reminder; a minute later the reminder is answered."""
    async with world.schedule, world.turns:
        await world.tools.call("schedule_create", {"prompt": "stretch", "after_seconds": 60})
        conversation.submit("hello")
        await conversation.wait_answers(1)
        await world.schedule.settled()
        world.clock.advance(60)
        await asyncio.wait_for(conversation.wait_answers(2), 5)


def _metadata_of(turns: tuple[Turn, ...]) -> list[dict[str, object]]:
    return [turn_metadata(turn) for turn in turns]


def test_the_metadata_holds_the_occurrence_keys_and_the_turn() -> None:
    reminder = Turn(position=4, origin="schedule", text="t", occurrences=(KEY,))
    prompt = Turn(position=2, origin="host", text="hello")
    assert turn_metadata(reminder) == {OCCURRENCES_METADATA_KEY: [KEY], TURN_METADATA_KEY: 4}
    assert turn_metadata(prompt) == {OCCURRENCES_METADATA_KEY: [], TURN_METADATA_KEY: 2}


@dataclass
class FakeGraph:
    configs: list[RunnableConfig] = field(default_factory=list)

    async def ainvoke(self, _input: object, config: RunnableConfig) -> dict[str, list[AIMessage]]:
        self.configs.append(config)
        return {"messages": [AIMessage("ok")]}


async def test_langgraph_runs_carry_the_keys_in_their_config_metadata(world: World) -> None:
    graph = FakeGraph()
    conversation = LangGraphConversation(world.turns, cast("MessagesGraph", graph))
    await _a_prompt_then_a_reminder(world, conversation)
    turns = tuple(answer.turn for answer in conversation.answers)
    assert turns[1].occurrences == (KEY,)
    assert [config.get("metadata") for config in graph.configs] == _metadata_of(turns)
    threads = [config.get("configurable", {}).get("thread_id") for config in graph.configs]
    assert threads == [conversation.config["configurable"]["thread_id"]] * 2


async def test_agents_sdk_runs_carry_the_keys_in_their_trace_metadata(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs: list[RunConfig] = []

    @dataclass
    class Result:
        final_output: str = "ok"

    async def run(_agent: object, _text: str, **options: object) -> Result:
        configs.append(cast("RunConfig", options["run_config"]))
        return Result()

    monkeypatch.setattr(Runner, "run", run)
    given = RunConfig(workflow_name="reminders", trace_metadata={"team": "ops"})
    conversation = AgentsConversation(world.turns, Agent(name="a"), run_config=given)
    await _a_prompt_then_a_reminder(world, conversation)
    turns = tuple(answer.turn for answer in conversation.answers)
    assert [config.trace_metadata for config in configs] == [
        {"team": "ops", **metadata} for metadata in _metadata_of(turns)
    ]
    assert {config.workflow_name for config in configs} == {"reminders"}
    assert given.trace_metadata == {"team": "ops"}  # the caller's config is left as it was


async def test_pydantic_ai_runs_carry_the_keys_in_their_metadata(world: World) -> None:
    seen: list[dict[str, object] | None] = []

    @dataclass
    class Result:
        output: str = "ok"

        def all_messages(self) -> list[object]:
            return []

    class FakeAgent:
        async def run(
            self,
            _text: str,
            *,
            message_history: object,
            metadata: dict[str, object] | None,
            instructions: str | None = None,
        ) -> Result:
            del message_history, instructions
            seen.append(metadata)
            return Result()

    conversation = PydanticAIConversation(
        world.turns, cast("PydanticAgent[None, str]", FakeAgent())
    )
    await _a_prompt_then_a_reminder(world, conversation)
    assert seen == _metadata_of(tuple(answer.turn for answer in conversation.answers))


async def test_a_conversation_names_the_turn_it_is_answering(world: World) -> None:
    current: list[Turn | None] = []

    class Recording(Conversation):
        async def run(self, text: str) -> str:
            current.append(self.current_turn)
            return text

    conversation = Recording(world.turns)
    assert conversation.current_turn is None
    await _a_prompt_then_a_reminder(world, conversation)
    assert current == [answer.turn for answer in conversation.answers]
    assert [turn.occurrences for turn in current if turn is not None] == [(), (KEY,)]
