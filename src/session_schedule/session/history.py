"""Occurrence history: what became of each occurrence of each reminder, read from the log alone.

Every occurrence of a reminder ends in exactly one outcome, derived from entries the log already
holds — nothing is written for the history:

=============  ===============================================================================
outcome        read from
=============  ===============================================================================
``delivered``  a ``schedule/change`` dispatch, whose ``turn/queued`` reminder turn (the one
               naming its occurrence key) has a ``turn/finished`` entry ``completed`` — or which
               no turn of the log names (an agent outside the turn queue accepted it)
``failed``     the same, with ``turn/finished`` ``failed`` (after its retries; the entry keeps
               the attempts and the bounded cause)
``pending``    a dispatch whose turn has not finished yet (running, waiting for a retry, or
               left by a crash: the next queue runs it)
``skipped``    an earlier occurrence of a recurring reminder that a later catch-up delivery
               covered; never enumerated, counted on that delivery (``skipped``)
``missed``     an occurrence past its record's maximum lateness (SPEC §11), once that record
               exists in the log
``deleted``    a reminder deleted before its pending occurrence was delivered
=============  ===============================================================================

A reminder turn is queued (``turn/queued``, with the occurrence keys ``id@scheduledAt``) just
before the dispatches it stands for, on the same handle; the dispatch is linked to the latest
queued reminder turn naming its key. The decision time of a recurring dispatch is its
``acceptedAt``; a one-shot's is the time its turn was queued, so a one-shot an agent accepted
without queuing a turn (the MCP server's ``schedule_followups_take``) has none, and no lateness.
A fork's history starts at its fork point, as its schedule does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal, TypeAlias, final

import msgspec

from session_schedule.core.changes import (
    CHANGE_CLASSES,
    CHANGE_EVENT_TYPE,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
    ScheduleMissChange,
)
from session_schedule.core.due import latest_occurrence
from session_schedule.core.fold import ScheduleFold, skipped_occurrences
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import (
    KNOWN_DATE_MS,
    KNOWN_SECOND_MS,
    MS_PER_SECOND,
    TIME_OF_DAY_MS,
    Instant,
    format_instant,
    parse_instant,
)
from session_schedule.core.records import (
    RECURRING_RECORDS,
    EveryScheduleRecord,
    record_ends,
    record_target,
)
from session_schedule.session.message import MessageEntry
from session_schedule.session.port import LogEntry, ResumePoint
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    TurnFailure,
    TurnFinished,
    TurnQueued,
)

OccurrenceOutcome: TypeAlias = Literal[
    "delivered", "failed", "pending", "skipped", "missed", "deleted"
]
"""What became of an occurrence (see the module docstring)."""
OCCURRENCE_OUTCOMES: tuple[OccurrenceOutcome, ...] = (
    "delivered",
    "failed",
    "pending",
    "skipped",
    "missed",
    "deleted",
)


@final
class OccurrenceRun(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One occurrence of one reminder, and its outcome."""

    schedule_id: ScheduleId
    key: str
    """``id@scheduledAt``: the occurrence key its follow-up carried (for a deleted reminder, the
    key its next follow-up would have carried)."""
    due_at: Instant
    """When the occurrence was due (a catch-up: the latest due occurrence it delivered; a
    snoozed one, delivered or missed: the snooze instant)."""
    decided_at: Instant | None
    """When the delivery was decided (``None`` for a delete, which the log does not time, and for a
    one-shot accepted without a queued turn, as the MCP server's takes are)."""
    outcome: OccurrenceOutcome
    skipped: int = 0
    """Earlier due occurrences this delivery covered (outcome ``skipped``, counted here)."""
    turn: int | None = None
    """The position of its reminder turn's ``turn/queued`` entry, if one names it."""
    attempts: int | None = None
    """How many times its turn ran, once it finished."""
    failure: TurnFailure | None = None
    """Why its turn failed."""
    finished_at: Instant | None = None
    """When its turn finished."""
    position: int
    """The position of its dispatch (or delete) in the log."""

    @property
    def lateness_seconds(self) -> float | None:
        """How late the delivery was decided, in seconds (``None`` for a delete)."""
        if self.decided_at is None:
            return None
        return (self.decided_at - self.due_at) / MS_PER_SECOND


