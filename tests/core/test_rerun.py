"""The note an attempt that runs a turn again gets: what the earlier attempts changed, word for
word."""

from __future__ import annotations

from session_schedule.core.changes import (
    ScheduleChange,
    create_change,
    delete_change,
    dispatch_change,
    pause_change,
    resume_change,
    snooze_change,
    update_change,
)
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import parse_instant
from session_schedule.core.records import AtScheduleRecord, EveryScheduleRecord
from session_schedule.core.rerun import MAX_NOTED_CHANGES, rerun_note

NOON = parse_instant("2026-12-01T12:00:00.000Z")


def _at(number: int, prompt: str = "call mum") -> AtScheduleRecord:
    return AtScheduleRecord(
        id=ScheduleId(f"sch_{number}"), prompt=prompt, scheduled_at="2026-12-01T18:00:00.000Z"
    )


def test_the_note_names_every_change_of_the_earlier_attempts_in_order() -> None:
    every = EveryScheduleRecord(
        id=ScheduleId("sch_2"),
        prompt="drink water",
        every_seconds=3600,
        scheduled_at="2026-12-01T13:00:00.000Z",
    )
    changes: list[ScheduleChange] = [
        create_change(_at(1, 'say "hi"\nthen go')),
        create_change(every),
        dispatch_change(ScheduleId("sch_2")),  # Schedule's own, not the turn's
        update_change(_at(1, "call dad")),
        pause_change(ScheduleId("sch_2")),
        resume_change(ScheduleId("sch_2"), NOON),
        snooze_change(ScheduleId("sch_1"), NOON),
        delete_change(ScheduleId("sch_2")),
    ]
    assert rerun_note(changes) == (
        "Note: this turn is running again after an interrupted attempt, which already changed "
        "the schedule:\n"
        '- created sch_1 ("say \\"hi\\"\\nthen go"; at (a fixed time), due at '
        "2026-12-01T18:00:00.000Z)\n"
        '- created sch_2 ("drink water"; every (3600 seconds), due at 2026-12-01T13:00:00.000Z)\n'
        '- updated sch_1 (now "call dad"; at (a fixed time), due at 2026-12-01T18:00:00.000Z)\n'
        "- paused sch_2\n"
        "- resumed sch_2\n"
        "- snoozed sch_1 until 2026-12-01T12:00:00.000Z\n"
        "- deleted sch_2\n"
        "These changes are in effect: do not make them again (do not create those reminders "
        "again). Call schedule_list to see the reminders as they stand."
    )


def test_no_change_of_the_turns_own_is_no_note() -> None:
    assert rerun_note([]) is None
    assert rerun_note([dispatch_change(ScheduleId("sch_1"))]) is None


def test_a_long_list_is_cut_and_counted() -> None:
    note = rerun_note([create_change(_at(n)) for n in range(1, MAX_NOTED_CHANGES + 4)])
    assert note is not None
    lines = note.split("\n")
    assert len(lines) == MAX_NOTED_CHANGES + 3
    assert lines[-3].startswith(f"- created sch_{MAX_NOTED_CHANGES} ")
    assert lines[-2] == "- and 3 more changes"
