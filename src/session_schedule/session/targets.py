"""The next-target index every store keeps: each session's earliest active reminder target.

A host keeping thousands of sessions live must find the ones that are due without reading their
logs. So every store records, with each commit that holds ``schedule/change``, ``turn/*`` or
``schedule/quotas`` entries (in the same transaction for the databases), the session's next
target — or that it has none — and answers ``due_sessions(before)`` from that record alone.

The next target is the earliest of the active reminders' targets and of the ``at`` of every
**unfinished turn** (a ``turn/queued`` entry that no ``turn/finished`` entry answers). A turn is
unfinished when the process running it died or was stopped mid-answer: listing its session as
due at once (its ``at`` is in the past) makes the host that next reads the index open it, and the
session's turn queue then runs the turn again — even when no reminder of that session is due for
hours.

An earliest reminder target at or before the ``at`` of the session's latest **quotas** entry is
listed as that ``at``: still due, but the record changes when a person changes the quotas of a
session whose reminders wait (held by its quotas or quiet hours). A host that remembers such a
hold (``ScheduleHost`` Rule 10) thus sees that the log changed, and opens the session again at
once: raising the quota delivers the waiting reminder without waiting for the old hold to lift.

The target is computed here, from the handle's own fold of its log: :class:`NextTarget` folds the
``schedule/change`` and ``turn/*`` entries once, incrementally, as commits cover them. A log the
fold rejects is indexed as having nothing active (and a warning is logged once): opening the
session reports the damage, and a host must not be stopped by one damaged session.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from itertools import compress
from operator import attrgetter
from typing import Final, cast, final

from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleChange
from session_schedule.core.due import next_wakeup
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.instants import Instant, instant_of_canonical
from session_schedule.session.ids import SessionId
from session_schedule.session.port import DueSession, LogEntry, ResumePoint, SessionHeader
from session_schedule.session.quotas import QUOTAS_ENTRY_TYPE, QuotasEntry
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    TurnFinished,
    TurnQueued,
)

_log: Final = logging.getLogger(__name__)


@final
class NextTarget:
    """A session's earliest active target, kept up to date as its log grows."""

    __slots__ = ("_folded", "_header", "_quotas_at", "_state", "_turns", "_unindexable")

    def __init__(self, header: SessionHeader, resume: ResumePoint | None = None) -> None:
        self._header = header
        self._state: ScheduleFold | None = None
        self._folded = 0
        self._unindexable = False
        self._turns: dict[int, Instant] = {}
        """The unfinished turns: the position of each ``turn/queued`` entry, and its ``at``."""
        self._quotas_at: Instant | None = None
        """The ``at`` of the latest ``schedule/quotas`` entry."""
        if resume is not None:
            if resume.quotas is not None:
                self._quotas_at = instant_of_canonical(resume.quotas.at)
            for entry in resume.pending:
                self._note_turn(entry)
            # Opened from a checkpoint: the fold of the entries before it is known already.
            self._state = resume.fold(header.id)
            self._folded = resume.position

    def after(self, entries: Sequence[LogEntry], end: int) -> Instant | None:
        """The earliest active target once ``entries[:end]`` are applied (``None``: none).

        ``end`` never moves backwards between calls; entries before the last ``end`` are not
        looked at again.
        """
        if self._state is None:
            self._state = ScheduleFold(session=self._header.id)
        state = self._state
        seed = self._header.seed_length
        if not self._unindexable:
            try:
                for entry in entries[self._folded : end]:
                    if entry.type != CHANGE_EVENT_TYPE:
                        if entry.position >= seed:
                            self._note_turn(entry)
                        continue
                    change = cast("ScheduleChange", entry.payload)
                    if entry.position < seed:
                        state.note_inherited(change)
                    else:
                        state.apply(change, position=entry.position)
            except ScheduleError as error:
                _log.warning(
                    "session %s: its next target is not indexed: %s", self._header.id, error
                )
                self._unindexable = True
        self._folded = max(self._folded, end)
        if self._unindexable:
            return None
        return _earliest(next_wakeup(state), self._quotas_at, self._turns.values())

    def _note_turn(self, entry: LogEntry) -> None:
        if entry.type == QUOTAS_ENTRY_TYPE:
            self._quotas_at = instant_of_canonical(cast("QuotasEntry", entry.payload).at)
        elif entry.type == TURN_QUEUED_TYPE:
            queued = cast("TurnQueued", entry.payload)
            self._turns[entry.position] = instant_of_canonical(queued.at)
        elif entry.type == TURN_FINISHED_TYPE:
            self._turns.pop(cast("TurnFinished", entry.payload).turn, None)