def occurrence_history(
    entries: Sequence[LogEntry], *, seed_length: int = 0, session: str = ""
) -> list[OccurrenceRun]:
    """Every delivered, failed, pending or deleted occurrence of the session whose log is
    ``entries`` (from its first entry), in log order. Raises ``corrupt_schedule_log`` as the fold
    does."""
    log = OccurrenceLog(seed_length=seed_length, session=session)
    log.feed(entries)
    return log.runs


@final
class OccurrenceLog:
    """The occurrence history of one session, read incrementally: :meth:`feed` it the log's
    entries in order, from the first, in as many slices as suits.

    With ``keep=False`` only each active reminder's latest run and run count are kept (what a
    view shows), so memory follows the reminders, not the length of the history.
    """

    def __init__(self, *, seed_length: int = 0, session: str = "", keep: bool = True) -> None:
        self._state = ScheduleFold(session=session)
        self._seed_length = seed_length
        self._keep = keep
        self.runs: list[OccurrenceRun] = []
        """Every occurrence so far, in log order (empty with ``keep=False``)."""
        self._last: dict[ScheduleId, tuple[OccurrenceRun, int]] = {}
        # The latest queued reminder turn naming each occurrence key: its position and time.
        self._queued: dict[str, tuple[int, Instant]] = {}
        # The runs each unfinished turn delivers: their reminder and index in ``runs``.
        self._by_turn: dict[int, list[tuple[ScheduleId, int]]] = {}
        # Reminder turns that finished before the dispatch of an occurrence they name: a power cut
        # kept the turn and lost the dispatch, which a later open then recorded (runtime/live.py
        # Rule 4a). The dispatch's run takes the turn's outcome when it is read.
        self._early: dict[int, TurnFinished] = {}
        self.position = 0
        """How many entries have been fed."""

    @classmethod
    def resumed(
        cls, resume: ResumePoint, *, seed_length: int = 0, session: str = ""
    ) -> OccurrenceLog:
        """The history (``keep=False``) of a session's first ``resume.position`` entries, as a
        checkpoint recorded it, to be fed the entries from there on. ``resume.runs`` must be
        known."""
        if resume.runs is None:
            raise ValueError("the checkpoint does not record the reminders' runs")
        log = cls(seed_length=seed_length, session=session, keep=False)
        log._state = resume.fold(session)
        for schedule_id, run, count in resume.runs:
            log._last[schedule_id] = (run, count)
            if run.outcome == "pending" and run.turn is not None:
                log._by_turn.setdefault(run.turn, []).append((schedule_id, -1))
        for entry in resume.pending:
            log._read(entry)
        log.position = resume.position
        return log

    @property
    def state(self) -> ScheduleFold:
        """The schedule fold of the entries fed so far."""
        return self._state

    def summary(self) -> list[tuple[ScheduleId, OccurrenceRun, int]]:
        """Each active reminder that has had a run: its latest run and run count, in creation
        order (what a checkpoint records)."""
        last = self._last
        return [
            (record.id, *last[record.id])
            for record in self._state.by_creation()
            if record.id in last
        ]

    def last(self, schedule_id: ScheduleId) -> tuple[OccurrenceRun, int] | None:
        """The latest run of an active reminder (delivered, failed or pending) and how many it
        has had, or ``None`` before its first."""
        return self._last.get(schedule_id)

    def queued_undispatched(self, keys: Iterable[str]) -> bool:
        """Whether a reminder turn of the log already names every one of the occurrence
        ``keys`` with no dispatch of it read since: the follow-up was queued, and the dispatch
        that records it was lost (a power cut between the two appends, which one barrier makes
        durable together, kept the first). Queuing it again would deliver it twice."""
        queued = self._queued
        return all(key in queued for key in keys)

    def feed(self, entries: Iterable[LogEntry]) -> None:
        """Read the next entries (the first not yet fed, in order). Raises
        ``corrupt_schedule_log`` as the fold does.

        The same as :meth:`_read` of each entry in turn — the same runs, state and errors, with
        every entry before a failing one read — as one loop: an entry that cannot matter
        (a message, a turn no reminder run waits for) costs a type test or two; the commonest
        change of a long log, the dispatch of a plain ``every`` reminder, is applied by
        :meth:`ScheduleFold.dispatch_every`, which gives back the target and the decision
        instant its run is built from, and its run is made and added here, without a call (as
        :func:`_run` and :meth:`_add` would). Any other dispatch is read by
        :meth:`_dispatch_run` and applied by :meth:`ScheduleFold.replay`; anything else goes
        through :meth:`_read`.
        """
        state, seed, keep, runs = self._state, self._seed_length, self._keep, self.runs
        queued, by_turn, last = self._queued, self._by_turn, self._last
        read, add, dispatch_run, replay = self._read, self._add, self._dispatch_run, state.replay
        dispatch_every, finish = state.dispatch_every, self._finish
        queued_pop, last_get, waiting = queued.pop, last.get, by_turn.setdefault
        position = self.position
        try:
            for entry in entries:
                entry_type = entry.type
                if entry_type == CHANGE_EVENT_TYPE:
                    payload = entry.payload
                    if type(payload) is ScheduleDispatchChange and entry.position >= seed:
                        plain = dispatch_every(payload)
                        if plain is not None:
                            # _run and _add of the dispatch of a plain ``every`` reminder.
                            record, target, decided_at = plain
                            schedule_id = record.id
                            key = f"{schedule_id}@{format_instant(Instant(target))}"
                            turn = queued_pop(key, None)
                            interval = record.every_seconds * MS_PER_SECOND
                            skipped = (decided_at - target) // interval
                            made = OccurrenceRun(
                                schedule_id=schedule_id,
                                key=key,
                                due_at=Instant(target + skipped * interval),
                                decided_at=Instant(decided_at),
                                outcome="delivered" if turn is None else "pending",
                                skipped=skipped,
                                turn=None if turn is None else turn[0],
                                position=entry.position,
                            )
                            previous = last_get(schedule_id)
                            last[schedule_id] = (made, 1 if previous is None else previous[1] + 1)
                            if keep:
                                runs.append(made)
                            if turn is not None:
                                waiting(turn[0], []).append(
                                    (schedule_id, len(runs) - 1 if keep else -1)
                                )
                                if turn[0] in self._early:
                                    finish(self._early[turn[0]])
                        elif (run := dispatch_run(payload, entry.position)) is not None:
                            add(run)
                            replay(((entry.position, payload),))
                        else:
                            read(entry)
                    else:
                        read(entry)
                elif entry_type == TURN_QUEUED_TYPE:
                    if entry.position >= seed:
                        payload = entry.payload
                        if isinstance(payload, TurnQueued) and payload.origin == "schedule":
                            at = _instant_of(payload.at)
                            for key in payload.occurrences:
                                queued[key] = (entry.position, at)
                elif entry_type == TURN_FINISHED_TYPE:
                    payload = entry.payload
                    if isinstance(payload, TurnFinished) and (payload.turn in by_turn or queued):
                        finish(payload)
                position = entry.position + 1
        finally:
            self.position = position

    def _dispatch_run(self, change: ScheduleDispatchChange, position: int) -> OccurrenceRun | None:
        """What :func:`_run` makes of the dispatch of an active reminder that is not snoozed and
        whose target is in the tables of checked instants, reading that target once; ``None``
        for any other dispatch, which :func:`_run` reads. A plain ``every`` reminder's catch-up
        is worked out inline (:func:`latest_occurrence` for the others)."""
        state = self._state
        record = state.get(change.id)
        if record is None or state.status(record.id).snoozed_from is not None:
            return None
        # While not snoozed, the occurrence a delivery stands for is the target, and a canonical
        # ``scheduledAt`` is its text.
        scheduled_at = record.scheduled_at
        target = _known_instant(scheduled_at)
        if target is None:
            return None
        key = f"{record.id}@{scheduled_at}"
        turn = self._queued.pop(key, None)
        decided_at = turn[1] if turn is not None else None
        accepted_at = change.accepted_at
        if isinstance(accepted_at, str):
            decided_at = _instant_of(accepted_at)
        due_at, skipped = target, 0
        if decided_at is not None and isinstance(record, RECURRING_RECORDS):
            ends = record_ends(record)
            if type(record) is EveryScheduleRecord and (ends is None or ends.until is None):
                every_seconds = record.every_seconds
                skipped = skipped_occurrences(target, decided_at, every_seconds)
                due_at = Instant(target + skipped * every_seconds * MS_PER_SECOND)
            else:
                occurrence = latest_occurrence(record, decided_at)
                due_at, skipped = occurrence.due_at, occurrence.skipped
        return _dispatched(record.id, key, turn, decided_at, due_at, skipped, position)

    def _read(self, entry: LogEntry) -> None:
        payload = entry.payload
        if entry.type == CHANGE_EVENT_TYPE:
            if entry.position < self._seed_length:
                if isinstance(payload, ScheduleCreateChange):
                    self._state.note_inherited(payload)
                return
            if isinstance(payload, ScheduleDispatchChange | ScheduleDeleteChange):
                run = _run(self._state, payload, entry.position, self._queued)
                if run is not None:
                    self._add(run)
            elif isinstance(payload, ScheduleMissChange) and payload.id in self._state:
                self._add(
                    OccurrenceRun(
                        schedule_id=payload.id,
                        key=f"{payload.id}@{payload.scheduled_at}",
                        due_at=_missed_due_at(self._state, payload),
                        decided_at=parse_instant(payload.accepted_at),
                        outcome="missed",
                        position=entry.position,
                    )
                )
            if isinstance(payload, CHANGE_CLASSES):
                self._state.apply(payload, position=entry.position)
        elif entry.type == TURN_QUEUED_TYPE and entry.position >= self._seed_length:
            if isinstance(payload, TurnQueued) and payload.origin == "schedule":
                at = parse_instant(payload.at)
                for key in payload.occurrences:
                    self._queued[key] = (entry.position, at)
        elif entry.type == TURN_FINISHED_TYPE and isinstance(payload, TurnFinished):
            self._finish(payload)

    def _add(self, run: OccurrenceRun) -> None:
        if run.outcome == "deleted":
            self._last.pop(run.schedule_id, None)
        else:
            previous = self._last.get(run.schedule_id)
            self._last[run.schedule_id] = (run, 1 if previous is None else previous[1] + 1)
            if run.turn is not None:
                index = len(self.runs) if self._keep else -1
                self._by_turn.setdefault(run.turn, []).append((run.schedule_id, index))
        if self._keep:
            self.runs.append(run)
        if run.turn is not None and run.turn in self._early:
            self._finish(self._early[run.turn])

    def _finish(self, finished: TurnFinished) -> None:
        # A turn that names an occurrence not dispatched yet is kept for that dispatch (see
        # ``_early``); a log without lost dispatches never keeps one.
        if self._queued and any(turn == finished.turn for turn, _ in self._queued.values()):
            self._early[finished.turn] = finished
        for schedule_id, index in self._by_turn.pop(finished.turn, ()):
            last = self._last.get(schedule_id)
            current = last[0] if last is not None and last[0].turn == finished.turn else None
            run = self.runs[index] if index >= 0 else current
            if run is None:
                continue
            done = msgspec.structs.replace(
                run,
                outcome="delivered" if finished.outcome == "completed" else "failed",
                attempts=finished.attempts,
                failure=finished.failure,
                finished_at=_instant_of(finished.at),
            )
            if index >= 0:
                self.runs[index] = done
            if last is not None and current is not None:
                self._last[schedule_id] = (done, last[1])


