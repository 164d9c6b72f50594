from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core.changes import (
    DECODE_CHUNK,
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDispatchChange,
    _decode_change_slowly,
    convert_change,
    create_change,
    decode_change,
    decode_changes,
    delete_change,
    dispatch_change,
    encode_change,
    iter_changes,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import parse_instant
from session_schedule.core.prompts import WHITE_SPACE
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
)
from session_schedule.core.rules import DEFAULT_MAX_PROMPT_CHARS, check_prompt
from tests import invalid_utf8
from tests.core.strategies import changes, json_values

GOLDEN = Path(__file__).parent / "golden" / "v1.jsonl"
GOLDEN_V2 = Path(__file__).parent / "golden" / "v2.jsonl"
FUTURE = "2030-01-01T00:00:00.000Z"

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
            _corrupt(invalid_utf8.in_a_string("unexpected end of data")),
        ),
        (b'{"operation":', _corrupt("malformed JSON (Input data was truncated)")),
        # Only what a writer produces: one form, so no repeated key for a last one to win.
        (
            b'{"operation":"delete","version":1,"id":"sch_9","id":"sch_1"}',
            _corrupt("the key `id` appears more than once - at `$`"),
        ),
        (
            b'{"operation":"delete","operation":"delete","version":1,"id":"sch_1"}',
            _corrupt("the key `operation` appears more than once - at `$`"),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":"p","prompt":"q","scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt("the key `prompt` appears more than once - at `$.schedule`"),
        ),
        (
            b'{"operation":"delete", "version":1,"id":"sch_1"}',
            _corrupt(
                "the bytes are not the canonical encoding of their value (whitespace, key order "
                "or escapes differ from what a writer produces)"
            ),
        ),
        (
            b'{"version":1,"operation":"delete","id":"sch_1"}',
            _corrupt(
                "the bytes are not the canonical encoding of their value (whitespace, key order "
                "or escapes differ from what a writer produces)"
            ),
        ),
        (
            b'{"operation":"delete","version":1,"id":"sch_\\u0031"}',
            _corrupt(
                "the bytes are not the canonical encoding of their value (whitespace, key order "
                "or escapes differ from what a writer produces)"
            ),
        ),
        # Only prompts a create stores: trimmed, non-empty, no control character but \n and \t.
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":"   ","scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt(
                "the prompt has leading or trailing whitespace; a create stores it trimmed - at "
                "`$.schedule.prompt`"
            ),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":" stretch","scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt(
                "the prompt has leading or trailing whitespace; a create stores it trimmed - at "
                "`$.schedule.prompt`"
            ),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":"stretch\\n","scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt(
                "the prompt has leading or trailing whitespace; a create stores it trimmed - at "
                "`$.schedule.prompt`"
            ),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":"\\u001fcall mum","scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt(
                "the prompt contains the control character U+001F at index 0; only newline and "
                "tab are allowed - at `$.schedule.prompt`"
            ),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":"stretch\xc2\x85","scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt(
                "the prompt has leading or trailing whitespace; a create stores it trimmed - at "
                "`$.schedule.prompt`"
            ),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
            b'"prompt":"a\\u0000b","scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt(
                "the prompt contains the control character U+0000 at index 1; only newline and "
                "tab are allowed - at `$.schedule.prompt`"
            ),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"every","id":"sch_1",'
            b'"prompt":"x\\u001b[2Jy","everySeconds":300,"scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt(
                "the prompt contains the control character U+001B at index 1; only newline and "
                "tab are allowed - at `$.schedule.prompt`"
            ),
        ),
        (
            b'{"operation":"create","version":1,"schedule":{"kind":"after","id":"sch_1",'
            b'"prompt":"x\xc2\x85y","afterSeconds":5,"scheduledAt":"2026-11-29T20:01:30.000Z"}}',
            _corrupt(
                "the prompt contains the control character U+0085 at index 1; only newline and "
                "tab are allowed - at `$.schedule.prompt`"
            ),
        ),
        # Any depth is a located corruption, never a RecursionError.
        (
            b'{"operation":"delete","version":1,"id":' + b"[" * 5000 + b"]" * 5000 + b"}",
            _corrupt("expected `str`, got `array` - at `$.id`"),
        ),
        (
            b"[" * 100_000 + b"]" * 100_000,
            _corrupt("expected `object`, got `array`"),
        ),
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


