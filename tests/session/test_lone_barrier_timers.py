"""A lone barrier flushes on the loop's thread only while no timer of the loop is due before
that flush would end (see :mod:`session_schedule.session.barrier`)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from session_schedule.session import JsonlSessionHandle, JsonlSessionStore
from session_schedule.session import barrier as barrier_module
from session_schedule.session.barrier import FIRST_GUESS
from session_schedule.testing.session_contract import NOW, contract_test, turn
from tests.session.fsyncs import record_fsync_threads


def nothing() -> None:
    """A timer's callback."""


async def cancel(timer: asyncio.TimerHandle) -> None:
    """Cancel ``timer`` and let the loop drop it (it does so at its next pass)."""
    timer.cancel()
    await asyncio.sleep(0)


class SteppingClock:
    """What flushes on the spot are timed with: each one lasts ``step`` seconds."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step
        self._reads = 0

    def __call__(self) -> float:
        # Read twice per flush: before it and after it.
        self._reads += 1
        if self._reads % 2 == 0:
            self.now += self.step
        return self.now


class Commit:
    """A commit whose flushes on the spot and flushes in flight (which land at once) are
    both recorded."""

    def __init__(self) -> None:
        self.appended = 0
        self.on_the_spot: list[tuple[int, int]] = []
        self.in_flight: list[tuple[int, int]] = []
        self.commit = barrier_module.GroupCommit(
            durable=0,
            appended=lambda: self.appended,
            flush=self.flush,
            flush_now=lambda durable, target: self.on_the_spot.append((durable, target)),
        )

    async def flush(self, durable: int, target: int) -> None:
        self.in_flight.append((durable, target))

    async def cover_next(self) -> None:
        """Append one entry and cover it (in this task: no yield before the barrier decides)."""
        self.appended += 1
        await self.commit.cover(self.appended)
        assert self.commit.durable == self.appended

    async def cover_with_a_timer_due(self, delay: float) -> None:
        """:meth:`cover_next` while a timer of the loop is due in ``delay`` seconds."""
        timer = asyncio.get_running_loop().call_later(delay, nothing)
        await self.cover_next()
        await cancel(timer)


def measure_flushes(patch: pytest.MonkeyPatch, seconds: float) -> SteppingClock:
    clock = SteppingClock(seconds)
    patch.setattr(barrier_module, "_clock", clock)
    return clock


async def flushed_once_in_ten_seconds(patch: pytest.MonkeyPatch) -> Commit:
    """A commit whose flushes on the spot take 10 s, one of which (no timer due) has covered
    its first entry."""
    one = Commit()
    measure_flushes(patch, 10.0)
    await one.cover_next()
    assert one.on_the_spot == [(0, 1)]
    return one


class TestTimersDue:
    @contract_test
    async def test_a_lone_barrier_flushes_in_flight_while_a_timer_is_due_before_its_end(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        one = await flushed_once_in_ten_seconds(monkeypatch)
        await one.cover_with_a_timer_due(1)
        assert (one.on_the_spot, one.in_flight) == ([(0, 1)], [(1, 2)])
        await one.cover_with_a_timer_due(3600)
        assert (one.on_the_spot, one.in_flight) == ([(0, 1), (2, 3)], [(1, 2)])

    @contract_test
    async def test_a_timer_set_while_the_barrier_yields_sends_its_flush_in_flight(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        loop = asyncio.get_running_loop()
        one = await flushed_once_in_ten_seconds(monkeypatch)
        # Ready before the barrier: it yields once, and meanwhile this sets a timer.
        timers: list[asyncio.TimerHandle] = []
        loop.call_soon(lambda: timers.append(loop.call_later(1, nothing)))
        await one.cover_next()
        await cancel(timers[0])
        assert (one.on_the_spot, one.in_flight) == ([(0, 1)], [(1, 2)])

    @contract_test
    async def test_the_time_a_flush_takes_is_measured_on_the_spot(self) -> None:
        one = Commit()
        with pytest.MonkeyPatch.context() as patch:
            clock = measure_flushes(patch, 50.0)
            # Before any flush was measured, the first guess holds: a timer due in a second
            # leaves the flush on the spot, which then takes 50 s.
            assert FIRST_GUESS < 1
            await one.cover_with_a_timer_due(1)
            assert one.on_the_spot == [(0, 1)]
            # A timer due in 20 s would now wait for the flush: it goes in flight.
            await one.cover_with_a_timer_due(20)
            assert (one.on_the_spot, one.in_flight) == ([(0, 1)], [(1, 2)])
            # One due in 100 s would not; that flush takes 10 s.
            clock.step = 10.0
            await one.cover_with_a_timer_due(100)
            assert one.on_the_spot == [(0, 1), (2, 3)]
            # A shorter flush moves the estimate an eighth of the way down: 45 s, not 10.
            await one.cover_with_a_timer_due(40)
            assert (one.on_the_spot, one.in_flight) == ([(0, 1), (2, 3)], [(1, 2), (3, 4)])
            # A longer one moves it up at once.
            clock.step = 600.0
            await one.cover_with_a_timer_due(3600)
            await one.cover_with_a_timer_due(500)
            assert one.on_the_spot == [(0, 1), (2, 3), (4, 5)]
            assert one.in_flight == [(1, 2), (3, 4), (5, 6)]

    @contract_test
    async def test_a_flush_measured_elsewhere_moves_the_estimate_too(self) -> None:
        one = Commit()
        # A worker's fsync took 100 s: a timer due in 50 s would wait for one on the spot.
        one.commit.measured(100.0)
        await one.cover_with_a_timer_due(50)
        assert (one.on_the_spot, one.in_flight) == ([], [(0, 1)])
        # Eight quick ones later (100 x (7/8)^8 = 34 s), the same timer no longer waits.
        for _ in range(8):
            one.commit.measured(0.0)
        with pytest.MonkeyPatch.context() as patch:
            measure_flushes(patch, 0.0)
            await one.cover_with_a_timer_due(50)
        assert (one.on_the_spot, one.in_flight) == ([(1, 2)], [(0, 1)])

    def test_a_loop_whose_timers_cannot_be_seen_is_taken_to_have_none_due_and_work_ready(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        class Opaque:
            def time(self) -> float:
                return 0.0

        monkeypatch.setattr(asyncio, "get_running_loop", Opaque)
        assert barrier_module._loop_state(3600.0) == "busy"


@contextlib.asynccontextmanager
async def recorded_session(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[JsonlSessionHandle, list[str]]]:
    """A new JSONL session and the threads its fsyncs run on from now on (the create's own
    fsyncs are not counted); the session is closed afterwards."""
    store = JsonlSessionStore(directory)
    async with await store.create(now=NOW) as handle:
        yield handle, record_fsync_threads(monkeypatch)


async def lone_barrier_with_a_timer_due(
    handle: JsonlSessionHandle, number: int, delay: float
) -> None:
    """Append ``turn(number)`` and cover it with a lone barrier while a timer is due in
    ``delay`` seconds (cancelled afterwards)."""
    timer = asyncio.get_running_loop().call_later(delay, nothing)
    handle.append("message", turn(number))
    await handle.barrier()
    await cancel(timer)


class TestJsonl:
    @contract_test
    async def test_a_lone_barrier_with_a_timer_due_does_not_fsync_on_the_loop(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        measure_flushes(monkeypatch, 10.0)  # every fsync on the loop is taken to last 10 s
        async with recorded_session(tmp_path, monkeypatch) as (handle, threads):
            handle.append("message", turn(0))
            await handle.barrier()
            assert threads == [threading.current_thread().name]
            # Another session's one-shot, due in a second: before that fsync would end.
            await lone_barrier_with_a_timer_due(handle, 1, 1)
            assert len(threads) == 2
            assert threads[1].startswith("session-worker-")
            assert (handle.flush_count, handle.durable_length) == (2, 2)
            # With the only timer an hour away, the next lone barrier fsyncs on the loop.
            await lone_barrier_with_a_timer_due(handle, 2, 3600)
            assert threads[2:] == [threading.current_thread().name]
            assert (handle.flush_count, handle.durable_length) == (3, 3)
        async with await JsonlSessionStore(tmp_path).open(handle.id) as reopened:
            assert [entry.payload for entry in reopened.entries] == [turn(0), turn(1), turn(2)]

    @contract_test
    async def test_an_fsync_on_the_worker_reports_how_long_it_took(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with recorded_session(tmp_path, monkeypatch) as (handle, threads):
            with pytest.MonkeyPatch.context() as patch:
                # Read before and after the worker's fsync: it is taken to last 100 s.
                readings = itertools.count(0.0, 100.0)
                patch.setattr(time, "perf_counter", lambda: next(readings))
                handle.append("message", turn(0))
                # Two barriers called together: their one fsync runs on the session's worker.
                await asyncio.gather(handle.barrier(), handle.barrier())
            assert len(threads) == 1
            assert threads[0].startswith("session-worker-")
            # A lone barrier with a timer due in 50 s now sends its fsync to the worker too.
            await lone_barrier_with_a_timer_due(handle, 1, 50)
            assert len(threads) == 2
            assert threads[1].startswith("session-worker-")
            assert (handle.flush_count, handle.durable_length) == (2, 2)
