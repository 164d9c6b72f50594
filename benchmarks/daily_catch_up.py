"""Catch-up of a daily reminder: the latest due occurrence, the skipped count and the next target.

For downtimes from one day to a thousand years, the closed form (``latest_daily_due`` plus
``next_daily_target``) is timed against a baseline measured in the same run: enumerating every
listed date of the downtime and resolving each in the zone, as a scheduler without a closed form
would (only for the downtimes where that finishes in reasonable time). The closed form's time
should not grow with the downtime.

    python3 dev.py bench daily_catch_up [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from session_schedule.core.daily import (
    first_after,
    latest_daily_due,
    listed_from,
    make_rule,
    next_daily_target,
    occurrence_on,
    rule_of,
)
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.records import DailyScheduleRecord
from session_schedule.core.time_input import load_zone

DAY = 86_400_000
DOWNTIMES = (
    ("1 day", 1),
    ("1 month", 30),
    ("1 year", 365),
    ("10 years", 3_652),
    ("1000 years", 365_242),
)
ENUMERATED_UP_TO = 3_652
ZONES = ("America/New_York", "Australia/Lord_Howe", "Asia/Tokyo")


def record(zone: str) -> DailyScheduleRecord:
    rule = make_rule(9 * 3_600_000, load_zone(zone), ("mon", "tue", "wed", "thu", "fri"))
    found = first_after(rule, parse_instant("2026-11-29T20:00:00.000Z"))
    if found is None:
        raise SystemExit(f"no occurrence in {zone}")
    return DailyScheduleRecord(
        id=ScheduleId("sch_1"),
        prompt="standup",
        local_time="09:00:00.000",
        time_zone=zone,
        weekdays=["mon", "tue", "wed", "thu", "fri"],
        scheduled_at=format_instant(Instant(found[1])),
    )


def closed_form(reminder: DailyScheduleRecord, decided_at: Instant) -> int:
    _, skipped = latest_daily_due(reminder, decided_at)
    next_daily_target(reminder, decided_at)
    return skipped


def enumeration(reminder: DailyScheduleRecord, decided_at: Instant) -> int:
    rule = rule_of(reminder)
    found = first_after(rule, parse_instant(reminder.scheduled_at) - 1)
    if found is None:
        return 0
    day, due = found[0], 0
    while occurrence_on(rule, day) <= decided_at:
        due += 1
        day = listed_from(rule, day + 1)
    return due - 1


def timed(
    function: Callable[[DailyScheduleRecord, Instant], int],
    reminder: DailyScheduleRecord,
    decided_at: Instant,
    repeat: int,
) -> tuple[float, int]:
    """The median seconds of ``repeat`` runs, and the result."""
    samples = []
    result = 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = function(reminder, decided_at)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    arguments = parser.parse_args()
    print(f"{'zone':<22} {'downtime':<11} {'skipped':>9} {'closed form':>12} {'enumeration':>12}")
    for zone in ZONES:
        reminder = record(zone)
        for label, days in DOWNTIMES:
            decided_at = Instant(parse_instant(reminder.scheduled_at) + days * DAY + 3_600_000)
            fast, skipped = timed(closed_form, reminder, decided_at, arguments.repeat)
            slow_text = "-"
            if days <= ENUMERATED_UP_TO:
                repeat = max(1, arguments.repeat // max(1, days // 10))
                slow, counted = timed(enumeration, reminder, decided_at, repeat)
                if counted != skipped:
                    raise SystemExit(
                        f"{zone}, {label}: enumerated {counted}, closed form {skipped}"
                    )
                slow_text = f"{slow * 1e6:,.0f} µs"
            print(f"{zone:<22} {label:<11} {skipped:>9,} {fast * 1e6:>9,.1f} µs {slow_text:>12}")


if __name__ == "__main__":
    main()
