"""A log's next target computed from a fold the caller already has is the one it folds itself."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core.changes import delete_change, dispatch_change
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import fold
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant
from session_schedule.session.ids import SessionId
from session_schedule.session.port import LogEntry, make_header, schedule_changes
from session_schedule.session.quotas import QUOTAS_ENTRY_TYPE, quotas_entry
from session_schedule.session.targets import next_target_of
from session_schedule.session.turns import TurnFinished, TurnQueued
from session_schedule.testing.session_contract import NOW, at_create, turn

SID = SessionId("s_aaaaaaaaaaaa")


def _log(steps: list[tuple[int, int]]) -> list[LogEntry]:
    """Entries from ``(kind, number)`` steps: reminders created, dispatched and deleted, turns
    queued and finished (also finishes naming any position, and turns finished twice),
    quotas set, messages; each step that does not apply is a message."""
    entries: list[LogEntry] = []
    active: list[int] = []
    queued: list[int] = []
    finished_turns: list[int] = []
    created = 0

    def add(entry_type: str, payload: object) -> None:
        entries.append(LogEntry(position=len(entries), type=entry_type, payload=payload))

    for kind, number in steps:
        at = format_instant(Instant(NOW + 60_000 * number))
        if kind == 0:
            created += 1
            active.append(created)
            add("schedule/change", at_create(created, Instant(NOW + 60_000 * number)))
        elif kind in (1, 2) and active:
            schedule_id = make_schedule_id(active.pop(number % len(active)))
            change = dispatch_change(schedule_id) if kind == 1 else delete_change(schedule_id)
            add("schedule/change", change)
        elif kind == 3:
            queued.append(len(entries))
            add("turn/queued", TurnQueued(version=1, origin="host", text="hi", at=at))
        elif kind == 4 and queued:
            finished = queued.pop(number % len(queued))
            finished_turns.append(finished)
            add(
                "turn/finished",
                TurnFinished(version=1, turn=finished, outcome="completed", at=at),
            )
        elif kind == 6:
            # A finish that names a position just after it (a turn queued later, perhaps) or
            # any position at all.
            named = (
                len(entries) + 1 + number // 2 % 3 if number % 2 else number % (len(entries) + 3)
            )
            add("turn/finished", TurnFinished(version=1, turn=named, outcome="failed", at=at))
        elif kind == 7 and finished_turns:
            # A turn finished a second time.
            named = finished_turns[number % len(finished_turns)]
            add("turn/finished", TurnFinished(version=1, turn=named, outcome="completed", at=at))
        elif kind == 5:
            add(QUOTAS_ENTRY_TYPE, quotas_entry(at=Instant(NOW + 60_000 * number), max_active=3))
        else:
            add("message", turn(number))
    return entries


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 1_000)), max_size=60),
    st.integers(0, 60),
)
def test_the_target_from_a_given_fold_is_the_one_folded_again(
    steps: list[tuple[int, int]], seed: int
) -> None:
    entries = _log(steps)
    seed = min(seed, len(entries))
    header = make_header(SID, now=Instant(NOW), parent_id=None, seed_length=seed)
    try:
        folded = fold(schedule_changes(entries), seed_length=seed, session=SID)
    except ScheduleError:
        # A log that does not fold has no fold to give (``check`` reports it): not indexed.
        assert next_target_of(header, entries) is None
        return
    assert next_target_of(header, entries, folded=folded) == next_target_of(header, entries)


def test_an_unfinished_turn_is_the_target_before_any_reminder() -> None:
    entries = _log([(0, 90), (3, 5), (3, 7), (4, 0)])
    header = make_header(SID, now=Instant(NOW), parent_id=None, seed_length=0)
    folded = fold(schedule_changes(entries), session=SID)
    assert next_target_of(header, entries, folded=folded) == NOW + 60_000 * 7


def test_quotas_set_after_the_earliest_target_are_the_target() -> None:
    entries = _log([(0, 5), (5, 7), (0, 90)])
    header = make_header(SID, now=Instant(NOW), parent_id=None, seed_length=0)
    folded = fold(schedule_changes(entries), session=SID)
    assert next_target_of(header, entries) == NOW + 60_000 * 7
    assert next_target_of(header, entries, folded=folded) == NOW + 60_000 * 7
    before = _log([(5, 3), (0, 5)])
    assert next_target_of(header, before) == NOW + 60_000 * 5
