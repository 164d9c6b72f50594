from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from session_schedule.core.changes import (
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDispatchChange,
    convert_change,
    decode_change,
    encode_change,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import ScheduleId
from session_schedule.core.records import AfterScheduleRecord
from tests.core.strategies import changes, json_values

GOLDEN = Path(__file__).parent / "golden" / "v1.jsonl"

CREATE_AFTER = (
    b'{"operation":"create","version":1,"schedule":{"kind":"after","id":"sch_1",'
    b'"prompt":"stretch","afterSeconds":90,"scheduledAt":"2026-11-29T20:01:30.000Z"}}'
)


def test_create_encodes_to_the_exact_wire_shape() -> None:
    change = ScheduleCreateChange(
        version=1,
        schedule=AfterScheduleRecord(
            id=ScheduleId("sch_1"),
            prompt="stretch",
            after_seconds=90,
            scheduled_at="2026-11-29T20:01:30.000Z",
        ),
    )
    assert encode_change(change) == CREATE_AFTER
    assert decode_change(CREATE_AFTER) == change


@given(changes)
def test_encode_then_decode_is_the_identity(change: ScheduleChange) -> None:
    encoded = encode_change(change)
    assert decode_change(encoded) == change
    assert encode_change(decode_change(encoded)) == encoded
    assert convert_change(msgspec.json.decode(encoded)) == change


@given(json_values)
def test_decoding_any_json_value_gives_a_change_or_corrupt_schedule_log(value: object) -> None:
    data = msgspec.json.encode(value)
    for decode in (decode_change, lambda raw: convert_change(msgspec.json.decode(raw))):
        try:
            decode(data)
        except ScheduleError as error:
            assert error.code == "corrupt_schedule_log"


@given(st.binary(max_size=200))
def test_decoding_any_bytes_gives_a_change_or_corrupt_schedule_log(data: bytes) -> None:
    try:
        decode_change(data)
    except ScheduleError as error:
        assert error.code == "corrupt_schedule_log"


def _corrupt(detail: str) -> str:
    return f"schedule/change at entry 7 is corrupt: {detail}"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"operation":"delete","version":2,"id":"sch_1"}',
            _corrupt("invalid enum value 2 - at `$.version`"),
        ),
        (
            b'{"operation":"delete","version":true,"id":"sch_1"}',
            _corrupt("expected `int`, got `bool` - at `$.version`"),
        ),
        (
            b'{"operation":"delete","id":"sch_1"}',
            _corrupt("object missing required field `version`"),
        ),
        (
            b'{"operation":"delete","version":1,"id":"sch_1","why":"x"}',
            _corrupt("object contains unknown field `why`"),
        ),
        (
            b'{"operation":"rename","version":1,"id":"sch_1"}',
            _corrupt("invalid value 'rename' - at `$.operation`"),
        ),
        (
            b'{"operation":"delete","version":1,"id":"sch_01"}',
            _corrupt("expected a schedule id like `sch_1`, got 'sch_01' - at `$.id`"),
        ),
        (
            b'{"operation":"delete","version":1,"id":"sch_1\\n"}',
            _corrupt("expected a schedule id like `sch_1`, got 'sch_1\\n' - at `$.id`"),
        ),
        (
            b'{"operation":"dispatch","version":1,"id":"sch_1","acceptedAt":null}',
            _corrupt("expected `str`, got `null` - at `$.acceptedAt`"),
        ),
        (
            b'{"operation":"dispatch","version":1,"id":"sch_1",'
            b'"acceptedAt":"2026-11-29T20:00:00Z"}',
            _corrupt(
                "expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, "
                "got '2026-11-29T20:00:00Z' - at `$.acceptedAt`"
            ),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"after","id":"sch_1",'
            b'"prompt":"p","afterSeconds":90.0,"scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt("expected `int`, got `float` - at `$.schedule.afterSeconds`"),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"after","id":"sch_1",'
            b'"prompt":"p","afterSeconds":0,"scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt("expected `int` >= 1 - at `$.schedule.afterSeconds`"),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"every","id":"sch_1",'
            b'"prompt":"p","everySeconds":299,"scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt("expected `int` >= 300 - at `$.schedule.everySeconds`"),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"every","id":"sch_1",'
            b'"prompt":"p","everySeconds":9007199254740992,'
            b'"scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt("expected `int` <= 9007199254740991 - at `$.schedule.everySeconds`"),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":"","scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt("expected `str` of length >= 1 - at `$.schedule.prompt`"),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":"p","scheduledAt":"2026-02-30T20:01:30.000Z"}}',
            _corrupt(
                "'2026-02-30T20:01:30.000Z' is not a real calendar date - at `$.schedule.scheduledAt`"
            ),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_x",'
            b'"prompt":"p","scheduledAt":"2026-02-20T20:01:30.000Z"}}',
            _corrupt("expected a schedule id like `sch_1`, got 'sch_x' - at `$.schedule.id`"),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":"p","afterSeconds":5,"scheduledAt":"2026-02-20T20:01:30.000Z"}}',
            _corrupt("object contains unknown field `afterSeconds` - at `$.schedule`"),
        ),
        (b"[]", _corrupt("expected `object`, got `array`")),
        (
            b'{"operation":"delete","version":1,"id":"sch_\xe1"}',
            _corrupt("invalid UTF-8 in a string (unexpected end of data)"),
        ),
        (b'{"operation":', _corrupt("malformed JSON (Input data was truncated)")),
    ],
)
def test_decode_rejects_with_a_located_message(line: bytes, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        decode_change(line, where="at entry 7")
    assert caught.value.code == "corrupt_schedule_log"
    assert caught.value.message == message


def test_every_dispatch_keeps_accepted_at_and_one_shot_dispatch_omits_it() -> None:
    one_shot = decode_change(b'{"operation":"dispatch","version":1,"id":"sch_3"}')
    assert one_shot == ScheduleDispatchChange(version=1, id=ScheduleId("sch_3"))
    every = decode_change(
        b'{"operation":"dispatch","version":1,"id":"sch_3","acceptedAt":"2026-11-29T20:00:00.000Z"}'
    )
    assert every == ScheduleDispatchChange(
        version=1, id=ScheduleId("sch_3"), accepted_at="2026-11-29T20:00:00.000Z"
    )


def test_golden_v1_log_decodes_and_re_encodes_byte_for_byte() -> None:
    lines = GOLDEN.read_bytes().splitlines()
    assert len(lines) == 9
    for number, line in enumerate(lines):
        assert encode_change(decode_change(line, where=f"at line {number + 1}")) == line
