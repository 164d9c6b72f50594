"""Durable create through the tool call on JSONL, against one raw write + fsync of the same bytes.

Each iteration, interleaved so that all see the same disk: ``os.write`` of the create's entry
line plus ``os.fsync`` on a file in the same directory (the baseline), then
``ScheduleTools.call("schedule_create", …)`` on a JSONL session whose lone barriers fsync on the
event loop's thread (the default), then on one whose flushes all go to the session's thread.
With ``--pause MS``, the benchmark sleeps that long on the event loop before each measured
operation, as tool calls are apart in use: work one of them left to a session's thread (its
next-target record) then finishes before the next is timed (default 0: back to back).

Printed per row: p50, p99, the p50's ratio to the raw p50, and "extra": the median over the
iterations of each one's difference to the raw write + fsync of the same iteration, which
drifts less than the ratio when the disk's speed changes during a run.

    python3 dev.py bench durable_create [--iterations N] [--dir PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from session_schedule.core.changes import create_change, encode_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.records import AfterScheduleRecord
from session_schedule.core.rules import Limits
from session_schedule.runtime.clock import SystemClock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session import JsonlSessionStore
from session_schedule.session.lines import entry_line
from session_schedule.testing import FakeAgent
from session_schedule.tools import ScheduleTools

PROMPT = "Check whether the nightly build on main went green and summarise any failures."
ARGUMENTS = {"prompt": PROMPT, "after_seconds": 3600}


def create_line(number: int) -> bytes:
    """An entry line of the size a create writes."""
    record = AfterScheduleRecord(
        id=make_schedule_id(number),
        prompt=PROMPT,
        after_seconds=3600,
        scheduled_at="2026-11-30T19:00:00.000Z",
    )
    line, _ = entry_line(number, "schedule/change", encode_change(create_change(record)), 0)
    return line


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run(iterations: int, directory: Path, pause: float) -> None:
    settings = Settings(limits=Limits(max_active=iterations + 1))
    schedules = []
    for name, on_loop in (("loop", True), ("thread", False)):
        store = JsonlSessionStore(directory / name, flush_on_loop=on_loop)
        handle = await store.create(now=SystemClock().now())
        schedule = LiveSchedule(handle, FakeAgent(), settings=settings)
        await schedule.start()
        schedules.append((handle, schedule, ScheduleTools(schedule)))
    raw_fd = os.open(directory / "raw", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    raw: list[float] = []
    measured: list[list[float]] = [[], []]
    try:
        for number in range(1, iterations + 1):
            line = create_line(number)
            await asyncio.sleep(pause)
            started = time.perf_counter_ns()
            os.write(raw_fd, line)
            os.fsync(raw_fd)
            raw.append((time.perf_counter_ns() - started) / 1e3)
            for samples, (_, _, tools) in zip(measured, schedules, strict=True):
                await asyncio.sleep(pause)
                started = time.perf_counter_ns()
                result = await tools.call("schedule_create", ARGUMENTS)
                samples.append((time.perf_counter_ns() - started) / 1e3)
                if result.get("ok") is not True:
                    raise SystemExit(f"create failed: {result}")
    finally:
        os.close(raw_fd)
        for handle, schedule, _ in schedules:
            await schedule.close()
            await handle.close()
    base = statistics.median(raw)
    print(
        f"{iterations} iterations, entry line {len(create_line(1))} bytes, "
        f"{pause * 1e3:g} ms pause before each"
    )
    print(f"{'':<52}{'p50 µs':>9}{'p99 µs':>9}{'p50 ratio':>11}{'extra µs':>10}")
    rows = (
        ("raw os.write + os.fsync", raw),
        ("schedule_create, lone barrier fsyncs on the loop", measured[0]),
        ("schedule_create, every flush on the session thread", measured[1]),
    )
    for label, samples in rows:
        p50 = statistics.median(samples)
        # The median of each iteration's difference to its own raw write + fsync: what the
        # create costs beyond the fsync, steadier than the ratio when the disk's speed drifts.
        extra = statistics.median(sample - own for sample, own in zip(samples, raw, strict=True))
        print(
            f"{label:<52}{p50:9.0f}{percentile(samples, 0.99):9.0f}{p50 / base:11.2f}{extra:10.0f}"
        )
    print("target: <= 1.3 x raw (p50)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    parser.add_argument(
        "--pause", type=float, default=0.0, help="ms slept before each measured operation"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        asyncio.run(run(args.iterations, Path(directory), args.pause / 1e3))


if __name__ == "__main__":
    main()
