"""Delivery planning: what is due at ``now``, and when the owner must look again (SPEC §3, §6).

Rule 1 — due one-shots take priority and go **one per follow-up turn**: the earliest due one-shot
(target order, then creation order) is delivered alone.

Rule 2 — only when no one-shot is due, **every** due recurring record (``every``, ``daily``
and ``calendar`` alike) contributes its latest due occurrence to **one batch**, in target then
creation order, all dispatched with the same decision time. Missed occurrences are counted, never
enumerated or replayed.

Rule 3 — the owner wakes at the earliest active target; with nothing active it has nothing to wait
for (its own bounded wait still re-reads the wall clock). A paused record has no target to wait for.

Rule 4 — SPEC §11: a due record with ``maxLatenessSeconds`` whose next delivery (the snooze
instant when snoozed; the resume time for a one-shot resumed after its target) lies more than that
before the decision time is not delivered: :func:`plan_misses` gives the ``miss`` changes the owner
appends first, and :func:`plan_delivery` passes such a record over. A snoozed delivery stands for
the occurrence the snooze moved (its key and its ``snoozed from`` line name it); a snoozed
recurring record counts as skipped its occurrences after that one up to the decision time.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, final

import msgspec

from session_schedule.core.calendar import latest_calendar_due
from session_schedule.core.changes import (
    ScheduleDispatchChange,
    ScheduleMissChange,
    dispatch_change,
    miss_change,
)
from session_schedule.core.daily import latest_daily_due
from session_schedule.core.fold import ScheduleFold, next_occurrence, skipped_occurrences
from session_schedule.core.instants import (
    MAX_INSTANT,
    MS_PER_SECOND,
    Instant,
    format_instant,
    parse_instant,
)
from session_schedule.core.records import (
    RECURRING_RECORDS,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    RecurringScheduleRecord,
    ScheduleRecord,
    record_ends,
    record_max_lateness,
    record_target,
)

DeliveryKind: TypeAlias = Literal["one-shot", "batch"]


@final
class End(msgspec.Struct, frozen=True, kw_only=True):
    """Where a bounded recurring record stands once a delivery is dispatched (SPEC §11)."""

    last: bool
    """The dispatch ends the record: its last run, or no occurrence left before
    ``ends.until``."""
    runs_left: int | None
    """With ``ends.maxRuns``: the runs left after this one."""
    until: str | None
    """The record's ``ends.until``."""


@final
class Occurrence(msgspec.Struct, frozen=True, kw_only=True):
    """One reminder inside a follow-up turn."""

    record: ScheduleRecord
    """The record as it stood when the decision was taken."""
    due_at: Instant
    """The occurrence delivered: a one-shot's target, or a recurring record's latest due one."""
    skipped: int
    """Earlier due occurrences of a recurring record this delivery passes over (0 for one-shots)."""
    snoozed_from: Instant | None = None
    """For a snoozed delivery (``due_at`` is then the snooze instant): the occurrence it stands
    for."""
    end: End | None = None
    """For a recurring record with ``ends`` (SPEC §11): where it stands after this delivery."""

    @property
    def key(self) -> str:
        """``id@scheduledAt``: the same before and after a crash, so a host can spot a repeat
        (for a snoozed delivery, the occurrence the snooze moved)."""
        if self.snoozed_from is not None:
            return f"{self.record.id}@{format_instant(self.snoozed_from)}"
        return f"{self.record.id}@{self.record.scheduled_at}"


@final
class Delivery(msgspec.Struct, frozen=True, kw_only=True):
    """One accepted follow-up turn: what to frame, and the dispatch changes to append after it."""

    kind: DeliveryKind
    decided_at: Instant
    occurrences: tuple[Occurrence, ...]
    changes: tuple[ScheduleDispatchChange, ...]


def next_wakeup(state: ScheduleFold) -> Instant | None:
    """The earliest active target, or ``None`` when nothing is active."""
    earliest = [
        record_target(record)
        for record in (state.earliest_one_shot(), state.earliest_every())
        if record is not None
    ]
    return min(earliest, default=None)


def plan_misses(state: ScheduleFold, now: Instant) -> tuple[ScheduleMissChange, ...]:
    """The ``miss`` changes a decision at ``now`` records (Rule 4): for the earliest due
    one-shot when it is too late, and for every due recurring record that is."""
    misses: list[ScheduleMissChange] = []
    one_shot = state.earliest_one_shot()
    if one_shot is not None and record_target(one_shot) <= now and _too_late(state, one_shot, now):
        misses.append(miss_change(one_shot.id, state.occurrence_of(one_shot.id), now))
    misses.extend(
        miss_change(record.id, state.occurrence_of(record.id), now)
        for record in state.everies_due(now)
        if _too_late(state, record, now)
    )
    return tuple(misses)


def _too_late(state: ScheduleFold, record: ScheduleRecord, now: Instant) -> bool:
    lateness = record_max_lateness(record)
    if lateness is None:
        return False
    since = record_target(record)
    late_from = state.status(record.id).late_from
    if late_from is not None:
        since = max(since, parse_instant(late_from))
    return now - since > lateness * MS_PER_SECOND


