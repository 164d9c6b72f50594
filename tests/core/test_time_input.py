"""The `at` selector: RFC 3339 strings, local-calendar objects, zones and DST (SPEC §2, §8).

Messages are part of the contract a model reads, so every rejection is compared whole. The
templates below are written out here, independently of the module, to freeze the wording.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone
from datetime import time as time_of_day
from importlib import resources
from pathlib import Path
from typing import Final

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import session_schedule
from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import (
    MAX_INSTANT,
    MIN_INSTANT,
    MS_PER_DAY,
    Instant,
    days_from_civil,
    describe_instant,
    format_instant,
    parse_instant,
)
from session_schedule.core.time_input import (
    GEOGRAPHIC_AREAS,
    format_local,
    is_supported_zone,
    load_zone,
    parse_at,
    parse_rfc3339,
    resolve_local,
    supported_zones,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NAIVE_EPOCH = datetime(1970, 1, 1)
SELECTOR_CODES = {"invalid_selector", "invalid_time_zone", "time_out_of_range"}

DATE_ADVICE = (
    "use a year from 0000 to 9999, a month from 01 to 12 and a day that exists in that month"
)
TIME_ADVICE = (
    "use hours 00-23, minutes 00-59 and seconds 00-59 (there is no 24:00 and no leap second)"
)
FORMS = (
    "an RFC 3339 string with a UTC offset, such as '2026-12-01T09:00:00+09:00', "
    "or an object with the keys `date`, `time` and `time_zone`"
)


def error_of(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(ScheduleError) as caught:
        call()
    return caught.value.code, caught.value.message


def outcome(call: Callable[[], int]) -> int | ScheduleError:
    try:
        return call()
    except ScheduleError as error:
        return error


# Message templates, one per kind of rejection.


def no_offset(text: str) -> str:
    return (
        f"{text!r} has no UTC offset; add one such as 'Z' or '+09:00', "
        "or pass {date, time, time_zone}."
    )


def malformed_offset(text: str) -> str:
    return (
        f"{text!r} has a malformed UTC offset; write it as 'Z', '+HH:MM' or '-HH:MM', "
        "such as '+09:00'."
    )


def not_rfc3339(text: str) -> str:
    return (
        f"{text!r} is not an RFC 3339 date-time; write YYYY-MM-DDTHH:MM:SS, an optional "
        "fraction, then 'Z' or an offset, such as '2026-12-01T09:00:00+09:00'."
    )


def bad_offset(text: str, offset: str) -> str:
    return (
        f"{text!r} has the UTC offset {offset!r}, which does not exist; "
        "use an offset from '-23:59' to '+23:59'."
    )


def impossible_date_in(text: str) -> str:
    return f"{text!r} contains an impossible date; {DATE_ADVICE}."


def impossible_time_in(text: str) -> str:
    return f"{text!r} contains an impossible time of day; {TIME_ADVICE}."


def too_late(subject: str) -> str:
    return (
        f"{subject} is after 9999-12-31T23:59:59.999Z, the latest instant Schedule can "
        "represent; choose an earlier time."
    )


def unknown_zone(name: str) -> str:
    return (
        f"{name!r} is not a supported time zone; use 'UTC' or an IANA Area/Location name "
        "such as 'America/New_York' or 'Asia/Tokyo'."
    )


def wrong_case_zone(name: str, suggestion: str) -> str:
    return f"{name!r} is not a supported time zone (names are case-sensitive); use {suggestion!r}."


def bad_date_form(value: str) -> str:
    return f"`date` must have the form YYYY-MM-DD, such as '2026-12-01', not {value!r}."


def impossible_date(value: str) -> str:
    return f"`date` {value!r} is an impossible date; {DATE_ADVICE}."


def bad_time_form(value: str) -> str:
    return (
        "`time` must have the form HH:MM, HH:MM:SS or HH:MM:SS.sss (24-hour, 1-3 fraction "
        f"digits), such as '09:00', not {value!r}."
    )


def impossible_time(value: str) -> str:
    return f"`time` {value!r} is an impossible time of day; {TIME_ADVICE}."


def gap(wall: str, zone: str, start: str, end: str) -> str:
    return (
        f"{wall} does not exist in {zone}: the clocks skip from {start} to {end} "
        "(a gap in local time); choose a time outside the gap."
    )


def wrong_keys(fix: str) -> str:
    return f"the `at` object must have exactly the keys `date`, `time` and `time_zone`; {fix}."


# RFC 3339 strings.


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T09:00:00+09:00", "2026-12-01T00:00:00.000Z"),
        ("2026-12-01T09:00:00Z", "2026-12-01T09:00:00.000Z"),
        ("2026-12-01t09:00:00z", "2026-12-01T09:00:00.000Z"),
        ("2026-12-01t09:00:00+09:00", "2026-12-01T00:00:00.000Z"),
        ("2026-12-01T09:00:00-00:00", "2026-12-01T09:00:00.000Z"),
        ("2026-12-01T09:00:00+00:00", "2026-12-01T09:00:00.000Z"),
        ("2026-12-01T09:00:00-05:30", "2026-12-01T14:30:00.000Z"),
        ("2026-12-01T09:00:00+23:59", "2026-11-30T09:01:00.000Z"),
        ("2026-12-01T09:00:00-23:59", "2026-12-02T08:59:00.000Z"),
        ("2026-12-01T23:30:00-01:00", "2026-12-02T00:30:00.000Z"),
        ("2026-01-01T00:30:00+01:00", "2025-12-31T23:30:00.000Z"),
        ("2026-12-01T09:00:00.5Z", "2026-12-01T09:00:00.500Z"),
        ("2026-12-01T09:00:00.12Z", "2026-12-01T09:00:00.120Z"),
        ("2026-12-01T09:00:00.123Z", "2026-12-01T09:00:00.123Z"),
        ("2026-12-01T09:00:00.123999Z", "2026-12-01T09:00:00.123Z"),
        ("2026-12-01T09:00:00.0009Z", "2026-12-01T09:00:00.000Z"),
        ("2026-12-01T09:00:00.999999999999999999999Z", "2026-12-01T09:00:00.999Z"),
        ("2024-02-29T12:00:00Z", "2024-02-29T12:00:00.000Z"),
        ("2000-02-29T12:00:00Z", "2000-02-29T12:00:00.000Z"),
        ("1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z"),
        ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
        ("9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999Z"),
        ("9999-12-31T23:59:59-00:00", "9999-12-31T23:59:59.000Z"),
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z"),
        ("0001-01-01T00:30:00+00:30", "0001-01-01T00:00:00.000Z"),
        ("0001-01-01T00:00:00-23:59", "0001-01-01T23:59:00.000Z"),
    ],
)
def test_rfc3339_accepted(text: str, expected: str) -> None:
    assert format_instant(Instant(parse_rfc3339(text))) == expected
    assert parse_at(text) == parse_rfc3339(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Year 0000 (RFC 3339's date-fullyear is any four digits): proleptic Gregorian, where
        # 0000 is a leap year. An instant before 0001 is returned; it is simply in the past.
        ("0000-12-31T23:00:00-02:00", "0001-01-01T01:00:00.000Z"),
        ("0000-12-31T23:59:59.999Z", "0000-12-31T23:59:59.999Z"),
        ("0000-02-29T12:00:00Z", "0000-02-29T12:00:00.000Z"),
        ("0000-03-01T00:00:00Z", "0000-03-01T00:00:00.000Z"),
        ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000Z"),
        ("0000-01-01T00:00:00-23:59", "0000-01-01T23:59:00.000Z"),
        ("0000-01-01T00:00:00+23:59", "-0001-12-31T00:01:00.000Z"),
        # Year 0001 east of UTC: before 0001-01-01T00:00:00.000Z.
        ("0001-01-01T00:00:00+00:01", "0000-12-31T23:59:00.000Z"),
        ("0001-01-01T00:30:00+01:00", "0000-12-31T23:30:00.000Z"),
        ("0001-01-01T00:00:00.999+00:00", "0001-01-01T00:00:00.999Z"),
    ],
)
def test_rfc3339_before_the_range_is_a_past_instant(text: str, expected: str) -> None:
    instant = parse_rfc3339(text)
    assert describe_instant(instant) == expected
    assert parse_at(text) == instant


def test_rfc3339_year_zero_counts_its_leap_day() -> None:
    # 0000-03-01 is 366 days before 0001-03-01 and 60 days after 0000-01-01.
    march = parse_rfc3339("0000-03-01T00:00:00Z")
    assert parse_rfc3339("0001-03-01T00:00:00Z") - march == 365 * MS_PER_DAY
    assert march - parse_rfc3339("0000-01-01T00:00:00Z") == 60 * MS_PER_DAY
    assert parse_rfc3339("0001-01-01T00:00:00Z") - march == 306 * MS_PER_DAY
    assert parse_rfc3339("0001-01-01T00:00:00Z") == MIN_INSTANT


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01T09:00:00",
        "2026-12-01t09:00:00",
        "2026-12-01T09:00:00.123",
        "2026-12-01T09:00:00.123456789",
        "2026-02-30T09:00:00",
    ],
)
def test_rfc3339_without_offset(text: str) -> None:
    assert error_of(lambda: parse_rfc3339(text)) == ("invalid_selector", no_offset(text))


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01T09:00:00+0900",
        "2026-12-01T09:00:00+09",
        "2026-12-01T09:00:00-05",
        "2026-12-01T09:00:00+09:00:00",
        "2026-12-01T09:00:00+9:00",
        "2026-12-01T09:00:00+09:0",
        "2026-12-01T09:00:00.5-0500",
        "2026-12-01T09:00:00+",
    ],
)
def test_rfc3339_malformed_offset(text: str) -> None:
    assert error_of(lambda: parse_rfc3339(text)) == ("invalid_selector", malformed_offset(text))


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "now",
        "tomorrow at 9",
        "2026-12-01 09:00:00Z",
        "2026-12-01 09:00:00+09:00",
        "2026-12-01_09:00:00Z",
        "2026-12-01T09:00:00 +09:00",
        " 2026-12-01T09:00:00Z",
        "2026-12-01T09:00:00Z ",
        "2026-12-01T09:00:00Z\n",
        "2026-12-01T09:00:00+09:00\n",
        "20261201T090000Z",
        "20261201T09:00:00Z",
        "2026-12-01T090000Z",
        "2026-W49-2T09:00:00Z",
        "2026-335T09:00:00Z",
        "2026-12-01T09:00:00,5Z",
        "2026-12-01T09:00:00.Z",
        "2026-12-01T09:00:00.+09:00",
        "2026-12-01T09:00Z",
        "2026-12-01T09Z",
        "2026-12-01",
        "2026-12-01Z",
        "09:00:00Z",
        "T09:00:00Z",
        "+2026-12-01T09:00:00Z",
        "12026-12-01T09:00:00Z",
        "026-12-01T09:00:00Z",
        "2026-12-1T09:00:00Z",
        "2026-1-01T09:00:00Z",
        "2026-12-01T9:00:00Z",
        "2026-12-01T09:0:00Z",
        "2026-12-01T09:00:0Z",
        "2026/12/01T09:00:00Z",
        "2026-12-01T09:00:00UTC",
        "2026-12-01T09:00:00GMT",
        "2026-12-01T09:00:00ZZ",
        "2026-12-01T09:00:00Z+09:00",
        "2026-12-01T09:00:00+09:00Z",
        "2026-12-01T09:00:00+09:00[Asia/Tokyo]",
        "2026-12-01T09:00:00\u221209:00",
        "\uff12\uff10\uff12\uff16-12-01T09:00:00Z",
        "\u0662\u0660\u0662\u0666-12-01T09:00:00Z",
        "2026-12-01T09:00:00.\u0661Z",
        "2026-12-01\u0000T09:00:00Z",
        "2026-12-01T09:00:00z\u200b",
    ],
)
def test_rfc3339_malformed(text: str) -> None:
    assert error_of(lambda: parse_rfc3339(text)) == ("invalid_selector", not_rfc3339(text))


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("2026-12-01T09:00:00+24:00", "+24:00"),
        ("2026-12-01T09:00:00-24:00", "-24:00"),
        ("2026-12-01T09:00:00+09:60", "+09:60"),
        ("2026-12-01T09:00:00-00:60", "-00:60"),
        ("2026-12-01T09:00:00+99:99", "+99:99"),
        # The offset is checked before the calendar.
        ("2026-02-30T24:00:00+24:00", "+24:00"),
        ("9999-12-31T23:59:59.999+24:00", "+24:00"),
    ],
)
def test_rfc3339_offset_out_of_range(text: str, offset: str) -> None:
    assert error_of(lambda: parse_rfc3339(text)) == ("invalid_time_zone", bad_offset(text, offset))


@pytest.mark.parametrize(
    "text",
    [
        "2026-02-29T09:00:00Z",
        "2026-02-30T09:00:00Z",
        "1900-02-29T09:00:00Z",
        "2026-04-31T09:00:00Z",
        "2026-12-32T09:00:00Z",
        "2026-13-01T09:00:00Z",
        "2026-00-10T09:00:00Z",
        "2026-12-00T09:00:00Z",
        "0000-02-30T00:00:00Z",
        "0000-04-31T00:00:00Z",
        "0000-13-01T00:00:00Z",
        "0000-00-01T00:00:00Z",
        "0000-01-00T00:00:00-01:00",
        "0100-02-29T00:00:00Z",
        # The date is checked before the time of day.
        "2026-02-30T24:00:00Z",
    ],
)
def test_rfc3339_impossible_date(text: str) -> None:
    assert error_of(lambda: parse_rfc3339(text)) == ("invalid_selector", impossible_date_in(text))


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01T24:00:00Z",
        "2026-12-31T24:00:00+09:00",
        "2026-12-01T23:60:00Z",
        "2026-12-01T23:59:60Z",
        "2016-12-31T23:59:60Z",
        "2026-12-01T99:99:99Z",
    ],
)
def test_rfc3339_impossible_time(text: str) -> None:
    assert error_of(lambda: parse_rfc3339(text)) == ("invalid_selector", impossible_time_in(text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("9999-12-31T23:30:00-05:00", too_late("'9999-12-31T23:30:00-05:00'")),
        ("9999-12-31T23:59:59.999-00:01", too_late("'9999-12-31T23:59:59.999-00:01'")),
    ],
)
def test_rfc3339_out_of_range(text: str, message: str) -> None:
    assert error_of(lambda: parse_rfc3339(text)) == ("time_out_of_range", message)


# The local form.


@pytest.mark.parametrize(
    ("day", "wall", "zone", "expected"),
    [
        ("2026-12-01", "09:00", "Asia/Tokyo", "2026-12-01T00:00:00.000Z"),
        ("2026-12-01", "09:00:30", "Asia/Tokyo", "2026-12-01T00:00:30.000Z"),
        ("2026-12-01", "09:00:30.5", "Asia/Tokyo", "2026-12-01T00:00:30.500Z"),
        ("2026-12-01", "09:00:30.05", "Asia/Tokyo", "2026-12-01T00:00:30.050Z"),
        ("2026-12-01", "09:00:30.123", "Asia/Tokyo", "2026-12-01T00:00:30.123Z"),
        ("2026-12-01", "00:00", "UTC", "2026-12-01T00:00:00.000Z"),
        ("2026-12-01", "23:59:59.999", "UTC", "2026-12-01T23:59:59.999Z"),
        ("2024-02-29", "12:00", "UTC", "2024-02-29T12:00:00.000Z"),
        ("2026-12-01", "09:00", "America/Argentina/Buenos_Aires", "2026-12-01T12:00:00.000Z"),
        # A backward-compatible link the tzdata package still ships: accepted like any name.
        ("2026-12-01", "09:00", "America/Buenos_Aires", "2026-12-01T12:00:00.000Z"),
        ("2026-12-01", "09:00", "America/St_Johns", "2026-12-01T12:30:00.000Z"),
        ("2026-12-01", "09:00", "Antarctica/Troll", "2026-12-01T09:00:00.000Z"),
        ("2026-12-01", "09:00", "Arctic/Longyearbyen", "2026-12-01T08:00:00.000Z"),
        ("2026-12-01", "09:00", "Indian/Maldives", "2026-12-01T04:00:00.000Z"),
        # New York: the edges of the spring gap, and the autumn overlap takes EDT (the earlier).
        ("2026-03-08", "01:59:59.999", "America/New_York", "2026-03-08T06:59:59.999Z"),
        ("2026-03-08", "03:00", "America/New_York", "2026-03-08T07:00:00.000Z"),
        ("2026-11-01", "00:59", "America/New_York", "2026-11-01T04:59:00.000Z"),
        ("2026-11-01", "01:00", "America/New_York", "2026-11-01T05:00:00.000Z"),
        ("2026-11-01", "01:30", "America/New_York", "2026-11-01T05:30:00.000Z"),
        ("2026-11-01", "01:59:59.999", "America/New_York", "2026-11-01T05:59:59.999Z"),
        ("2026-11-01", "02:00", "America/New_York", "2026-11-01T07:00:00.000Z"),
        # Lord Howe moves its clocks by 30 minutes.
        ("2026-04-05", "01:45", "Australia/Lord_Howe", "2026-04-04T14:45:00.000Z"),
        ("2026-04-05", "02:00", "Australia/Lord_Howe", "2026-04-04T15:30:00.000Z"),
        ("2026-10-04", "01:59", "Australia/Lord_Howe", "2026-10-03T15:29:00.000Z"),
        ("2026-10-04", "02:30", "Australia/Lord_Howe", "2026-10-03T15:30:00.000Z"),
        # Samoa skipped 2011-12-30 when it crossed the date line.
        ("2011-12-29", "23:59:59.999", "Pacific/Apia", "2011-12-30T09:59:59.999Z"),
        ("2011-12-31", "00:00", "Pacific/Apia", "2011-12-30T10:00:00.000Z"),
        # Ireland's summer time is its standard time, with a negative DST in winter.
        ("2026-07-01", "12:00", "Europe/Dublin", "2026-07-01T11:00:00.000Z"),
        ("2026-01-15", "12:00", "Europe/Dublin", "2026-01-15T12:00:00.000Z"),
        ("2026-10-25", "01:30", "Europe/Dublin", "2026-10-25T00:30:00.000Z"),
        ("2026-10-25", "01:30", "Europe/London", "2026-10-25T00:30:00.000Z"),
        # Transitions at midnight (Cuba) and at 24:00 (Chile).
        ("2026-03-08", "01:00", "America/Havana", "2026-03-08T05:00:00.000Z"),
        ("2012-11-04", "00:30", "America/Havana", "2012-11-04T04:30:00.000Z"),
        ("2026-04-04", "23:30", "America/Santiago", "2026-04-05T02:30:00.000Z"),
        ("2026-09-06", "01:00", "America/Santiago", "2026-09-06T04:00:00.000Z"),
        ("2026-11-01", "01:30", "America/St_Johns", "2026-11-01T04:00:00.000Z"),
        ("2026-04-05", "02:30", "Australia/Adelaide", "2026-04-04T16:00:00.000Z"),
        # Local mean time, with offsets in seconds.
        ("1883-11-18", "12:00", "America/New_York", "1883-11-18T16:56:02.000Z"),
        ("1883-11-18", "12:01", "America/New_York", "1883-11-18T16:57:02.000Z"),
        # The ends of the range.
        ("0001-01-01", "00:00", "UTC", "0001-01-01T00:00:00.000Z"),
        ("9999-12-31", "23:59:59.999", "UTC", "9999-12-31T23:59:59.999Z"),
        ("0001-01-01", "09:18:59", "Asia/Tokyo", "0001-01-01T00:00:00.000Z"),
        ("0001-01-01", "00:00", "America/New_York", "0001-01-01T04:56:02.000Z"),
        ("9999-12-31", "23:59", "Pacific/Kiritimati", "9999-12-31T09:59:00.000Z"),
        ("9999-12-31", "18:59:59.999", "America/New_York", "9999-12-31T23:59:59.999Z"),
    ],
)
def test_local_accepted(day: str, wall: str, zone: str, expected: str) -> None:
    assert format_instant(Instant(resolve_local(day, wall, zone))) == expected
    assert parse_at({"date": day, "time": wall, "time_zone": zone}) == resolve_local(
        day, wall, zone
    )


@pytest.mark.parametrize(
    ("day", "wall", "zone", "start", "end"),
    [
        ("2026-03-08", "02:30", "America/New_York", "02:00", "03:00"),
        ("2026-03-08", "02:00", "America/New_York", "02:00", "03:00"),
        ("2026-03-08", "02:59:59.999", "America/New_York", "02:00", "03:00"),
        ("2026-10-04", "02:15", "Australia/Lord_Howe", "02:00", "02:30"),
        ("2011-12-30", "12:00", "Pacific/Apia", "2011-12-30 00:00", "2011-12-31 00:00"),
        ("2011-12-30", "00:00", "Pacific/Apia", "2011-12-30 00:00", "2011-12-31 00:00"),
        ("2011-12-30", "23:59:59.999", "Pacific/Apia", "2011-12-30 00:00", "2011-12-31 00:00"),
        ("2026-03-29", "01:30", "Europe/Dublin", "01:00", "02:00"),
        ("2026-03-29", "01:30", "Europe/London", "01:00", "02:00"),
        ("2026-03-08", "00:00", "America/Havana", "00:00", "01:00"),
        ("2026-09-06", "00:30", "America/Santiago", "00:00", "01:00"),
        ("2026-03-08", "02:30", "America/St_Johns", "02:00", "03:00"),
        ("2026-10-04", "02:30", "Australia/Adelaide", "02:00", "03:00"),
        # Newfoundland's double summer time of 1988 skipped two hours.
        ("1988-04-03", "01:30", "America/St_Johns", "00:01", "02:01"),
        # Leaving local mean time: gaps whose edges fall on seconds.
        ("1972-01-07", "00:10", "Africa/Monrovia", "00:00", "00:44:30"),
        ("1935-03-30", "00:00:30", "America/St_Johns", "00:00", "00:00:52"),
        ("1916-05-21", "02:10", "Europe/Dublin", "02:00", "03:00"),
    ],
)
def test_local_time_in_a_gap(day: str, wall: str, zone: str, start: str, end: str) -> None:
    assert error_of(lambda: resolve_local(day, wall, zone)) == (
        "invalid_selector",
        gap(f"{day} {wall}", zone, start, end),
    )


@pytest.mark.parametrize(
    "name",
    [
        "",
        " ",
        "Z",
        "z",
        "GMT",
        "EST",
        "CET",
        "JST",
        "PST8PDT",
        "EST5EDT",
        "UCT",
        "Zulu",
        "Universal",
        "Greenwich",
        "Japan",
        "GB",
        "Factory",
        "localtime",
        "posixrules",
        "Etc/UTC",
        "Etc/GMT",
        "Etc/GMT+5",
        "Etc/GMT-14",
        "US/Eastern",
        "US/Pacific",
        "Canada/Newfoundland",
        "Brazil/East",
        "right/America/New_York",
        "posix/America/New_York",
        "America/New_York ",
        " America/New_York",
        "America/New_York\n",
        "America",
        "Asia/",
        "/Asia/Tokyo",
        "Asia//Tokyo",
        "Asia/Tokyo/",
        "America/Argentina",
        "America/../Asia/Tokyo",
        "../../../../etc/localtime",
        "Asia/Nowhere",
        "Mars/Olympus_Mons",
        "zone.tab",
        "tzdata.zi",
        "iso3166.tab",
        "America/__init__.py",
        "+09:00",
        "UTC+9",
        "Asia/Tokyo\u0000",
    ],
)
def test_unsupported_zone(name: str) -> None:
    assert not is_supported_zone(name)
    assert name not in supported_zones()
    assert error_of(lambda: load_zone(name)) == ("invalid_time_zone", unknown_zone(name))
    assert error_of(lambda: resolve_local("2026-12-01", "09:00", name)) == (
        "invalid_time_zone",
        unknown_zone(name),
    )


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("utc", "UTC"),
        ("Utc", "UTC"),
        ("america/new_york", "America/New_York"),
        ("AMERICA/NEW_YORK", "America/New_York"),
        ("Asia/tokyo", "Asia/Tokyo"),
        ("america/argentina/buenos_aires", "America/Argentina/Buenos_Aires"),
    ],
)
def test_zone_in_the_wrong_case(name: str, suggestion: str) -> None:
    assert not is_supported_zone(name)
    assert error_of(lambda: load_zone(name)) == (
        "invalid_time_zone",
        wrong_case_zone(name, suggestion),
    )


@pytest.mark.parametrize(
    ("day", "wall", "message"),
    [
        ("2026-12-1", "09:00", bad_date_form("2026-12-1")),
        ("26-12-01", "09:00", bad_date_form("26-12-01")),
        ("2026/12/01", "09:00", bad_date_form("2026/12/01")),
        ("20261201", "09:00", bad_date_form("20261201")),
        ("2026-12-01T09:00", "09:00", bad_date_form("2026-12-01T09:00")),
        (" 2026-12-01", "09:00", bad_date_form(" 2026-12-01")),
        ("2026-12-01\n", "09:00", bad_date_form("2026-12-01\n")),
        ("+2026-12-01", "09:00", bad_date_form("+2026-12-01")),
        ("12026-12-01", "09:00", bad_date_form("12026-12-01")),
        ("2026-W49-2", "09:00", bad_date_form("2026-W49-2")),
        ("2026-335", "09:00", bad_date_form("2026-335")),
        (
            "\uff12\uff10\uff12\uff16-12-01",
            "09:00",
            bad_date_form("\uff12\uff10\uff12\uff16-12-01"),
        ),
        ("", "09:00", bad_date_form("")),
        ("tomorrow", "09:00", bad_date_form("tomorrow")),
        # The date is checked before the time.
        ("2026-12-1", "24:00", bad_date_form("2026-12-1")),
        ("2026-02-29", "09:00", impossible_date("2026-02-29")),
        ("2026-02-30", "09:00", impossible_date("2026-02-30")),
        ("1900-02-29", "09:00", impossible_date("1900-02-29")),
        ("2026-04-31", "09:00", impossible_date("2026-04-31")),
        ("2026-13-01", "09:00", impossible_date("2026-13-01")),
        ("2026-00-01", "09:00", impossible_date("2026-00-01")),
        ("2026-01-00", "09:00", impossible_date("2026-01-00")),
        ("0000-02-30", "09:00", impossible_date("0000-02-30")),
        ("0000-00-01", "09:00", impossible_date("0000-00-01")),
        ("2026-02-30", "nine", impossible_date("2026-02-30")),
        ("2026-12-01", "9:00", bad_time_form("9:00")),
        ("2026-12-01", "09", bad_time_form("09")),
        ("2026-12-01", "0900", bad_time_form("0900")),
        ("2026-12-01", "09.00", bad_time_form("09.00")),
        ("2026-12-01", "09:00:00.1234", bad_time_form("09:00:00.1234")),
        ("2026-12-01", "09:00:00.", bad_time_form("09:00:00.")),
        ("2026-12-01", "09:00.5", bad_time_form("09:00.5")),
        ("2026-12-01", "09:00:00,5", bad_time_form("09:00:00,5")),
        ("2026-12-01", "09:00 ", bad_time_form("09:00 ")),
        ("2026-12-01", "09:00\n", bad_time_form("09:00\n")),
        ("2026-12-01", "09:00Z", bad_time_form("09:00Z")),
        ("2026-12-01", "09:00+09:00", bad_time_form("09:00+09:00")),
        ("2026-12-01", "T09:00", bad_time_form("T09:00")),
        ("2026-12-01", "9am", bad_time_form("9am")),
        ("2026-12-01", "", bad_time_form("")),
        ("2026-12-01", "\uff10\uff19:00", bad_time_form("\uff10\uff19:00")),
        ("2026-12-01", "24:00", impossible_time("24:00")),
        ("2026-12-01", "24:00:00", impossible_time("24:00:00")),
        ("2026-12-01", "25:00", impossible_time("25:00")),
        ("2026-12-01", "23:60", impossible_time("23:60")),
        ("2026-12-01", "23:59:60", impossible_time("23:59:60")),
        ("2026-12-01", "23:59:60.5", impossible_time("23:59:60.5")),
    ],
)
def test_local_malformed_or_impossible(day: str, wall: str, message: str) -> None:
    assert error_of(lambda: resolve_local(day, wall, "Asia/Tokyo")) == (
        "invalid_selector",
        message,
    )


def test_local_checks_the_zone_first() -> None:
    assert error_of(lambda: resolve_local("2026-02-30", "24:00", "EST")) == (
        "invalid_time_zone",
        unknown_zone("EST"),
    )


@pytest.mark.parametrize(
    ("day", "wall", "zone", "message"),
    [
        (
            "9999-12-31",
            "23:30",
            "America/New_York",
            too_late("9999-12-31 23:30 in America/New_York"),
        ),
        (
            "9999-12-31",
            "19:00",
            "America/New_York",
            too_late("9999-12-31 19:00 in America/New_York"),
        ),
    ],
)
def test_local_out_of_range(day: str, wall: str, zone: str, message: str) -> None:
    assert error_of(lambda: resolve_local(day, wall, zone)) == ("time_out_of_range", message)


@pytest.mark.parametrize(
    ("day", "wall", "zone", "expected"),
    [
        # East of UTC on 0001-01-01: before 0001-01-01T00:00:00.000Z, in the past.
        ("0001-01-01", "00:00", "Asia/Tokyo", "0000-12-31T14:41:01.000Z"),
        ("0001-01-01", "09:18:58.999", "Asia/Tokyo", "0000-12-31T23:59:59.999Z"),
        # Year 0000, read with the offset the zone's data starts with (local mean time).
        ("0000-12-31", "23:00", "UTC", "0000-12-31T23:00:00.000Z"),
        ("0000-12-31", "23:00", "America/New_York", "0001-01-01T03:56:02.000Z"),
        ("0000-02-29", "12:00", "Europe/Paris", "0000-02-29T11:50:39.000Z"),
        ("0000-01-01", "00:00", "Asia/Tokyo", "-0001-12-31T14:41:01.000Z"),
    ],
)
def test_local_before_the_range_is_a_past_instant(
    day: str, wall: str, zone: str, expected: str
) -> None:
    instant = resolve_local(day, wall, zone)
    assert describe_instant(instant) == expected
    assert parse_at({"date": day, "time": wall, "time_zone": zone}) == instant


# The `at` selector as a model sends it.


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, f"`at` must be {FORMS}, not null."),
        (True, f"`at` must be {FORMS}, not a boolean."),
        (False, f"`at` must be {FORMS}, not a boolean."),
        (1_796_000_000, f"`at` must be {FORMS}, not a number."),
        (1.5, f"`at` must be {FORMS}, not a number."),
        ([], f"`at` must be {FORMS}, not an array."),
        (["2026-12-01T09:00:00Z"], f"`at` must be {FORMS}, not an array."),
        (("2026-12-01", "09:00"), f"`at` must be {FORMS}, not an array."),
        (b"2026-12-01T09:00:00Z", f"`at` must be {FORMS}, not a value of type bytes."),
        ({}, wrong_keys("add `date`, `time` and `time_zone`")),
        ({"date": "2026-12-01", "time": "09:00"}, wrong_keys("add `time_zone`")),
        ({"date": "2026-12-01"}, wrong_keys("add `time` and `time_zone`")),
        (
            {"date": "2026-12-01", "time": "09:00", "time_zone": "UTC", "tz": "UTC"},
            wrong_keys("remove 'tz'"),
        ),
        (
            {"date": "2026-12-01", "time": "09:00", "timezone": "UTC"},
            wrong_keys("add `time_zone`, and remove 'timezone'"),
        ),
        (
            {"Date": "2026-12-01", "Time": "09:00", "Time_Zone": "UTC"},
            wrong_keys(
                "add `date`, `time` and `time_zone`, and remove 'Date', 'Time' and 'Time_Zone'"
            ),
        ),
        (
            {"at": "2026-12-01T09:00:00Z"},
            wrong_keys("add `date`, `time` and `time_zone`, and remove 'at'"),
        ),
        (
            {"date": "2026-12-01", "time": "09:00", "time_zone": "UTC", 1: "x"},
            wrong_keys("remove 1"),
        ),
        (
            {"date": None, "time": "09:00", "time_zone": "UTC"},
            "`date` must be a string, such as '2026-12-01', not null.",
        ),
        (
            {"date": ["2026-12-01"], "time": "09:00", "time_zone": "UTC"},
            "`date` must be a string, such as '2026-12-01', not an array.",
        ),
        (
            {"date": "2026-12-01", "time": 9, "time_zone": "UTC"},
            "`time` must be a string, such as '09:00', not a number.",
        ),
        (
            {"date": "2026-12-01", "time": True, "time_zone": "UTC"},
            "`time` must be a string, such as '09:00', not a boolean.",
        ),
        (
            {"date": "2026-12-01", "time": "09:00", "time_zone": {"name": "UTC"}},
            "`time_zone` must be a string, such as 'Asia/Tokyo', not an object.",
        ),
        (
            {"date": "2026-12-01", "time": "09:00", "time_zone": 9},
            "`time_zone` must be a string, such as 'Asia/Tokyo', not a number.",
        ),
        # Member types are shape, checked before the zone.
        (
            {"date": 20261201, "time": "09:00", "time_zone": "Nowhere"},
            "`date` must be a string, such as '2026-12-01', not a number.",
        ),
    ],
)
def test_at_selector_of_the_wrong_shape(value: object, message: str) -> None:
    assert error_of(lambda: parse_at(value)) == ("invalid_selector", message)


@pytest.mark.parametrize(
    ("value", "code", "message"),
    [
        ("2026-12-01T09:00:00", "invalid_selector", no_offset("2026-12-01T09:00:00")),
        (
            "2026-12-01T09:00:00+24:00",
            "invalid_time_zone",
            bad_offset("2026-12-01T09:00:00+24:00", "+24:00"),
        ),
        (
            {"date": "2026-02-30", "time": "9", "time_zone": "US/Eastern"},
            "invalid_time_zone",
            unknown_zone("US/Eastern"),
        ),
        (
            {"date": "2026-03-08", "time": "02:30", "time_zone": "America/New_York"},
            "invalid_selector",
            gap("2026-03-08 02:30", "America/New_York", "02:00", "03:00"),
        ),
        (
            {"date": "9999-12-31", "time": "23:30", "time_zone": "America/New_York"},
            "time_out_of_range",
            too_late("9999-12-31 23:30 in America/New_York"),
        ),
    ],
)
def test_at_selector_passes_on_the_form_errors(value: object, code: str, message: str) -> None:
    assert error_of(lambda: parse_at(value)) == (code, message)


def test_at_selector_past_instants_are_not_its_concern() -> None:
    assert describe_instant(parse_at("1970-01-01T00:00:00Z")) == "1970-01-01T00:00:00.000Z"
    assert describe_instant(
        parse_at({"date": "1999-12-31", "time": "23:59", "time_zone": "Europe/Paris"})
    ) == ("1999-12-31T22:59:00.000Z")
    # Not even before the range: those are past instants, for the caller's future check.
    assert parse_at("0001-01-01T00:00:00+00:01") == MIN_INSTANT - 60_000
    assert describe_instant(
        parse_at({"date": "0001-01-01", "time": "00:00", "time_zone": "Asia/Tokyo"})
    ) == ("0000-12-31T14:41:01.000Z")


# Zones.


def tzdata_listed_names() -> list[str]:
    return resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()


def test_supported_zones_are_utc_and_the_geographic_tzdata_names() -> None:
    expected = {"UTC"} | {
        name for name in tzdata_listed_names() if name.split("/")[0] in GEOGRAPHIC_AREAS
    }
    assert supported_zones() == expected
    assert len(expected) > 400
    assert {
        "America/New_York",
        "America/Argentina/Buenos_Aires",
        "America/Buenos_Aires",
        "America/Indiana/Indianapolis",
        "America/Kentucky/Louisville",
        "America/North_Dakota/New_Salem",
        "Antarctica/Troll",
        "Arctic/Longyearbyen",
        "Atlantic/Reykjavik",
        "Indian/Maldives",
        "Pacific/Apia",
    } <= expected
    assert all(is_supported_zone(name) for name in expected)


def test_every_supported_zone_loads_under_its_own_name() -> None:
    for name in sorted(supported_zones()):
        zone = load_zone(name)
        assert zone.key == name
        assert str(zone) == name
        assert load_zone(name) is zone


def test_zones_come_from_the_tzdata_package_not_the_host(tmp_path: Path) -> None:
    # A decoy zone directory with Tokyo's rules filed under America/New_York: the standard
    # library's ZoneInfo(key) reads it, load_zone must not.
    decoy = tmp_path / "America" / "New_York"
    decoy.parent.mkdir()
    decoy.write_bytes(
        resources.files("tzdata")
        .joinpath("zoneinfo")
        .joinpath("Asia")
        .joinpath("Tokyo")
        .read_bytes()
    )
    script = (
        "import zoneinfo\n"
        "from datetime import datetime\n"
        "from session_schedule.core.time_input import load_zone\n"
        "moment = datetime(2026, 1, 15, 12)\n"
        "print(zoneinfo.TZPATH)\n"
        "print(zoneinfo.ZoneInfo('America/New_York').utcoffset(moment))\n"
        "print(load_zone('America/New_York').utcoffset(moment))\n"
    )
    source_root = Path(session_schedule.__file__).resolve().parents[1]
    environment = {
        **os.environ,
        "PYTHONTZPATH": str(tmp_path),
        "PYTHONPATH": os.pathsep.join(
            path for path in [str(source_root), os.environ.get("PYTHONPATH")] if path
        ),
    }
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.splitlines() == [
        repr((str(tmp_path),)),
        "9:00:00",
        "-1 day, 19:00:00",
    ]


def test_no_supported_zone_changes_offset_near_the_ends_of_the_range() -> None:
    # The module reads the offset of an instant within a day of either end of the range from
    # an instant two days inside it; that is exact only if no zone has a transition there.
    for name in sorted(supported_zones()):
        zone = load_zone(name)
        late = {
            datetime(9999, 12, 29, tzinfo=UTC).astimezone(zone).utcoffset(),
            datetime(9999, 12, 30, 12, tzinfo=UTC).astimezone(zone).utcoffset(),
            *(
                datetime(9999, 12, day, hour, tzinfo=zone, fold=fold).utcoffset()
                for day in (30, 31)
                for hour in range(24)
                for fold in (0, 1)
            ),
            datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=zone, fold=1).utcoffset(),
        }
        early = {
            datetime(1, 1, 3, tzinfo=UTC).astimezone(zone).utcoffset(),
            datetime(1, 1, 2, 12, tzinfo=UTC).astimezone(zone).utcoffset(),
            *(
                datetime(1, 1, day, hour, tzinfo=zone, fold=fold).utcoffset()
                for day in (1, 2)
                for hour in range(24)
                for fold in (0, 1)
            ),
        }
        assert len(late) == 1, name
        assert len(early) == 1, name


def test_every_supported_zone_resolves_the_ends_of_the_range() -> None:
    walls = [
        ("0001-01-01", "00:00"),
        ("0001-01-01", "23:59:59.999"),
        ("9999-12-31", "00:00"),
        ("9999-12-31", "23:59:59.999"),
    ]
    for name in sorted(supported_zones()):
        zone = load_zone(name)
        for day, wall in walls:
            result = outcome(functools.partial(resolve_local, day, wall, name))
            if isinstance(result, ScheduleError):
                assert result.code == "time_out_of_range", (name, day, wall)
                assert day.startswith("9999"), (name, day, wall)
            elif result < MIN_INSTANT:
                # East of UTC on 0001-01-01: a past instant before the range.
                assert day.startswith("0001"), (name, day, wall)
            else:
                assert result <= MAX_INSTANT
                assert parse_rfc3339(format_local(Instant(result), zone)) == result


# Display in a zone.


@pytest.mark.parametrize(
    ("instant", "zone", "expected"),
    [
        ("1970-01-01T00:00:00.000Z", "Asia/Tokyo", "1970-01-01T09:00:00.000+09:00"),
        ("2026-12-01T00:00:00.000Z", "Asia/Tokyo", "2026-12-01T09:00:00.000+09:00"),
        ("2026-12-01T00:00:00.123Z", "UTC", "2026-12-01T00:00:00.123+00:00"),
        ("2026-12-01T12:00:00.000Z", "America/St_Johns", "2026-12-01T08:30:00.000-03:30"),
        ("2026-07-01T12:00:00.000Z", "America/St_Johns", "2026-07-01T09:30:00.000-02:30"),
        ("2026-11-01T05:30:00.000Z", "America/New_York", "2026-11-01T01:30:00.000-04:00"),
        ("2026-11-01T06:30:00.000Z", "America/New_York", "2026-11-01T01:30:00.000-05:00"),
        ("2026-03-08T07:00:00.000Z", "America/New_York", "2026-03-08T03:00:00.000-04:00"),
        ("2011-12-30T10:00:00.000Z", "Pacific/Apia", "2011-12-31T00:00:00.000+14:00"),
        ("2026-10-03T15:30:00.000Z", "Australia/Lord_Howe", "2026-10-04T02:30:00.000+11:00"),
        # Local mean time: the offset is rounded to the minute and the wall time moves with it.
        ("1800-01-01T00:00:00.000Z", "America/New_York", "1799-12-31T19:04:00.000-04:56"),
        ("1800-01-01T00:00:00.000Z", "Asia/Tokyo", "1800-01-01T09:19:00.000+09:19"),
        # A wall time outside years 0001-9999 falls back to the canonical UTC form.
        ("9999-12-31T23:59:59.999Z", "Asia/Tokyo", "9999-12-31T23:59:59.999Z"),
        ("9999-12-31T14:59:59.999Z", "Asia/Tokyo", "9999-12-31T23:59:59.999+09:00"),
        ("0001-01-01T00:00:00.000Z", "America/New_York", "0001-01-01T00:00:00.000Z"),
        ("0001-01-01T04:56:02.000Z", "America/New_York", "0001-01-01T00:00:02.000-04:56"),
        ("0001-01-01T04:55:59.999Z", "America/New_York", "0001-01-01T04:55:59.999Z"),
        ("0001-01-01T00:00:00.000Z", "Asia/Tokyo", "0001-01-01T09:19:00.000+09:19"),
    ],
)
def test_format_local(instant: str, zone: str, expected: str) -> None:
    text = format_local(parse_instant(instant), load_zone(zone))
    assert text == expected
    assert describe_instant(parse_rfc3339(text)) == instant


@pytest.mark.parametrize("instant", [MIN_INSTANT - 1, MAX_INSTANT + 1])
def test_format_local_refuses_instants_outside_the_range(instant: int) -> None:
    with pytest.raises(ValueError, match="outside years 0001-9999"):
        format_local(Instant(instant), load_zone("UTC"))


# Properties.

rfc3339_alphabet = st.text(alphabet="0123456789-:+.TtZz ,W\n", max_size=40)
rfc3339_lookalikes = st.from_regex(
    r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt _][0-9]{2}:[0-9]{2}(:[0-9]{2})?([.,][0-9]{0,12})?"
    r"([Zz]|[+-][0-9]{1,2}(:?[0-9]{2}){0,2})?\n?\Z"
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=10,
)
zone_names = st.one_of(st.sampled_from(sorted(supported_zones())), st.text(max_size=20))
date_texts = st.one_of(
    st.dates().map(date.isoformat),
    st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z"),
    st.text(max_size=12),
)
time_texts = st.one_of(
    st.from_regex(r"\A[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{0,4})?)?\Z"),
    st.text(max_size=12),
)
local_objects = st.fixed_dictionaries(
    {"date": date_texts, "time": time_texts, "time_zone": zone_names}
)


EARLIEST_NAMED: Final = (days_from_civil(0, 1, 1) - 1) * MS_PER_DAY
"""Earlier than any instant an ``at`` can name: 0000-01-01 less an offset under a day."""


def assert_total(call: Callable[[], int]) -> None:
    result = outcome(call)
    if isinstance(result, ScheduleError):
        assert result.code in SELECTOR_CODES
        assert result.message.endswith(".")
        assert not result.message[0].isupper()
    else:
        assert type(result) is int
        assert EARLIEST_NAMED < result <= MAX_INSTANT


@settings(max_examples=300)
@given(st.one_of(st.text(), rfc3339_alphabet, rfc3339_lookalikes))
def test_parse_rfc3339_is_total(text: str) -> None:
    assert_total(lambda: parse_rfc3339(text))


@settings(max_examples=300)
@given(st.one_of(json_values, local_objects, rfc3339_lookalikes))
def test_parse_at_is_total(value: object) -> None:
    assert_total(lambda: parse_at(value))


@st.composite
def rfc3339_fields(draw: st.DrawFn) -> tuple[str, int]:
    """A valid RFC 3339 string and the milliseconds it means, computed with datetime."""
    day = draw(st.dates())
    moment = draw(st.times())
    fraction = draw(st.text(alphabet="0123456789", max_size=9))
    offset_minutes = draw(st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59))
    if offset_minutes == 0:
        offset_text = draw(st.sampled_from(["Z", "z", "+00:00", "-00:00"]))
    else:
        hours, minutes = divmod(abs(offset_minutes), 60)
        offset_text = f"{'-' if offset_minutes < 0 else '+'}{hours:02d}:{minutes:02d}"
    separator = draw(st.sampled_from("Tt"))
    text = (
        f"{day.year:04d}-{day.month:02d}-{day.day:02d}{separator}"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
        f"{'.' + fraction if fraction else ''}{offset_text}"
    )
    aware = datetime.combine(day, moment.replace(microsecond=0)).replace(
        tzinfo=timezone(timedelta(minutes=offset_minutes))
    )
    ms = (aware - EPOCH) // timedelta(milliseconds=1) + int(fraction[:3].ljust(3, "0"))
    return text, ms


@settings(max_examples=300)
@given(rfc3339_fields())
@example(("9999-12-31T23:30:00-05:00", MAX_INSTANT + 1 + 16_200_000))
@example(("0001-01-01T00:30:00+01:00", MIN_INSTANT - 1_800_000))
@example(("0000-12-31T23:00:00-02:00", MIN_INSTANT + 3_600_000))
def test_rfc3339_agrees_with_datetime(case: tuple[str, int]) -> None:
    text, ms = case
    if ms <= MAX_INSTANT:
        assert parse_rfc3339(text) == ms
    else:
        assert error_of(lambda: parse_rfc3339(text))[0] == "time_out_of_range"


@settings(max_examples=200)
@given(
    st.integers(min_value=MIN_INSTANT, max_value=MAX_INSTANT).map(Instant),
    st.sampled_from(sorted(supported_zones())),
)
def test_format_local_round_trips_in_every_zone(instant: Instant, name: str) -> None:
    text = format_local(instant, load_zone(name))
    assert parse_rfc3339(text) == instant


@settings(max_examples=200)
@given(
    st.integers(
        min_value=(datetime(1950, 1, 1, tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1),
        max_value=(datetime(2100, 1, 1, tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1),
    ).map(Instant),
    st.sampled_from(sorted(supported_zones())),
)
def test_format_local_shows_the_zone_wall_time(instant: Instant, name: str) -> None:
    local = (EPOCH + timedelta(milliseconds=instant)).astimezone(load_zone(name))
    offset = local.utcoffset()
    assert offset is not None
    assume(offset % timedelta(minutes=1) == timedelta())
    assert format_local(instant, load_zone(name)) == local.isoformat(timespec="milliseconds")


# Local resolution against a brute-force oracle.

ORACLE_ZONES = (
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Dublin",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "America/Havana",
    "America/Santiago",
    "Asia/Tokyo",
    "America/St_Johns",
    "Australia/Adelaide",
)
# Days with a transition (or next to one) in the oracle's zones, found by scanning the zone data.
TRANSITION_DAYS = {
    "UTC": ["2026-03-08"],
    "America/New_York": ["1883-11-18", "2026-03-08", "2026-11-01"],
    "Europe/London": ["2026-03-29", "2026-10-25"],
    "Europe/Dublin": ["1916-05-21", "1916-10-01", "1971-10-31", "2026-03-29", "2026-10-25"],
    "Australia/Lord_Howe": ["2026-04-05", "2026-10-04"],
    "Pacific/Apia": ["2011-09-24", "2011-12-29", "2011-12-30", "2011-12-31", "2012-04-01"],
    "America/Havana": ["2012-04-01", "2012-11-04", "2026-03-08"],
    "America/Santiago": ["2026-04-04", "2026-04-05", "2026-09-06"],
    "Asia/Tokyo": ["1948-05-02", "1948-09-11", "1951-09-08"],
    "America/St_Johns": ["1935-03-30", "1988-04-03", "1988-10-29", "2026-03-08", "2026-11-01"],
    "Australia/Adelaide": ["2026-04-05", "2026-10-04"],
}


@functools.cache
def offsets_around(name: str, day: date) -> frozenset[int]:
    """Every UTC offset, in seconds, ``name`` shows at a whole UTC minute near ``day``.

    Any instant whose wall time falls on ``day`` lies within a day of that day read as UTC, so
    scanning every minute from 26 hours before to 26 hours after it finds every offset that
    lasts a minute or more — and every offset in these zones lasts far longer.
    """
    zone = load_zone(name)
    start = (datetime.combine(day, time_of_day()) - NAIVE_EPOCH) // timedelta(seconds=1) - 26 * 3600
    found = set()
    for minute in range((26 + 24 + 26) * 60 + 1):
        offset = datetime.fromtimestamp(start + minute * 60, zone).utcoffset()
        assert offset is not None
        found.add(offset // timedelta(seconds=1))
    return frozenset(found)


def oracle(name: str, wall: datetime) -> list[int]:
    """Every instant, in epoch milliseconds, at which ``name``'s clocks show ``wall``."""
    zone = load_zone(name)
    wall_seconds = (wall - NAIVE_EPOCH) // timedelta(seconds=1)
    return sorted(
        (wall_seconds - offset) * 1000
        for offset in offsets_around(name, wall.date())
        if datetime.fromtimestamp(wall_seconds - offset, zone).replace(tzinfo=None) == wall
    )


