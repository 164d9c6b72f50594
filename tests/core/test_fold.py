from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from session_schedule.core.changes import (
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
    create_change,
    decode_change,
    delete_change,
    dispatch_change,
    update_change,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold, fold, next_every_target, skipped_occurrences
from session_schedule.core.ids import ScheduleId, id_number, make_schedule_id
from session_schedule.core.instants import (
    MAX_INSTANT,
    Instant,
    canonical_instant,
    format_instant,
    parse_instant,
)
from session_schedule.core.records import (
    WEEKDAYS,
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    RecordStatus,
    ScheduleRecord,
    Weekday,
    make_views,
)

GOLDEN = Path(__file__).parent / "golden" / "v1.jsonl"
GOLDEN_V2 = Path(__file__).parent / "golden" / "v2.jsonl"
BASE = parse_instant("2026-11-29T20:00:00.000Z")


def at(record_id: str, when: str, prompt: str = "p") -> ScheduleCreateChange:
    return create_change(
        AtScheduleRecord(id=ScheduleId(record_id), prompt=prompt, scheduled_at=when)
    )


def every(record_id: str, seconds: int, when: str) -> ScheduleCreateChange:
    return create_change(
        EveryScheduleRecord(
            id=ScheduleId(record_id), prompt="p", every_seconds=seconds, scheduled_at=when
        )
    )


def daily(
    record_id: str,
    when: str,
    local_time: str = "09:00:00.000",
    zone: str = "Asia/Tokyo",
    weekdays: tuple[Weekday, ...] = WEEKDAYS,
) -> ScheduleCreateChange:
    return create_change(
        DailyScheduleRecord(
            id=ScheduleId(record_id),
            prompt="p",
            local_time=local_time,
            time_zone=zone,
            weekdays=list(weekdays),
            scheduled_at=when,
        )
    )


def numbered(*changes: ScheduleChange) -> list[tuple[int, ScheduleChange]]:
    return list(enumerate(changes))


def test_golden_v1_log_folds_to_the_same_state() -> None:
    lines = GOLDEN.read_bytes().splitlines()
    state = fold(
        (number, decode_change(line, where=f"at entry {number}"))
        for number, line in enumerate(lines)
    )
    assert state.ordered() == [
        EveryScheduleRecord(
            id=ScheduleId("sch_3"),
            prompt="check the build",
            every_seconds=600,
            scheduled_at="2026-11-29T20:40:00.000Z",
        ),
        EveryScheduleRecord(
            id=ScheduleId("sch_4"),
            prompt="drink water 💧",
            every_seconds=3600,
            scheduled_at="2026-11-29T22:00:00.000Z",
        ),
        AtScheduleRecord(
            id=ScheduleId("sch_5"), prompt="happy new year", scheduled_at="2027-01-01T00:00:00.000Z"
        ),
    ]
    assert state.next_id() == "sch_6"


def test_golden_v2_log_folds_to_the_same_state() -> None:
    lines = GOLDEN_V2.read_bytes().splitlines()
    state = fold(
        (number, decode_change(line, where=f"at entry {number}"))
        for number, line in enumerate(lines)
    )
    assert [(record.id, record.scheduled_at) for record in state.ordered()] == [
        ("sch_1", "2026-11-29T20:40:00.000Z"),
        # Tokyo, weekdays at 09:00: decided on Wednesday 2026-12-09 at 12:00 local.
        ("sch_2", "2026-12-10T00:00:00.000Z"),
        ("sch_5", "2027-01-01T00:00:00.000Z"),
        # New York at 02:30: 2027-03-14 has no 02:30, so it fires at 03:00 EDT.
        ("sch_3", "2027-03-14T07:00:00.000Z"),
    ]
    assert state.next_id() == "sch_6"


def test_order_is_target_then_creation() -> None:
    state = fold(
        numbered(
            at("sch_1", "2026-12-02T00:00:00.000Z"),
            at("sch_2", "2026-12-01T00:00:00.000Z"),
            every("sch_3", 300, "2026-12-01T00:00:00.000Z"),
            at("sch_4", "2026-11-30T00:00:00.000Z"),
        )
    )
    assert [record.id for record in state.ordered()] == ["sch_4", "sch_2", "sch_3", "sch_1"]
    assert len(state) == 4
    assert "sch_3" in state
    assert state.get(ScheduleId("sch_9")) is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            [at("sch_1", "2026-12-01T00:00:00.000Z"), at("sch_1", "2026-12-02T00:00:00.000Z")],
            "schedule/change at entry 1 is corrupt: create uses the id sch_1, but ids must increase "
            "and sch_1 was already used",
        ),
        (
            [
                at("sch_1", "2026-12-01T00:00:00.000Z"),
                delete_change(ScheduleId("sch_1")),
                at("sch_1", "2026-12-02T00:00:00.000Z"),
            ],
            "schedule/change at entry 2 is corrupt: create uses the id sch_1, but ids must increase "
            "and sch_1 was already used",
        ),
        (
            [delete_change(ScheduleId("sch_1"))],
            "schedule/change at entry 0 is corrupt: delete of sch_1, which is not active",
        ),
        (
            [
                at("sch_1", "2026-12-01T00:00:00.000Z"),
                dispatch_change(ScheduleId("sch_1")),
                dispatch_change(ScheduleId("sch_1")),
            ],
            "schedule/change at entry 2 is corrupt: dispatch of sch_1, which is not active",
        ),
        (
            [
                at("sch_1", "2026-12-01T00:00:00.000Z"),
                dispatch_change(ScheduleId("sch_1"), parse_instant("2026-12-01T00:00:00.000Z")),
            ],
            "schedule/change at entry 1 is corrupt: dispatch of one-shot sch_1 carries "
            "`acceptedAt`",
        ),
        (
            [every("sch_1", 300, "2026-12-01T00:00:00.000Z"), dispatch_change(ScheduleId("sch_1"))],
            "schedule/change at entry 1 is corrupt: dispatch of every-record sch_1 lacks "
            "`acceptedAt`",
        ),
        (
            [
                every("sch_1", 300, "2026-12-01T00:00:00.000Z"),
                dispatch_change(ScheduleId("sch_1"), parse_instant("2026-11-30T23:59:59.999Z")),
            ],
            "schedule/change at entry 1 is corrupt: dispatch of sch_1 was accepted at "
            "2026-11-30T23:59:59.999Z, before its target 2026-12-01T00:00:00.000Z",
        ),
    ],
)
def test_fold_rejects_changes_that_break_a_rule(
    changes: list[ScheduleChange], message: str
) -> None:
    with pytest.raises(ScheduleError) as caught:
        fold(numbered(*changes))
    assert caught.value.code == "corrupt_schedule_log"
    assert caught.value.message == message


