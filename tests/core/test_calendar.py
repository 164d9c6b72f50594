"""Calendar rules (SPEC §12): parsing, the canonical form, and the dates and instants of a rule.

The date oracle below is written from RFC 5545's prose, not from the module: it walks the
calendar one :class:`datetime.date` at a time, asks of each date whether it matches every BY part
the rule gives (and the start date's fields the rule leaves out), groups the matches by period,
applies ``BYSETPOS`` to each picked period, and then keeps the dates from the start date on, up
to ``UNTIL`` and the ``COUNT``-th. Instants come from the ``daily_at`` oracle, which never
resolves a wall time through the zone (see ``test_daily``).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core import calendar
from session_schedule.core.calendar import (
    CalendarRule,
    DateSet,
    canonical_rule,
    first_after,
    first_on_or_after,
    format_rule,
    last_date,
    last_on_or_before,
    latest_due,
    make_schedule,
    next_target,
    occurrence_index,
    parse_rule,
    upcoming,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import MAX_INSTANT, Instant, format_instant, parse_instant
from session_schedule.core.time_input import (
    earliest_at_or_after,
    load_zone,
    parse_wall_time,
    supported_zones,
)
from tests.core.test_daily import oracle_occurrence, oracle_segments

DAY: Final = 86_400_000
HOUR: Final = 3_600_000
EPOCH_DATE: Final = dt.date(1970, 1, 1)
ZONE_NAMES: Final = sorted(name for name in supported_zones() if "/" in name)
DAYS: Final = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


def day_number(date: dt.date) -> int:
    return (date - EPOCH_DATE).days


def date_of(day: int) -> dt.date:
    return EPOCH_DATE + dt.timedelta(days=day)


# -- the oracle -------------------------------------------------------------------------------


def month_length(date: dt.date) -> int:
    following = date.replace(day=28) + dt.timedelta(days=4)
    return (following - dt.timedelta(days=following.day)).day


def matches(rule: CalendarRule, start: dt.date, date: dt.date) -> bool:
    """Whether ``date`` is in its period's set before ``BYSETPOS``, by RFC 5545's prose."""
    length = month_length(date)
    if rule.months and date.month not in rule.months:
        return False
    if rule.month_days and not any(
        date.day == (value if value > 0 else length + 1 + value) for value in rule.month_days
    ):
        return False
    if rule.weekdays:
        nth_from_start = (date.day - 1) // 7 + 1
        nth_from_end = -((length - date.day) // 7 + 1)
        if not any(
            weekday == date.weekday() and ordinal in (0, nth_from_start, nth_from_end)
            for ordinal, weekday in rule.weekdays
        ):
            return False
    # What the rule leaves out comes from the start date.
    match rule.frequency:
        case "WEEKLY":
            return bool(rule.weekdays) or date.weekday() == start.weekday()
        case "MONTHLY":
            return bool(rule.month_days or rule.weekdays) or date.day == start.day
        case "YEARLY":
            if rule.month_days or rule.weekdays:
                return True
            return date.day == start.day and (bool(rule.months) or date.month == start.month)
        case _:
            return True


def period(rule: CalendarRule, start: dt.date, date: dt.date) -> int:
    match rule.frequency:
        case "DAILY":
            return (date - start).days
        case "WEEKLY":
            monday = date - dt.timedelta(days=date.weekday())
            return (monday - (start - dt.timedelta(days=start.weekday()))).days // 7
        case "MONTHLY":
            return (date.year * 12 + date.month) - (start.year * 12 + start.month)
        case _:
            return date.year - start.year


def oracle_dates(rule: CalendarRule, start: dt.date, last: dt.date) -> list[dt.date]:
    """The occurrence dates from ``start`` up to ``last``, day by day."""
    date = dt.date(start.year, 1, 1)  # the start of the start date's period, or earlier
    groups: dict[int, list[dt.date]] = {}
    # Walk on past ``last`` to the end of its period, or BYSETPOS would see a cut period.
    while date <= last + dt.timedelta(days=400):
        number = period(rule, start, date)
        if number >= 0 and number % rule.interval == 0 and matches(rule, start, date):
            groups.setdefault(number, []).append(date)
        date += dt.timedelta(days=1)
    found: list[dt.date] = []
    for number in sorted(groups):
        dates = groups[number]
        if rule.set_positions:
            chosen = {
                dates[p - 1 if p > 0 else p] for p in rule.set_positions if abs(p) <= len(dates)
            }
            dates = sorted(chosen)
        found.extend(d for d in dates if d >= start)
    if rule.until is not None:
        found = [d for d in found if d <= date_of(rule.until)]
    if rule.count is not None:
        found = found[: rule.count]
    return [d for d in found if d <= last]


def expanded(text: str, start: str, count: int) -> list[str]:
    """The first ``count`` occurrence dates from ``start``, found one after the other."""
    dates = DateSet(parse_rule(text), day_number(dt.date.fromisoformat(start)))
    found: list[str] = []
    day = first_on_or_after(dates, dates.start)
    while day is not None and len(found) < count:
        found.append(date_of(day).isoformat())
        day = first_on_or_after(dates, day + 1)
    return found


# -- rules for Hypothesis ---------------------------------------------------------------------


@st.composite
def rules(draw: st.DrawFn, *, sparse: bool = False) -> CalendarRule:
    """A random valid rule; ``sparse`` favours rules with few dates (large intervals, BYSETPOS,
    29 February, fifth weekdays)."""
    frequency = draw(st.sampled_from(calendar.FREQUENCIES))
    interval = draw(st.integers(1, 1000) if sparse else st.sampled_from([1, 1, 1, 2, 3, 4, 7, 13]))
    months = draw(st.sets(st.integers(1, 12), max_size=3).map(lambda m: tuple(sorted(m))))
    month_days: tuple[int, ...] = ()
    if frequency != "WEEKLY":
        values = st.integers(-31, 31).filter(bool)
        if sparse:
            values = st.sampled_from([29, 30, 31, -29, -30, -31]) | values
        month_days = draw(st.sets(values, max_size=3).map(lambda m: tuple(sorted(m))))
    ordinals_allowed = frequency == "MONTHLY" or (frequency == "YEARLY" and bool(months))
    ordinal = st.just(0)
    if ordinals_allowed:
        ordinal = st.sampled_from([5, -5, 4, 1, -1]) if sparse else st.integers(-5, 5)
    weekday_items = st.tuples(ordinal, st.integers(0, 6))
    weekdays = draw(
        st.sets(weekday_items, max_size=4).map(
            lambda items: tuple(sorted(items, key=lambda i: (i[1], i[0] == 0, i[0])))
        )
    )
    set_positions: tuple[int, ...] = ()
    if frequency in ("MONTHLY", "YEARLY") and (months or month_days or weekdays):
        set_positions = draw(
            st.sets(st.integers(-31, 31).filter(bool), max_size=2).map(lambda p: tuple(sorted(p)))
        )
    ends = draw(st.sampled_from(["none", "count", "until"]))
    count = draw(st.integers(1, 60)) if ends == "count" else None
    until = draw(st.integers(day_number(dt.date(2000, 1, 1)), day_number(dt.date(2060, 1, 1))))
    rule = CalendarRule(
        frequency=frequency,
        interval=interval,
        months=months,
        month_days=month_days,
        weekdays=weekdays,
        set_positions=set_positions,
        count=count,
        until=until if ends == "until" else None,
    )
    assert parse_rule(format_rule(rule)) == rule
    return rule


starts = st.dates(dt.date(1990, 1, 1), dt.date(2040, 12, 31))


# -- dates against the oracle -----------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(rule=rules(), start=starts, probe=st.integers(-40, 3000))
def test_dates_agree_with_the_oracle(rule: CalendarRule, start: dt.date, probe: int) -> None:
    horizon = start + dt.timedelta(days=3650)
    known = horizon + dt.timedelta(days=400)
    expected = oracle_dates(rule, start, known)
    dates = DateSet(rule, day_number(start))
    # Every date in turn, from the start.
    found: list[dt.date] = []
    day = first_on_or_after(dates, dates.start)
    while day is not None and date_of(day) <= horizon:
        found.append(date_of(day))
        day = first_on_or_after(dates, day + 1)
    assert found == [d for d in expected if d <= horizon]
    # The next and the previous date from anywhere, and the index of each.
    x = start + dt.timedelta(days=probe)
    after = [d for d in expected if d >= x]
    upto = [d for d in expected if d <= x]
    following = first_on_or_after(dates, day_number(x))
    if after:
        assert following is not None
        assert date_of(following) == after[0]
    else:
        assert following is None or date_of(following) > known
    preceding = last_on_or_before(dates, day_number(x))
    assert (None if preceding is None else date_of(preceding)) == (upto[-1] if upto else None)
    if preceding is not None:
        assert occurrence_index(dates, preceding) == len(upto) - 1
    if rule.count is not None and len(expected) == rule.count:
        assert date_of(last_date(dates)) == expected[-1]


@settings(max_examples=12, deadline=None)
@given(rule=rules(sparse=True), start=starts, probe=st.integers(0, 419 * 366))
def test_sparse_rules_agree_with_the_oracle_over_a_whole_gregorian_cycle(
    rule: CalendarRule, start: dt.date, probe: int
) -> None:
    """Four hundred and twenty years, so that Rule 3's table wraps at least once."""
    rule = CalendarRule(
        frequency=rule.frequency,
        interval=rule.interval,
        months=rule.months,
        month_days=rule.month_days,
        weekdays=rule.weekdays,
        set_positions=rule.set_positions,
    )
    last = start + dt.timedelta(days=420 * 366)
    expected = oracle_dates(rule, start, last)
    dates = DateSet(rule, day_number(start))
    x = start + dt.timedelta(days=probe)
    after = [d for d in expected if d >= x]
    upto = [d for d in expected if d <= x]
    following = first_on_or_after(dates, day_number(x))
    if after and after[0] <= last - dt.timedelta(days=400):
        assert following is not None
        assert date_of(following) == after[0]
    preceding = last_on_or_before(dates, day_number(x))
    assert (None if preceding is None else date_of(preceding)) == (upto[-1] if upto else None)
    if preceding is not None:
        assert occurrence_index(dates, preceding) == len(upto) - 1


