"""The fold: a Session's ``schedule/change`` events, replayed into the set of active reminders.

Theory of operation
-------------------
The log is the only authority (SPEC §4). The fold reads it front to back, one change at a time, in
O(1) per change, and keeps:

- the **active records**, keyed by id;
- the **largest id number** used anywhere in the stream, so the allocator (one past it) never
  reuses an id — not even in a fork, whose inherited history it reads but does not activate;
- once anyone asks what is due, two **heaps** of active targets (one-shots and recurring records),
  built on that first question and kept up to date from then on. Replaying a log builds none.

Rules
-----
Rule 1 — *create* adds a record under an id greater than every id the stream has used (the
allocator's invariant). Any other id — a reused one, active or ended, inherited or not, or one
that goes backwards — is corruption. Creation order is therefore id order.

Rule 2 — *delete* ends an active record. Deleting an id that is not active is corruption (the tool
layer never appends such a delete: deleting a non-active id is a no-op there).

Rule 3 — *dispatch* of a one-shot (``after``, ``at``) carries no ``acceptedAt`` and ends the
record. A one-shot dispatch with ``acceptedAt`` is corruption.

Rule 4 — *dispatch* of an Every record carries ``acceptedAt`` (the decision time ``D``), which may
not precede the record's target ``s``. With interval ``i`` the record advances to
``s + (floor((D - s) / i) + 1) · i``, the first anchor-aligned target after ``D``; when that is past
``9999-12-31T23:59:59.999Z`` the record ends instead. An Every dispatch without ``acceptedAt`` is
corruption.

Rule 4d — *dispatch* of a ``daily`` record follows Rule 4, except that the record advances to its
first occurrence after ``D`` (``session_schedule.core.daily``: a few zone resolutions, however long
ago ``s`` was); when there is none up to ``9999-12-31T23:59:59.999Z`` the record ends instead.

Rule 5 — a **fork** (``seed_length`` > 0) applies only Rule 1's bookkeeping of used ids to the
first ``seed_length`` entries: the fork keeps the parent's history but none of its active
reminders, so any later delete or dispatch of an inherited id is corruption.

Invariants: every active record's target is a canonical in-range instant; an id is active at most
once; the allocator's next id is greater than every id in the stream. A change that breaks a rule
is rejected with ``corrupt_schedule_log`` and leaves the state exactly as it was.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from typing import Final, TypeAlias, final

import msgspec

from session_schedule.core.changes import (
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
    corrupt,
    create_change,
)
from session_schedule.core.daily import next_daily_target
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import ID_PREFIX, ScheduleId, id_number, make_schedule_id
from session_schedule.core.instants import (
    MAX_INSTANT,
    MS_PER_SECOND,
    Instant,
    canonical_instant,
    format_instant,
    why_not_canonical,
)
from session_schedule.core.ordered_views import OrderedViews, order_key
from session_schedule.core.plain import ReadOnlyDict
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    RecurringScheduleRecord,
    ScheduleRecord,
    ScheduleView,
    is_recurring,
    record_kind,
)


def next_every_target(target: Instant, decided_at: Instant, every_seconds: int) -> int:
    """The first anchor-aligned target strictly after ``decided_at`` (``decided_at ≥ target``).

    O(1): ``s + (floor((D - s) / i) + 1) · i``. The result may lie past ``MAX_INSTANT``.
    """
    interval = every_seconds * MS_PER_SECOND
    return target + ((decided_at - target) // interval + 1) * interval


def skipped_occurrences(target: Instant, decided_at: Instant, every_seconds: int) -> int:
    """How many due occurrences before the latest one a dispatch at ``decided_at`` passes over."""
    return (decided_at - target) // (every_seconds * MS_PER_SECOND)


# A heap slot: (scheduledAt, id number, id). A slot is live only while its record is active with
# exactly that target; stale slots are dropped when they reach the top.
_Slot: TypeAlias = tuple[str, int, ScheduleId]
_ID_DIGITS: Final = len(ID_PREFIX)


@final
class ScheduleFold:
    """The folded state of one Session's schedule, updated one change at a time.

    ``session`` only names the Session in error messages.
    """

    def __init__(self, *, session: str = "") -> None:
        self._session = session
        self._records: dict[ScheduleId, ScheduleRecord] = {}
        # Integer targets of the active recurring records, so that a recurring dispatch — the
        # commonest change in a long-lived log — converts only its own ``acceptedAt``. Until
        # someone asks what is due (no heaps yet: a replay), a dispatch only moves this target
        # and marks the record stale; its ``scheduledAt`` is rewritten when the record is next
        # read.
        self._every_targets: dict[ScheduleId, int] = {}
        self._stale: set[ScheduleId] = set()
        self._highest_id = 0
        # Due one-shots take priority over recurring batches (SPEC §6), so the two are kept apart.
        self._heaps: tuple[list[_Slot], list[_Slot]] | None = None
        # The records in list order with their views, built when first asked for (never by a
        # replay) and kept up to date from then on.
        self._order: OrderedViews | None = None

    @classmethod
    def resumed(
        cls, records: Iterable[ScheduleRecord], *, highest_id: int, session: str = ""
    ) -> ScheduleFold:
        """The state a snapshot describes: ``records`` active (in creation order) and
        ``highest_id`` the largest id number the stream used.

        Raises ``corrupt_schedule_log`` when that state is impossible: ids not increasing, or
        an id above ``highest_id``.
        """
        state = cls(session=session)
        for record in records:
            state.apply(create_change(record))
        if highest_id < state._highest_id:
            raise corrupt(
                "",
                f"the snapshot's largest id number {highest_id} is below an active id "
                f"{make_schedule_id(state._highest_id)}",
            )
        state._highest_id = highest_id
        return state

    # -- reading -----------------------------------------------------------------------------

    @property
    def highest_id(self) -> int:
        """The largest id number the stream used (0 when none)."""
        return self._highest_id

    def by_creation(self) -> list[ScheduleRecord]:
        """The active records in creation (id) order."""
        self._refresh_all()
        return sorted(self._records.values(), key=lambda record: id_number(record.id))

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, schedule_id: object) -> bool:
        return schedule_id in self._records

    def get(self, schedule_id: ScheduleId) -> ScheduleRecord | None:
        if schedule_id in self._stale:
            self._refresh(schedule_id)
        return self._records.get(schedule_id)

    def next_id(self) -> ScheduleId:
        """The id the next create must use: greater than any in the stream."""
        return make_schedule_id(self._highest_id + 1)

    def ordered(self) -> list[ScheduleRecord]:
        """The active records in target order, then creation order."""
        return self._ordered_views().records()

    def views(self, now: Instant) -> list[ScheduleView]:
        """The views of the active records as seen at ``now``, in target order, then creation
        order. After the first call, the cost is two slices of ready-made lists."""
        return self._ordered_views().views(format_instant(now))

    def plain_views(self, now: Instant) -> list[ReadOnlyDict]:
        """:meth:`views` in their JSON-ready form (``msgspec.to_builtins`` of each), as shared
        read-only dicts (:mod:`session_schedule.core.plain`), in a new list. After the first
        call, the cost is two slices of ready-made lists."""
        return self._ordered_views().plain_views(format_instant(now))

    def _ordered_views(self) -> OrderedViews:
        if self._order is None:
            self._refresh_all()
            self._order = OrderedViews(self._records.values())
        return self._order

    def earliest_one_shot(self) -> ScheduleRecord | None:
        return self._peek(self._indexed()[0])

    def earliest_every(self) -> RecurringScheduleRecord | None:
        """The recurring (``every`` or ``daily``) record with the earliest target."""
        record = self._peek(self._indexed()[1])
        return record if isinstance(record, EveryScheduleRecord | DailyScheduleRecord) else None

    def everies_due(self, now: Instant) -> list[RecurringScheduleRecord]:
        """The recurring records whose target is at or before ``now``, in target then creation
        order.

        Walks only the heap slots that are due (a heap's due slots form a subtree at its root),
        so the cost follows the number of due records, not of active ones.
        """
        heap = self._indexed()[1]
        now_text = format_instant(now)
        due: list[RecurringScheduleRecord] = []
        stack = [0] if heap else []
        while stack:
            index = stack.pop()
            slot = heap[index]
            if slot[0] > now_text:
                continue
            record = self._live(slot)
            if isinstance(record, EveryScheduleRecord | DailyScheduleRecord):
                due.append(record)
            stack.extend(child for child in (2 * index + 1, 2 * index + 2) if child < len(heap))
        return sorted(due, key=order_key)

    # -- applying ----------------------------------------------------------------------------

    def apply(self, change: ScheduleChange, *, position: int | None = None) -> None:
        """Apply one change, or raise ``corrupt_schedule_log`` and change nothing.

        ``position`` (the change's entry position in the Session log) locates it in errors.
        """
        # Type tests rather than ``match`` (the change classes are final):
        # replay runs this once per stored change.
        if type(change) is ScheduleCreateChange:
            record = change.schedule
            number = id_number(record.id)
            if number <= self._highest_id:
                raise self._corrupt(
                    position,
                    f"create uses the id {record.id}, but ids must increase and "
                    f"{make_schedule_id(self._highest_id)} was already used",
                )
            self._highest_id = number
            if type(record) is EveryScheduleRecord or type(record) is DailyScheduleRecord:
                self._every_targets[record.id] = self._target(record, position)
            self._records[record.id] = record
            if self._heaps is not None:
                heapq.heappush(self._heaps[is_recurring(record)], _slot(record))
            if self._order is not None:
                self._order.add(record)
            return
        record_or_none = self._records.get(change.id)
        if record_or_none is None:
            operation = "delete" if type(change) is ScheduleDeleteChange else "dispatch"
            raise self._corrupt(position, f"{operation} of {change.id}, which is not active")
        if type(change) is ScheduleDeleteChange:
            if self._order is not None:
                self._order.remove(record_or_none)
            del self._records[change.id]
            if change.id in self._every_targets:
                del self._every_targets[change.id]
                self._stale.discard(change.id)
        elif type(change) is ScheduleDispatchChange:
            self._dispatch(record_or_none, change.accepted_at, position)

    def replay(
        self, changes: Iterable[tuple[int, ScheduleChange]], *, seed_length: int = 0
    ) -> None:
        """Apply ``(entry position, change)`` pairs in order: :meth:`note_inherited` for the
        positions below ``seed_length`` (Rule 5), :meth:`apply` for the others.

        The rules, the errors and the resulting state are exactly those of that loop; the first
        change that breaks a rule raises, with every change before it applied. Until someone
        asks what is due (no heaps, no ordered views: a log being replayed), the changes are
        applied by one loop over plain dictionaries rather than one method call each.
        """
        pairs = iter(changes)
        for position, change in pairs:
            if position >= seed_length:
                pairs = itertools.chain([(position, change)], pairs)
                break
            self.note_inherited(change)
        if self._heaps is not None or self._order is not None:
            for position, change in pairs:
                self.apply(change, position=position)
        else:
            self._replay_unindexed(pairs)

    def _replay_unindexed(self, changes: Iterable[tuple[int, ScheduleChange]]) -> None:
        """:meth:`apply` for each change while nothing is indexed, as one loop over plain
        dictionaries."""
        records = self._records
        targets = self._every_targets
        stale = self._stale
        active = records.get
        mark_stale = stale.add
        instant = canonical_instant
        highest = self._highest_id
        try:
            for position, change in changes:
                if type(change) is ScheduleCreateChange:
                    record = change.schedule
                    schedule_id = record.id
                    number = int(schedule_id[_ID_DIGITS:])
                    if number <= highest:
                        raise self._corrupt(
                            position,
                            f"create uses the id {schedule_id}, but ids must increase and "
                            f"{make_schedule_id(highest)} was already used",
                        )
                    highest = number
                    if type(record) is EveryScheduleRecord or type(record) is DailyScheduleRecord:
                        target = instant(record.scheduled_at)
                        targets[schedule_id] = (
                            self._target(record, position) if target is None else target
                        )
                    records[schedule_id] = record
                    continue
                schedule_id = change.id
                current = active(schedule_id)
                if current is None:
                    operation = "delete" if type(change) is ScheduleDeleteChange else "dispatch"
                    raise self._corrupt(
                        position, f"{operation} of {schedule_id}, which is not active"
                    )
                if type(change) is ScheduleDeleteChange:
                    del records[schedule_id]
                    if schedule_id in targets:
                        del targets[schedule_id]
                        stale.discard(schedule_id)
                    continue
                accepted_at = change.accepted_at
                if accepted_at is msgspec.UNSET and (
                    type(current) is AfterScheduleRecord or type(current) is AtScheduleRecord
                ):
                    del records[schedule_id]  # Rule 3: a one-shot dispatch ends the record
                    continue
                if type(current) is EveryScheduleRecord and type(accepted_at) is str:
                    # Rule 4 inline for the commonest change of a long log; anything but the
                    # plain case goes to _dispatch, which says what is wrong.
                    target = targets[schedule_id]
                    decided_at = instant(accepted_at)
                    if decided_at is not None and decided_at >= target:
                        interval = current.every_seconds * MS_PER_SECOND
                        following = target + ((decided_at - target) // interval + 1) * interval
                        if following <= MAX_INSTANT:
                            targets[schedule_id] = following
                            mark_stale(schedule_id)
                            continue
                self._dispatch(current, accepted_at, position)
        finally:
            self._highest_id = highest

    def note_inherited(self, change: ScheduleChange) -> None:
        """Rule 5: remember the ids an inherited (pre-seed) change uses, and nothing else."""
        if isinstance(change, ScheduleCreateChange):
            self._highest_id = max(self._highest_id, id_number(change.schedule.id))

    def _dispatch(
        self, record: ScheduleRecord, accepted_at: str | msgspec.UnsetType, position: int | None
    ) -> None:
        if not isinstance(record, EveryScheduleRecord | DailyScheduleRecord):
            if isinstance(accepted_at, str):
                raise self._corrupt(
                    position, f"dispatch of one-shot {record.id} carries `acceptedAt`"
                )
            if self._order is not None:
                self._order.remove(record)
            del self._records[record.id]
            return
        if not isinstance(accepted_at, str):
            raise self._corrupt(
                position, f"dispatch of {record_kind(record)}-record {record.id} lacks `acceptedAt`"
            )
        target = Instant(self._every_targets[record.id])
        decided_at_ms = canonical_instant(accepted_at)
        if decided_at_ms is None:
            raise self._corrupt(position, f"{why_not_canonical(accepted_at)} - at `$.acceptedAt`")
        decided_at = Instant(decided_at_ms)
        if decided_at < target:
            raise self._corrupt(
                position,
                f"dispatch of {record.id} was accepted at {accepted_at}, "
                f"before its target {format_instant(target)}",
            )
        following: int | None
        if isinstance(record, EveryScheduleRecord):
            following = next_every_target(target, decided_at, record.every_seconds)
        else:
            following = next_daily_target(record, decided_at)
        if self._order is not None:
            self._order.remove(record)
        if following is None or following > MAX_INSTANT:
            del self._records[record.id]
            del self._every_targets[record.id]
            self._stale.discard(record.id)
            return
        self._every_targets[record.id] = following
        if self._heaps is None and self._order is None:
            self._stale.add(record.id)
        else:
            self._activate(
                msgspec.structs.replace(record, scheduled_at=format_instant(Instant(following)))
            )

    def _target(self, record: ScheduleRecord, position: int | None) -> int:
        """The target of a record being created, as an integer."""
        target = canonical_instant(record.scheduled_at)
        if target is None:
            raise self._corrupt(
                position, f"{why_not_canonical(record.scheduled_at)} - at `$.schedule.scheduledAt`"
            )
        return target

    def _corrupt(self, position: int | None, problem: str) -> ScheduleError:
        where = "" if position is None else f"at entry {position}"
        if self._session:
            where = f"{where} of session {self._session}".lstrip()
        return corrupt(where, problem)

    def _activate(self, record: ScheduleRecord) -> None:
        self._records[record.id] = record
        if self._heaps is not None:
            heapq.heappush(self._heaps[is_recurring(record)], _slot(record))
        if self._order is not None:
            self._order.add(record)

    def _refresh(self, schedule_id: ScheduleId) -> None:
        self._stale.discard(schedule_id)
        target = format_instant(Instant(self._every_targets[schedule_id]))
        self._records[schedule_id] = msgspec.structs.replace(
            self._records[schedule_id], scheduled_at=target
        )

    def _refresh_all(self) -> None:
        for schedule_id in list(self._stale):
            self._refresh(schedule_id)

    def _indexed(self) -> tuple[list[_Slot], list[_Slot]]:
        if self._heaps is None:
            self._refresh_all()
            one_shots: list[_Slot] = []
            everies: list[_Slot] = []
            for record in self._records.values():
                (everies if is_recurring(record) else one_shots).append(_slot(record))
            heapq.heapify(one_shots)
            heapq.heapify(everies)
            self._heaps = (one_shots, everies)
        return self._heaps

    def _live(self, slot: _Slot) -> ScheduleRecord | None:
        record = self._records.get(slot[2])
        if record is None or record.scheduled_at != slot[0]:
            return None
        return record

    def _peek(self, heap: list[_Slot]) -> ScheduleRecord | None:
        while heap:
            record = self._live(heap[0])
            if record is not None:
                return record
            heapq.heappop(heap)
        return None


def _slot(record: ScheduleRecord) -> _Slot:
    return record.scheduled_at, id_number(record.id), record.id


def fold(
    changes: Iterable[tuple[int, ScheduleChange]], *, seed_length: int = 0, session: str = ""
) -> ScheduleFold:
    """Fold a Session's schedule changes, given as ``(entry position, change)`` pairs in order.

    Changes at positions below ``seed_length`` are a fork's inherited history (Rule 5). Raises
    ``corrupt_schedule_log`` naming the entry of the first change that breaks a rule.
    """
    state = ScheduleFold(session=session)
    state.replay(changes, seed_length=seed_length)
    return state
