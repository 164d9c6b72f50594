"""``daily`` occurrences against an independent brute-force oracle, over every bundled zone.

The oracle never resolves a wall time. It reads each zone only from UTC to local (``astimezone``),
scans the UTC offset in fixed steps around the dates in question, bisects every change to the
millisecond, and so builds the transition list; a date's occurrence is then the first instant of
the first constant-offset segment whose local clock reaches the date's wall time. Dates and
weekdays come from :class:`datetime.date`, not from the project's calendar arithmetic.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core import daily
from session_schedule.core.daily import (
    count_listed,
    first_after,
    latest_daily_due,
    make_rule,
    next_daily_target,
)
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import MAX_INSTANT, Instant, format_instant, parse_instant
from session_schedule.core.records import WEEKDAYS, DailyScheduleRecord, Weekday
from session_schedule.core.time_input import (
    earliest_at_or_after,
    format_time_of_day,
    load_zone,
    parse_wall_time,
    supported_zones,
)

DAY = 86_400_000
HOUR = 3_600_000
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
EPOCH_DATE = dt.date(1970, 1, 1)
ZONE_NAMES = sorted(name for name in supported_zones() if "/" in name)

zones = st.sampled_from(ZONE_NAMES)
times = st.integers(0, DAY - 1) | st.sampled_from(
    [0, HOUR, 2 * HOUR, 2 * HOUR + 30 * 60_000, 3 * HOUR, 23 * HOUR + 59 * 60_000]
)
weekday_sets = st.sets(st.sampled_from(WEEKDAYS), min_size=1).map(
    lambda days: tuple(day for day in WEEKDAYS if day in days)
)


# -- the oracle -------------------------------------------------------------------------------


def oracle_offset(zone: zoneinfo.ZoneInfo, instant: int) -> int:
    local = (EPOCH + dt.timedelta(milliseconds=instant)).astimezone(zone)
    offset = local.utcoffset()
    assert offset is not None
    return offset // dt.timedelta(milliseconds=1)


def oracle_segments(
    zone: zoneinfo.ZoneInfo, start: int, end: int, step: int = HOUR
) -> list[tuple[int, int]]:
    """``(first instant, offset)`` of each constant-offset stretch of ``start`` … ``end``."""
    segments = [(start, oracle_offset(zone, start))]
    low = start
    while low < end:
        high = min(low + step, end)
        current = segments[-1][1]
        if oracle_offset(zone, high) == current:
            low = high
            continue
        while high - low > 1:
            middle = (low + high) // 2
            if oracle_offset(zone, middle) == current:
                low = middle
            else:
                high = middle
        segments.append((high, oracle_offset(zone, high)))
        low = high
    return segments


def oracle_occurrence(segments: list[tuple[int, int]], wall: int) -> int:
    """The earliest instant whose local reading is at or after ``wall``."""
    for index, (first, offset) in enumerate(segments):
        end = segments[index + 1][0] if index + 1 < len(segments) else None
        candidate = max(first, wall - offset)
        if end is None or candidate < end:
            return candidate
    raise AssertionError("unreachable: the last segment is open-ended")


def oracle_dates(first: dt.date, last: dt.date, weekdays: tuple[Weekday, ...]) -> list[dt.date]:
    listed = {WEEKDAYS.index(day) for day in weekdays}
    count = (last - first).days + 1
    dates = (first + dt.timedelta(days=n) for n in range(count))
    return [date for date in dates if date.weekday() in listed]


def oracle_occurrences(
    zone: zoneinfo.ZoneInfo,
    time_of_day: int,
    weekdays: tuple[Weekday, ...],
    first: dt.date,
    last: dt.date,
    step: int = HOUR,
) -> list[int]:
    """The occurrence of every listed date from ``first`` to ``last``, date by date."""
    start = ((first - EPOCH_DATE).days - 2) * DAY
    end = ((last - EPOCH_DATE).days + 3) * DAY
    segments = oracle_segments(zone, start, end, step)
    return [
        oracle_occurrence(segments, (date - EPOCH_DATE).days * DAY + time_of_day)
        for date in oracle_dates(first, last, weekdays)
    ]


def date_of(instant: int) -> dt.date:
    return EPOCH_DATE + dt.timedelta(days=instant // DAY)


def record(
    time_of_day: int, zone: str, weekdays: tuple[Weekday, ...], target: int
) -> DailyScheduleRecord:
    return DailyScheduleRecord(
        id=ScheduleId("sch_1"),
        prompt="p",
        local_time=format_time_of_day(time_of_day),
        time_zone=zone,
        weekdays=list(weekdays),
        scheduled_at=format_instant(Instant(target)),
    )


def check_next(zone_name: str, time_of_day: int, weekdays: tuple[Weekday, ...], x: int) -> None:
    """The next three occurrences after ``x``, each found from the one before, are the oracle's."""
    zone = load_zone(zone_name)
    expected = [
        occurrence
        for occurrence in oracle_occurrences(
            zone,
            time_of_day,
            weekdays,
            date_of(x) - dt.timedelta(days=3),
            date_of(x) + dt.timedelta(days=24),
        )
        if occurrence > x
    ]
    rule = make_rule(time_of_day, zone, weekdays)
    found: list[int] = []
    previous = x
    while len(found) < 3:
        step = first_after(rule, previous)
        assert step is not None
        found.append(step[1])
        previous = step[1]
    # Dates that share an instant (a skipped date at 00:00) are one step of "strictly after".
    assert found == sorted(set(expected))[:3], (
        zone_name,
        format_time_of_day(time_of_day),
        format_instant(Instant(x)),
    )


