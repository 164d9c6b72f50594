"""The dedicated session thread: ordering, errors, cancellation, a loop that is gone."""

from __future__ import annotations

import asyncio
import functools
import threading

import pytest

from session_schedule.session.worker import Worker
from session_schedule.testing.session_contract import contract_test


def worker_threads(name: str) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == name]


class TestWorker:
    @contract_test
    async def test_calls_run_in_order_on_one_thread(self) -> None:
        worker = Worker("test-order")
        seen: list[tuple[int, str]] = []

        def record(number: int) -> None:
            seen.append((number, threading.current_thread().name))

        futures = [worker.submit(functools.partial(record, n)) for n in range(20)]
        await asyncio.gather(*futures)
        assert seen == [(n, "test-order") for n in range(20)]
        with pytest.raises(ZeroDivisionError):
            await worker.run(lambda: 1 // 0)
        assert await worker.run(lambda: 42) == 42
        await worker.stop(lambda: None)
        assert worker_threads("test-order") == []

    @contract_test
    async def test_a_failed_start_ends_the_thread(self) -> None:
        worker = Worker("test-failed-start")
        undone: list[object] = []
        with pytest.raises(OSError, match="no such thing"):
            await worker.start(lambda: _raise(OSError("no such thing")), undone.append)
        for _ in range(100):
            if not worker_threads("test-failed-start"):
                break
            await asyncio.sleep(0.001)
        assert worker_threads("test-failed-start") == []
        assert undone == []

    @contract_test
    async def test_a_cancelled_start_undoes_its_result_on_the_thread(self) -> None:
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
        release.set()
        for _ in range(200):
            if undone and not worker_threads("test-cancelled-start"):
                break
            await asyncio.sleep(0.001)
        assert undone == [("resource", "test-cancelled-start")]
        assert worker_threads("test-cancelled-start") == []

    @contract_test
    async def test_a_cancelled_start_whose_call_failed_has_nothing_to_undo(self) -> None:
        worker = Worker("test-cancelled-failure")
        release = threading.Event()
        undone: list[object] = []

        def fail() -> str:
            release.wait(5)
            raise OSError("late failure")

        starting = asyncio.ensure_future(worker.start(fail, undone.append))
        await asyncio.sleep(0.01)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        release.set()
        for _ in range(200):
            if not worker_threads("test-cancelled-failure"):
                break
            await asyncio.sleep(0.001)
        assert undone == []

    def test_a_result_for_a_closed_loop_is_dropped_quietly(self) -> None:
        release = threading.Event()
        holder: list[Worker] = []

        async def leave_early() -> None:
            worker = Worker("test-closed-loop")
            holder.append(worker)
            worker.submit(lambda: release.wait(5))

        asyncio.run(leave_early())
        release.set()
        holder[0]._end()
        for thread in worker_threads("test-closed-loop"):
            thread.join(5)
        assert worker_threads("test-closed-loop") == []


def _raise(error: Exception) -> str:
    raise error
