from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from session_schedule.core.changes import create_change, dispatch_change
from session_schedule.core.due import Occurrence, next_wakeup, plan_delivery
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.records import (
    WEEKDAYS,
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    ScheduleRecord,
)


def t(text: str) -> Instant:
    return parse_instant(f"2026-11-29T{text}.000Z")


def after(record_id: str, when: str) -> AfterScheduleRecord:
    return AfterScheduleRecord(
        id=ScheduleId(record_id),
        prompt="p",
        after_seconds=60,
        scheduled_at=f"2026-11-29T{when}.000Z",
    )


def at(record_id: str, when: str) -> AtScheduleRecord:
    return AtScheduleRecord(
        id=ScheduleId(record_id), prompt="p", scheduled_at=f"2026-11-29T{when}.000Z"
    )


def every(record_id: str, when: str, seconds: int = 600) -> EveryScheduleRecord:
    return EveryScheduleRecord(
        id=ScheduleId(record_id),
        prompt="p",
        every_seconds=seconds,
        scheduled_at=f"2026-11-29T{when}.000Z",
    )


def state_of(*records: ScheduleRecord) -> ScheduleFold:
    return fold(enumerate(create_change(record) for record in records))


def test_nothing_active_means_nothing_to_wait_for() -> None:
    state = ScheduleFold()
    assert next_wakeup(state) is None
    assert plan_delivery(state, t("20:00:00")) is None


def test_wakeup_is_the_earliest_target_of_any_kind() -> None:
    assert next_wakeup(state_of(at("sch_1", "21:00:00"), every("sch_2", "20:30:00"))) == t(
        "20:30:00"
    )
    assert next_wakeup(state_of(at("sch_1", "20:00:00"), every("sch_2", "20:30:00"))) == t(
        "20:00:00"
    )


def test_nothing_due_before_the_first_target() -> None:
    state = state_of(at("sch_1", "21:00:00"), every("sch_2", "20:30:00"))
    assert plan_delivery(state, t("20:29:59")) is None


def test_the_earliest_due_one_shot_goes_alone_even_when_everies_are_due() -> None:
    state = state_of(
        every("sch_1", "19:00:00"),
        at("sch_2", "20:00:00"),
        after("sch_3", "19:30:00"),
        at("sch_4", "19:30:00"),
    )
    delivery = plan_delivery(state, t("20:00:00"))
    assert delivery is not None
    assert delivery.kind == "one-shot"
    assert delivery.decided_at == t("20:00:00")
    assert delivery.occurrences == (
        Occurrence(record=after("sch_3", "19:30:00"), due_at=t("19:30:00"), skipped=0),
    )
    assert delivery.occurrences[0].key == "sch_3@2026-11-29T19:30:00.000Z"
    assert delivery.changes == (dispatch_change(ScheduleId("sch_3")),)


def test_due_everies_form_one_batch_in_target_then_creation_order() -> None:
    state = state_of(
        every("sch_1", "19:40:00"),
        every("sch_2", "19:00:00", seconds=3600),
        every("sch_3", "19:40:00", seconds=300),
        every("sch_4", "20:40:00"),
        at("sch_5", "23:00:00"),
    )
    now = t("20:05:00")
    delivery = plan_delivery(state, now)
    assert delivery is not None
    assert delivery.kind == "batch"
    assert [(o.record.id, o.due_at, o.skipped, o.key) for o in delivery.occurrences] == [
        ("sch_2", t("20:00:00"), 1, "sch_2@2026-11-29T19:00:00.000Z"),
        ("sch_1", t("20:00:00"), 2, "sch_1@2026-11-29T19:40:00.000Z"),
        ("sch_3", t("20:05:00"), 5, "sch_3@2026-11-29T19:40:00.000Z"),
    ]
    assert delivery.changes == tuple(
        dispatch_change(ScheduleId(record_id), now) for record_id in ("sch_2", "sch_1", "sch_3")
    )
    for change in delivery.changes:
        state.apply(change)
    assert [record.scheduled_at for record in state.ordered()] == [
        "2026-11-29T20:10:00.000Z",
        "2026-11-29T20:10:00.000Z",
        "2026-11-29T20:40:00.000Z",
        "2026-11-29T21:00:00.000Z",
        "2026-11-29T23:00:00.000Z",
    ]
    assert plan_delivery(state, now) is None


@given(
    offsets=st.lists(st.integers(0, 7_200), min_size=1, max_size=12),
    intervals=st.lists(st.sampled_from([300, 420, 900]), min_size=12, max_size=12),
    now_offset=st.integers(0, 10_000),
)
def test_batch_matches_a_brute_force_selection(
    offsets: list[int], intervals: list[int], now_offset: int
) -> None:
    base = t("18:00:00")
    records = [
        EveryScheduleRecord(
            id=ScheduleId(f"sch_{n + 1}"),
            prompt="p",
            every_seconds=intervals[n],
            scheduled_at=f"2026-11-29T{18 + offset // 3600:02d}:{offset // 60 % 60:02d}:"
            f"{offset % 60:02d}.000Z",
        )
        for n, offset in enumerate(offsets)
    ]
    state = state_of(*records)
    now = Instant(base + now_offset * 1000)
    expected = []
    for sequence, record in enumerate(records):
        target = parse_instant(record.scheduled_at)
        occurrences = list(range(target, now + 1, record.every_seconds * 1000))
        if occurrences:
            expected.append((target, sequence, record.id, occurrences[-1], len(occurrences) - 1))
    expected.sort()
    delivery = plan_delivery(state, now)
    if not expected:
        assert delivery is None
        return
    assert delivery is not None
    assert [(o.record.id, o.due_at, o.skipped) for o in delivery.occurrences] == [
        (record_id, last, skipped) for _, _, record_id, last, skipped in expected
    ]


def daily(record_id: str, when: str) -> DailyScheduleRecord:
    """Every day at 20:00 UTC, currently targeting ``when`` on 2026-11-29."""
    return DailyScheduleRecord(
        id=ScheduleId(record_id),
        prompt="p",
        local_time="20:00:00.000",
        time_zone="UTC",
        weekdays=list(WEEKDAYS),
        scheduled_at=f"2026-11-29T{when}.000Z",
    )


def test_daily_records_join_the_batch_and_one_shots_keep_priority() -> None:
    state = state_of(
        daily("sch_1", "20:00:00"), every("sch_2", "20:00:00"), at("sch_3", "20:30:00")
    )
    assert next_wakeup(state) == t("20:00:00")
    decided = parse_instant("2026-12-02T21:00:00.000Z")
    first = plan_delivery(state, decided)
    assert first is not None
    assert first.kind == "one-shot"
    assert [occurrence.record.id for occurrence in first.occurrences] == ["sch_3"]
    state.apply(first.changes[0])
    batch = plan_delivery(state, decided)
    assert batch is not None
    assert batch.kind == "batch"
    assert [(o.record.id, o.due_at, o.skipped) for o in batch.occurrences] == [
        ("sch_1", parse_instant("2026-12-02T20:00:00.000Z"), 3),
        ("sch_2", parse_instant("2026-12-02T21:00:00.000Z"), 438),
    ]
    assert batch.changes == (
        dispatch_change(ScheduleId("sch_1"), decided),
        dispatch_change(ScheduleId("sch_2"), decided),
    )
    for change in batch.changes:
        state.apply(change)
    assert next_wakeup(state) == parse_instant("2026-12-02T21:10:00.000Z")
    assert [record.scheduled_at for record in state.ordered()] == [
        "2026-12-02T21:10:00.000Z",
        "2026-12-03T20:00:00.000Z",
    ]
