"""Time input: the ``at`` selector turned into a canonical instant (SPEC §2, §8), and the
``daily_at`` selector checked into its canonical rule (SPEC §10).

A model names an absolute time in one of two forms, and both must say which offset or zone they
mean — nothing here ever falls back to an ambient zone:

* an RFC 3339 §5.6 ``date-time`` string with a UTC offset (:func:`parse_rfc3339`);
* a local-calendar object ``{date, time, time_zone}`` (:func:`resolve_local`).

Checks run in the order of SPEC §8 — shape, then zone or offset, then the calendar, then the
range — and every failure is a :class:`ScheduleError` (``invalid_selector``,
``invalid_time_zone`` or ``time_out_of_range``). Whether the instant is in the future is the
caller's question: this module has no clock. The range checked here is its upper end only
(SPEC §8 "Targets"): an instant before ``0001-01-01T00:00:00.000Z`` — which RFC 3339's year
``0000`` or an offset east of UTC on 0001-01-01 can name — is a time in the past, returned as
epoch milliseconds below :data:`MIN_INSTANT` for the caller's future check to refuse with
``not_future``. Years are proleptic Gregorian, ``0000`` (a leap year) included; all calendar
arithmetic is on integers, since ``datetime`` has no year 0.

Zone data comes only from the bundled ``tzdata`` package, read as package resources, never from
the host's ``/usr/share/zoneinfo``, so a result does not depend on the machine. A local wall time
is resolved with ``fold=0`` and ``fold=1`` and each candidate is converted to UTC and back: a wall
time that no candidate reproduces lies in a gap and is rejected with a message naming the gap; if
both reproduce it, the wall time is repeated (an overlap) and the earlier instant is taken. All
arithmetic is on integer epoch milliseconds — Python's arithmetic on aware datetimes is
wall-clock arithmetic and would be wrong across a transition.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Final, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import (
    MAX_INSTANT,
    MIN_INSTANT,
    MS_PER_DAY,
    MS_PER_SECOND,
    Instant,
    civil_from_days,
    days_from_civil,
    days_in_month,
    format_instant,
    in_range,
    instant_from_fields,
)
from session_schedule.core.records import WEEKDAYS, Weekday

GEOGRAPHIC_AREAS: Final = frozenset(
    {
        "Africa",
        "America",
        "Antarctica",
        "Arctic",
        "Asia",
        "Atlantic",
        "Australia",
        "Europe",
        "Indian",
        "Pacific",
    }
)
"""The first components an IANA zone name may have; ``UTC`` is the one other name accepted."""

_RFC3339: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))",
    re.ASCII,
)
# Used only to explain a rejection: the date-time part without its offset, and things that look
# like a numeric offset in another notation ('+0900', '+09', '+09:00:00').
_RFC3339_DATE_TIME: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?", re.ASCII
)
_OFFSET_LOOKALIKE: Final = re.compile(r"[+-][0-9:]*", re.ASCII)

_LOCAL_DATE: Final = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", re.ASCII)
_LOCAL_TIME: Final = re.compile(
    r"([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,3}))?)?", re.ASCII
)
_LOCAL_KEYS: Final = ("date", "time", "time_zone")
_DAILY_KEYS: Final = ("time", "time_zone", "weekdays")
_DAILY_EXAMPLE: Final = (
    "with the keys `time` and `time_zone`, and optionally `weekdays`, such as "
    '{"time": "09:00", "time_zone": "Asia/Tokyo", "weekdays": ["mon", "fri"]}'
)
_LOCAL_EXAMPLES: Final = {"date": "2026-12-01", "time": "09:00", "time_zone": "Asia/Tokyo"}

_MS_PER_MINUTE: Final = 60 * MS_PER_SECOND
_ONE_MS: Final = timedelta(milliseconds=1)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# Every UTC offset is under a day, so a UTC instant clamped into this band has a local time that
# a datetime can hold (years 0001-9999). No supported zone changes its offset within two days of
# either end of the range (the tests check every zone), so the clamped offset is the true one.
_SAFE_LOW: Final = MIN_INSTANT + MS_PER_DAY
_SAFE_HIGH: Final = MAX_INSTANT - MS_PER_DAY

_FORMS: Final = (
    "an RFC 3339 string with a UTC offset, such as '2026-12-01T09:00:00+09:00', "
    "or an object with the keys `date`, `time` and `time_zone`"
)
_DATE_ADVICE: Final = (
    "use a year from 0000 to 9999, a month from 01 to 12 and a day that exists in that month"
)
_TIME_ADVICE: Final = (
    "use hours 00-23, minutes 00-59 and seconds 00-59 (there is no 24:00 and no leap second)"
)


def parse_at(value: object) -> int:
    """The instant an ``at`` selector names, ``value`` being the JSON-decoded argument, as epoch
    milliseconds.

    A string is read by :func:`parse_rfc3339`; an object must have exactly the string members
    ``date``, ``time`` and ``time_zone`` and is read by :func:`resolve_local`. Raises
    :class:`ScheduleError` — ``invalid_selector``, ``invalid_time_zone`` or
    ``time_out_of_range`` (past the upper end of the range) — and nothing else, whatever
    ``value`` is. The instant may lie in the past, even before :data:`MIN_INSTANT` (then it is
    no :data:`Instant`): checking that it is in the future is the caller's job, and an instant
    after the decision time is in range.
    """
    if isinstance(value, str):
        return parse_rfc3339(value)
    if isinstance(value, dict):
        if value.keys() != set(_LOCAL_KEYS):
            raise ScheduleError("invalid_selector", _local_keys_message(list(value)))
        for key in _LOCAL_KEYS:
            member = value[key]
            if not isinstance(member, str):
                raise ScheduleError(
                    "invalid_selector",
                    f"`{key}` must be a string, such as {_LOCAL_EXAMPLES[key]!r}, "
                    f"not {describe_value(member)}.",
                )
        return resolve_local(value["date"], value["time"], value["time_zone"])
    raise ScheduleError("invalid_selector", f"`at` must be {_FORMS}, not {describe_value(value)}.")


def parse_rfc3339(text: str) -> int:
    """The instant an RFC 3339 §5.6 ``date-time`` with a UTC offset names, as epoch
    milliseconds.

    Accepts exactly ``YYYY-MM-DD`` ``T``/``t`` ``HH:MM:SS``, an optional ``.`` and one or more
    digits, then ``Z``/``z`` or ``±HH:MM`` (``-00:00`` reads as UTC); the year may be ``0000``
    (proleptic Gregorian, a leap year). Fraction digits beyond the millisecond are truncated.
    Raises :class:`ScheduleError`: ``invalid_time_zone`` for an offset beyond ±23:59,
    ``time_out_of_range`` when the instant is after ``9999-12-31T23:59:59.999Z``, and
    ``invalid_selector`` for every other malformation (no offset, another separator or notation,
    an impossible date or time of day). An instant before ``0001-01-01T00:00:00.000Z`` (in year
    0000, or in year -0001 for ``0000-01-01`` east of UTC) is returned as it is: it lies in the
    past, below :data:`MIN_INSTANT`.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ScheduleError("invalid_selector", _rfc3339_shape_message(text))
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction, sign, offset_hours, offset_minutes = match.group(7, 8, 9, 10)
    offset = 0
    if sign is not None:
        if int(offset_hours) > 23 or int(offset_minutes) > 59:
            raise ScheduleError(
                "invalid_time_zone",
                f"{text!r} has the UTC offset '{sign}{offset_hours}:{offset_minutes}', which "
                "does not exist; use an offset from '-23:59' to '+23:59'.",
            )
        offset = (int(offset_hours) * 60 + int(offset_minutes)) * (-1 if sign == "-" else 1)
    if not _is_real_date(year, month, day):
        raise ScheduleError(
            "invalid_selector", f"{text!r} contains an impossible date; {_DATE_ADVICE}."
        )
    if not _is_real_time(hour, minute, second):
        raise ScheduleError(
            "invalid_selector", f"{text!r} contains an impossible time of day; {_TIME_ADVICE}."
        )
    ms = int((fraction or "")[:3].ljust(3, "0"))
    instant = instant_from_fields(year, month, day, hour, minute, second, ms)
    instant -= offset * _MS_PER_MINUTE
    if instant > MAX_INSTANT:
        raise _out_of_range(repr(text))
    return instant


