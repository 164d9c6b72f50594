"""Every framework adapter tells the model the time (and the person's zone, when the host gives
it) in each request, reminder turns included, through ``Conversation.time_context``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from typing import Any

from agents import Agent, RunConfig, RunContextWrapper
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.outputs import ChatResult
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.core.time_context import request_context
from session_schedule.integrations import openai_agents
from session_schedule.integrations.langchain import LangGraphConversation, agent_graph
from session_schedule.integrations.openai_agents import AgentsConversation
from session_schedule.integrations.pydantic_ai import PydanticAIConversation
from session_schedule.integrations.pydantic_ai import schedule_tools as pydantic_tools
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.clock import FakeClock
from tests.integrations.examples import load

START = "2026-11-29T20:00:00.000Z"
PARIS = "the user's time zone is Europe/Paris"


async def _world() -> tuple[FakeClock, TurnQueue, LiveSchedule]:
    clock = FakeClock(START)
    session = await MemorySessionStore().create(now=clock.now())
    turns = TurnQueue(session, clock=clock)
    return clock, turns, LiveSchedule(session, turns, clock=clock)


def test_the_request_context_is_the_time_then_the_zone_paragraph() -> None:
    now = FakeClock(START).now()
    assert request_context(now) == "Current time: 2026-11-29T20:00:00.000Z (UTC)."
    with_zone = request_context(now, zones=["Europe/Paris"])
    assert with_zone.startswith("Current time: 2026-11-29T20:00:00.000Z (UTC).\nTime context")
    assert PARIS in with_zone


async def test_pydantic_ai_runs_get_the_time_in_their_instructions() -> None:
    clock, turns, schedule = await _world()
    seen: list[str | None] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.instructions)
        return ModelResponse(parts=[TextPart("ok")])

    agent = PydanticAgent(
        FunctionModel(model),
        tools=pydantic_tools(ScheduleTools(schedule)),
        instructions="be brief",
    )
    conversation = PydanticAIConversation(turns, agent, time_zone="Europe/Paris")
    async with schedule, turns:
        conversation.submit("hello")
        await conversation.wait_answers(1)
        clock.advance(60)
        conversation.submit("again")
        await asyncio.wait_for(conversation.wait_answers(2), 5)
    first, second = seen
    assert first is not None
    assert second is not None
    assert first.startswith("be brief")
    assert "Current time: 2026-11-29T20:00:00.000Z (UTC)." in first
    assert "Current time: 2026-11-29T20:01:00.000Z (UTC)." in second
    assert PARIS in second


class _Recording:
    """The system messages the LangGraph model was sent, request by request."""

    systems: list[list[str]] = []  # noqa: RUF012 - shared by the test and its model


def _recording_model() -> Any:
    example = load("langgraph_reminders")

    class Model(example.ScriptedChatModel):  # type: ignore[misc, name-defined]
        def _generate(
            self, messages: list[BaseMessage], *args: object, **kwargs: object
        ) -> ChatResult:
            _Recording.systems.append([m.text for m in messages if isinstance(m, SystemMessage)])
            result: ChatResult = super()._generate(messages, *args, **kwargs)
            return result

    return Model(messages=example.scripted_model().messages)


async def test_langgraph_requests_start_with_the_time_and_the_thread_does_not_keep_it() -> None:
    clock, turns, schedule = await _world()
    _Recording.systems = []
    graph = agent_graph(_recording_model(), _langchain_tools(schedule))
    conversation = LangGraphConversation(turns, graph, time_zone="Europe/Paris")
    async with schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        await conversation.wait_answers(1)
        await schedule.settled()
        clock.advance(1)
        await asyncio.wait_for(conversation.wait_answers(2), 5)
    assert len(_Recording.systems) == 3  # the tool call, the answer, the reminder's answer
    assert all(len(systems) == 1 and PARIS in systems[0] for systems in _Recording.systems)
    assert _Recording.systems[0][0].startswith("Current time: 2026-11-29T20:00:00.000Z (UTC).")
    assert _Recording.systems[2][0].startswith("Current time: 2026-11-29T20:00:01.000Z (UTC).")
    assert not any(isinstance(m, SystemMessage) for m in await conversation.messages())


def _langchain_tools(schedule: LiveSchedule) -> Sequence[Any]:
    from session_schedule.integrations.langchain import schedule_tools  # noqa: PLC0415

    return schedule_tools(ScheduleTools(schedule))


async def test_agents_sdk_runs_get_the_time_after_the_agents_instructions() -> None:
    clock, turns, schedule = await _world()
    example = load("openai_agents_reminders")
    seen: list[str | None] = []

    class Model(example.ScriptedModel):  # type: ignore[misc, name-defined]
        async def get_response(self, system_instructions: str | None, *args: Any, **kw: Any) -> Any:
            seen.append(system_instructions)
            return await super().get_response(system_instructions, *args, **kw)

    agent: Agent[None] = Agent(
        name="assistant",
        model=Model(),
        instructions="be brief",
        tools=openai_agents.schedule_tools(ScheduleTools(schedule)),
    )
    conversation = AgentsConversation(
        turns, agent, run_config=RunConfig(tracing_disabled=True), time_zone="Europe/Paris"
    )
    async with schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        await conversation.wait_answers(1)
        await schedule.settled()
        clock.advance(1)
        await asyncio.wait_for(conversation.wait_answers(2), 5)
    assert len(seen) == 3
    assert all(text is not None and text.startswith("be brief\n\nCurrent time: ") for text in seen)
    assert seen[2] is not None
    assert "Current time: 2026-11-29T20:00:01.000Z (UTC)." in seen[2]
    assert PARIS in seen[2]
    assert agent.instructions == "be brief"  # the agent itself is left as it was


async def test_agents_sdk_instructions_given_as_a_function_are_kept_before_the_time() -> None:
    def dynamic(run: RunContextWrapper[None], agent: Agent[None]) -> str:
        return "dynamic"

    async def asynchronous(run: RunContextWrapper[None], agent: Agent[None]) -> str:
        return "awaited"

    agent: Agent[None] = Agent(name="a")
    run = RunContextWrapper(context=None)
    for given, expected in ((dynamic, "dynamic"), (asynchronous, "awaited")):
        combined = openai_agents._with_context(given, "Current time: x")
        assert callable(combined)
        produced = combined(run, agent)
        assert inspect.isawaitable(produced)
        assert await produced == f"{expected}\n\nCurrent time: x"
    assert openai_agents._with_context(None, "Current time: x") == "Current time: x"
