"""The tool arguments a model sends, as types: the source of the tools' argument schemas.

The create, update and delete decisions read raw JSON values (so that ``300.0`` can count as an
integer and every malformation gets its own message), but the names they accept are these types'
field names, and the schemas the tools publish are generated from these types.
"""

from __future__ import annotations

from typing import Annotated, Final, TypeAlias, final

import msgspec

from session_schedule.core.records import Weekday

WallClockTime: TypeAlias = Annotated[
    str,
    msgspec.Meta(
        description="Wall-clock time, 24-hour HH:MM, HH:MM:SS or HH:MM:SS.sss, such as '09:00'."
    ),
]
TimeZoneName: TypeAlias = Annotated[
    str,
    msgspec.Meta(
        description="'UTC' or an IANA Area/Location zone name, such as 'Asia/Tokyo' or "
        "'America/New_York'."
    ),
]


@final
class LocalAt(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A wall-clock time in a named zone."""

    date: Annotated[
        str, msgspec.Meta(description="Calendar date, YYYY-MM-DD, such as '2026-12-01'.")
    ]
    time: WallClockTime
    time_zone: TimeZoneName


@final
class DailyAt(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A wall-clock time in a named zone, every day or on listed days of the week."""

    time: WallClockTime
    time_zone: TimeZoneName
    weekdays: Annotated[
        list[Weekday] | None,
        msgspec.Meta(
            description="The days of the week, each at most once, such as ['mon', 'tue', 'wed', "
            "'thu', 'fri'] for weekdays; null for every day."
        ),
    ] = None


@final
class CalendarAt(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A calendar rule at a wall-clock time in a named zone (SPEC §12)."""

    rule: Annotated[
        str,
        msgspec.Meta(
            description="An RFC 5545 RRULE subset, upper case, parts separated by ';': FREQ "
            "(DAILY, WEEKLY, MONTHLY or YEARLY), INTERVAL, BYMONTH, BYMONTHDAY, BYDAY, BYSETPOS, "
            "COUNT, UNTIL (YYYYMMDD). Such as 'FREQ=MONTHLY;BYDAY=1MO' (the first Monday of every "
            "month), 'FREQ=WEEKLY;INTERVAL=2;BYDAY=FR' (every other Friday) or "
            "'FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=1' (every 1 April). No time of day in the rule."
        ),
    ]
    time: WallClockTime
    time_zone: TimeZoneName
    start_date: Annotated[
        str | None,
        msgspec.Meta(
            description="The local date YYYY-MM-DD the rule counts from (INTERVAL, COUNT); "
            "null for today in time_zone."
        ),
    ] = None


@final
class EndsArguments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """When a recurring reminder ends: after an instant, after a number of deliveries, or both."""

    until: str | LocalAt | None = None
    max_runs: int | None = None


@final
class SnoozeArguments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where a snooze moves the next delivery: to an instant, or a delay from now."""

    until: str | LocalAt | None = None
    after_seconds: int | None = None


@final
class CreateArguments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``schedule_create``: a prompt, exactly one of the selectors, and optionally when a
    recurring reminder ends and how late a delivery may be."""

    prompt: str
    after_seconds: int | None = None
    at: str | LocalAt | None = None
    every_seconds: int | None = None
    daily_at: DailyAt | None = None
    calendar: CalendarAt | None = None
    ends: EndsArguments | None = None
    max_lateness_seconds: int | None = None


@final
class UpdateArguments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``schedule_update``: the id of an active reminder, then what to change (null: unchanged)."""

    id: str
    prompt: str | None = None
    after_seconds: int | None = None
    at: str | LocalAt | None = None
    every_seconds: int | None = None
    daily_at: DailyAt | None = None
    calendar: CalendarAt | None = None
    paused: bool | None = None
    snooze: SnoozeArguments | None = None
    ends: EndsArguments | None = None
    max_lateness_seconds: int | None = None


@final
class DeleteArguments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``schedule_delete``: the id of an active reminder."""

    id: str


@final
class ListArguments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``schedule_list``: which page of the active reminders (both null: the first, holding
    every reminder that fits the page's character budget)."""

    cursor: str | None = None
    limit: int | None = None


def field_names(arguments: type[msgspec.Struct]) -> tuple[str, ...]:
    return tuple(field.encode_name for field in msgspec.structs.fields(arguments))


OPTIONS: Final = ("ends", "max_lateness_seconds")
"""The create arguments that apply to any rule (SPEC §11)."""
SELECTORS: Final = tuple(name for name in field_names(CreateArguments)[1:] if name not in OPTIONS)
"""``after_seconds``, ``at``, ``every_seconds``, ``daily_at``, ``calendar``: the fields after
``prompt`` that choose the rule."""
