"""The upcoming occurrences of active reminders, expanded for reading (the ``timeline`` view).

Pure arithmetic on the folded records: an overdue record contributes the one occurrence its next
delivery will carry (a recurring one its latest due occurrence, with the count it skips), and a
recurring record then its later occurrences — an ``every`` record's anchor-aligned targets, a
``daily`` record's listed dates or a ``calendar`` record's rule dates resolved in its zone.
Occurrences are computed lazily, so the work follows the number of occurrences listed, not the
window's length; counting them is O(1).

With the fold's SPEC §11 statuses: a paused reminder has no occurrence; a snoozed one first its
snoozed delivery, then its occurrences after the one the snooze moved; ``ends`` bounds a
recurring reminder's occurrences (none after ``until``, at most the runs left). A reminder due
later than its ``maxLatenessSeconds`` is not delivered: :func:`record_misses` applies the ``miss``
changes the owner records first — the core's own :func:`~session_schedule.core.due.plan_misses`,
so the view cannot drift from the owner — and the timeline lists each as a ``missed`` row (the
occurrence the change names) before what the reminder does after it (its next target; a one-shot
ends).
"""

from __future__ import annotations

import heapq
import itertools
import zoneinfo
from collections.abc import Iterable, Iterator, Mapping
from typing import Literal, TypeAlias, final

import msgspec

from session_schedule.core import calendar
from session_schedule.core.calendar import latest_calendar_due
from session_schedule.core.daily import (
    LAST_DAY,
    count_listed,
    first_after,
    latest_daily_due,
    listed_from,
    listed_until,
    occurrence_on,
    rule_of,
)
from session_schedule.core.due import plan_misses
from session_schedule.core.fold import (
    ScheduleFold,
    next_every_target,
    next_occurrence,
    skipped_occurrences,
)
from session_schedule.core.ids import ScheduleId, id_number
from session_schedule.core.instants import (
    MAX_INSTANT,
    MS_PER_SECOND,
    Instant,
    format_instant,
    instant_of_canonical,
    parse_instant,
)
from session_schedule.core.records import (
    NO_STATUS,
    RECURRING_RECORDS,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    RecordKind,
    RecordStatus,
    ScheduleRecord,
    is_recurring,
    record_ends,
    record_kind,
    record_target,
)
from session_schedule.core.time_input import format_local

TimelineState: TypeAlias = Literal["scheduled", "overdue", "missed"]
"""``overdue``: delivered the next time the session is open live; ``missed``: recorded as missed
then instead (SPEC §11, later than ``maxLatenessSeconds``), nothing delivered."""


