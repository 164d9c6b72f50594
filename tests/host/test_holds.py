"""ScheduleHost Rule 10: a session whose reminders its quotas or quiet hours hold is opened
again when the hold lifts, or when its log changes — not at every poll."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager

import msgspec

from session_schedule.core.quiet import QuietHours
from session_schedule.host import HostSettings, ScheduleHost, turn_queue_agents
from session_schedule.host.scheduler import AgentFactory
from session_schedule.runtime.clock import Clock
from session_schedule.runtime.events import ScheduleEvent
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.runtime.turns import RunTurn
from session_schedule.session.ids import SessionId
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.tools.handlers import ScheduleTools
from tests.virtual_time import run_for

START = "2026-11-29T20:00:00.000Z"
SETTINGS = HostSettings(lead_seconds=30, poll_seconds=10, busy_retry_seconds=5)
DAY = 86_400


class Recorded:
    """The host's turn-queue agents, with every turn they ran and every back-off event."""

    def __init__(self) -> None:
        self.turns: list[str] = []
        self.back_offs: list[ScheduleEvent] = []
        self.opened = 0

    def factory(self) -> AgentFactory:
        def run_turn_for(_session: SessionHandle, _tools: ScheduleTools) -> RunTurn:
            async def run_turn(text: str) -> None:
                self.turns.append(text)

            return run_turn

        made = turn_queue_agents(run_turn_for)

        @asynccontextmanager
        async def make(
            session: SessionHandle, clock: Clock, settings: Settings, on_wake: Callable[[], None]
        ) -> AsyncIterator[LiveSchedule]:
            self.opened += 1
            async with made(session, clock, settings, on_wake) as schedule:
                unsubscribe = schedule.events.subscribe(self._note)
                try:
                    yield schedule
                finally:
                    unsubscribe()

        return make

    def _note(self, event: ScheduleEvent) -> None:
        if event.kind == "back-off":
            self.back_offs.append(event)


def in_virtual_time(
    test: Callable[[MemorySessionStore, FakeClock], Coroutine[object, object, None]],
) -> Callable[[], None]:
    def run() -> None:
        asyncio.run(test(MemorySessionStore(), FakeClock(START)))

    run.__name__ = test.__name__
    return run


async def quota_spent_session(store: MemorySessionStore, clock: FakeClock) -> SessionId:
    """A session whose person set one reminder turn a day, with two reminders due 2 and 4 s
    from now (as ``/turns-per-day 1`` and two ``/create`` in the chat leave it)."""
    async with await store.create(now=clock.now()) as handle:
        schedule = LiveSchedule(handle, FakeAgent(), clock=clock)
        await schedule.set_quota("turns_per_day", 1)
        await schedule.create({"prompt": "first", "after_seconds": 2})
        await schedule.create({"prompt": "second", "after_seconds": 4})
        await schedule.close()
    return handle.id


def line(text: str, start: str) -> str:
    return next(found for found in text.splitlines() if found.startswith(start))


@in_virtual_time
async def test_a_session_held_by_its_daily_quota_is_opened_again_only_when_it_allows_a_turn(
    store: MemorySessionStore, clock: FakeClock
) -> None:
    await quota_spent_session(store, clock)
    recorded = Recorded()
    async with ScheduleHost(store, recorded.factory(), clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 10)
        assert len(recorded.turns) == 1
        await run_for(host, clock, 3600)
        # Held: closed once, and not opened again at each poll (360 of them in this hour).
        assert host.open_sessions == frozenset()
        assert (host.stats.opened, host.stats.closed, recorded.opened) == (1, 1, 1)
        assert host.stats.polls > 300
        assert [
            (event.decided_at, event.outcome, event.retry_in_seconds, event.detail)
            for event in recorded.back_offs
        ] == [
            (
                "2026-11-29T20:00:04.000Z",
                "follow-up budget",
                86_398.0,
                "1 reminder follow-ups within 86400 s",
            )
        ]
        # The first turn was queued at 20:00:02: a turn is allowed again a day later.
        await run_for(host, clock, DAY + 1 - 3610)
        assert len(recorded.turns) == 1
        assert host.stats.opened == 1
        await run_for(host, clock, 1)
        assert len(recorded.turns) == 2
        assert host.stats.opened == 2
        assert len(recorded.back_offs) == 1
    second = recorded.turns[1]
    assert line(second, "decided at: ") == "decided at: 2026-11-30T20:00:02.000Z"
    assert line(second, "delayed since: ") == (
        "delayed since: 2026-11-29T20:00:04.000Z, because this session had 1 reminder "
        "follow-ups within 86400 seconds, the most it allows. Do not create a reminder from a "
        "follow-up just to be called again; re-create one only if the user asked for it to "
        "repeat."
    )


