"""Group commit in isolation, with a flush the test controls."""

from __future__ import annotations

import asyncio

import pytest

from session_schedule.session.barrier import GroupCommit, barriers_at_work
from session_schedule.testing.session_contract import contract_test


class Disk:
    """A flush that records its ranges and finishes only when the test says so."""

    def __init__(self) -> None:
        self.appended = 0
        self.ranges: list[tuple[int, int]] = []
        self.gates: list[asyncio.Future[None]] = []

    async def flush(self, durable: int, target: int) -> None:
        self.ranges.append((durable, target))
        gate = asyncio.get_running_loop().create_future()
        self.gates.append(gate)
        await gate

    def finish(self, error: Exception | None = None) -> None:
        gate = self.gates.pop(0)
        if error is None:
            gate.set_result(None)
        else:
            gate.set_exception(error)


def commit_for(disk: Disk) -> GroupCommit:
    return GroupCommit(durable=0, appended=lambda: disk.appended, flush=disk.flush)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class TestGroupCommit:
    @contract_test
    async def test_nothing_pending_needs_no_flush(self) -> None:
        disk = Disk()
        commit = commit_for(disk)
        await commit.cover(0)
        assert (disk.ranges, commit.flushes) == ([], 0)

    @contract_test
    async def test_one_flush_covers_everything_appended_when_it_starts(self) -> None:
        disk = Disk()
        commit = commit_for(disk)
        disk.appended = 3
        waiters = [asyncio.ensure_future(commit.cover(target)) for target in (1, 3, 3)]
        await settle()
        disk.finish()
        await asyncio.gather(*waiters)
        assert disk.ranges == [(0, 3)]
        assert commit.durable == 3

    @contract_test
    async def test_a_later_barrier_waits_for_the_flight_and_then_the_next(self) -> None:
        disk = Disk()
        commit = commit_for(disk)
        disk.appended = 1
        first = asyncio.ensure_future(commit.cover(1))
        await settle()
        disk.appended = 2
        second = asyncio.ensure_future(commit.cover(2))
        await settle()
        assert disk.ranges == [(0, 1)]
        disk.finish()
        await first
        await settle()
        assert not second.done()
        assert disk.ranges == [(0, 1), (1, 2)]
        disk.finish()
        await second
        assert (commit.durable, commit.flushes) == (2, 2)

    @contract_test
    async def test_a_failure_is_final(self) -> None:
        disk = Disk()
        commit = commit_for(disk)
        disk.appended = 2
        waiter = asyncio.ensure_future(commit.cover(2))
        await settle()
        disk.finish(OSError(5, "Input/output error"))
        await waiter
        assert commit.failure == "OSError: [Errno 5] Input/output error"
        await commit.cover(2)
        assert (commit.durable, commit.flushes) == (0, 1)

    @contract_test
    async def test_a_cancelled_waiter_leaves_the_flush_running(self) -> None:
        disk = Disk()
        commit = commit_for(disk)
        disk.appended = 1
        waiter = asyncio.ensure_future(commit.cover(1))
        await settle()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        disk.finish()
        await settle()
        assert (commit.durable, commit.failure) == (1, None)

    def test_a_flush_cancelled_by_loop_shutdown_poisons(self) -> None:
        disk = Disk()
        commit = commit_for(disk)

        async def abandon() -> None:
            disk.appended = 1
            waiter = asyncio.ensure_future(commit.cover(1))
            await settle()
            assert not waiter.done()

        asyncio.run(abandon())
        assert commit.failure == "the flush was cancelled before it finished"


class Flushes:
    """A commit whose lone flushes (on the spot) and flushes in flight are both recorded."""

    def __init__(self) -> None:
        self.disk = Disk()
        self.on_the_spot: list[tuple[int, int]] = []
        self.commit = GroupCommit(
            durable=0,
            appended=lambda: self.disk.appended,
            flush=self.disk.flush,
            flush_now=lambda durable, target: self.on_the_spot.append((durable, target)),
        )


