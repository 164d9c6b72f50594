"""The exact text of a reminder's follow-up turn (SPEC §7, §8 "Framing").

The documentation (docs/concepts/delivery.md) prints this text word for word from a live
Schedule, so it cannot drift. Every line of the frame is produced here; the only text that
comes from outside is each reminder's prompt, which is embedded as a JSON string literal on a
single line. JSON escaping turns quotes, backslashes, newlines and tabs into escape
sequences, and every hidden character (:mod:`session_schedule.core.visible`: the other line
breaks, format and bidi characters, tag characters, variation selectors outside emoji, …) is
escaped too, so no prompt can end its own line, imitate a line of the frame or carry text a
person cannot see.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, assert_never, final

import msgspec

from session_schedule.core.calendar import calendar_rule_text
from session_schedule.core.due import Delivery, End, Occurrence
from session_schedule.core.instants import Instant, format_instant
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    ScheduleRecord,
    is_recurring,
)
from session_schedule.core.standing import no_delivery_after
from session_schedule.core.visible import frame_escape

FRAME_TITLE: Final = "[session-schedule] Reminder follow-up"
DEFAULT_MAX_FRAME_CHARS: Final = 20_000
"""A batch frame shows prompts in full while it stays within this many characters."""
_KEY_LABEL: Final = "occurrence key: "
_RECURSION_NOTE: Final = (
    " A prompt's words about when or how often are context, not a request to create another "
    "reminder."
)

_ONE_SHOT_INTRO: Final = (
    "A reminder you scheduled earlier in this conversation is due. Act on its prompt now; "
    "it will not be delivered again." + _RECURSION_NOTE
)


def _batch_intro(count: int, *, bounded: bool) -> str:
    until = (
        "until it is deleted or reaches the end its ends line gives"
        if bounded
        else "until it is deleted"
    )
    return (
        f"Recurring reminders you scheduled earlier in this conversation are due ({count}). "
        f"Act on each prompt now; each keeps recurring {until}." + _RECURSION_NOTE
    )


@final
class Delay(msgspec.Struct, frozen=True, kw_only=True):
    """Why a follow-up turn was held back: the Session's budget of reminder follow-ups."""

    since: Instant
    """When the turn was first held back."""
    limit: int
    """The most reminder follow-ups a Session may have ..."""
    window_seconds: int
    """... within any window of this many seconds."""


@final
class Deferral(msgspec.Struct, frozen=True, kw_only=True):
    """Why a follow-up turn waited: it came due during the person's quiet hours."""

    since: Instant
    """When it was first deferred."""
    hours: str
    """The quiet hours, as ``22:00 to 07:00 Europe/Paris``."""


def frame(
    delivery: Delivery,
    *,
    delay: Delay | None = None,
    deferral: Deferral | None = None,
    max_chars: int = DEFAULT_MAX_FRAME_CHARS,
    set_during: Mapping[str, str] | None = None,
) -> str:
    """The follow-up turn's text for ``delivery``; ``delay`` when the turn was held back by the
    follow-up budget, ``deferral`` when quiet hours deferred it. ``set_during`` maps the id of
    a reminder that an earlier reminder turn created to that turn (``reminder sch_1@…``); its
    block then says so, so the model can tell it from one the user asked for.

    A batch shows its reminders' prompts in order while the frame, with the next prompt, stays
    within ``max_chars``; from the first that would not fit on, each reminder is listed with its
    id, rule and occurrence but without its prompt, and the frame tells the model to read those
    with ``schedule_list`` (recurring reminders stay active). A one-shot always shows its prompt:
    once delivered it is no longer listed, and its length is bounded by the prompt limit.
    """
    count = len(delivery.occurrences)
    bounded = any(occurrence.end is not None for occurrence in delivery.occurrences)
    intro = _ONE_SHOT_INTRO if delivery.kind == "one-shot" else _batch_intro(count, bounded=bounded)
    lines = [
        FRAME_TITLE,
        intro,
        "All times are UTC.",
        f"decided at: {format_instant(delivery.decided_at)}",
    ]
    if delay is not None:
        lines.append(
            f"delayed since: {format_instant(delay.since)}, because this session had "
            f"{delay.limit} reminder follow-ups within {_seconds(delay.window_seconds)}, the "
            "most it allows. Do not create a reminder from a follow-up just to be called again; "
            "re-create one only if the user asked for it to repeat."
        )
    if deferral is not None:
        lines.append(
            f"deferred since: {format_instant(deferral.since)}, by the user's quiet hours "
            f"({deferral.hours}), which have just ended."
        )
    blocks: list[list[str]] = []
    size = len("\n".join(lines))
    hidden = 0
    for number, occurrence in enumerate(delivery.occurrences, start=1):
        made = None if set_during is None else set_during.get(occurrence.record.id)
        block = _describe(number, count, occurrence, show_prompt=not hidden, set_during=made)
        block_size = sum(len(line) + 1 for line in block) + 1
        if delivery.kind == "batch" and not hidden and size + block_size > max_chars:
            block = _describe(number, count, occurrence, show_prompt=False, set_during=made)
        if block[-1] == _NOT_SHOWN:
            hidden += 1
        else:
            size += block_size
        blocks.append(block)
    if hidden:
        lines.append(
            f"prompts not shown: {hidden} of {count}, to keep this turn within {max_chars} "
            "characters; call schedule_list to read them (they are still active)."
        )
    for block in blocks:
        lines.append("")
        lines.extend(block)
    return "\n".join(lines)


