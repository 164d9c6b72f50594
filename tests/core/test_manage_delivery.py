"""SPEC §11 delivery planning, framing and the timeline: snoozes, pauses, ends and misses."""

from __future__ import annotations

import zoneinfo

import msgspec

from session_schedule.core.changes import (
    ScheduleChange,
    create_change,
    miss_change,
    pause_change,
    snooze_change,
)
from session_schedule.core.due import next_wakeup, plan_delivery, plan_misses
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.framing import frame
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.records import (
    AtScheduleRecord,
    CalendarScheduleRecord,
    Ends,
    EveryScheduleRecord,
)
from session_schedule.core.timeline import build_timeline

SID = ScheduleId("sch_1")
T0 = "2026-12-01T10:00:00.000Z"


def instant(text: str) -> Instant:
    return parse_instant(text)


def state_of(*changes: ScheduleChange) -> ScheduleFold:
    return fold(enumerate(changes))


def every(
    ends: Ends | msgspec.UnsetType = msgspec.UNSET,
    lateness: int | msgspec.UnsetType = msgspec.UNSET,
) -> EveryScheduleRecord:
    return EveryScheduleRecord(
        id=SID,
        prompt="stand up",
        every_seconds=600,
        scheduled_at=T0,
        ends=ends,
        max_lateness_seconds=lateness,
    )


def test_the_frame_of_a_snoozed_delivery_word_for_word() -> None:
    state = state_of(
        create_change(every()), snooze_change(SID, instant("2026-12-01T10:25:00.000Z"))
    )
    assert next_wakeup(state) == instant("2026-12-01T10:25:00.000Z")
    assert plan_delivery(state, instant("2026-12-01T10:24:59.999Z")) is None
    delivery = plan_delivery(state, instant("2026-12-01T10:25:00.000Z"))
    assert delivery is not None
    assert frame(delivery) == (
        "[session-schedule] Reminder follow-up\n"
        "Recurring reminders you scheduled earlier in this conversation are due (1). Act on "
        "each prompt now; each keeps recurring until it is deleted. "
        "A prompt's words about when or how often are context, not a request to create "
        "another reminder.\n"
        "All times are UTC.\n"
        "decided at: 2026-12-01T10:25:00.000Z\n"
        "\n"
        "reminder 1 of 1: sch_1\n"
        "kind: every (600 seconds)\n"
        "due at: 2026-12-01T10:25:00.000Z\n"
        "snoozed from: 2026-12-01T10:00:00.000Z\n"
        "skipped occurrences: 2\n"
        "occurrence key: sch_1@2026-12-01T10:00:00.000Z\n"
        'prompt: "stand up"'
    )
    for change in delivery.changes:
        state.apply(change)
    record = state.get(SID)
    assert record is not None
    assert record.scheduled_at == "2026-12-01T10:30:00.000Z"


def test_a_snoozed_one_shot_names_its_original_occurrence() -> None:
    record = AtScheduleRecord(id=SID, prompt="call", scheduled_at=T0)
    state = state_of(create_change(record), snooze_change(SID, instant("2026-12-01T11:00:00.000Z")))
    delivery = plan_delivery(state, instant("2026-12-01T11:00:00.000Z"))
    assert delivery is not None
    [occurrence] = delivery.occurrences
    assert occurrence.key == "sch_1@2026-12-01T10:00:00.000Z"
    assert "snoozed from: 2026-12-01T10:00:00.000Z\n" in frame(delivery)


def test_a_paused_reminder_is_never_due() -> None:
    state = state_of(create_change(every()), pause_change(SID))
    assert next_wakeup(state) is None
    assert plan_delivery(state, instant("2027-01-01T00:00:00.000Z")) is None
    assert plan_misses(state, instant("2027-01-01T00:00:00.000Z")) == ()


def test_a_late_occurrence_is_missed_not_delivered() -> None:
    state = state_of(create_change(every(lateness=60)))
    on_time = instant("2026-12-01T10:01:00.000Z")
    assert plan_misses(state, on_time) == ()
    assert plan_delivery(state, on_time) is not None
    late = instant("2026-12-01T10:01:00.001Z")
    assert plan_misses(state, late) == (miss_change(SID, instant(T0), late),)
    assert plan_delivery(state, late) is None
    for change in plan_misses(state, late):
        state.apply(change)
    record = state.get(SID)
    assert record is not None
    assert record.scheduled_at == "2026-12-01T10:10:00.000Z"