def resolve_local(date: str, time: str, time_zone: str) -> int:
    """The instant at which the wall clocks of ``time_zone`` show ``date`` and ``time``, as
    epoch milliseconds.

    ``date`` is ``YYYY-MM-DD`` (a real proleptic Gregorian date, years 0000-9999); ``time`` is
    ``HH:MM``, ``HH:MM:SS`` or ``HH:MM:SS.f`` with 1-3 fraction digits; ``time_zone`` is a name
    :func:`is_supported_zone` accepts. A repeated wall time (an overlap) resolves to the earlier
    instant. Before year 0001 a zone keeps the offset its data starts with (local mean time).
    Raises :class:`ScheduleError`: ``invalid_time_zone`` for the zone, ``invalid_selector`` for a
    malformed or impossible date or time and for a wall time the zone skips (a gap, named in the
    message), ``time_out_of_range`` when the instant is after ``9999-12-31T23:59:59.999Z``. An
    instant before ``0001-01-01T00:00:00.000Z`` is returned as it is: it lies in the past, below
    :data:`MIN_INSTANT`.
    """
    zone = load_zone(time_zone)
    date_match = _LOCAL_DATE.fullmatch(date)
    if date_match is None:
        raise ScheduleError(
            "invalid_selector",
            f"`date` must have the form YYYY-MM-DD, such as '2026-12-01', not {date!r}.",
        )
    year, month, day = (int(group) for group in date_match.groups())
    if not _is_real_date(year, month, day):
        raise ScheduleError(
            "invalid_selector", f"`date` {date!r} is an impossible date; {_DATE_ADVICE}."
        )
    wall = days_from_civil(year, month, day) * MS_PER_DAY + parse_wall_time(time)
    candidates = _candidates(zone, wall)
    reproducing = [utc for utc in candidates if utc + _offset_at(zone, utc) == wall]
    if not reproducing:
        raise ScheduleError(
            "invalid_selector", _gap_message(f"{date} {time}", time_zone, zone, wall, candidates)
        )
    instant = min(reproducing)
    if instant > MAX_INSTANT:
        raise _out_of_range(f"{date} {time} in {time_zone}")
    return instant


