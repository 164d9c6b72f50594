"""Catch-up of reminders managed in place (SPEC §11): snoozed, paused, resumed, bounded and late.

For downtimes from one day to a thousand years, each case folds a one-reminder log, then times
one decision after the downtime: the misses (``plan_misses``), the delivery (``plan_delivery``)
and applying their changes to the fold, then the next wake-up — the work the live owner does
for an overdue reminder, framing aside. Each kind of recurring reminder (``every``, ``daily``,
``calendar``) is snoozed, paused (the decision finds nothing due), resumed half way through the
downtime, bounded by an ``ends.until`` that passes half way through it (the decision delivers
the last occurrence up to it and ends the record), or too late (a ``miss``); beside them, a
plain reminder of the kind (no SPEC §11 field), the figure the catch-up entries of the baselines
give. The time should not grow with the downtime for any case.

    python3 dev.py bench managed_catch_up [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Final, Protocol

from session_schedule.core.calendar import parse_calendar
from session_schedule.core.changes import (
    ScheduleChange,
    create_change,
    pause_change,
    resume_change,
    snooze_change,
)
from session_schedule.core.daily import first_after, make_rule
from session_schedule.core.due import next_wakeup, plan_delivery, plan_misses
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import MAX_INSTANT, Instant, format_instant, parse_instant
from session_schedule.core.records import (
    CalendarScheduleRecord,
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


def calendar(**options: object) -> CalendarScheduleRecord:
    found = parse_calendar(
        {"rule": "FREQ=WEEKLY;BYDAY=MO,WE,FR", "time": "09:00", "time_zone": "Europe/Paris"}, START
    )
    return CalendarScheduleRecord(
        id=SID,
        prompt="standup",
        rule=found.rule,
        local_time=found.local_time,
        time_zone=found.time_zone,
        start_date=found.start_date,
        scheduled_at=format_instant(found.first_target),
        **options,  # type: ignore[arg-type]
    )


class Kind(Protocol):
    """A record of one kind, with the SPEC §11 fields given."""

    def __call__(self, **options: object) -> ScheduleRecord: ...


FAR: Final = format_instant(Instant(MAX_INSTANT))
PAUSED: Final = "paused"


def cases() -> list[tuple[str, Callable[[int], list[ScheduleChange]]]]:
    """Each case: a name, and the log of one reminder for a downtime of ``days``."""

    def plain(record: ScheduleRecord) -> Callable[[int], list[ScheduleChange]]:
        return lambda _days: [create_change(record)]

    def snoozed(record: ScheduleRecord) -> Callable[[int], list[ScheduleChange]]:
        return lambda _days: [
            create_change(record),
            snooze_change(SID, Instant(START + 3_600_000)),
        ]

    def paused(record: ScheduleRecord) -> Callable[[int], list[ScheduleChange]]:
        return lambda _days: [create_change(record), pause_change(SID)]

    def resumed(record: ScheduleRecord) -> Callable[[int], list[ScheduleChange]]:
        # Paused at once, resumed half way through the downtime.
        return lambda days: [
            create_change(record),
            pause_change(SID),
            resume_change(SID, Instant(START + days * DAY // 2)),
        ]

    def bounded(kind: Kind) -> Callable[[int], list[ScheduleChange]]:
        # An ``ends.until`` half way through the downtime (two days on at least, after the
        # first occurrence of every kind).
        def log(days: int) -> list[ScheduleChange]:
            until = format_instant(Instant(START + max(days * DAY // 2, 2 * DAY)))
            return [create_change(kind(ends=Ends(until=until, max_runs=None)))]

        return log

    rows: list[tuple[str, Callable[[int], list[ScheduleChange]]]] = []
    for name, kind in (("every", every), ("daily", daily), ("calendar", calendar)):
        rows += [
            (f"{name}, plain", plain(kind())),
            (f"{name}, snoozed", snoozed(kind(ends=Ends(until=FAR, max_runs=None)))),
            (f"{name}, {PAUSED}", paused(kind(ends=Ends(until=None, max_runs=1_000)))),
            (f"{name}, resumed", resumed(kind(ends=Ends(until=None, max_runs=1_000)))),
            (f"{name}, bounded", bounded(kind)),
            (f"{name}, late (miss)", plain(kind(max_lateness_seconds=60))),
        ]
    return rows


def decide(state: ScheduleFold, now: Instant) -> int:
    """One decision at ``now``: append the misses and the delivery's changes, then find the
    next wake-up; how many changes."""
    changes: list[ScheduleChange] = list(plan_misses(state, now))
    for change in changes:
        state.apply(change)
    delivery = plan_delivery(state, now)
    if delivery is not None:
        for change in delivery.changes:
            state.apply(change)
        changes += delivery.changes
    next_wakeup(state)
    return len(changes)


def timed(log: list[ScheduleChange], now: Instant, repeat: int, *, paused: bool) -> float:
    """The median seconds of one decision at ``now`` over a fresh fold of ``log``."""
    samples = []
    for _ in range(repeat):
        state = ScheduleFold()
        state.replay(enumerate(log))
        state.earliest_every()  # indexed, as the live owner's fold is
        start = time.perf_counter()
        if (decide(state, now) == 0) != paused:
            raise SystemExit("a paused reminder was delivered, or another was not")
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    arguments = parser.parse_args()
    print(f"{'case':<24}" + "".join(f"{label:>13}" for label, _ in DOWNTIMES))
    for name, log_for in cases():
        row = f"{name:<24}"
        for _, days in DOWNTIMES:
            now = Instant(START + (days + 3) * DAY)
            seconds = timed(log_for(days), now, arguments.repeat, paused=PAUSED in name)
            row += f"{seconds * 1e6:>10,.1f} µs"
        print(row)


if __name__ == "__main__":
    main()
