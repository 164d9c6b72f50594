"""``session-schedule show SESSION``: a session's transcript and schedule events, in order.

Each turn is shown with its time, role and origin (follow-up turns queued by Schedule are
marked), each schedule change on one line with what the fold made of it: a recurring reminder's
next target after a dispatch or a miss, or why it ended (its last run under ``ends.max_runs``, no
occurrence left up to ``ends.until``, none before year 10000); a one-shot's end, with what became
of its delivery as the occurrence history reads it (delivered, failed with its cause, its turn not
finished yet, missed); a create, update, pause, resume or snooze made during a reminder turn ends
``; set during reminder sch_1@…``, as the reminder's ``setDuring`` names that turn
(:mod:`session_schedule.session.provenance`). A fork's inherited entries are marked. A change the
fold rejects is marked where it stands, and the command exits 5 after showing every entry.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Mapping, Sequence
from typing import Final, assert_never, final

import msgspec

from session_schedule.cli.common import (
    EXIT_OK,
    add_command,
    add_session_argument,
    exit_code_for,
    fail,
)
from session_schedule.cli.reading import read_snapshot
from session_schedule.cli.render import Cell, Group, Table, Text, output, rule_text, untrusted
from session_schedule.core.changes import (
    CHANGE_CLASSES,
    CHANGE_EVENT_TYPE,
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
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.records import (
    RECURRING_RECORDS,
    RecordStatus,
    ScheduleRecord,
    record_ends,
    record_max_lateness,
)
from session_schedule.core.standing import LAST_RUN, NO_LATER_TARGET, no_occurrence_left
from session_schedule.session import MESSAGE_ENTRY_TYPE, LogEntry, MessageEntry, SessionHeader
from session_schedule.session.history import OccurrenceLog, OccurrenceRun, describe_failure
from session_schedule.session.provenance import SETTING_CHANGES, Provenance, ProvenanceLog
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    TurnFinished,
    TurnQueued,
)

_JSON: Final = msgspec.json.Encoder()


DESCRIPTION: Final = (
    "Every entry of a session in order: each turn with its time, role and origin "
    "(follow-up turns queued by Schedule are marked), and a one-line summary of each "
    "schedule change: after a dispatch or a miss, a recurring reminder's next target or why it "
    "ended (its last run under ends.max_runs, no occurrence left up to ends.until), a "
    "one-shot's end with what became of it (delivered, failed with its cause, its turn not "
    "finished, missed), and the reminder turn a create, update, pause, resume or snooze was made "
    "during. A fork's inherited entries are marked. Exits 5 when a schedule change "
    "breaks the fold's rules, after showing the entries."
)
EXAMPLE: Final = "session-schedule show s_7k2m4q9x3v5b"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``show`` to the program's subcommands."""
    parser = add_command(commands, "show", run, description=DESCRIPTION, example=EXAMPLE)
    add_session_argument(parser)


def run(arguments: argparse.Namespace) -> int:
    snapshot = read_snapshot(arguments)
    header = snapshot.header
    replay = _Replay(header, _dispatch_runs(header, snapshot.entries))
    table = Table("#", "time (UTC)", "entry")
    for entry in snapshot.entries:
        time, body = replay.describe(entry)
        inherited = entry.position < header.seed_length
        table.add_row(Text(str(entry.position), style="dim" if inherited else ""), time, body)
    with output() as console:
        console.print(
            Text.assemble(
                "session ",
                (header.id, "bold"),
                f", created {header.created_at}, {len(snapshot.entries)} entries",
            )
        )
        if header.parent_id is not None:
            console.print(
                Text(
                    f"forked from {header.parent_id}: entries before {header.seed_length} are "
                    "inherited history; none of the parent's reminders are active here",
                    style="dim",
                )
            )
        console.print(table if snapshot.entries else Text("no entries", style="dim"))
        if replay.problem is None:
            count = len(replay.state)
            console.print(
                Text(f"{count} active reminder{'' if count == 1 else 's'} after the last entry")
            )
    if replay.problem is not None:
        return fail(str(replay.problem), exit_code_for(replay.problem))
    return EXIT_OK