def _daily_create(version: int, **fields: object) -> bytes:
    schedule = {
        "kind": "daily",
        "id": "sch_1",
        "prompt": "p",
        "time": "09:00:00.000",
        "timeZone": "Asia/Tokyo",
        "weekdays": ["mon", "fri"],
        "scheduledAt": "2026-11-30T00:00:00.000Z",
        **fields,
    }
    return msgspec.json.encode({"operation": "create", "version": version, "schedule": schedule})


DAILY_CREATE = (
    b'{"operation":"create","version":2,"schedule":{"kind":"daily","id":"sch_7","prompt":"standup",'
    b'"time":"09:00:00.000","timeZone":"Asia/Tokyo","weekdays":["mon","tue","wed","thu","fri"],'
    b'"scheduledAt":"2026-12-01T00:00:00.000Z"}}'
)


def test_daily_create_is_version_2_in_the_exact_wire_shape() -> None:
    change = ScheduleCreateChange(
        version=2,
        schedule=DailyScheduleRecord(
            id=ScheduleId("sch_7"),
            prompt="standup",
            local_time="09:00:00.000",
            time_zone="Asia/Tokyo",
            weekdays=["mon", "tue", "wed", "thu", "fri"],
            scheduled_at="2026-12-01T00:00:00.000Z",
        ),
    )
    assert create_change(change.schedule) == change
    assert encode_change(change) == DAILY_CREATE
    assert decode_change(DAILY_CREATE) == change


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_daily_create(1), "a `daily` schedule must be created with version 2, not 1 - at `$.version`"),
        (CREATE_AFTER.replace(b'"version":1', b'"version":2'), "an `after` schedule must be created with version 1, not 2 - at `$.version`"),
        (_daily_create(3), "a `daily` schedule must be created with version 2, not 3 - at `$.version`"),
            (_daily_create(4), "invalid enum value 4 - at `$.version`"),
        (b'{"operation":"dispatch","version":2,"id":"sch_1","acceptedAt":"2026-11-29T20:00:00.000Z"}', "invalid enum value 2 - at `$.version`"),
        (_daily_create(2, timeZone="Asia/tokyo"), "'Asia/tokyo' is not a supported time zone - at `$.schedule.timeZone`"),
        (_daily_create(2, timeZone="Etc/GMT-9"), "'Etc/GMT-9' is not a supported time zone - at `$.schedule.timeZone`"),
        (_daily_create(2, weekdays=["fri", "mon"]), "weekdays must be distinct and in week order, Monday first - at `$.schedule.weekdays`"),
        (_daily_create(2, weekdays=["mon", "mon"]), "weekdays must be distinct and in week order, Monday first - at `$.schedule.weekdays`"),
        (_daily_create(2, weekdays=[]), "expected `array` of length >= 1 - at `$.schedule.weekdays`"),
        (_daily_create(2, weekdays=["Mon"]), "invalid enum value 'Mon' - at `$.schedule.weekdays[0]`"),
        (_daily_create(2, time="09:00"), "expected a wall-clock time of the form HH:MM:SS.sss, got '09:00' - at `$.schedule.time`"),
        (_daily_create(2, time="24:00:00.000"), "expected a wall-clock time of the form HH:MM:SS.sss, got '24:00:00.000' - at `$.schedule.time`"),
        (_daily_create(2, everySeconds=600), "object contains unknown field `everySeconds` - at `$.schedule`"),
    ],
)  # fmt: skip
def test_decode_enforces_the_daily_rules(line: bytes, message: str) -> None:
    for decode in (decode_change, lambda raw: convert_change(msgspec.json.decode(raw))):
        with pytest.raises(ScheduleError) as caught:
            decode(line)
        assert caught.value.code == "corrupt_schedule_log"
        assert caught.value.message == f"schedule/change is corrupt: {message}"


