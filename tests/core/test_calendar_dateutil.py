"""Calendar rules (SPEC §12) against an independent implementation: ``dateutil.rrule``.

Random rules within the subset, written as the text a model would send (parts in any order), are
expanded by both this library and python-dateutil from the same start date, on naive local dates
with ``WKST=MO``. The library runs in ``UTC`` at a random time of day, so each date has exactly
one instant (its midnight plus that time) and daylight saving time takes no part. Compared: the
first target strictly after a decision time (through the ``calendar`` selector, so that "no
occurrence" is ``time_out_of_range``), then a few dispatches, each delivering the latest due
occurrence, counting the skipped ones and finding the next target, until ``COUNT`` or ``UNTIL``
exhausts the set.

Where dateutil and RFC 5545 part (and SPEC §12 follows the RFC), the rule dateutil is given is
rewritten to one RFC 5545 holds equal, never skipped:

- dateutil reads ``BYDAY`` with both plain days and days with an ordinal (``BYDAY=MO,-1FR``) as
  the intersection of the two kinds: ``rrule._iter`` drops a date when ``byweekday`` (the plain
  days) misses it *or* ``nwdaymask`` (the ordinal days) misses it, so such a rule has no dates.
  RFC 5545 §3.3.10 makes ``BYDAY`` one list of days (plain ``MO`` within a ``MONTHLY`` rule is
  "all Mondays within the month"). The JavaScript port of dateutil has the same behaviour,
  reported as jkbrzt/rrule#71. dateutil is therefore given a plain day ``MO`` as ``1MO,...,5MO``
  (every Monday of the month, which is what ``MO`` names where an ordinal is allowed at all).

Where dateutil is documented to differ from RFC 5545 and SPEC §12 sides with dateutil, nothing is
rewritten: a start date the rule does not generate is no occurrence and is not counted by
``COUNT`` (dateutil's documentation: "Unlike documented in the RFC, the starting datetime
(dtstart) is not the first recurrence instance, unless it does fit in the specified rules"; SPEC
§12: "the start date itself is an occurrence only if the rule generates it").

dateutil stops only at a date past ``UNTIL``, at the ``COUNT``-th date, or past year 9999, so a
rule with few or no dates would make it walk to 9999. Each comparison therefore has a horizon: the
last day of a year a bounded number of periods after the start, which dateutil is told is the
last year of the calendar (``datetime.MAXYEAR`` as its ``rrule`` module reads it). Every
occurrence up to the horizon is then known, and the set is known whole when the horizon is
9999-12-31, ``UNTIL`` falls before it, or dateutil reached the ``COUNT``-th date. (A week that
begins in 9999 and ends in 10000 makes dateutil raise once it has given that week's dates up to
9999-12-31: a limit of ``datetime.date``, not a difference in meaning.)

The suite runs twice the Hypothesis profile's examples (200, or 2,000 with
``SESSION_SCHEDULE_FULL=1``); ``SESSION_SCHEDULE_ORACLE_EXAMPLES=5000`` runs that many instead.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import types
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Final
from unittest import mock

import dateutil.rrule
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from session_schedule.core import calendar
from session_schedule.core.calendar import (
    DateSet,
    latest_due,
    make_schedule,
    next_target,
    parse_calendar,
    parse_rule,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import MAX_INSTANT, MIN_INSTANT, Instant
from session_schedule.core.time_input import format_time_of_day, load_zone

DAY: Final = 86_400_000
EPOCH: Final = dt.date(1970, 1, 1)
UTC: Final = load_zone("UTC")
DAYS: Final = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# Twice the profile's examples (a few seconds in the suite), or as many as asked for.
EXAMPLES: Final = int(
    os.environ.get("SESSION_SCHEDULE_ORACLE_EXAMPLES") or 2 * settings().max_examples
)

# How many periods past the start dateutil expands (its work grows with them, not with INTERVAL:
# it steps INTERVAL periods at a time), and a period's length in days.
_PERIODS: Final = {"DAILY": 1500, "WEEKLY": 800, "MONTHLY": 600, "YEARLY": 300}
_PERIOD_DAYS: Final = {"DAILY": 1.0, "WEEKLY": 7.0, "MONTHLY": 30.44, "YEARLY": 365.25}


def day_number(date: dt.date) -> int:
    return (date - EPOCH).days


def date_of(day: int) -> dt.date:
    return EPOCH + dt.timedelta(days=day)


# -- random rules within the subset, as text --------------------------------------------------


def _numbers(values: st.SearchStrategy[int], max_size: int) -> st.SearchStrategy[list[int]]:
    return st.lists(values, min_size=1, max_size=max_size, unique=True)


@st.composite
def rule_texts(draw: st.DrawFn) -> str:
    """A valid rule of the SPEC §12 subset, its parts in a random order."""
    frequency = draw(st.sampled_from(["DAILY", "WEEKLY", "MONTHLY", "YEARLY"]))
    parts = [f"FREQ={frequency}"]
    interval = draw(
        st.sampled_from([1, 1, 1, 1, 2, 2, 3, 4, 5, 7, 12]) | st.integers(1, 1000) | st.none()
    )
    if interval is not None:
        parts.append(f"INTERVAL={interval}")
    months = draw(st.none() | _numbers(st.integers(1, 12), 3))
    if months is not None:
        parts.append(f"BYMONTH={','.join(map(str, months))}")
    month_days = None
    if frequency != "WEEKLY":
        ends_of_months = st.sampled_from([28, 29, 30, 31, -1, -2, -28, -29, -30, -31])
        month_days = draw(
            st.none() | _numbers(ends_of_months | (st.integers(1, 31) | st.integers(-31, -1)), 3)
        )
        if month_days is not None:
            parts.append(f"BYMONTHDAY={','.join(map(str, month_days))}")
    ordinals_allowed = frequency == "MONTHLY" or (frequency == "YEARLY" and months is not None)
    ordinal = st.just("")
    if ordinals_allowed:
        ordinal = st.just("") | st.sampled_from(
            ["1", "-1", "5", "-5", "+2", "2", "-2", "3", "-3", "4", "-4", "+1", "+5"]
        )
    weekdays = draw(
        st.none() | st.lists(st.tuples(ordinal, st.sampled_from(DAYS)), min_size=1, max_size=4)
    )
    if weekdays is not None:
        items = list(dict.fromkeys(f"{n}{d}" for n, d in weekdays))
        # "+2MO" and "2MO" are the same entry, which the rule may not list twice.
        items = list({parse_rule(f"FREQ=MONTHLY;BYDAY={i}").weekdays: i for i in items}.values())
        parts.append(f"BYDAY={','.join(items)}")
    if frequency in ("MONTHLY", "YEARLY") and (months or month_days or weekdays):
        positions = st.sampled_from([1, -1, 2, -2, 5, -5]) | (
            st.integers(1, 31) | st.integers(-31, -1)
        )
        set_positions = draw(st.none() | _numbers(positions, 3))
        if set_positions is not None:
            parts.append(f"BYSETPOS={','.join(map(str, set_positions))}")
    ends = draw(st.sampled_from(["none", "count", "until"]))
    if ends == "count":
        count = draw(st.integers(1, 12) | st.integers(1, 400) | st.integers(1, 100_000))
        parts.append(f"COUNT={count}")
    elif ends == "until":
        parts.append("UNTIL=?")  # filled in from the start date by the test
    return ";".join(draw(st.permutations(parts)))


def _year_ends(years: st.SearchStrategy[int]) -> st.SearchStrategy[dt.date]:
    return years.flatmap(
        lambda y: st.sampled_from(
            [dt.date(y, 1, 1), dt.date(y, 12, 31), dt.date(y, 2, 28), dt.date(y, 3, 1)]
            + [dt.date(y, m, 1) - dt.timedelta(days=1) for m in range(2, 13)]
        )
    )


def _leap_days(years: st.SearchStrategy[int]) -> st.SearchStrategy[dt.date]:
    # A multiple of 4 that is a common century year (1900) becomes the leap year before it.
    leap = years.map(lambda y: max(4, y - y % 4)).map(
        lambda y: y if y % 400 == 0 or y % 100 else y - 4
    )
    return leap.map(lambda y: dt.date(y, 2, 29))


# Start dates: month ends, 29 February and year boundaries favoured, mostly 1900-2100, sometimes
# anywhere in years 1-9999 (so the end of the calendar and the first years take part).
_NEAR: Final = st.integers(1900, 2100)
start_dates = st.one_of(
    st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31)),
    _year_ends(_NEAR),
    _leap_days(st.integers(1896, 2104) | st.integers(1, 9999)),
    st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
    _year_ends(st.integers(9990, 9999) | st.integers(1, 10)),
)


# -- the dateutil side ------------------------------------------------------------------------


def for_dateutil(text: str) -> str:
    """``text`` as dateutil should be given it: ``WKST=MO`` added, and a plain ``BYDAY`` day
    listed beside days with an ordinal written as every ordinal of it (see the module header)."""
    parts = []
    for part in text.split(";"):
        name, _, value = part.partition("=")
        if name == "BYDAY":
            items = value.split(",")
            if any(item[:-2] for item in items) and any(not item[:-2] for item in items):
                items = [
                    expanded
                    for item in items
                    for expanded in (
                        [f"{n}{item}" for n in range(1, 6)] if not item[:-2] else [item]
                    )
                ]
            value = ",".join(items)
        parts.append(f"{name}={value}")
    return ";".join([*parts, "WKST=MO"])


def calendar_ending(last_year: int) -> AbstractContextManager[object]:
    """While active, dateutil's ``rrule`` takes ``last_year`` for the last year of the calendar
    (its own end, ``datetime.MAXYEAR``, is 9999)."""
    calendar_end = types.SimpleNamespace(**{**vars(dt), "MAXYEAR": last_year})
    return mock.patch.object(dateutil.rrule, "datetime", calendar_end)


def dateutil_dates(text: str, start: dt.date, last_year: int) -> list[dt.date]:
    """The rule's dates by dateutil, from ``start`` to the end of ``last_year`` at least (see the
    module header), ``UNTIL`` given as a date (dateutil's parser is not asked to read it)."""
    parts = [part for part in text.split(";") if not part.startswith("UNTIL=")]
    until = next((part[6:] for part in text.split(";") if part.startswith("UNTIL=")), None)
    with calendar_ending(last_year):
        rule = dateutil.rrule.rrulestr(
            for_dateutil(";".join(parts)), dtstart=dt.datetime(start.year, start.month, start.day)
        )
        assert isinstance(rule, dateutil.rrule.rrule)
        if until is not None:
            rule = rule.replace(until=dt.datetime(int(until[:4]), int(until[4:6]), int(until[6:])))
        found: list[dt.date] = []
        occurrences = iter(rule)
        while True:
            try:
                found.append(next(occurrences).date())
            except StopIteration:
                return found
            except ValueError as error:
                # A week that begins in 9999 and ends past it: dateutil makes each of its days a
                # date in turn, so those up to 9999-12-31 are already found.
                assert str(error) == "year 10000 is out of range", error
                return found


# -- the comparison ---------------------------------------------------------------------------


def _with_until(text: str, start: dt.date, offset: int) -> str:
    ordinal = min(max(start.toordinal() + offset, 1), dt.date.max.toordinal())
    until = dt.date.fromordinal(ordinal)
    return text.replace("UNTIL=?", f"UNTIL={until.year:04d}{until.month:02d}{until.day:02d}")


def _first_after(dates: list[dt.date], time_of_day: int, instant: int) -> dt.date | None:
    return next((d for d in dates if day_number(d) * DAY + time_of_day > instant), None)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    text=rule_texts(),
    start=start_dates,
    until_offset=st.integers(-60, 400) | st.integers(-400, 40 * 366),
    time_of_day=st.integers(0, DAY - 1) | st.sampled_from([0, DAY - 1, 9 * 3_600_000]),
    decided_day=st.integers(-400, 50) | st.integers(-3, 3) | st.integers(-400, 200 * 366),
    decided_ms=st.integers(0, DAY - 1) | st.sampled_from([-1, 0, 1]),
    exact=st.booleans(),
    gaps=st.lists(
        st.sampled_from([0, 1, DAY - 1])
        | st.integers(0, 40 * DAY)
        | st.integers(0, 30 * 366 * DAY),
        min_size=1,
        max_size=6,
    ),
)
def test_targets_and_dispatches_agree_with_dateutil(
    text: str,
    start: dt.date,
    until_offset: int,
    time_of_day: int,
    decided_day: int,
    decided_ms: int,
    exact: bool,
    gaps: list[int],
) -> None:
    text = _with_until(text, start, until_offset)
    rule = parse_rule(text)
    years = math.ceil(
        _PERIODS[rule.frequency] * rule.interval * _PERIOD_DAYS[rule.frequency] / 365.25
    )
    last_year = min(9999, start.year + years)
    horizon = dt.date(last_year, 12, 31)
    expected = [d for d in dateutil_dates(text, start, last_year) if d <= horizon]
    whole = (
        last_year == 9999
        or (rule.until is not None and date_of(rule.until) <= horizon)
        or (rule.count is not None and len(expected) == rule.count)
    )
    known_until = (day_number(horizon) + 1) * DAY + time_of_day  # later instants are unknown

    def check_next(found: Instant | None, after: int) -> dt.date | None:
        want = _first_after(expected, time_of_day, after)
        if want is None:
            if whole:
                assert found is None, (text, start, after)
            else:
                assert found is None or found >= known_until, (text, start, after)
            return None
        assert found == day_number(want) * DAY + time_of_day, (text, start, after, want)
        return want

    # The decision time of the create: near the start date, or just at an occurrence.
    decided = (day_number(start) + decided_day) * DAY + decided_ms
    if exact and expected:
        chosen = expected[min(len(expected) - 1, abs(decided_day) % 7)]
        decided = (
            day_number(chosen) * DAY + time_of_day + (decided_ms if abs(decided_ms) <= 1 else 0)
        )
    decided = max(MIN_INSTANT, min(decided, known_until - 1, MAX_INSTANT))
    selector = {
        "rule": text,
        "time": format_time_of_day(time_of_day),
        "time_zone": "UTC",
        "start_date": start.isoformat(),
    }
    try:
        target: Instant | None = parse_calendar(selector, Instant(decided)).first_target
    except ScheduleError as error:
        assert error.code == "time_out_of_range", error
        target = None
    event(f"set known whole: {whole}")
    if check_next(target, decided) is None:
        event("no first target")
        return
    schedule = make_schedule(rule, day_number(start), time_of_day, UTC)
    assert next_target(schedule, Instant(decided)) == target

    # Dispatches: each decided some time after the target, delivering the latest due occurrence.
    for gap in gaps:
        assert target is not None
        dispatched = min(target + gap, known_until - 1, MAX_INSTANT)
        delivered, skipped = latest_due(schedule, target, Instant(dispatched))
        due = [d for d in expected if target <= day_number(d) * DAY + time_of_day <= dispatched]
        assert due, (text, start, target, dispatched)
        assert delivered == day_number(due[-1]) * DAY + time_of_day, (text, start, dispatched)
        assert skipped == len(due) - 1, (text, start, target, dispatched)
        target = next_target(schedule, Instant(dispatched))
        event("a dispatch compared")
        if check_next(target, dispatched) is None:
            return


