"""The note that tells the model what an earlier attempt of its turn already did to the schedule.

A turn can run more than once: a failed attempt is retried, and a turn a crash cut short runs
again when its session is next opened. What the attempt said is dropped, but the tool calls it
made took effect — a reminder it created exists. An adapter whose conversation keeps no trace of
an unfinished attempt would let the model create that reminder again; so every model request of
such an attempt carries :func:`rerun_note`, after the time context: which changes the earlier
attempts made (read from the log, :func:`~session_schedule.session.provenance.changes_during`),
and that they are not to be made again.

The text is what the model reads (SPEC §7): the adapters guide prints it word for word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, assert_never

from session_schedule.core.changes import (
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
    ScheduleMissChange,
    SchedulePauseChange,
    ScheduleResumeChange,
    ScheduleSnoozeChange,
    ScheduleUpdateChange,
)
from session_schedule.core.framing import embed_prompt, kind_text
from session_schedule.core.records import ScheduleRecord

RERUN_INTRO: Final = (
    "Note: this turn is running again after an interrupted attempt, which already changed the "
    "schedule:"
)
RERUN_ADVICE: Final = (
    "These changes are in effect: do not make them again (do not create those reminders "
    "again). Call schedule_list to see the reminders as they stand."
)
MAX_NOTED_CHANGES: Final = 20
"""How many changes the note lists; the others are counted on one line."""


def rerun_note(changes: Sequence[ScheduleChange]) -> str | None:
    """The note for an attempt of a turn whose earlier attempts made ``changes`` (in log
    order), or ``None`` when they made none. Dispatches and misses are Schedule's own, not the
    turn's, and are not listed."""
    lines = [line for change in changes if (line := _line(change)) is not None]
    if not lines:
        return None
    shown = lines[:MAX_NOTED_CHANGES]
    if len(lines) > len(shown):
        more = len(lines) - len(shown)
        shown.append(f"- and {more} more change{'' if more == 1 else 's'}")
    return "\n".join([RERUN_INTRO, *shown, RERUN_ADVICE])


def _line(change: ScheduleChange) -> str | None:
    match change:
        case ScheduleCreateChange(schedule=record):
            return f"- created {record.id} ({_described(record)})"
        case ScheduleUpdateChange(schedule=record):
            return f"- updated {record.id} (now {_described(record)})"
        case ScheduleDeleteChange():
            return f"- deleted {change.id}"
        case SchedulePauseChange():
            return f"- paused {change.id}"
        case ScheduleResumeChange():
            return f"- resumed {change.id}"
        case ScheduleSnoozeChange():
            return f"- snoozed {change.id} until {change.until}"
        case ScheduleDispatchChange() | ScheduleMissChange():
            return None
        case _:
            assert_never(change)


def _described(record: ScheduleRecord) -> str:
    """``"stretch"; after (60 seconds after it was set), due at …``: the prompt as the frame
    embeds it (one escaped line), the kind and the target."""
    return f"{embed_prompt(record.prompt)}; {kind_text(record)}, due at {record.scheduled_at}"