@final
class _Replay:
    """Describes a session's entries in order, folding its schedule changes along the way.

    The fold says what each change did (an Every dispatch's next target, for instance). The
    first change the fold rejects is kept in ``problem`` and marked; later changes are still
    described, but no longer folded.
    """

    def __init__(self, header: SessionHeader, runs: Mapping[int, OccurrenceRun]) -> None:
        self.state = ScheduleFold(session=header.id)
        self.problem: ScheduleError | None = None
        self._seed_length = header.seed_length
        self._runs = runs
        # The turn in progress at each entry, to say which reminder turn made a change.
        self._provenance = ProvenanceLog(seed_length=header.seed_length)
        # Every record ever created, inherited ones included, as its latest create or update
        # wrote it, to name a change's kind.
        self._records: dict[ScheduleId, ScheduleRecord] = {}

    def describe(self, entry: LogEntry) -> tuple[Text, Cell]:
        """The entry's time (blank when it has none) and what it says or did."""
        prefix = Text("inherited · ", style="dim italic")
        if entry.position >= self._seed_length:
            prefix = Text()
        payload = entry.payload
        turn = self._provenance.current()
        self._provenance.feed((entry,))
        if entry.type == MESSAGE_ENTRY_TYPE and isinstance(payload, MessageEntry):
            return Text(payload.at), _message_body(payload, prefix)
        if entry.type == CHANGE_EVENT_TYPE and isinstance(payload, CHANGE_CLASSES):
            time = ""
            if isinstance(payload, ScheduleDispatchChange) and isinstance(payload.accepted_at, str):
                time = payload.accepted_at
            line = self._change(entry.position, payload, prefix, turn)
            return Text(time), line
        if entry.type == TURN_QUEUED_TYPE and isinstance(payload, TurnQueued):
            label = Text.assemble(prefix, ("turn/queued", "bold"), f" · {payload.origin}")
            if payload.occurrences:
                label.append(f" · {', '.join(payload.occurrences)}")
            return Text(payload.at), Group(label, untrusted(payload.text, style="dim"))
        if entry.type == TURN_FINISHED_TYPE and isinstance(payload, TurnFinished):
            said = f" · the turn of entry {payload.turn} {payload.outcome}"
            if payload.attempts > 1:
                said += f" after {payload.attempts} attempts"
            if payload.failure is not None:
                said += f": {describe_failure(payload.failure)}"
            return Text(payload.at), Text.assemble(
                prefix, ("turn/finished", "bold"), untrusted(said)
            )
        text = untrusted(f"{entry.type} {_JSON.encode(payload).decode()}")
        return Text(), Text.assemble(prefix, text)

    def _change(
        self, position: int, change: ScheduleChange, prefix: Text, turn: Provenance
    ) -> Cell:
        """The line of ``change``, made while ``turn`` was in progress."""
        line = _change_line(change, self._records.get(_change_id(change)), prefix)
        if (
            isinstance(change, SETTING_CHANGES)
            and turn.made_by == "reminder"
            and position >= self._seed_length
        ):
            # What setDuring says of the reminder in the views (session/provenance.py Rule 4).
            line.append(f"; set during {turn.text()}")
        if isinstance(change, ScheduleCreateChange | ScheduleUpdateChange):
            self._records[change.schedule.id] = change.schedule
        if self.problem is not None:
            return line
        try:
            if position < self._seed_length:
                self.state.note_inherited(change)
                return line
            # What a dispatch or a miss ended is read before the fold forgets it.
            record = self.state.get(_change_id(change))
            status = self.state.status(_change_id(change))
            self.state.apply(change, position=position)
        except ScheduleError as error:
            self.problem = error
            return Group(line, untrusted(f"✗ rejected: {error.message}", style="bold red"))
        if isinstance(change, ScheduleDispatchChange | ScheduleMissChange) and record is not None:
            following = self.state.get(change.id)
            if following is not None:
                line.append(f"; next target {following.scheduled_at}")
            elif isinstance(record, RECURRING_RECORDS):
                counted = isinstance(change, ScheduleDispatchChange)
                line.append(f"; ended ({_why_ended(record, status, counted=counted)})")
            elif isinstance(change, ScheduleMissChange):
                line.append(f"; one-shot missed ({_lateness(record)}), ended")
            else:
                # A failure's cause is an exception's text: untrusted.
                line.append_text(untrusted(f"; {_one_shot_outcome(self._runs.get(position))}"))
        return line


def _dispatch_runs(header: SessionHeader, entries: Sequence[LogEntry]) -> dict[int, OccurrenceRun]:
    """The occurrence history's run of each dispatch, by the dispatch's position.

    A dispatch comes before its turn finishes, so what became of a one-shot's delivery is read
    ahead, as ``session-schedule history`` reads it. The history stops at the first change the
    fold rejects; :class:`_Replay` marks that change where it stands, and folds nothing after it.
    """
    log = OccurrenceLog(seed_length=header.seed_length, session=header.id)
    with contextlib.suppress(ScheduleError):
        log.feed(entries)
    return {run.position: run for run in log.runs if run.outcome != "deleted"}


