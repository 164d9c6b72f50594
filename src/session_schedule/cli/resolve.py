"""``session-schedule resolve``: show the canonical UTC target an ``at`` input names, or the next
occurrences of a ``daily_at`` input."""

from __future__ import annotations

from typing import Final

from session_schedule.core.daily import (
    first_after,
    listed_from,
    make_rule,
    occurrence_on,
    weekday_of,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.framing import short_time
from session_schedule.core.instants import MAX_INSTANT, Instant, civil_from_days, format_instant
from session_schedule.core.records import WEEKDAYS
from session_schedule.core.time_input import (
    format_local,
    load_zone,
    parse_at,
    parse_daily_at,
)

LOCAL_FORM_HELP = "DATE TIME ZONE, e.g. '2026-12-01 09:00 Asia/Tokyo'"
DAILY_FORM_HELP = "daily TIME ZONE [DAYS], e.g. 'daily 09:00 Asia/Tokyo mon,wed,fri'"
OCCURRENCES_SHOWN: Final = 5


def at_argument(text: str) -> object:
    """The ``at`` value a command-line input stands for.

    Three space-separated words are the local form ``{date, time, time_zone}``; anything else is
    passed on as the RFC 3339 string form.
    """
    words = text.split()
    if len(words) == 3:
        return {"date": words[0], "time": words[1], "time_zone": words[2]}
    return text


def daily_argument(words: list[str]) -> dict[str, object]:
    """The ``daily_at`` value of ``daily TIME ZONE [DAYS]`` (``words`` without ``daily``).

    Missing words are missing keys, so the tool's own message names them.
    """
    selector: dict[str, object] = dict(zip(("time", "time_zone"), words, strict=False))
    if len(words) > 2:
        selector["weekdays"] = words[2].split(",")
    return selector


def resolve(text: str, *, after: Instant) -> tuple[bool, str]:
    """(ok, text) for one input: its canonical UTC target, the next occurrences after ``after``
    of a ``daily`` input, or the error a model would get."""
    words = text.split()
    if words[:1] == ["daily"]:
        return _daily(text, words[1:], after)
    try:
        instant = parse_at(at_argument(text))
    except ScheduleError as error:
        return False, f"{text}  ->  {error.code}: {error.message}"
    return True, f"{text}  ->  {format_instant(instant)}"


def _daily(text: str, words: list[str], after: Instant) -> tuple[bool, str]:
    if len(words) > 3:
        return False, f"{text}  ->  write it as {DAILY_FORM_HELP}"
    try:
        daily = parse_daily_at(daily_argument(words))
    except ScheduleError as error:
        return False, f"{text}  ->  {error.code}: {error.message}"
    zone = load_zone(daily.time_zone)
    rule = make_rule(daily.time_of_day, zone, daily.weekdays)
    lines = [f"{text}  ->  the next {OCCURRENCES_SHOWN} after {format_instant(after)}:"]
    found = first_after(rule, after)
    day = None if found is None else found[0]
    while day is not None and len(lines) <= OCCURRENCES_SHOWN:
        occurrence = occurrence_on(rule, day)
        if occurrence > MAX_INSTANT:
            break
        local = format_local(Instant(occurrence), zone)
        line = f"  {WEEKDAYS[weekday_of(day)]} {local}  =  {format_instant(Instant(occurrence))}"
        year, month, date = civil_from_days(day)
        if not local.startswith(f"{year:04d}-{month:02d}-{date:02d}T{daily.local_time}"):
            line += f"  ({year:04d}-{month:02d}-{date:02d} has no {short_time(daily.local_time)}"
            line += ": the clocks jump)"
        lines.append(line)
        day = listed_from(rule, day + 1)
    return True, "\n".join(lines)
