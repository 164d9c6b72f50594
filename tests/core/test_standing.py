"""A reminder's standing in words: one wording for the list, the chat and the page."""

from __future__ import annotations

from session_schedule.core.changes import create_change, pause_change, snooze_change
from session_schedule.core.due import plan_delivery
from session_schedule.core.fold import fold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import parse_instant
from session_schedule.core.records import (
    AtScheduleRecord,
    Ends,
    EveryScheduleRecord,
    make_view,
)
from session_schedule.core.standing import no_delivery_after, standing

SID = ScheduleId("sch_1")
NOW = parse_instant("2026-12-01T09:00:00.000Z")


def every(**options: object) -> EveryScheduleRecord:
    return EveryScheduleRecord(
        id=SID,
        prompt="stand up",
        every_seconds=600,
        scheduled_at="2026-12-01T10:00:00.000Z",
        **options,  # type: ignore[arg-type]
    )


def test_a_reminder_without_spec_11_fields_has_no_standing() -> None:
    state = fold([(0, create_change(every()))])
    assert standing(state.views(NOW)[0]) == ""


def test_each_part_of_a_standing_in_order() -> None:
    record = every(
        ends=Ends(until="2026-12-31T17:00:00.000Z", max_runs=3), max_lateness_seconds=600
    )
    state = fold(
        enumerate(
            [create_change(record), snooze_change(SID, parse_instant("2026-12-01T10:25:00.000Z"))]
        )
    )
    assert standing(state.views(NOW)[0]) == (
        "snoozed until 2026-12-01T10:25:00.000Z, 3 runs left, no delivery after "
        "2026-12-31T17:00:00.000Z, missed if more than 600 s late"
    )
    delivery = plan_delivery(state, parse_instant("2026-12-01T10:25:00.000Z"))
    assert delivery is not None
    for change in delivery.changes:
        state.apply(change)
    state.apply(pause_change(SID))
    assert standing(state.views(NOW)[0]) == (
        "paused, 2 runs left, no delivery after 2026-12-31T17:00:00.000Z, missed if more than "
        "600 s late"
    )


def test_one_run_left_is_singular_and_a_one_shot_has_only_its_lateness() -> None:
    view = make_view(every(ends=Ends(until=None, max_runs=1)), NOW)
    assert standing(view) == "1 run left"
    one_shot = AtScheduleRecord(
        id=SID, prompt="call", scheduled_at="2026-12-01T10:00:00.000Z", max_lateness_seconds=60
    )
    assert standing(make_view(one_shot, NOW)) == "missed if more than 60 s late"
    assert no_delivery_after("2026-12-31T17:00:00.000Z") == (
        "no delivery after 2026-12-31T17:00:00.000Z"
    )