_date_ms: Final = KNOWN_DATE_MS.get
_time_of_day_ms: Final = TIME_OF_DAY_MS.get
_second_ms: Final = KNOWN_SECOND_MS.get


def _known_instant(text: str) -> Instant | None:
    """The instant of ``text`` when its date, time of day and second are in the tables of
    checked instants (:data:`~session_schedule.core.instants.KNOWN_DATE_MS`), else ``None``:
    three look-ups; a log's instants mostly fall on new minutes of known dates."""
    day = _date_ms(text[:11])
    time_of_day = _time_of_day_ms(text[11:17])
    second = _second_ms(text[17:])
    if day is None or time_of_day is None or second is None:
        return None
    return Instant(day + time_of_day + second)


def _instant_of(text: str) -> Instant:
    """:func:`parse_instant` of ``text``, by the tables when they know it."""
    known = _known_instant(text)
    return parse_instant(text) if known is None else known


def _missed_due_at(state: ScheduleFold, miss: ScheduleMissChange) -> Instant:
    """When the occurrence ``miss`` names was due: the snooze instant while its record is
    snoozed (SPEC §11 measures the lateness from it, as a delivery's), else the occurrence."""
    record = state.get(miss.id)
    if record is not None and state.status(miss.id).snoozed_from is not None:
        return record_target(record)
    return parse_instant(miss.scheduled_at)


