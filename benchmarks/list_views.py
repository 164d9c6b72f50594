"""``schedule_list`` at 0, 100 and 10,000 active reminders (memory store, fake clock).

Medians of ``LiveSchedule.active()``, ``ScheduleTools.call("schedule_list")`` (JSON-ready
builtins) and ``ScheduleTools.call_json`` (JSON text), each against the same call on an empty
schedule in the same run. Between calls the fake clock moves, so some reminders turn overdue.

    python3 dev.py bench list_views [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from session_schedule.core.rules import Limits
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session import MemorySessionStore
from session_schedule.testing import FakeAgent, FakeClock
from session_schedule.tools import ScheduleTools

NOW = "2026-11-29T20:00:00.000Z"
SIZES = (0, 100, 10_000)


async def median_us(call: Callable[[], Awaitable[object]], calls: int, clock: FakeClock) -> float:
    samples: list[float] = []
    for _ in range(calls):
        clock.jump(7)  # some reminders turn overdue as the calls go on (no delivery runs)
        started = time.perf_counter_ns()
        await call()
        samples.append((time.perf_counter_ns() - started) / 1e3)
    return statistics.median(samples)


async def measure(size: int, calls: int) -> dict[str, float]:
    clock = FakeClock(NOW)
    handle = await MemorySessionStore().create(now=clock.now())
    limits = Limits(max_active=max(size, 1))
    schedule = LiveSchedule(handle, FakeAgent(), clock=clock, settings=Settings(limits=limits))
    tools = ScheduleTools(schedule)
    await schedule.start()
    try:
        for index in range(size):
            await schedule.create({"prompt": f"reminder {index}", "after_seconds": 60 + index})
        _, views = await schedule.active()
        if len(views) != size:
            raise SystemExit(f"expected {size} active reminders, got {len(views)}")
        return {
            "LiveSchedule.active()": await median_us(schedule.active, calls, clock),
            'tools.call("schedule_list")': await median_us(
                lambda: tools.call("schedule_list"), calls, clock
            ),
            'tools.call_json("schedule_list")': await median_us(
                lambda: tools.call_json("schedule_list"), calls, clock
            ),
        }
    finally:
        await schedule.close()
        await handle.close()


async def run(calls: int) -> None:
    results = {size: await measure(size, calls) for size in SIZES}
    print(f"{'median µs (ratio to empty)':<36}" + "".join(f"{size:>22,}" for size in SIZES))
    for label in results[0]:
        empty = results[0][label]
        cells = "".join(
            f"{results[size][label]:>12.1f} ({results[size][label] / empty:6.1f}x)"
            for size in SIZES
        )
        print(f"{label:<36}{cells}")
    print("targets: <= 50 µs at 100 active, <= 2,000 µs at 10,000")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.calls))


if __name__ == "__main__":
    main()