# -- named cases where the two would part without the rewrite ---------------------------------


def test_a_plain_day_beside_an_ordinal_day_is_a_union() -> None:
    """``BYDAY=MO,-1FR`` is every Monday and the last Friday (RFC 5545); dateutil alone would give
    no date at all (the module header), so the rewrite is what it is compared with."""
    text = "FREQ=MONTHLY;BYDAY=MO,-1FR;COUNT=6"
    start = dt.date(2027, 1, 1)
    with calendar_ending(2028):
        rule = dateutil.rrule.rrulestr(text + ";WKST=MO", dtstart=dt.datetime(2027, 1, 1))
        # dateutil's intersection, kept here so that a change upstream is noticed.
        assert list(rule) == []
    assert dateutil_dates(text, start, 2028) == [
        dt.date(2027, 1, 4),
        dt.date(2027, 1, 11),
        dt.date(2027, 1, 18),
        dt.date(2027, 1, 25),
        dt.date(2027, 1, 29),
        dt.date(2027, 2, 1),
    ]
    dates = DateSet(parse_rule(text), day_number(start))
    found = []
    day = calendar.first_on_or_after(dates, dates.start)
    while day is not None:
        found.append(date_of(day))
        day = calendar.first_on_or_after(dates, day + 1)
    assert found == dateutil_dates(text, start, 2028)


