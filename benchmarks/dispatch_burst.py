"""Many sessions dispatching in the same second: barrier latency and how long the loop stalls.

    python3 dev.py bench dispatch_burst [--sessions N] [--rounds R] [--spread S] [--dir PATH]

``N`` JSONL sessions are open in one process (default store settings). In each of ``R`` rounds,
every session appends the ``schedule/change`` dispatch of one of its one-shots and awaits its
barrier, all started in the same pass of the loop — what a host does when ``N`` sessions are due
in the same second.
Measured per round:

- **latency**: from the start of the round to each barrier's return, p50 / p99 / max;
- **loop stall**: the longest gap between the ticks of a task that asks to run every
  millisecond meanwhile, minus that millisecond (how long timers of other sessions would wait);

for a store with the default settings (a lone barrier fsyncs on the loop's thread while no
barrier of another session is at work and no timer of the loop is due before that fsync would
end) and for one
with ``flush_on_loop=False`` (every flush on the session's worker, the pool's threads), next to
two baselines in the same run, on ``N`` plain files of the same directory: one ``write`` +
``fsync`` per file in turn on the loop's thread, and the same calls spread over a pool of 32
threads.

With ``--spread S`` (seconds), the dispatches of a round are not started together: each
session's is due at its own instant, drawn uniformly (fixed seed) over ``S`` seconds, and
started by a ``loop.call_at`` timer then — ``N`` one-shots due within ``S`` seconds. Latency
is then lateness: from the instant a dispatch was due to its barrier's return. The baselines
are the same timers with nothing to do (bare timers) and with one ``write`` + ``fsync`` of a
plain file on the loop's thread (one fsync per dispatch, in line). It also counts the store's
``fsync`` calls made on the loop's thread and on the workers.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Final

from session_schedule.core.changes import create_change, dispatch_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant
from session_schedule.core.records import AtScheduleRecord
from session_schedule.session import JsonlSessionStore
from session_schedule.session.jsonl import JsonlSessionHandle

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

NOW: Final = Instant(1_764_000_000_000)
LINE: Final = (
    b'{"type":"schedule/change","data":{"version":1,"operation":"dispatch","id":"sch_1"}}\n'
)


def quantile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def with_ticker(work: Callable[[], Awaitable[list[float]]]) -> tuple[list[float], float]:
    """``work()``'s latencies (ms), and the longest stall of a 1 ms ticker meanwhile (ms)."""
    stalls: list[float] = []
    running = True

    async def tick() -> None:
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            stalls.append((now - last) * 1000 - 1)
            last = now

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0.01)
    latencies = await work()
    running = False
    await ticker
    return latencies, max(stalls, default=0.0)


async def sessions_round(handles: list[JsonlSessionHandle], number: int) -> list[float]:
    started = time.perf_counter()
    latencies: list[float] = []

    async def one(handle: JsonlSessionHandle) -> None:
        handle.append("schedule/change", dispatch_change(make_schedule_id(number)))
        await handle.barrier()
        latencies.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*(one(handle) for handle in handles))
    return latencies


async def spread_round(
    starts: list[Callable[[], Awaitable[None]] | Callable[[], None]], offsets: list[float]
) -> list[float]:
    """Lateness (ms) of ``starts[i]()`` run by a timer due ``offsets[i]`` seconds from now: from
    the instant it was due until it returned (or, for a coroutine function, its result did)."""
    loop = asyncio.get_running_loop()
    origin = loop.time() + 0.05
    latencies: list[float] = []
    done: list[asyncio.Future[None]] = []

    def fire(start: Callable[[], Awaitable[None]] | Callable[[], None], due: float) -> None:
        result = start()
        if result is None:
            latencies.append((loop.time() - due) * 1000)
            return

        async def finish(awaited: Awaitable[None]) -> None:
            await awaited
            latencies.append((loop.time() - due) * 1000)

        done.append(asyncio.ensure_future(finish(result)))

    for start, offset in zip(starts, offsets, strict=True):
        loop.call_at(origin + offset, fire, start, origin + offset)
    await asyncio.sleep(max(offsets, default=0.0) + 0.06)
    while len(latencies) < len(starts):
        await asyncio.gather(*done)
        await asyncio.sleep(0.001)
    return latencies