@in_virtual_time
async def test_a_quota_raised_while_the_host_holds_a_session_delivers_at_the_next_poll(
    store: MemorySessionStore, clock: FakeClock
) -> None:
    session_id = await quota_spent_session(store, clock)
    recorded = Recorded()
    async with ScheduleHost(store, recorded.factory(), clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 600)
        assert (len(recorded.turns), host.stats.opened) == (1, 1)
        # A program (or a front end that closes at once) raises the quota and delivers
        # nothing itself: the index shows the change, and the host opens the session.
        async with await store.open(session_id) as handle:
            await LiveSchedule(handle, FakeAgent(), clock=clock).set_quota("turns_per_day", 5)
        await run_for(host, clock, SETTINGS.poll_seconds)
        assert len(recorded.turns) == 2
        assert 'prompt: "second"' in recorded.turns[1]
        assert host.stats.opened == 2
        await run_for(host, clock, 600)
        assert host.stats.opened == 2
        assert host.open_sessions == frozenset()
    assert len(recorded.back_offs) == 1


@in_virtual_time
async def test_a_quota_lowered_again_is_a_new_hold_seen_once(
    store: MemorySessionStore, clock: FakeClock
) -> None:
    session_id = await quota_spent_session(store, clock)
    recorded = Recorded()
    async with ScheduleHost(store, recorded.factory(), clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 600)
        async with await store.open(session_id) as handle:
            # The same quota set again: the log changed, the hold did not lift.
            await LiveSchedule(handle, FakeAgent(), clock=clock).set_quota("turns_per_day", 1)
        await run_for(host, clock, 3600)
        assert len(recorded.turns) == 1
        assert host.stats.opened == 2
        assert [event.decided_at for event in recorded.back_offs] == [
            "2026-11-29T20:00:04.000Z",
            "2026-11-29T20:10:10.000Z",
        ]


@in_virtual_time
async def test_a_session_held_by_quiet_hours_is_opened_when_they_end_and_says_since_when(
    store: MemorySessionStore, clock: FakeClock
) -> None:
    quiet = QuietHours(start="20:30", end="22:00", time_zone="UTC")
    settings = msgspec.structs.replace(SETTINGS, schedule=Settings(quiet_hours=quiet))
    async with await store.create(now=clock.now()) as handle:
        schedule = LiveSchedule(handle, FakeAgent(), clock=clock)
        await schedule.create({"prompt": "at night", "after_seconds": 3600})  # 21:00
        await schedule.close()
    recorded = Recorded()
    async with ScheduleHost(store, recorded.factory(), clock=clock, settings=settings) as host:
        await run_for(host, clock, 3600 + 60)
        assert recorded.turns == []
        assert host.stats.opened == 1
        await run_for(host, clock, 3600)
        assert len(recorded.turns) == 1
        assert host.stats.opened == host.stats.closed == 2
        assert [(event.decided_at, event.outcome) for event in recorded.back_offs] == [
            ("2026-11-29T21:00:00.000Z", "quiet hours")
        ]
    text = recorded.turns[0]
    assert line(text, "decided at: ") == "decided at: 2026-11-29T22:00:00.000Z"
    assert line(text, "deferred since: ") == (
        "deferred since: 2026-11-29T21:00:00.000Z, by the user's quiet hours "
        "(20:30 to 22:00 UTC), which have just ended."
    )
