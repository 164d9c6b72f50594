"""Provenance: which turn created each reminder, and how deep a chain of reminder turns it ends.

Nothing is written for it: it is read from entries the log already holds, so the strict,
byte-frozen ``schedule/change`` format stays as it is (SPEC §4).

Rule 1 — **the turn in progress.** Turns run one at a time, in the order they were queued
(:mod:`session_schedule.runtime.turns`), so at any position of the log the turn in progress is
the oldest ``turn/queued`` entry with no ``turn/finished`` entry yet. A create change appended
while it runs was made by it; with no turn in progress (an agent outside the turn queue, or a
program calling the tools directly) the create was made ``outside`` any recorded turn.

Rule 2 — **who asked.** A reminder turn (origin ``schedule``) names its occurrences; a host turn
whose run recorded a ``message`` typed by a ``person`` is that person's prompt; any other host
turn is a ``host`` prompt.

Rule 3 — **chain depth.** A reminder a person, a host or a program created has depth 0; one
created during a reminder turn has the deepest depth among the reminders that turn delivers,
plus one. A reminder that re-creates itself from its own turn thus counts up by one each time,
and :attr:`~session_schedule.core.rules.Limits.max_chain_depth` bounds it. A fork reads from its
fork point, as its schedule does.

Rule 4 — **updates count too.** An update, pause, resume or snooze of a reminder made during a
turn makes that turn the reminder's provenance (``setDuring`` names the latest reminder turn that
changed it), and its depth becomes the larger of the two — a depth never decreases. A reminder
that snoozes or re-times itself from its own turn thus counts up by one each time, exactly as one
that re-creates itself does, and cannot keep itself alive past the chain bound either. An update
made outside any recorded turn leaves the provenance as it was.

Rule 5 — **what a turn already did.** A turn can run more than once (a retried attempt, or a
turn a crash cut short running again after a restart); its earlier attempts' tool calls took
effect. They are the ``schedule/change`` entries after its ``turn/queued`` entry appended while
it was the turn in progress (Rule 1) — after the last ``turn/finished`` of a turn queued before
it — but for Schedule's own dispatches and misses (:data:`TOOL_CHANGES`, :func:`changes_during`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal, TypeAlias, final

import msgspec

from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
    SchedulePauseChange,
    ScheduleResumeChange,
    ScheduleSnoozeChange,
    ScheduleUpdateChange,
)
from session_schedule.core.ids import ScheduleId
from session_schedule.session.message import MessageEntry
from session_schedule.session.port import LogEntry, ResumePoint
from session_schedule.session.turns import TurnFinished, TurnQueued

MadeBy: TypeAlias = Literal["person", "reminder", "host", "outside"]
"""Which kind of turn created a reminder (see the module docstring, Rule 2)."""


@final
class Provenance(msgspec.Struct, frozen=True, kw_only=True):
    """The turn a reminder was created in."""

    made_by: MadeBy
    occurrences: tuple[str, ...] = ()
    """The occurrence keys the reminder turn delivered (``made_by == "reminder"`` only)."""
    depth: int = 0
    """How many reminder turns in a row led to it (Rule 3)."""

    def text(self) -> str:
        """``a person's prompt``, ``reminder sch_3@…``: how views and frames show it."""
        match self.made_by:
            case "person":
                return "a person's prompt"
            case "host":
                return "a host prompt"
            case "outside":
                return "no recorded turn"
            case "reminder":
                return "reminder " + ", ".join(self.occurrences)


OUTSIDE = Provenance(made_by="outside")
CHANGED_IN_PLACE: Final = (
    ScheduleUpdateChange,
    SchedulePauseChange,
    ScheduleResumeChange,
    ScheduleSnoozeChange,
)
"""The changes a tool call makes to a reminder in place (Rule 4)."""
SETTING_CHANGES: Final = (ScheduleCreateChange, *CHANGED_IN_PLACE)
"""The changes that make the turn in progress a reminder's provenance (Rules 1 and 4)."""
TOOL_CHANGES: Final = (*SETTING_CHANGES, ScheduleDeleteChange)
"""The changes a tool call makes (Schedule itself appends the dispatches and misses)."""


def changed_during(before: Provenance, turn: Provenance) -> Provenance:
    """The provenance of a reminder made ``before`` and then changed during ``turn`` (Rule 4):
    that turn, at the larger of the two depths."""
    if turn.made_by == "outside":
        return before
    return msgspec.structs.replace(turn, depth=max(before.depth, turn.depth))


