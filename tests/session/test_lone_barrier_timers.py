"""A lone barrier flushes on the loop's thread only while no timer of the loop is due before
that flush would end (see :mod:`session_schedule.session.barrier`)."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from pathlib import Path

import pytest

from session_schedule.session import JsonlSessionStore
from session_schedule.session import barrier as barrier_module
from session_schedule.session.barrier import FIRST_GUESS
from session_schedule.testing.session_contract import NOW, contract_test, turn


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


def measure_flushes(patch: pytest.MonkeyPatch, seconds: float) -> SteppingClock:
    clock = SteppingClock(seconds)
    patch.setattr(barrier_module, "_clock", clock)
    return clock


class TestTimersDue:
    @contract_test
    async def test_a_lone_barrier_flushes_in_flight_while_a_timer_is_due_before_its_end(
        self,
    ) -> None:
        loop = asyncio.get_running_loop()
        one = Commit()
        with pytest.MonkeyPatch.context() as patch:
            measure_flushes(patch, 10.0)
            await one.cover_next()  # no timer: on the spot, measured at 10 s
            soon = loop.call_later(1, nothing)
            await one.cover_next()
            await cancel(soon)
            assert (one.on_the_spot, one.in_flight) == ([(0, 1)], [(1, 2)])
            later = loop.call_later(3600, nothing)
            await one.cover_next()
            await cancel(later)
            assert (one.on_the_spot, one.in_flight) == ([(0, 1), (2, 3)], [(1, 2)])

    @contract_test
    async def test_a_timer_set_while_the_barrier_yields_sends_its_flush_in_flight(self) -> None:
        loop = asyncio.get_running_loop()
        one = Commit()
        with pytest.MonkeyPatch.context() as patch:
            measure_flushes(patch, 10.0)
            await one.cover_next()
            # Ready before the barrier: it yields once, and meanwhile this sets a timer.
            timers: list[asyncio.TimerHandle] = []
            loop.call_soon(lambda: timers.append(loop.call_later(1, nothing)))
            await one.cover_next()
            await cancel(timers[0])
            assert (one.on_the_spot, one.in_flight) == ([(0, 1)], [(1, 2)])

    @contract_test
    async def test_the_time_a_flush_takes_is_measured_on_the_spot(self) -> None:
        loop = asyncio.get_running_loop()
        one = Commit()
        with pytest.MonkeyPatch.context() as patch:
            clock = measure_flushes(patch, 50.0)
            # Before any flush was measured, the first guess holds: a timer due in a second
            # leaves the flush on the spot, which then takes 50 s.
            assert FIRST_GUESS < 1
            timer = loop.call_later(1, nothing)
            await one.cover_next()
            await cancel(timer)
            assert one.on_the_spot == [(0, 1)]
            # A timer due in 20 s would now wait for the flush: it goes in flight.
            timer = loop.call_later(20, nothing)
            await one.cover_next()
            await cancel(timer)
            assert (one.on_the_spot, one.in_flight) == ([(0, 1)], [(1, 2)])
            # One due in 100 s would not; that flush takes 10 s.
            clock.step = 10.0
            timer = loop.call_later(100, nothing)
            await one.cover_next()
            await cancel(timer)
            assert one.on_the_spot == [(0, 1), (2, 3)]
            # A shorter flush moves the estimate an eighth of the way down: 45 s, not 10.
            timer = loop.call_later(40, nothing)
            await one.cover_next()
            await cancel(timer)
            assert (one.on_the_spot, one.in_flight) == ([(0, 1), (2, 3)], [(1, 2), (3, 4)])
            # A longer one moves it up at once.
            timer = loop.call_later(3600, nothing)
            clock.step = 600.0
            await one.cover_next()
            await cancel(timer)
            timer = loop.call_later(500, nothing)
            await one.cover_next()
            await cancel(timer)
            assert one.on_the_spot == [(0, 1), (2, 3), (4, 5)]
            assert one.in_flight == [(1, 2), (3, 4), (5, 6)]

    @contract_test
    async def test_a_flush_measured_elsewhere_moves_the_estimate_too(self) -> None:
        loop = asyncio.get_running_loop()
        one = Commit()
        # A worker's fsync took 100 s: a timer due in 50 s would wait for one on the spot.
        one.commit.measured(100.0)
        timer = loop.call_later(50, nothing)
        await one.cover_next()
        await cancel(timer)
        assert (one.on_the_spot, one.in_flight) == ([], [(0, 1)])
        # Eight quick ones later (100 x (7/8)^8 = 34 s), the same timer no longer waits.
        for _ in range(8):
            one.commit.measured(0.0)
        with pytest.MonkeyPatch.context() as patch:
            measure_flushes(patch, 0.0)
            timer = loop.call_later(50, nothing)
            await one.cover_next()
            await cancel(timer)
        assert (one.on_the_spot, one.in_flight) == ([(1, 2)], [(0, 1)])

    def test_a_loop_whose_timers_cannot_be_seen_is_taken_to_have_none_due_and_work_ready(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        class Opaque:
            def time(self) -> float:
                return 0.0

        monkeypatch.setattr(asyncio, "get_running_loop", Opaque)
        assert barrier_module._loop_state(3600.0) == "busy"


class TestJsonl:
    @staticmethod
    def fsync_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
        threads: list[str] = []
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            threads.append(threading.current_thread().name)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        return threads

    @contract_test
    async def test_a_lone_barrier_with_a_timer_due_does_not_fsync_on_the_loop(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = JsonlSessionStore(tmp_path)
        loop = asyncio.get_running_loop()
        measure_flushes(monkeypatch, 10.0)  # every fsync on the loop is taken to last 10 s
        async with await store.create(now=NOW) as handle:
            threads = self.fsync_threads(monkeypatch)
            handle.append("message", turn(0))
            await handle.barrier()
            assert threads == [threading.current_thread().name]
            # Another session's one-shot, due in a second: before that fsync would end.
            due = loop.call_later(1, nothing)
            handle.append("message", turn(1))
            await handle.barrier()
            await cancel(due)
            assert len(threads) == 2
            assert threads[1].startswith("session-worker-")
            assert (handle.flush_count, handle.durable_length) == (2, 2)
            # With the only timer an hour away, the next lone barrier fsyncs on the loop.
            later = loop.call_later(3600, nothing)
            handle.append("message", turn(2))
            await handle.barrier()
            await cancel(later)
            assert threads[2:] == [threading.current_thread().name]
            assert (handle.flush_count, handle.durable_length) == (3, 3)
        async with await store.open(handle.id) as reopened:
            assert [entry.payload for entry in reopened.entries] == [turn(0), turn(1), turn(2)]

    @contract_test
    async def test_an_fsync_on_the_worker_reports_how_long_it_took(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = JsonlSessionStore(tmp_path)
        loop = asyncio.get_running_loop()
        async with await store.create(now=NOW) as handle:
            threads = self.fsync_threads(monkeypatch)
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
            due = loop.call_later(50, nothing)
            handle.append("message", turn(1))
            await handle.barrier()
            await cancel(due)
            assert len(threads) == 2
            assert threads[1].startswith("session-worker-")
            assert (handle.flush_count, handle.durable_length) == (2, 2)