class FsyncThreads:
    """Counts the ``fsync`` calls made on the loop's thread and on others while on."""

    def __init__(self) -> None:
        self.on = False
        self.on_loop = 0
        self.elsewhere = 0
        self._real = os.fsync
        self._loop_thread = threading.current_thread()

    def __enter__(self) -> FsyncThreads:
        os.fsync = self._fsync
        return self

    def __exit__(self, *_: object) -> None:
        os.fsync = self._real

    def _fsync(self, fd: FileDescriptorLike) -> None:
        if self.on:
            if threading.current_thread() is self._loop_thread:
                self.on_loop += 1
            else:
                self.elsewhere += 1
        self._real(fd)


def fsync_one(fd: int) -> None:
    os.write(fd, LINE)
    os.fsync(fd)


async def on_the_loop(fds: list[int]) -> list[float]:
    started = time.perf_counter()
    latencies: list[float] = []
    for fd in fds:
        fsync_one(fd)
        latencies.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0)
    return latencies


async def on_threads(fds: list[int], pool: ThreadPoolExecutor) -> list[float]:
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    latencies: list[float] = []

    async def one(fd: int) -> None:
        await loop.run_in_executor(pool, fsync_one, fd)
        latencies.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*(one(fd) for fd in fds))
    return latencies


def report(label: str, rounds: list[tuple[list[float], float]]) -> float:
    p99s = [quantile(latencies, 0.99) for latencies, _ in rounds]
    p50s = [quantile(latencies, 0.5) for latencies, _ in rounds]
    maxes = [max(latencies) for latencies, _ in rounds]
    stalls = [stall for _, stall in rounds]
    print(
        f"  {label:<34} p50 {statistics.median(p50s):7.1f} ms  p99 {statistics.median(p99s):7.1f}"
        f" ms  max {statistics.median(maxes):7.1f} ms  loop stall {statistics.median(stalls):7.1f}"
        " ms"
    )
    return statistics.median(p99s)


async def open_sessions(
    store: JsonlSessionStore, sessions: int, rounds: int
) -> list[JsonlSessionHandle]:
    handles = [await store.create(now=NOW) for _ in range(sessions)]
    for handle in handles:
        # One one-shot per round, for that round's dispatch.
        for number in range(1, rounds + 1):
            record = AtScheduleRecord(
                id=make_schedule_id(number),
                prompt=f"reminder {number}",
                scheduled_at=format_instant(Instant(NOW + number * 60_000)),
            )
            handle.append("schedule/change", create_change(record))
    await asyncio.gather(*(handle.barrier() for handle in handles))
    return handles


async def run_spread(sessions: int, rounds: int, spread: float, directory: Path) -> None:
    """Each round: one dispatch per session, each due at its own instant within ``spread`` s."""
    with FsyncThreads() as counting:
        await spread_rounds(sessions, rounds, spread, directory, counting)


