"""``session-schedule history SESSION [ID]``: what became of each occurrence of each reminder.

It only reads (a snapshot with ``store.read``, as the other operator commands), so it works
while a chat or a host has the session open. The outcomes are derived from the log
(:mod:`session_schedule.session.history`): ``delivered``, ``failed`` (with its cause),
``pending``, ``deleted``; occurrences a catch-up passed over are counted as ``skipped`` on the
delivery that covered them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Final, final

import msgspec

from session_schedule.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    add_command,
    add_json_flag,
    add_session_argument,
    fail,
    read_session,
)
from session_schedule.cli.render import Table, Text, output, print_json, untrusted
from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleCreateChange
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.ids import parse_schedule_id
from session_schedule.core.instants import MS_PER_SECOND, Instant, format_instant
from session_schedule.core.records import record_target
from session_schedule.session import LogEntry
from session_schedule.session.history import HistoryRow, history_row, occurrence_history
from session_schedule.session.provenance import made_by_reminders

DESCRIPTION: Final = (
    "Every occurrence of the session's reminders (or of reminder ID), in the order the log "
    "records them: when it was due, when its delivery was decided, its outcome — delivered, "
    "failed (after retries; the cause is shown), pending (its turn has not finished), missed "
    "(decided later than its max_lateness_seconds allowed), deleted (before it was delivered) "
    "— how late it was and how many earlier occurrences a catch-up delivery covered (skipped). "
    "A one-shot's decision time is when its turn was queued: one taken through the MCP server "
    "(schedule_followups_take), which queues no turn, shows none and no lateness (-). "
    "Read from the log alone, while the session may be open elsewhere."
)
EXAMPLE: Final = "session-schedule history s_7k2m4q9x3v5b sch_2 --json"
_OUTCOME_STYLES: Final = {
    "delivered": "green",
    "failed": "bold red",
    "pending": "yellow",
    "deleted": "dim",
    "missed": "red",
    "skipped": "dim",
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``history`` to the program's subcommands."""
    parser = add_command(commands, "history", run, description=DESCRIPTION, example=EXAMPLE)
    add_session_argument(parser, "the session id (s_ and 12 characters)")
    parser.add_argument(
        "id",
        metavar="ID",
        nargs="?",
        help="only this reminder's occurrences (sch_N); an id no create in the session's log "
        "made is a usage error",
    )
    add_json_flag(parser)


@final
class HistoryResult(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    session: str
    occurrences: list[HistoryRow]


def run(arguments: argparse.Namespace) -> int:
    schedule_id: str | None = arguments.id
    if schedule_id is not None and parse_schedule_id(schedule_id) is None:
        return fail(f"{schedule_id!r} is not a reminder id like sch_1", EXIT_USAGE)
    header, entries = read_session(arguments, arguments.session)
    if schedule_id is not None and not _created(entries, schedule_id):
        # A mistyped id would otherwise read as a reminder that never fired.
        return fail(
            f"session {header.id} never had a reminder {schedule_id}; check the reminder id",
            EXIT_USAGE,
        )
    runs = occurrence_history(entries, seed_length=header.seed_length, session=header.id)
    if schedule_id is not None:
        runs = [item for item in runs if item.schedule_id == schedule_id]
    made = made_by_reminders(entries, seed_length=header.seed_length)
    result = HistoryResult(
        ok=True,
        session=header.id,
        occurrences=[history_row(item, set_during=made.get(item.schedule_id)) for item in runs],
    )
    if arguments.json:
        print_json(result)
        return EXIT_OK
    with output() as console:
        count = len(runs)
        which = f" of {schedule_id}" if schedule_id is not None else ""
        console.print(
            Text(f"session {header.id}: {count} occurrence{'' if count == 1 else 's'}{which}")
        )
        if not runs:
            return EXIT_OK
        table = Table("id", "due (UTC)", "decided (UTC)", "outcome", "late", "skipped", "detail")
        for row in result.occurrences:
            detail = row.failure or ""
            if row.attempts is not None and row.attempts > 1:
                detail = f"{row.attempts} attempts" + (f"; {detail}" if detail else "")
            if row.set_during is not None:
                detail = f"set during {row.set_during}" + (f"; {detail}" if detail else "")
            table.add_row(
                Text(row.id),
                Text(row.due_at),
                Text(row.decided_at or "-"),
                Text(row.outcome, style=_OUTCOME_STYLES.get(row.outcome, "")),
                Text("-" if row.lateness_seconds is None else _duration(row.lateness_seconds)),
                Text(str(row.skipped)),
                untrusted(detail),
            )
        console.print(table)
    return EXIT_OK


def _created(entries: Sequence[LogEntry], schedule_id: str) -> bool:
    """Whether a create in ``entries`` (inherited ones included) made reminder ``schedule_id``."""
    return any(
        entry.type == CHANGE_EVENT_TYPE
        and isinstance(entry.payload, ScheduleCreateChange)
        and entry.payload.schedule.id == schedule_id
        for entry in entries
    )


def overdue_lines(state: ScheduleFold, now: Instant, seconds: float) -> list[str]:
    """One line per active reminder more than ``seconds`` overdue at ``now`` (``check
    --overdue``), most overdue first. A paused reminder is never due (SPEC §11): never
    overdue."""
    limit = now - seconds * MS_PER_SECOND
    late = sorted(
        (record_target(record), record.id)
        for record in state.ordered()
        if record_target(record) < limit and not state.status(record.id).paused
    )
    return [
        f"reminder {schedule_id} is overdue by {_duration((now - target) / MS_PER_SECOND)} "
        f"(due {format_instant(target)}), more than {seconds:g} s"
        for target, schedule_id in late
    ]


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86_400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} d"
