"""``session-schedule resolve``: show the canonical UTC target an ``at`` input names, or the next
occurrences of a ``daily_at`` or ``calendar`` input."""

from __future__ import annotations

import argparse
from typing import Final

from session_schedule.cli.common import EXIT_OK, EXIT_REJECTED
from session_schedule.core.calendar import make_schedule, parse_calendar, parse_rule, upcoming
from session_schedule.core.daily import (
    first_after,
    listed_from,
    make_rule,
    occurrence_on,
    weekday_of,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.framing import short_time
from session_schedule.core.instants import (
    MAX_INSTANT,
    MIN_INSTANT,
    Instant,
    civil_from_days,
    days_from_civil,
    format_instant,
)
from session_schedule.core.records import WEEKDAYS
from session_schedule.core.time_input import (
    format_local,
    load_zone,
    parse_at,
    parse_daily_at,
    parse_rfc3339,
    parse_wall_time,
)

LOCAL_FORM_HELP = "DATE TIME ZONE, e.g. '2026-12-01 09:00 Asia/Tokyo'"
DAILY_FORM_HELP = "daily TIME ZONE [DAYS], e.g. 'daily 09:00 Asia/Tokyo mon,wed,fri'"
CALENDAR_FORM_HELP = (
    "calendar RULE TIME ZONE [START], e.g. 'calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris'"
)
OCCURRENCES_SHOWN: Final = 5


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``resolve`` to the program's subcommands."""
    parser = commands.add_parser(
        "resolve",
        help="resolve `at`, `daily_at` and `calendar` inputs to UTC, or show the error a model "
        "would get",
        description="Resolve `at`, `daily_at` and `calendar` inputs exactly as schedule_create "
        "does. Each input is an RFC 3339 string with an offset, the local form "
        + LOCAL_FORM_HELP
        + ", "
        + DAILY_FORM_HELP
        + ", or "
        + CALENDAR_FORM_HELP
        + f" (of the last two, the next {OCCURRENCES_SHOWN} occurrences, with their offsets).",
        epilog="example: session-schedule resolve '2026-12-01T09:00:00+09:00' "
        "'2027-03-14 02:30 America/New_York' 'daily 02:30 America/New_York' "
        "'calendar FREQ=MONTHLY;BYDAY=-1FR 18:00 Europe/London'",
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT")
    parser.add_argument(
        "--after",
        metavar="TIME",
        help="list daily and calendar occurrences after this RFC 3339 time (default: now)",
    )
    parser.set_defaults(handler=_resolve)


def _resolve(arguments: argparse.Namespace) -> int:
    if arguments.after is not None:
        after = parse_rfc3339(arguments.after)
    elif any(text.split()[:1] in (["daily"], ["calendar"]) for text in arguments.inputs):
        # Only a daily or calendar input needs "now"; the clock's module imports asyncio, which
        # `at` inputs can start without.
        from session_schedule.runtime.clock import SystemClock  # noqa: PLC0415

        after = SystemClock().now()
    else:
        after = MIN_INSTANT  # only daily and calendar inputs read it, and there is none
    results = [resolve(text, after=after) for text in arguments.inputs]
    for _, line in results:
        print(line)
    return EXIT_OK if all(ok for ok, _ in results) else EXIT_REJECTED


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
    of a ``daily`` or ``calendar`` input, or the error a model would get."""
    words = text.split()
    if words[:1] == ["daily"]:
        return _daily(text, words[1:], after)
    if words[:1] == ["calendar"]:
        return _calendar(text, words[1:], after)
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


def calendar_argument(words: list[str]) -> dict[str, object]:
    """The ``calendar`` value of ``calendar RULE TIME ZONE [START]`` (``words`` without
    ``calendar``). Missing words are missing keys, so the tool's own message names them."""
    selector: dict[str, object] = dict(
        zip(("rule", "time", "time_zone", "start_date"), words, strict=False)
    )
    return selector


def _calendar(text: str, words: list[str], after: Instant) -> tuple[bool, str]:
    if len(words) > 4:
        return False, f"{text}  ->  write it as {CALENDAR_FORM_HELP}"
    try:
        found = parse_calendar(calendar_argument(words), after)
    except ScheduleError as error:
        return False, f"{text}  ->  {error.code}: {error.message}"
    zone = load_zone(found.time_zone)
    year, month, date = (int(part) for part in found.start_date.split("-"))
    schedule = make_schedule(
        parse_rule(found.rule),
        days_from_civil(year, month, date),
        parse_wall_time(found.local_time),
        zone,
    )
    heading = (
        f"{text}  ->  {found.rule} from {found.start_date}, the next {OCCURRENCES_SHOWN} after "
        f"{format_instant(after)}:"
    )
    lines = [heading]
    for day, occurrence in upcoming(schedule, after, OCCURRENCES_SHOWN):
        local = format_local(occurrence, zone)
        line = f"  {WEEKDAYS[weekday_of(day)]} {local}  =  {format_instant(occurrence)}"
        year, month, date = civil_from_days(day)
        if not local.startswith(f"{year:04d}-{month:02d}-{date:02d}T{found.local_time}"):
            line += f"  ({year:04d}-{month:02d}-{date:02d} has no {short_time(found.local_time)}"
            line += ": the clocks jump)"
        lines.append(line)
    return True, "\n".join(lines)
