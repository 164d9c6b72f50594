"""A live chat: a Session, the reference agent, its Schedule and tools, started and stopped
together. This is the whole integration — read it as the template for your own harness."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from session_schedule.harness.agent import ChatAgent, ChatEvent
from session_schedule.harness.model import Model
from session_schedule.harness.transcript import DEFAULT_MAX_CONTEXT_CHARS, interruption_results
from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session.message import MESSAGE_ENTRY_TYPE
from session_schedule.session.port import SessionHandle
from session_schedule.tools.handlers import ScheduleTools


@dataclass(frozen=True, slots=True)
class LiveChat:
    session: SessionHandle
    agent: ChatAgent
    schedule: LiveSchedule
    tools: ScheduleTools

    @property
    def failure(self) -> BaseException | None:
        """What stopped the Schedule or the turn queue, if a failure did."""
        return self.schedule.failure or self.agent.turns.failure

    async def wait_failure(self) -> BaseException | None:
        """Wait until the Schedule or the turn queue stops; the failure that stopped it (a
        storage failure: reopen the Session from storage), or ``None`` when it was closed."""
        waiters = {
            asyncio.ensure_future(self.schedule.wait_stopped()),
            asyncio.ensure_future(self.agent.turns.wait_stopped()),
        }
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        return self.failure


@asynccontextmanager
async def live_chat(
    session: SessionHandle,
    *,
    model: Model | None,
    clock: Clock | None = None,
    time_zone: str | None = None,
    settings: Settings | None = None,
    on_event: Callable[[ChatEvent], None] | None = None,
    max_context_chars: int = DEFAULT_MAX_CONTEXT_CHARS,
    driven: bool = False,
    on_wake: Callable[[], None] | None = None,
) -> AsyncIterator[LiveChat]:
    """Run the chat agent and its Schedule on ``session`` for the ``async with`` block.

    Turns left pending in the Session by an earlier run (a reminder delivered but not answered
    when the process stopped) run first; tool calls it left without their results are answered
    before that, in the log, with
    :data:`~session_schedule.harness.transcript.INTERRUPTED_RESULT`. The Session stays open
    afterwards; closing it is the caller's business. ``driven`` and ``on_wake`` are the
    Schedule's: a host that drives delivery itself passes them.
    """
    clock = clock or SystemClock()
    # The last run stopped in the middle of a tool call: record that it was interrupted, so the
    # log itself (not only the next request) answers every call.
    interrupted = interruption_results(session.entries, at=clock.now())
    for result in interrupted:
        session.append(MESSAGE_ENTRY_TYPE, result)
    if interrupted:
        await session.barrier()
    agent = ChatAgent(
        session,
        clock=clock,
        model=model,
        time_zone=time_zone,
        on_event=on_event,
        max_context_chars=max_context_chars,
        retry=(settings or Settings()).turn_retry,
    )
    schedule = LiveSchedule(
        session, agent.turns, clock=clock, settings=settings, driven=driven, on_wake=on_wake
    )
    tools = ScheduleTools(schedule)
    agent.bind(tools)
    # The Schedule starts first (a turn left pending from the last run may call the tools) and
    # stops last.
    async with schedule, agent:
        yield LiveChat(session=session, agent=agent, schedule=schedule, tools=tools)
