"""Occurrences of a ``daily`` rule: a local wall-clock time on listed days of the week (SPEC §10).

Rule 1 — every local date in the zone whose weekday is listed has exactly one occurrence: the
earliest instant at which the zone's wall clocks read that date and time or later. So a wall time
the zone shows once is that instant; a repeated one (an overlap) is its earlier instant; a skipped
one (a gap) is the instant the clocks jump; a date the zone skips entirely (Pacific/Apia,
2011-12-30) has its occurrence where its gap ends — which, for a time of 00:00, is also the next
date's occurrence: two dates, two occurrences, one instant.

Rule 2 — occurrences never decrease from one date to the next, so "the occurrences after ``X``"
are the dates from the first one whose occurrence is after ``X``. That date is found from the
local date of ``X``: a date whose wall time is at or before the wall clock at ``X`` has its
occurrence at or before ``X``, and only a backward jump of the clocks (at most about a day) can
push later dates' occurrences back before ``X``; so a handful of resolutions decide it.

Rule 3 — counting is calendar arithmetic: whole weeks times the number of listed days, plus the
remainder. Catch-up after any downtime costs the same few resolutions, never an enumeration.

Dates are day numbers since 1970-01-01 on the zone's local calendar (Monday is weekday 0), from
0001-01-01 to 9999-12-31; wall times are local milliseconds since 1970-01-01T00:00. No arithmetic
is done on aware datetimes: instants and wall times are integer milliseconds, and the zone is
consulted only to resolve one wall time or to read the clock at one instant.
"""

from __future__ import annotations

import functools
import zoneinfo
from dataclasses import dataclass
from typing import Final, final

from session_schedule.core.instants import MAX_INSTANT, MS_PER_DAY, Instant, days_from_civil
from session_schedule.core.records import WEEKDAYS, DailyScheduleRecord, Weekday, record_target
from session_schedule.core.time_input import (
    earliest_at_or_after,
    load_zone,
    parse_wall_time,
    wall_clock_at,
)

FIRST_DAY: Final = days_from_civil(1, 1, 1)
LAST_DAY: Final = days_from_civil(9999, 12, 31)
_EPOCH_WEEKDAY: Final = 3
"""1970-01-01 was a Thursday."""


@final
@dataclass(frozen=True, slots=True)
class DailyRule:
    """A ``daily`` rule, ready for arithmetic."""

    time_of_day: int
    """Milliseconds since local midnight."""
    zone: zoneinfo.ZoneInfo
    mask: int
    """Bit ``n`` set when weekday ``n`` (Monday = 0) is listed; never 0."""


def make_rule(
    time_of_day: int, zone: zoneinfo.ZoneInfo, weekdays: tuple[Weekday, ...]
) -> DailyRule:
    """The rule for a time of day in ``zone`` on ``weekdays`` (at least one)."""
    mask = sum(1 << WEEKDAYS.index(day) for day in set(weekdays))
    if not mask:
        raise ValueError("a daily rule lists at least one weekday")
    return DailyRule(time_of_day=time_of_day, zone=zone, mask=mask)


@functools.lru_cache(maxsize=1024)
def _record_rule(time: str, time_zone: str, weekdays: tuple[Weekday, ...]) -> DailyRule:
    return make_rule(parse_wall_time(time), load_zone(time_zone), weekdays)


def rule_of(record: DailyScheduleRecord) -> DailyRule:
    """The rule a (decoded, hence well-formed) ``daily`` record states."""
    return _record_rule(record.local_time, record.time_zone, tuple(record.weekdays))


def weekday_of(day: int) -> int:
    """The weekday of a day number, Monday = 0."""
    return (day + _EPOCH_WEEKDAY) % 7


def occurrence_on(rule: DailyRule, day: int) -> int:
    """The occurrence of local date ``day`` (listed or not): Rule 1.

    May lie past ``MAX_INSTANT`` (a late time on 9999-12-31 west of Greenwich).
    """
    return earliest_at_or_after(rule.zone, day * MS_PER_DAY + rule.time_of_day)


def listed_from(rule: DailyRule, day: int) -> int:
    """The first listed date on or after ``day`` (at most six days on: a weekday is listed)."""
    weekday, step = weekday_of(day), 0
    while not rule.mask >> ((weekday + step) % 7) & 1:
        step += 1
    return day + step


def listed_until(rule: DailyRule, day: int) -> int:
    """The last listed date on or before ``day`` (at most six days back)."""
    weekday, step = weekday_of(day), 0
    while not rule.mask >> ((weekday - step) % 7) & 1:
        step += 1
    return day - step


def count_listed(rule: DailyRule, first: int, last: int) -> int:
    """How many listed dates lie in ``first`` … ``last`` (inclusive); 0 when ``last < first``."""
    if last < first:
        return 0
    weeks, rest = divmod(last - first + 1, 7)
    count = weeks * rule.mask.bit_count()
    weekday = weekday_of(first + weeks * 7)
    return count + sum(rule.mask >> ((weekday + step) % 7) & 1 for step in range(rest))


def first_after(rule: DailyRule, instant: int) -> tuple[int, int] | None:
    """``(date, occurrence)`` of the first listed date whose occurrence is after ``instant``.

    ``None`` when no date up to 9999-12-31 has one (Rule 2).
    """
    day = (wall_clock_at(rule.zone, instant) - rule.time_of_day) // MS_PER_DAY + 1
    day = listed_from(rule, max(day, FIRST_DAY))
    while day <= LAST_DAY:
        occurrence = occurrence_on(rule, day)
        if occurrence > instant:
            return day, occurrence
        day = listed_from(rule, day + 1)
    return None


def next_daily_target(record: DailyScheduleRecord, decided_at: Instant) -> int | None:
    """The first occurrence after ``decided_at``, or ``None`` when there is none in range."""
    found = first_after(rule_of(record), decided_at)
    if found is None or found[1] > MAX_INSTANT:
        return None
    return found[1]


def latest_daily_due(record: DailyScheduleRecord, decided_at: Instant) -> tuple[Instant, int]:
    """The latest occurrence at or before ``decided_at`` (``decided_at`` ≥ the record's target),
    and how many due occurrences since the target it passes over.

    When the zone's rules changed after the target was computed so that no occurrence now lies
    between the target and ``decided_at``, the target itself is the one delivered.
    """
    rule = rule_of(record)
    target = record_target(record)
    following = first_after(rule, decided_at)
    last = listed_until(rule, (LAST_DAY + 1 if following is None else following[0]) - 1)
    start = first_after(rule, target - 1)
    if start is None or last < start[0]:
        return target, 0
    return Instant(occurrence_on(rule, last)), count_listed(rule, start[0], last) - 1