# -- instants against the oracle, every zone --------------------------------------------------

zones = st.sampled_from(ZONE_NAMES)
times = st.integers(0, DAY - 1) | st.sampled_from(
    [0, HOUR, 2 * HOUR, 2 * HOUR + 30 * 60_000, 3 * HOUR, 23 * HOUR + 59 * 60_000]
)


def oracle_instants(
    zone: str, rule: CalendarRule, start: dt.date, time_of_day: int, first: int, last: dt.date
) -> list[int]:
    """The instants of the occurrence dates from ``first`` (a day number) to ``last``."""
    segments = oracle_segments(
        load_zone(zone), (first - 2) * DAY, (day_number(last) + 3) * DAY, step=2 * HOUR
    )
    return [
        oracle_occurrence(segments, day_number(d) * DAY + time_of_day)
        for d in oracle_dates(rule, start, last)
        if day_number(d) >= first
    ]


@settings(max_examples=100, deadline=None)
@given(
    zone=zones,
    rule=rules(),
    start=st.dates(dt.date(1960, 1, 1), dt.date(2040, 12, 31)),
    time_of_day=times,
    where=st.floats(-1.5, 2.5),
    before=st.integers(0, 40 * DAY),
)
def test_instants_around_a_transition_agree_with_the_oracle(
    zone: str,
    rule: CalendarRule,
    start: dt.date,
    time_of_day: int,
    where: float,
    before: int,
) -> None:
    """The next occurrences after an instant close to the zone's first change of offset in the
    six years after the start date (zones without one: an ordinary instant)."""
    loaded = load_zone(zone)
    segments = oracle_segments(
        loaded, day_number(start) * DAY, (day_number(start) + 6 * 366) * DAY, step=12 * HOUR
    )
    if len(segments) > 1:
        (_, offset_before), (transition, offset_after) = segments[:2]
        # the wall time of day lands inside the gap or the overlap for ``where`` in [-1, 1).
        time_of_day = transition + offset_before + int(where * abs(offset_after - offset_before))
        time_of_day %= DAY
        x = transition - before
    else:
        x = day_number(start) * DAY + int(where * DAY)
    last = date_of(x // DAY) + dt.timedelta(days=500)
    expected = sorted(
        {o for o in oracle_instants(zone, rule, start, time_of_day, x // DAY - 1, last) if o > x}
    )
    schedule = make_schedule(rule, day_number(start), time_of_day, loaded)
    found = [instant for _, instant in upcoming(schedule, Instant(x), 3)]
    horizon = (day_number(last) - 1) * DAY
    assert (
        found[: len([o for o in expected if o < horizon])]
        == [o for o in expected if o < horizon][:3]
    )


@settings(max_examples=60, deadline=None)
@given(
    zone=zones,
    rule=rules(),
    start=st.dates(dt.date(1970, 1, 1), dt.date(2040, 12, 31)),
    time_of_day=times,
    created_shift=st.integers(-3 * DAY, 40 * DAY),
    downtime=st.integers(0, 3 * 366 * DAY) | st.integers(0, 3 * DAY),
)
def test_catch_up_agrees_with_the_oracle(
    zone: str,
    rule: CalendarRule,
    start: dt.date,
    time_of_day: int,
    created_shift: int,
    downtime: int,
) -> None:
    loaded = load_zone(zone)
    schedule = make_schedule(rule, day_number(start), time_of_day, loaded)
    created = day_number(start) * DAY + created_shift
    target = next_target(schedule, Instant(created))
    last = start + dt.timedelta(days=(created_shift + downtime) // DAY + 5 * 366)
    all_occurrences = oracle_instants(
        zone, rule, start, time_of_day, day_number(start) + created_shift // DAY - 2, last
    )
    known = day_number(last) * DAY
    later = [o for o in all_occurrences if o > created]
    if not later:
        assert target is None or target >= known
        return
    assert target == later[0]
    decided_at = Instant(target + downtime)
    due = [o for o in all_occurrences if target <= o <= decided_at]
    assert latest_due(schedule, target, decided_at) == (max(due), len(due) - 1)
    following = [o for o in all_occurrences if o > decided_at]
    found = next_target(schedule, decided_at)
    if following:
        assert found == following[0]
    else:
        assert found is None or found >= known


# -- named cases: dates -----------------------------------------------------------------------


def test_the_last_day_of_february_in_leap_and_common_years() -> None:
    assert expanded("FREQ=MONTHLY;BYMONTHDAY=-1", "2027-01-15", 3) == [
        "2027-01-31",
        "2027-02-28",
        "2027-03-31",
    ]
    assert expanded("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=-1", "2026-12-01", 3) == [
        "2027-02-28",
        "2028-02-29",
        "2029-02-28",
    ]
    assert expanded("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "2097-01-01", 3) == [
        "2104-02-29",  # 2100 is not a leap year
        "2108-02-29",
        "2112-02-29",
    ]


def test_a_day_the_month_lacks_is_no_occurrence() -> None:
    assert expanded("FREQ=MONTHLY;BYMONTHDAY=31", "2027-04-01", 4) == [
        "2027-05-31",
        "2027-07-31",
        "2027-08-31",
        "2027-10-31",
    ]
    # Without BYMONTHDAY the start date's day of the month is the rule's: 31 again.
    assert expanded("FREQ=MONTHLY", "2027-01-31", 3) == ["2027-01-31", "2027-03-31", "2027-05-31"]
    assert expanded("FREQ=YEARLY", "2028-02-29", 2) == ["2028-02-29", "2032-02-29"]


def test_the_last_friday_and_the_fifth_friday() -> None:
    assert expanded("FREQ=MONTHLY;BYDAY=-1FR", "2026-12-01", 3) == [
        "2026-12-25",
        "2027-01-29",
        "2027-02-26",
    ]
    assert expanded("FREQ=MONTHLY;BYDAY=5FR", "2026-12-01", 3) == [
        "2027-01-29",
        "2027-04-30",
        "2027-07-30",
    ]


def test_the_last_weekday_of_the_month() -> None:
    assert expanded("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1", "2027-01-01", 4) == [
        "2027-01-29",  # the 30th and 31st are a weekend
        "2027-02-26",
        "2027-03-31",
        "2027-04-30",
    ]


def test_every_other_week_across_a_year_boundary() -> None:
    # Weeks start on Monday: 2026-12-21 starts the start date's week, 2027-01-04 the next picked.
    assert expanded("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR", "2026-12-24", 4) == [
        "2026-12-25",
        "2027-01-04",
        "2027-01-08",
        "2027-01-18",
    ]
    # Without BYDAY the start date's weekday is the rule's.
    assert expanded("FREQ=WEEKLY;INTERVAL=2", "2026-12-31", 3) == [
        "2026-12-31",
        "2027-01-14",
        "2027-01-28",
    ]


def test_count_counts_from_the_start_and_until_is_inclusive() -> None:
    assert expanded("FREQ=MONTHLY;BYMONTHDAY=1,15;COUNT=3", "2026-12-10", 9) == [
        "2026-12-15",
        "2027-01-01",
        "2027-01-15",
    ]
    assert expanded("FREQ=WEEKLY;BYDAY=TU;UNTIL=20261215", "2026-12-01", 9) == [
        "2026-12-01",
        "2026-12-08",
        "2026-12-15",
    ]
    dates = DateSet(parse_rule("FREQ=DAILY;COUNT=100000"), day_number(dt.date(2026, 12, 1)))
    assert date_of(last_date(dates)) == dt.date(2026, 12, 1) + dt.timedelta(days=99_999)


def test_the_start_date_counts_only_when_the_rule_names_it() -> None:
    assert expanded("FREQ=MONTHLY;BYDAY=1MO", "2026-12-01", 2) == ["2026-12-07", "2027-01-04"]
    assert expanded("FREQ=MONTHLY;BYDAY=1TU", "2026-12-01", 2) == ["2026-12-01", "2027-01-05"]


def test_yearly_rules() -> None:
    assert expanded("FREQ=YEARLY", "2026-04-01", 2) == ["2026-04-01", "2027-04-01"]
    assert expanded("FREQ=YEARLY;BYMONTH=11;BYDAY=4TH", "2026-12-01", 2) == [
        "2027-11-25",
        "2028-11-23",
    ]
    assert expanded("FREQ=YEARLY;BYMONTH=3,9", "2026-12-05", 3) == [
        "2027-03-05",
        "2027-09-05",
        "2028-03-05",
    ]
    assert expanded("FREQ=YEARLY;BYDAY=MO;BYSETPOS=1,-1", "2026-01-01", 4) == [
        "2026-01-05",
        "2026-12-28",
        "2027-01-04",
        "2027-12-27",
    ]


def test_a_rule_that_names_no_date_is_empty() -> None:
    dates = DateSet(parse_rule("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"), 0)
    assert first_on_or_after(dates, 0) is None
    assert last_on_or_before(dates, 10**6) is None
    assert last_date(dates) < dates.start
    schedule = make_schedule(dates.rule, 0, 0, load_zone("UTC"))
    assert next_target(schedule, Instant(0)) is None


def test_a_thousand_years_later_costs_two_periods(monkeypatch: pytest.MonkeyPatch) -> None:
    expanded_periods: list[int] = []
    expand: Callable[[DateSet, int], tuple[int, ...]] = calendar.period_dates

    def counting(dates: DateSet, number: int) -> tuple[int, ...]:
        expanded_periods.append(number)
        return expand(dates, number)

    dates = DateSet(parse_rule("FREQ=MONTHLY;BYDAY=5FR"), day_number(dt.date(2026, 12, 1)))
    last_date(dates)  # builds the rule's table once
    monkeypatch.setattr(calendar, "period_dates", counting)
    found = first_on_or_after(dates, day_number(dt.date(3026, 1, 1)))
    assert found is not None
    assert date_of(found) == dt.date(3026, 3, 31)  # January and February have four Fridays
    assert occurrence_index(dates, found) > 4000
    assert len(expanded_periods) <= 3


# -- named cases: instants --------------------------------------------------------------------


def instants(rule: str, time: str, zone: str, start: str, after: str, count: int) -> list[str]:
    schedule = make_schedule(
        parse_rule(rule),
        day_number(dt.date.fromisoformat(start)),
        parse_wall_time(time),
        load_zone(zone),
    )
    return [format_instant(i) for _, i in upcoming(schedule, parse_instant(after), count)]


def test_a_spring_forward_sunday_in_new_york_fires_when_the_clocks_jump() -> None:
    # 2027-03-14 is the second Sunday of March: 02:30 does not exist; the gap ends at 07:00Z.
    found = instants(
        "FREQ=MONTHLY;BYDAY=2SU", "02:30", "America/New_York", "2027-01-01",
        "2027-02-01T00:00:00.000Z", 3,
    )  # fmt: skip
    assert found == [
        "2027-02-14T07:30:00.000Z",
        "2027-03-14T07:00:00.000Z",
        "2027-04-11T06:30:00.000Z",
    ]


def test_an_overlap_day_in_london_takes_the_earlier_instant() -> None:
    # 2027-10-31, the last Sunday of October: 01:30 happens at 00:30Z (BST) and 01:30Z (GMT).
    found = instants(
        "FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU", "01:30", "Europe/London", "2026-12-01",
        "2026-12-01T00:00:00.000Z", 2,
    )  # fmt: skip
    assert found == ["2027-10-31T00:30:00.000Z", "2028-10-29T00:30:00.000Z"]


def test_lord_howe_moves_by_half_an_hour() -> None:
    # Lord Howe moves from +10:30 to +11:00 at 02:00 on 2026-10-04, the first Sunday of October.
    found = instants(
        "FREQ=MONTHLY;BYDAY=1SU", "02:15", "Australia/Lord_Howe", "2026-09-01",
        "2026-09-01T00:00:00.000Z", 2,
    )  # fmt: skip
    assert found == ["2026-09-05T15:45:00.000Z", "2026-10-03T15:30:00.000Z"]


def test_the_skipped_apia_date_fires_where_its_gap_ends() -> None:
    # Samoa skipped 2011-12-30; a rule naming the 30th fires when 2011-12-31 00:00 +14:00 begins.
    found = instants(
        "FREQ=MONTHLY;BYMONTHDAY=30", "09:00", "Pacific/Apia", "2011-11-01",
        "2011-11-01T00:00:00.000Z", 3,
    )  # fmt: skip
    assert found == [
        "2011-11-30T19:00:00.000Z",
        "2011-12-30T10:00:00.000Z",
        "2012-01-29T19:00:00.000Z",  # +14:00 (summer time) then
    ]


def test_catch_up_after_a_thousand_years() -> None:
    schedule = make_schedule(
        parse_rule("FREQ=MONTHLY;BYDAY=1MO"),
        day_number(dt.date(2026, 12, 1)),
        parse_wall_time("09:00"),
        load_zone("Asia/Tokyo"),
    )
    target = parse_instant("2026-12-07T00:00:00.000Z")
    assert next_target(schedule, parse_instant("2026-12-01T00:00:00.000Z")) == target
    due_at, skipped = latest_due(schedule, target, parse_instant("3026-12-10T00:00:00.000Z"))
    assert format_instant(due_at) == "3026-12-04T00:00:00.000Z"
    assert skipped == 12_000  # one a month for a thousand years, less the one delivered
    following = next_target(schedule, parse_instant("3026-12-10T00:00:00.000Z"))
    assert following is not None
    assert format_instant(following) == "3027-01-01T00:00:00.000Z"


def test_the_set_ends_at_count_and_past_year_9999() -> None:
    schedule = make_schedule(
        parse_rule("FREQ=YEARLY;COUNT=2"), day_number(dt.date(2026, 12, 1)), 0, load_zone("UTC")
    )
    second = parse_instant("2027-12-01T00:00:00.000Z")
    assert next_target(schedule, parse_instant("2027-01-01T00:00:00.000Z")) == second
    assert next_target(schedule, second) is None
    assert latest_due(schedule, second, parse_instant("2030-01-01T00:00:00.000Z")) == (second, 0)
    late = make_schedule(
        parse_rule("FREQ=YEARLY"),
        day_number(dt.date(9999, 12, 31)),
        parse_wall_time("23:00"),
        load_zone("America/New_York"),
    )
    # 9999-12-31 23:00 in New York is 10000-01-01T04:00Z: past the range.
    assert next_target(late, parse_instant("9999-01-01T00:00:00.000Z")) is None
    found = first_after(late, parse_instant("9999-01-01T00:00:00.000Z"))
    assert found is not None
    assert found[1] > MAX_INSTANT


def test_a_target_the_current_rules_do_not_produce_is_delivered_itself() -> None:
    schedule = make_schedule(parse_rule("FREQ=DAILY"), 0, 9 * HOUR, load_zone("UTC"))
    target = parse_instant("2026-12-01T12:00:00.000Z")
    decided_at = parse_instant("2026-12-01T13:00:00.000Z")
    assert latest_due(schedule, target, decided_at) == (target, 0)


def test_resolution_is_the_daily_at_resolution() -> None:
    zone = load_zone("America/New_York")
    schedule = make_schedule(parse_rule("FREQ=DAILY"), 0, parse_wall_time("02:30"), zone)
    day = day_number(dt.date(2027, 3, 14))
    assert calendar.occurrence_on(schedule, day) == earliest_at_or_after(
        zone, day * DAY + parse_wall_time("02:30")
    )


# -- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("FREQ=MONTHLY;BYDAY=1MO", "FREQ=MONTHLY;BYDAY=1MO"),
        ("BYMONTHDAY=-1;FREQ=MONTHLY", "FREQ=MONTHLY;BYMONTHDAY=-1"),
        ("FREQ=WEEKLY;INTERVAL=1;BYDAY=FR,MO", "FREQ=WEEKLY;BYDAY=MO,FR"),
        ("FREQ=MONTHLY;BYDAY=MO,-1MO,+1MO,2TU", "FREQ=MONTHLY;BYDAY=-1MO,1MO,MO,2TU"),
        (
            "UNTIL=20271231;BYSETPOS=-1,1;BYDAY=FR;BYMONTHDAY=15,-3,1;BYMONTH=12,01;"
            "INTERVAL=02;FREQ=YEARLY",
            "FREQ=YEARLY;INTERVAL=2;BYMONTH=1,12;BYMONTHDAY=-3,1,15;BYDAY=FR;BYSETPOS=-1,1;"
            "UNTIL=20271231",
        ),
        ("FREQ=DAILY;COUNT=100000", "FREQ=DAILY;COUNT=100000"),
        ("FREQ=YEARLY;INTERVAL=1000", "FREQ=YEARLY;INTERVAL=1000"),
        ("FREQ=MONTHLY;BYMONTHDAY=+5", "FREQ=MONTHLY;BYMONTHDAY=5"),
    ],
)
def test_rules_are_written_in_canonical_order(text: str, canonical: str) -> None:
    assert canonical_rule(text) == canonical
    assert canonical_rule(canonical) == canonical


EXAMPLE = "'FREQ=MONTHLY;BYDAY=1MO'"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, f"`rule` must be a string of RRULE parts, such as {EXAMPLE}."),
        ("", f"`rule` is empty; give at least FREQ, such as {EXAMPLE}."),
        ("FREQ=MONTHLY; BYDAY=1MO", f"`rule` contains whitespace; remove it, as in {EXAMPLE}."),
        ("FREQ=MONTHLY\n", f"`rule` contains whitespace; remove it, as in {EXAMPLE}."),
        ("freq=monthly;byday=1mo", "`rule` must be upper case, such as 'FREQ=MONTHLY;BYDAY=1MO'."),
        # Upper case would not make it right: what would still be wrong is said instead, the
        # value quoted as written.
        ("FREQ=DAILY;COUNT=1e3", "COUNT must be a whole number from 1 to 100000, not '1e3'."),
        (
            "FREQ=MONTHLY;",
            "`rule` has an empty part; separate parts with a single ';' and do not end the rule "
            "with one.",
        ),
        (
            "FREQ=DAILY;;COUNT=2",
            "`rule` has an empty part; separate parts with a single ';' and do not end the rule "
            "with one.",
        ),
        (
            "RRULE:FREQ=DAILY",
            "'RRULE:FREQ=DAILY' is not a rule part; write parts as NAME=VALUE separated by ';', "
            f"such as {EXAMPLE}.",
        ),
        (
            "FREQ",
            f"'FREQ' is not a rule part; write parts as NAME=VALUE separated by ';', such as "
            f"{EXAMPLE}.",
        ),
        (
            "FREQ=DAILY;BYHOUR=9",
            "BYHOUR is not supported; the time of day comes from `time`, so remove BYHOUR.",
        ),
        (
            "FREQ=DAILY;BYMINUTE=30",
            "BYMINUTE is not supported; the time of day comes from `time`, so remove BYMINUTE.",
        ),
        (
            "FREQ=DAILY;BYSECOND=0",
            "BYSECOND is not supported; the time of day comes from `time`, so remove BYSECOND.",
        ),
        (
            "FREQ=YEARLY;BYWEEKNO=20",
            "BYWEEKNO is not supported; use BYMONTH, BYMONTHDAY, BYDAY and BYSETPOS instead.",
        ),
        (
            "FREQ=YEARLY;BYYEARDAY=100",
            "BYYEARDAY is not supported; use BYMONTH with BYMONTHDAY instead.",
        ),
        (
            "FREQ=WEEKLY;WKST=SU",
            "WKST is not supported; weeks always start on Monday, so remove WKST.",
        ),
        (
            "FREQ=DAILY;DTSTART=20261201",
            "DTSTART is not a supported rule part; use FREQ, INTERVAL, BYMONTH, BYMONTHDAY, "
            "BYDAY, BYSETPOS, COUNT or UNTIL.",
        ),
        # NAME=VALUE with a name the subset does not take (an RFC 5545 x-name, say) is told
        # so, not that it is not NAME=VALUE.
        (
            "FREQ=DAILY;X-FOO=1",
            "X-FOO is not a supported rule part; use FREQ, INTERVAL, BYMONTH, BYMONTHDAY, "
            "BYDAY, BYSETPOS, COUNT or UNTIL.",
        ),
        (
            "FREQ=DAILY;BYDAY2=MO",
            "BYDAY2 is not a supported rule part; use FREQ, INTERVAL, BYMONTH, BYMONTHDAY, "
            "BYDAY, BYSETPOS, COUNT or UNTIL.",
        ),
        (
            "FREQ=DAILY;X_FOO=1",
            "'X_FOO=1' is not a rule part; write parts as NAME=VALUE separated by ';', such as "
            f"{EXAMPLE}.",
        ),
        (
            "FREQ=DAILY;=1",
            "'=1' is not a rule part; write parts as NAME=VALUE separated by ';', such as "
            f"{EXAMPLE}.",
        ),
        ("FREQ=DAILY;FREQ=WEEKLY", "FREQ is given twice; give each part once."),
        ("FREQ=DAILY;COUNT=", "COUNT has no value; write COUNT=VALUE or remove it."),
        (
            "INTERVAL=2",
            "`rule` has no FREQ; add FREQ=DAILY, FREQ=WEEKLY, FREQ=MONTHLY or FREQ=YEARLY.",
        ),
        (
            "FREQ=HOURLY",
            "FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY (use `every_seconds` for a fixed "
            "interval), not 'HOURLY'.",
        ),
        ("FREQ=FORTNIGHTLY", "FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY, not 'FORTNIGHTLY'."),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL must be a whole number from 1 to 1000, not '0'."),
        ("FREQ=DAILY;INTERVAL=1001", "INTERVAL must be a whole number from 1 to 1000, not '1001'."),
        ("FREQ=DAILY;INTERVAL=+2", "INTERVAL must be a whole number from 1 to 1000, not '+2'."),
        ("FREQ=DAILY;INTERVAL=2.5", "INTERVAL must be a whole number from 1 to 1000, not '2.5'."),
        (
            "FREQ=YEARLY;BYMONTH=13",
            "BYMONTH must list months from 1 to 12, separated by commas, such as "
            "'BYMONTH=1,7', not '13'.",
        ),
        (
            "FREQ=YEARLY;BYMONTH=1,,2",
            "BYMONTH must list months from 1 to 12, separated by commas, such as "
            "'BYMONTH=1,7', not ''.",
        ),
        ("FREQ=YEARLY;BYMONTH=3,03", "BYMONTH lists 3 twice; list each value once."),
        (
            "FREQ=MONTHLY;BYMONTHDAY=0",
            "BYMONTHDAY must list days from 1 to 31 or -31 to -1, separated by commas, such as "
            "'BYMONTHDAY=1,-1', not '0'.",
        ),
        (
            "FREQ=MONTHLY;BYMONTHDAY=-32",
            "BYMONTHDAY must list days from 1 to 31 or -31 to -1, separated by commas, such as "
            "'BYMONTHDAY=1,-1', not '-32'.",
        ),
        (
            "FREQ=MONTHLY;BYDAY=MON",
            "BYDAY must list the days MO, TU, WE, TH, FR, SA or SU, each optionally after an "
            "ordinal, separated by commas, such as 'BYDAY=1MO,-1FR', not 'MON'.",
        ),
        (
            "FREQ=MONTHLY;BYDAY=6MO",
            "the ordinal of '6MO' in BYDAY must be from 1 to 5 or -5 to -1 (a month has at most "
            "five of each weekday).",
        ),
        (
            "FREQ=MONTHLY;BYDAY=0MO",
            "the ordinal of '0MO' in BYDAY must be from 1 to 5 or -5 to -1 (a month has at most "
            "five of each weekday).",
        ),
        ("FREQ=MONTHLY;BYDAY=1MO,+1MO", "BYDAY lists '1MO' twice; list each day once."),
        (
            "FREQ=WEEKLY;BYDAY=1MO",
            "BYDAY '1MO' has an ordinal, which only FREQ=MONTHLY, or FREQ=YEARLY with BYMONTH, "
            "allows; write 'MO' or change FREQ.",
        ),
        (
            "FREQ=DAILY;BYDAY=-1FR",
            "BYDAY '-1FR' has an ordinal, which only FREQ=MONTHLY, or FREQ=YEARLY with BYMONTH, "
            "allows; write 'FR' or change FREQ.",
        ),
        (
            "FREQ=YEARLY;BYDAY=20MO",
            "the ordinal of '20MO' in BYDAY must be from 1 to 5 or -5 to -1 (a month has at most "
            "five of each weekday).",
        ),
        (
            "FREQ=YEARLY;BYDAY=1MO",
            "BYDAY '1MO' has an ordinal, which FREQ=YEARLY allows only with BYMONTH; add BYMONTH "
            "or write 'MO'.",
        ),
        (
            "FREQ=WEEKLY;BYMONTHDAY=1",
            "BYMONTHDAY cannot be used with FREQ=WEEKLY; use FREQ=MONTHLY, or BYDAY for days of "
            "the week.",
        ),
        (
            "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=32",
            "BYSETPOS must list positions from 1 to 31 or -31 to -1, separated by commas, such "
            "as 'BYSETPOS=-1', not '32'.",
        ),
        (
            "FREQ=WEEKLY;BYDAY=MO,TU;BYSETPOS=1",
            "BYSETPOS needs FREQ=MONTHLY or FREQ=YEARLY; remove it or change FREQ.",
        ),
        (
            "FREQ=MONTHLY;BYSETPOS=-1",
            "BYSETPOS needs another BY part to choose from; add one, such as "
            "'FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1'.",
        ),
        ("FREQ=DAILY;COUNT=0", "COUNT must be a whole number from 1 to 100000, not '0'."),
        ("FREQ=DAILY;COUNT=100001", "COUNT must be a whole number from 1 to 100000, not '100001'."),
        (
            "FREQ=DAILY;UNTIL=2027-12-31",
            "UNTIL must be a local date written YYYYMMDD, such as 'UNTIL=20271231', not "
            "'2027-12-31'.",
        ),
        (
            "FREQ=DAILY;UNTIL=20271231T000000Z",
            "UNTIL must be a local date written YYYYMMDD, such as 'UNTIL=20271231', not "
            "'20271231T000000Z'.",
        ),
        (
            "FREQ=DAILY;UNTIL=20270230",
            "UNTIL '20270230' is not a calendar date; give a date that exists.",
        ),
        (
            "FREQ=DAILY;UNTIL=00001231",
            "UNTIL '00001231' is not a calendar date; give a date that exists.",
        ),
        (
            "FREQ=DAILY;COUNT=3;UNTIL=20271231",
            "COUNT and UNTIL cannot both be given; keep one of them.",
        ),
    ],
)
def test_each_rejected_part_has_its_message(text: object, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_rule(text)
    assert (caught.value.code, caught.value.message) == ("invalid_rule", message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("freq=daily;count=1e3", "COUNT must be a whole number from 1 to 100000, not '1e3'."),
        ("FREQ=DAILY;COUNT=ß", "COUNT must be a whole number from 1 to 100000, not 'ß'."),
        ("freq=daily;interval=two", "INTERVAL must be a whole number from 1 to 1000, not 'two'."),
        (
            "freq=secondly",
            "FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY (use `every_seconds` for a fixed "
            "interval), not 'secondly'.",
        ),
        ("freq=fortnightly", "FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY, not 'fortnightly'."),
        (
            "freq=yearly;bymonth=jan",
            "BYMONTH must list months from 1 to 12, separated by commas, such as "
            "'BYMONTH=1,7', not 'jan'.",
        ),
        (
            "freq=monthly;byday=mo,tue",
            "BYDAY must list the days MO, TU, WE, TH, FR, SA or SU, each optionally after an "
            "ordinal, separated by commas, such as 'BYDAY=1MO,-1FR', not 'tue'.",
        ),
        (
            "freq=monthly;byday=6mo",
            "the ordinal of '6mo' in BYDAY must be from 1 to 5 or -5 to -1 (a month has at most "
            "five of each weekday).",
        ),
        (
            "freq=weekly;byday=+1mo",
            "BYDAY '+1mo' has an ordinal, which only FREQ=MONTHLY, or FREQ=YEARLY with BYMONTH, "
            "allows; write 'MO' or change FREQ.",
        ),
        (
            "freq=yearly;byday=-1fr",
            "BYDAY '-1fr' has an ordinal, which FREQ=YEARLY allows only with BYMONTH; add BYMONTH "
            "or write 'FR'.",
        ),
        (
            "freq=daily;until=2027-12-3l",
            "UNTIL must be a local date written YYYYMMDD, such as 'UNTIL=20271231', not "
            "'2027-12-3l'.",
        ),
        (
            "freq=daily;rrule:x",
            "'rrule:x' is not a rule part; write parts as NAME=VALUE separated by ';', such as "
            f"{EXAMPLE}.",
        ),
        # The part's name is named, as the parts are spelled (upper case).
        (
            "freq=daily;byhour=9",
            "BYHOUR is not supported; the time of day comes from `time`, so remove BYHOUR.",
        ),
        ("freq=daily;count=", "COUNT has no value; write COUNT=VALUE or remove it."),
        (
            "freq=daily;x-foo=1",
            "X-FOO is not a supported rule part; use FREQ, INTERVAL, BYMONTH, BYMONTHDAY, "
            "BYDAY, BYSETPOS, COUNT or UNTIL.",
        ),
        # A value the message names as read, not quotes, is named in the canonical form.
        ("freq=monthly;byday=mo,+1mo,1mo", "BYDAY lists '1MO' twice; list each day once."),
    ],
)
def test_a_refusal_quotes_the_value_as_the_rule_writes_it(text: str, message: str) -> None:
    # The rule is read upper-cased (so what is still wrong is said before its case), but a
    # part's value is quoted as the model wrote it.
    with pytest.raises(ScheduleError) as caught:
        parse_rule(text)
    assert (caught.value.code, caught.value.message) == ("invalid_rule", message)