# -- single dates, every zone -----------------------------------------------------------------

days_1850_2250 = st.integers(
    (dt.date(1850, 1, 1) - EPOCH_DATE).days, (dt.date(2250, 12, 31) - EPOCH_DATE).days
)


@settings(max_examples=300, deadline=None)
@given(
    zone=zones,
    day=days_1850_2250,
    time_of_day=times,
    weekdays=weekday_sets,
    shift=st.integers(-2 * DAY, 2 * DAY),
)
def test_next_occurrence_agrees_with_the_oracle(
    zone: str, day: int, time_of_day: int, weekdays: tuple[Weekday, ...], shift: int
) -> None:
    check_next(zone, time_of_day, weekdays, day * DAY + shift)


@settings(max_examples=300, deadline=None)
@given(
    zone=zones,
    day=st.integers(
        (dt.date(1960, 1, 1) - EPOCH_DATE).days, (dt.date(2040, 12, 31) - EPOCH_DATE).days
    ),
    where=st.sampled_from([-1.5, -1, -0.75, -0.5, -0.01, 0, 0.01, 0.5, 0.99, 1, 1.5, 2.5])
    | st.floats(-1.5, 2.5),
    before=st.integers(0, DAY),
    weekdays=st.just(WEEKDAYS) | weekday_sets,
)
def test_wall_times_around_a_transition_agree_with_the_oracle(
    zone: str, day: int, where: float, before: int, weekdays: tuple[Weekday, ...]
) -> None:
    """Wall times in, just before and just after a gap or an overlap (the zone's first change
    within six years after ``day``; zones without one test an ordinary day)."""
    segments = oracle_segments(load_zone(zone), day * DAY, (day + 6 * 366) * DAY, step=12 * HOUR)
    if len(segments) > 1:
        (_, offset_before), (transition, offset_after) = segments[:2]
        # where in [0, 1) puts a gap's wall times inside it, where in [-1, 0) an overlap's.
        wall = transition + offset_before + int(where * abs(offset_after - offset_before))
        start = transition - before
    else:
        wall = day * DAY + int(where * HOUR)
        start = day * DAY - before
    check_next(zone, wall % DAY, weekdays, start)


# -- the DST cases by name --------------------------------------------------------------------


def occurrences(
    zone: str, time: str, start: str, count: int, weekdays: tuple[Weekday, ...] = WEEKDAYS
) -> list[str]:
    rule = make_rule(parse_wall_time(time), load_zone(zone), weekdays)
    found: list[str] = []
    x = parse_instant(start)
    for _ in range(count):
        step = first_after(rule, x)
        assert step is not None
        found.append(format_instant(Instant(step[1])))
        x = Instant(step[1])
    return found


