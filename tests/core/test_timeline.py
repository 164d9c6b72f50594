from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from session_schedule.core.changes import create_change, snooze_change
from session_schedule.core.daily import first_after, make_rule, occurrence_on
from session_schedule.core.fold import fold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import MAX_INSTANT, Instant, format_instant, parse_instant
from session_schedule.core.records import (
    WEEKDAYS,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    Weekday,
)
from session_schedule.core.time_input import format_time_of_day, load_zone
from session_schedule.core.timeline import build_timeline, record_misses

UTC = load_zone("UTC")
START = parse_instant("2026-01-01T00:00:00.000Z")


def every(seconds: int, at: int, number: int = 1) -> EveryScheduleRecord:
    return EveryScheduleRecord(
        id=ScheduleId(f"sch_{number}"),
        prompt="p",
        every_seconds=seconds,
        scheduled_at=format_instant(Instant(at)),
    )


@given(
    seconds=st.sampled_from([300, 420, 3600]),
    offset=st.integers(0, 7_200_000),
    lateness=st.integers(0, 7_200_000),
    window=st.integers(1, 7_200_000),
)
def test_expansion_agrees_with_brute_force_enumeration(
    seconds: int, offset: int, lateness: int, window: int
) -> None:
    record = every(seconds, START + offset)
    now = Instant(START + lateness)
    until = Instant(now + window)
    timeline = build_timeline([record], now=now, until=until, zone=UTC, limit=10_000)
    targets = []
    target = START + offset
    while target <= until:
        targets.append(target)
        target += seconds * 1000
    due = [t for t in targets if t <= now]
    expected = ([due[-1]] if due else []) + [t for t in targets if t > now]
    assert [parse_instant(item.scheduled_at) for item in timeline.occurrences] == expected
    assert timeline.total == len(expected)
    assert not timeline.truncated
    if due:
        assert timeline.occurrences[0].state == "overdue"
        assert timeline.occurrences[0].skipped == len(due) - 1


def test_records_merge_in_time_then_id_order_and_the_limit_truncates() -> None:
    hourly = every(3600, START + 3_600_000, number=2)
    one_shot = AtScheduleRecord(
        id=ScheduleId("sch_1"), prompt="q", scheduled_at="2026-01-01T02:00:00.000Z"
    )
    timeline = build_timeline(
        [hourly, one_shot],
        now=START,
        until=parse_instant("2026-01-01T05:00:00.000Z"),
        zone=load_zone("Asia/Tokyo"),
        limit=3,
    )
    assert [(o.id, o.scheduled_at, o.local) for o in timeline.occurrences] == [
        ("sch_2", "2026-01-01T01:00:00.000Z", "2026-01-01T10:00:00.000+09:00"),
        ("sch_1", "2026-01-01T02:00:00.000Z", "2026-01-01T11:00:00.000+09:00"),
        ("sch_2", "2026-01-01T02:00:00.000Z", "2026-01-01T11:00:00.000+09:00"),
    ]
    assert (timeline.total, timeline.truncated, timeline.zone) == (6, True, "Asia/Tokyo")


def test_a_one_shot_outside_the_window_is_left_out_unless_overdue() -> None:
    later = AtScheduleRecord(
        id=ScheduleId("sch_1"), prompt="q", scheduled_at="2026-01-02T00:00:00.000Z"
    )
    overdue = AtScheduleRecord(
        id=ScheduleId("sch_2"), prompt="q", scheduled_at="2025-12-31T00:00:00.000Z"
    )
    timeline = build_timeline(
        [later, overdue], now=START, until=Instant(START + 60_000), zone=UTC, limit=10
    )
    assert [(o.id, o.state, o.skipped) for o in timeline.occurrences] == [("sch_2", "overdue", 0)]


def test_expansion_stops_at_the_last_representable_instant() -> None:
    record = every(3600, parse_instant("9999-12-31T21:00:00.000Z"))
    now = parse_instant("9999-12-31T20:00:00.000Z")
    timeline = build_timeline([record], now=now, until=MAX_INSTANT, zone=UTC, limit=100)
    assert [o.scheduled_at for o in timeline.occurrences] == [
        "9999-12-31T21:00:00.000Z",
        "9999-12-31T22:00:00.000Z",
        "9999-12-31T23:00:00.000Z",
    ]
    assert timeline.total == 3


