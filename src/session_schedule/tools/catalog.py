"""The tool catalog: the four tools' names, model-facing descriptions and schemas (SPEC §5, §11).

Everything here is generated from the argument and result types; only the wording is written
by hand. A snapshot test freezes the whole catalog.
"""

from __future__ import annotations

import functools
from typing import Final, Literal, final

import msgspec

from session_schedule.core.arguments import (
    CreateArguments,
    DeleteArguments,
    ListArguments,
    UpdateArguments,
)
from session_schedule.core.records import MIN_EVERY_SECONDS
from session_schedule.core.rules import Limits
from session_schedule.tools.paging import MAX_LIST_LIMIT, MAX_PAGE_CHARS
from session_schedule.tools.results import (
    CreateResult,
    DeleteResult,
    ErrorResult,
    ListResult,
    UpdateResult,
)
from session_schedule.tools.schemas import Schema, inline_schema

ToolName = Literal["schedule_create", "schedule_list", "schedule_delete", "schedule_update"]
TOOL_NAMES: Final[tuple[ToolName, ...]] = (
    "schedule_create",
    "schedule_list",
    "schedule_delete",
    "schedule_update",
)


@final
class ToolDefinition(msgspec.Struct, frozen=True, kw_only=True):
    """One tool, independent of any model API's format."""

    name: ToolName
    description: str
    input_schema: Schema
    """A flat JSON object schema of the arguments."""
    output_schema: Schema
    """A JSON object schema of the success result."""


ERROR_SCHEMA: Final = inline_schema(ErrorResult)
"""The schema of every tool's failure result."""


def tool_definitions(limits: Limits | None = None) -> tuple[ToolDefinition, ...]:
    """The four tools, described for the given limits (the defaults when ``None``).

    Each call returns schemas of its own, which the caller may change: generating them from
    the types takes tens of milliseconds, so they are generated once per ``limits`` and each
    call decodes a copy (a fraction of a millisecond)."""
    return _DEFINITIONS.decode(_generated(limits or Limits()))


_DEFINITIONS: Final = msgspec.json.Decoder(tuple[ToolDefinition, ...])


@functools.lru_cache(maxsize=16)
def _generated(limits: Limits) -> bytes:
    """The four tools for ``limits``, generated and encoded."""
    return msgspec.json.encode(_generate(limits))


def _generate(limits: Limits) -> tuple[ToolDefinition, ...]:
    return (
        ToolDefinition(
            name="schedule_create",
            description=_CREATE.format(minimum=MIN_EVERY_SECONDS),
            input_schema=inline_schema(
                CreateArguments,
                descriptions={
                    "prompt": _PROMPT.format(limit=limits.max_prompt_chars),
                    "after_seconds": _AFTER,
                    "at": _AT,
                    "every_seconds": _EVERY.format(minimum=MIN_EVERY_SECONDS),
                    "daily_at": _DAILY_AT,
                    "calendar": _CALENDAR,
                    "ends": _ENDS,
                    "max_lateness_seconds": _LATENESS,
                },
            ),
            output_schema=inline_schema(CreateResult),
        ),
        ToolDefinition(
            name="schedule_list",
            description=_LIST,
            input_schema=inline_schema(
                ListArguments,
                descriptions={"cursor": _CURSOR, "limit": _LIMIT},
            ),
            output_schema=inline_schema(ListResult),
        ),
        ToolDefinition(
            name="schedule_delete",
            description=_DELETE,
            input_schema=inline_schema(DeleteArguments, descriptions={"id": _ID}),
            output_schema=inline_schema(DeleteResult),
        ),
        ToolDefinition(
            name="schedule_update",
            description=_UPDATE,
            input_schema=inline_schema(
                UpdateArguments,
                descriptions={
                    "id": _UPDATE_ID,
                    "prompt": _UPDATE_PROMPT.format(limit=limits.max_prompt_chars),
                    "after_seconds": _UPDATE_SELECTOR.format(name="after_seconds"),
                    "at": _UPDATE_SELECTOR.format(name="at"),
                    "every_seconds": _UPDATE_SELECTOR.format(name="every_seconds"),
                    "daily_at": _UPDATE_SELECTOR.format(name="daily_at"),
                    "calendar": _UPDATE_SELECTOR.format(name="calendar"),
                    "paused": _PAUSED,
                    "snooze": _SNOOZE,
                    "ends": _UPDATE_ENDS,
                    "max_lateness_seconds": _UPDATE_LATENESS,
                },
            ),
            output_schema=inline_schema(UpdateResult),
        ),
    )