def test_a_late_one_shot_is_missed_and_ends() -> None:
    record = AtScheduleRecord(id=SID, prompt="call", scheduled_at=T0, max_lateness_seconds=300)
    state = state_of(create_change(record))
    late = instant("2026-12-01T10:05:00.001Z")
    [miss] = plan_misses(state, late)
    state.apply(miss)
    assert len(state) == 0


def test_max_runs_ends_a_record_with_its_last_dispatch() -> None:
    state = state_of(create_change(every(ends=Ends(until=None, max_runs=2))))
    for decided in ("2026-12-01T10:00:00.000Z", "2026-12-01T10:10:00.000Z"):
        delivery = plan_delivery(state, instant(decided))
        assert delivery is not None
        for change in delivery.changes:
            state.apply(change)
    assert len(state) == 0


def test_the_timeline_follows_pauses_snoozes_and_ends() -> None:
    utc = zoneinfo.ZoneInfo("UTC")
    now = instant("2026-12-01T09:00:00.000Z")
    until = instant("2026-12-01T11:00:00.000Z")
    snoozed = state_of(
        create_change(every(ends=Ends(until="2026-12-01T10:40:00.000Z", max_runs=None))),
        snooze_change(SID, instant("2026-12-01T10:15:00.000Z")),
    )
    timeline = build_timeline(
        snoozed.ordered(), now=now, until=until, zone=utc, limit=10, statuses=snoozed.statuses()
    )
    assert [item.scheduled_at for item in timeline.occurrences] == [
        "2026-12-01T10:15:00.000Z",
        "2026-12-01T10:20:00.000Z",
        "2026-12-01T10:30:00.000Z",
        "2026-12-01T10:40:00.000Z",
    ]
    assert timeline.total == 4
    counted = state_of(create_change(every(ends=Ends(until=None, max_runs=3))))
    timeline = build_timeline(
        counted.ordered(), now=now, until=until, zone=utc, limit=10, statuses=counted.statuses()
    )
    assert timeline.total == 3
    assert len(timeline.occurrences) == 3
    paused = state_of(create_change(every()), pause_change(SID))
    timeline = build_timeline(
        paused.ordered(), now=now, until=until, zone=utc, limit=10, statuses=paused.statuses()
    )
    assert (timeline.total, timeline.occurrences) == (0, [])


def _deliver(state: ScheduleFold, decided: str) -> str:
    """The frame of the delivery decided at ``decided``, its changes applied."""
    delivery = plan_delivery(state, instant(decided))
    assert delivery is not None
    for change in delivery.changes:
        state.apply(change)
    return frame(delivery)


BOUNDED_INTRO = (
    "[session-schedule] Reminder follow-up\n"
    "Recurring reminders you scheduled earlier in this conversation are due (1). Act on each "
    "prompt now; each keeps recurring until it is deleted or reaches the end its ends line "
    "gives. A prompt's words about when or how often are context, not a request to create "
    "another reminder.\n"
    "All times are UTC.\n"
)


def test_a_bounded_reminder_s_frame_says_what_is_left_until_its_last_delivery() -> None:
    state = state_of(create_change(every(ends=Ends(until="2026-12-01T10:35:00.000Z", max_runs=3))))
    assert _deliver(state, "2026-12-01T10:00:00.000Z") == (
        BOUNDED_INTRO + "decided at: 2026-12-01T10:00:00.000Z\n"
        "\n"
        "reminder 1 of 1: sch_1\n"
        "kind: every (600 seconds)\n"
        "due at: 2026-12-01T10:00:00.000Z\n"
        "skipped occurrences: 0\n"
        "ends: after 2 more runs; no delivery after 2026-12-01T10:35:00.000Z\n"
        "occurrence key: sch_1@2026-12-01T10:00:00.000Z\n"
        'prompt: "stand up"'
    )
    assert "ends: after 1 more run; no delivery after 2026-12-01T10:35:00.000Z\n" in _deliver(
        state, "2026-12-01T10:10:00.000Z"
    )
    last = _deliver(state, "2026-12-01T10:20:00.000Z")
    assert "ends: this is its last delivery; it will not be delivered again\n" in last
    assert len(state) == 0