def test_a_gap_day_fires_when_the_clocks_jump() -> None:
    # 2027-03-14 02:30 does not exist in New York: 02:00 EST jumps to 03:00 EDT at 07:00Z.
    assert occurrences("America/New_York", "02:30", "2027-03-12T12:00:00.000Z", 3) == [
        "2027-03-13T07:30:00.000Z",
        "2027-03-14T07:00:00.000Z",
        "2027-03-15T06:30:00.000Z",
    ]


def test_an_overlap_day_fires_once_at_the_earlier_instant() -> None:
    # 2027-11-07 01:30 happens twice in New York (05:30Z EDT, 06:30Z EST): only the first counts.
    assert occurrences("America/New_York", "01:30", "2027-11-06T12:00:00.000Z", 2) == [
        "2027-11-07T05:30:00.000Z",
        "2027-11-08T06:30:00.000Z",
    ]


def test_lord_howe_shifts_by_thirty_minutes() -> None:
    # Lord Howe Island moves from +10:30 to +11:00 at 02:00 local on 2026-10-04.
    assert occurrences("Australia/Lord_Howe", "02:15", "2026-10-02T16:00:00.000Z", 3) == [
        "2026-10-03T15:30:00.000Z",
        "2026-10-04T15:15:00.000Z",
        "2026-10-05T15:15:00.000Z",
    ]
    # and back from +11:00 to +10:30 at 02:00 on 2027-04-04: 01:45 happens twice.
    assert occurrences("Australia/Lord_Howe", "01:45", "2027-04-03T00:00:00.000Z", 2) == [
        "2027-04-03T14:45:00.000Z",
        "2027-04-04T15:15:00.000Z",
    ]


def test_a_skipped_date_has_its_occurrence_where_its_gap_ends() -> None:
    # Samoa skipped 2011-12-30: 2011-12-29 24:00 (-10:00) was followed by 2011-12-31 00:00 (+14:00).
    assert occurrences("Pacific/Apia", "09:00", "2011-12-28T12:00:00.000Z", 4) == [
        "2011-12-28T19:00:00.000Z",
        "2011-12-29T19:00:00.000Z",
        "2011-12-30T10:00:00.000Z",
        "2011-12-30T19:00:00.000Z",
    ]
    # At 00:00 the skipped date and the next one share the instant the gap ends; a friday-only
    # rule fires there for the skipped Friday.
    assert occurrences("Pacific/Apia", "00:00", "2011-12-29T12:00:00.000Z", 1) == [
        "2011-12-30T10:00:00.000Z"
    ]
    assert occurrences("Pacific/Apia", "12:00", "2011-12-20T00:00:00.000Z", 2, ("fri",)) == [
        "2011-12-23T22:00:00.000Z",
        "2011-12-30T10:00:00.000Z",
    ]


def test_weekday_lists_skip_unlisted_dates() -> None:
    # 2026-12-04 is a Friday; Tokyo has no DST.
    assert occurrences("Asia/Tokyo", "09:00", "2026-12-03T23:00:00.000Z", 3, ("mon", "fri")) == [
        "2026-12-04T00:00:00.000Z",
        "2026-12-07T00:00:00.000Z",
        "2026-12-11T00:00:00.000Z",
    ]


# -- catch-up after downtime ------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    zone=zones,
    day=st.integers(
        (dt.date(1960, 1, 1) - EPOCH_DATE).days, (dt.date(2060, 12, 31) - EPOCH_DATE).days
    ),
    time_of_day=times,
    weekdays=weekday_sets,
    created_shift=st.integers(0, DAY),
    downtime=st.integers(0, 3 * 366 * DAY) | st.integers(0, 3 * DAY),
)
def test_catch_up_agrees_with_enumeration_over_years(
    zone: str,
    day: int,
    time_of_day: int,
    weekdays: tuple[Weekday, ...],
    created_shift: int,
    downtime: int,
) -> None:
    loaded = load_zone(zone)
    created = day * DAY + created_shift
    found = first_after(make_rule(time_of_day, loaded, weekdays), created)
    assert found is not None
    target = found[1]
    decided_at = Instant(target + downtime)
    all_occurrences = oracle_occurrences(
        loaded,
        time_of_day,
        weekdays,
        date_of(created) - dt.timedelta(days=2),
        date_of(decided_at) + dt.timedelta(days=10),
        step=2 * HOUR,
    )
    assert target == min(o for o in all_occurrences if o > created)
    due = [o for o in all_occurrences if target <= o <= decided_at]
    reminder = record(time_of_day, zone, weekdays, target)
    assert latest_daily_due(reminder, decided_at) == (max(due), len(due) - 1)
    assert next_daily_target(reminder, decided_at) == min(
        o for o in all_occurrences if o > decided_at
    )