def test_golden_v2_log_decodes_and_re_encodes_byte_for_byte() -> None:
    lines = GOLDEN_V2.read_bytes().splitlines()
    assert len(lines) == 9
    versions = []
    for number, line in enumerate(lines):
        change = decode_change(line, where=f"at line {number + 1}")
        versions.append(change.version)
        assert encode_change(change) == line
    assert versions == [1, 2, 2, 2, 1, 1, 1, 1, 1]


def test_golden_v1_log_decodes_and_re_encodes_byte_for_byte() -> None:
    lines = GOLDEN.read_bytes().splitlines()
    assert len(lines) == 9
    for number, line in enumerate(lines):
        assert encode_change(decode_change(line, where=f"at line {number + 1}")) == line


@given(
    st.text(max_size=12)
    | st.text(st.sampled_from([*WHITE_SPACE, "\x1c", "\x1f", "\x00", "a", "\u00e9"]), max_size=6)
)
def test_the_decoder_accepts_a_prompt_exactly_when_a_create_stores_it(prompt: str) -> None:
    change = create_change(
        AtScheduleRecord(id=ScheduleId("sch_1"), prompt=prompt, scheduled_at=FUTURE)
    )
    try:
        stored = check_prompt(prompt, DEFAULT_MAX_PROMPT_CHARS)
    except ScheduleError:
        stored = None
    try:
        decode_change(encode_change(change))
    except ScheduleError as error:
        assert error.code == "corrupt_schedule_log"
        assert stored != prompt
    else:
        assert stored == prompt


@given(changes, st.data())
def test_a_repeated_key_is_always_refused(change: ScheduleChange, data: st.DataObject) -> None:
    encoded = encode_change(change)
    document = msgspec.json.decode(encoded)
    assert isinstance(document, dict)
    key = data.draw(st.sampled_from(sorted(document)))
    value = data.draw(st.sampled_from([document[key], "sch_1", 1, None]))
    repeated = encoded[:-1] + b"," + msgspec.json.encode(key) + b":" + msgspec.json.encode(value)
    with pytest.raises(ScheduleError) as caught:
        decode_change(repeated + b"}")
    assert caught.value.code == "corrupt_schedule_log"
    if value == document[key]:
        # A well-typed repeat decodes; the comparison with the canonical bytes refuses it.
        assert caught.value.message == (
            f"schedule/change is corrupt: the key `{key}` appears more than once - at `$`"
        )