@given(st.text(max_size=40) | st.text(alphabet="FREQ=DAILYWEKMONTHBYSP;,-+0123456789", max_size=40))
def test_any_string_parses_or_is_an_invalid_rule(text: str) -> None:
    try:
        rule = parse_rule(text)
    except ScheduleError as error:
        assert error.code == "invalid_rule"
        assert error.message.endswith(".")
        assert error.message[0] in "`'\"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    else:
        assert parse_rule(format_rule(rule)) == rule


@given(rules(sparse=True))
def test_the_canonical_form_round_trips(rule: CalendarRule) -> None:
    assert parse_rule(format_rule(rule)) == rule
    assert canonical_rule(format_rule(rule)) == format_rule(rule)


def test_a_rule_value_is_frozen() -> None:
    rule = parse_rule("FREQ=DAILY")
    with pytest.raises(AttributeError):
        rule.interval = 2  # type: ignore[misc]


@settings(max_examples=15, deadline=None)
@given(rule=rules(sparse=True), start=starts)
def test_a_daily_rules_table_is_the_day_by_day_count(rule: CalendarRule, start: dt.date) -> None:
    """The month-by-month table of a DAILY rule with calendar limits counts what
    :func:`period_dates` gives one picked day at a time."""
    rule = CalendarRule(
        frequency="DAILY",
        interval=rule.interval,
        months=rule.months or (2,),
        month_days=rule.month_days,
        weekdays=tuple((0, weekday) for _, weekday in rule.weekdays),
    )
    dates = DateSet(rule, day_number(start))
    length = 146_097 // math.gcd(rule.interval, 146_097)
    expected = [len(calendar.period_dates(dates, n * rule.interval)) for n in range(length)]
    assert calendar._daily_counts(dates, length) == expected