def _run(
    state: ScheduleFold,
    change: ScheduleDispatchChange | ScheduleDeleteChange,
    position: int,
    queued: dict[str, tuple[int, Instant]],
) -> OccurrenceRun | None:
    record = state.get(change.id)
    if record is None:
        return None  # the fold refuses the change just after
    # A snoozed delivery stands for the occurrence the snooze moved (SPEC §11).
    occurrence_at = state.occurrence_of(record.id)
    snoozed_from = occurrence_at if state.status(record.id).snoozed_from is not None else None
    key = f"{record.id}@{format_instant(occurrence_at)}"
    if isinstance(change, ScheduleDeleteChange):
        return OccurrenceRun(
            schedule_id=record.id,
            key=key,
            due_at=record_target(record),
            decided_at=None,
            outcome="deleted",
            position=position,
        )
    turn = queued.pop(key, None)
    decided_at = turn[1] if turn is not None else None
    if isinstance(change.accepted_at, str):
        decided_at = parse_instant(change.accepted_at)
    due_at, skipped = record_target(record), 0
    if isinstance(record, RECURRING_RECORDS) and decided_at is not None:
        occurrence = latest_occurrence(record, decided_at, snoozed_from=snoozed_from)
        due_at, skipped = occurrence.due_at, occurrence.skipped
    return _dispatched(record.id, key, turn, decided_at, due_at, skipped, position)