def _one_shot_outcome(run: OccurrenceRun | None) -> str:
    """What became of a dispatched one-shot, which the dispatch ends: delivered, failed (after
    how many attempts, and why), or its turn not finished yet (``run``: its occurrence, when the
    history has it)."""
    if run is None:
        return "one-shot dispatched, ended"
    if run.outcome == "pending":
        return "one-shot dispatched, ended; its turn has not finished"
    if run.outcome != "failed":
        return "one-shot delivered, ended"
    said = "one-shot failed"
    if run.attempts is not None and run.attempts > 1:
        said += f" after {run.attempts} attempts"
    said += ", ended"
    if run.failure is not None:
        said += f": {describe_failure(run.failure)}"
    return said


def _why_ended(record: ScheduleRecord, status: RecordStatus, *, counted: bool) -> str:
    """Why the fold ended the recurring ``record`` (with ``status`` as it stood) on a dispatch,
    which counts a run when ``counted``, or on a miss, which does not (SPEC §11, the fold's
    Rule 6): its ``ends.max_runs``-th run, else its next occurrence passing ``ends.until``
    (which is never past year 9999), else no occurrence left before year 10000."""
    ends = record_ends(record)
    if ends is None:
        return NO_LATER_TARGET
    if counted and ends.max_runs is not None and status.runs + 1 >= ends.max_runs:
        return LAST_RUN
    if ends.until is not None:
        return no_occurrence_left(ends.until)
    return NO_LATER_TARGET


def _lateness(record: ScheduleRecord) -> str:
    """``more than N s late``: why a miss of ``record`` was recorded, in the words of its
    standing."""
    return f"more than {record_max_lateness(record)} s late"


def _change_id(change: ScheduleChange) -> ScheduleId:
    if isinstance(change, ScheduleCreateChange):
        return change.schedule.id
    return change.id


def _message_body(message: MessageEntry, prefix: Text) -> Cell:
    match message.role, message.origin:
        case "user", "followup":
            label = Text.assemble(
                ("user", "bold"), " · ", ("FOLLOW-UP", "bold magenta"), " queued by Schedule"
            )
        case "tool", _:
            label = Text.assemble(("tool", "bold"), " · result of ")
            label.append_text(untrusted(str(message.tool_call_id)))
        case role, origin:
            label = Text.assemble((role, "bold"), f" · {origin}")
    parts: list[Cell] = [Text.assemble(prefix, label)]
    if message.content:
        parts.append(untrusted(message.content))
    if not isinstance(message.tool_calls, msgspec.UnsetType):
        for call in message.tool_calls:
            line = Text("→ call ", style="cyan")
            line.append_text(untrusted(f"{call.name}({call.arguments})  [{call.id}]"))
            parts.append(line)
    return Group(*parts)


def _change_line(change: ScheduleChange, record: ScheduleRecord | None, prefix: Text) -> Text:
    """What ``change`` says, on one line; ``record`` is the record it names, when known."""
    line = Text.assemble(prefix, ("schedule/change ", "dim"))
    match change:
        case ScheduleCreateChange(schedule=created):
            line.append("create ", style="bold green")
            line.append(f"{created.id} {rule_text(created)}, target {created.scheduled_at}: ")
            line.append_text(untrusted(_quote(created.prompt)))
        case ScheduleDeleteChange():
            line.append("delete ", style="bold red")
            line.append(f"{change.id}{_kind_suffix(record)}")
        case ScheduleDispatchChange():
            line.append("dispatch ", style="bold blue")
            line.append(f"{change.id}{_kind_suffix(record)}")
            if isinstance(change.accepted_at, str):
                line.append(f", acceptedAt {change.accepted_at}")
        case ScheduleUpdateChange(schedule=updated):
            line.append("update ", style="bold yellow")
            line.append(f"{updated.id} {rule_text(updated)}, target {updated.scheduled_at}: ")
            line.append_text(untrusted(_quote(updated.prompt)))
        case SchedulePauseChange():
            line.append("pause ", style="bold yellow")
            line.append(f"{change.id}{_kind_suffix(record)}")
        case ScheduleResumeChange():
            line.append("resume ", style="bold yellow")
            line.append(f"{change.id}{_kind_suffix(record)}, acceptedAt {change.accepted_at}")
        case ScheduleSnoozeChange():
            line.append("snooze ", style="bold yellow")
            line.append(f"{change.id}{_kind_suffix(record)} until {change.until}")
        case ScheduleMissChange():
            line.append("miss ", style="bold magenta")
            line.append(
                f"{change.id}{_kind_suffix(record)}, occurrence {change.scheduled_at}, "
                f"acceptedAt {change.accepted_at}"
            )
        case _:
            assert_never(change)
    return line


def _kind_suffix(record: ScheduleRecord | None) -> str:
    return "" if record is None else f" ({rule_text(record)})"


def _quote(text: str) -> str:
    return _JSON.encode(text).decode()
