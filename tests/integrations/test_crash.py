"""A reminder accepted by a framework adapter survives the loop being cut between the dispatch
and the turn.

Each adapter accepts a follow-up through its :class:`TurnQueue`: the ``turn/queued`` entry is
appended before the dispatch, and a queue built on the reopened Session runs the turns that did
not finish. Here the whole loop — the live Schedule, the queue and the adapter's conversation,
the examples' scripted models playing the model — is cancelled at every await point from the
reminder's creation to its answer; the Session is then reopened with a new conversation of the
same adapter, which must answer the reminder if the first did not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from agents import Agent as AgentsAgent
from agents import RunConfig
from langchain_core.messages import AIMessage
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.function import FunctionModel

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.integrations import langchain, openai_agents, pydantic_ai
from session_schedule.integrations.common import Conversation
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.port import SessionHandle
from session_schedule.testing.clock import FakeClock
from tests.integrations.examples import load

START = "2026-11-29T20:00:00.000Z"
ANSWER = "Time to stretch!"
IDLE_DEADLINE_SECONDS = 60
"""Only a guard against a hang: a reopened queue finishes its turns in milliseconds."""

Build = Callable[[TurnQueue, ScheduleTools], Conversation]


def _pydantic_ai(turns: TurnQueue, tools: ScheduleTools) -> Conversation:
    model = FunctionModel(load("pydantic_ai_reminders").scripted_model)
    agent = PydanticAgent(model, tools=pydantic_ai.schedule_tools(tools))
    return pydantic_ai.PydanticAIConversation(turns, agent)


def _openai_agents(turns: TurnQueue, tools: ScheduleTools) -> Conversation:
    model = load("openai_agents_reminders").ScriptedModel()
    agent: AgentsAgent[None] = AgentsAgent(
        name="assistant", model=model, tools=openai_agents.schedule_tools(tools)
    )
    return openai_agents.AgentsConversation(
        turns, agent, run_config=RunConfig(tracing_disabled=True)
    )


def _langchain(turns: TurnQueue, tools: ScheduleTools) -> Conversation:
    model = load("langgraph_reminders").ScriptedChatModel(
        messages=iter([AIMessage(ANSWER) for _ in range(4)])
    )
    graph = langchain.agent_graph(model, langchain.schedule_tools(tools))
    return langchain.LangGraphConversation(turns, graph)


ADAPTERS: dict[str, Build] = {
    "pydantic_ai": _pydantic_ai,
    "openai_agents": _openai_agents,
    "langchain": _langchain,
}


def _dispatches(session: SessionHandle) -> int:
    return sum(
        1
        for entry in session.entries
        if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
    )


def _reminder_answers(conversation: Conversation) -> list[str]:
    return [answer.text for answer in conversation.answers if answer.turn.reminder]


async def _first_run(
    session: SessionHandle, clock: FakeClock, build: Build, step: int
) -> tuple[bool, Conversation]:
    """The reminder set, due and answered, the loop cancelled after ``step`` passes of the event
    loop; whether it was cancelled, and the conversation."""
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    conversation = build(turns, ScheduleTools(schedule))

    async def loop() -> None:
        async with schedule, turns:
            await schedule.create({"prompt": "stretch", "after_seconds": 60})
            await schedule.settled()
            clock.advance(120)
            await conversation.wait_answers(1)

    task = asyncio.create_task(loop())
    for _ in range(step):
        await asyncio.sleep(0)
    cancelled = task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        assert cancelled
    return cancelled, conversation


async def _reopened(
    store: JsonlSessionStore, session_id: str, clock: FakeClock, build: Build
) -> list[str]:
    """The Session reopened with a new conversation: the reminder answers it gives."""
    session = await store.open(session_id)
    turns = TurnQueue(session, clock=clock)
    schedule = LiveSchedule(session, turns, clock=clock)
    conversation = build(turns, ScheduleTools(schedule))
    async with schedule, turns:
        await schedule.settled()
        clock.advance(120)
        await schedule.settled()
        # Its turns write through the session's thread: wait for them, not for a number of
        # turns of the loop (a busy disk makes those too few).
        try:
            await asyncio.wait_for(turns.wait_idle(), IDLE_DEADLINE_SECONDS)
        except TimeoutError:
            pytest.fail("the reopened queue never finished its turns")
    answers = _reminder_answers(conversation)
    assert _dispatches(session) == 1
    await session.close()
    return answers


@pytest.mark.parametrize(
    "adapter",
    [
        "pydantic_ai",
        # The Agents SDK, cancelled at some points of its run, drops a coroutine of its own unrun.
        pytest.param(
            "openai_agents",
            marks=pytest.mark.filterwarnings(
                "ignore:coroutine 'run_single_turn' was never awaited:RuntimeWarning",
                "ignore::pytest.PytestUnraisableExceptionWarning",
            ),
        ),
        "langchain",
    ],
)
async def test_a_loop_cut_at_any_await_point_loses_no_reminder(
    adapter: str, tmp_path: Path
) -> None:
    build = ADAPTERS[adapter]
    windows = 0
    step = 0
    while True:
        clock = FakeClock(START)
        store = JsonlSessionStore(tmp_path / f"step-{step}")
        session = await store.create(now=clock.now())
        cancelled, conversation = await _first_run(session, clock, build, step)
        created = any(entry.type == CHANGE_EVENT_TYPE for entry in session.entries)
        dispatched = _dispatches(session)
        first = _reminder_answers(conversation)
        await session.close()
        if not cancelled:
            assert first == [ANSWER]
            break
        if created:
            again = await _reopened(store, session.id, clock, build)
            assert first + again, f"step {step}: the reminder was never answered"
            assert set(first + again) == {ANSWER}
            if dispatched and not first:
                windows += 1  # dispatched, its turn not run: the window under test
                assert again == [ANSWER]
        step += 1
    assert windows > 0, "no cut fell between the dispatch and the turn"