def parse_wall_time(time: str) -> int:
    """Milliseconds since midnight of a wall-clock ``time``: ``HH:MM``, ``HH:MM:SS`` or
    ``HH:MM:SS.f`` with 1-3 fraction digits, 24-hour.

    Raises ``ScheduleError("invalid_selector")`` for any other form and for an impossible time
    of day (``24:00``, ``23:60``, a leap second).
    """
    time_match = _LOCAL_TIME.fullmatch(time)
    if time_match is None:
        raise ScheduleError(
            "invalid_selector",
            "`time` must have the form HH:MM, HH:MM:SS or HH:MM:SS.sss (24-hour, 1-3 fraction "
            f"digits), such as '09:00', not {time!r}.",
        )
    hour_text, minute_text, second_text, fraction = time_match.groups()
    hour, minute, second = int(hour_text), int(minute_text), int(second_text or "0")
    if not _is_real_time(hour, minute, second):
        raise ScheduleError(
            "invalid_selector", f"`time` {time!r} is an impossible time of day; {_TIME_ADVICE}."
        )
    ms = int((fraction or "").ljust(3, "0"))
    return ((hour * 60 + minute) * 60 + second) * MS_PER_SECOND + ms


@final
class DailyAtInput(msgspec.Struct, frozen=True, kw_only=True):
    """A ``daily_at`` selector, checked and in canonical form."""

    local_time: str
    """``HH:MM:SS.sss``."""
    time_of_day: int
    """The same time as milliseconds since midnight."""
    time_zone: str
    weekdays: tuple[Weekday, ...]
    """Distinct, in week order; all seven when the selector listed none."""


