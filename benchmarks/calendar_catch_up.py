"""Catch-up of a calendar reminder: the latest due occurrence, the skipped count, the next target.

For downtimes from one day to a thousand years and for rules from the common (the first Monday of
the month) to the sparse (a large INTERVAL, BYSETPOS, 29 February, a fifth Friday), the closed
form (``latest_due`` plus ``next_target``) is timed beside the ``daily`` closed form of
``daily_catch_up`` and, for the downtimes where it finishes in reasonable time, beside walking
the occurrences one by one from the target, as a scheduler without a closed form would. Both
sides must agree on the skipped count. The time to build a rule's cycle table (once per rule and
process) is shown apart. The closed form's time should not grow with the downtime.

    python3 dev.py bench calendar_catch_up [--repeat R]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

from session_schedule.core import calendar
from session_schedule.core.calendar import (
    CalendarSchedule,
    first_after,
    latest_due,
    make_schedule,
    next_target,
    parse_rule,
)
from session_schedule.core.daily import first_after as daily_first_after
from session_schedule.core.daily import latest_daily_due, next_daily_target
from session_schedule.core.daily import make_rule as make_daily_rule
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, days_from_civil, format_instant, parse_instant
from session_schedule.core.records import DailyScheduleRecord
from session_schedule.core.time_input import load_zone

DAY = 86_400_000
ZONE = "Europe/Paris"
DOWNTIMES = (
    ("1 day", 1),
    ("1 month", 30),
    ("1 year", 365),
    ("10 years", 3_652),
    ("1000 years", 365_242),
)
ENUMERATED_UP_TO = 3_652
RULES = (
    "FREQ=MONTHLY;BYDAY=1MO",
    "FREQ=WEEKLY;INTERVAL=2;BYDAY=FR",
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=MONTHLY;BYDAY=5FR",
    "FREQ=MONTHLY;INTERVAL=997;BYDAY=-1SU",
    "FREQ=DAILY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=MONTHLY;BYMONTHDAY=-1;COUNT=100000",
)
CREATED = "2026-11-29T20:00:00.000Z"


def schedule(rule: str) -> CalendarSchedule:
    return make_schedule(
        parse_rule(rule), days_from_civil(2026, 11, 29), 9 * 3_600_000, load_zone(ZONE)
    )


def closed_form(reminder: CalendarSchedule, target: Instant, decided_at: Instant) -> int:
    _, skipped = latest_due(reminder, target, decided_at)
    next_target(reminder, decided_at)
    return skipped


def enumeration(reminder: CalendarSchedule, target: Instant, decided_at: Instant) -> int:
    due, instant = 0, target - 1
    while True:
        found = first_after(reminder, instant)
        if found is None or found[1] > decided_at:
            return due - 1
        due, instant = due + 1, found[1]


def daily_record() -> DailyScheduleRecord:
    rule = make_daily_rule(9 * 3_600_000, load_zone(ZONE), ("mon", "tue", "wed", "thu", "fri"))
    found = daily_first_after(rule, parse_instant(CREATED))
    if found is None:
        raise SystemExit("no daily occurrence")
    return DailyScheduleRecord(
        id=ScheduleId("sch_1"),
        prompt="standup",
        local_time="09:00:00.000",
        time_zone=ZONE,
        weekdays=["mon", "tue", "wed", "thu", "fri"],
        scheduled_at=format_instant(Instant(found[1])),
    )


def timed(function: Callable[[], int], repeat: int) -> tuple[float, int]:
    """The median seconds of ``repeat`` runs, and the result."""
    samples = []
    result = 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    arguments = parser.parse_args()
    repeat = arguments.repeat
    daily = daily_record()
    daily_target = parse_instant(daily.scheduled_at)
    print(f"zone {ZONE}, time 09:00, created {CREATED}; medians of {repeat} runs")
    print(f"{'rule':<46} {'downtime':<11} {'skipped':>9} {'closed form':>12} {'daily':>10} "
          f"{'enumeration':>12}")  # fmt: skip
    for text in RULES:
        reminder = schedule(text)
        calendar._cycle.cache_clear()
        started = time.perf_counter()
        target = next_target(reminder, parse_instant(CREATED))
        build = time.perf_counter() - started
        if target is None:
            raise SystemExit(f"{text}: no occurrence")
        print(f"{text:<46} first target {format_instant(target)}, table built in "
              f"{build * 1e3:,.1f} ms")  # fmt: skip
        for label, days in DOWNTIMES:
            decided_at = Instant(target + days * DAY + 3_600_000)
            fast, skipped = timed(
                functools.partial(closed_form, reminder, target, decided_at), repeat
            )
            daily_at = Instant(daily_target + days * DAY + 3_600_000)

            def daily_closed_form(at: Instant = daily_at) -> int:
                _, skipped = latest_daily_due(daily, at)
                next_daily_target(daily, at)
                return skipped

            baseline, _ = timed(daily_closed_form, repeat)
            slow_text = "-"
            if days <= ENUMERATED_UP_TO:
                slow, counted = timed(
                    functools.partial(enumeration, reminder, target, decided_at),
                    max(1, repeat // 20),
                )
                if counted != skipped:
                    raise SystemExit(
                        f"{text}, {label}: enumerated {counted}, closed form {skipped}"
                    )
                slow_text = f"{slow * 1e6:,.0f} µs"
            print(f"{'':<46} {label:<11} {skipped:>9,} {fast * 1e6:>9,.1f} µs "
                  f"{baseline * 1e6:>7,.1f} µs {slow_text:>12}")  # fmt: skip


if __name__ == "__main__":
    main()