@pytest.mark.parametrize("indexed", [False, True])
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            [every("sch_1", 300, "2026-12-01T00:00:00Z")],
            "schedule/change at entry 0 is corrupt: expected an instant of the form "
            "YYYY-MM-DDTHH:MM:SS.sssZ, got '2026-12-01T00:00:00Z' - at `$.schedule.scheduledAt`",
        ),
        (
            [
                every("sch_1", 300, "2026-12-01T00:00:00.000Z"),
                msgspec.structs.replace(
                    dispatch_change(ScheduleId("sch_1"), parse_instant("2026-12-01T00:00:00.000Z")),
                    accepted_at="2026-12-01T24:00:00.000Z",
                ),
            ],
            "schedule/change at entry 1 is corrupt: '2026-12-01T24:00:00.000Z' is not a real "
            "time of day - at `$.acceptedAt`",
        ),
    ],
)
def test_a_change_built_with_an_instant_not_in_the_canonical_form_is_refused(
    changes: list[ScheduleChange], message: str, indexed: bool
) -> None:
    # Decoded changes always hold canonical instants; changes built in code are checked too.
    state = ScheduleFold()
    if indexed:
        state.earliest_every()
    with pytest.raises(ScheduleError) as caught:
        state.replay(numbered(*changes))
    assert caught.value.message == message


