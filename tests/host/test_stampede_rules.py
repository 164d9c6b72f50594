"""ScheduleHost under a stampede, in virtual time: sessions admitted together open as a group
(Rule 9), and a session another host delivered is not opened again (Rule 3)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from session_schedule.core.changes import CHANGE_EVENT_TYPE, dispatch_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.host import HostSettings, ScheduleHost
from session_schedule.session.handle import LogHandle
from session_schedule.session.ids import SessionId
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.clock import FakeClock
from tests.host.test_scheduler import (
    START,
    Agents,
    dispatched,
    session_with,
)
from tests.virtual_time import run_for


class WantingStore(MemorySessionStore):  # type: ignore[misc]  # final for users; extended here
    """A memory store that takes hand-over requests, and records every look at them."""

    def __init__(self) -> None:
        super().__init__()
        self.looks: list[frozenset[SessionId]] = []
        self.wanted: set[SessionId] = set()

    async def request_handover(self, session_id: SessionId) -> None:
        self.wanted.add(session_id)

    async def withdraw_handover(self, session_id: SessionId) -> None:
        self.wanted.discard(session_id)

    async def handover_requests(self, session_ids: Collection[SessionId]) -> frozenset[SessionId]:
        self.looks.append(frozenset(session_ids))
        return frozenset(session_ids) & frozenset(self.wanted)


def test_sessions_due_together_are_opened_as_a_group() -> None:
    async def run() -> None:
        store, clock, agents = WantingStore(), FakeClock(START), Agents()
        sessions = [await session_with(store, clock, 60) for _ in range(5)]
        wanted = sessions[2]  # a front end has it
        await store.request_handover(wanted)
        settings = HostSettings(lead_seconds=30, poll_seconds=600, busy_retry_seconds=5)
        async with ScheduleHost(store, agents, clock=clock, settings=settings) as host:
            await run_for(host, clock, 32)
            # One look at the requests for the five admitted together (later looks are the
            # periodic ones, at the sessions open).
            assert store.looks[0] == frozenset(sessions)
            assert host.open_sessions == frozenset(sessions) - {wanted}
            assert host.stats.busy == 1
            await run_for(host, clock, 30)  # the target has come
            for session_id in sessions:
                expected = [] if session_id == wanted else ["sch_1"]
                assert await dispatched(store, session_id) == expected
            await store.withdraw_handover(wanted)
            await run_for(host, clock, 5)  # its retry finds it free
            assert await dispatched(store, wanted) == ["sch_1"]

    asyncio.run(run())


def test_a_session_another_host_delivered_is_not_opened_again() -> None:
    async def run() -> None:
        store, clock, agents = MemorySessionStore(), FakeClock(START), Agents()
        session_id = await session_with(store, clock, 60)
        other_host = await store.open(session_id)  # holds it through its target
        settings = HostSettings(lead_seconds=30, poll_seconds=10, busy_retry_seconds=15)
        async with ScheduleHost(store, agents, clock=clock, settings=settings) as host:
            await run_for(host, clock, 61)
            assert host.stats.busy >= 2  # tried from the lead on, refused each time
            # The other host delivers it and lets it go: nothing is due in it any more.
            assert isinstance(other_host, LogHandle)
            other_host.append(CHANGE_EVENT_TYPE, dispatch_change(make_schedule_id(1)))
            await other_host.barrier()
            await other_host.close()
            busy = host.stats.busy
            await run_for(host, clock, 120)
            # The next poll saw it delivered: its planned retry was dropped, never opened.
            assert host.stats.opened == 0
            assert host.stats.busy == busy
            assert agents.made == {}
            assert await dispatched(store, session_id) == ["sch_1"]

    asyncio.run(run())


def test_hosts_sharing_a_store_start_on_different_sessions_due_together() -> None:
    async def run() -> None:
        store, clock = MemorySessionStore(), FakeClock(START)
        sessions = [await session_with(store, clock, 60) for _ in range(40)]
        settings = HostSettings(lead_seconds=30, poll_seconds=600, max_open=10)
        first, second = Agents(), Agents()
        async with (
            ScheduleHost(store, first, clock=clock, settings=settings) as one,
            ScheduleHost(store, second, clock=clock, settings=settings) as other,
        ):
            await run_for(one, clock, 31)
            # Each takes ten of the forty; were the ties in the index's order for both, the
            # second would first be refused the very ten the first had taken.
            assert len(one.open_sessions) == len(other.open_sessions) == 10
            assert not one.open_sessions & other.open_sessions
            assert one.stats.busy + other.stats.busy < 10
            await run_for(one, clock, 60)
            for session_id in sessions:
                assert await dispatched(store, session_id) == ["sch_1"]

    asyncio.run(run())


def test_queued_sessions_another_host_delivered_leave_the_queue_unopened() -> None:
    async def run() -> None:
        store, clock, agents = MemorySessionStore(), FakeClock(START), Agents()
        sessions = [await session_with(store, clock, 60) for _ in range(5)]
        settings = HostSettings(lead_seconds=30, poll_seconds=600, max_open=1)
        async with ScheduleHost(store, agents, clock=clock, settings=settings) as host:
            await run_for(host, clock, 31)
            (first,) = host.open_sessions  # the other four wait in the queue
            agent = agents.made[first][0]
            agent.start_turn()  # keeps it open past its target
            for session_id in sessions:
                if session_id != first:  # another host delivers them meanwhile
                    handle = await store.open(session_id)
                    assert isinstance(handle, LogHandle)
                    handle.append(CHANGE_EVENT_TYPE, dispatch_change(make_schedule_id(1)))
                    await handle.barrier()
                    await handle.close()
            await run_for(host, clock, 35)
            assert host.open_sessions == {first}
            agent.finish_turn()
            await run_for(host, clock, 60)
            # The queue was read against the index: none of the four was opened for nothing.
            assert host.stats.opened == 1
            assert list(agents.made) == [first]
            for session_id in sessions:
                assert await dispatched(store, session_id) == ["sch_1"]
            assert host.stats.polls > 1

    asyncio.run(run())
