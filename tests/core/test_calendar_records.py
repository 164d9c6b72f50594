"""The ``calendar`` kind end to end in the core (SPEC §12): create, durable shape, strict decoder,
fold, delivery batched with ``every`` and ``daily``, framing, views and the timeline."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import msgspec
import pytest

from session_schedule.core.changes import (
    ScheduleCreateChange,
    decode_change,
    dispatch_change,
    encode_change,
)
from session_schedule.core.due import plan_delivery
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.framing import frame
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.records import CalendarScheduleRecord, make_view
from session_schedule.core.rules import decide_create, decide_update
from session_schedule.core.time_input import load_zone
from session_schedule.core.timeline import build_timeline

GOLDEN_V3_CALENDAR = Path(__file__).parent / "golden" / "v3-calendar.jsonl"
NOW = parse_instant("2026-12-01T10:00:00.000Z")
RENT = {
    "prompt": "pay rent",
    "calendar": {
        "rule": "BYMONTHDAY=-1;FREQ=MONTHLY",
        "time": "09:00",
        "time_zone": "Europe/Paris",
    },
}


def create(
    state: ScheduleFold, arguments: Mapping[str, object], now: Instant = NOW
) -> ScheduleCreateChange:
    change = decide_create(arguments, now=now, state=state)
    state.apply(change)
    return change


def error(arguments: Mapping[str, object], now: Instant = NOW) -> tuple[str, str]:
    with pytest.raises(ScheduleError) as caught:
        decide_create(arguments, now=now, state=ScheduleFold())
    return caught.value.code, caught.value.message


def test_a_calendar_create_is_a_version_3_change_with_the_rule_in_canonical_order() -> None:
    change = create(ScheduleFold(), RENT)
    assert encode_change(change) == (
        b'{"operation":"create","version":3,"schedule":{"kind":"calendar","id":"sch_1",'
        b'"prompt":"pay rent","rule":"FREQ=MONTHLY;BYMONTHDAY=-1","time":"09:00:00.000",'
        b'"timeZone":"Europe/Paris","startDate":"2026-12-01",'
        b'"scheduledAt":"2026-12-31T08:00:00.000Z"}}'
    )
    assert decode_change(encode_change(change)) == change


def test_the_start_date_defaults_to_the_zones_date_at_the_decision() -> None:
    # 23:30Z on 2026-11-30 is already 2026-12-01 in Tokyo.
    change = create(
        ScheduleFold(),
        {
            "prompt": "p",
            "calendar": {
                "rule": "FREQ=WEEKLY;INTERVAL=2",
                "time": "09:00",
                "time_zone": "Asia/Tokyo",
            },
        },
        now=parse_instant("2026-11-30T23:30:00.000Z"),
    )
    record = change.schedule
    assert isinstance(record, CalendarScheduleRecord)
    assert (record.start_date, record.scheduled_at) == ("2026-12-01", "2026-12-01T00:00:00.000Z")


def test_a_given_start_date_anchors_interval_and_count() -> None:
    change = create(
        ScheduleFold(),
        {
            "prompt": "p",
            "calendar": {
                "rule": "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;COUNT=10",
                "time": "09:00:30",
                "time_zone": "UTC",
                "start_date": "2026-11-24",
            },
        },
    )
    record = change.schedule
    assert isinstance(record, CalendarScheduleRecord)
    # 2026-11-24 started the count; 2026-12-08 is the next picked Tuesday after the decision.
    assert (record.local_time, record.scheduled_at) == ("09:00:30.000", "2026-12-08T09:00:30.000Z")


@pytest.mark.parametrize(
    ("calendar", "code", "message"),
    [
        (
            "FREQ=MONTHLY",
            "invalid_selector",
            "`calendar` must be an object with the keys `rule`, `time` and `time_zone`, and "
            'optionally `start_date`, such as {"rule": "FREQ=MONTHLY;BYDAY=1MO", "time": '
            '"09:00", "time_zone": "Europe/Paris"}, not a value of type str.',
        ),
        (
            {"rule": "FREQ=MONTHLY", "time": "09:00", "zone": "UTC"},
            "invalid_selector",
            "the `calendar` object must have the keys `rule`, `time` and `time_zone`, and may "
            "have `start_date`; add `time_zone`, and remove 'zone'.",
        ),
        (
            {"rule": "FREQ=MONTHLY", "time": 9, "time_zone": "UTC"},
            "invalid_selector",
            "`time` must be a string, such as '09:00', not a number.",
        ),
        (
            {"rule": "FREQ=MONTHLY", "time": "09:00", "time_zone": "UTC", "start_date": 20261201},
            "invalid_selector",
            "`start_date` must be a date string such as '2026-12-01', or null for today in "
            "`time_zone`, not a number.",
        ),
        (
            {"rule": "FREQ=MONTHLY;BYHOUR=9", "time": "nine", "time_zone": "Mars/Base"},
            "invalid_rule",
            "BYHOUR is not supported; the time of day comes from `time`, so remove BYHOUR.",
        ),
        (
            {"rule": "FREQ=MONTHLY", "time": "nine", "time_zone": "EST"},
            "invalid_time_zone",
            None,
        ),
        (
            {"rule": "FREQ=MONTHLY", "time": "24:00", "time_zone": "UTC"},
            "invalid_selector",
            None,
        ),
        (
            {
                "rule": "FREQ=MONTHLY",
                "time": "09:00",
                "time_zone": "UTC",
                "start_date": "2027-02-29",
            },
            "invalid_selector",
            "`start_date` must be a real calendar date written YYYY-MM-DD, such as '2026-12-01', "
            "not '2027-02-29'.",
        ),
        (
            {"rule": "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "time": "09:00", "time_zone": "UTC"},
            "time_out_of_range",
            "the rule 'FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30' has no occurrence after "
            "2026-12-01T10:00:00.000Z up to 9999-12-31T23:59:59.999Z, the latest time a "
            "reminder can have; check its parts, COUNT, UNTIL and `start_date`.",
        ),
        (
            {
                "rule": "FREQ=DAILY;COUNT=3",
                "time": "09:00",
                "time_zone": "UTC",
                "start_date": "2026-01-01",
            },
            "time_out_of_range",
            "the rule 'FREQ=DAILY;COUNT=3' has no occurrence after 2026-12-01T10:00:00.000Z up "
            "to 9999-12-31T23:59:59.999Z, the latest time a reminder can have; check its parts, "
            "COUNT, UNTIL and `start_date`.",
        ),
    ],
)
def test_a_bad_calendar_selector_reports_the_first_failing_check(
    calendar: object, code: str, message: str | None
) -> None:
    found_code, found_message = error({"prompt": "p", "calendar": calendar})
    assert found_code == code
    if message is not None:
        assert found_message == message


def test_calendar_is_one_of_the_five_selectors() -> None:
    assert error({"prompt": "p", "calendar": RENT["calendar"], "every_seconds": 600}) == (
        "invalid_selector",
        "give exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar` "
        "(found `every_seconds`, `calendar`).",
    )


# -- the strict decoder -----------------------------------------------------------------------

RECORD = (
    '"kind":"calendar","id":"sch_9","prompt":"pay rent","rule":"FREQ=MONTHLY;BYMONTHDAY=-1",'
    '"time":"09:00:00.000","timeZone":"Europe/Paris","startDate":"2026-12-01",'
    '"scheduledAt":"2026-12-31T08:00:00.000Z"'
)


def line(version: int = 3, **replace: str) -> str:
    record = RECORD
    for key, value in replace.items():
        old = record.split(f'"{key}":"', 1)[1].split('"', 1)[0]
        record = record.replace(f'"{key}":"{old}"', f'"{key}":"{value}"')
    return f'{{"operation":"create","version":{version},"schedule":{{{record}}}}}'


def test_the_spec_example_decodes() -> None:
    change = decode_change(line())
    assert isinstance(change, ScheduleCreateChange)
    assert isinstance(change.schedule, CalendarScheduleRecord)
    assert encode_change(change) == line().encode()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            line(version=1),
            "a `calendar` schedule must be created with version 3, not 1 - at `$.version`",
        ),
        (
            line(version=2),
            "a `calendar` schedule must be created with version 3, not 2 - at `$.version`",
        ),
        (
            line(rule="BYMONTHDAY=-1;FREQ=MONTHLY"),
            "expected the rule in canonical form 'FREQ=MONTHLY;BYMONTHDAY=-1', got "
            "'BYMONTHDAY=-1;FREQ=MONTHLY' - at `$.schedule.rule`",
        ),
        (
            line(rule="FREQ=MONTHLY;INTERVAL=1"),
            "expected the rule in canonical form 'FREQ=MONTHLY', got 'FREQ=MONTHLY;INTERVAL=1' "
            "- at `$.schedule.rule`",
        ),
        (
            line(rule="FREQ=HOURLY"),
            "the rule 'FREQ=HOURLY' is not valid: FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY "
            "(use `every_seconds` for a fixed interval), not 'HOURLY'. - at `$.schedule.rule`",
        ),
        (
            line(startDate="2026-02-30"),
            "expected a calendar date of the form YYYY-MM-DD, got '2026-02-30' "
            "- at `$.schedule.startDate`",
        ),
        (
            line(timeZone="EST"),
            "'EST' is not a supported time zone - at `$.schedule.timeZone`",
        ),
        (
            line(time="09:00"),
            "expected a wall-clock time of the form HH:MM:SS.sss, got '09:00' "
            "- at `$.schedule.time`",
        ),
    ],
)
def test_the_decoder_rejects_a_calendar_record_a_create_never_writes(
    text: str, problem: str
) -> None:
    with pytest.raises(ScheduleError) as caught:
        decode_change(text)
    assert caught.value.code == "corrupt_schedule_log"
    assert caught.value.message == f"schedule/change is corrupt: {problem}"


def test_golden_calendar_log_decodes_and_re_encodes_byte_for_byte() -> None:
    lines = GOLDEN_V3_CALENDAR.read_bytes().splitlines()
    state = ScheduleFold()
    for number, text in enumerate(lines):
        change = decode_change(text, where=f"at line {number + 1}")
        assert encode_change(change) == text
        state.apply(change, position=number)
    assert [record.id for record in state.by_creation()] == ["sch_2", "sch_3"]
    record = state.get(ScheduleId("sch_2"))
    assert record is not None
    assert record.scheduled_at == "2027-02-26T08:00:00.000Z"


# -- fold, delivery, framing, views, timeline -------------------------------------------------


def test_a_dispatch_advances_to_the_first_occurrence_after_the_decision() -> None:
    state = ScheduleFold()
    create(state, RENT)
    decided_at = parse_instant("2027-03-05T12:00:00.000Z")
    delivery = plan_delivery(state, decided_at)
    assert delivery is not None
    assert delivery.kind == "batch"
    (occurrence,) = delivery.occurrences
    # 31 December, 31 January and 28 February were due: the last is delivered, two are skipped.
    assert (occurrence.due_at, occurrence.skipped) == (
        parse_instant("2027-02-28T08:00:00.000Z"),
        2,
    )
    for change in delivery.changes:
        state.apply(change)
    record = state.get(ScheduleId("sch_1"))
    assert record is not None
    assert record.scheduled_at == "2027-03-31T07:00:00.000Z"  # summer time in Paris by then


def test_calendar_reminders_join_every_and_daily_ones_in_one_batch() -> None:
    state = ScheduleFold()
    create(state, RENT)
    create(state, {"prompt": "standup", "daily_at": {"time": "09:00", "time_zone": "UTC"}})
    create(state, {"prompt": "stretch", "every_seconds": 3600})
    decided_at = parse_instant("2027-01-01T12:00:00.000Z")
    delivery = plan_delivery(state, decided_at)
    assert delivery is not None
    # In target order: the every one (2026-12-01 11:00), the daily (12-02), the calendar (12-31).
    assert [o.record.id for o in delivery.occurrences] == ["sch_3", "sch_2", "sch_1"]
    text = frame(delivery)
    assert "kind: calendar (FREQ=MONTHLY;BYMONTHDAY=-1 at 09:00 Europe/Paris)\n" in text
    assert "occurrence key: sch_1@2026-12-31T08:00:00.000Z\n" in text


def test_a_last_occurrence_ends_the_record() -> None:
    state = ScheduleFold()
    create(
        state,
        {
            "prompt": "p",
            "calendar": {"rule": "FREQ=DAILY;COUNT=2", "time": "12:00", "time_zone": "UTC"},
        },
    )
    state.apply(dispatch_change(ScheduleId("sch_1"), parse_instant("2026-12-01T12:00:00.000Z")))
    assert state.get(ScheduleId("sch_1")) is not None
    state.apply(dispatch_change(ScheduleId("sch_1"), parse_instant("2026-12-05T00:00:00.000Z")))
    assert state.get(ScheduleId("sch_1")) is None


def test_the_view_carries_the_record_fields() -> None:
    state = ScheduleFold()
    change = create(state, RENT)
    view = make_view(change.schedule, NOW)
    assert msgspec.json.decode(msgspec.json.encode(view)) == {
        "kind": "calendar",
        "id": "sch_1",
        "prompt": "pay rent",
        "rule": "FREQ=MONTHLY;BYMONTHDAY=-1",
        "time": "09:00:00.000",
        "timeZone": "Europe/Paris",
        "startDate": "2026-12-01",
        "scheduledAt": "2026-12-31T08:00:00.000Z",
        "state": "scheduled",
        "deliveryMode": "session-local",
        "runs": 0,
        "lastRun": None,
    }


def test_the_timeline_lists_the_rule_dates() -> None:
    state = ScheduleFold()
    create(state, RENT)
    timeline = build_timeline(
        state.by_creation(),
        now=NOW,
        until=parse_instant("2027-04-30T23:00:00.000Z"),
        zone=load_zone("Europe/Paris"),
        limit=3,
    )
    assert timeline.total == 5
    assert timeline.truncated
    assert [o.scheduled_at for o in timeline.occurrences] == [
        "2026-12-31T08:00:00.000Z",
        "2027-01-31T08:00:00.000Z",
        "2027-02-28T08:00:00.000Z",
    ]
    overdue = build_timeline(
        state.by_creation(),
        now=parse_instant("2027-03-05T00:00:00.000Z"),
        until=parse_instant("2027-04-30T23:00:00.000Z"),
        zone=load_zone("UTC"),
        limit=10,
    )
    assert [(o.scheduled_at, o.state, o.skipped) for o in overdue.occurrences] == [
        ("2027-02-28T08:00:00.000Z", "overdue", 2),
        ("2027-03-31T07:00:00.000Z", "scheduled", 0),
        ("2027-04-30T07:00:00.000Z", "scheduled", 0),
    ]
    assert overdue.total == 3


# -- with SPEC §11 ----------------------------------------------------------------------------


def test_an_update_can_switch_a_reminder_to_a_calendar_rule() -> None:
    state = ScheduleFold()
    create(state, {"prompt": "stretch", "every_seconds": 3600})
    later = parse_instant("2026-12-02T10:00:00.000Z")
    schedule_id, changes = decide_update(
        {"id": "sch_1", "calendar": RENT["calendar"]}, now=later, state=state
    )
    for change in changes:
        state.apply(change)
    record = state.get(schedule_id)
    assert isinstance(record, CalendarScheduleRecord)
    assert (record.rule, record.start_date, record.scheduled_at) == (
        "FREQ=MONTHLY;BYMONTHDAY=-1",
        "2026-12-02",
        "2026-12-31T08:00:00.000Z",
    )
    assert all(decode_change(encode_change(change)) == change for change in changes)


def test_a_calendar_reminder_ends_after_its_max_runs() -> None:
    state = ScheduleFold()
    create(state, {**RENT, "ends": {"until": None, "max_runs": 1}})
    record = state.get(ScheduleId("sch_1"))
    assert record is not None
    delivery = plan_delivery(state, parse_instant("2027-01-01T00:00:00.000Z"))
    assert delivery is not None
    for change in delivery.changes:
        state.apply(change)
    assert state.get(ScheduleId("sch_1")) is None


def test_ends_until_must_follow_the_first_calendar_target() -> None:
    assert error({**RENT, "ends": {"until": "2026-12-15T00:00:00Z", "max_runs": None}}) == (
        "invalid_rule",
        "`ends.until` 2026-12-15T00:00:00.000Z is not after the reminder's first target "
        "2026-12-31T08:00:00.000Z; choose a later end or leave it null.",
    )