def parse_daily_at(value: object) -> DailyAtInput:
    """The ``daily_at`` selector ``value`` (the JSON-decoded argument), checked (SPEC §10).

    ``value`` must be an object with the string members ``time`` and ``time_zone`` and an optional
    ``weekdays`` (absent or ``null``: every day). Checks run in SPEC §8's order and raise
    :class:`ScheduleError`: ``invalid_selector`` for the object's shape, ``invalid_rule`` for
    ``weekdays`` (anything but a non-empty array of distinct day names), ``invalid_time_zone`` for
    the zone, ``invalid_selector`` for a malformed or impossible time.
    """
    if not isinstance(value, dict):
        raise ScheduleError(
            "invalid_selector",
            f"`daily_at` must be an object {_DAILY_EXAMPLE}, not {describe_value(value)}.",
        )
    keys = list(value)
    missing = [f"`{key}`" for key in ("time", "time_zone") if key not in keys]
    unknown = sorted(repr(key) for key in keys if key not in _DAILY_KEYS)
    if missing or unknown:
        fixes = []
        if missing:
            fixes.append(f"add {enumerate_names(missing)}")
        if unknown:
            fixes.append(f"remove {enumerate_names(unknown)}")
        raise ScheduleError(
            "invalid_selector",
            "the `daily_at` object must have the keys `time` and `time_zone`, and may have "
            f"`weekdays`; {', and '.join(fixes)}.",
        )
    for key in ("time", "time_zone"):
        member = value[key]
        if not isinstance(member, str):
            raise ScheduleError(
                "invalid_selector",
                f"`{key}` must be a string, such as {_LOCAL_EXAMPLES[key]!r}, "
                f"not {describe_value(member)}.",
            )
    weekdays = _parse_weekdays(value.get("weekdays"))
    load_zone(value["time_zone"])
    time_of_day = parse_wall_time(value["time"])
    return DailyAtInput(
        local_time=format_time_of_day(time_of_day),
        time_of_day=time_of_day,
        time_zone=value["time_zone"],
        weekdays=weekdays,
    )