GAP_EDGES = re.compile(
    r"the clocks skip from (?:(\S+) )?(\d\d:\d\d(?::\d\d)?) to (?:(\S+) )?(\d\d:\d\d(?::\d\d)?) "
)


def check_against_oracle(name: str, wall: datetime) -> None:
    day, clock = wall.date().isoformat(), wall.strftime("%H:%M")
    matches = oracle(name, wall)
    if matches:
        assert resolve_local(day, clock, name) == matches[0]
        return
    code, message = error_of(lambda: resolve_local(day, clock, name))
    assert code == "invalid_selector"
    assert message.startswith(f"{day} {clock} does not exist in {name}: ")
    # The gap the message names contains the wall time, and it ends where the clocks resume.
    edges = GAP_EDGES.search(message)
    assert edges is not None
    start_day, start_clock, end_day, end_clock = edges.groups()
    start = datetime.fromisoformat(f"{start_day or day}T{start_clock}")
    end = datetime.fromisoformat(f"{end_day or day}T{end_clock}")
    assert start <= wall < end
    assert oracle(name, start) == []
    assert oracle(name, end) != []


@pytest.mark.parametrize(
    ("name", "day"),
    [(name, day) for name, days in TRANSITION_DAYS.items() for day in days],
)
def test_local_resolution_matches_the_oracle_around_transitions(name: str, day: str) -> None:
    start = datetime.fromisoformat(day) - timedelta(hours=3)
    for quarter in range((24 + 6) * 4):
        check_against_oracle(name, start + timedelta(minutes=15 * quarter))


