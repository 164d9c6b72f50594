"""Delivery planning: what is due at ``now``, and when the owner must look again (SPEC §3, §6).

Rule 1 — due one-shots take priority and go **one per follow-up turn**: the earliest due one-shot
(target order, then creation order) is delivered alone.

Rule 2 — only when no one-shot is due, **every** due recurring record (``every`` and ``daily``
alike) contributes its latest due occurrence to **one batch**, in target then creation order, all
dispatched with the same decision time. Missed occurrences are counted, never enumerated or
replayed.

Rule 3 — the owner wakes at the earliest active target; with nothing active it has nothing to wait
for (its own bounded wait still re-reads the wall clock).
"""

from __future__ import annotations

from typing import Literal, TypeAlias, final

import msgspec

from session_schedule.core.changes import ScheduleDispatchChange, dispatch_change
from session_schedule.core.daily import latest_daily_due
from session_schedule.core.fold import ScheduleFold, skipped_occurrences
from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.core.records import (
    EveryScheduleRecord,
    RecurringScheduleRecord,
    ScheduleRecord,
    record_target,
)

DeliveryKind: TypeAlias = Literal["one-shot", "batch"]


@final
class Occurrence(msgspec.Struct, frozen=True, kw_only=True):
    """One reminder inside a follow-up turn."""

    record: ScheduleRecord
    """The record as it stood when the decision was taken."""
    due_at: Instant
    """The occurrence delivered: a one-shot's target, or a recurring record's latest due one."""
    skipped: int
    """Earlier due occurrences of a recurring record this delivery passes over (0 for one-shots)."""

    @property
    def key(self) -> str:
        """``id@scheduledAt``: the same before and after a crash, so a host can spot a repeat."""
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


def plan_delivery(state: ScheduleFold, now: Instant) -> Delivery | None:
    """The delivery due at decision time ``now``, or ``None`` when nothing is due."""
    one_shot = state.earliest_one_shot()
    if one_shot is not None and record_target(one_shot) <= now:
        return Delivery(
            kind="one-shot",
            decided_at=now,
            occurrences=(Occurrence(record=one_shot, due_at=record_target(one_shot), skipped=0),),
            changes=(dispatch_change(one_shot.id),),
        )
    due = state.everies_due(now)
    if not due:
        return None
    return Delivery(
        kind="batch",
        decided_at=now,
        occurrences=tuple(latest_occurrence(record, now) for record in due),
        changes=tuple(dispatch_change(record.id, now) for record in due),
    )


def latest_occurrence(record: RecurringScheduleRecord, now: Instant) -> Occurrence:
    """The occurrence of ``record`` a delivery decided at ``now`` delivers: its latest due one,
    with the earlier due ones it passes over counted."""
    if not isinstance(record, EveryScheduleRecord):
        due_at, skipped = latest_daily_due(record, now)
        return Occurrence(record=record, due_at=due_at, skipped=skipped)
    target = record_target(record)
    skipped = skipped_occurrences(target, now, record.every_seconds)
    due_at = Instant(target + skipped * record.every_seconds * MS_PER_SECOND)
    return Occurrence(record=record, due_at=due_at, skipped=skipped)