def test_a_rejected_change_leaves_the_state_untouched() -> None:
    state = fold(numbered(every("sch_1", 300, "2026-12-01T00:00:00.000Z")))
    before = state.ordered()
    with pytest.raises(ScheduleError):
        state.apply(dispatch_change(ScheduleId("sch_1"), parse_instant("2026-11-30T00:00:00.000Z")))
    with pytest.raises(ScheduleError):
        state.apply(at("sch_1", "2026-12-05T00:00:00.000Z"))
    assert state.ordered() == before
    assert state.next_id() == "sch_2"


def test_session_name_appears_in_the_location() -> None:
    with pytest.raises(ScheduleError) as caught:
        fold(numbered(delete_change(ScheduleId("sch_1"))), session="s_abc")
    assert caught.value.message == (
        "schedule/change at entry 0 of session s_abc is corrupt: delete of sch_1, which is not active"
    )


def test_every_dispatch_advances_to_the_first_target_after_the_decision() -> None:
    state = fold(
        numbered(
            every("sch_1", 600, "2026-11-29T20:10:00.000Z"),
            dispatch_change(ScheduleId("sch_1"), parse_instant("2026-11-29T20:10:00.000Z")),
        )
    )
    record = state.get(ScheduleId("sch_1"))
    assert record is not None
    assert record.scheduled_at == "2026-11-29T20:20:00.000Z"


def test_every_record_ends_when_its_next_target_leaves_the_range() -> None:
    state = fold(
        numbered(
            every("sch_1", 3600, "9999-12-31T23:00:00.000Z"),
            dispatch_change(ScheduleId("sch_1"), parse_instant("9999-12-31T23:30:00.000Z")),
        )
    )
    assert len(state) == 0
    assert state.next_id() == "sch_2"


def test_daily_dispatch_advances_to_the_first_occurrence_after_the_decision() -> None:
    # Monday-Friday at 09:00 in Tokyo; decided on Saturday 2026-12-05: next is Monday.
    weekdays: tuple[Weekday, ...] = ("mon", "tue", "wed", "thu", "fri")
    state = fold(
        numbered(
            daily("sch_1", "2026-12-01T00:00:00.000Z", weekdays=weekdays),
            dispatch_change(ScheduleId("sch_1"), parse_instant("2026-12-05T03:00:00.000Z")),
        )
    )
    record = state.get(ScheduleId("sch_1"))
    assert record is not None
    assert record.scheduled_at == "2026-12-07T00:00:00.000Z"
    assert state.earliest_every() == record
    assert state.everies_due(parse_instant("2026-12-07T00:00:00.000Z")) == [record]


def test_daily_dispatch_shape_and_time_are_checked() -> None:
    with pytest.raises(ScheduleError) as caught:
        fold(
            numbered(
                daily("sch_1", "2026-12-01T00:00:00.000Z"), dispatch_change(ScheduleId("sch_1"))
            )
        )
    assert caught.value.message == (
        "schedule/change at entry 1 is corrupt: dispatch of daily-record sch_1 lacks `acceptedAt`"
    )
    with pytest.raises(ScheduleError) as caught:
        fold(
            numbered(
                daily("sch_1", "2026-12-01T00:00:00.000Z"),
                dispatch_change(ScheduleId("sch_1"), parse_instant("2026-11-30T00:00:00.000Z")),
            )
        )
    assert caught.value.message == (
        "schedule/change at entry 1 is corrupt: dispatch of sch_1 was accepted at "
        "2026-11-30T00:00:00.000Z, before its target 2026-12-01T00:00:00.000Z"
    )


def test_daily_record_ends_when_no_occurrence_is_left_in_range() -> None:
    state = fold(
        numbered(
            daily("sch_1", "9999-12-31T04:00:00.000Z", "23:00:00.000", "America/New_York"),
            dispatch_change(ScheduleId("sch_1"), parse_instant("9999-12-31T05:00:00.000Z")),
        )
    )
    assert len(state) == 0


