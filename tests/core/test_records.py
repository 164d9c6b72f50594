from __future__ import annotations

import msgspec
import pytest

from session_schedule.core.errors import ERROR_CODES, ScheduleError
from session_schedule.core.ids import ScheduleId, make_schedule_id, parse_schedule_id
from session_schedule.core.instants import parse_instant
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    ScheduleRecord,
    make_view,
    make_views,
    record_kind,
)

AFTER = AfterScheduleRecord(
    id=ScheduleId("sch_1"), prompt="p", after_seconds=90, scheduled_at="2026-11-29T20:01:30.000Z"
)
AT = AtScheduleRecord(id=ScheduleId("sch_2"), prompt="q", scheduled_at="2026-12-01T00:00:00.000Z")
EVERY = EveryScheduleRecord(
    id=ScheduleId("sch_3"), prompt="r", every_seconds=600, scheduled_at="2026-11-29T20:10:00.000Z"
)
DAILY = DailyScheduleRecord(
    id=ScheduleId("sch_4"),
    prompt="s",
    local_time="09:00:00.000",
    time_zone="Asia/Tokyo",
    weekdays=["mon", "fri"],
    scheduled_at="2026-11-30T00:00:00.000Z",
)


@pytest.mark.parametrize(
    ("record", "now", "view"),
    [
        (
            AFTER,
            "2026-11-29T20:01:29.999Z",
            {
                "kind": "after",
                "id": "sch_1",
                "prompt": "p",
                "afterSeconds": 90,
                "scheduledAt": "2026-11-29T20:01:30.000Z",
                "state": "scheduled",
                "deliveryMode": "session-local",
                "runs": 0,
                "lastRun": None,
            },
        ),
        (
            AT,
            "2026-12-01T00:00:00.000Z",
            {
                "kind": "at",
                "id": "sch_2",
                "prompt": "q",
                "scheduledAt": "2026-12-01T00:00:00.000Z",
                "state": "overdue",
                "deliveryMode": "session-local",
                "runs": 0,
                "lastRun": None,
            },
        ),
        (
            EVERY,
            "2026-11-29T20:00:00.000Z",
            {
                "kind": "every",
                "id": "sch_3",
                "prompt": "r",
                "everySeconds": 600,
                "scheduledAt": "2026-11-29T20:10:00.000Z",
                "state": "scheduled",
                "deliveryMode": "session-local",
                "runs": 0,
                "lastRun": None,
            },
        ),
        (
            DAILY,
            "2026-11-30T00:00:00.001Z",
            {
                "kind": "daily",
                "id": "sch_4",
                "prompt": "s",
                "time": "09:00:00.000",
                "timeZone": "Asia/Tokyo",
                "weekdays": ["mon", "fri"],
                "scheduledAt": "2026-11-30T00:00:00.000Z",
                "state": "overdue",
                "deliveryMode": "session-local",
                "runs": 0,
                "lastRun": None,
            },
        ),
    ],
)
def test_views_add_state_and_delivery_mode_to_the_wire_fields(
    record: ScheduleRecord, now: str, view: dict[str, object]
) -> None:
    assert msgspec.to_builtins(make_view(record, parse_instant(now))) == view


def test_record_kinds() -> None:
    assert [record_kind(record) for record in (AFTER, AT, EVERY, DAILY)] == [
        "after",
        "at",
        "every",
        "daily",
    ]


def test_ids_have_one_form() -> None:
    assert make_schedule_id(12) == "sch_12"
    assert parse_schedule_id("sch_12") == "sch_12"
    for text in ("sch_0", "sch_012", "SCH_1", "sch_1 ", "sch_", "sch_12345678901234567"):
        assert parse_schedule_id(text) is None
    with pytest.raises(ValueError, match="schedule id numbers start at 1, got 0"):
        make_schedule_id(0)


def test_errors_carry_a_stable_code_and_message() -> None:
    error = ScheduleError("not_future", "choose a later time.")
    assert error.code in ERROR_CODES
    assert str(error) == "not_future: choose a later time."
    assert repr(error) == "ScheduleError('not_future', 'choose a later time.')"
    assert len(ERROR_CODES) == 10


def test_make_views_agrees_with_make_view() -> None:
    for now in ("2026-11-29T20:01:30.000Z", "2026-11-29T20:01:29.999Z"):
        instant = parse_instant(now)
        assert make_views([AFTER, AT, EVERY, DAILY], instant) == [
            make_view(record, instant) for record in (AFTER, AT, EVERY, DAILY)
        ]