_CREATE: Final = (
    "Set a reminder that comes back to you later in this same conversation, as a new follow-up "
    "turn carrying the prompt you write now. Give exactly one of after_seconds (once, after a "
    "delay), at (once, at an absolute time), every_seconds (repeatedly, at a fixed interval "
    "of at least {minimum} seconds, starting one interval from now: 'every 20 minutes', "
    "'every 2 hours'), daily_at (repeatedly, at a time of day in a time zone, every day or on "
    "chosen weekdays: 'every day at 9:00', 'every weekday at 18:30') or calendar (repeatedly, "
    "on the dates of a calendar rule, at a time of day in a time zone: monthly, yearly or "
    "every-few-weeks phrasings such as 'the first Monday of every month' (rule "
    "FREQ=MONTHLY;BYDAY=1MO), 'every other Friday' (FREQ=WEEKLY;INTERVAL=2;BYDAY=FR), "
    "'the last weekday of the month', 'every 1 April' (FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=1)); "
    "leave the others null. "
    "An `at` time must say which time zone it means: an RFC 3339 string with a UTC offset, or "
    "a date, time and IANA time_zone; a daily_at or calendar time always names its IANA "
    "time_zone. If the "
    "user gave a time without a zone and you do not know theirs, ask before creating the "
    "reminder. The reminder is delivered only while this "
    "conversation is live and you are idle; it never interrupts a turn. If several recurring "
    "reminders were missed, only the latest occurrence of each is delivered. To move, change, "
    "postpone, pause or snooze a reminder that already exists, call schedule_update instead: do "
    "not create a second one. Returns the "
    "stored reminder with its id and its target time in UTC (scheduledAt)."
)
_PROMPT: Final = (
    "What to do when the reminder comes back, written as an instruction to yourself "
    "(1 to {limit} characters; newlines and tabs allowed)."
)
_AFTER: Final = "Deliver once, this many seconds from now: a positive whole number. Null otherwise."
_AT: Final = (
    "Deliver once at this absolute time, which must be in the future: an RFC 3339 string with "
    "a UTC offset, such as '2026-12-01T09:00:00+09:00' or '2026-12-01T00:00:00Z', or an object "
    "{date, time, time_zone} giving a wall-clock time in an IANA zone, such as "
    '{"date": "2026-12-01", "time": "09:00", "time_zone": "Asia/Tokyo"}. A time '
    "that does not exist in the zone (skipped by a daylight-saving change) is rejected; a "
    "repeated one means its first occurrence. Null otherwise."
)
_EVERY: Final = (
    "Deliver repeatedly every this many seconds (a whole number, at least {minimum}), the first "
    "time one interval from now: 1200 for every 20 minutes. For a time of day (every day at "
    "9:00) use daily_at instead, and calendar for monthly or yearly dates. Null otherwise."
)
_DAILY_AT: Final = (
    "Deliver repeatedly at a wall-clock time in an IANA zone, every day or only on the listed "
    "weekdays, such as "
    '{"time": "09:00", "time_zone": "Asia/Tokyo", "weekdays": ["mon", "tue", "wed", "thu", '
    '"fri"]} for every weekday at 9:00 in Tokyo (weekdays null: every day). The first time is '
    "the next such moment after now. Daylight-saving changes are followed: a time the clocks "
    "skip fires when they jump forward, a repeated one fires once, at its first occurrence. For "
    "a fixed interval (every 20 minutes) use every_seconds instead; for monthly, yearly or "
    "every-other-week dates use calendar. Null otherwise."
)
_CALENDAR: Final = (
    "Deliver repeatedly on the dates an RFC 5545 RRULE names, at a wall-clock time in an IANA "
    "zone: for monthly, yearly or every-N-weeks phrasings. Such as "
    '{"rule": "FREQ=MONTHLY;BYDAY=1MO", "time": "09:00", "time_zone": "Europe/Paris"} for the '
    "first Monday of every month at 9:00 in Paris; other rules: "
    "'FREQ=WEEKLY;INTERVAL=2;BYDAY=FR' (every other Friday), "
    "'FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1' (the last weekday of the month), "
    "'FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=1' (every 1 April), 'FREQ=MONTHLY;BYMONTHDAY=-1' (the "
    "last day of the month). Parts: FREQ (DAILY, WEEKLY, MONTHLY, YEARLY), INTERVAL, BYMONTH, "
    "BYMONTHDAY, BYDAY, BYSETPOS, COUNT, UNTIL (YYYYMMDD); never a time of day in the rule. A "
    "month that lacks the named day (the 31st, a fifth Monday) has no occurrence. start_date "
    "(YYYY-MM-DD, null for today in time_zone) is where INTERVAL and COUNT count from. "
    "Daylight-saving changes are followed as for daily_at. For every day or chosen weekdays use "
    "daily_at; for a fixed interval use every_seconds. Null otherwise."
)
_LIST: Final = (
    "List the reminders still active in this conversation, soonest first: their ids, rules, "
    "prompts and target times in UTC, and whether each is still scheduled or overdue (due, "
    "and waiting for you to be idle). Also returns the current time in UTC (now). One call "
    f"returns every active reminder unless together they pass about {MAX_PAGE_CHARS} "
    "characters; then it returns them a page at a time: total counts every active reminder, "
    "and next_cursor, when not null, fetches the next page; ask for more pages only when you "
    "need the reminders on them."
)
_CURSOR: Final = (
    "null for the first page, or the next_cursor a previous schedule_list call returned."
)
_LIMIT: Final = (
    f"At most this many reminders in the page, from 1 to {MAX_LIST_LIMIT}; null (usual) for "
    f"as many as fit in one page. A page always stops before its reminders pass about "
    f"{MAX_PAGE_CHARS} characters."
)
_DELETE: Final = (
    "Delete an active reminder of this conversation by its id (such as 'sch_3', as returned by "
    "schedule_create or schedule_list). Returns deleted: false, and no error, when no active "
    "reminder has that id — for example because a one-time reminder was already delivered. To "
    "move, change, postpone or pause a reminder, use schedule_update instead of deleting and "
    "re-creating it."
)
_ENDS: Final = (
    "For a recurring reminder only: when it stops, as {until, max_runs}: until, an absolute time "
    "(an RFC 3339 string with a UTC offset, or {date, time, time_zone}) after which nothing is "
    "delivered; max_runs, how many deliveries it makes in all. Either may be null. Null: it "
    "recurs until deleted."
)
_LATENESS: Final = (
    "How many seconds late a delivery may still be (a positive whole number): a reminder that "
    "could not be delivered within this many seconds of its time (the conversation was not "
    "live, or you were busy) is skipped and recorded as missed instead. Null: deliver however "
    "late."
)
_UPDATE: Final = (
    "Change an active reminder of this conversation in place, keeping its id: use it to move, "
    "change, postpone (snooze), pause or resume a reminder, or to set when a recurring one ends, "
    "instead of deleting and re-creating it. Give the id and only the fields to change; leave "
    "every other field null. A new rule (one of after_seconds, at, every_seconds, daily_at, "
    "calendar) "
    "replaces the old one as if the reminder were created now. paused: true stops deliveries "
    "until paused: false; occurrences that fall inside a pause are not delivered. snooze moves "
    "only the next delivery (a recurring reminder then continues on its usual schedule). "
    "Returns the reminder as it now stands: its next delivery in UTC (scheduledAt), and "
    "paused, snoozedUntil, ends, runsLeft and maxLatenessSeconds where they apply."
)
_UPDATE_ID: Final = (
    "The id of the active reminder to change, such as 'sch_3', as returned by schedule_create "
    "or schedule_list."
)
_UPDATE_PROMPT: Final = (
    "A new prompt replacing the old one (1 to {limit} characters); its time does not move. "
    "Null: unchanged."
)
_UPDATE_SELECTOR: Final = (
    "A new rule, read exactly as schedule_create reads {name}, replacing the reminder's rule "
    "from now on; give at most one rule. Null: unchanged."
)
_PAUSED: Final = (
    "true pauses the reminder (it stays listed but is never delivered); false resumes it (a "
    "one-time reminder whose time passed is delivered at once, a recurring one continues from "
    "its next time). Null: unchanged."
)
_SNOOZE: Final = (
    "Postpone only the next delivery: {until} with an absolute time (an RFC 3339 string with a "
    "UTC offset, or {date, time, time_zone}), or {after_seconds} with a delay from now, such as "
    '{"after_seconds": 600} for 10 minutes; give one of the two and leave the other null. Null: '
    "no snooze."
)
_UPDATE_ENDS: Final = (
    "For a recurring reminder: a new end {until, max_runs}, replacing the old one (max_runs "
    "counts every delivery since creation); both null removes the end. Null: unchanged."
)
_UPDATE_LATENESS: Final = (
    "A new limit on how many seconds late a delivery may still be (a positive whole number); "
    "later ones are recorded as missed instead. Null: unchanged."
)
_ID: Final = "The id of the reminder to delete, such as 'sch_3'."