def test_a_fork_knows_inherited_ids_but_activates_none_of_them() -> None:
    inherited = numbered(
        at("sch_1", "2026-12-01T00:00:00.000Z"),
        every("sch_7", 300, "2026-12-01T00:00:00.000Z"),
        delete_change(ScheduleId("sch_1")),
    )
    state = fold(inherited, seed_length=3)
    assert len(state) == 0
    assert state.next_id() == "sch_8"
    with pytest.raises(ScheduleError) as caught:
        fold([*inherited, (3, dispatch_change(ScheduleId("sch_7"), BASE))], seed_length=3)
    assert caught.value.message == (
        "schedule/change at entry 3 is corrupt: dispatch of sch_7, which is not active"
    )
    with pytest.raises(ScheduleError) as caught:
        fold([*inherited, (3, at("sch_7", "2026-12-01T00:00:00.000Z"))], seed_length=3)
    assert caught.value.message == (
        "schedule/change at entry 3 is corrupt: create uses the id sch_7, but ids must increase "
        "and sch_7 was already used"
    )


def test_everies_due_and_earliest_skip_stale_heap_entries() -> None:
    state = fold(
        numbered(
            every("sch_1", 300, "2026-11-29T20:00:00.000Z"),
            every("sch_2", 300, "2026-11-29T20:00:00.000Z"),
            every("sch_3", 300, "2026-11-29T21:00:00.000Z"),
            at("sch_4", "2026-11-29T19:00:00.000Z"),
            at("sch_5", "2026-11-29T19:30:00.000Z"),
        )
    )
    first = state.earliest_one_shot()
    assert first is not None
    assert first.id == "sch_4"
    state.apply(dispatch_change(ScheduleId("sch_1"), BASE))
    state.apply(delete_change(ScheduleId("sch_4")))
    due = state.everies_due(Instant(BASE + 300_000))
    assert [(record.id, record.scheduled_at) for record in due] == [
        ("sch_2", "2026-11-29T20:00:00.000Z"),
        ("sch_1", "2026-11-29T20:05:00.000Z"),
    ]
    earliest = state.earliest_one_shot()
    assert earliest is not None
    assert earliest.id == "sch_5"
    every_first = state.earliest_every()
    assert every_first is not None
    assert every_first.id == "sch_2"
    assert ScheduleFold().everies_due(BASE) == []
    assert ScheduleFold().earliest_every() is None


# -- The O(1) advance agrees with brute-force enumeration ------------------------------------


@given(
    target=st.integers(min_value=BASE - 10**10, max_value=BASE + 10**10),
    lateness=st.integers(min_value=0, max_value=10**9),
    every_seconds=st.integers(min_value=300, max_value=100_000),
)
def test_closed_form_advance_agrees_with_enumeration(
    target: int, lateness: int, every_seconds: int
) -> None:
    decided_at = target + lateness
    occurrences = []
    occurrence = target
    while occurrence <= decided_at:
        occurrences.append(occurrence)
        occurrence += every_seconds * 1000
    assert next_every_target(Instant(target), Instant(decided_at), every_seconds) == occurrence
    assert skipped_occurrences(Instant(target), Instant(decided_at), every_seconds) == (
        len(occurrences) - 1
    )


# -- The fold agrees with a deliberately naive reference model -------------------------------