def listed_target(target: Instant | None, quotas_at: Instant | None) -> Instant | None:
    """The index's record of a schedule whose earliest target is ``target``, in a session whose
    latest ``schedule/quotas`` entry was set at ``quotas_at``: that ``at`` when the target is at
    or before it (a change of quotas while reminders wait shows in the index), else the
    target."""
    if target is not None and quotas_at is not None and target <= quotas_at:
        return quotas_at
    return target


def _earliest(
    target: Instant | None, quotas_at: Instant | None, turns: Iterable[Instant]
) -> Instant | None:
    return min(
        (found for found in (listed_target(target, quotas_at), *turns) if found is not None),
        default=None,
    )


_TURN_TYPES: Final = frozenset({TURN_QUEUED_TYPE, TURN_FINISHED_TYPE})
_NOTED_TYPES: Final = frozenset({*_TURN_TYPES, QUOTAS_ENTRY_TYPE})
_type_of: Final = attrgetter("type")


INDEXED_TYPES: Final = frozenset(
    {CHANGE_EVENT_TYPE, TURN_QUEUED_TYPE, TURN_FINISHED_TYPE, QUOTAS_ENTRY_TYPE}
)
"""The entry types that can move a session's next target."""


def holds_changes(entries: Sequence[LogEntry]) -> bool:
    """Whether any of ``entries`` can move the next target (a ``schedule/change``, a
    ``turn/*`` or a ``schedule/quotas`` entry), so that the index must be updated."""
    return any(entry.type in INDEXED_TYPES for entry in entries)


def next_target_of(
    header: SessionHeader, entries: Sequence[LogEntry], *, folded: ScheduleFold | None = None
) -> Instant | None:
    """The earliest active target of a whole log (``None``: nothing active, or unindexable).

    ``folded``: the fold of the log's changes (:func:`~session_schedule.core.fold.fold` with
    the header's ``seed_length``), when the caller has it — they are not folded again; only the
    ``turn/*`` and ``schedule/quotas`` entries are read."""
    if folded is None:
        return NextTarget(header).after(entries, len(entries))
    # The unfinished turns as _note_turn finds them, each ``at`` converted once it is known to
    # be unfinished (a long log finishes almost every turn it queues).
    unfinished: dict[int, str] = {}
    quotas_at: str | None = None
    seed = header.seed_length
    for entry in compress(entries, map(_NOTED_TYPES.__contains__, map(_type_of, entries))):
        if entry.position < seed:
            continue
        if entry.type == QUOTAS_ENTRY_TYPE:
            quotas_at = cast("QuotasEntry", entry.payload).at
        elif entry.type == TURN_QUEUED_TYPE:
            unfinished[entry.position] = cast("TurnQueued", entry.payload).at
        else:
            unfinished.pop(cast("TurnFinished", entry.payload).turn, None)
    turns = map(instant_of_canonical, unfinished.values())
    return _earliest(
        next_wakeup(folded), None if quotas_at is None else instant_of_canonical(quotas_at), turns
    )


def due(
    targets: dict[SessionId, Instant | None], before: Instant, limit: int
) -> tuple[DueSession, ...]:
    """The entries of ``targets`` before ``before``, soonest first, then by id, at most
    ``limit`` (``ValueError`` when ``limit`` is below 1)."""
    check_limit(limit)
    found = sorted(
        (target, session_id)
        for session_id, target in targets.items()
        if target is not None and target < before
    )
    return tuple(DueSession(session_id, target) for target, session_id in found[:limit])


def check_limit(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