@given(
    zone=st.sampled_from(["America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "UTC"]),
    time_of_day=st.integers(0, 86_399_999),
    weekdays=st.sets(st.sampled_from(WEEKDAYS), min_size=1),
    start=st.integers(0, 40 * 86_400_000),
    lateness=st.integers(0, 20 * 86_400_000),
    window=st.integers(0, 30 * 86_400_000),
)
def test_daily_expansion_agrees_with_resolving_each_date(
    zone: str, time_of_day: int, weekdays: set[Weekday], start: int, lateness: int, window: int
) -> None:
    """Around DST changes of 2011-2012 (and Samoa's skipped day): the timeline lists the latest
    due occurrence, then each listed date's occurrence up to ``until``, with an O(1) total."""
    listed = tuple(day for day in WEEKDAYS if day in weekdays)
    rule = make_rule(time_of_day, load_zone(zone), listed)
    created = Instant(parse_instant("2011-11-01T00:00:00.000Z") + start)
    first = first_after(rule, created)
    assert first is not None
    record = DailyScheduleRecord(
        id=ScheduleId("sch_1"),
        prompt="p",
        local_time=format_time_of_day(time_of_day),
        time_zone=zone,
        weekdays=list(listed),
        scheduled_at=format_instant(Instant(first[1])),
    )
    now = Instant(first[1] + lateness - 10 * 86_400_000)
    until = Instant(now + window)
    # Every listed date's occurrence, date by date, from the record's first date on.
    occurrences: list[int] = []
    day = first[0]
    while len(occurrences) < 80:
        if WEEKDAYS[(day + 3) % 7] in weekdays:
            occurrences.append(occurrence_on(rule, day))
        day += 1
    due = [o for o in occurrences if o <= now]
    expected = ([max(due)] if due else []) + [o for o in occurrences if now < o <= until]
    timeline = build_timeline([record], now=now, until=until, zone=UTC, limit=10_000)
    assert [parse_instant(item.scheduled_at) for item in timeline.occurrences] == expected
    assert timeline.total == len(expected)
    if due:
        assert timeline.occurrences[0].skipped == len(due) - 1
        assert timeline.occurrences[0].kind == "daily"


def daily_utc(target: str) -> DailyScheduleRecord:
    return DailyScheduleRecord(
        id=ScheduleId("sch_1"),
        prompt="p",
        local_time="09:00:00.000",
        time_zone="UTC",
        weekdays=list(WEEKDAYS),
        scheduled_at=target,
    )


def test_an_overdue_daily_record_shows_its_latest_due_occurrence_then_the_next_ones() -> None:
    now = parse_instant("2026-01-03T10:00:00.000Z")
    timeline = build_timeline(
        [daily_utc("2026-01-01T09:00:00.000Z")],
        now=now,
        until=Instant(now + 2 * 86_400_000),
        zone=UTC,
        limit=10,
    )
    assert [(o.scheduled_at, o.state, o.skipped) for o in timeline.occurrences] == [
        ("2026-01-03T09:00:00.000Z", "overdue", 2),
        ("2026-01-04T09:00:00.000Z", "scheduled", 0),
        ("2026-01-05T09:00:00.000Z", "scheduled", 0),
    ]
    assert timeline.total == 3


def test_a_reminder_later_than_its_max_lateness_is_listed_as_missed_then_its_next_target() -> None:
    """SPEC §11: nothing is delivered; the owner's ``miss`` names the oldest overdue occurrence
    (for a snoozed reminder, the one the snooze moved), and the reminder goes on with its first
    target after the decision — not its latest due occurrence, and nothing counted as skipped."""
    now = parse_instant("2026-01-03T10:00:00.000Z")
    daily = msgspec.structs.replace(daily_utc("2026-01-01T09:00:00.000Z"), max_lateness_seconds=600)
    hourly = msgspec.structs.replace(
        every(3600, parse_instant("2026-01-03T08:00:00.000Z"), 2), max_lateness_seconds=60
    )
    state = fold(
        enumerate(
            [
                create_change(daily),
                create_change(hourly),
                snooze_change(hourly.id, parse_instant("2026-01-03T09:00:00.000Z")),
            ]
        )
    )
    missed = record_misses(state, now)
    assert [(miss.record.id, format_instant(miss.occurrence)) for miss in missed] == [
        ("sch_1", "2026-01-01T09:00:00.000Z"),
        ("sch_2", "2026-01-03T08:00:00.000Z"),
    ]
    assert record_misses(state, now) == ()
    timeline = build_timeline(
        state.ordered(),
        now=now,
        until=parse_instant("2026-01-03T12:00:00.000Z"),
        zone=UTC,
        limit=10,
        statuses=state.statuses(),
        missed=missed,
    )
    assert [(o.id, o.scheduled_at, o.state, o.skipped) for o in timeline.occurrences] == [
        ("sch_1", "2026-01-01T09:00:00.000Z", "missed", 0),
        ("sch_2", "2026-01-03T08:00:00.000Z", "missed", 0),
        ("sch_2", "2026-01-03T11:00:00.000Z", "scheduled", 0),
        ("sch_2", "2026-01-03T12:00:00.000Z", "scheduled", 0),
    ]
    assert timeline.total == 4


def test_misses_repeat_as_the_owner_misses_one_shot_after_one_shot() -> None:
    """The owner misses the earliest due one-shot per decision; the timeline lists every one
    it will miss, and a one-shot within its lateness stays overdue (delivered)."""
    now = parse_instant("2026-01-01T12:00:00.000Z")
    one_shots = [
        AtScheduleRecord(
            id=ScheduleId(f"sch_{number}"),
            prompt="p",
            scheduled_at=target,
            max_lateness_seconds=lateness,
        )
        for number, target, lateness in [
            (1, "2026-01-01T09:00:00.000Z", 60),
            (2, "2026-01-01T10:00:00.000Z", 60),
            (3, "2026-01-01T11:00:00.000Z", 7200),
        ]
    ]
    state = fold(enumerate([create_change(record) for record in one_shots]))
    missed = record_misses(state, now)
    timeline = build_timeline(
        state.ordered(),
        now=now,
        until=Instant(now + 3_600_000),
        zone=UTC,
        limit=10,
        statuses=state.statuses(),
        missed=missed,
    )
    assert [(o.id, o.state) for o in timeline.occurrences] == [
        ("sch_1", "missed"),
        ("sch_2", "missed"),
        ("sch_3", "overdue"),
    ]


def test_daily_windows_stop_at_year_9999_and_before_the_target() -> None:
    now = parse_instant("9999-12-31T10:00:00.000Z")
    last = build_timeline(
        [daily_utc("9999-12-30T09:00:00.000Z")], now=now, until=MAX_INSTANT, zone=UTC, limit=10
    )
    assert [(o.scheduled_at, o.skipped) for o in last.occurrences] == [
        ("9999-12-31T09:00:00.000Z", 1)
    ]
    assert last.total == 1
    early = build_timeline(
        [daily_utc("2026-01-05T09:00:00.000Z")],
        now=parse_instant("2026-01-01T00:00:00.000Z"),
        until=parse_instant("2026-01-02T00:00:00.000Z"),
        zone=UTC,
        limit=10,
    )
    assert (early.occurrences, early.total) == ([], 0)


def test_a_frequent_rule_does_not_hide_the_next_occurrence_of_the_others() -> None:
    frequent = every(300, START + 300_000, number=1)
    hourly = every(3_600, START + 3_000_000, number=2)
    daily = DailyScheduleRecord(
        id=ScheduleId("sch_4"),
        prompt="p",
        local_time="09:00:00.000",
        time_zone="UTC",
        weekdays=list(WEEKDAYS),
        scheduled_at="2026-01-01T09:00:00.000Z",
    )
    later = DailyScheduleRecord(
        id=ScheduleId("sch_3"),
        prompt="p",
        local_time="10:00:00.000",
        time_zone="UTC",
        weekdays=list(WEEKDAYS),
        scheduled_at="2026-01-01T10:00:00.000Z",
    )
    timeline = build_timeline(
        [frequent, hourly, daily, later],
        now=START,
        until=Instant(START + 86_400_000),
        zone=UTC,
        limit=6,
    )
    assert [(o.id, o.scheduled_at) for o in timeline.occurrences] == [
        ("sch_1", "2026-01-01T00:05:00.000Z"),
        ("sch_1", "2026-01-01T00:10:00.000Z"),
        ("sch_1", "2026-01-01T00:15:00.000Z"),
        ("sch_2", "2026-01-01T00:50:00.000Z"),
        ("sch_4", "2026-01-01T09:00:00.000Z"),
        ("sch_3", "2026-01-01T10:00:00.000Z"),
    ]
    assert (timeline.total, timeline.truncated) == (288 + 24 + 1 + 1, True)


def test_with_more_reminders_than_the_limit_the_soonest_next_occurrences_are_listed() -> None:
    records = [every(300, START + (10 - number) * 60_000, number=number) for number in range(1, 6)]
    timeline = build_timeline(
        records, now=START, until=Instant(START + 3_600_000), zone=UTC, limit=3
    )
    assert [(o.id, o.scheduled_at) for o in timeline.occurrences] == [
        ("sch_5", "2026-01-01T00:05:00.000Z"),
        ("sch_4", "2026-01-01T00:06:00.000Z"),
        ("sch_3", "2026-01-01T00:07:00.000Z"),
    ]