@dataclass
class Reference:
    """The rules of SPEC §4 written as plainly as possible."""

    active: dict[str, ScheduleRecord] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    used: set[ScheduleId] = field(default_factory=set)

    def apply(self, change: ScheduleChange) -> bool:
        """Apply ``change``; ``False`` (and no effect) when it breaks a rule."""
        if isinstance(change, ScheduleCreateChange):
            record = change.schedule
            if any(id_number(record.id) <= id_number(used) for used in self.used):
                return False
            self.used.add(record.id)
            self.created.append(record.id)
            self.active[record.id] = record
            return True
        record_or_none = self.active.get(change.id)
        if record_or_none is None:
            return False
        if isinstance(change, ScheduleDeleteChange):
            del self.active[change.id]
            return True
        if not isinstance(change, ScheduleDispatchChange):
            return False  # SPEC §11's changes have their own reference model
        if not isinstance(record_or_none, EveryScheduleRecord | DailyScheduleRecord):
            if isinstance(change.accepted_at, str):
                return False
            del self.active[change.id]
            return True
        if not isinstance(change.accepted_at, str):
            return False
        decided = parse_instant(change.accepted_at)
        occurrence: int = parse_instant(record_or_none.scheduled_at)
        if decided < occurrence:
            return False
        if isinstance(record_or_none, DailyScheduleRecord):
            self.active[change.id] = msgspec.structs.replace(
                record_or_none,
                scheduled_at=format_instant(Instant(daily_after(record_or_none, decided))),
            )
            return True
        while occurrence <= decided:
            occurrence += record_or_none.every_seconds * 1000
        if occurrence > MAX_INSTANT:
            del self.active[change.id]
        else:
            self.active[change.id] = EveryScheduleRecord(
                id=record_or_none.id,
                prompt=record_or_none.prompt,
                every_seconds=record_or_none.every_seconds,
                scheduled_at=format_instant(Instant(occurrence)),
            )
        return True

    def ordered(self) -> list[ScheduleRecord]:
        return sorted(
            self.active.values(),
            key=lambda record: (parse_instant(record.scheduled_at), self.created.index(record.id)),
        )

    def next_id(self) -> str:
        numbers = [int(schedule_id.removeprefix("sch_")) for schedule_id in self.used]
        return f"sch_{max(numbers, default=0) + 1}"


FIXED_OFFSETS = {"UTC": 0, "Asia/Tokyo": 9 * 3_600_000, "Asia/Kolkata": 19_800_000}
"""Zones without DST in these years: their occurrences are plain calendar arithmetic."""


