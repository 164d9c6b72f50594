"""Gather: calls that arrive together are served as one batch, each with its own outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from session_schedule.session.gather import Gather


class Recorder:
    """A batch and a single call that record what they were given."""

    def __init__(self, *, fail_batch: bool = False, gate: asyncio.Event | None = None) -> None:
        self.batches: list[list[int]] = []
        self.singles: list[int] = []
        self.discarded: list[str] = []
        self.fail_batch = fail_batch
        self.gate = gate

    async def batch(self, arguments: Sequence[int]) -> list[str | Exception]:
        self.batches.append(list(arguments))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_batch:
            raise RuntimeError("the whole batch failed")
        return [ValueError(f"odd {a}") if a % 2 else f"r{a}" for a in arguments]

    async def single(self, argument: int) -> str:
        self.singles.append(argument)
        if argument % 2:
            raise ValueError(f"odd {argument} alone")
        return f"s{argument}"

    async def discard(self, result: str) -> None:
        self.discarded.append(result)


def gather(recorder: Recorder, *, limit: int = 100, eager: bool = False) -> Gather[int, str]:
    return Gather(
        "test",
        recorder.batch,
        recorder.single,
        limit=limit,
        discard=recorder.discard,
        eager=eager,
    )


async def outcomes(calls: Sequence[asyncio.Future[str]]) -> list[str]:
    done = await asyncio.gather(*calls, return_exceptions=True)
    return [str(outcome) for outcome in done]


async def test_calls_of_one_turn_of_the_loop_go_together_each_with_its_own_outcome() -> None:
    recorder = Recorder()
    gathered = gather(recorder)
    calls = [asyncio.ensure_future(gathered.call(a)) for a in (2, 3, 4)]
    assert await outcomes(calls) == ["r2", "odd 3", "r4"]
    assert recorder.batches == [[2, 3, 4]]
    assert recorder.singles == []
    assert gathered.batches == 1


async def test_a_batch_takes_at_most_limit_calls_in_the_order_they_came() -> None:
    recorder = Recorder()
    gathered = gather(recorder, limit=2)
    calls = [asyncio.ensure_future(gathered.call(a)) for a in (2, 4, 6, 8, 10)]
    assert await outcomes(calls) == ["r2", "r4", "r6", "r8", "r10"]
    assert recorder.batches == [[2, 4], [6, 8], [10]]


async def test_calls_that_arrive_while_a_batch_runs_wait_for_the_next() -> None:
    gate = asyncio.Event()
    recorder = Recorder(gate=gate)
    gathered = gather(recorder)
    first = [asyncio.ensure_future(gathered.call(a)) for a in (2, 4)]
    await asyncio.sleep(0.01)
    later = [asyncio.ensure_future(gathered.call(a)) for a in (6, 8)]
    await asyncio.sleep(0.01)
    assert recorder.batches == [[2, 4]]
    gate.set()
    assert await outcomes(first + later) == ["r2", "r4", "r6", "r8"]
    assert recorder.batches == [[2, 4], [6, 8]]


async def test_a_batch_that_raises_fails_none_of_its_calls_each_is_served_alone() -> None:
    recorder = Recorder(fail_batch=True)
    gathered = gather(recorder)
    calls = [asyncio.ensure_future(gathered.call(a)) for a in (2, 3)]
    assert await outcomes(calls) == ["s2", "odd 3 alone"]
    assert recorder.batches == [[2, 3]]
    assert sorted(recorder.singles) == [2, 3]


async def test_an_eager_call_alone_is_served_at_once_and_those_behind_it_go_together() -> None:
    recorder = Recorder()
    release = asyncio.Event()

    async def slow_single(argument: int) -> str:
        recorder.singles.append(argument)
        await release.wait()
        return f"s{argument}"

    gathered: Gather[int, str] = Gather("test", recorder.batch, slow_single, limit=100, eager=True)
    alone = asyncio.ensure_future(gathered.call(2))
    await asyncio.sleep(0.01)
    assert recorder.singles == [2]
    behind = [asyncio.ensure_future(gathered.call(a)) for a in (4, 6)]
    await asyncio.sleep(0.01)
    assert recorder.batches == []
    release.set()
    assert await outcomes([alone, *behind]) == ["s2", "r4", "r6"]
    assert recorder.batches == [[4, 6]]


async def test_a_cancelled_caller_is_left_out_of_the_batch_it_had_not_reached() -> None:
    recorder = Recorder()
    gathered = gather(recorder)
    kept = asyncio.ensure_future(gathered.call(2))
    cancelled = asyncio.ensure_future(gathered.call(4))
    await asyncio.sleep(0)  # both queued; the batch starts at the next turn
    cancelled.cancel()
    assert await kept == "r2"
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert recorder.batches == [[2]]
    assert recorder.discarded == []


async def test_what_a_cancelled_caller_acquired_is_discarded_not_lost() -> None:
    gate = asyncio.Event()
    recorder = Recorder(gate=gate)
    gathered = gather(recorder)
    kept = asyncio.ensure_future(gathered.call(2))
    cancelled = asyncio.ensure_future(gathered.call(4))
    await asyncio.sleep(0.01)  # the batch holds both and waits at the gate
    cancelled.cancel()
    gate.set()
    assert await kept == "r2"
    for _ in range(5):
        await asyncio.sleep(0)
    assert recorder.discarded == ["r4"]


def test_a_limit_below_one_is_refused() -> None:
    recorder = Recorder()
    with pytest.raises(ValueError) as caught:
        gather(recorder, limit=0)
    assert str(caught.value) == "limit must be at least 1, not 0"
