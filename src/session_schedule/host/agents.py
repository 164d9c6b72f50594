"""Agent factories for :class:`~session_schedule.host.scheduler.ScheduleHost`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from session_schedule.harness.chat import live_chat
from session_schedule.harness.model import Model
from session_schedule.host.scheduler import AgentFactory
from session_schedule.runtime.clock import Clock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session.port import SessionHandle


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
