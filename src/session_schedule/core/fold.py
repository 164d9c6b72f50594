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

Rule 6 — SPEC §11 manages a record in place, with version-3 changes on an active record (any
of them on a record that is not active is corruption). The fold keeps, beside each record that
carries ``ends`` or ``maxLatenessSeconds`` or has been paused or snoozed, a
:class:`~session_schedule.core.records.RecordStatus`: whether it is paused, the occurrence a
snooze stands for, the runs made, and the resume time of a one-shot resumed late. The runs of a
recurring record are its dispatches since it was created, counted whether or not it has a
``maxRuns`` yet (a later update may give it one: SPEC §11, "the record ends with its
``max_runs``-th dispatch"); a record with no other status has only its count, kept apart. A record's
``scheduledAt`` is always its next delivery (the snooze instant while snoozed); a recurring
record's *grid target* ``T`` is its next occurrence, which a snooze does not move.

- *update* replaces the record under the same id. Paused stays paused; runs are kept (an update
  whose ``maxRuns`` is not above the runs made is corruption). A snooze stays only when the rule
  and target are unchanged (a prompt, ``ends`` or lateness edit), else it is cleared.
- *pause* makes the record never due (pausing a paused one is corruption) and clears a snooze:
  a recurring record goes back to its grid target ``T``; a snoozed one-shot keeps the snooze
  instant ``S`` as its target (SPEC §11: "a one-shot's target becomes S"), so its occurrence
  is ``S`` from then on and a resume before ``S`` delivers at ``S``.
- *resume* (of a paused record only) at ``D``: a one-shot keeps its target, and if that passed,
  lateness is measured from ``D``; a recurring record moves to its first occurrence after ``D``.
- *snooze* to ``S`` (not of a paused record, nor past ``ends.until``): the next delivery is at
  ``S``, standing for the occurrence ``T`` (a second snooze keeps the first's ``T``).
- *dispatch* (Rules 3, 4, 4d) of a paused record is corruption; ``D`` may not precede the next
  delivery. A recurring record then moves to its first occurrence after ``max(D, T)``, counts a
  run, and ends when ``ends.maxRuns`` runs are made or its next target would pass
  ``ends.until``.
- *miss* records that the next delivery was decided more than ``maxLatenessSeconds`` after it
  (or after a late resume); it names the occurrence ``T``. A one-shot ends; a recurring record
  moves as a dispatch moves it, without counting a run. A miss of a record without
  ``maxLatenessSeconds``, or within it, is corruption.

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
from typing import Final, TypeAlias, assert_never, final

import msgspec

from session_schedule.core.calendar import next_calendar_target
from session_schedule.core.changes import (
    MANAGE_VERSION,
    ManageChange,
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
    ScheduleMissChange,
    SchedulePauseChange,
    ScheduleResumeChange,
    ScheduleSnoozeChange,
    ScheduleUpdateChange,
    corrupt,
    create_change,
    operation_of,
)
from session_schedule.core.daily import next_daily_target
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import ID_PREFIX, ScheduleId, id_number, make_schedule_id
from session_schedule.core.instants import (
    KNOWN_DATE_MS,
    KNOWN_SECOND_MS,
    MAX_INSTANT,
    MS_PER_SECOND,
    TIME_OF_DAY_MS,
    Instant,
    canonical_instant,
    format_instant,
    why_not_canonical,
)
from session_schedule.core.ordered_views import OrderedViews, order_key
from session_schedule.core.plain import ReadOnlyDict
from session_schedule.core.records import (
    NO_STATUS,
    RECURRING_RECORDS,
    AfterScheduleRecord,
    AtScheduleRecord,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    Ends,
    EveryScheduleRecord,
    RecordStatus,
    RecurringScheduleRecord,
    ScheduleRecord,
    ScheduleView,
    is_managed,
    is_recurring,
    record_ends,
    record_kind,
    record_max_lateness,
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


def next_occurrence(record: RecurringScheduleRecord, grid: int, after: int) -> int | None:
    """The first occurrence of ``record``'s rule strictly after ``after``, where ``grid`` is an
    occurrence of it (an ``every`` record's grid never moves), or ``None`` when there is none up
    to the end of the representable range. O(1) in the distance from ``grid`` to ``after``.

    The one place a recurring record kind states how its occurrences follow one another.
    """
    match record:
        case EveryScheduleRecord():
            if after < grid:
                return grid
            following = next_every_target(Instant(grid), Instant(after), record.every_seconds)
            return following if following <= MAX_INSTANT else None
        case DailyScheduleRecord():
            return next_daily_target(record, Instant(after))
        case CalendarScheduleRecord():
            return next_calendar_target(record, Instant(after))
        case _:
            assert_never(record)


def rule_of(record: ScheduleRecord, target: str) -> tuple[object, ...]:
    """What decides ``record``'s occurrences, with ``target`` as its next one: two records with
    the same rule deliver at the same instants (a prompt, ``ends`` or lateness may differ)."""
    match record:
        case AfterScheduleRecord():
            return ("after", record.after_seconds, target)
        case AtScheduleRecord():
            return ("at", target)
        case EveryScheduleRecord():
            return ("every", record.every_seconds, target)
        case DailyScheduleRecord():
            return ("daily", record.local_time, record.time_zone, tuple(record.weekdays), target)
        case CalendarScheduleRecord():
            return (
                "calendar",
                record.rule,
                record.local_time,
                record.time_zone,
                record.start_date,
                target,
            )
        case _:
            assert_never(record)


# A heap slot: (scheduledAt, id number, id). A slot is live only while its record is active with
# exactly that target; stale slots are dropped when they reach the top.
_Slot: TypeAlias = tuple[str, int, ScheduleId]
_ID_DIGITS: Final = len(ID_PREFIX)
_date_ms: Final = KNOWN_DATE_MS.get
_time_of_day_ms: Final = TIME_OF_DAY_MS.get
_second_ms: Final = KNOWN_SECOND_MS.get


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
        # Rule 6: the status of every record that carries a SPEC §11 field or has been paused or
        # snoozed (none for the others, so a log without version-3 changes never looks here
        # but for one set look-up per dispatch), and the ids of the paused ones.
        self._status: dict[ScheduleId, RecordStatus] = {}
        self._paused: set[ScheduleId] = set()
        # The runs (dispatches) of each recurring record that has no status, by id: what its
        # status would count, were it given one (an update adding ``ends.maxRuns``, a pause).
        self._plain_runs: dict[ScheduleId, int] = {}
        self._highest_id = 0
        # Due one-shots take priority over recurring batches (SPEC §6), so the two are kept apart.
        self._heaps: tuple[list[_Slot], list[_Slot]] | None = None
        # The records in list order with their views, built when first asked for (never by a
        # replay) and kept up to date from then on.
        self._order: OrderedViews | None = None

    @classmethod
    def resumed(
        cls,
        records: Iterable[ScheduleRecord],
        *,
        highest_id: int,
        session: str = "",
        statuses: Iterable[tuple[ScheduleId, RecordStatus]] = (),
    ) -> ScheduleFold:
        """The state a snapshot describes: ``records`` active (in creation order, each as it
        stands: ``scheduledAt`` its next delivery), ``highest_id`` the largest id number the
        stream used, and ``statuses`` the Rule 6 status of the records that have one.

        Raises ``corrupt_schedule_log`` when that state is impossible: ids not increasing, an
        id above ``highest_id``, or a status of no active record or that its record cannot have.
        """
        state = cls(session=session)
        for record in records:
            state.apply(create_change(record))
        for schedule_id, status in statuses:
            state._resume_status(schedule_id, status)
        if highest_id < state._highest_id:
            raise corrupt(
                "",
                f"the snapshot's largest id number {highest_id} is below an active id "
                f"{make_schedule_id(state._highest_id)}",
            )
        state._highest_id = highest_id
        return state

    def _resume_status(self, schedule_id: ScheduleId, status: RecordStatus) -> None:
        """Give the active record ``schedule_id`` of a snapshot its Rule 6 ``status``."""
        record = self._records.get(schedule_id)
        if record is None:
            raise corrupt("", f"the snapshot has a status for {schedule_id}, which is not active")
        problem = _impossible_status(record, status)
        if problem is not None:
            raise corrupt("", f"the snapshot's status of {schedule_id} {problem}")
        if status != NO_STATUS:
            self._replace(record, status)

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

    def status(self, schedule_id: ScheduleId) -> RecordStatus:
        """The fold's status of the active record ``schedule_id`` (Rule 6), its runs counted."""
        status = self._status.get(schedule_id)
        if status is not None:
            return status
        runs = self._plain_runs.get(schedule_id)
        return NO_STATUS if runs is None else RecordStatus(runs=runs)

    def statuses(self) -> dict[ScheduleId, RecordStatus]:
        """The status of each active record that has one (Rule 6), a record that has only made
        runs included, in a new dict."""
        found = {
            schedule_id: RecordStatus(runs=runs) for schedule_id, runs in self._plain_runs.items()
        }
        found.update(self._status)
        return found

    def occurrence_of(self, schedule_id: ScheduleId) -> Instant:
        """The occurrence the active record's next delivery stands for: its target, or while
        snoozed the occurrence the snooze moved."""
        status = self._status.get(schedule_id, NO_STATUS)
        if status.snoozed_from is not None:
            return Instant(_instant(status.snoozed_from))
        record = self.get(schedule_id)
        if record is None:
            raise KeyError(schedule_id)
        return Instant(_instant(record.scheduled_at))

    @property
    def snapshottable(self) -> bool:
        """Whether the active records, recreated as they stand, make this state: no record is
        paused, snoozed, counted or resumed late (Rule 6)."""
        return not self._plain_runs and all(status == NO_STATUS for status in self._status.values())

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
            self._order = OrderedViews(self._records.values(), self._status)
        return self._order

    def earliest_one_shot(self) -> ScheduleRecord | None:
        return self._peek(self._indexed()[0], recurring=False)

    def earliest_every(self) -> RecurringScheduleRecord | None:
        """The recurring (``every``, ``daily`` or ``calendar``) record with the earliest target."""
        record = self._peek(self._indexed()[1], recurring=True)
        return record if isinstance(record, RECURRING_RECORDS) else None

    def everies_due(self, now: Instant) -> list[RecurringScheduleRecord]:
        """The recurring records whose target is at or before ``now``, in target then creation
        order.

        Walks only the heap slots that are due (a heap's due slots form a subtree at its root),
        so the cost follows the number of due records, not of active ones.
        """
        heap = self._indexed()[1]
        now_text = format_instant(now)
        due: list[RecurringScheduleRecord] = []
        seen: set[ScheduleId] = set()
        stack = [0] if heap else []
        while stack:
            index = stack.pop()
            slot = heap[index]
            if slot[0] > now_text:
                continue
            record = self._live(slot)
            # An update or a resume may push a second slot for the same target.
            if isinstance(record, RECURRING_RECORDS) and (record.id not in seen):
                seen.add(record.id)
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
            if type(record) in RECURRING_RECORDS:
                self._every_targets[record.id] = self._target(record, position)
            self._records[record.id] = record
            if change.version == MANAGE_VERSION:
                self._status[record.id] = NO_STATUS
            if self._heaps is not None:
                heapq.heappush(self._heaps[is_recurring(record)], _slot(record))
            if self._order is not None:
                self._order.add(record)
            return
        record_or_none = self._records.get(change.id)
        if record_or_none is None:
            raise self._corrupt(
                position, f"{operation_of(change)} of {change.id}, which is not active"
            )
        self._apply_active(record_or_none, change, position)

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

    def _replay_unindexed(  # noqa: PLR0915 - one loop on purpose: replay speed
        self, changes: Iterable[tuple[int, ScheduleChange]]
    ) -> None:
        """:meth:`apply` for each change while nothing is indexed, as one loop over plain
        dictionaries."""
        records = self._records
        targets = self._every_targets
        statuses = self._status
        plain_runs = self._plain_runs
        runs_of = plain_runs.get
        stale = self._stale
        active = records.get
        mark_stale = stale.add
        instant = canonical_instant
        date_ms, time_of_day_ms, second_ms = (
            KNOWN_DATE_MS.get,
            TIME_OF_DAY_MS.get,
            KNOWN_SECOND_MS.get,
        )
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
                    if type(record) in RECURRING_RECORDS:
                        target = instant(record.scheduled_at)
                        targets[schedule_id] = (
                            self._target(record, position) if target is None else target
                        )
                    records[schedule_id] = record
                    if change.version == MANAGE_VERSION:
                        statuses[schedule_id] = NO_STATUS
                    continue
                schedule_id = change.id
                current = active(schedule_id)
                if current is None:
                    raise self._corrupt(
                        position, f"{operation_of(change)} of {schedule_id}, which is not active"
                    )
                if schedule_id in statuses or not (
                    type(change) is ScheduleDispatchChange or type(change) is ScheduleDeleteChange
                ):
                    self._apply_active(current, change, position)
                    continue
                if type(change) is ScheduleDeleteChange:
                    del records[schedule_id]
                    if schedule_id in targets:
                        del targets[schedule_id]
                        stale.discard(schedule_id)
                    plain_runs.pop(schedule_id, None)
                    continue
                accepted_at = change.accepted_at
                if accepted_at is msgspec.UNSET and (
                    type(current) is AfterScheduleRecord or type(current) is AtScheduleRecord
                ):
                    del records[schedule_id]  # Rule 3: a one-shot dispatch ends the record
                    # Runs it made while it was recurring (an update changed its rule) go too.
                    plain_runs.pop(schedule_id, None)
                    continue
                if type(current) is EveryScheduleRecord and type(accepted_at) is str:
                    # Rule 4 inline for the commonest change of a long log; anything but the
                    # plain case goes to _dispatch, which says what is wrong.
                    target = targets[schedule_id]
                    # canonical_instant(accepted_at) by three look-ups, without a call: the
                    # instants of such dispatches fall on new minutes (see KNOWN_DATE_MS).
                    day = date_ms(accepted_at[:11])
                    time_of_day = time_of_day_ms(accepted_at[11:17])
                    second = second_ms(accepted_at[17:])
                    decided_at = (
                        instant(accepted_at)
                        if day is None or time_of_day is None or second is None
                        else day + time_of_day + second
                    )
                    if decided_at is not None and decided_at >= target:
                        interval = current.every_seconds * MS_PER_SECOND
                        following = target + ((decided_at - target) // interval + 1) * interval
                        if following <= MAX_INSTANT:
                            targets[schedule_id] = following
                            mark_stale(schedule_id)
                            plain_runs[schedule_id] = runs_of(schedule_id, 0) + 1
                            continue
                self._dispatch(current, accepted_at, position)
        finally:
            self._highest_id = highest

    def dispatch_every(
        self, change: ScheduleDispatchChange
    ) -> tuple[EveryScheduleRecord, int, int] | None:
        """Apply ``change`` when it is the plain case of Rule 4 that :meth:`replay` applies
        inline — the dispatch of an active ``every`` record with no ``ends`` and no Rule 6
        status, while nothing is indexed, accepted (a canonical instant) at or after its target,
        with a next target in range — and return what it stood for: the record as held (its
        ``scheduledAt`` may be behind its target, as :meth:`get` says), its target, and the
        decision instant, as integers. In any other case change nothing and return ``None``:
        :meth:`apply` or :meth:`replay` then applies the change, or says what is wrong with it.

        For a reader that needs the target a dispatch stood for (the occurrence history): it is
        read once, and the record is not rebuilt with its new target at every dispatch."""
        schedule_id = change.id
        current = self._records.get(schedule_id)
        accepted_at = change.accepted_at
        if (
            type(current) is not EveryScheduleRecord
            or type(accepted_at) is not str
            or isinstance(current.ends, Ends)
            or schedule_id in self._status
            or self._heaps is not None
            or self._order is not None
        ):
            return None
        day = _date_ms(accepted_at[:11])
        time_of_day = _time_of_day_ms(accepted_at[11:17])
        second = _second_ms(accepted_at[17:])
        decided_at = (
            canonical_instant(accepted_at)
            if day is None or time_of_day is None or second is None
            else day + time_of_day + second
        )
        target = self._every_targets[schedule_id]
        if decided_at is None or decided_at < target:
            return None
        interval = current.every_seconds * MS_PER_SECOND
        following = target + ((decided_at - target) // interval + 1) * interval
        if following > MAX_INSTANT:
            return None
        self._every_targets[schedule_id] = following
        self._stale.add(schedule_id)
        self._plain_runs[schedule_id] = self._plain_runs.get(schedule_id, 0) + 1
        return current, target, decided_at

    def _apply_active(
        self, record: ScheduleRecord, change: ScheduleChange, position: int | None
    ) -> None:
        """Apply a change other than a create to the active ``record`` it names."""
        if type(change) is ScheduleDeleteChange:
            self._end(record)
        elif type(change) is ScheduleDispatchChange:
            self._dispatch(record, change.accepted_at, position)
        elif not isinstance(change, ScheduleCreateChange):
            self._manage(change, position)

    def note_inherited(self, change: ScheduleChange) -> None:
        """Rule 5: remember the ids an inherited (pre-seed) change uses, and nothing else."""
        if isinstance(change, ScheduleCreateChange):
            self._highest_id = max(self._highest_id, id_number(change.schedule.id))

    def _dispatch(
        self, record: ScheduleRecord, accepted_at: str | msgspec.UnsetType, position: int | None
    ) -> None:
        status = self.status(record.id)
        if status.paused:
            raise self._corrupt(position, f"dispatch of {record.id}, which is paused")
        if not isinstance(record, RECURRING_RECORDS):
            if isinstance(accepted_at, str):
                raise self._corrupt(
                    position, f"dispatch of one-shot {record.id} carries `acceptedAt`"
                )
            self._end(record)
            return
        if not isinstance(accepted_at, str):
            raise self._corrupt(
                position, f"dispatch of {record_kind(record)}-record {record.id} lacks `acceptedAt`"
            )
        grid = self._every_targets[record.id]
        decided_at_ms = canonical_instant(accepted_at)
        if decided_at_ms is None:
            raise self._corrupt(position, f"{why_not_canonical(accepted_at)} - at `$.acceptedAt`")
        delivery = grid if status.snoozed_from is None else _instant(record.scheduled_at)
        if decided_at_ms < delivery:
            raise self._corrupt(
                position,
                f"dispatch of {record.id} was accepted at {accepted_at}, "
                f"before its target {format_instant(Instant(delivery))}",
            )
        runs = status.runs + 1
        ends = record_ends(record)
        if ends is not None and ends.max_runs is not None and runs >= ends.max_runs:
            self._end(record)
            return
        following = next_occurrence(record, grid, max(decided_at_ms, grid))
        self._advance(record, following, RecordStatus(runs=runs))

    def _advance(
        self, record: RecurringScheduleRecord, following: int | None, status: RecordStatus
    ) -> None:
        """Move a recurring record to the target ``following`` with ``status``, or end it when
        there is none, or it passes ``ends.until``."""
        ends = record_ends(record)
        if (
            following is None
            or following > MAX_INSTANT
            or (ends is not None and ends.until is not None and following > _instant(ends.until))
        ):
            self._end(record)
            return
        if self._order is not None:
            self._order.remove(record)
        self._every_targets[record.id] = following
        self._put_status(record, status)
        if self._heaps is None and self._order is None:
            self._stale.add(record.id)
        else:
            self._activate(
                msgspec.structs.replace(record, scheduled_at=format_instant(Instant(following)))
            )

    def _end(self, record: ScheduleRecord) -> None:
        """Forget the active ``record`` (read fresh: its target as held)."""
        schedule_id = record.id
        if self._order is not None:
            self._order.remove(self._records[schedule_id])
        del self._records[schedule_id]
        if schedule_id in self._every_targets:
            del self._every_targets[schedule_id]
            self._stale.discard(schedule_id)
        self._plain_runs.pop(schedule_id, None)
        if schedule_id in self._status:
            del self._status[schedule_id]
            self._paused.discard(schedule_id)

    def _put_status(self, record: ScheduleRecord, status: RecordStatus) -> None:
        """Hold ``status`` for the active ``record``: one without a SPEC §11 field whose status
        is only its runs keeps just its count (so a replay still applies its dispatches
        inline)."""
        if not is_managed(record) and status == RecordStatus(runs=status.runs):
            self._status.pop(record.id, None)
            if status.runs:
                self._plain_runs[record.id] = status.runs
            else:
                self._plain_runs.pop(record.id, None)
        else:
            self._status[record.id] = NO_STATUS if status == NO_STATUS else status
            self._plain_runs.pop(record.id, None)
        if status.paused:
            self._paused.add(record.id)
        else:
            self._paused.discard(record.id)

    def _replace(self, record: ScheduleRecord, status: RecordStatus) -> None:
        """Hold ``record`` (same id as an active one, whose order entry goes) with ``status``."""
        if self._order is not None:
            self._order.remove(self._records[record.id])
        self._stale.discard(record.id)
        if isinstance(record, RECURRING_RECORDS):
            self._every_targets[record.id] = _instant(
                record.scheduled_at if status.snoozed_from is None else status.snoozed_from
            )
        elif record.id in self._every_targets:
            del self._every_targets[record.id]
        self._put_status(record, status)
        self._activate(record)

    def _manage(self, change: ManageChange, position: int | None) -> None:
        """Rule 6 for a version-3 change on an active record."""
        schedule_id = change.id
        if schedule_id in self._stale:
            self._refresh(schedule_id)
        record = self._records[schedule_id]
        status = self.status(schedule_id)
        grid = self._grid(record, status)
        if type(change) is ScheduleUpdateChange:
            self._update(record, change.schedule, status, grid, position)
            return
        if type(change) is SchedulePauseChange:
            if status.paused:
                raise self._corrupt(position, f"pause of {schedule_id}, which is paused already")
            # A recurring record goes back to its grid; a one-shot keeps its target, which a
            # snooze made the snooze instant (SPEC §11: "a one-shot's target becomes S").
            held = (
                msgspec.structs.replace(record, scheduled_at=format_instant(Instant(grid)))
                if isinstance(record, RECURRING_RECORDS)
                else record
            )
            self._replace(held, RecordStatus(paused=True, runs=status.runs))
            return
        if status.paused != (type(change) is ScheduleResumeChange):
            state = "is paused" if status.paused else "is not paused"
            raise self._corrupt(position, f"{operation_of(change)} of {schedule_id}, which {state}")
        if type(change) is ScheduleResumeChange:
            decided_at = _instant(change.accepted_at)
            if isinstance(record, RECURRING_RECORDS):
                following = next_occurrence(record, grid, decided_at)
                self._advance(record, following, RecordStatus(runs=status.runs))
                return
            late_from = change.accepted_at if decided_at > grid else None
            self._replace(record, RecordStatus(runs=status.runs, late_from=late_from))
            return
        if type(change) is ScheduleSnoozeChange:
            ends = record_ends(record)
            if ends is not None and ends.until is not None and change.until > ends.until:
                raise self._corrupt(
                    position,
                    f"snooze of {schedule_id} until {change.until} passes its `ends.until` "
                    f"{ends.until}",
                )
            snoozed = msgspec.structs.replace(record, scheduled_at=change.until)
            self._replace(
                snoozed, RecordStatus(snoozed_from=format_instant(Instant(grid)), runs=status.runs)
            )
            return
        if type(change) is ScheduleMissChange:
            self._miss(record, change, status, grid, position)
            return
        raise AssertionError(f"unexpected change {change!r}")

    def _grid(self, record: ScheduleRecord, status: RecordStatus) -> int:
        """The occurrence the record's next delivery stands for (Rule 6's ``T``)."""
        if isinstance(record, RECURRING_RECORDS):
            return self._every_targets[record.id]
        if status.snoozed_from is not None:
            return _instant(status.snoozed_from)
        return _instant(record.scheduled_at)

    def _update(
        self,
        current: ScheduleRecord,
        record: ScheduleRecord,
        status: RecordStatus,
        grid: int,
        position: int | None,
    ) -> None:
        ends = record_ends(record)
        if ends is not None and ends.max_runs is not None and ends.max_runs <= status.runs:
            raise self._corrupt(
                position,
                f"update of {record.id} sets `ends.maxRuns` {ends.max_runs}, but it has made "
                f"{status.runs} runs already",
            )
        same_rule = rule_of(current, format_instant(Instant(grid))) == rule_of(
            record, record.scheduled_at
        )
        if same_rule and status.snoozed_from is not None:
            if ends is not None and ends.until is not None and current.scheduled_at > ends.until:
                raise self._corrupt(
                    position,
                    f"update of {record.id} sets `ends.until` {ends.until} before its snooze "
                    f"until {current.scheduled_at}",
                )
            record = msgspec.structs.replace(record, scheduled_at=current.scheduled_at)
            kept = status
        else:
            kept = RecordStatus(
                paused=status.paused,
                runs=status.runs,
                late_from=status.late_from if same_rule else None,
            )
        self._replace(record, kept)

    def _miss(
        self,
        record: ScheduleRecord,
        change: ScheduleMissChange,
        status: RecordStatus,
        grid: int,
        position: int | None,
    ) -> None:
        lateness = record_max_lateness(record)
        if lateness is None:
            raise self._corrupt(position, f"miss of {record.id}, which has no `maxLatenessSeconds`")
        decided_at = _instant(change.accepted_at)
        since = _instant(record.scheduled_at)
        if status.late_from is not None:
            since = max(since, _instant(status.late_from))
        if decided_at - since <= lateness * MS_PER_SECOND:
            raise self._corrupt(
                position,
                f"miss of {record.id} at {change.accepted_at} is within its "
                f"`maxLatenessSeconds` of {format_instant(Instant(since))}",
            )
        if change.scheduled_at != format_instant(Instant(grid)):
            raise self._corrupt(
                position,
                f"miss of {record.id} names the occurrence {change.scheduled_at}, not "
                f"{format_instant(Instant(grid))}",
            )
        if not isinstance(record, RECURRING_RECORDS):
            self._end(record)
            return
        following = next_occurrence(record, grid, max(decided_at, grid))
        self._advance(record, following, RecordStatus(runs=status.runs))

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
        if self._heaps is not None and record.id not in self._paused:
            heapq.heappush(self._heaps[is_recurring(record)], _slot(record))
        if self._order is not None:
            self._order.add(record, self.status(record.id))

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
                if record.id not in self._paused:
                    (everies if is_recurring(record) else one_shots).append(_slot(record))
            heapq.heapify(one_shots)
            heapq.heapify(everies)
            self._heaps = (one_shots, everies)
        return self._heaps

    def _live(self, slot: _Slot) -> ScheduleRecord | None:
        record = self._records.get(slot[2])
        if record is None or record.scheduled_at != slot[0] or slot[2] in self._paused:
            return None
        return record

    def _peek(self, heap: list[_Slot], *, recurring: bool) -> ScheduleRecord | None:
        # An update that changes a record's kind leaves its old slot in the other heap, with
        # the same target perhaps: a slot is live only in the heap of its record's kind.
        while heap:
            record = self._live(heap[0])
            if record is not None and is_recurring(record) == recurring:
                return record
            heapq.heappop(heap)
        return None


def _impossible_status(record: ScheduleRecord, status: RecordStatus) -> str | None:
    """Why no log could give ``record`` (as it stands) the Rule 6 ``status``, or ``None``."""
    if status.paused and status.snoozed_from is not None:
        return "is both paused and snoozed"
    if status.runs < 0:
        return "counts fewer than no runs"
    ends = record_ends(record)
    if ends is not None and ends.max_runs is not None and status.runs >= ends.max_runs:
        return f"counts {status.runs} runs, and its `ends.maxRuns` is {ends.max_runs}"
    for name, value in (("snooze", status.snoozed_from), ("late resume", status.late_from)):
        if value is not None and canonical_instant(value) is None:
            return f"has a {name} time that is not a canonical instant"
    if status.late_from is not None and is_recurring(record):
        return "resumes a recurring record late"
    return None


def _instant(canonical: str) -> int:
    """A canonical instant that a decoded change or a held record holds, as an integer."""
    found = canonical_instant(canonical)
    if found is None:
        raise ValueError(f"not a canonical instant: {canonical!r}")
    return found


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