def _dispatched(
    schedule_id: ScheduleId,
    key: str,
    turn: tuple[int, Instant] | None,
    decided_at: Instant | None,
    due_at: Instant,
    skipped: int,
    position: int,
) -> OccurrenceRun:
    """The run a dispatch records: delivered, or pending while its ``turn`` (position, queued
    at) is unfinished."""
    return OccurrenceRun(
        schedule_id=schedule_id,
        key=key,
        due_at=due_at,
        decided_at=decided_at,
        outcome="delivered" if turn is None else "pending",
        skipped=skipped,
        turn=None if turn is None else turn[0],
        position=position,
    )


@final
class HistoryRow(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """One occurrence in its JSON form (``history --json``, the page's history view)."""

    id: str
    occurrence: str
    due_at: str
    decided_at: str | None
    outcome: OccurrenceOutcome
    lateness_seconds: float | None
    skipped: int
    attempts: int | None = None
    failure: str | None = None
    """``ErrorClass (HTTP status): message``, for a failed occurrence."""
    finished_at: str | None = None
    set_during: str | None = None
    """The reminder turn that created its reminder (``reminder sch_3@…``); absent when a person,
    a host prompt or a program created it."""


def history_row(run: OccurrenceRun, *, set_during: str | None = None) -> HistoryRow:
    """The JSON form of one occurrence; ``set_during`` as :attr:`HistoryRow.set_during`."""
    return HistoryRow(
        id=run.schedule_id,
        occurrence=run.key,
        due_at=format_instant(run.due_at),
        decided_at=None if run.decided_at is None else format_instant(run.decided_at),
        outcome=run.outcome,
        lateness_seconds=run.lateness_seconds,
        skipped=run.skipped,
        attempts=run.attempts,
        failure=failure_text(run),
        finished_at=None if run.finished_at is None else format_instant(run.finished_at),
        set_during=set_during,
    )


def failure_text(run: OccurrenceRun) -> str | None:
    """``ErrorClass (HTTP status): message`` for a failed occurrence whose cause is stored."""
    return None if run.failure is None else describe_failure(run.failure)


def describe_failure(failure: TurnFailure) -> str:
    """``ErrorClass (HTTP status): message``: why a turn failed, on one line."""
    status = "" if failure.status is None else f" (HTTP {failure.status})"
    return f"{failure.error}{status}: {failure.message}"


@final
class Away(msgspec.Struct, frozen=True, kw_only=True):
    """The reminder turns finished since the person's last message (see :func:`away`)."""

    answered: int
    """Reminder turns finished since then: answered, recorded without an answer, or failed."""
    failed: int
    """Of those, the ones recorded ``failed``: nothing was delivered."""
    since: int
    """The log position the count starts from (just after the person's last message)."""
    unanswered: int = 0
    """Of those, the ones that completed with their follow-up recorded in the transcript and no
    reply after it: delivered with no model connected to answer (an offline host or chat)."""

    def line(self) -> str | None:
        """The one line a front end shows before the transcript continues, or ``None``: each
        kind of turn named as what happened to it — answered, delivered but not answered (no
        model was connected), could not be delivered."""
        if not self.answered:
            return None
        replied = self.answered - self.unanswered - self.failed
        kinds = (("answered", replied), ("unanswered", self.unanswered), ("failed", self.failed))
        clauses: list[str] = []
        for kind, count in kinds:
            if not count:
                continue
            first = not clauses
            subject = (
                f"{count} {'reminder' if count == 1 else 'reminders'}" if first else str(count)
            )
            was = "was" if count == 1 else "were"
            since = " since your last message" if first else ""
            match kind:
                case "answered":
                    clauses.append(f"{subject} {was} answered{since}")
                case "unanswered":
                    clauses.append(
                        f"{subject} {was} delivered{since} but not answered "
                        "(no model was connected)"
                    )
                case _:
                    clauses.append(f"{subject} could not be delivered{since} (see the history)")
        if len(clauses) == 1:
            return clauses[0]
        return ", ".join(clauses[:-1]) + ", and " + clauses[-1]


def away(entries: Sequence[LogEntry], *, seed_length: int = 0) -> Away:
    """The reminder turns finished in the session since the person's last message — by a host,
    or by a chat or page while nobody wrote. Read from the end of the log, back to that
    message (or the fork point).

    A completed turn is answered when a reply (a model's message) follows its follow-up in the
    transcript before the turn finished, and unanswered when none does (the follow-up was
    recorded with no model to answer it). A turn that recorded no follow-up at all (a
    conversation loop of its own, keeping its transcript elsewhere) counts as answered."""
    answered = failed = unanswered = 0
    position = len(entries)
    while position > seed_length:
        entry = entries[position - 1]
        payload = entry.payload
        if isinstance(payload, MessageEntry) and payload.origin == "person":
            break
        if isinstance(payload, TurnFinished) and payload.turn < len(entries):
            queued = entries[payload.turn].payload
            if isinstance(queued, TurnQueued) and queued.origin == "schedule":
                answered += 1
                if payload.outcome == "failed":
                    failed += 1
                elif not _replied(entries, payload.turn, position - 1):
                    unanswered += 1
        position -= 1
    return Away(answered=answered, failed=failed, unanswered=unanswered, since=position)


def _replied(entries: Sequence[LogEntry], queued: int, finished: int) -> bool:
    """Whether the reminder turn queued at ``queued`` and finished at ``finished`` has a
    model's message after its follow-up; ``True`` when it recorded no follow-up.

    Turns run one at a time, so the turn's messages lie after its ``turn/queued`` entry and
    after the ``turn/finished`` of the turn before it; its follow-up comes first."""
    for position in range(finished - 1, queued, -1):
        payload = entries[position].payload
        if isinstance(payload, TurnFinished):
            break
        if isinstance(payload, MessageEntry):
            if payload.origin == "model":
                return True
            if payload.origin == "followup":
                return False
    return True
