"""``session-schedule resolve``: show the canonical UTC target an ``at`` input names."""

from __future__ import annotations

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import format_instant
from session_schedule.core.time_input import parse_at

LOCAL_FORM_HELP = "DATE TIME ZONE, e.g. '2026-12-01 09:00 Asia/Tokyo'"


def at_argument(text: str) -> object:
    """The ``at`` value a command-line input stands for.

    Three space-separated words are the local form ``{date, time, time_zone}``; anything else is
    passed on as the RFC 3339 string form.
    """
    words = text.split()
    if len(words) == 3:
        return {"date": words[0], "time": words[1], "time_zone": words[2]}
    return text


def resolve(text: str) -> tuple[bool, str]:
    """(ok, line) for one input: its canonical UTC target, or the error a model would get."""
    try:
        instant = parse_at(at_argument(text))
    except ScheduleError as error:
        return False, f"{text}  ->  {error.code}: {error.message}"
    return True, f"{text}  ->  {format_instant(instant)}"