def format_time_of_day(ms: int) -> str:
    """Milliseconds since midnight as the canonical ``HH:MM:SS.sss``."""
    seconds, fraction = divmod(ms, MS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{hour:02d}:{minute:02d}:{second:02d}.{fraction:03d}"


def earliest_at_or_after(zone: zoneinfo.ZoneInfo, wall: int) -> int:
    """The earliest instant at which the wall clocks of ``zone`` read ``wall`` or later.

    ``wall`` is a local wall-clock reading as milliseconds since 1970-01-01T00:00 on that clock,
    in years 0001-9999. A reading the zone shows once resolves to that instant; a repeated one
    (an overlap) to the earlier instant; a skipped one (a gap) to the instant the clocks jump,
    where the gap ends. The result may lie outside the representable range near its ends.
    """
    candidates = _candidates(zone, wall)
    reproducing = [utc for utc in candidates if utc + _offset_at(zone, utc) == wall]
    if reproducing:
        return min(reproducing)
    return _transition(zone, min(candidates), max(candidates))


def wall_clock_at(zone: zoneinfo.ZoneInfo, instant: int) -> int:
    """The wall-clock reading of ``zone`` at ``instant``, as local milliseconds since 1970."""
    return instant + _offset_at(zone, instant)


def supported_zones() -> frozenset[str]:
    """Every accepted zone name: ``UTC`` and the bundled ``tzdata`` names in a geographic area.

    Backward-compatible links the package still ships (``America/Buenos_Aires``) are included.
    """
    return _supported_zones()


def is_supported_zone(name: str) -> bool:
    """Whether ``name`` is exactly (case included) one of :func:`supported_zones`."""
    return name in _supported_zones()


def load_zone(name: str) -> zoneinfo.ZoneInfo:
    """The zone ``name`` names, read from the bundled ``tzdata`` package (never the host's files).

    The same object is returned for the same name. Raises :class:`ScheduleError`
    ``invalid_time_zone`` when :func:`is_supported_zone` rejects ``name``.
    """
    if name not in _supported_zones():
        suggestion = _zones_by_folded_name().get(name.casefold())
        if suggestion is not None:
            message = (
                f"{name!r} is not a supported time zone (names are case-sensitive); "
                f"use {suggestion!r}."
            )
        else:
            message = (
                f"{name!r} is not a supported time zone; use 'UTC' or an IANA Area/Location "
                "name such as 'America/New_York' or 'Asia/Tokyo'."
            )
        raise ScheduleError("invalid_time_zone", message)
    return _read_zone(name)


def format_local(instant: Instant, zone: zoneinfo.ZoneInfo) -> str:
    """``instant`` as RFC 3339 in ``zone``'s wall time, e.g. ``2026-12-01T09:00:00.000+09:00``.

    Always a four-digit year, three fraction digits and a ``±HH:MM`` offset, and the text always
    denotes exactly ``instant`` (it round-trips through :func:`parse_rfc3339`). RFC 3339 offsets
    are whole minutes, so an offset with seconds (local mean time, before about 1900) is rounded
    to the minute and the wall time shown moves with it; when the wall time would leave years
    0001-9999 the canonical UTC form is returned instead. Raises ``ValueError`` when ``instant``
    is outside the representable range.
    """
    if not in_range(instant):
        raise ValueError(f"instant {instant} ms is outside years 0001-9999")
    offset = (_offset_at(zone, instant) + _MS_PER_MINUTE // 2) // _MS_PER_MINUTE
    local = instant + offset * _MS_PER_MINUTE
    if not in_range(local):
        return format_instant(instant)
    days, ms_of_day = divmod(local, MS_PER_DAY)
    year, month, day = civil_from_days(days)
    seconds, ms = divmod(ms_of_day, MS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    offset_hours, offset_minutes = divmod(abs(offset), 60)
    sign = "-" if offset < 0 else "+"
    return (
        f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{ms:03d}"
        f"{sign}{offset_hours:02d}:{offset_minutes:02d}"
    )


@functools.cache
def _supported_zones() -> frozenset[str]:
    listed = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    geographic = (name for name in listed if name.partition("/")[0] in GEOGRAPHIC_AREAS)
    return frozenset({"UTC", *geographic})


@functools.cache
def _zones_by_folded_name() -> dict[str, str]:
    return {name.casefold(): name for name in _supported_zones()}


@functools.cache
def _read_zone(name: str) -> zoneinfo.ZoneInfo:
    # ZoneInfo(name) would search the host's TZPATH first; from_file on the package resource
    # pins the data to the bundled tzdata release.
    resource = resources.files("tzdata").joinpath("zoneinfo")
    for part in name.split("/"):
        resource = resource.joinpath(part)
    with resource.open("rb") as file:
        return zoneinfo.ZoneInfo.from_file(file, key=name)


def _offset_ms(offset: timedelta | None) -> int:
    # A ZoneInfo always answers with a timedelta; None would mean "unknown", treated as UTC.
    return (offset or timedelta()) // _ONE_MS


def _candidates(zone: zoneinfo.ZoneInfo, wall: int) -> list[int]:
    """The UTC instants ``wall`` maps to under the offsets zoneinfo gives its two folds."""
    if wall < _SAFE_LOW:
        # Before 0001-01-02 a datetime may not hold the wall time (it has no year 0). Before
        # its first transition a zone keeps its first offset, and none has a transition before
        # 0001-01-03 (the tests check every zone), so that offset is exact here.
        offset = _offset_at(zone, MIN_INSTANT)
        return [wall - offset, wall - offset]
    days, ms_of_day = divmod(wall, MS_PER_DAY)
    year, month, day = civil_from_days(days)
    seconds, ms = divmod(ms_of_day, MS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    aware = datetime(year, month, day, hour, minute, second, ms * 1_000, tzinfo=zone)
    # PEP 495: for a repeated wall time fold=0 gives the first offset and fold=1 the second; for
    # a skipped one each fold gives an offset whose UTC instant shows another wall time.
    return [wall - _offset_ms(aware.replace(fold=fold).utcoffset()) for fold in (0, 1)]


def _transition(zone: zoneinfo.ZoneInfo, low: int, high: int) -> int:
    """The first UTC millisecond after ``low`` and at most ``high`` whose offset differs from
    the offset at ``low`` (bisection; ``high`` when none does)."""
    before = _offset_at(zone, low)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset_at(zone, middle) == before:
            low = middle
        else:
            high = middle
    return high


def _offset_at(zone: zoneinfo.ZoneInfo, utc: int) -> int:
    """The UTC offset, in milliseconds, that ``zone`` has at the UTC instant ``utc``."""
    clamped = min(max(utc, _SAFE_LOW), _SAFE_HIGH)
    moment = _EPOCH + timedelta(milliseconds=clamped)
    return _offset_ms(zone.fromutc(moment.replace(tzinfo=zone)).utcoffset())


def _gap_message(
    wall_text: str, zone_name: str, zone: zoneinfo.ZoneInfo, wall: int, candidates: list[int]
) -> str:
    # The transition lies between the two candidates; read the wall clock just before and at it.
    low = min(candidates)
    jump = _transition(zone, low, max(candidates))
    start, end = jump + _offset_at(zone, low), jump + _offset_at(zone, jump)
    same_day = start // MS_PER_DAY == end // MS_PER_DAY == wall // MS_PER_DAY
    return (
        f"{wall_text} does not exist in {zone_name}: the clocks skip from "
        f"{_wall_clock(start, with_date=not same_day)} to "
        f"{_wall_clock(end, with_date=not same_day)} (a gap in local time); "
        "choose a time outside the gap."
    )


def _wall_clock(wall: int, *, with_date: bool) -> str:
    days, ms_of_day = divmod(wall, MS_PER_DAY)
    minutes, ms_of_minute = divmod(ms_of_day, _MS_PER_MINUTE)
    hour, minute = divmod(minutes, 60)
    # Transitions fall on whole seconds; most on whole minutes, where the seconds are left out.
    seconds = f":{ms_of_minute // MS_PER_SECOND:02d}" if ms_of_minute else ""
    year, month, day = civil_from_days(days)
    date = f"{year:04d}-{month:02d}-{day:02d} " if with_date else ""
    return f"{date}{hour:02d}:{minute:02d}{seconds}"


def _rfc3339_shape_message(text: str) -> str:
    if _RFC3339_DATE_TIME.fullmatch(text):
        return (
            f"{text!r} has no UTC offset; add one such as 'Z' or '+09:00', "
            "or pass {date, time, time_zone}."
        )
    prefix = _RFC3339_DATE_TIME.match(text)
    if prefix is not None and _OFFSET_LOOKALIKE.fullmatch(text, prefix.end()):
        return (
            f"{text!r} has a malformed UTC offset; write it as 'Z', '+HH:MM' or '-HH:MM', "
            "such as '+09:00'."
        )
    return (
        f"{text!r} is not an RFC 3339 date-time; write YYYY-MM-DDTHH:MM:SS, an optional "
        "fraction, then 'Z' or an offset, such as '2026-12-01T09:00:00+09:00'."
    )


def _local_keys_message(keys: list[object]) -> str:
    missing = [f"`{key}`" for key in _LOCAL_KEYS if key not in keys]
    unknown = sorted(repr(key) for key in keys if key not in _LOCAL_KEYS)
    fixes = []
    if missing:
        fixes.append(f"add {enumerate_names(missing)}")
    if unknown:
        fixes.append(f"remove {enumerate_names(unknown)}")
    return (
        "the `at` object must have exactly the keys `date`, `time` and `time_zone`; "
        f"{', and '.join(fixes)}."
    )


def enumerate_names(items: list[str]) -> str:
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} and {items[-1]}"


def describe_value(value: object) -> str:
    """How a JSON value of the wrong type is named in a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a value of type {type(value).__name__}"


def _is_real_date(year: int, month: int, day: int) -> bool:
    return year >= 0 and 1 <= month <= 12 and 1 <= day <= days_in_month(year, month)


def _is_real_time(hour: int, minute: int, second: int) -> bool:
    return hour <= 23 and minute <= 59 and second <= 59


def _out_of_range(subject: str) -> ScheduleError:
    return ScheduleError(
        "time_out_of_range",
        f"{subject} is after {format_instant(MAX_INSTANT)}, the latest instant Schedule can "
        "represent; choose an earlier time.",
    )


def _parse_weekdays(value: object) -> tuple[Weekday, ...]:
    if value is None:
        return WEEKDAYS
    names = ", ".join(repr(day) for day in WEEKDAYS)
    if not isinstance(value, list):
        raise ScheduleError(
            "invalid_rule",
            '`weekdays` must be an array of day names, such as ["mon", "wed", "fri"], '
            f"or null for every day, not {describe_value(value)}.",
        )
    if not value:
        raise ScheduleError(
            "invalid_rule",
            "`weekdays` is empty; list at least one day, or pass null for every day.",
        )
    seen: set[str] = set()
    for item in value:
        if item not in WEEKDAYS:
            shown = repr(item) if isinstance(item, str) else describe_value(item)
            raise ScheduleError(
                "invalid_rule",
                f"`weekdays` contains {shown}, which is not a day name; use {names}.",
            )
        if item in seen:
            raise ScheduleError(
                "invalid_rule", f"`weekdays` lists {item!r} twice; list each day once."
            )
        seen.add(item)
    return tuple(day for day in WEEKDAYS if day in seen)