@given(st.integers(min_value=1, max_value=20_000), st.sampled_from(["[", '{"a":']))
def test_nesting_of_any_depth_is_corrupt_schedule_log(depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    nested = (opener * depth + "1" + closer * depth).encode()
    for line in (
        nested,
        b'{"operation":"delete","version":1,"id":' + nested + b"}",
        b'{"operation":"delete","version":1,"id":"sch_1","extra":' + nested + b"}",
        b'{"x":' + nested + b',"operation":"delete","version":1,"id":"sch_1"}',
        b'{"operation":"create","version":1,"schedule":{"prompt":' + nested + b"}}",
    ):
        with pytest.raises(ScheduleError) as caught:
            decode_change(line)
        assert caught.value.code == "corrupt_schedule_log"


_BAD_PAYLOADS = (
    b'{"operation":"delete","version":1,"id":"sch_01"}',
    b'{"operation":"delete","version":1,"id":"sch_\\u0031"}',
    b'{"operation":"delete", "version":1,"id":"sch_1"}',
    b'{"operation":"delete","version":1,"id":"sch_9","id":"sch_1"}',
    b'{"operation":"dispatch","version":1,"id":"sch_1","acceptedAt":"2026-02-30T20:01:30.000Z"}',
    b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
    b'"prompt":" padded","scheduledAt":"2030-01-01T00:00:00.000Z"}}',
    b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
    b'"prompt":"padded ","scheduledAt":"2030-01-01T00:00:00.000Z"}}',
    b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
    b'"prompt":"a\\u0000b","scheduledAt":"2030-01-01T00:00:00.000Z"}}',
    b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
    b'"prompt":"a\x7fb","scheduledAt":"2030-01-01T00:00:00.000Z"}}',
    b'{"operation":"create","version":2,"schedule":{"kind":"at","id":"sch_1",'
    b'"prompt":"p","scheduledAt":"2030-01-01T00:00:00.000Z"}}',
    b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
    b'"prompt":"p","scheduledAt":"2030-01-01T00:00:00.000Z","maxLatenessSeconds":60}}',
    _daily_create(1),
    _daily_create(2, time="24:00:00.000"),
    _daily_create(2, timeZone="Mars/Olympus"),
    _daily_create(2, weekdays=["fri", "mon"]),
    b'{"operation":"delete","version":1,"id":"sch_1"}\n{"operation":"delete","version":1,"id":"sch_2"}',
    b"",
    b"[]",
)


@given(
    st.lists(changes, max_size=8),
    st.one_of(st.none(), st.sampled_from(_BAD_PAYLOADS)),
    st.integers(min_value=0, max_value=8),
)
def test_decoding_many_payloads_is_decoding_each(
    valid: list[ScheduleChange], bad: bytes | None, at: int
) -> None:
    payloads = [encode_change(change) for change in valid]
    if bad is not None:
        payloads.insert(min(at, len(payloads)), bad)
    alone, together = _alone_and_together(payloads)
    assert together == alone


@given(
    st.one_of(
        changes.map(encode_change),
        st.sampled_from(_BAD_PAYLOADS),
        json_values.map(msgspec.json.encode),
        st.binary(max_size=200),
    )
)
def test_a_payload_checked_at_once_decodes_as_one_checked_rule_by_rule(data: bytes) -> None:
    """``decode_change`` first checks a payload as a batch does: whatever the bytes, it returns
    the change or raises the error that the checks one rule at a time give."""

    def outcome(decode: Callable[[bytes], ScheduleChange]) -> ScheduleChange | str:
        try:
            return decode(data)
        except ScheduleError as error:
            assert error.code == "corrupt_schedule_log"
            return str(error)

    at_once = outcome(lambda raw: decode_change(raw, where="at entry 3"))
    assert at_once == outcome(lambda raw: _decode_change_slowly(raw, "at entry 3"))


def _alone_and_together(
    payloads: list[bytes],
) -> tuple[list[ScheduleChange] | str, list[ScheduleChange] | str]:
    """What decoding each payload on its own gives, and what ``decode_changes`` of them all
    gives: the changes, or the message of the error raised."""
    alone: list[ScheduleChange] | str
    try:
        alone = [
            decode_change(payload, where=f"at entry {index}")
            for index, payload in enumerate(payloads)
        ]
    except ScheduleError as error:
        alone = error.message
    together: list[ScheduleChange] | str
    try:
        together = decode_changes(payloads, where=lambda index: f"at entry {index}")
    except ScheduleError as error:
        assert error.code == "corrupt_schedule_log"
        together = error.message
    return alone, together


def test_each_bad_payload_is_refused_alone_and_among_good_ones() -> None:
    good = encode_change(
        create_change(AtScheduleRecord(id=ScheduleId("sch_1"), prompt="p", scheduled_at=FUTURE))
    )
    for bad in _BAD_PAYLOADS:
        with pytest.raises(ScheduleError) as alone:
            decode_change(bad, where="at entry 1")
        with pytest.raises(ScheduleError) as among:
            decode_changes([good, bad, good], where=lambda index: f"at entry {index}")
        assert among.value.message == alone.value.message


def _long_log(count: int) -> list[bytes]:
    """``count`` valid payloads of the common shapes: creates of each kind, dispatches, deletes."""
    payloads: list[bytes] = []
    number = 0
    while len(payloads) < count:
        number += 3
        one, two, three = (ScheduleId(f"sch_{number + k}") for k in range(3))
        payloads += [
            encode_change(
                create_change(
                    AfterScheduleRecord(
                        id=one, prompt="stretch", after_seconds=60, scheduled_at=FUTURE
                    )
                )
            ),
            encode_change(
                create_change(AtScheduleRecord(id=two, prompt="call Aiko", scheduled_at=FUTURE))
            ),
            encode_change(
                create_change(
                    EveryScheduleRecord(
                        id=three, prompt="drink", every_seconds=300, scheduled_at=FUTURE
                    )
                )
            ),
            encode_change(dispatch_change(one)),
            encode_change(delete_change(two)),
            encode_change(dispatch_change(three, parse_instant("2030-01-01T00:05:01.000Z"))),
        ]
    return payloads[:count]


_BOUNDARIES = (0, DECODE_CHUNK - 1, DECODE_CHUNK, DECODE_CHUNK + 1, 2 * DECODE_CHUNK - 1)
# Well-formed JSON of the right shape that breaks one form rule each.
_BAD_FORMS = (
    b'{"operation":"create","version":1,"schedule":{"kind":"every","id":"sch_7",'
    b'"prompt":"p","everySeconds":300,"scheduledAt":"2026-02-29T00:00:00.000Z"}}',
    b'{"operation":"create","version":1,"schedule":{"kind":"after","id":"sch_0",'
    b'"prompt":"p","afterSeconds":5,"scheduledAt":"2028-02-29T00:00:00.000Z"}}',
    b'{"operation":"dispatch","version":1,"id":"sch_7","acceptedAt":"2030-01-01T24:00:00.000Z"}',
    b'{"operation":"dispatch","version":1,"id":"sch_12345678901234567"}',
)


@pytest.mark.parametrize("index", _BOUNDARIES)
@pytest.mark.parametrize("bad", _BAD_PAYLOADS + _BAD_FORMS)
def test_a_bad_payload_is_named_by_its_index_wherever_it_falls_in_the_chunks(
    bad: bytes, index: int
) -> None:
    payloads = _long_log(2 * DECODE_CHUNK)
    payloads[index] = bad
    with pytest.raises(ScheduleError) as alone:
        decode_change(bad, where=f"at entry {index}")
    with pytest.raises(ScheduleError) as among:
        decode_changes(payloads, where=lambda position: f"at entry {position}")
    assert among.value.code == "corrupt_schedule_log"
    assert among.value.message == alone.value.message
    assert f"schedule/change at entry {index} is corrupt: " in among.value.message


def test_the_first_bad_payload_is_reported_when_several_chunks_hold_one() -> None:
    payloads = _long_log(3 * DECODE_CHUNK)
    payloads[DECODE_CHUNK + 5] = b'{"operation":"delete","version":1,"id":"sch_01"}'
    payloads[2 * DECODE_CHUNK + 7] = b'{"operation":"delete","version":1,"id":"sch_02"}'
    payloads[DECODE_CHUNK - 1] = (
        b'{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1",'
        b'"prompt":"a\\u0000b","scheduledAt":"2030-01-01T00:00:00.000Z"}}'
    )
    with pytest.raises(ScheduleError) as caught:
        decode_changes(payloads, where=lambda position: f"at entry {position}")
    assert caught.value.message == (
        f"schedule/change at entry {DECODE_CHUNK - 1} is corrupt: the prompt contains the "
        "control character U+0000 at index 1; only newline and tab are allowed "
        "- at `$.schedule.prompt`"
    )


def test_a_long_log_with_rarer_changes_decodes_as_each_payload_does() -> None:
    payloads = _long_log(2 * DECODE_CHUNK + 10)
    daily = encode_change(
        create_change(
            DailyScheduleRecord(
                id=ScheduleId("sch_999999"),
                prompt="stand up",
                local_time="09:00:00.000",
                time_zone="Europe/Berlin",
                weekdays=["mon", "fri"],
                scheduled_at=FUTURE,
            )
        )
    )
    escaped = encode_change(
        create_change(
            AtScheduleRecord(
                id=ScheduleId("sch_1000000"), prompt='say "hi" \\ café', scheduled_at=FUTURE
            )
        )
    )
    payloads[DECODE_CHUNK - 1] = daily
    payloads[DECODE_CHUNK] = escaped
    payloads[-1] = daily
    assert decode_changes(payloads) == [decode_change(payload) for payload in payloads]


def test_iter_changes_yields_the_changes_a_chunk_at_a_time() -> None:
    payloads = _long_log(2 * DECODE_CHUNK + 10)
    chunks = iter_changes(payloads)
    first = next(chunks)
    assert first == [decode_change(payload) for payload in payloads[:DECODE_CHUNK]]
    assert [len(chunk) for chunk in chunks] == [DECODE_CHUNK, 10]


def test_iter_changes_decodes_a_chunk_only_when_it_is_taken() -> None:
    # A replay that folds each chunk as it comes meets a fold error in an early chunk before
    # any decode error of a later one.
    payloads = _long_log(2 * DECODE_CHUNK)
    payloads[DECODE_CHUNK + 3] = b'{"operation":"delete","version":1,"id":"sch_01"}'
    chunks = iter_changes(payloads, where=lambda position: f"at entry {position}")
    assert len(next(chunks)) == DECODE_CHUNK
    with pytest.raises(ScheduleError) as caught:
        next(chunks)
    assert caught.value.message == (
        f"schedule/change at entry {DECODE_CHUNK + 3} is corrupt: expected a schedule id like "
        "`sch_1`, got 'sch_01' - at `$.id`"
    )


@settings(max_examples=300)
@given(
    st.lists(changes, min_size=1, max_size=6),
    st.integers(min_value=0),
    st.integers(min_value=0),
    st.sampled_from([b"0", b"1", b"2", b"9", b" ", b"a", b"Z", b":", b"-", b"\\", b"\x7f", b""]),
)
def test_a_payload_damaged_in_one_place_decodes_among_others_as_alone(
    valid: list[ScheduleChange], which: int, at: int, replacement: bytes
) -> None:
    # One byte changed, removed (empty replacement) or doubled: most such payloads still decode
    # and re-encode to themselves but break a form rule (an id "sch_01", a date "2026-02-30", a
    # prompt that starts with a space), which the chunk check must catch as decoding alone does.
    payloads = [encode_change(change) for change in valid]
    payload = payloads[which % len(payloads)]
    index = at % len(payload)
    variants = [
        payload[:index] + replacement + payload[index + 1 :],
        payload[:index] + payload[index : index + 1] * 2 + payload[index + 1 :],
    ]
    change = valid[which % len(valid)]
    if isinstance(change, ScheduleCreateChange):
        # Whitespace at either end of a prompt, which still encodes canonically.
        prompt = change.schedule.prompt
        variants += [
            encode_change(
                msgspec.structs.replace(
                    change, schedule=msgspec.structs.replace(change.schedule, prompt=text)
                )
            )
            for text in (" " + prompt, prompt + " ", prompt + "\t", "\u3000" + prompt)
        ]
    for mutated in variants:
        payloads[which % len(payloads)] = mutated
        alone, together = _alone_and_together(payloads)
        assert together == alone
