"""SPEC §11's version-3 changes: the strict codec and the fold's Rule 6."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from session_schedule.core.changes import (
    ScheduleChange,
    create_change,
    decode_change,
    dispatch_change,
    encode_change,
    miss_change,
    pause_change,
    resume_change,
    snooze_change,
    update_change,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.records import (
    AtScheduleRecord,
    Ends,
    EveryScheduleRecord,
    RecordStatus,
    make_view,
)
from tests.core.strategies import json_values

GOLDEN_V3 = Path(__file__).parent / "golden" / "v3.jsonl"
T0 = "2026-12-01T10:00:00.000Z"


def instant(text: str) -> Instant:
    return parse_instant(text)


def every(
    schedule_id: str,
    target: str,
    *,
    seconds: int = 600,
    ends: Ends | msgspec.UnsetType = msgspec.UNSET,
    lateness: int | msgspec.UnsetType = msgspec.UNSET,
) -> EveryScheduleRecord:
    return EveryScheduleRecord(
        id=ScheduleId(schedule_id),
        prompt="p",
        every_seconds=seconds,
        scheduled_at=target,
        ends=ends,
        max_lateness_seconds=lateness,
    )


def at(
    schedule_id: str, target: str, *, lateness: int | msgspec.UnsetType = msgspec.UNSET
) -> AtScheduleRecord:
    return AtScheduleRecord(
        id=ScheduleId(schedule_id), prompt="p", scheduled_at=target, max_lateness_seconds=lateness
    )


def folded(*changes: ScheduleChange, indexed: bool = False) -> ScheduleFold:
    state = ScheduleFold()
    if indexed:
        state.earliest_every()  # builds the heaps, so each change takes the indexed path
    state.replay(enumerate(changes))
    return state


SID = ScheduleId("sch_1")


def test_golden_v3_log_decodes_and_re_encodes_byte_for_byte() -> None:
    lines = GOLDEN_V3.read_bytes().splitlines()
    operations = []
    for number, line in enumerate(lines):
        change = decode_change(line, where=f"at line {number + 1}")
        operations.append((type(change).__struct_config__.tag, change.version))
        assert encode_change(change) == line
    assert operations == [
        ("create", 1),
        ("create", 3),
        ("create", 3),
        ("create", 3),
        ("create", 1),
        ("update", 3),
        ("snooze", 3),
        ("pause", 3),
        ("dispatch", 1),
        ("snooze", 3),
        ("dispatch", 1),
        ("miss", 3),
        ("resume", 3),
        ("miss", 3),
    ]


@pytest.mark.parametrize("indexed", [False, True])
def test_golden_v3_log_folds_to_the_same_state(indexed: bool) -> None:
    lines = GOLDEN_V3.read_bytes().splitlines()
    state = folded(*(decode_change(line) for line in lines), indexed=indexed)
    assert [(record.id, record.scheduled_at) for record in state.ordered()] == [
        ("sch_1", "2026-12-01T10:10:00.000Z"),
        ("sch_5", "2026-12-01T10:30:00.000Z"),
        ("sch_2", "2026-12-01T14:00:00.000Z"),
        # Paris, weekdays at 09:00, resumed on Thursday 2026-12-03 at 13:00 local.
        ("sch_4", "2026-12-04T08:00:00.000Z"),
    ]
    assert state.status(ScheduleId("sch_5")) == RecordStatus(
        snoozed_from="2026-12-01T10:05:00.000Z"
    )
    # Two dispatches of sch_2 counted against maxRuns 3; the miss is not a run.
    assert state.status(ScheduleId("sch_2")) == RecordStatus(runs=2)
    assert state.status(ScheduleId("sch_4")) == RecordStatus()
    assert state.get(ScheduleId("sch_1")) is not None
    assert state.get(ScheduleId("sch_1")).prompt == "check the build and the tests"  # type: ignore[union-attr]
    assert ScheduleId("sch_3") not in state
    assert not state.snapshottable


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"operation":"pause","version":1,"id":"sch_1"}', "invalid enum value 1 - at `$.version`"),
        (b'{"operation":"pause","version":3,"id":"sch_1","acceptedAt":"2026-12-01T10:00:00.000Z"}', "object contains unknown field `acceptedAt`"),
        (b'{"operation":"pause","version":3,"id":"sch-1"}', "expected a schedule id like `sch_1`, got 'sch-1' - at `$.id`"),
        (b'{"operation":"resume","version":3,"id":"sch_1"}', "object missing required field `acceptedAt`"),
        (b'{"operation":"resume","version":3,"id":"sch_1","acceptedAt":"2026-12-01T10:00:00Z"}', "expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, got '2026-12-01T10:00:00Z' - at `$.acceptedAt`"),
        (b'{"operation":"snooze","version":3,"id":"sch_1","until":"2026-12-01T10:00:00.000+00:00"}', "expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, got '2026-12-01T10:00:00.000+00:00' - at `$.until`"),
        (b'{"operation":"miss","version":3,"id":"sch_1","acceptedAt":"2026-12-01T10:00:00.000Z"}', "object missing required field `scheduledAt`"),
        (b'{"operation":"update","version":3,"id":"sch_2","schedule":{"kind":"at","id":"sch_1","prompt":"p","scheduledAt":"2026-12-01T10:00:00.000Z"}}', "an update of sch_2 must hold a record with the same id, not sch_1 - at `$.schedule.id`"),
        (b'{"operation":"update","version":3,"id":"sch_1","schedule":{"kind":"at","id":"sch_1","prompt":" p","scheduledAt":"2026-12-01T10:00:00.000Z"}}', "the prompt has leading or trailing whitespace; a create stores it trimmed - at `$.schedule.prompt`"),
        (b'{"operation":"create","version":3,"schedule":{"kind":"at","id":"sch_1","prompt":"p","scheduledAt":"2026-12-01T10:00:00.000Z"}}', "an `at` schedule must be created with version 1, not 3 - at `$.version`"),
        (b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1","prompt":"p","scheduledAt":"2026-12-01T10:00:00.000Z","maxLatenessSeconds":60}}', "a schedule with `ends` or `maxLatenessSeconds` must be created with version 3, not 1 - at `$.version`"),
        (b'{"operation":"create","version":3,"schedule":{"kind":"at","id":"sch_1","prompt":"p","scheduledAt":"2026-12-01T10:00:00.000Z","maxLatenessSeconds":0}}', "expected `int` >= 1 - at `$.schedule.maxLatenessSeconds`"),
        (b'{"operation":"create","version":3,"schedule":{"kind":"at","id":"sch_1","prompt":"p","scheduledAt":"2026-12-01T10:00:00.000Z","ends":{"until":null,"maxRuns":2}}}', "object contains unknown field `ends` - at `$.schedule`"),
        (b'{"operation":"create","version":3,"schedule":{"kind":"every","id":"sch_1","prompt":"p","everySeconds":600,"scheduledAt":"2026-12-01T10:00:00.000Z","ends":{"until":null,"maxRuns":null}}}', "`ends` must set `until` or `maxRuns`; a schedule without an end has no `ends` - at `$.schedule.ends`"),
        (b'{"operation":"create","version":3,"schedule":{"kind":"every","id":"sch_1","prompt":"p","everySeconds":600,"scheduledAt":"2026-12-01T10:00:00.000Z","ends":{"maxRuns":2}}}', "object missing required field `until` - at `$.schedule.ends`"),
        (b'{"operation":"create","version":3,"schedule":{"kind":"every","id":"sch_1","prompt":"p","everySeconds":600,"scheduledAt":"2026-12-01T10:00:00.000Z","ends":{"until":null,"maxRuns":0}}}', "expected `int` >= 1 - at `$.schedule.ends.maxRuns`"),
        (b'{"operation":"create","version":3,"schedule":{"kind":"every","id":"sch_1","prompt":"p","everySeconds":600,"scheduledAt":"2026-12-01T10:00:00.000Z","ends":{"until":"2026-12-01T09:00:00.000Z","maxRuns":null}}}', "the target 2026-12-01T10:00:00.000Z is after `ends.until` 2026-12-01T09:00:00.000Z - at `$.schedule.scheduledAt`"),
        (b'{"operation":"create","version":3,"schedule":{"kind":"every","id":"sch_1","prompt":"p","everySeconds":600,"scheduledAt":"2026-12-01T10:00:00.000Z","ends":{"until":"2026-12-01T11:00:00Z","maxRuns":null}}}', "expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, got '2026-12-01T11:00:00Z' - at `$.schedule.ends.until`"),
    ],
)  # fmt: skip
def test_decode_refuses_malformed_version_3_changes(line: bytes, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        decode_change(line)
    assert caught.value.code == "corrupt_schedule_log"
    assert caught.value.message == f"schedule/change is corrupt: {message}"


def test_version_1_and_2_records_encode_as_before() -> None:
    record = every("sch_1", T0)
    assert encode_change(create_change(record)) == (
        b'{"operation":"create","version":1,"schedule":{"kind":"every","id":"sch_1",'
        b'"prompt":"p","everySeconds":600,"scheduledAt":"2026-12-01T10:00:00.000Z"}}'
    )
    assert create_change(every("sch_1", T0, lateness=60)).version == 3


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ((pause_change(SID),), "pause of sch_1, which is not active"),
        ((create_change(at("sch_1", T0)), pause_change(SID), pause_change(SID)), "pause of sch_1, which is paused already"),
        ((create_change(at("sch_1", T0)), resume_change(SID, instant(T0))), "resume of sch_1, which is not paused"),
        ((create_change(at("sch_1", T0)), pause_change(SID), snooze_change(SID, instant(T0))), "snooze of sch_1, which is paused"),
        ((create_change(at("sch_1", T0)), pause_change(SID), create_change(at("sch_2", T0)), pause_change(ScheduleId("sch_2")), resume_change(ScheduleId("sch_2"), instant(T0)), update_change(at("sch_2", T0)), dispatch_change(SID)), "dispatch of sch_1, which is paused"),
        ((create_change(at("sch_1", T0)), miss_change(SID, instant(T0), instant("2026-12-01T11:00:00.000Z"))), "miss of sch_1, which has no `maxLatenessSeconds`"),
        ((create_change(at("sch_1", T0, lateness=60)), miss_change(SID, instant(T0), instant("2026-12-01T10:01:00.000Z"))), "miss of sch_1 at 2026-12-01T10:01:00.000Z is within its `maxLatenessSeconds` of 2026-12-01T10:00:00.000Z"),
        ((create_change(at("sch_1", T0, lateness=60)), miss_change(SID, instant("2026-12-01T09:00:00.000Z"), instant("2026-12-01T10:02:00.000Z"))), "miss of sch_1 names the occurrence 2026-12-01T09:00:00.000Z, not 2026-12-01T10:00:00.000Z"),
        ((create_change(every("sch_1", T0, ends=Ends(until="2026-12-01T12:00:00.000Z", max_runs=None))), snooze_change(SID, instant("2026-12-01T12:00:00.001Z"))), "snooze of sch_1 until 2026-12-01T12:00:00.001Z passes its `ends.until` 2026-12-01T12:00:00.000Z"),
        ((create_change(every("sch_1", T0, ends=Ends(until=None, max_runs=3))), dispatch_change(SID, instant(T0)), update_change(every("sch_1", T0, ends=Ends(until=None, max_runs=1)))), "update of sch_1 sets `ends.maxRuns` 1, but it has made 1 runs already"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("indexed", [False, True])
def test_the_fold_refuses_what_rule_6_forbids(
    changes: tuple[ScheduleChange, ...], message: str, indexed: bool
) -> None:
    with pytest.raises(ScheduleError) as caught:
        folded(*changes, indexed=indexed)
    assert caught.value.code == "corrupt_schedule_log"
    assert caught.value.message.startswith(
        f"schedule/change at entry {len(changes) - 1} is corrupt: "
    )
    assert caught.value.message.endswith(message)


@pytest.mark.parametrize("indexed", [False, True])
def test_pause_and_resume_of_a_recurring_record(indexed: bool) -> None:
    state = folded(
        create_change(every("sch_1", T0)),
        pause_change(SID),
        resume_change(SID, instant("2026-12-01T11:05:00.000Z")),
        indexed=indexed,
    )
    # The occurrences inside the pause are passed over: the next is the first after the resume.
    record = state.get(SID)
    assert record is not None
    assert record.scheduled_at == "2026-12-01T11:10:00.000Z"
    assert state.status(SID) == RecordStatus()
    assert state.snapshottable


@pytest.mark.parametrize("indexed", [False, True])
def test_a_paused_record_is_listed_but_never_due(indexed: bool) -> None:
    state = folded(create_change(every("sch_1", T0)), pause_change(SID), indexed=indexed)
    assert state.earliest_every() is None
    assert state.everies_due(instant("2027-01-01T00:00:00.000Z")) == []
    [view] = state.views(instant("2027-01-01T00:00:00.000Z"))
    assert msgspec.to_builtins(view) == {
        "kind": "every",
        "id": "sch_1",
        "prompt": "p",
        "everySeconds": 600,
        "scheduledAt": T0,
        "state": "paused",
        "deliveryMode": "session-local",
        "runs": 0,
        "lastRun": None,
        "paused": True,
    }


def test_a_snoozed_recurring_record_keeps_its_grid() -> None:
    state = folded(
        create_change(every("sch_1", T0, ends=Ends(until=None, max_runs=5))),
        snooze_change(SID, instant("2026-12-01T10:25:00.000Z")),
    )
    view = make_view(state.get(SID), instant(T0), state.status(SID))  # type: ignore[arg-type]
    assert msgspec.to_builtins(view) == {
        "kind": "every",
        "id": "sch_1",
        "prompt": "p",
        "everySeconds": 600,
        "scheduledAt": "2026-12-01T10:25:00.000Z",
        "ends": {"until": None, "maxRuns": 5},
        "state": "scheduled",
        "deliveryMode": "session-local",
        "runs": 0,
        "lastRun": None,
        "snoozedUntil": "2026-12-01T10:25:00.000Z",
        "runsLeft": 5,
    }
    assert state.occurrence_of(SID) == instant(T0)

    state.apply(dispatch_change(SID, instant("2026-12-01T10:25:00.000Z")))
    record = state.get(SID)
    assert record is not None
    assert record.scheduled_at == "2026-12-01T10:30:00.000Z"
    assert state.status(SID) == RecordStatus(runs=1)


def test_max_runs_and_until_end_a_record() -> None:

    state = fold(
        enumerate(
            [
                create_change(every("sch_1", T0, ends=Ends(until=None, max_runs=2))),
                dispatch_change(SID, instant(T0)),
                dispatch_change(SID, instant("2026-12-01T10:10:00.000Z")),
                create_change(
                    every("sch_2", T0, ends=Ends(until="2026-12-01T10:10:00.000Z", max_runs=None))
                ),
                dispatch_change(ScheduleId("sch_2"), instant(T0)),
            ]
        )
    )
    assert SID not in state
    record = state.get(ScheduleId("sch_2"))
    assert record is not None
    assert record.scheduled_at == "2026-12-01T10:10:00.000Z"
    state.apply(dispatch_change(ScheduleId("sch_2"), instant("2026-12-01T10:10:00.000Z")))
    assert len(state) == 0


def test_a_one_shot_resumed_after_its_target_measures_lateness_from_the_resume() -> None:
    state = folded(
        create_change(at("sch_1", T0, lateness=60)),
        pause_change(SID),
        resume_change(SID, instant("2026-12-01T11:00:00.000Z")),
    )
    assert state.status(SID) == RecordStatus(late_from="2026-12-01T11:00:00.000Z")
    with pytest.raises(ScheduleError):
        state.apply(miss_change(SID, instant(T0), instant("2026-12-01T11:01:00.000Z")))
    state.apply(miss_change(SID, instant(T0), instant("2026-12-01T11:01:00.001Z")))
    assert len(state) == 0


@pytest.mark.parametrize("indexed", [False, True])
def test_a_paused_snoozed_one_shot_keeps_the_snooze_instant_as_its_target(indexed: bool) -> None:
    """SPEC §11: a one-shot's target becomes the snooze instant S, and a pause clears the snooze
    (no ``snoozedUntil``, no ``snoozed from``), not the target: resumed before S, it is due at S,
    as the occurrence S."""
    snoozed_until = "2026-12-01T11:00:00.000Z"
    state = folded(
        create_change(at("sch_1", T0)),
        snooze_change(SID, instant(snoozed_until)),
        pause_change(SID),
        indexed=indexed,
    )
    assert state.status(SID) == RecordStatus(paused=True)
    assert state.occurrence_of(SID) == instant(snoozed_until)
    [view] = state.views(instant("2026-12-01T10:30:00.000Z"))
    assert msgspec.to_builtins(view) == {
        "kind": "at",
        "id": "sch_1",
        "prompt": "p",
        "scheduledAt": snoozed_until,
        "state": "paused",
        "deliveryMode": "session-local",
        "runs": 0,
        "lastRun": None,
        "paused": True,
    }
    state.apply(resume_change(SID, instant("2026-12-01T10:31:00.000Z")))
    assert state.status(SID) == RecordStatus()
    record = state.get(SID)
    assert record is not None
    assert record.scheduled_at == snoozed_until
    assert state.earliest_one_shot() == record


def test_a_paused_snoozed_one_shot_resumed_after_the_snooze_is_late_from_the_resume() -> None:
    state = folded(
        create_change(at("sch_1", T0, lateness=60)),
        snooze_change(SID, instant("2026-12-01T11:00:00.000Z")),
        pause_change(SID),
        resume_change(SID, instant("2026-12-01T12:00:00.000Z")),
    )
    assert state.status(SID) == RecordStatus(late_from="2026-12-01T12:00:00.000Z")
    with pytest.raises(ScheduleError):
        state.apply(
            miss_change(SID, instant(T0), instant("2026-12-01T12:01:00.001Z"))
        )  # the occurrence is S now, not the original target
    state.apply(
        miss_change(SID, instant("2026-12-01T11:00:00.000Z"), instant("2026-12-01T12:01:00.001Z"))
    )
    assert len(state) == 0


def test_an_update_that_keeps_the_rule_keeps_the_snooze() -> None:
    state = folded(
        create_change(at("sch_1", T0)),
        snooze_change(SID, instant("2026-12-01T10:30:00.000Z")),
        update_change(AtScheduleRecord(id=SID, prompt="new", scheduled_at=T0)),
    )
    record = state.get(SID)
    assert record is not None
    assert (record.prompt, record.scheduled_at) == ("new", "2026-12-01T10:30:00.000Z")
    state.apply(update_change(at("sch_1", "2026-12-01T12:00:00.000Z")))
    record = state.get(SID)
    assert record is not None
    assert record.scheduled_at == "2026-12-01T12:00:00.000Z"
    assert state.status(SID) == RecordStatus()


_V3_LINES = GOLDEN_V3.read_bytes().splitlines()


@given(
    st.sampled_from([line for line in _V3_LINES if b'"version":3' in line]),
    st.data(),
    json_values,
)
def test_a_mutated_version_3_change_decodes_or_is_corrupt_schedule_log(
    line: bytes, data: st.DataObject, value: object
) -> None:
    document = msgspec.json.decode(line)
    assert isinstance(document, dict)
    target = document
    if "schedule" in document and data.draw(st.booleans()):
        target = document["schedule"]
    key = data.draw(st.sampled_from([*sorted(target), "extra"]))
    if data.draw(st.booleans()):
        target[key] = value
    else:
        target.pop(key, None)
    encoded = msgspec.json.encode(document)
    try:
        change = decode_change(encoded)
    except ScheduleError as error:
        assert error.code == "corrupt_schedule_log"
        assert error.message.startswith("schedule/change is corrupt: ")
    else:
        assert encode_change(change) == encoded


def test_an_update_that_changes_the_kind_moves_the_record_between_the_heaps() -> None:
    state = folded(
        create_change(at("sch_1", "2026-12-01T10:05:00.000Z")),
        indexed=True,
    )
    assert state.earliest_one_shot() is not None
    # The same target under another kind: the one-shot slot must not stay live.
    state.apply(update_change(every("sch_1", "2026-12-01T10:05:00.000Z", seconds=300)))
    assert state.earliest_one_shot() is None
    record = state.earliest_every()
    assert record is not None
    assert record.id == "sch_1"
    state.apply(update_change(at("sch_1", "2026-12-01T10:05:00.000Z")))
    assert state.earliest_every() is None
    assert state.earliest_one_shot() is not None