def test_a_thousand_years_down_costs_a_few_resolutions(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    resolve: Callable[[zoneinfo.ZoneInfo, int], int] = earliest_at_or_after

    def counting(zone: zoneinfo.ZoneInfo, wall: int) -> int:
        calls.append(wall)
        return resolve(zone, wall)

    monkeypatch.setattr(daily, "earliest_at_or_after", counting)
    weekdays: tuple[Weekday, ...] = ("mon", "tue", "wed", "thu", "fri")
    target = parse_instant("2026-12-01T00:00:00.000Z")  # Tuesday 09:00 in Tokyo
    decided_at = parse_instant("3026-06-15T12:34:56.789Z")
    reminder = record(9 * HOUR, "Asia/Tokyo", weekdays, target)
    due_at, skipped = latest_daily_due(reminder, decided_at)
    following = next_daily_target(reminder, decided_at)
    assert len(calls) <= 12
    # Tokyo has kept +09:00 since 1951: count the weekdays by walking the calendar.
    first, last = dt.date(2026, 12, 1), dt.date(3026, 6, 15)
    weekdays_between = sum(
        (first + dt.timedelta(days=n)).weekday() < 5 for n in range((last - first).days + 1)
    )
    assert skipped == weekdays_between - 1
    assert format_instant(due_at) == "3026-06-15T00:00:00.000Z"  # a Monday
    assert following is not None
    assert format_instant(Instant(following)) == "3026-06-16T00:00:00.000Z"


def test_the_last_occurrence_before_year_10000_ends_the_rule() -> None:
    reminder = record(
        23 * HOUR, "America/New_York", WEEKDAYS, parse_instant("9999-12-31T04:00:00.000Z")
    )
    assert next_daily_target(reminder, parse_instant("9999-12-31T04:00:00.000Z")) is None
    assert first_after(make_rule(0, load_zone("UTC"), WEEKDAYS), MAX_INSTANT) is None


@given(first=st.integers(-1000, 1000), length=st.integers(-3, 800), weekdays=weekday_sets)
def test_counting_listed_dates_agrees_with_walking_the_calendar(
    first: int, length: int, weekdays: tuple[Weekday, ...]
) -> None:
    rule = make_rule(0, load_zone("UTC"), weekdays)
    start = EPOCH_DATE + dt.timedelta(days=first)
    walked = (
        len(oracle_dates(start, start + dt.timedelta(days=length), weekdays)) if length >= 0 else 0
    )
    assert count_listed(rule, first, first + length) == walked


def test_inside_an_overlap_the_next_date_is_found_past_the_repeated_hour() -> None:
    # At 06:15Z on 2027-11-07 New York reads 01:15 for the second time: 01:30 that day already
    # happened (05:30Z), so the next occurrence is the following day's.
    rule = make_rule(parse_wall_time("01:30"), load_zone("America/New_York"), WEEKDAYS)
    found = first_after(rule, parse_instant("2027-11-07T06:15:00.000Z"))
    assert found is not None
    assert format_instant(Instant(found[1])) == "2027-11-08T06:30:00.000Z"


def test_a_target_the_current_rules_do_not_produce_is_delivered_itself() -> None:
    # As if the zone's rules had changed since the target was computed: no occurrence lies
    # between the stored target and the decision, so the stored target is the one delivered.
    reminder = record(9 * HOUR, "UTC", WEEKDAYS, parse_instant("2026-12-01T12:00:00.000Z"))
    decided_at = parse_instant("2026-12-01T13:00:00.000Z")
    assert latest_daily_due(reminder, decided_at) == (parse_instant("2026-12-01T12:00:00.000Z"), 0)
    assert next_daily_target(reminder, decided_at) == parse_instant("2026-12-02T09:00:00.000Z")


def test_a_rule_lists_at_least_one_weekday() -> None:
    with pytest.raises(ValueError, match="a daily rule lists at least one weekday"):
        make_rule(0, load_zone("UTC"), ())