async def spread_rounds(
    sessions: int, rounds: int, spread: float, directory: Path, counting: FsyncThreads
) -> None:
    on_spot = await open_sessions(JsonlSessionStore(directory / "default"), sessions, rounds)
    raw = directory / "raw"
    raw.mkdir()
    fds = [
        os.open(raw / f"{number}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        for number in range(sessions)
    ]
    draw = random.Random(25)
    kinds: dict[str, list[tuple[list[float], float]]] = {
        "bare timers": [],
        "raw write+fsync in line on the loop": [],
        "dispatch + barrier, default store": [],
    }
    for number in range(1, rounds + 1):
        offsets = [draw.uniform(0, spread) for _ in range(sessions)]

        def dispatch(handle: JsonlSessionHandle, number: int = number) -> Awaitable[None]:
            handle.append("schedule/change", dispatch_change(make_schedule_id(number)))
            return handle.barrier()

        starts: dict[str, list[Callable[[], Awaitable[None]] | Callable[[], None]]] = {
            "bare timers": [lambda: None] * sessions,
            "raw write+fsync in line on the loop": [functools.partial(fsync_one, fd) for fd in fds],
            "dispatch + barrier, default store": [
                functools.partial(dispatch, handle) for handle in on_spot
            ],
        }
        # Interleaved, so that every kind sees the same load.
        for label, kind_starts in starts.items():
            counting.on = label == "dispatch + barrier, default store"
            kinds[label].append(
                await with_ticker(functools.partial(spread_round, kind_starts, offsets))
            )
            counting.on = False
    for fd in fds:
        os.close(fd)
    for handle in on_spot:
        await handle.close()
    print(
        f"{sessions} sessions, one dispatch each due within {spread:g} s, {rounds} rounds "
        "(lateness; medians over rounds):"
    )
    p99s = {label: report(label, results) for label, results in kinds.items()}
    schedule = p99s["dispatch + barrier, default store"]
    print(
        f"  the store's fsyncs: {counting.on_loop} on the loop's thread, "
        f"{counting.elsewhere} on the workers"
    )
    print(
        f"  p99 ratio: {schedule / p99s['bare timers']:.2f}x bare timers, "
        f"{schedule / p99s['raw write+fsync in line on the loop']:.2f}x raw in line; "
        "target p99 <= 10 ms"
    )


async def run(sessions: int, rounds: int, directory: Path) -> None:
    on_spot = await open_sessions(JsonlSessionStore(directory / "default"), sessions, rounds)
    threaded_store = JsonlSessionStore(directory / "threaded", flush_on_loop=False)
    off_loop = await open_sessions(threaded_store, sessions, rounds)
    raw = directory / "raw"
    raw.mkdir()
    fds = [
        os.open(raw / f"{number}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        for number in range(sessions)
    ]
    default: list[tuple[list[float], float]] = []
    workers: list[tuple[list[float], float]] = []
    loop_baseline: list[tuple[list[float], float]] = []
    thread_baseline: list[tuple[list[float], float]] = []
    with ThreadPoolExecutor(max_workers=32) as pool:
        for number in range(rounds):
            # Interleaved, so that every kind sees the same load.
            default.append(
                await with_ticker(functools.partial(sessions_round, on_spot, number + 1))
            )
            workers.append(
                await with_ticker(functools.partial(sessions_round, off_loop, number + 1))
            )
            loop_baseline.append(await with_ticker(lambda: on_the_loop(fds)))
            thread_baseline.append(await with_ticker(lambda: on_threads(fds, pool)))
    for fd in fds:
        os.close(fd)
    for handle in on_spot + off_loop:
        await handle.close()
    print(f"{sessions} sessions, {rounds} rounds (medians over rounds):")
    report("barriers, default store", default)
    p99 = report("barriers, flush_on_loop=False", workers)
    on_loop = report("raw write+fsync in turn on the loop", loop_baseline)
    threaded = report("raw write+fsync on 32 threads", thread_baseline)
    print(
        f"  flush_on_loop=False p99 ratio: {p99 / on_loop:.2f}x the in-turn baseline, "
        f"{p99 / threaded:.2f}x the threaded one"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--spread", type=float, default=0.0, help="seconds the dispatches are due within"
    )
    parser.add_argument("--dir", type=Path, default=None)
    arguments = parser.parse_args(argv)
    print(f"load average: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    with tempfile.TemporaryDirectory(dir=arguments.dir) as temporary:
        if arguments.spread > 0:
            asyncio.run(
                run_spread(arguments.sessions, arguments.rounds, arguments.spread, Path(temporary))
            )
        else:
            asyncio.run(run(arguments.sessions, arguments.rounds, Path(temporary)))


if __name__ == "__main__":
    main(sys.argv[1:])