def test_a_start_date_the_rule_does_not_generate_is_not_counted() -> None:
    """COUNT counts from the first generated date, in dateutil as in SPEC §12."""
    text = "FREQ=MONTHLY;BYMONTHDAY=-1;COUNT=3"
    start = dt.date(2028, 2, 10)
    assert dateutil_dates(text, start, 2029) == [
        dt.date(2028, 2, 29),
        dt.date(2028, 3, 31),
        dt.date(2028, 4, 30),
    ]
    schedule = make_schedule(parse_rule(text), day_number(start), 0, UTC)
    found = calendar.upcoming(schedule, Instant(day_number(start) * DAY - 1), 5)
    assert [date_of(day) for day, _ in found] == dateutil_dates(text, start, 2029)


# -- bounded work after a long downtime --------------------------------------------------------


@settings(max_examples=max(20, EXAMPLES // 5), deadline=None)
@given(
    text=rule_texts(),
    start=st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31)),
    downtime=st.integers(0, 7000 * 366),
)
def test_the_next_target_after_any_downtime_expands_a_bounded_number_of_periods(
    text: str, start: dt.date, downtime: int
) -> None:
    """Once a rule's table is built, the next target and the latest due occurrence after any
    downtime expand a few periods, however many occurrences were missed (SPEC §12)."""
    rule = parse_rule(_with_until(text, start, 7000 * 366))
    schedule = make_schedule(rule, day_number(start), 0, UTC)
    target = next_target(schedule, Instant(day_number(start) * DAY - 1))  # builds the table
    if target is None:
        return
    decided = Instant(min(MAX_INSTANT, target + downtime * DAY))
    expanded: list[int] = []
    expand: Callable[[DateSet, int], tuple[int, ...]] = calendar.period_dates

    def counting(dates: DateSet, number: int) -> tuple[int, ...]:
        expanded.append(number)
        return expand(dates, number)

    with mock.patch.object(calendar, "period_dates", counting):
        latest_due(schedule, target, decided)
        next_target(schedule, decided)
    assert len(expanded) <= 16, (text, start, expanded)


@pytest.mark.parametrize(
    ("text", "given"),
    [
        ("FREQ=MONTHLY;BYDAY=MO,TU", "FREQ=MONTHLY;BYDAY=MO,TU;WKST=MO"),
        ("FREQ=MONTHLY;BYDAY=1MO,-1TU", "FREQ=MONTHLY;BYDAY=1MO,-1TU;WKST=MO"),
        (
            "BYDAY=-1FR,MO;FREQ=MONTHLY",
            "BYDAY=-1FR,1MO,2MO,3MO,4MO,5MO;FREQ=MONTHLY;WKST=MO",
        ),
    ],
)
def test_dateutil_is_given_every_ordinal_of_a_plain_day_beside_ordinal_days(
    text: str, given: str
) -> None:
    assert for_dateutil(text) == given
