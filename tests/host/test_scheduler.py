"""ScheduleHost in virtual time: one timer over the index, open before due, close when idle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager

import msgspec
import pytest

from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.host import HostSettings, ScheduleHost, turn_queue_agents
from session_schedule.runtime.clock import Clock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.runtime.turns import RunTurn
from session_schedule.session.ids import SessionId
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.testing.session_contract import CHANGE, at_create
from session_schedule.tools.handlers import ScheduleTools
from tests.virtual_time import run_for

START = "2026-11-29T20:00:00.000Z"
SETTINGS = HostSettings(lead_seconds=30, poll_seconds=10, busy_retry_seconds=5)


class Agents:
    """A factory of fake agents that remembers them, by session."""

    def __init__(self) -> None:
        self.made: dict[SessionId, list[FakeAgent]] = {}
        self.open: set[SessionId] = set()
        self.refusing = False
        """Whether the agents made from now on refuse every follow-up."""

    @asynccontextmanager
    async def __call__(
        self, session: SessionHandle, clock: Clock, settings: Settings, on_wake: Callable[[], None]
    ) -> AsyncIterator[LiveSchedule]:
        agent = FakeAgent()
        if self.refusing:
            agent.refuse()
        self.made.setdefault(session.id, []).append(agent)
        schedule = LiveSchedule(
            session, agent, clock=clock, settings=settings, driven=True, on_wake=on_wake
        )
        self.open.add(session.id)
        try:
            async with schedule:
                yield schedule
        finally:
            self.open.discard(session.id)

    def followups(self, session_id: SessionId) -> list[str]:
        return [text for agent in self.made.get(session_id, []) for text in agent.followups]


async def session_with(
    store: MemorySessionStore, clock: FakeClock, *targets_in_seconds: int
) -> SessionId:
    async with await store.create(now=clock.now()) as handle:
        for number, seconds in enumerate(targets_in_seconds, start=1):
            handle.append(CHANGE, at_create(number, Instant(clock.now() + seconds * MS_PER_SECOND)))
        await handle.barrier()
    return handle.id


async def dispatched(store: MemorySessionStore, session_id: SessionId) -> list[str]:
    snapshot = await store.read(session_id)
    return [
        entry.payload.id
        for entry in snapshot.entries
        if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
    ]


def in_virtual_time(
    test: Callable[[MemorySessionStore, FakeClock, Agents], Coroutine[object, object, None]],
) -> Callable[[], None]:
    def run() -> None:
        asyncio.run(test(MemorySessionStore(), FakeClock(START), Agents()))

    run.__name__ = test.__name__
    return run


@in_virtual_time
async def test_a_session_opens_before_its_target_delivers_and_closes_when_idle(
    store: MemorySessionStore, clock: FakeClock, agents: Agents
) -> None:
    due = await session_with(store, clock, 120, 125)
    quiet = await session_with(store, clock)
    async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 80)
        assert host.open_sessions == frozenset()
        await run_for(host, clock, 15)  # 95 s: within the 30 s lead of the first target
        assert host.open_sessions == {due}
        assert agents.followups(due) == []
        await run_for(host, clock, 25)  # 120 s: the first reminder is due
        assert len(agents.followups(due)) == 1
        assert host.open_sessions == {due}  # the second is 5 s away
        await run_for(host, clock, 5)
        assert len(agents.followups(due)) == 2
        assert host.open_sessions == frozenset()  # nothing active: closed
        assert await dispatched(store, due) == ["sch_1", "sch_2"]
        assert quiet not in agents.made
        assert host.stats.opened == host.stats.closed == 1
        await run_for(host, clock, 3600)
        assert host.stats.opened == 1


@in_virtual_time
async def test_more_due_sessions_than_max_open_are_opened_in_order_as_others_close(
    store: MemorySessionStore, clock: FakeClock, agents: Agents
) -> None:
    # Created latest target first: the host opens them by target, not by creation.
    sessions = [await session_with(store, clock, seconds) for seconds in (64, 63, 62, 61, 60)]
    settings = HostSettings(
        lead_seconds=30, poll_seconds=600, max_open=2, max_opening=1, queue_poll_seconds=600
    )
    async with ScheduleHost(store, agents, clock=clock, settings=settings) as host:
        await run_for(host, clock, 59)
        assert len(host.open_sessions) == 2  # the rest wait in the queue, not for the poll
        await run_for(host, clock, 5)  # 64 s: every target has come, long before the next poll
        for session_id in sessions:
            assert len(agents.followups(session_id)) == 1
            assert await dispatched(store, session_id) == ["sch_1"]
        assert list(agents.made) == sessions[::-1]
        assert host.stats.polls == 1
        await run_for(host, clock, 1)
        assert host.open_sessions == frozenset()
        assert host.stats.opened == host.stats.closed == 5


@in_virtual_time
async def test_a_session_held_elsewhere_is_skipped_and_retried(
    store: MemorySessionStore, clock: FakeClock, agents: Agents
) -> None:
    session_id = await session_with(store, clock, 60)
    held = await store.open(session_id)
    async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 90)
        assert host.open_sessions == frozenset()
        assert host.stats.busy >= 10  # tried every 5 s from the lead on
        await held.close()
        await run_for(host, clock, 5)
        assert len(agents.followups(session_id)) == 1
        assert "sch_1@" in agents.followups(session_id)[0]
        assert await dispatched(store, session_id) == ["sch_1"]


@in_virtual_time
async def test_a_reminder_created_in_a_hosted_session_is_timed_by_the_host(
    store: MemorySessionStore, clock: FakeClock, agents: Agents
) -> None:
    session_id = await session_with(store, clock, 10)
    async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 1)
        assert host.open_sessions == {session_id}
        schedule_of = agents.made[session_id][0]
        assert schedule_of.followups == []
        # A tool call while it is open (the model's, in the follow-up turn, say).
        live = host._slots[session_id].schedule
        await live.create({"prompt": "again", "after_seconds": 20})
        await run_for(host, clock, 10)
        assert len(agents.followups(session_id)) == 1
        assert host.open_sessions == {session_id}  # the new one is due within the lead
        await run_for(host, clock, 11)
        assert len(agents.followups(session_id)) == 2
        assert host.open_sessions == frozenset()


@in_virtual_time
async def test_a_poisoned_session_is_closed_and_reopened_from_storage(
    store: MemorySessionStore, clock: FakeClock, agents: Agents
) -> None:
    session_id = await session_with(store, clock, 5)
    settings = HostSettings(lead_seconds=30, poll_seconds=10, failed_retry_seconds=20)
    async with ScheduleHost(store, agents, clock=clock, settings=settings) as host:
        await run_for(host, clock, 1)
        assert host.open_sessions == {session_id}
        store.fail_next_barrier()
        await run_for(host, clock, 5)
        # The follow-up was queued, its dispatch not confirmed: closed, nothing recorded.
        assert len(agents.followups(session_id)) == 1
        assert host.open_sessions == frozenset()
        assert host.stats.failed == 1
        assert await dispatched(store, session_id) == []
        await run_for(host, clock, 20)
        # At-least-once: delivered again from storage, with the same occurrence key.
        followups = agents.followups(session_id)
        assert len(followups) == 2
        assert all("sch_1@2026-11-29T20:00:05.000Z" in text for text in followups)
        assert await dispatched(store, session_id) == ["sch_1"]
        assert host.open_sessions == frozenset()


@in_virtual_time
async def test_a_busy_agent_keeps_its_session_open_until_idle(
    store: MemorySessionStore, clock: FakeClock, agents: Agents
) -> None:
    session_id = await session_with(store, clock, 5)
    async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 1)
        agent = agents.made[session_id][0]
        agent.start_turn()
        await run_for(host, clock, 60)
        assert agent.followups == []  # never into a running turn
        assert host.open_sessions == {session_id}
        agent.finish_turn()
        await run_for(host, clock, 0)
        assert len(agent.followups) == 1
        assert host.open_sessions == frozenset()


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^lead_seconds must be positive, not 0$"):
        ScheduleHost(MemorySessionStore(), Agents(), settings=HostSettings(lead_seconds=0))
    with pytest.raises(ValueError, match=r"^max_open must be at least 1, not 0$"):
        ScheduleHost(MemorySessionStore(), Agents(), settings=HostSettings(max_open=0))


_SPIN = "a shorter wait or back-off lets the host spin"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"poll_seconds": 1e-6}, f"poll_seconds must be at least 0.01 seconds, not 1e-06: {_SPIN}"),
        ({"max_wait_seconds": 0.001}, f"max_wait_seconds must be at least 0.01 seconds, not 0.001: {_SPIN}"),
        ({"busy_retry_seconds": 0.005}, f"busy_retry_seconds must be at least 0.01 seconds, not 0.005: {_SPIN}"),
        ({"failed_retry_seconds": 0.0001}, f"failed_retry_seconds must be at least 0.01 seconds, not 0.0001: {_SPIN}"),
        ({"queue_poll_seconds": 0.001}, f"queue_poll_seconds must be at least 0.01 seconds, not 0.001: {_SPIN}"),
        ({"handover_check_seconds": 0.001}, f"handover_check_seconds must be at least 0.01 seconds, not 0.001: {_SPIN}"),
        ({"poll_seconds": float("inf")}, "poll_seconds must be a finite number of seconds, not inf"),
        ({"max_wait_seconds": float("inf")}, "max_wait_seconds must be a finite number of seconds, not inf"),
        ({"drain_seconds": float("inf")}, "drain_seconds must be a finite number of seconds, not inf"),
        ({"lead_seconds": float("nan")}, "lead_seconds must be positive, not nan"),
    ],
)  # fmt: skip
def test_a_wait_that_would_let_the_host_spin_or_never_wake_is_refused(
    fields: dict[str, float], message: str
) -> None:
    # A microsecond's poll re-read the index 26,000 times in 2 s; an infinite one never did.
    settings = msgspec.structs.replace(HostSettings(), **fields)
    with pytest.raises(ValueError) as refused:
        ScheduleHost(MemorySessionStore(), Agents(), settings=settings)
    assert str(refused.value) == message


def test_a_short_lead_is_no_spin_and_is_accepted() -> None:
    ScheduleHost(MemorySessionStore(), Agents(), settings=HostSettings(lead_seconds=0.001))


@in_virtual_time
async def test_the_hosts_own_run_turn_answers_through_the_turn_queue(
    store: MemorySessionStore, clock: FakeClock, agents: Agents
) -> None:
    session_id = await session_with(store, clock, 5)
    ran: list[tuple[SessionId, str]] = []

    def run_turn_for(session: SessionHandle, tools: ScheduleTools) -> RunTurn:
        async def run_turn(text: str) -> None:
            ran.append((session.id, text))
            # The model sets the next reminder from the follow-up, through its tools.
            await tools.call("schedule_create", {"prompt": "again", "after_seconds": 10})

        return run_turn

    factory = turn_queue_agents(run_turn_for)
    async with ScheduleHost(store, factory, clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 6)
        assert [sid for sid, _ in ran] == [session_id]
        assert "sch_1@2026-11-29T20:00:05.000Z" in ran[0][1]
        await run_for(host, clock, 10)
        assert len(ran) == 2
        assert "sch_2@" in ran[1][1]
    del agents


@in_virtual_time
async def test_a_turn_cut_off_by_a_host_that_stops_is_answered_by_the_next_host(
    store: MemorySessionStore, clock: FakeClock, agents: Agents
) -> None:
    session_id = await session_with(store, clock, 5)
    started: list[str] = []
    answered: list[str] = []

    def slow(_session: SessionHandle, _tools: ScheduleTools) -> RunTurn:
        async def run_turn(text: str) -> None:
            started.append(text)
            await clock.sleep(15)  # a model that answers slowly
            answered.append(text)

        return run_turn

    def quick(_session: SessionHandle, _tools: ScheduleTools) -> RunTurn:
        async def run_turn(text: str) -> None:
            answered.append(text)

        return run_turn

    # The drain is measured in real time; the slow answer never ends in it.
    settings = msgspec.structs.replace(SETTINGS, drain_seconds=0.01)
    async with ScheduleHost(store, turn_queue_agents(slow), clock=clock, settings=settings) as host:
        await run_for(host, clock, 6)
        assert len(started) == 1
    assert answered == []
    # The session has no reminder left, but its turn is unfinished: it is due at once.
    assert [due.session_id for due in await store.due_sessions(clock.now())] == [session_id]
    async with ScheduleHost(
        store, turn_queue_agents(quick), clock=clock, settings=settings
    ) as host:
        await run_for(host, clock, SETTINGS.poll_seconds)
        assert answered == started
        await run_for(host, clock, SETTINGS.poll_seconds)
        assert host.open_sessions == frozenset()
    assert await store.due_sessions(Instant(clock.now() + 3600 * MS_PER_SECOND)) == ()
    assert await dispatched(store, session_id) == ["sch_1"]
    del agents


@pytest.mark.parametrize("step", [-3600, 3600])
def test_a_busy_retry_lasts_its_elapsed_time_whatever_the_wall_clock_does(step: int) -> None:
    async def test(store: MemorySessionStore, clock: FakeClock, agents: Agents) -> None:
        session_id = await session_with(store, clock, 60)
        held = await store.open(session_id)
        async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
            await run_for(host, clock, 40)  # opened at the lead (+30 s), found busy, retried
            assert host.stats.busy >= 1
            assert host.stats.opened == 0
            await held.close()
            clock.jump(step)
            await run_for(host, clock, 4.999)
            assert host.stats.opened == 0
            await run_for(host, clock, 0.001)
            assert host.stats.opened == 1

    asyncio.run(test(MemorySessionStore(), FakeClock(START), Agents()))


@pytest.mark.parametrize("step", [-3600, 3600])
def test_a_refusal_back_off_lasts_its_elapsed_time_whatever_the_wall_clock_does(
    step: int,
) -> None:
    async def test(store: MemorySessionStore, clock: FakeClock, agents: Agents) -> None:
        agents.refusing = True
        session_id = await session_with(store, clock, -7200)  # two hours overdue
        async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
            await run_for(host, clock, 0)
            [agent] = agents.made[session_id]
            assert agent.refused == 1  # then a back-off of 1 s
            agent.accept()
            clock.jump(step)
            await run_for(host, clock, 0.999)
            assert agent.followups == []
            await run_for(host, clock, 0.001)
            assert len(agent.followups) == 1
            assert await dispatched(store, session_id) == ["sch_1"]

    asyncio.run(test(MemorySessionStore(), FakeClock(START), Agents()))