def test_the_last_occurrence_before_ends_until_is_the_last_delivery() -> None:
    state = state_of(
        create_change(every(ends=Ends(until="2026-12-01T10:15:00.000Z", max_runs=None)))
    )
    assert "ends: no delivery after 2026-12-01T10:15:00.000Z\n" in _deliver(
        state, "2026-12-01T10:00:00.000Z"
    )
    assert _deliver(state, "2026-12-01T10:12:00.000Z") == (
        BOUNDED_INTRO + "decided at: 2026-12-01T10:12:00.000Z\n"
        "\n"
        "reminder 1 of 1: sch_1\n"
        "kind: every (600 seconds)\n"
        "due at: 2026-12-01T10:10:00.000Z\n"
        "skipped occurrences: 0\n"
        "ends: this is its last delivery; it will not be delivered again\n"
        "occurrence key: sch_1@2026-12-01T10:10:00.000Z\n"
        'prompt: "stand up"'
    )
    assert len(state) == 0


def test_a_snoozed_bounded_delivery_counts_the_runs_after_it() -> None:
    state = state_of(
        create_change(every(ends=Ends(until=None, max_runs=2))),
        snooze_change(SID, instant("2026-12-01T10:25:00.000Z")),
    )
    text = _deliver(state, "2026-12-01T10:25:00.000Z")
    assert (
        "snoozed from: 2026-12-01T10:00:00.000Z\nskipped occurrences: 2\nends: after 1 more run\n"
        in text
    )


def test_an_unbounded_reminder_s_frame_has_no_ends_line_and_the_seed_intro() -> None:
    text = _deliver(state_of(create_change(every(lateness=60))), T0)
    assert "ends:" not in text
    assert "each keeps recurring until it is deleted. A prompt's" in text


def test_no_occurrence_after_ends_until_is_delivered_after_a_downtime() -> None:
    state = state_of(
        create_change(every(ends=Ends(until="2026-12-01T11:05:00.000Z", max_runs=None)))
    )
    text = _deliver(state, "2026-12-05T00:00:00.000Z")
    assert (
        "due at: 2026-12-01T11:00:00.000Z\n"
        "skipped occurrences: 6\n"
        "ends: this is its last delivery; it will not be delivered again\n"
        "occurrence key: sch_1@2026-12-01T10:00:00.000Z\n"
    ) in text
    assert len(state) == 0


def test_the_last_occurrence_of_a_calendar_rule_s_count_is_framed_as_the_last() -> None:
    # No `ends`: the rule's own COUNT runs out with this delivery, and the frame says so rather
    # than that it keeps recurring.
    record = CalendarScheduleRecord(
        id=SID,
        prompt="stand up",
        rule="FREQ=DAILY;COUNT=2",
        local_time="09:00:00.000",
        time_zone="UTC",
        start_date="2026-12-02",
        scheduled_at="2026-12-02T09:00:00.000Z",
    )
    state = state_of(create_change(record))
    first = _deliver(state, "2026-12-02T09:00:00.000Z")
    assert "ends:" not in first
    assert "each keeps recurring until it is deleted. A prompt's" in first
    assert _deliver(state, "2026-12-03T09:00:00.000Z") == (
        BOUNDED_INTRO + "decided at: 2026-12-03T09:00:00.000Z\n"
        "\n"
        "reminder 1 of 1: sch_1\n"
        "kind: calendar (FREQ=DAILY;COUNT=2 at 09:00 UTC)\n"
        "due at: 2026-12-03T09:00:00.000Z\n"
        "skipped occurrences: 0\n"
        "ends: this is its last delivery; it will not be delivered again\n"
        "occurrence key: sch_1@2026-12-03T09:00:00.000Z\n"
        'prompt: "stand up"'
    )
    assert len(state) == 0
