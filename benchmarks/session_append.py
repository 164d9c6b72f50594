"""Append + barrier latency per Session backend, against a raw write + fsync in the same run.

    python3 dev.py bench session_append [--iterations N] [--rounds R] [--dir PATH]

Each iteration measures, interleaved so that all of them see the same disk: a raw ``os.write``
of a line of the same size as the JSONL entry line plus ``os.fsync`` (the baseline), then one
``append`` + ``await barrier()`` on each backend. Group commit is measured per backend as the
time of 100 appends followed by one barrier against 100 x (append + barrier), over R rounds.
The payload is a typical ``schedule/change`` create entry.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from session_schedule.core.changes import create_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import parse_instant
from session_schedule.core.records import AtScheduleRecord
from session_schedule.session import (
    JsonlSessionStore,
    LogHandle,
    MemorySessionStore,
    SqliteSessionStore,
)
from session_schedule.session.codec import encode_payload, entry_line
from session_schedule.session.worker import Worker

NOW = parse_instant("2026-05-01T09:00:00.000Z")
PAYLOAD = create_change(
    AtScheduleRecord(
        id=make_schedule_id(1),
        prompt="check whether the nightly export finished and tell me what failed, if anything",
        scheduled_at="2026-05-02T07:30:00.000Z",
    )
)
GROUP = 100


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def timed(handle: LogHandle) -> float:
    start = time.perf_counter_ns()
    handle.append("schedule/change", PAYLOAD)
    await handle.barrier()
    return (time.perf_counter_ns() - start) / 1_000


def raw_writer(path: Path, line: bytes) -> Callable[[], float]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def once() -> float:
        start = time.perf_counter_ns()
        os.write(fd, line)
        os.fsync(fd)
        return (time.perf_counter_ns() - start) / 1_000

    return once


async def group_commit(handle: LogHandle, rounds: int) -> tuple[list[float], list[float], int, int]:
    """Per round: µs for 100 appends + 1 barrier and for 100 x (append + barrier); flushes."""
    grouped: list[float] = []
    single: list[float] = []
    grouped_flushes = single_flushes = 0
    for _ in range(rounds):
        flushes = handle.flush_count
        start = time.perf_counter_ns()
        for _ in range(GROUP):
            handle.append("schedule/change", PAYLOAD)
        await handle.barrier()
        grouped.append((time.perf_counter_ns() - start) / 1_000)
        grouped_flushes += handle.flush_count - flushes
        flushes = handle.flush_count
        start = time.perf_counter_ns()
        for _ in range(GROUP):
            handle.append("schedule/change", PAYLOAD)
            await handle.barrier()
        single.append((time.perf_counter_ns() - start) / 1_000)
        single_flushes += handle.flush_count - flushes
    return grouped, single, grouped_flushes, single_flushes


async def hand_off(samples: int) -> list[float]:
    """µs for a no-op round trip event loop -> session thread -> event loop."""
    worker = Worker("bench-hand-off")
    times: list[float] = []
    for _ in range(samples):
        start = time.perf_counter_ns()
        await worker.run(lambda: None)
        times.append((time.perf_counter_ns() - start) / 1_000)
    await worker.stop(lambda: None)
    return times


async def main(iterations: int, rounds: int, directory: Path) -> None:
    _, data = encode_payload("schedule/change", PAYLOAD)
    line = entry_line("schedule/change", data)
    raw = raw_writer(directory / "raw.jsonl", line)
    jsonl = await JsonlSessionStore(directory / "jsonl").create(now=NOW)
    sqlite = await SqliteSessionStore(directory / "sessions.db").create(now=NOW)
    memory = await MemorySessionStore().create(now=NOW)
    handles: dict[str, LogHandle] = {"jsonl": jsonl, "sqlite": sqlite, "memory": memory}
    samples: dict[str, list[float]] = {"raw write+fsync": [], **{name: [] for name in handles}}
    for _ in range(10):  # warm-up: threads started, files allocated
        raw()
        for handle in handles.values():
            await timed(handle)
    for _ in range(iterations):
        samples["raw write+fsync"].append(raw())
        for name, handle in handles.items():
            samples[name].append(await timed(handle))

    versions = f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    print(f"{versions}, {os.cpu_count()} CPUs")
    print(
        f"directory {directory}; entry line {len(line)} bytes; {iterations} iterations, interleaved"
    )
    print()
    print("append + barrier (µs)   p50      p90      p99   p50 / raw")
    baseline = statistics.median(samples["raw write+fsync"])
    for name, values in samples.items():
        p50 = statistics.median(values)
        print(
            f"{name:<20} {p50:8.1f} {percentile(values, 0.9):8.1f} {percentile(values, 0.99):8.1f}"
            f"   {p50 / baseline:6.2f}"
        )
    print()
    handoff = await hand_off(iterations)
    print(
        f"{'thread hand-off':<20} {statistics.median(handoff):8.1f} {percentile(handoff, 0.9):8.1f}"
        f" {percentile(handoff, 0.99):8.1f}   (no-op: loop -> session thread -> loop)"
    )
    print()
    print(f"group commit, {rounds} rounds (median µs per round of {GROUP} entries; flushes in all)")
    print("backend     100 appends + 1 barrier   100 x (append + barrier)   speed-up")
    for name in ("jsonl", "sqlite"):
        grouped, single, grouped_flushes, single_flushes = await group_commit(handles[name], rounds)
        grouped_p50, single_p50 = statistics.median(grouped), statistics.median(single)
        print(
            f"{name:<10} {grouped_p50:13.0f} ({grouped_flushes:>4} flushes)"
            f" {single_p50:15.0f} ({single_flushes:>4} flushes)"
            f" {single_p50 / grouped_p50:9.1f}x"
        )
    for handle in handles.values():
        await handle.close()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse(sys.argv[1:])
    with tempfile.TemporaryDirectory(dir=arguments.dir) as temporary:
        asyncio.run(main(arguments.iterations, arguments.rounds, Path(temporary)))
