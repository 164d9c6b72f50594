"""Quiet hours: a daily window of a person's local time during which no reminder turn starts.

A window runs from ``start`` to ``end`` on the wall clock of ``time_zone`` every day; an ``end``
at or before ``start`` crosses midnight (``22:00`` to ``07:00``). Each edge is an occurrence of a
``daily`` rule on every weekday, so it resolves exactly as ``daily_at`` does across DST
(:mod:`session_schedule.core.daily`, Rule 1): a skipped wall time is the instant the clocks jump,
a repeated one its earlier instant. An instant is quiet when the next end comes before the next
start; a delivery due then is deferred to that end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

import msgspec

from session_schedule.core.daily import DailyRule, first_after, make_rule
from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant
from session_schedule.core.records import WEEKDAYS
from session_schedule.core.time_input import load_zone, parse_wall_time


@final
class QuietHours(msgspec.Struct, frozen=True, kw_only=True):
    """Quiet hours as a person sets them: ``QuietHours(start="22:00", end="07:00",
    time_zone="Europe/Paris")``."""

    start: str
    """The local time the window opens (``HH:MM``, ``HH:MM:SS`` or ``HH:MM:SS.sss``)."""
    end: str
    """The local time it closes; at or before ``start``, the window crosses midnight."""
    time_zone: str
    """The IANA zone of the person's wall clock."""


@final
@dataclass(frozen=True, slots=True)
class QuietWindow:
    """:class:`QuietHours`, parsed and ready for arithmetic."""

    hours: QuietHours
    opens: DailyRule
    closes: DailyRule


def quiet_window(hours: QuietHours) -> QuietWindow:
    """The window ``hours`` describe.

    Raises ``ValueError`` naming the field for a malformed time, an unknown zone, or a window
    that opens and closes at the same time.
    """
    zone_name = hours.time_zone
    try:
        zone = load_zone(zone_name)
        opens, closes = parse_wall_time(hours.start), parse_wall_time(hours.end)
    except ScheduleError as error:
        raise ValueError(f"quiet hours: {error.message}") from None
    if opens == closes:
        raise ValueError(f"quiet hours: the window opens and closes at {hours.start}; leave it out")
    return QuietWindow(
        hours=hours,
        opens=make_rule(opens, zone, WEEKDAYS),
        closes=make_rule(closes, zone, WEEKDAYS),
    )


def quiet_until(window: QuietWindow, now: Instant) -> Instant | None:
    """The end of the quiet window ``now`` falls in (after ``now``); ``None`` when ``now`` is
    not quiet, or when no edge follows it before 9999-12-31."""
    closes = first_after(window.closes, now)
    if closes is None:
        return None
    opens = first_after(window.opens, now)
    if opens is not None and opens[1] <= closes[1]:
        return None
    return Instant(closes[1])


_LOOK_BACK_MS: Final = 3 * 86_400_000
"""How far before a decision :func:`deferred_since` looks for quiet hours: a daily window
recurs within it whatever DST does, so the latest one to end is found."""


def deferred_since(window: QuietWindow, due: Instant, decided_at: Instant) -> Instant | None:
    """When the quiet hours began to defer a delivery due at ``due`` and decided at
    ``decided_at``: the later of ``due`` and the opening of the latest quiet window that ended
    after ``due`` and at or before ``decided_at``; ``None`` when no such window held it.

    A function of the instants alone (not of who watched the wait), so a delivery says the same
    however often its session was closed and opened again meanwhile.
    """
    if due >= decided_at:
        return None
    cursor = max(due, decided_at - _LOOK_BACK_MS)
    since: Instant | None = None
    if cursor == due:
        end = quiet_until(window, due)
        if end is not None and end <= decided_at:
            since = due
    while True:
        found = first_after(window.opens, cursor)
        if found is None or found[1] >= decided_at:
            return since
        opening = Instant(found[1])
        end = quiet_until(window, opening)
        if end is not None and end <= decided_at:
            since = opening
        cursor = opening


def parse_quiet_hours(text: str) -> QuietHours:
    """``22:00-07:00 Europe/Paris`` as :class:`QuietHours`, checked with :func:`quiet_window`.

    Raises ``ValueError`` with a sentence a person can act on.
    """
    window, _, zone = text.strip().partition(" ")
    start, dash, end = window.partition("-")
    if not dash or not zone.strip():
        raise ValueError(f"not START-END ZONE, such as '22:00-07:00 Europe/Paris': {text!r}")
    hours = QuietHours(start=start, end=end, time_zone=zone.strip())
    quiet_window(hours)
    return hours


def describe(hours: QuietHours) -> str:
    """``22:00 to 07:00 Europe/Paris``, as a frame and a setting show it."""
    return f"{hours.start} to {hours.end} {hours.time_zone}"
