"""Catch-up of reminders managed in place (SPEC §11): snoozed, resumed, bounded and late ones.

For downtimes from one day to a thousand years, each case folds a one-reminder log, then times
one decision after the downtime: the misses (``plan_misses``), the delivery (``plan_delivery``)
and applying their changes to the fold — the work the live owner does for an overdue reminder,
framing aside. Beside it, the same for a plain reminder (no SPEC §11 field), the figure the
catch-up entries of the baselines give. The time should not grow with the downtime for any kind.

    python3 dev.py bench managed_catch_up [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Final

from session_schedule.core.changes import (
    ScheduleChange,
    create_change,
    pause_change,
    resume_change,
    snooze_change,
)
from session_schedule.core.daily import first_after, make_rule
from session_schedule.core.due import plan_delivery, plan_misses
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import MAX_INSTANT, Instant, format_instant, parse_instant
from session_schedule.core.records import (
    DailyScheduleRecord,
    Ends,
    EveryScheduleRecord,
    ScheduleRecord,
)
from session_schedule.core.time_input import load_zone

DAY = 86_400_000
START = parse_instant("2026-12-01T10:00:00.000Z")
DOWNTIMES = (
    ("1 day", 1),
    ("1 year", 365),
    ("10 years", 3_652),
    ("1000 years", 365_242),
)
SID = ScheduleId("sch_1")


def every(**options: object) -> EveryScheduleRecord:
    return EveryScheduleRecord(
        id=SID,
        prompt="stand up",
        every_seconds=300,
        scheduled_at=format_instant(Instant(START + 300_000)),
        **options,  # type: ignore[arg-type]
    )


def daily(**options: object) -> DailyScheduleRecord:
    rule = make_rule(9 * 3_600_000, load_zone("America/New_York"), ("mon", "wed", "fri"))
    found = first_after(rule, START)
    if found is None:
        raise SystemExit("no daily occurrence")
    return DailyScheduleRecord(
        id=SID,
        prompt="standup",
        local_time="09:00:00.000",
        time_zone="America/New_York",
        weekdays=["mon", "wed", "fri"],
        scheduled_at=format_instant(Instant(found[1])),
        **options,  # type: ignore[arg-type]
    )


FAR: Final = format_instant(Instant(MAX_INSTANT))


def cases() -> list[tuple[str, Callable[[int], list[ScheduleChange]]]]:
    """Each case: a name, and the log of one reminder for a downtime of ``days``."""

    def plain(record: ScheduleRecord) -> Callable[[int], list[ScheduleChange]]:
        return lambda _days: [create_change(record)]

    def snoozed(record: ScheduleRecord) -> Callable[[int], list[ScheduleChange]]:
        return lambda _days: [
            create_change(record),
            snooze_change(SID, Instant(START + 3_600_000)),
        ]

    def resumed(record: ScheduleRecord) -> Callable[[int], list[ScheduleChange]]:
        # Paused at once, resumed half way through the downtime.
        return lambda days: [
            create_change(record),
            pause_change(SID),
            resume_change(SID, Instant(START + days * DAY // 2)),
        ]

    return [
        ("every, plain", plain(every())),
        ("every, snoozed", snoozed(every(ends=Ends(until=FAR, max_runs=None)))),
        ("every, resumed", resumed(every(ends=Ends(until=None, max_runs=1_000)))),
        ("every, late (miss)", plain(every(max_lateness_seconds=60))),
        ("daily, plain", plain(daily())),
        ("daily, snoozed", snoozed(daily(ends=Ends(until=FAR, max_runs=None)))),
        ("daily, resumed", resumed(daily(ends=Ends(until=None, max_runs=1_000)))),
        ("daily, late (miss)", plain(daily(max_lateness_seconds=60))),
    ]


def decide(state: ScheduleFold, now: Instant) -> int:
    """One decision at ``now``: append the misses and the delivery's changes; how many."""
    changes: list[ScheduleChange] = list(plan_misses(state, now))
    for change in changes:
        state.apply(change)
    delivery = plan_delivery(state, now)
    if delivery is not None:
        for change in delivery.changes:
            state.apply(change)
        changes += delivery.changes
    return len(changes)


def timed(log: list[ScheduleChange], now: Instant, repeat: int) -> float:
    """The median seconds of one decision at ``now`` over a fresh fold of ``log``."""
    samples = []
    for _ in range(repeat):
        state = ScheduleFold()
        state.replay(enumerate(log))
        state.earliest_every()  # indexed, as the live owner's fold is
        start = time.perf_counter()
        if decide(state, now) == 0:
            raise SystemExit("nothing was decided")
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    arguments = parser.parse_args()
    print(f"{'case':<20}" + "".join(f"{label:>13}" for label, _ in DOWNTIMES))
    for name, log_for in cases():
        row = f"{name:<20}"
        for _, days in DOWNTIMES:
            now = Instant(START + (days + 3) * DAY)
            row += f"{timed(log_for(days), now, arguments.repeat) * 1e6:>10,.1f} µs"
        print(row)


if __name__ == "__main__":
    main()