@final
class TimelineOccurrence(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One upcoming (or overdue) occurrence of an active reminder."""

    id: ScheduleId
    kind: RecordKind
    scheduled_at: str
    """The occurrence's target, canonical UTC."""
    local: str
    """The same instant in the chosen zone (RFC 3339 with its offset)."""
    state: TimelineState
    skipped: int
    """For an overdue recurring reminder: the earlier due occurrences its delivery passes over
    (0 for a missed one: a miss passes nothing over, as ``history`` records it)."""
    prompt: str


@final
class Timeline(msgspec.Struct, frozen=True, kw_only=True):
    """The ``timeline --json`` document."""

    now: str
    until: str
    zone: str
    limit: int
    total: int
    """How many occurrences the window holds (more than are listed when ``truncated``)."""
    truncated: bool
    occurrences: list[TimelineOccurrence]


@final
class TimelineMiss(msgspec.Struct, frozen=True, kw_only=True):
    """A ``miss`` change the owner records the next time it runs, with the record it misses."""

    record: ScheduleRecord
    """The record as it stood before the miss (a one-shot is gone after it)."""
    occurrence: Instant
    """The occurrence the change names: the record's oldest overdue one (for a snoozed record,
    the occurrence the snooze moved)."""


def record_misses(state: ScheduleFold, now: Instant) -> tuple[TimelineMiss, ...]:
    """The misses the owner records when it runs at ``now``, applied to ``state`` as it applies
    them, so ``state`` then holds what the owner goes on with (a recurring record at its first
    target after ``now``, a missed one-shot ended).

    :func:`~session_schedule.core.due.plan_misses` misses the earliest due one-shot only; the
    owner's next decision misses the following one, so the rounds repeat until none is left. A
    missed recurring record is due no more at ``now`` and a missed one-shot ends, so they do.
    """
    misses: list[TimelineMiss] = []
    while planned := plan_misses(state, now):
        for change in planned:
            record = state.get(change.id)
            if record is None:  # pragma: no cover - plan_misses names active records only
                raise AssertionError(f"miss of {change.id}, which is not active")
            occurrence = parse_instant(change.scheduled_at)
            misses.append(TimelineMiss(record=record, occurrence=occurrence))
            state.apply(change)
    return tuple(misses)


def build_timeline(
    records: Iterable[ScheduleRecord],
    *,
    now: Instant,
    until: Instant,
    zone: zoneinfo.ZoneInfo,
    limit: int,
    statuses: Mapping[ScheduleId, RecordStatus] | None = None,
    missed: Iterable[TimelineMiss] = (),
) -> Timeline:
    """The occurrences of ``records`` up to ``until`` (inclusive), at most ``limit`` of them, in
    time order.

    An overdue record contributes the one occurrence its next delivery will carry — a recurring
    one its latest due occurrence — and a recurring record then its anchor-aligned targets after
    ``now``. When the window holds more than ``limit``, the next occurrence of every record is
    listed first (the soonest records' when there are more records than ``limit``), and the
    rest of the room goes to the soonest other occurrences: one frequent rule never hides the
    others. Targets are computed with integer arithmetic from ``scheduledAt``, lazily, so the
    work follows ``limit``, not the length of the window. ``statuses`` are the fold's SPEC §11
    statuses of the records (none: no record is paused or snoozed); ``missed`` the misses
    :func:`record_misses` applied to them, each listed first as a ``missed`` row of its own.
    """
    found = statuses or {}
    records = list(records)
    planned = [_planned(record, found.get(record.id, NO_STATUS), now, until) for record in records]
    misses: list[_Stream] = [iter([(miss.occurrence, miss.record, True)]) for miss in missed]
    total = sum(count for _, count in planned) + len(misses)
    streams = [*misses, *(stream for stream, _ in planned)]
    firsts: list[_Item] = []
    for stream in streams:
        first = next(stream, None)
        if first is not None:
            firsts.append(first)
    firsts = heapq.nsmallest(limit, firsts, key=_order)
    later = heapq.merge(*streams, key=_order)
    chosen = sorted([*firsts, *itertools.islice(later, limit - len(firsts))], key=_order)
    occurrences = [
        _occurrence(record, instant, zone, now, found.get(record.id, NO_STATUS), missed=miss)
        for instant, record, miss in chosen
    ]
    return Timeline(
        now=format_instant(now),
        until=format_instant(until),
        zone=str(zone.key),
        limit=limit,
        total=total,
        truncated=total > limit,
        occurrences=occurrences,
    )


_Item: TypeAlias = tuple[Instant, ScheduleRecord, bool]
"""An occurrence, its record, and whether it is a miss."""
_Stream: TypeAlias = Iterator[_Item]


def _order(item: _Item) -> tuple[Instant, int]:
    """Time order, then creation order."""
    return item[0], id_number(item[1].id)


def _planned(
    record: ScheduleRecord, status: RecordStatus, now: Instant, until: Instant
) -> tuple[_Stream, int]:
    """The occurrences of ``record`` with ``status`` up to ``until``, and how many there are."""
    if status.paused:
        return iter(()), 0
    ends = record_ends(record)
    end = until
    if ends is not None and ends.until is not None:
        end = Instant(min(until, instant_of_canonical(ends.until)))
    if status.snoozed_from is None:
        stream, count = _occurrences(record, now, end), _count(record, now, end)
    else:
        # The snoozed delivery, then the occurrences after the one it moved.
        snoozed = record_target(record)
        head = [(snoozed, record, False)] if snoozed <= until or snoozed <= now else []
        stream, count = iter(head), len(head)
        if isinstance(record, RECURRING_RECORDS):
            moved = instant_of_canonical(status.snoozed_from)
            following = next_occurrence(record, moved, max(now, snoozed, moved))
            if following is not None:
                rest = msgspec.structs.replace(
                    record, scheduled_at=format_instant(Instant(following))
                )
                stream = itertools.chain(stream, _occurrences(rest, now, end))
                count += _count(rest, now, end)
    if ends is not None and ends.max_runs is not None:
        left = ends.max_runs - status.runs
        return itertools.islice(stream, left), min(count, left)
    return stream, count


def _occurrences(record: ScheduleRecord, now: Instant, until: Instant) -> _Stream:
    target = record_target(record)
    if isinstance(record, DailyScheduleRecord):
        yield from _daily_occurrences(record, now, until)
        return
    if isinstance(record, CalendarScheduleRecord):
        yield from _calendar_occurrences(record, now, until)
        return
    if not isinstance(record, EveryScheduleRecord):
        if target <= until or target <= now:
            yield target, record, False
        return
    interval = record.every_seconds * MS_PER_SECOND
    if target <= now:
        skipped = skipped_occurrences(target, now, record.every_seconds)
        yield Instant(target + skipped * interval), record, False
        target = Instant(next_every_target(target, now, record.every_seconds))
    while target <= min(until, MAX_INSTANT):
        yield target, record, False
        target = Instant(target + interval)


def _daily_occurrences(record: DailyScheduleRecord, now: Instant, until: Instant) -> _Stream:
    # The record's next delivery (its latest due occurrence when overdue), then the occurrences
    # after it, date by date.
    target = record_target(record)
    if target <= now:
        yield latest_daily_due(record, now)[0], record, False
    elif target <= until:
        yield target, record, False
    else:
        return
    rule = rule_of(record)
    found = first_after(rule, max(now, target))
    if found is None:
        return
    day = found[0]
    while True:
        occurrence = occurrence_on(rule, day)
        if occurrence > min(until, MAX_INSTANT):
            return
        yield Instant(occurrence), record, False
        day = listed_from(rule, day + 1)


def _calendar_occurrences(record: CalendarScheduleRecord, now: Instant, until: Instant) -> _Stream:
    # As for a daily record: the next delivery, then the rule's later dates one by one.
    target = record_target(record)
    if target <= now:
        yield latest_calendar_due(record, now)[0], record, False
    elif target <= until:
        yield target, record, False
    else:
        return
    schedule = calendar.schedule_of(record)
    instant = max(now, target)
    while True:
        found = calendar.first_after(schedule, instant)
        if found is None or found[1] > min(until, MAX_INSTANT):
            return
        yield Instant(found[1]), record, False
        instant = Instant(found[1])


def _calendar_count(record: CalendarScheduleRecord, now: Instant, until: Instant) -> int:
    target = record_target(record)
    if now < target and until < target:
        return 0
    schedule = calendar.schedule_of(record)
    dates = schedule.dates
    first = calendar.first_after(schedule, max(now, target))
    beyond = calendar.first_after(schedule, min(until, MAX_INSTANT))
    bound = calendar.last_date(dates) if beyond is None else beyond[0] - 1
    last = calendar.last_on_or_before(dates, bound)
    if first is None or last is None or last < first[0]:
        return 1
    return (
        1 + calendar.occurrence_index(dates, last) - calendar.occurrence_index(dates, first[0]) + 1
    )


def _count(record: ScheduleRecord, now: Instant, until: Instant) -> int:
    """How many items :func:`_occurrences` yields, in O(1)."""
    target = record_target(record)
    if isinstance(record, CalendarScheduleRecord):
        return _calendar_count(record, now, until)
    if isinstance(record, DailyScheduleRecord):
        if now < target and until < target:
            return 0
        rule = rule_of(record)
        first, beyond = first_after(rule, max(now, target)), first_after(rule, until)
        if first is None:
            return 1
        last = listed_until(rule, (LAST_DAY + 1 if beyond is None else beyond[0]) - 1)
        return 1 + count_listed(rule, first[0], last)
    if not isinstance(record, EveryScheduleRecord):
        return int(target <= until or target <= now)
    count = 0
    if target <= now:
        count = 1
        target = Instant(next_every_target(target, now, record.every_seconds))
    end = min(until, MAX_INSTANT)
    if target <= end:
        count += (end - target) // (record.every_seconds * MS_PER_SECOND) + 1
    return count


def _occurrence(
    record: ScheduleRecord,
    instant: Instant,
    zone: zoneinfo.ZoneInfo,
    now: Instant,
    status: RecordStatus,
    *,
    missed: bool = False,
) -> TimelineOccurrence:
    overdue = instant <= now and not missed  # a miss passes nothing over: no count to make
    skipped = 0
    if status.snoozed_from is not None and instant == record_target(record):
        moved = instant_of_canonical(status.snoozed_from)
        if overdue and is_recurring(record) and now > moved:
            # As the delivery counts them: the occurrences after the one the snooze moved.
            at_moved = msgspec.structs.replace(record, scheduled_at=status.snoozed_from)
            skipped = _occurrence(at_moved, moved, zone, now, NO_STATUS).skipped
    elif overdue and isinstance(record, EveryScheduleRecord):
        skipped = skipped_occurrences(record_target(record), now, record.every_seconds)
    elif overdue and isinstance(record, DailyScheduleRecord):
        skipped = latest_daily_due(record, now)[1]
    elif overdue and isinstance(record, CalendarScheduleRecord):
        skipped = latest_calendar_due(record, now)[1]
    return TimelineOccurrence(
        id=record.id,
        kind=record_kind(record),
        scheduled_at=format_instant(instant),
        local=format_local(instant, zone),
        state="missed" if missed else ("overdue" if overdue else "scheduled"),
        skipped=skipped,
        prompt=record.prompt,
    )