_NOT_SHOWN: Final = "prompt: not shown; call schedule_list to read it"


def _describe(
    number: int,
    count: int,
    occurrence: Occurrence,
    *,
    show_prompt: bool,
    set_during: str | None = None,
) -> list[str]:
    record = occurrence.record
    lines = [
        f"reminder {number} of {count}: {record.id}",
        f"kind: {kind_text(record)}",
        f"due at: {format_instant(occurrence.due_at)}",
    ]
    if occurrence.snoozed_from is not None:
        lines.append(f"snoozed from: {format_instant(occurrence.snoozed_from)}")
    if is_recurring(record):
        lines.append(f"skipped occurrences: {occurrence.skipped}")
    if occurrence.end is not None:
        lines.append(f"ends: {ends_text(occurrence.end)}")
    if set_during is not None:
        lines.append(f"set during: {set_during}, not by the user")
    lines.extend(
        [
            f"{_KEY_LABEL}{occurrence.key}",
            f"prompt: {embed_prompt(record.prompt)}" if show_prompt else _NOT_SHOWN,
        ]
    )
    return lines


def kind_text(record: ScheduleRecord) -> str:
    """What the ``kind:`` line of a frame says about ``record``: its kind and rule, such as
    ``after (60 seconds after it was set)`` or ``daily (09:00 Europe/Paris, mon tue)``."""
    match record:
        case AfterScheduleRecord():
            return f"after ({_seconds(record.after_seconds)} after it was set)"
        case AtScheduleRecord():
            return "at (a fixed time)"
        case EveryScheduleRecord():
            return f"every ({_seconds(record.every_seconds)})"
        case DailyScheduleRecord():
            return f"daily ({daily_rule_text(record)})"
        case CalendarScheduleRecord():
            return f"calendar ({calendar_rule_text(record)})"
        case _:
            assert_never(record)


def ends_text(end: End) -> str:
    """What the ``ends:`` line of a bounded reminder's frame says (SPEC §11): that this delivery
    is its last, or what is left after it."""
    if end.last:
        return "this is its last delivery; it will not be delivered again"
    words = []
    if end.runs_left is not None:
        words.append(f"after {end.runs_left} more run{'' if end.runs_left == 1 else 's'}")
    if end.until is not None:
        words.append(no_delivery_after(end.until))
    return "; ".join(words)


def daily_rule_text(record: DailyScheduleRecord) -> str:
    """``09:00 Asia/Tokyo, mon tue wed thu fri``: the time (seconds and milliseconds only when
    not zero), the zone and the listed weekdays."""
    return f"{short_time(record.local_time)} {record.time_zone}, {' '.join(record.weekdays)}"


def short_time(canonical: str) -> str:
    """``HH:MM:SS.sss`` shortened to ``HH:MM`` or ``HH:MM:SS`` when the rest is zero."""
    return canonical.removesuffix(".000").removesuffix(":00")


def occurrence_keys(text: str) -> tuple[str, ...]:
    """The occurrence keys a frame names, in order; ``()`` when ``text`` is not a frame.

    Only the frame's own lines can start with ``occurrence key:`` (a prompt is one escaped line
    that starts with ``prompt:``), so this reads back exactly the keys :func:`frame` wrote.
    """
    lines = text.split("\n")
    if lines[0] != FRAME_TITLE:
        return ()
    return tuple(line.removeprefix(_KEY_LABEL) for line in lines[1:] if line.startswith(_KEY_LABEL))


def _seconds(count: int) -> str:
    return "1 second" if count == 1 else f"{count} seconds"


def embed_prompt(prompt: str) -> str:
    """``prompt`` as a one-line JSON string literal that cannot forge a line of the frame and
    shows every hidden character as an escape; it decodes back to ``prompt`` exactly."""
    return frame_escape(msgspec.json.encode(prompt).decode())
