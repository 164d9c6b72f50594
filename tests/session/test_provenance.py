"""Which turn created each reminder, and the chain depth, read from the log alone."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    create_change,
    delete_change,
    dispatch_change,
    pause_change,
    snooze_change,
)
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.records import AfterScheduleRecord
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, user_message
from session_schedule.session.port import LogEntry
from session_schedule.session.provenance import Provenance, ProvenanceLog, changes_during
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    turn_finished,
    turn_queued,
)
from tests.session.test_history import _histories

AT = Instant(parse_instant("2026-11-29T20:00:00.000Z"))


class Log:
    def __init__(self) -> None:
        self.entries: list[LogEntry] = []

    def add(self, kind: str, payload: object) -> int:
        self.entries.append(LogEntry(position=len(self.entries), type=kind, payload=payload))
        return len(self.entries) - 1

    def host(self) -> int:
        return self.add(TURN_QUEUED_TYPE, turn_queued("hi", at=AT, origin="host"))

    def reminder(self, *keys: str) -> int:
        return self.add(
            TURN_QUEUED_TYPE, turn_queued("frame", at=AT, origin="schedule", occurrences=keys)
        )

    def finish(self, turn: int) -> None:
        self.add(TURN_FINISHED_TYPE, turn_finished(turn, at=AT, outcome="completed"))

    def create(self, number: int) -> None:
        record = AfterScheduleRecord(
            id=ScheduleId(f"sch_{number}"),
            prompt="p",
            after_seconds=1,
            scheduled_at="2026-11-29T20:00:01.000Z",
        )
        self.add(CHANGE_EVENT_TYPE, create_change(record))


def _read(log: Log) -> ProvenanceLog:
    provenance = ProvenanceLog()
    provenance.feed(log.entries)
    return provenance


def test_a_create_belongs_to_the_turn_in_progress() -> None:
    log = Log()
    log.create(1)  # no turn recorded
    turn = log.host()
    log.add(MESSAGE_ENTRY_TYPE, user_message("remind me", at=AT))
    log.create(2)
    log.finish(turn)
    turn = log.host()  # a host prompt: no person's message
    log.create(3)
    log.finish(turn)
    provenance = _read(log)
    assert [provenance.of(ScheduleId(f"sch_{n}")).made_by for n in (1, 2, 3)] == [
        "outside",
        "person",
        "host",
    ]
    assert provenance.of(ScheduleId("sch_1")).text() == "no recorded turn"
    assert provenance.of(ScheduleId("sch_2")).text() == "a person's prompt"
    assert provenance.of(ScheduleId("sch_3")).text() == "a host prompt"
    assert provenance.current().made_by == "outside"


def test_a_reminder_created_in_a_reminder_turn_is_one_deeper() -> None:
    log = Log()
    first = log.host()
    log.create(1)
    log.finish(first)
    # A later turn queued while the reminder's turn runs does not own its creates.
    turn = log.reminder("sch_1@2026-11-29T20:00:01.000Z")
    queued_behind = log.host()
    log.create(2)
    log.finish(turn)
    turn = log.reminder("sch_2@2026-11-29T20:00:02.000Z")
    provenance = _read(log)
    assert provenance.of(ScheduleId("sch_2")) == Provenance(
        made_by="reminder", occurrences=("sch_1@2026-11-29T20:00:01.000Z",), depth=1
    )
    assert provenance.of(ScheduleId("sch_2")).text() == "reminder sch_1@2026-11-29T20:00:01.000Z"
    # The host turn queued behind runs first now; then the reminder turn.
    assert provenance.current().made_by == "host"
    log.finish(queued_behind)
    provenance.feed(log.entries[provenance.position :])
    assert provenance.current().depth == 2
    log.finish(turn)
    provenance.feed(log.entries[provenance.position :])
    assert provenance.current().made_by == "outside"


def test_a_batch_turn_is_one_deeper_than_its_deepest_reminder() -> None:
    log = Log()
    log.create(1)
    turn = log.reminder("sch_1@2026-11-29T20:00:01.000Z")
    log.create(2)
    log.finish(turn)
    log.reminder("sch_1@2026-11-29T20:05:01.000Z", "sch_2@2026-11-29T20:05:01.000Z")
    assert _read(log).current().depth == 2


def test_a_fork_reads_from_its_fork_point() -> None:
    log = Log()
    log.reminder("sch_1@2026-11-29T20:00:01.000Z")
    log.create(2)
    provenance = ProvenanceLog(seed_length=2)
    provenance.feed(log.entries)
    assert provenance.of(ScheduleId("sch_2")).made_by == "outside"
    assert provenance.current().made_by == "outside"


def test_an_update_in_a_turn_makes_that_turn_its_provenance_and_never_lowers_its_depth() -> None:
    log = Log()
    log.create(1)  # outside any turn: depth 0
    for minute in (1, 2):
        turn = log.reminder(f"sch_1@2026-11-29T20:0{minute}:00.000Z")
        log.add(CHANGE_EVENT_TYPE, snooze_change(ScheduleId("sch_1"), Instant(AT + 1000)))
        log.finish(turn)
    provenance = _read(log)
    assert provenance.of(ScheduleId("sch_1")) == Provenance(
        made_by="reminder", occurrences=("sch_1@2026-11-29T20:02:00.000Z",), depth=2
    )
    # A person's pause is that person's, and keeps the depth the chain reached.
    turn = log.host()
    log.add(MESSAGE_ENTRY_TYPE, user_message("pause it", at=AT))
    log.add(CHANGE_EVENT_TYPE, pause_change(ScheduleId("sch_1")))
    log.finish(turn)
    # An update outside any recorded turn leaves it as it was.
    log.add(CHANGE_EVENT_TYPE, pause_change(ScheduleId("sch_1")))
    provenance = _read(log)
    assert provenance.of(ScheduleId("sch_1")) == Provenance(made_by="person", depth=2)
    assert provenance.made_by_reminders() == {}


@settings(max_examples=300, deadline=None)
@given(_histories(), st.integers(0, 60), st.lists(st.integers(0, 60), max_size=3))
def test_feeding_batches_reads_what_reading_entry_by_entry_reads(
    entries: list[LogEntry], seed: int, cuts: list[int]
) -> None:
    """:meth:`ProvenanceLog.feed` reads the pending turns (a person's message seen in them or
    not) and the provenance of every reminder that reading one entry at a time reads — for
    histories of reminders created and changed in reminder turns, host turns and no turn, turns
    finished at once, later, never or twice, person's messages and others, and a fork point
    anywhere."""
    seed = min(seed, len(entries))
    batched, reference = ProvenanceLog(seed_length=seed), ProvenanceLog(seed_length=seed)
    for start, end in itertools.pairwise([0, *sorted(cuts), len(entries)]):
        batched.feed(iter(entries[start:end]) if start % 2 else entries[start:end])
    for entry in entries:
        reference._read(entry)
        reference.position = entry.position + 1
    assert batched.position == reference.position
    assert batched._pending == reference._pending
    assert batched._made == reference._made


def test_what_a_turn_already_did_is_the_changes_made_while_it_was_in_progress() -> None:
    log = Log()
    earlier = log.host()
    log.create(1)  # the earlier turn's
    turn = log.host()  # queued while the earlier one runs
    log.create(2)  # still the earlier turn's: it is in progress until it finishes
    log.finish(earlier)
    log.create(3)
    log.add(CHANGE_EVENT_TYPE, dispatch_change(ScheduleId("sch_1")))  # Schedule's own
    log.add(CHANGE_EVENT_TYPE, pause_change(ScheduleId("sch_3")))
    log.add(CHANGE_EVENT_TYPE, delete_change(ScheduleId("sch_2")))
    behind = log.host()  # queued behind the turn: its changes are the turn's until it finishes
    log.add(CHANGE_EVENT_TYPE, snooze_change(ScheduleId("sch_3"), parse_instant(AT_TEXT)))
    assert [
        (type(change).__name__, _id(change)) for change in changes_during(log.entries, turn)
    ] == [
        ("ScheduleCreateChange", "sch_3"),
        ("SchedulePauseChange", "sch_3"),
        ("ScheduleDeleteChange", "sch_2"),
        ("ScheduleSnoozeChange", "sch_3"),
    ]
    log.finish(turn)
    log.create(4)  # the turn behind's
    assert len(changes_during(log.entries, turn)) == 4
    assert [_id(change) for change in changes_during(log.entries, behind)] == ["sch_4"]
    assert [_id(change) for change in changes_during(log.entries, earlier)] == ["sch_1", "sch_2"]


AT_TEXT = "2026-11-29T21:00:00.000Z"


def _id(change: object) -> str:
    record = getattr(change, "schedule", None)
    return str(getattr(record, "id", None) or getattr(change, "id", ""))
