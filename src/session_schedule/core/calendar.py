"""Calendar rules: a strict subset of RFC 5545 ``RRULE`` on local dates (SPEC §12).

Rule 1 — a rule string parses into a :class:`CalendarRule` or fails with ``invalid_rule`` and a
message naming the part at fault; :func:`format_rule` writes the canonical string (``FREQ``,
``INTERVAL``, ``BYMONTH``, ``BYMONTHDAY``, ``BYDAY``, ``BYSETPOS``, ``COUNT``, ``UNTIL``;
``INTERVAL=1`` omitted; values ascending; ``BYDAY`` Monday first, ordinals before the plain day).
Parsing a canonical string gives the same rule back.

Rule 2 — the rule's dates come period by period (a day, a week starting on Monday, a month or a
year; ``INTERVAL`` picks every n-th period counted from the start date's period). A period's
dates are the BY parts' expansion or limitation (RFC 5545 §3.3.10's table), then ``BYSETPOS``;
a date the calendar lacks is no date. The raw dates are those of every picked period; the
occurrences are the raw dates from the start date on, up to ``UNTIL`` and to the ``COUNT``-th.

Rule 3 — the number of raw dates in a picked period depends only on where the period lies in
the 400-year Gregorian cycle (146,097 days: 4,800 months, 20,871 weeks, exactly), so the picked
periods' counts repeat after ``U / gcd(INTERVAL, U)`` picked periods, ``U`` being the periods in
400 years (or 1 or 7 when the count ignores the calendar). One table of running counts over
that cycle, built once per rule, turns "how many raw dates before period g" and "which period
holds the n-th raw date" into arithmetic and a bisection. Finding the next occurrence after any
date, the last one before it, the ``COUNT``-th one and the number between two dates each expand
at most two periods, whatever the downtime and however sparse the rule (29 February, a fifth
Friday): bounded work, never an enumeration from the start.

Rule 4 — each date's instant is the ``daily_at`` resolution (SPEC §10, :mod:`.daily`): the
earliest instant whose wall clock reads that date and time or later. Occurrence instants never
decrease from one date to the next, so "the first occurrence after an instant" starts from that
instant's local date and resolves a handful of dates.

Dates are day numbers since 1970-01-01 on the zone's local calendar (Monday is weekday 0).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
import zoneinfo
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, assert_never, final, get_args

from session_schedule.core.daily import FIRST_DAY, LAST_DAY, weekday_of
from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import (
    MAX_INSTANT,
    MS_PER_DAY,
    Instant,
    civil_from_days,
    days_from_civil,
    days_in_month,
    format_instant,
)
from session_schedule.core.records import CalendarScheduleRecord, record_target
from session_schedule.core.time_input import (
    describe_value,
    earliest_at_or_after,
    enumerate_names,
    format_time_of_day,
    load_zone,
    parse_wall_time,
    wall_clock_at,
)

Frequency = Literal["DAILY", "WEEKLY", "MONTHLY", "YEARLY"]
FREQUENCIES: Final[tuple[Frequency, ...]] = get_args(Frequency)
RULE_DAYS: Final = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
"""The ``BYDAY`` day names, Monday first (index = weekday)."""

PARTS: Final = ("FREQ", "INTERVAL", "BYMONTH", "BYMONTHDAY", "BYDAY", "BYSETPOS", "COUNT", "UNTIL")
"""The supported parts, in canonical order."""
MAX_INTERVAL: Final = 1000
MAX_COUNT: Final = 100_000
RULE_EXAMPLE: Final = "'FREQ=MONTHLY;BYDAY=1MO'"

_PERIODS_PER_CYCLE: Final[dict[Frequency, int]] = {
    "DAILY": 146_097,
    "WEEKLY": 20_871,
    "MONTHLY": 4_800,
    "YEARLY": 400,
}
_UNSUPPORTED: Final = {
    "BYHOUR": "the time of day comes from `time`, so remove BYHOUR",
    "BYMINUTE": "the time of day comes from `time`, so remove BYMINUTE",
    "BYSECOND": "the time of day comes from `time`, so remove BYSECOND",
    "BYWEEKNO": "use BYMONTH, BYMONTHDAY, BYDAY and BYSETPOS instead",
    "BYYEARDAY": "use BYMONTH with BYMONTHDAY instead",
    "WKST": "weeks always start on Monday, so remove WKST",
}
_NAME: Final = re.compile(r"[A-Z][A-Z0-9-]*", re.ASCII)
"""A part's name as RFC 5545 writes one (an iana-token or an x-name such as ``X-FOO``: letters,
digits and hyphens), upper-cased: a part so named is ``NAME=VALUE``, whether or not the subset
takes it."""
_INTEGER: Final = re.compile(r"[+-]?[0-9]{1,6}", re.ASCII)
_BYDAY_ITEM: Final = re.compile(r"([+-]?[0-9]{1,2})?(MO|TU|WE|TH|FR|SA|SU)", re.ASCII)
_UNTIL: Final = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})", re.ASCII)
_PART_LIST: Final = "FREQ, INTERVAL, BYMONTH, BYMONTHDAY, BYDAY, BYSETPOS, COUNT or UNTIL"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class CalendarRule:
    """A parsed rule, its lists distinct and in canonical order."""

    frequency: Frequency
    interval: int = 1
    months: tuple[int, ...] = ()
    month_days: tuple[int, ...] = ()
    """1…31 or -31…-1, ascending."""
    weekdays: tuple[tuple[int, int], ...] = ()
    """``(ordinal, weekday)``: ordinal ±1…±5, or 0 for every such weekday; Monday first,
    ordinals (ascending) before the plain day."""
    set_positions: tuple[int, ...] = ()
    count: int | None = None
    until: int | None = None
    """A local date (day number), inclusive."""


# -- parsing and the canonical form -----------------------------------------------------------


def parse_rule(text: object) -> CalendarRule:
    """The rule ``text`` states (Rule 1).

    Raises ``ScheduleError("invalid_rule")`` with a message naming the rejected part. A rule
    that is not upper case is read as if it were, so that one wrong in another way gets that
    error first (``COUNT=1e3`` is not made right by writing ``1E3``), and the message quotes
    the part's value as written; only a rule that is right once upper-cased is refused for its
    case, with the upper-case rule as the suggestion.
    """
    if not isinstance(text, str):
        raise _invalid(f"`rule` must be a string of RRULE parts, such as {RULE_EXAMPLE}")
    if not text:
        raise _invalid(f"`rule` is empty; give at least FREQ, such as {RULE_EXAMPLE}")
    if any(character.isspace() for character in text):
        raise _invalid(f"`rule` contains whitespace; remove it, as in {RULE_EXAMPLE}")
    rule = _parse_parts(text)
    if text != text.upper():
        raise _invalid(f"`rule` must be upper case, such as {text.upper()!r}")
    return rule


def _parse_parts(text: str) -> CalendarRule:
    """The rule ``text`` states, read as its upper-case form; each refusal quotes the value as
    ``text`` has it. (Upper-casing leaves ``;``, ``=`` and ``,`` where they are and makes none,
    so each part of ``text`` upper-cased is that part of the upper-case rule.)"""
    values: dict[str, str] = {}
    for part in text.split(";"):
        if not part:
            raise _invalid(
                "`rule` has an empty part; separate parts with a single ';' and do not end "
                "the rule with one"
            )
        written_name, equals, value = part.partition("=")
        name = written_name.upper()
        if not equals or not _NAME.fullmatch(name):
            raise _invalid(
                f"{part!r} is not a rule part; write parts as NAME=VALUE separated by ';', "
                f"such as {RULE_EXAMPLE}"
            )
        if name in _UNSUPPORTED:
            raise _invalid(f"{name} is not supported; {_UNSUPPORTED[name]}")
        if name not in PARTS:
            raise _invalid(f"{name} is not a supported rule part; use {_PART_LIST}")
        if name in values:
            raise _invalid(f"{name} is given twice; give each part once")
        if not value:
            raise _invalid(f"{name} has no value; write {name}=VALUE or remove it")
        values[name] = value
    if "FREQ" not in values:
        raise _invalid(
            "`rule` has no FREQ; add FREQ=DAILY, FREQ=WEEKLY, FREQ=MONTHLY or FREQ=YEARLY"
        )
    frequency = _parse_frequency(values["FREQ"])
    interval = 1
    if "INTERVAL" in values:
        interval = _parse_number("INTERVAL", values["INTERVAL"], 1, MAX_INTERVAL)
    months = _parse_list("BYMONTH", values.get("BYMONTH"), _month, "1,7")
    month_days = _parse_list("BYMONTHDAY", values.get("BYMONTHDAY"), _month_day, "1,-1")
    weekdays, written_days = _parse_weekdays(values.get("BYDAY"))
    set_positions = _parse_list("BYSETPOS", values.get("BYSETPOS"), _set_position, "-1")
    count = None
    if "COUNT" in values:
        count = _parse_number("COUNT", values["COUNT"], 1, MAX_COUNT)
    until = None if "UNTIL" not in values else _parse_until(values["UNTIL"])
    rule = CalendarRule(
        frequency=frequency,
        interval=interval,
        months=months,
        month_days=month_days,
        weekdays=weekdays,
        set_positions=set_positions,
        count=count,
        until=until,
    )
    _check_combination(rule, written_days)
    return rule


def _check_combination(rule: CalendarRule, written_days: Mapping[tuple[int, int], str]) -> None:
    """Raise for parts that are well-formed alone but may not go together (``written_days``:
    each BYDAY entry as the rule writes it)."""
    frequency, months, weekdays = rule.frequency, rule.months, rule.weekdays
    if rule.month_days and frequency == "WEEKLY":
        raise _invalid(
            "BYMONTHDAY cannot be used with FREQ=WEEKLY; use FREQ=MONTHLY, or BYDAY for days "
            "of the week"
        )
    ordinal = next((item for item in weekdays if item[0]), None)
    if ordinal is not None:
        shown = written_days[ordinal]
        if frequency in ("DAILY", "WEEKLY"):
            raise _invalid(
                f"BYDAY {shown!r} has an ordinal, which only FREQ=MONTHLY, or FREQ=YEARLY with "
                f"BYMONTH, allows; write {RULE_DAYS[ordinal[1]]!r} or change FREQ"
            )
        if frequency == "YEARLY" and not months:
            raise _invalid(
                f"BYDAY {shown!r} has an ordinal, which FREQ=YEARLY allows only with BYMONTH; "
                f"add BYMONTH or write {RULE_DAYS[ordinal[1]]!r}"
            )
    if rule.set_positions:
        if frequency not in ("MONTHLY", "YEARLY"):
            raise _invalid("BYSETPOS needs FREQ=MONTHLY or FREQ=YEARLY; remove it or change FREQ")
        if not (months or rule.month_days or weekdays):
            raise _invalid(
                "BYSETPOS needs another BY part to choose from; add one, such as "
                "'FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1'"
            )
    if rule.count is not None and rule.until is not None:
        raise _invalid("COUNT and UNTIL cannot both be given; keep one of them")


def format_rule(rule: CalendarRule) -> str:
    """The canonical string of ``rule`` (Rule 1)."""
    parts = [f"FREQ={rule.frequency}"]
    if rule.interval != 1:
        parts.append(f"INTERVAL={rule.interval}")
    if rule.months:
        parts.append(f"BYMONTH={_join(rule.months)}")
    if rule.month_days:
        parts.append(f"BYMONTHDAY={_join(rule.month_days)}")
    if rule.weekdays:
        parts.append(f"BYDAY={','.join(_format_weekday(item) for item in rule.weekdays)}")
    if rule.set_positions:
        parts.append(f"BYSETPOS={_join(rule.set_positions)}")
    if rule.count is not None:
        parts.append(f"COUNT={rule.count}")
    if rule.until is not None:
        year, month, day = civil_from_days(rule.until)
        parts.append(f"UNTIL={year:04d}{month:02d}{day:02d}")
    return ";".join(parts)


def canonical_rule(text: object) -> str:
    """``text`` checked and rewritten in canonical order; raises as :func:`parse_rule`."""
    return format_rule(parse_rule(text))


def _invalid(message: str) -> ScheduleError:
    return ScheduleError("invalid_rule", f"{message}.")


def _join(values: tuple[int, ...]) -> str:
    return ",".join(str(value) for value in values)


def _format_weekday(item: tuple[int, int]) -> str:
    ordinal, weekday = item
    return f"{ordinal or ''}{RULE_DAYS[weekday]}"


def _parse_frequency(written: str) -> Frequency:
    value = written.upper()
    for frequency in FREQUENCIES:
        if value == frequency:
            return frequency
    advice = ""
    if value in ("SECONDLY", "MINUTELY", "HOURLY"):
        advice = " (use `every_seconds` for a fixed interval)"
    raise _invalid(f"FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY{advice}, not {written!r}")


def _parse_number(name: str, written: str, low: int, high: int) -> int:
    value = written.upper()
    if not _INTEGER.fullmatch(value) or value[0] in "+-" or not low <= int(value) <= high:
        raise _invalid(f"{name} must be a whole number from {low} to {high}, not {written!r}")
    return int(value)


def _month(value: int) -> bool:
    return 1 <= value <= 12


def _month_day(value: int) -> bool:
    return 1 <= abs(value) <= 31


def _set_position(value: int) -> bool:
    return 1 <= abs(value) <= 31


_LIST_RANGES: Final = {
    "BYMONTH": "months from 1 to 12",
    "BYMONTHDAY": "days from 1 to 31 or -31 to -1",
    "BYSETPOS": "positions from 1 to 31 or -31 to -1",
}


def _parse_list(
    name: str, value: str | None, allowed: Callable[[int], bool], example: str
) -> tuple[int, ...]:
    if value is None:
        return ()
    seen: set[int] = set()
    for written in value.split(","):
        item = written.upper()
        if not _INTEGER.fullmatch(item) or not allowed(int(item)):
            raise _invalid(
                f"{name} must list {_LIST_RANGES[name]}, separated by commas, such as "
                f"'{name}={example}', not {written!r}"
            )
        if int(item) in seen:
            raise _invalid(f"{name} lists {int(item)} twice; list each value once")
        seen.add(int(item))
    return tuple(sorted(seen))


def _parse_weekdays(
    value: str | None,
) -> tuple[tuple[tuple[int, int], ...], dict[tuple[int, int], str]]:
    """The BYDAY entries ``value`` lists, in canonical order, and each as ``value`` writes it."""
    if value is None:
        return (), {}
    seen: dict[tuple[int, int], str] = {}
    for written in value.split(","):
        match = _BYDAY_ITEM.fullmatch(written.upper())
        if match is None:
            raise _invalid(
                "BYDAY must list the days MO, TU, WE, TH, FR, SA or SU, each optionally after "
                f"an ordinal, separated by commas, such as 'BYDAY=1MO,-1FR', not {written!r}"
            )
        ordinal = int(match.group(1) or "0")
        if match.group(1) is not None and not 1 <= abs(ordinal) <= 5:
            raise _invalid(
                f"the ordinal of {written!r} in BYDAY must be from 1 to 5 or -5 to -1 (a month "
                "has at most five of each weekday)"
            )
        entry = (ordinal, RULE_DAYS.index(match.group(2)))
        if entry in seen:
            raise _invalid(f"BYDAY lists {_format_weekday(entry)!r} twice; list each day once")
        seen[entry] = written
    ordered = tuple(sorted(seen, key=lambda entry: (entry[1], entry[0] == 0, entry[0])))
    return ordered, seen


def _parse_until(written: str) -> int:
    match = _UNTIL.fullmatch(written.upper())
    if match is None:
        raise _invalid(
            "UNTIL must be a local date written YYYYMMDD, such as 'UNTIL=20271231', "
            f"not {written!r}"
        )
    year, month, day = (int(group) for group in match.groups())
    if year < 1 or not 1 <= month <= 12 or not 1 <= day <= days_in_month(year, month):
        raise _invalid(f"UNTIL {written!r} is not a calendar date; give a date that exists")
    return days_from_civil(year, month, day)


# -- expansion on local dates -----------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class DateSet:
    """A rule anchored at a start date: its occurrence dates (Rules 2 and 3)."""

    rule: CalendarRule
    start: int
    """The start date (``DTSTART``'s date)."""


def period_of(dates: DateSet, day: int) -> int:
    """The index of the period holding ``day``, counted from the start date's period."""
    match dates.rule.frequency:
        case "DAILY":
            return day - dates.start
        case "WEEKLY":
            return (day - weekday_of(day) - dates.start + weekday_of(dates.start)) // 7
        case "MONTHLY":
            return _month_index(day) - _month_index(dates.start)
        case "YEARLY":
            return civil_from_days(day)[0] - civil_from_days(dates.start)[0]
        case _:
            assert_never(dates.rule.frequency)


def period_dates(dates: DateSet, period: int) -> tuple[int, ...]:
    """The raw dates of period ``period`` (ascending; picked or not, before or after the start
    date, past year 9999 or not)."""
    rule, start = dates.rule, dates.start
    match rule.frequency:
        case "DAILY":
            day = start + period
            return (day,) if _passes_limits(rule, day) else ()
        case "WEEKLY":
            monday = start - weekday_of(start) + 7 * period
            days = [weekday for _, weekday in rule.weekdays] or [weekday_of(start)]
            found = (monday + weekday for weekday in days)
            return tuple(day for day in found if not rule.months or _month_of(day) in rule.months)
        case "MONTHLY":
            year, month0 = divmod(_month_index(start) + period, 12)
            if rule.months and month0 + 1 not in rule.months:
                return ()
            found_days = _month_dates(rule, year, month0 + 1, civil_from_days(start)[2])
            return _select(rule, found_days)
        case "YEARLY":
            start_year, start_month, start_day = civil_from_days(start)
            year = start_year + period
            if rule.months:
                months: tuple[int, ...] = rule.months
            elif rule.month_days or rule.weekdays:
                months = tuple(range(1, 13))
            else:
                months = (start_month,)
            found_days = [
                day for month in months for day in _month_dates(rule, year, month, start_day)
            ]
            return _select(rule, found_days)
        case _:
            assert_never(rule.frequency)


def _month_index(day: int) -> int:
    year, month, _ = civil_from_days(day)
    return year * 12 + month - 1


def _month_of(day: int) -> int:
    return civil_from_days(day)[1]


def _passes_limits(rule: CalendarRule, day: int) -> bool:
    """Whether ``day`` survives a ``DAILY`` rule's BY parts (all of them limit)."""
    if not (rule.months or rule.month_days or rule.weekdays):
        return True
    year, month, month_day = civil_from_days(day)
    if rule.months and month not in rule.months:
        return False
    if rule.month_days:
        length = days_in_month(year, month)
        if not any(_month_day_of(value, length) == month_day for value in rule.month_days):
            return False
    return not rule.weekdays or any(weekday_of(day) == weekday for _, weekday in rule.weekdays)


def _month_day_of(value: int, length: int) -> int:
    """The day of the month ``value`` names in a month of ``length`` days (maybe out of it)."""
    return value if value > 0 else length + 1 + value


def _month_dates(rule: CalendarRule, year: int, month: int, default_day: int) -> list[int]:
    """The dates of one month that ``BYMONTHDAY`` and ``BYDAY`` name (or the start date's day
    of the month, when neither is given), ascending."""
    length = days_in_month(year, month)
    first = days_from_civil(year, month, 1)
    if rule.month_days:
        named = {_month_day_of(value, length) for value in rule.month_days}
        days = sorted(day for day in named if 1 <= day <= length)
        if rule.weekdays:
            days = [day for day in days if _matches_weekdays(rule, first, length, day)]
        return [first + day - 1 for day in days]
    if rule.weekdays:
        chosen: set[int] = set()
        first_weekday = weekday_of(first)
        for ordinal, weekday in rule.weekdays:
            same = range(1 + (weekday - first_weekday) % 7, length + 1, 7)
            if ordinal == 0:
                chosen.update(same)
            elif abs(ordinal) <= len(same):
                chosen.add(same[ordinal - 1 if ordinal > 0 else ordinal])
        return [first + day - 1 for day in sorted(chosen)]
    return [first + default_day - 1] if default_day <= length else []


def _matches_weekdays(rule: CalendarRule, first: int, length: int, month_day: int) -> bool:
    weekday = weekday_of(first + month_day - 1)
    for ordinal, listed in rule.weekdays:
        if listed != weekday:
            continue
        if ordinal in (0, (month_day - 1) // 7 + 1, -((length - month_day) // 7 + 1)):
            return True
    return False


def _select(rule: CalendarRule, days: list[int]) -> tuple[int, ...]:
    """``BYSETPOS`` applied to one period's ascending dates."""
    if not rule.set_positions:
        return tuple(days)
    size = len(days)
    chosen = {
        days[position - 1 if position > 0 else position]
        for position in rule.set_positions
        if position <= size and -position <= size
    }
    return tuple(sorted(chosen))


@final
@dataclass(frozen=True, slots=True)
class _Cycle:
    """Rule 3's table: ``running[j]`` raw dates in picked periods ``0 … j-1`` of a cycle."""

    length: int
    """Picked periods per cycle."""
    running: array[int]
    before_start: int
    """Raw dates of period 0 that lie before the start date."""
    last: int
    """The last occurrence date allowed by ``UNTIL``, ``COUNT`` and 9999-12-31; below the start
    date when the set is empty."""


@functools.lru_cache(maxsize=256)
def _cycle(dates: DateSet) -> _Cycle:
    rule = dates.rule
    periods = _PERIODS_PER_CYCLE[rule.frequency]
    calendar_free = not rule.months and not rule.month_days
    if rule.frequency == "WEEKLY" and calendar_free:
        periods = 1
    elif rule.frequency == "DAILY" and calendar_free:
        periods = 7 if rule.weekdays else 1
    length = periods // math.gcd(rule.interval, periods)
    if rule.frequency == "DAILY" and not calendar_free:
        counts = _daily_counts(dates, length)
    else:
        counts = [len(period_dates(dates, picked * rule.interval)) for picked in range(length)]
    running = array("I", [0])  # at most 146,400 dates a cycle: 4 bytes an entry
    running.extend(itertools.accumulate(counts))
    before_start = sum(1 for day in period_dates(dates, 0) if day < dates.start)
    cycle = _Cycle(length=length, running=running, before_start=before_start, last=LAST_DAY)
    last = min(LAST_DAY, LAST_DAY if rule.until is None else rule.until)
    if rule.count is not None:
        counted = _raw_date(dates, cycle, before_start + rule.count - 1)
        last = min(last, dates.start - 1 if counted is None else counted)
    if running[-1] == 0:
        last = dates.start - 1
    return _Cycle(length=length, running=running, before_start=before_start, last=last)


def _daily_counts(dates: DateSet, length: int) -> list[int]:
    """The raw counts (0 or 1) of a ``DAILY`` rule's first ``length`` picked periods (days),
    read from one 400-year cycle of matching days built month by month: the same answer as
    :func:`period_dates` day by day, about twenty times faster."""
    rule, start = dates.rule, dates.start
    days = _PERIODS_PER_CYCLE["DAILY"]
    matches = bytearray(days)
    year, month, _ = civil_from_days(start)
    for index in range(year * 12 + month - 1, year * 12 + month - 1 + 4801):
        year, month0 = divmod(index, 12)
        if rule.months and month0 + 1 not in rule.months:
            continue
        first = days_from_civil(year, month0 + 1, 1)
        if rule.month_days or rule.weekdays:
            found = _month_dates(rule, year, month0 + 1, 0)
        else:
            found = list(range(first, first + days_in_month(year, month0 + 1)))
        for day in found:
            if 0 <= day - start < days:
                matches[day - start] = 1
    step = rule.interval
    return [matches[picked * step % days] for picked in range(length)]


def _raw_before(cycle: _Cycle, picked: int) -> int:
    """How many raw dates the picked periods before the ``picked``-th hold."""
    whole, rest = divmod(picked, cycle.length)
    return whole * cycle.running[-1] + cycle.running[rest]


def _raw_date(dates: DateSet, cycle: _Cycle, index: int) -> int | None:
    """The raw date number ``index`` (from 0, counted from period 0's first date)."""
    per_cycle = cycle.running[-1]
    if per_cycle == 0 or index < 0:
        return None
    whole, rest = divmod(index, per_cycle)
    slot = bisect.bisect_right(cycle.running, rest) - 1
    picked = whole * cycle.length + slot
    return period_dates(dates, picked * dates.rule.interval)[rest - cycle.running[slot]]


def last_date(dates: DateSet) -> int:
    """The last date the set may hold (``UNTIL``, ``COUNT``, 9999-12-31); below the start date
    when the set is empty."""
    return _cycle(dates).last


def first_on_or_after(dates: DateSet, day: int) -> int | None:
    """The first occurrence date on or after ``day``, or ``None``."""
    cycle = _cycle(dates)
    day = max(day, dates.start)
    if day > cycle.last:
        return None
    interval = dates.rule.interval
    picked = -(-period_of(dates, day) // interval)
    found = next((d for d in period_dates(dates, picked * interval) if d >= day), None)
    if found is None:
        found = _raw_date(dates, cycle, _raw_before(cycle, picked + 1))
    return None if found is None or found > cycle.last else found


def last_on_or_before(dates: DateSet, day: int) -> int | None:
    """The last occurrence date on or before ``day``, or ``None``."""
    cycle = _cycle(dates)
    day = min(day, cycle.last)
    if day < dates.start:
        return None
    interval = dates.rule.interval
    picked = period_of(dates, day) // interval
    found = next((d for d in reversed(period_dates(dates, picked * interval)) if d <= day), None)
    if found is None:
        found = _raw_date(dates, cycle, _raw_before(cycle, picked) - 1)
    return None if found is None or found < dates.start else found


def occurrence_index(dates: DateSet, day: int) -> int:
    """How many occurrences precede the occurrence date ``day`` (so the first has index 0)."""
    cycle = _cycle(dates)
    picked = period_of(dates, day) // dates.rule.interval
    position = period_dates(dates, picked * dates.rule.interval).index(day)
    return _raw_before(cycle, picked) + position - cycle.before_start


# -- instants ---------------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class CalendarSchedule:
    """A rule with its start date, time of day and zone: everything that places occurrences."""

    dates: DateSet
    time_of_day: int
    """Milliseconds since local midnight."""
    zone: zoneinfo.ZoneInfo


def make_schedule(
    rule: CalendarRule, start: int, time_of_day: int, zone: zoneinfo.ZoneInfo
) -> CalendarSchedule:
    """The schedule of ``rule`` from local date ``start`` at ``time_of_day`` in ``zone``."""
    return CalendarSchedule(dates=DateSet(rule, start), time_of_day=time_of_day, zone=zone)


def occurrence_on(schedule: CalendarSchedule, day: int) -> int:
    """The instant of the occurrence dated ``day`` (Rule 4); may lie past ``MAX_INSTANT``."""
    return earliest_at_or_after(schedule.zone, day * MS_PER_DAY + schedule.time_of_day)


def first_after(schedule: CalendarSchedule, instant: int) -> tuple[int, int] | None:
    """``(date, occurrence)`` of the first occurrence after ``instant``, or ``None`` (Rule 4)."""
    wall = wall_clock_at(schedule.zone, instant)
    day = first_on_or_after(
        schedule.dates, max((wall - schedule.time_of_day) // MS_PER_DAY + 1, FIRST_DAY)
    )
    while day is not None:
        occurrence = occurrence_on(schedule, day)
        if occurrence > instant:
            return day, occurrence
        day = first_on_or_after(schedule.dates, day + 1)
    return None


def next_target(schedule: CalendarSchedule, decided_at: Instant) -> Instant | None:
    """The first occurrence after ``decided_at``, or ``None`` when there is none in range."""
    found = first_after(schedule, decided_at)
    if found is None or found[1] > MAX_INSTANT:
        return None
    return Instant(found[1])


def latest_due(
    schedule: CalendarSchedule, target: Instant, decided_at: Instant
) -> tuple[Instant, int]:
    """The latest occurrence at or before ``decided_at`` (``decided_at`` ≥ ``target``, the
    record's target), and how many due occurrences since ``target`` it passes over.

    When no occurrence now lies between ``target`` and ``decided_at`` (the zone's rules changed
    after the target was computed), the target itself is the one delivered.
    """
    following = first_after(schedule, decided_at)
    bound = last_date(schedule.dates) if following is None else following[0] - 1
    last = last_on_or_before(schedule.dates, bound)
    first = first_after(schedule, target - 1)
    if first is None or last is None or last < first[0]:
        return target, 0
    skipped = occurrence_index(schedule.dates, last) - occurrence_index(schedule.dates, first[0])
    return Instant(occurrence_on(schedule, last)), skipped


def upcoming(schedule: CalendarSchedule, after: Instant, limit: int) -> list[tuple[int, Instant]]:
    """Up to ``limit`` ``(date, occurrence)`` pairs after ``after``, in order, within range."""
    found: list[tuple[int, Instant]] = []
    instant: int = after
    while len(found) < limit:
        step = first_after(schedule, instant)
        if step is None or step[1] > MAX_INSTANT:
            break
        found.append((step[0], Instant(step[1])))
        instant = step[1]
    return found


# -- records and the selector -----------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _record_schedule(rule: str, time: str, time_zone: str, start_date: str) -> CalendarSchedule:
    year, month, day = (int(part) for part in start_date.split("-"))
    return make_schedule(
        parse_rule(rule),
        days_from_civil(year, month, day),
        parse_wall_time(time),
        load_zone(time_zone),
    )


def schedule_of(record: CalendarScheduleRecord) -> CalendarSchedule:
    """The schedule a (decoded, hence well-formed) ``calendar`` record states."""
    return _record_schedule(record.rule, record.local_time, record.time_zone, record.start_date)


def next_calendar_target(record: CalendarScheduleRecord, decided_at: Instant) -> Instant | None:
    """The record's first occurrence after ``decided_at``, or ``None`` when the set is exhausted
    or its next occurrence lies past the representable range."""
    return next_target(schedule_of(record), decided_at)


def latest_calendar_due(record: CalendarScheduleRecord, decided_at: Instant) -> tuple[Instant, int]:
    """The latest occurrence at or before ``decided_at`` and the due occurrences it passes over
    since the record's target (as :func:`latest_due`)."""
    return latest_due(schedule_of(record), record_target(record), decided_at)


def calendar_rule_text(record: CalendarScheduleRecord) -> str:
    """``FREQ=MONTHLY;BYMONTHDAY=-1 at 09:00 Europe/Paris``: the rule, the time (seconds and
    milliseconds only when not zero) and the zone."""
    time = record.local_time.removesuffix(".000").removesuffix(":00")
    return f"{record.rule} at {time} {record.time_zone}"


_CALENDAR_KEYS: Final = ("rule", "time", "time_zone", "start_date")
_CALENDAR_EXAMPLE: Final = (
    "with the keys `rule`, `time` and `time_zone`, and optionally `start_date`, such as "
    '{"rule": "FREQ=MONTHLY;BYDAY=1MO", "time": "09:00", "time_zone": "Europe/Paris"}'
)
_START_DATE: Final = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", re.ASCII)


@final
@dataclass(frozen=True, slots=True)
class CalendarInput:
    """A ``calendar`` selector, checked, in canonical form, with its first target."""

    rule: str
    local_time: str
    time_zone: str
    start_date: str
    first_target: Instant


def parse_calendar(value: object, now: Instant) -> CalendarInput:
    """The ``calendar`` selector ``value`` (the JSON-decoded argument) decided at ``now``.

    Checks run in SPEC §8's order and raise :class:`ScheduleError`: ``invalid_selector`` for the
    object's shape, ``invalid_rule`` for the rule, ``invalid_time_zone`` for the zone,
    ``invalid_selector`` for a malformed time or start date, ``time_out_of_range`` when the rule
    has no occurrence after ``now`` up to the end of the representable range.
    """
    if not isinstance(value, dict):
        raise ScheduleError(
            "invalid_selector",
            f"`calendar` must be an object {_CALENDAR_EXAMPLE}, not {describe_value(value)}.",
        )
    keys = list(value)
    missing = [f"`{key}`" for key in ("rule", "time", "time_zone") if key not in keys]
    unknown = sorted(repr(key) for key in keys if key not in _CALENDAR_KEYS)
    if missing or unknown:
        fixes = []
        if missing:
            fixes.append(f"add {enumerate_names(missing)}")
        if unknown:
            fixes.append(f"remove {enumerate_names(unknown)}")
        raise ScheduleError(
            "invalid_selector",
            "the `calendar` object must have the keys `rule`, `time` and `time_zone`, and may "
            f"have `start_date`; {', and '.join(fixes)}.",
        )
    for key, example in (("time", "09:00"), ("time_zone", "Europe/Paris")):
        if not isinstance(value[key], str):
            raise ScheduleError(
                "invalid_selector",
                f"`{key}` must be a string, such as {example!r}, not {describe_value(value[key])}.",
            )
    start_text = value.get("start_date")
    if start_text is not None and not isinstance(start_text, str):
        raise ScheduleError(
            "invalid_selector",
            "`start_date` must be a date string such as '2026-12-01', or null for today in "
            f"`time_zone`, not {describe_value(start_text)}.",
        )
    rule = parse_rule(value["rule"])
    zone = load_zone(value["time_zone"])
    time_of_day = parse_wall_time(value["time"])
    if start_text is None:
        start = wall_clock_at(zone, now) // MS_PER_DAY
    else:
        start = _parse_start_date(start_text)
    schedule = make_schedule(rule, start, time_of_day, zone)
    target = next_target(schedule, now)
    if target is None:
        raise ScheduleError(
            "time_out_of_range",
            f"the rule {format_rule(rule)!r} has no occurrence after {format_instant(now)} up to "
            f"{format_instant(MAX_INSTANT)}, the latest time a reminder can have; check its "
            "parts, COUNT, UNTIL and `start_date`.",
        )
    year, month, day = civil_from_days(start)
    return CalendarInput(
        rule=format_rule(rule),
        local_time=format_time_of_day(time_of_day),
        time_zone=value["time_zone"],
        start_date=f"{year:04d}-{month:02d}-{day:02d}",
        first_target=target,
    )


def _parse_start_date(text: str) -> int:
    match = _START_DATE.fullmatch(text)
    if match is not None:
        year, month, day = (int(group) for group in match.groups())
        if year >= 1 and 1 <= month <= 12 and 1 <= day <= days_in_month(year, month):
            return days_from_civil(year, month, day)
    raise ScheduleError(
        "invalid_selector",
        f"`start_date` must be a real calendar date written YYYY-MM-DD, such as '2026-12-01', "
        f"not {text!r}.",
    )


def is_canonical_start_date(text: str) -> bool:
    """Whether ``text`` is a real date in the one form a record stores."""
    try:
        _parse_start_date(text)
    except ScheduleError:
        return False
    return True