class TestLoneBarriers:
    @contract_test
    async def test_a_barrier_alone_in_its_loop_flushes_on_the_spot(self) -> None:
        one = Flushes()
        one.disk.appended = 1
        await one.commit.cover(1)
        assert (one.on_the_spot, one.disk.ranges) == ([(0, 1)], [])
        # Something else ready to run that is not a barrier changes nothing.
        one.disk.appended = 2
        asyncio.get_running_loop().call_soon(lambda: None)
        await one.commit.cover(2)
        assert (one.on_the_spot, one.disk.ranges) == ([(0, 1), (1, 2)], [])

    @contract_test
    async def test_barriers_of_several_sessions_at_once_all_flush_in_flight(self) -> None:
        sessions = [Flushes() for _ in range(3)]
        for session in sessions:
            session.disk.appended = 1
        waiting = [asyncio.ensure_future(session.commit.cover(1)) for session in sessions]
        await settle()
        assert [session.disk.ranges for session in sessions] == [[(0, 1)]] * 3
        for session in sessions:
            session.disk.finish()
        await asyncio.gather(*waiting)
        assert all(session.on_the_spot == [] for session in sessions)
        assert all(session.commit.durable == 1 for session in sessions)

    @contract_test
    async def test_a_barrier_while_another_sessions_flush_is_in_flight_does_not_block(
        self,
    ) -> None:
        busy, lone = Flushes(), Flushes()
        busy.disk.appended = 1
        busy_waiter = asyncio.ensure_future(busy.commit.cover(1))
        # Several barriers of the busy session: its flush goes in flight.
        joined = asyncio.ensure_future(busy.commit.cover(1))
        await settle()
        assert busy.disk.ranges == [(0, 1)]
        lone.disk.appended = 1
        lone_waiter = asyncio.ensure_future(lone.commit.cover(1))
        await settle()
        assert (lone.on_the_spot, lone.disk.ranges) == ([], [(0, 1)])
        busy.disk.finish()
        lone.disk.finish()
        await asyncio.gather(busy_waiter, joined, lone_waiter)
        # Once nothing else is at work, a lone barrier flushes on the spot again.
        lone.disk.appended = 2
        await lone.commit.cover(2)
        assert lone.on_the_spot == [(1, 2)]

    @contract_test
    async def test_a_cancelled_gathering_barrier_leaves_no_activity_behind(self) -> None:
        first, second = Flushes(), Flushes()
        first.disk.appended = 1
        asyncio.get_running_loop().call_soon(lambda: None)
        gathering = asyncio.ensure_future(first.commit.cover(1))
        await asyncio.sleep(0)
        gathering.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gathering
        second.disk.appended = 1
        await second.commit.cover(1)
        assert second.on_the_spot == [(0, 1)]


class TestBarriersAtWork:
    @contract_test
    async def test_flushes_in_flight_and_gathering_barriers_are_counted(self) -> None:
        assert barriers_at_work() == 0
        first, second = Disk(), Disk()
        one, two = commit_for(first), commit_for(second)
        first.appended = second.appended = 1
        waiting = [asyncio.ensure_future(one.cover(1)), asyncio.ensure_future(two.cover(1))]
        await settle()
        assert barriers_at_work() == 2
        first.finish()
        await waiting[0]
        assert barriers_at_work() == 1
        second.finish(OSError("disk gone"))
        await waiting[1]
        assert barriers_at_work() == 0
        # A lone barrier yielding once before flushing on the spot counts while it yields.
        spot: list[tuple[int, int]] = []
        lone = GroupCommit(
            durable=0,
            appended=lambda: 1,
            flush=Disk().flush,
            flush_now=lambda d, t: spot.append((d, t)),
        )
        asyncio.get_running_loop().call_soon(lambda: None)
        gathering = asyncio.ensure_future(lone.cover(1))
        await asyncio.sleep(0)
        assert barriers_at_work() == 1
        await gathering
        assert (spot, barriers_at_work()) == ([(0, 1)], 0)
