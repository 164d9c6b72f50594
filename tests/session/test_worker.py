"""Session lanes on the shared pool: order, one call at a time, a bounded number of threads,
fairness, errors, cancellation, a loop that is gone."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable

import pytest

from session_schedule.session import worker as worker_module
from session_schedule.session.worker import POOL_THREADS, Worker, calls_in_flight, pool_threads
from session_schedule.testing.session_contract import contract_test


def pool_thread_names() -> list[str]:
    return [
        thread.name for thread in threading.enumerate() if thread.name.startswith("session-worker-")
    ]


class TestWorker:
    @contract_test
    async def test_calls_run_in_order_one_at_a_time(self) -> None:
        worker = Worker("test-order")
        seen: list[int] = []
        running = [0]
        overlapped: list[int] = []

        def record(number: int) -> None:
            running[0] += 1
            if running[0] > 1:
                overlapped.append(number)
            # Long enough for another pool thread to take the lane if it could.
            time.sleep(0.0005)
            seen.append(number)
            running[0] -= 1

        futures = [worker.submit(functools.partial(record, n)) for n in range(50)]
        await asyncio.gather(*futures)
        assert seen == list(range(50))
        assert overlapped == []
        assert all(name.startswith("session-worker-") for name in pool_thread_names())
        with pytest.raises(ZeroDivisionError):
            await worker.run(lambda: 1 // 0)
        assert await worker.run(lambda: 42) == 42
        await worker.stop(lambda: None)

    @contract_test
    async def test_many_workers_share_a_bounded_pool(self) -> None:
        workers = [Worker(f"test-many-{number}") for number in range(500)]
        gate = threading.Event()

        def wait() -> str:
            gate.wait(5)
            return threading.current_thread().name

        # More lanes blocked at once than the pool has threads: the rest wait their turn.
        futures = [worker.submit(wait) for worker in workers]
        await asyncio.sleep(0.05)
        assert pool_threads() <= POOL_THREADS
        assert len(pool_thread_names()) <= POOL_THREADS
        gate.set()
        names = await asyncio.gather(*futures)
        assert len(set(names)) <= POOL_THREADS
        await asyncio.gather(*(worker.stop(lambda: None) for worker in workers))
        assert len(pool_thread_names()) <= POOL_THREADS

    @contract_test
    async def test_a_blocked_lane_does_not_hold_up_the_others(self) -> None:
        blocked, free = Worker("test-blocked"), Worker("test-free")
        release = threading.Event()
        stuck = blocked.submit(lambda: release.wait(5))
        assert await free.run(lambda: "done") == "done"
        assert not stuck.done()
        release.set()
        assert await stuck is True
        await blocked.stop(lambda: None)
        await free.stop(lambda: None)

    @contract_test
    async def test_a_stopped_worker_takes_no_more_calls(self) -> None:
        worker = Worker("test-stopped")
        ran: list[str] = []
        await worker.stop(lambda: ran.append("last"))
        assert ran == ["last"]
        assert worker.stopped
        with pytest.raises(RuntimeError) as raised:
            worker.submit(lambda: None)
        assert str(raised.value) == "the worker test-stopped is stopped"
        with pytest.raises(RuntimeError):
            worker.post(lambda: None)

    @contract_test
    async def test_a_failed_start_stops_the_worker(self) -> None:
        worker = Worker("test-failed-start")
        undone: list[object] = []
        with pytest.raises(OSError, match="no such thing"):
            await worker.start(lambda: _raise(OSError("no such thing")), undone.append)
        assert worker.stopped
        assert undone == []

    @contract_test
    async def test_a_cancelled_start_undoes_its_result_on_the_pool(self) -> None:
        worker = Worker("test-cancelled-start")
        release = threading.Event()
        undone: list[tuple[str, str]] = []

        def acquire() -> str:
            release.wait(5)
            return "resource"

        starting = asyncio.ensure_future(
            worker.start(
                acquire, lambda result: undone.append((result, threading.current_thread().name))
            )
        )
        await asyncio.sleep(0.01)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        assert worker.stopped
        release.set()
        for _ in range(200):
            if undone:
                break
            await asyncio.sleep(0.001)
        assert len(undone) == 1
        assert undone[0][0] == "resource"
        assert undone[0][1].startswith("session-worker-")

    @contract_test
    async def test_a_cancelled_start_whose_call_failed_has_nothing_to_undo(self) -> None:
        worker = Worker("test-cancelled-failure")
        release = threading.Event()
        undone: list[object] = []
        finished = threading.Event()

        def fail() -> str:
            release.wait(5)
            finished.set()
            raise OSError("late failure")

        starting = asyncio.ensure_future(worker.start(fail, undone.append))
        await asyncio.sleep(0.01)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        release.set()
        assert await asyncio.to_thread(finished.wait, 5)
        await asyncio.sleep(0.01)
        assert undone == []

    def test_a_result_for_a_closed_loop_is_dropped_quietly(self) -> None:
        release = threading.Event()
        finished = threading.Event()
        holder: list[Worker] = []

        def slow() -> None:
            release.wait(5)
            finished.set()

        async def leave_early() -> None:
            worker = Worker("test-closed-loop")
            holder.append(worker)
            worker.submit(slow)

        asyncio.run(leave_early())
        release.set()
        assert finished.wait(5)

        async def again() -> int:
            return await holder[0].run(lambda: 7)

        # The thread that reported to the closed loop still serves the lane.
        assert asyncio.run(again()) == 7

    @contract_test
    async def test_a_background_call_that_fails_is_logged(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        worker = Worker("test-post")
        worker.post(lambda: 1 // 0)
        await worker.stop(lambda: None)
        assert [record.getMessage() for record in caplog.records] == [
            "a background call on test-post failed"
        ]

    @contract_test
    async def test_calls_not_yet_reported_back_are_counted_per_loop(self) -> None:
        worker = Worker("test-in-flight")
        release = threading.Event()
        assert calls_in_flight() == 0
        blocked = worker.submit(lambda: release.wait(5))
        queued = worker.submit(lambda: 1 // 0)
        assert calls_in_flight() == 2
        release.set()
        assert await blocked is True
        with pytest.raises(ZeroDivisionError):
            await queued
        assert calls_in_flight() == 0
        await worker.stop(lambda: None)
        assert calls_in_flight() == 0


class TestPoolFairness:
    def test_a_busy_lane_yields_its_thread_to_a_waiting_lane(self) -> None:
        pool = worker_module._Pool(1)
        busy, other = worker_module._Lane(), worker_module._Lane()
        order: list[str] = []
        gate, done = threading.Event(), threading.Event()

        def record(name: str, *, wait: bool = False, last: bool = False) -> Callable[[], None]:
            def call() -> None:
                if wait:
                    gate.wait(5)
                order.append(name)
                if last:
                    done.set()

            return call

        pool.push(busy, record("busy-0", wait=True))
        for number in range(1, 40):
            pool.push(busy, record(f"busy-{number}", last=number == 39))
        pool.push(other, record("other"))
        gate.set()
        assert done.wait(5)
        turn = worker_module._TURN
        assert order[:turn] == [f"busy-{number}" for number in range(turn)]
        assert order[turn] == "other"
        assert order[turn + 1 :] == [f"busy-{number}" for number in range(turn, 40)]
        assert pool.threads == 1


def _raise(error: Exception) -> str:
    raise error