def daily_after(record: DailyScheduleRecord, decided: int) -> int:
    """The first occurrence after ``decided``, walking the zone's dates one by one."""
    offset = FIXED_OFFSETS[record.time_zone]
    hours, minutes, rest = record.local_time.split(":")
    time_of_day = ((int(hours) * 60 + int(minutes)) * 60 + float(rest)) * 1000
    date = dt.date(1970, 1, 1) + dt.timedelta(days=(decided + offset) // 86_400_000 - 1)
    while True:
        occurrence = (date - dt.date(1970, 1, 1)).days * 86_400_000 + int(time_of_day) - offset
        if WEEKDAYS[date.weekday()] in record.weekdays and occurrence > decided:
            return occurrence
        date += dt.timedelta(days=1)


small_ids = st.integers(min_value=1, max_value=6).map(make_schedule_id)
near_instants = st.integers(min_value=0, max_value=4 * 3_600_000).map(
    lambda offset: Instant(BASE + offset)
)
near_canonical = near_instants.map(format_instant)
small_records = st.one_of(
    st.builds(
        AfterScheduleRecord,
        id=small_ids,
        prompt=st.just("p"),
        after_seconds=st.integers(1, 10_000),
        scheduled_at=near_canonical,
    ),
    st.builds(AtScheduleRecord, id=small_ids, prompt=st.just("p"), scheduled_at=near_canonical),
    st.builds(
        EveryScheduleRecord,
        id=small_ids,
        prompt=st.just("p"),
        every_seconds=st.sampled_from([300, 450, 600, 3600]),
        scheduled_at=near_canonical,
    ),
    st.builds(
        DailyScheduleRecord,
        id=small_ids,
        prompt=st.just("p"),
        local_time=st.sampled_from(["00:00:00.000", "05:30:00.000", "20:15:30.250"]),
        time_zone=st.sampled_from(sorted(FIXED_OFFSETS)),
        weekdays=st.sampled_from([list(WEEKDAYS), ["mon"], ["tue", "sun"]]),
        scheduled_at=near_canonical,
    ),
)
small_changes = st.one_of(
    small_records.map(create_change),
    small_ids.map(delete_change),
    small_ids.map(dispatch_change),
    st.builds(dispatch_change, small_ids, near_instants),
)


@given(st.lists(small_changes, max_size=40))
def test_fold_agrees_with_the_reference_model(changes: list[ScheduleChange]) -> None:
    state = ScheduleFold()
    reference = Reference()
    for change in changes:
        accepted = reference.apply(change)
        try:
            state.apply(change)
        except ScheduleError as error:
            assert error.code == "corrupt_schedule_log"
            assert not accepted
        else:
            assert accepted
        assert state.ordered() == reference.ordered()
        assert state.next_id() == reference.next_id()


@given(
    st.lists(small_changes, max_size=40),
    st.integers(min_value=0, max_value=40),
    st.lists(near_instants, min_size=1, max_size=3),
)
def test_views_kept_in_order_agree_with_views_built_afresh(
    changes: list[ScheduleChange], first_look: int, nows: list[Instant]
) -> None:
    # The ordered views are built at the first look (after ``first_look`` changes, with Every
    # targets perhaps stale until then) and kept current by every later change.
    state = ScheduleFold()
    reference = Reference()
    for number, change in enumerate(changes):
        if reference.apply(change):
            state.apply(change)
        if number >= first_look:
            for now in nows:
                assert state.views(now) == make_views(reference.ordered(), now)
    for now in nows:
        assert state.views(now) == make_views(reference.ordered(), now)


def _outcome(state: ScheduleFold) -> tuple[list[ScheduleRecord], list[ScheduleRecord], ScheduleId]:
    return state.by_creation(), state.ordered(), state.next_id()


def _mutated(text: str, index: int, replacement: str) -> str:
    """``text`` with its character at ``index`` replaced (past its end: ``replacement``
    appended)."""
    return text[:index] + replacement + text[index + 1 :]


SID_1: Final = make_schedule_id(1)
# Every dispatches accepted at texts that are canonical instants but one character: a date,
# time of day or second that is not one, a character more or fewer.
odd_dispatches = st.builds(
    lambda schedule_id, text: ScheduleDispatchChange(version=1, id=schedule_id, accepted_at=text),
    small_ids,
    st.one_of(
        st.builds(
            _mutated,
            near_canonical,
            st.integers(min_value=0, max_value=24),
            st.sampled_from(["", "0", "3", "6", "9", "x", ":", ".", "Z", "00"]),
        ),
        near_canonical.map(lambda text: text[:8] + "30" + text[10:]),
        near_canonical.map(lambda text: text[:11] + "24" + text[13:]),
    ),
)


@given(
    st.lists(st.one_of(small_changes, odd_dispatches), max_size=40),
    st.integers(min_value=0, max_value=10),
    st.booleans(),
)
def test_replaying_a_log_is_applying_each_change(
    changes: list[ScheduleChange], seed_length: int, indexed: bool
) -> None:
    _assert_replaying_is_applying(changes, seed_length, indexed=indexed)


@given(
    st.lists(
        st.one_of(odd_dispatches, near_instants.map(lambda at: dispatch_change(SID_1, at))),
        min_size=1,
        max_size=6,
    )
)
def test_replaying_every_dispatches_at_any_text_is_applying_them(
    dispatches: list[ScheduleDispatchChange],
) -> None:
    every = EveryScheduleRecord(
        id=SID_1, prompt="p", every_seconds=300, scheduled_at=format_instant(Instant(BASE))
    )
    changes: list[ScheduleChange] = [create_change(every)]
    changes += (
        ScheduleDispatchChange(version=1, id=SID_1, accepted_at=change.accepted_at)
        for change in dispatches
    )
    _assert_replaying_is_applying(changes, 0, indexed=False)


def _assert_replaying_is_applying(
    changes: list[ScheduleChange], seed_length: int, *, indexed: bool
) -> None:
    for change in changes:
        # The instants' parts are known before the replay: it then looks them up itself.
        if isinstance(change, ScheduleDispatchChange) and isinstance(change.accepted_at, str):
            canonical_instant(change.accepted_at[:17] + "00.000Z")
            canonical_instant("2026-01-01T00:00:" + change.accepted_at[17:])
    replayed, applied = ScheduleFold(session="s_1"), ScheduleFold(session="s_1")
    if indexed:
        replayed.earliest_one_shot()
    replay_error = apply_error = None
    try:
        replayed.replay(numbered(*changes), seed_length=seed_length)
    except ScheduleError as error:
        replay_error = error.message
    try:
        for position, change in numbered(*changes):
            if position < seed_length:
                applied.note_inherited(change)
            else:
                applied.apply(change, position=position)
    except ScheduleError as error:
        apply_error = error.message
    assert replay_error == apply_error
    assert _outcome(replayed) == _outcome(applied)
    assert _dispatching_every_first(changes, seed_length) == (apply_error, _outcome(applied))


def _dispatching_every_first(
    changes: list[ScheduleChange], seed_length: int
) -> tuple[str | None, tuple[list[ScheduleRecord], list[ScheduleRecord], ScheduleId]]:
    """The error and the outcome of applying ``changes`` with each dispatch offered to
    :meth:`ScheduleFold.dispatch_every` first (applied the usual way when it declines), which
    must say what the change stood for: the record, its target and the decision instant, as a
    fold applying one change at a time holds them just before it."""
    state, shadow = ScheduleFold(session="s_1"), ScheduleFold(session="s_1")
    try:
        for position, change in numbered(*changes):
            if position < seed_length:
                state.note_inherited(change)
                shadow.note_inherited(change)
                continue
            if not isinstance(change, ScheduleDispatchChange):
                state.apply(change, position=position)
                shadow.apply(change, position=position)
                continue
            before = shadow.get(change.id)
            plain = state.dispatch_every(change)
            if plain is None:
                state.apply(change, position=position)
            else:
                record, target, decided_at = plain
                assert isinstance(change.accepted_at, str)
                assert before is not None
                assert msgspec.structs.replace(record, scheduled_at=before.scheduled_at) == before
                assert target == parse_instant(before.scheduled_at)
                assert decided_at == parse_instant(change.accepted_at)
            shadow.apply(change, position=position)  # accepted by the state: it must be here
    except ScheduleError as error:
        return error.message, _outcome(state)
    return None, _outcome(state)


def test_the_runs_of_a_reminder_are_kept_across_a_change_to_a_one_shot_and_end_with_it() -> None:
    # Every delivery since the create counts toward a later max_runs (SPEC §11), also those made
    # before an update turned the reminder into a one-shot; they go when it ends.
    every = EveryScheduleRecord(
        id=ScheduleId("sch_1"),
        prompt="p",
        every_seconds=600,
        scheduled_at="2026-12-01T09:10:00.000Z",
    )
    at = AtScheduleRecord(
        id=ScheduleId("sch_1"), prompt="p", scheduled_at="2026-12-01T12:00:00.000Z"
    )
    changes: list[ScheduleChange] = [
        create_change(every),
        dispatch_change(ScheduleId("sch_1"), parse_instant("2026-12-01T09:10:00.000Z")),
        dispatch_change(ScheduleId("sch_1"), parse_instant("2026-12-01T09:20:00.000Z")),
        update_change(at),
    ]
    state = fold(enumerate(changes))
    assert state.statuses() == {ScheduleId("sch_1"): RecordStatus(runs=2)}
    # A snapshot of it (a checkpoint's) is possible.
    resumed = ScheduleFold.resumed(
        state.by_creation(), highest_id=state.highest_id, statuses=state.statuses().items()
    )
    assert resumed.statuses() == state.statuses()
    for folded in (state, resumed):
        folded.apply(dispatch_change(ScheduleId("sch_1")))
        assert (len(folded), folded.statuses()) == (0, {})
    # Replayed as one log, the one-shot's dispatch takes its runs with it.
    assert fold(enumerate([*changes, dispatch_change(ScheduleId("sch_1"))])).statuses() == {}