@st.composite
def oracle_walls(draw: st.DrawFn) -> tuple[str, datetime]:
    name = draw(st.sampled_from(ORACLE_ZONES))
    near_transition = st.sampled_from(TRANSITION_DAYS[name]).map(date.fromisoformat)
    day = draw(
        st.one_of(
            st.dates(min_value=date(1900, 1, 1), max_value=date(2100, 12, 31)),
            near_transition,
        )
    ) + timedelta(days=draw(st.integers(min_value=-1, max_value=1)))
    # Transitions cluster in the small hours and around midnight.
    hour = draw(st.one_of(st.integers(0, 4), st.integers(21, 23), st.integers(0, 23)))
    minute = draw(st.integers(0, 59))
    return name, datetime.combine(day, time_of_day(hour, minute))


@settings(max_examples=200, deadline=None)
@given(oracle_walls())
def test_local_resolution_matches_the_oracle(case: tuple[str, datetime]) -> None:
    check_against_oracle(*case)


@settings(max_examples=200)
@given(
    st.sampled_from(ORACLE_ZONES),
    st.dates(min_value=date(1950, 1, 1), max_value=date(2100, 12, 31)),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    st.integers(0, 999),
)
def test_local_seconds_and_milliseconds_are_kept(
    name: str, day: date, hour: int, minute: int, second: int, ms: int
) -> None:
    clock = f"{hour:02d}:{minute:02d}"
    precise_clock = f"{clock}:{second:02d}.{ms:03d}"
    # No transition in these zones falls inside a minute (after 1950), so the offset is the same
    # for the whole minute: either both wall times exist, or both lie in the same gap.
    whole_minute = outcome(lambda: resolve_local(day.isoformat(), clock, name))
    precise = outcome(lambda: resolve_local(day.isoformat(), precise_clock, name))
    if isinstance(whole_minute, ScheduleError):
        assert isinstance(precise, ScheduleError)
        assert precise.code == whole_minute.code
    else:
        assert precise == whole_minute + second * 1000 + ms