@final
class ProvenanceLog:
    """The provenance of every reminder created in a log, read entry by entry (:meth:`feed`)."""

    def __init__(self, *, seed_length: int = 0) -> None:
        self._seed_length = seed_length
        self.position = 0
        """How many entries have been read."""
        self._pending: dict[int, tuple[TurnQueued, bool]] = {}
        """Unfinished turns by position: the entry, and whether a person's message was seen."""
        self._made: dict[ScheduleId, Provenance] = {}

    @classmethod
    def resumed(cls, resume: ResumePoint, *, seed_length: int = 0) -> ProvenanceLog:
        """The provenance of a session's first ``resume.position`` entries, as a checkpoint
        recorded it (``resume.provenance`` must not be ``None``): only the entries from there
        on are read."""
        if resume.provenance is None:
            raise ValueError("this resume point does not record provenance")
        provenance = cls(seed_length=seed_length)
        person = set(resume.person_turns)
        for entry in resume.pending:
            if isinstance(entry.payload, TurnQueued):
                provenance._pending[entry.position] = (entry.payload, entry.position in person)
        provenance._made = dict(resume.provenance)
        provenance.position = resume.position
        return provenance

    def snapshot(
        self, active: Iterable[ScheduleId]
    ) -> tuple[tuple[tuple[ScheduleId, Provenance], ...], tuple[int, ...]]:
        """What a checkpoint records: the provenance of each of the ``active`` reminders that a
        recorded turn made or changed, and the pending turns a person's message was seen in."""
        made = tuple(
            (schedule_id, found)
            for schedule_id in active
            if (found := self._made.get(schedule_id, OUTSIDE)) != OUTSIDE
        )
        return made, tuple(position for position, (_, person) in self._pending.items() if person)

    def feed(self, entries: Iterable[LogEntry]) -> None:
        """Read the entries that follow those read so far.

        The same as :meth:`_read` of each entry in turn, as one loop: the commonest entries of
        a long log — a message, a dispatch, a turn queued or finished — cost a type test or two
        each; a person's message during a turn, a create and a change in place go through
        :meth:`_read`."""
        seed, pending, read = self._seed_length, self._pending, self._read
        position = self.position
        try:
            for entry in entries:
                position = entry.position + 1
                if entry.position < seed:
                    continue
                payload = entry.payload
                if isinstance(payload, MessageEntry):
                    if pending and payload.origin == "person":
                        read(entry)
                elif type(payload) is ScheduleDispatchChange:
                    continue
                elif isinstance(payload, TurnQueued):
                    pending[entry.position] = (payload, False)
                elif isinstance(payload, TurnFinished):
                    pending.pop(payload.turn, None)
                else:
                    read(entry)
        finally:
            self.position = position

    def _read(self, entry: LogEntry) -> None:
        """Read the entry that follows those read so far (but for :attr:`position`)."""
        if entry.position < self._seed_length:
            return
        payload = entry.payload
        if isinstance(payload, TurnQueued):
            self._pending[entry.position] = (payload, False)
        elif isinstance(payload, TurnFinished):
            self._pending.pop(payload.turn, None)
        elif isinstance(payload, MessageEntry):
            if payload.origin == "person" and self._pending:
                first = min(self._pending)
                self._pending[first] = (self._pending[first][0], True)
        elif entry.type == CHANGE_EVENT_TYPE and isinstance(payload, ScheduleCreateChange):
            self._made[ScheduleId(payload.schedule.id)] = self.current()
        elif entry.type == CHANGE_EVENT_TYPE and isinstance(payload, CHANGED_IN_PLACE):
            schedule_id = ScheduleId(payload.id)
            self._made[schedule_id] = changed_during(self.of(schedule_id), self.current())

    def current(self) -> Provenance:
        """The provenance a create appended now would have (Rules 1 to 3)."""
        if not self._pending:
            return OUTSIDE
        queued, person = self._pending[min(self._pending)]
        if queued.origin == "host":
            return Provenance(made_by="person" if person else "host")
        depth = 1 + max(
            (self.of(ScheduleId(key.partition("@")[0])).depth for key in queued.occurrences),
            default=0,
        )
        return Provenance(made_by="reminder", occurrences=queued.occurrences, depth=depth)

    def made_by_reminders(self) -> dict[str, str]:
        """``{id: "reminder sch_3@…"}`` for every reminder read so far that a reminder turn
        created."""
        return {
            schedule_id: made.text()
            for schedule_id, made in self._made.items()
            if made.made_by == "reminder"
        }

    def of(self, schedule_id: ScheduleId) -> Provenance:
        """The provenance of the reminder ``schedule_id`` (``outside`` when its create was not
        read: before a fork point, or not in the log)."""
        return self._made.get(schedule_id, OUTSIDE)


def made_by_reminders(entries: Sequence[LogEntry], *, seed_length: int = 0) -> dict[str, str]:
    """``{id: "reminder sch_3@…"}`` for every reminder of ``entries`` a reminder turn created."""
    provenance = ProvenanceLog(seed_length=seed_length)
    provenance.feed(entries)
    return provenance.made_by_reminders()


def changes_during(entries: Sequence[LogEntry], turn: int) -> tuple[ScheduleChange, ...]:
    """The changes the tools made while the turn queued at position ``turn`` of ``entries`` was
    the turn in progress, in log order (Rule 5): what its earlier attempts did, read at the
    start of another. Only the entries after ``turn`` are read (with their live view, a slice
    of a session's entries: the turn runs, so every turn queued before it has finished)."""
    changes: list[ScheduleChange] = []
    for entry in entries[turn + 1 :]:
        payload = entry.payload
        if isinstance(payload, TurnFinished):
            if payload.turn < turn:
                changes.clear()  # an older turn was in progress until here: they were its
            elif payload.turn == turn:
                break
        elif entry.type == CHANGE_EVENT_TYPE and isinstance(payload, TOOL_CHANGES):
            changes.append(payload)
    return tuple(changes)
