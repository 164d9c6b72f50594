"""Agent factories for :class:`~session_schedule.host.scheduler.ScheduleHost`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from session_schedule.harness.chat import live_chat
from session_schedule.harness.model import Model
from session_schedule.host.scheduler import AgentFactory
from session_schedule.runtime.clock import Clock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.runtime.turns import RunTurn, TurnQueue
from session_schedule.session.port import SessionHandle
from session_schedule.tools.handlers import ScheduleTools


def reference_agents(model: Model | None, *, time_zone: str | None = None) -> AgentFactory:
    """The reference harness (:class:`~session_schedule.harness.agent.ChatAgent`) for every
    session, answering follow-ups with ``model``.

    ``model=None`` is an offline host: a due reminder's follow-up turn is recorded in the
    transcript (as the chat records it), nobody answers it, and the dispatch is recorded as for
    any accepted follow-up — the person finds the reminder waiting when they come back.
    """

    @asynccontextmanager
    async def make(
        session: SessionHandle, clock: Clock, settings: Settings, on_wake: Callable[[], None]
    ) -> AsyncIterator[LiveSchedule]:
        async with live_chat(
            session,
            model=model,
            clock=clock,
            time_zone=time_zone,
            settings=settings,
            driven=True,
            on_wake=on_wake,
        ) as live:
            yield live.schedule

    return make


def turn_queue_agents(
    run_turn_for: Callable[[SessionHandle, ScheduleTools], RunTurn],
) -> AgentFactory:
    """Your own conversation loop for every session, through the
    :class:`~session_schedule.runtime.turns.TurnQueue`: ``run_turn_for(session, tools)`` returns
    the ``async def run_turn(text)`` of that session (the tools are bound to its Schedule).

    Turns left pending in a session by an earlier run (a follow-up accepted but not finished
    when a host stopped) run first, as the queue always does.
    """

    @asynccontextmanager
    async def make(
        session: SessionHandle, clock: Clock, settings: Settings, on_wake: Callable[[], None]
    ) -> AsyncIterator[LiveSchedule]:
        turns = TurnQueue(session, clock=clock, retry=settings.turn_retry)
        schedule = LiveSchedule(
            session, turns, clock=clock, settings=settings, driven=True, on_wake=on_wake
        )
        turns.bind(run_turn_for(session, ScheduleTools(schedule)))
        # The Schedule starts first (a restored turn may call the tools) and stops last.
        async with schedule, turns:
            yield schedule

    return make
