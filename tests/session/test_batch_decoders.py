"""The strict and batch decoders of ``message``, ``turn/queued`` and ``turn/finished``.

The declarations leave their field patterns to the decoders (checked for a chunk at once by the
batch decoders, by a strict twin for a payload with a doubt). On any bytes, valid or not, a
payload decoded on its own must give exactly the value or the error it gave when the
declarations carried the patterns (the reference decoders below are those decoders, with the
declarations as they were), and a batch decoder must return what one-by-one decoding returns, or
``None`` when any payload of the batch is refused.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Sequence
from random import Random
from typing import Annotated, Literal, TypeAlias, TypeVar

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core.canonical import NESTED_TOO_DEEPLY, why_not_canonical_json
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.records import InstantField
from session_schedule.session.message import (
    MessageEntry,
    NonEmpty,
    Origin,
    Role,
    ToolCall,
    check_message,
    decode_message,
    decoded_messages,
)
from session_schedule.session.turns import (
    OccurrenceKeyField,
    TurnFailure,
    TurnFinished,
    TurnOrigin,
    TurnOutcome,
    TurnQueued,
    check_turn_queued,
    decode_turn_finished,
    decode_turn_queued,
    decoded_turns_finished,
    decoded_turns_queued,
    turn_finished,
)

T = TypeVar("T")

# -- the declarations with their patterns, and their decoders, as they were -------------------


class _PatternedMessage(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    role: Role
    content: str
    at: InstantField
    origin: Origin
    tool_calls: tuple[ToolCall, ...] | msgspec.UnsetType = msgspec.UNSET
    tool_call_id: NonEmpty | msgspec.UnsetType = msgspec.UNSET


class _PatternedQueued(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    rename="camel",
    omit_defaults=True,
):
    version: Literal[1]
    origin: TurnOrigin
    text: str
    at: InstantField
    occurrences: tuple[OccurrenceKeyField, ...] = ()


class _PatternedFinished(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    rename="camel",
    omit_defaults=True,
):
    version: Literal[1, 2]
    turn: Annotated[int, msgspec.Meta(ge=0)]
    outcome: TurnOutcome
    at: InstantField
    attempts: Annotated[int, msgspec.Meta(ge=1)] = 1
    failure: TurnFailure | None = None


_ENCODER = msgspec.json.Encoder()


def _lowered(error: Exception) -> str:
    return str(error)[:1].lower() + str(error)[1:]


def _reference_message(data: bytes) -> MessageEntry:
    try:
        patterned = msgspec.json.decode(data, type=_PatternedMessage)
    except msgspec.ValidationError as error:
        raise ValueError(_lowered(error)) from None
    except msgspec.DecodeError as error:
        raise ValueError(f"malformed JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"invalid UTF-8 ({error})") from None
    except RecursionError:
        raise ValueError(NESTED_TOO_DEEPLY) from None
    if _ENCODER.encode(patterned) != data:
        raise ValueError(why_not_canonical_json(data))
    message = msgspec.json.decode(data, type=MessageEntry)
    check_message(message)
    return message


def _reference_turn(data: bytes, patterned: type[msgspec.Struct], declared: type[T]) -> T:
    try:
        value = msgspec.json.decode(data, type=patterned)
    except msgspec.ValidationError as error:
        raise ValueError(_lowered(error)) from None
    except msgspec.DecodeError as error:
        raise ValueError(f"malformed JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"invalid UTF-8 ({error})") from None
    if _ENCODER.encode(value) != data:
        json.loads(data, object_pairs_hook=_refuse_repeated_keys)
    return msgspec.json.decode(data, type=declared)


def _refuse_repeated_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def _reference_queued(data: bytes) -> TurnQueued:
    queued = _reference_turn(data, _PatternedQueued, TurnQueued)
    check_turn_queued(queued)
    return queued


def _reference_finished(data: bytes) -> TurnFinished:
    finished = _reference_turn(data, _PatternedFinished, TurnFinished)
    try:
        parse_instant(finished.at)
    except ValueError as error:
        raise ValueError(f"{error} - at `$.at`") from None
    if finished.version == 1:
        if finished.attempts != 1:
            raise ValueError("version 1 does not record attempts - at `$.attempts`")
        if finished.failure is not None:
            raise ValueError("version 1 does not record a failure - at `$.failure`")
    elif finished.attempts == 1 and finished.failure is None:
        raise ValueError("version 2 records attempts or a failure - at `$.version`")
    if finished.failure is not None and finished.outcome != "failed":
        raise ValueError("only a failed turn records a failure - at `$.failure`")
    return finished


# -- random payloads, valid and not ------------------------------------------------------------

# Each field is drawn from its valid values, or — for the one field a damaged payload breaks —
# from its invalid ones, so that a batch is mostly valid and reaches every check.
_INSTANTS = (
    "2026-05-01T09:00:00.000Z",
    "2026-11-29T20:17:03.517Z",
    "2024-02-29T23:59:59.999Z",
    "0001-01-01T00:00:00.000Z",
    "9999-12-31T23:59:59.999Z",
)
_BAD_INSTANTS = (
    "2025-02-29T00:00:00.000Z",
    "2026-05-01T24:00:00.000Z",
    "2026-05-01T09:00:00Z",
    "2026-05-01T09:00:00.000z",
    "2026-05-01T09:00:00.000Z\n",
    "2026-05-01T09:00:00.000Z\n2026-05-01T09:00:00.000Z",
    "0000-01-01T00:00:00.000Z",
    "",
    7,
)
_KEYS = ("sch_1@2026-11-29T20:01:00.000Z", "sch_12@2024-02-29T00:00:00.000Z")
_BAD_KEYS = (
    "sch_1@2025-02-29T00:00:00.000Z",
    "sch_0@2026-11-29T20:01:00.000Z",
    "sch_1",
    "sch_1@2026-11-29T20:01:00Z",
    "sch_1@2026-11-29T20:01:00.000Z\nsch_2@2026-11-29T20:01:00.000Z",
    "sch_1@sch_2@2026-11-29T20:01:00.000Z",
    "sch_1@2026-11-29T20:01:00.000Z@",
    "sch_1\n@2026-11-29T20:01:00.000Z",
    "sch_1\nsch_2@2026-11-29T20:01:00.000Z",
    "2026-11-29T20:01:00.000Z",
)
_ABSENT = object()


def _pick(
    random: Random, broken: str, name: str, good: Sequence[object], bad: Sequence[object]
) -> object:
    return random.choice(bad if broken == name else good)


def _message(random: Random, broken: str) -> dict[str, object]:
    role = _pick(random, broken, "role", ["user", "user", "assistant", "tool"], ["nobody", 1])
    origins = {"user": ["person", "followup"], "assistant": ["model"], "tool": ["tool"]}
    origin = _pick(
        random, broken, "origin", origins.get(str(role), ["person"]), ["model", "tool", "x"]
    )
    calls = _pick(
        random,
        broken,
        "toolCalls",
        [_ABSENT] * 4
        + ([[{"id": "c1", "name": "list", "arguments": "{}"}]] if role == "assistant" else []),
        [
            [{"id": "c1", "name": "list", "arguments": "{"}],
            [{"id": "", "name": "l", "arguments": "1"}],
            [],
        ],
    )
    return {
        "role": role,
        "content": random.choice(["hi", "", "caf\u00e9", 'a "quote"']),
        "at": _pick(random, broken, "at", _INSTANTS, (*_BAD_INSTANTS, _ABSENT)),
        "origin": origin,
        "toolCalls": calls,
        "toolCallId": _pick(
            random,
            broken,
            "toolCallId",
            ["call_1"] if role == "tool" else [_ABSENT],
            ["", "c", _ABSENT],
        ),
    }


def _queued(random: Random, broken: str) -> dict[str, object]:
    origin = _pick(random, broken, "origin", ["schedule", "host"], ["person"])
    keys = [random.choice(_KEYS) for _ in range(random.choice([1, 2]))]
    if broken == "key":
        keys[random.randrange(len(keys))] = random.choice(_BAD_KEYS)
    return {
        "version": _pick(random, broken, "version", [1], [2, "1"]),
        "origin": origin,
        "text": random.choice(["x", "It is time."]),
        "at": _pick(random, broken, "at", _INSTANTS, (*_BAD_INSTANTS, _ABSENT)),
        "occurrences": _pick(
            random,
            broken,
            "occurrences",
            [keys] if origin == "schedule" else [_ABSENT],
            [[], _ABSENT] if origin == "schedule" else [keys],
        ),
    }


def _finished(random: Random, broken: str) -> dict[str, object]:
    version = _pick(random, broken, "version", [1, 1, 2], [3, 0])
    outcome = random.choice(["completed", "failed"])
    failure = {"error": "APIError", "status": 503, "message": "overloaded"}
    if version == 2:
        attempts = random.choice([2, 3, _ABSENT]) if outcome == "failed" else random.choice([2, 3])
        failures = [failure, _ABSENT] if outcome == "failed" and attempts != _ABSENT else [failure]
        if outcome == "completed":
            failures = [_ABSENT]
    else:
        attempts, failures = _ABSENT, [_ABSENT]
    return {
        "version": version,
        "turn": _pick(random, broken, "turn", [0, 17], [-1, "0"]),
        "outcome": _pick(random, broken, "outcome", [outcome], ["done"]),
        "at": _pick(random, broken, "at", _INSTANTS, (*_BAD_INSTANTS, _ABSENT)),
        "attempts": _pick(random, broken, "attempts", [attempts], [0, 1, 2]),
        "failure": _pick(
            random,
            broken,
            "failure",
            failures,
            [failure, {"error": "", "message": "m"}, {"error": "E", "status": 99, "message": "m"}],
        ),
    }


_BREAKABLE = (
    "role",
    "origin",
    "toolCalls",
    "toolCallId",
    "at",
    "key",
    "version",
    "occurrences",
    "turn",
    "outcome",
    "attempts",
    "failure",
    "order",
    "repeat",
    "extra",
    "missing",
    "byte",
)


def _payload(random: Random, fields: Callable[[Random, str], dict[str, object]]) -> bytes:
    """A payload, valid and canonical, or now and then damaged in one way."""
    broken = random.choice(_BREAKABLE) if random.random() < 0.15 else ""
    pairs = [(key, value) for key, value in fields(random, broken).items() if value is not _ABSENT]
    if broken == "order":
        random.shuffle(pairs)
    elif broken == "repeat":
        pairs.append(random.choice(pairs))
    elif broken == "extra":
        pairs.append(("extra", 1))
    elif broken == "missing":
        pairs.pop(random.randrange(len(pairs)))
    text = (
        "{"
        + ",".join(
            json.dumps(key) + ":" + json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            for key, value in pairs
        )
        + "}"
    )
    data = bytearray(text.encode())
    if broken == "byte":
        data[random.randrange(len(data))] = random.choice(b' \n"\\{}:,0a\xff\xe1')
    return bytes(data)


def _outcome(decode: Callable[[bytes], object], data: bytes) -> tuple[str, object]:
    try:
        value = decode(data)
    except ValueError as error:
        return "refused", str(error)
    return type(value).__name__, _ENCODER.encode(value)


_Kind: TypeAlias = tuple[
    Callable[[Random, str], dict[str, object]],
    Callable[[bytes], object],
    Callable[[bytes], object],
    Callable[[Sequence[bytes]], Sequence[object] | None],
]
"""Random fields, the strict decoder, the reference decoder and the batch decoder of a type."""
_KINDS: dict[str, _Kind] = {
    "message": (_message, decode_message, _reference_message, decoded_messages),
    "turn/queued": (_queued, decode_turn_queued, _reference_queued, decoded_turns_queued),
    "turn/finished": (
        _finished,
        decode_turn_finished,
        _reference_finished,
        decoded_turns_finished,
    ),
}


@pytest.mark.parametrize("kind", sorted(_KINDS))
@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 16))
def test_payloads_decode_as_before_and_batches_as_each_payload_does(
    kind: str, random: Random, count: int
) -> None:
    fields, decode, reference, decode_many = _KINDS[kind]
    payloads = [_payload(random, fields) for _ in range(count)]
    outcomes = [_outcome(decode, data) for data in payloads]
    assert outcomes == [_outcome(reference, data) for data in payloads]
    batch = decode_many(payloads)
    decoded = (
        [decode(data) for data in payloads] if all(o[0] != "refused" for o in outcomes) else None
    )
    if decoded is None:
        assert batch is None
        return
    if all(_ENCODER.encode(value) == data for value, data in zip(decoded, payloads, strict=True)):
        # Canonical bytes of valid payloads: the batch decoder has no doubt.
        assert batch is not None
    if batch is not None:
        assert list(batch) == decoded
        assert [type(value) for value in batch] == [type(value) for value in decoded]


_GOOD_MESSAGE = '{"role":"user","content":"hi","at":"2026-05-01T09:00:00.000Z","origin":"person"}'
_GOOD_QUEUED = (
    '{"version":1,"origin":"schedule","text":"x","at":"2026-05-01T09:00:00.000Z",'
    '"occurrences":["sch_1@2026-05-01T09:00:00.000Z"]}'
)
_GOOD_FINISHED = '{"version":1,"turn":0,"outcome":"completed","at":"2026-05-01T09:00:00.000Z"}'


@pytest.mark.parametrize(
    ("kind", "good", "bad", "problem"),
    [
        (
            "message",
            _GOOD_MESSAGE,
            _GOOD_MESSAGE.replace("09:00:00.000Z", "09:00:00.000Z\\n2026-05-01T09:00:00.000Z"),
            "expected `str` matching regex",
        ),
        (
            "message",
            _GOOD_MESSAGE,
            _GOOD_MESSAGE.replace("2026-05-01", "2025-02-29"),
            "expected `str` matching regex",
        ),
        ("message", _GOOD_MESSAGE, _GOOD_MESSAGE.replace("person", "model"), "a user turn"),
        (
            "message",
            _GOOD_MESSAGE,
            _GOOD_MESSAGE.replace('"person"', '"person","toolCallId":"c1"'),
            "a tool turn, and only a tool turn",
        ),
        (
            "message",
            _GOOD_MESSAGE,
            _GOOD_MESSAGE.replace(
                '"person"', '"person","toolCalls":[{"id":"c","name":"n","arguments":"{}"}]'
            ),
            "only an assistant turn",
        ),
        (
            "message",
            _GOOD_MESSAGE.replace('"user"', '"assistant"').replace("person", "model"),
            _GOOD_MESSAGE.replace('"user"', '"assistant"').replace(
                '"person"', '"model","toolCalls":[{"id":"c","name":"n","arguments":"{"}]'
            ),
            "tool call arguments are not JSON text",
        ),
        (
            "turn/queued",
            _GOOD_QUEUED,
            _GOOD_QUEUED.replace("sch_1@2026-05-01", "sch_1@2025-02-29"),
            "'2025-02-29T09:00:00.000Z' is not a real calendar date",
        ),
        (
            "turn/queued",
            _GOOD_QUEUED,
            _GOOD_QUEUED.replace("sch_1@", "sch_01@"),
            "expected `str` matching regex '^sch_",
        ),
        (
            "turn/queued",
            _GOOD_QUEUED,
            _GOOD_QUEUED.replace(
                "sch_1@2026-05-01T09:00:00.000Z",
                "sch_1@2026-05-01T09:00:00.000Z\\nsch_2@2026-05-01T09:00:00.000Z",
            ),
            "expected `str` matching regex '^sch_",
        ),
        (
            "turn/queued",
            _GOOD_QUEUED,
            _GOOD_QUEUED.replace('"schedule"', '"host"'),
            "only a schedule turn names occurrences",
        ),
        (
            "turn/queued",
            _GOOD_QUEUED,
            _GOOD_QUEUED.replace(',"occurrences":["sch_1@2026-05-01T09:00:00.000Z"]', ""),
            "a schedule turn names its occurrences",
        ),
        (
            "turn/finished",
            _GOOD_FINISHED,
            _GOOD_FINISHED.replace('"version":1', '"version":2'),
            "version 2 records attempts or a failure",
        ),
        (
            "turn/finished",
            _GOOD_FINISHED,
            _GOOD_FINISHED.replace('"version":1', '"version":2')[:-1]
            + ',"failure":{"error":"E","message":"m"}}',
            "only a failed turn records a failure",
        ),
        (
            "turn/finished",
            _GOOD_FINISHED,
            _GOOD_FINISHED.replace("T09:00", "T24:00"),
            "expected `str` matching regex",
        ),
    ],
)
def test_one_payload_that_breaks_a_rule_puts_its_batch_in_doubt(
    kind: str, good: str, bad: str, problem: str
) -> None:
    _, decode, reference, decode_many = _KINDS[kind]
    assert decode_many([good.encode()] * 3) == [decode(good.encode())] * 3
    with pytest.raises(ValueError, match="^" + re.escape(problem)):
        reference(bad.encode())
    with pytest.raises(ValueError) as raised:
        decode(bad.encode())
    assert raised.value.args == _outcome_error(reference, bad.encode())
    assert decode_many([good.encode(), bad.encode(), good.encode()]) is None


def _outcome_error(decode: Callable[[bytes], object], data: bytes) -> tuple[object, ...]:
    with pytest.raises(ValueError) as raised:
        decode(data)
    return raised.value.args


def test_a_finished_turn_of_a_new_minute_decodes_in_a_batch() -> None:
    finished = [turn_finished(n, at=Instant(n * 60_000 + n), outcome="completed") for n in range(3)]
    payloads = [_ENCODER.encode(value) for value in finished]
    assert decoded_turns_finished(payloads) == finished


def test_decoded_turns_and_messages_are_not_tracked_by_the_garbage_collector() -> None:
    # A long log holds a million of them: tracked, they made the collector run over and over
    # while it was read (none can be part of a reference cycle: frozen, of strings and numbers).
    values = (
        decode_turn_queued(_GOOD_QUEUED.encode()),
        decode_turn_finished(
            b'{"version":2,"turn":0,"outcome":"failed","at":"2026-05-01T09:00:00.000Z",'
            b'"failure":{"error":"E","message":"m"}}'
        ),
        decode_message(
            b'{"role":"assistant","content":"","at":"2026-05-01T09:00:00.000Z","origin":"model",'
            b'"toolCalls":[{"id":"c","name":"n","arguments":"{}"}]}'
        ),
    )
    assert [gc.is_tracked(value) for value in values] == [False, False, False]
    batch = decoded_turns_queued([_GOOD_QUEUED.encode()] * 2)
    assert batch == [values[0]] * 2
    assert [gc.is_tracked(value) for value in batch] == [False, False]


@pytest.mark.parametrize("key", _BAD_KEYS)
def test_a_turn_naming_a_bad_occurrence_key_puts_its_batch_in_doubt(key: str) -> None:
    good = _GOOD_QUEUED.encode()
    bad = _GOOD_QUEUED.replace("sch_1@2026-05-01T09:00:00.000Z", json.dumps(key)[1:-1]).encode()
    assert bad != good
    with pytest.raises(ValueError):
        decode_turn_queued(bad)
    assert decoded_turns_queued([good] * 9) is not None
    assert decoded_turns_queued([good] * 4 + [bad] + [good] * 4) is None