def plan_delivery(state: ScheduleFold, now: Instant) -> Delivery | None:
    """The delivery due at decision time ``now``, or ``None`` when nothing is due; records too
    late to deliver (Rule 4, :func:`plan_misses`) are passed over."""
    one_shot = state.earliest_one_shot()
    if (
        one_shot is not None
        and record_target(one_shot) <= now
        and not _too_late(state, one_shot, now)
    ):
        snoozed_from = state.status(one_shot.id).snoozed_from
        return Delivery(
            kind="one-shot",
            decided_at=now,
            occurrences=(
                Occurrence(
                    record=one_shot,
                    due_at=record_target(one_shot),
                    skipped=0,
                    snoozed_from=None if snoozed_from is None else parse_instant(snoozed_from),
                ),
            ),
            changes=(dispatch_change(one_shot.id),),
        )
    due = [record for record in state.everies_due(now) if not _too_late(state, record, now)]
    if not due:
        return None
    return Delivery(
        kind="batch",
        decided_at=now,
        occurrences=tuple(
            _with_end(
                state,
                latest_occurrence(record, now, snoozed_from=_snoozed_from(state, record)),
                now,
            )
            for record in due
        ),
        changes=tuple(dispatch_change(record.id, now) for record in due),
    )


def _with_end(state: ScheduleFold, occurrence: Occurrence, now: Instant) -> Occurrence:
    """``occurrence`` of a recurring record delivered at ``now``, with its :class:`End` when the
    record has ``ends``, or when this delivery ends it anyway (a calendar rule's ``COUNT`` or
    ``UNTIL`` used up, no occurrence left before year 10000): as the fold will move it on the
    dispatch (Rule 6)."""
    record = occurrence.record
    if not isinstance(record, RECURRING_RECORDS):
        return occurrence
    ends = record_ends(record)
    grid = state.occurrence_of(record.id)
    following = next_occurrence(record, grid, max(now, grid))
    exhausted = following is None or following > MAX_INSTANT
    if ends is None:
        if not exhausted:
            return occurrence
        return msgspec.structs.replace(occurrence, end=End(last=True, runs_left=None, until=None))
    runs_left = None
    if ends.max_runs is not None:
        runs_left = ends.max_runs - state.status(record.id).runs - 1
    last = (
        runs_left == 0
        or exhausted
        or (
            following is not None
            and ends.until is not None
            and format_instant(Instant(following)) > ends.until
        )
    )
    return msgspec.structs.replace(
        occurrence, end=End(last=last, runs_left=runs_left, until=ends.until)
    )


def _snoozed_from(state: ScheduleFold, record: ScheduleRecord) -> Instant | None:
    snoozed_from = state.status(record.id).snoozed_from
    return None if snoozed_from is None else parse_instant(snoozed_from)


def latest_occurrence(
    record: RecurringScheduleRecord, now: Instant, *, snoozed_from: Instant | None = None
) -> Occurrence:
    """The occurrence of ``record`` a delivery decided at ``now`` delivers: its latest due one,
    with the earlier due ones it passes over counted — or, while snoozed (``snoozed_from``: the
    occurrence the snooze moved), the snoozed delivery standing for that occurrence.

    No occurrence after the record's ``ends.until`` is delivered (SPEC §11): a delivery decided
    after it is that of the latest occurrence up to it, and only the ones before that count as
    skipped."""
    ends = record_ends(record)
    if ends is not None and ends.until is not None:
        now = Instant(min(now, parse_instant(ends.until)))
    if snoozed_from is not None:
        return _snoozed_occurrence(record, snoozed_from, now)
    if isinstance(record, DailyScheduleRecord):
        due_at, skipped = latest_daily_due(record, now)
        return Occurrence(record=record, due_at=due_at, skipped=skipped)
    if isinstance(record, CalendarScheduleRecord):
        due_at, skipped = latest_calendar_due(record, now)
        return Occurrence(record=record, due_at=due_at, skipped=skipped)
    target = record_target(record)
    skipped = skipped_occurrences(target, now, record.every_seconds)
    due_at = Instant(target + skipped * record.every_seconds * MS_PER_SECOND)
    return Occurrence(record=record, due_at=due_at, skipped=skipped)


def _snoozed_occurrence(
    record: RecurringScheduleRecord, occurrence: Instant, now: Instant
) -> Occurrence:
    """A snoozed recurring delivery at ``now``: due at the snooze instant, standing for
    ``occurrence``, passing over the occurrences after it up to ``now``."""
    skipped = 0
    if now > occurrence:
        if isinstance(record, EveryScheduleRecord):
            skipped = skipped_occurrences(occurrence, now, record.every_seconds)
        elif isinstance(record, DailyScheduleRecord):
            at_occurrence = msgspec.structs.replace(record, scheduled_at=format_instant(occurrence))
            skipped = latest_daily_due(at_occurrence, now)[1]
        else:
            at_date = msgspec.structs.replace(record, scheduled_at=format_instant(occurrence))
            skipped = latest_calendar_due(at_date, now)[1]
    return Occurrence(
        record=record, due_at=record_target(record), skipped=skipped, snoozed_from=occurrence
    )
