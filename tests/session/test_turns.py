"""The ``turn/queued`` and ``turn/finished`` entries: canonical bytes and strict decoding."""

from __future__ import annotations

import pytest

from session_schedule.core.catalog import CATALOG
from session_schedule.core.instants import parse_instant
from session_schedule.session.codec import Source, decode_payload, encode_payload
from session_schedule.session.errors import SessionCorrupt
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    decode_turn_finished,
    decode_turn_queued,
    turn_failure,
    turn_finished,
    turn_queued,
)

AT = parse_instant("2026-11-29T20:00:00.000Z")
KEY = "sch_1@2026-11-29T20:01:00.000Z"


def test_both_types_are_in_the_catalog() -> None:
    for name, versions in ((TURN_QUEUED_TYPE, (1,)), (TURN_FINISHED_TYPE, (1, 2))):
        entry = CATALOG.entry(name)
        assert entry is not None
        assert entry.versions == versions
        assert entry.module == "session_schedule.session.turns"


def test_canonical_bytes() -> None:
    reminder = turn_queued("frame", at=AT, origin="schedule", occurrences=(KEY,))
    assert encode_payload(TURN_QUEUED_TYPE, reminder)[1] == (
        b'{"version":1,"origin":"schedule","text":"frame","at":"2026-11-29T20:00:00.000Z",'
        b'"occurrences":["sch_1@2026-11-29T20:01:00.000Z"]}'
    )
    prompt = turn_queued("hello", at=AT, origin="host")
    assert encode_payload(TURN_QUEUED_TYPE, prompt)[1] == (
        b'{"version":1,"origin":"host","text":"hello","at":"2026-11-29T20:00:00.000Z"}'
    )
    finished = turn_finished(4, at=AT, outcome="failed")
    assert encode_payload(TURN_FINISHED_TYPE, finished)[1] == (
        b'{"version":1,"turn":4,"outcome":"failed","at":"2026-11-29T20:00:00.000Z"}'
    )


def test_a_retried_or_failed_turn_is_version_2_with_its_attempts_and_bounded_cause() -> None:
    retried = turn_finished(4, at=AT, outcome="completed", attempts=3)
    data = encode_payload(TURN_FINISHED_TYPE, retried)[1]
    assert data == (
        b'{"version":2,"turn":4,"outcome":"completed","at":"2026-11-29T20:00:00.000Z","attempts":3}'
    )
    assert decode_turn_finished(data) == retried
    failure = turn_failure("RateLimitError", status=429, message="x" * 400)
    assert failure.message == "x" * 299 + "…"
    failed = turn_finished(4, at=AT, outcome="failed", attempts=6, failure=failure)
    data = encode_payload(TURN_FINISHED_TYPE, failed)[1]
    assert data == (
        b'{"version":2,"turn":4,"outcome":"failed","at":"2026-11-29T20:00:00.000Z",'
        b'"attempts":6,"failure":{"error":"RateLimitError","status":429,"message":"'
        + ("x" * 299 + "…").encode()
        + b'"}}'
    )
    assert decode_turn_finished(data) == failed
    assert turn_failure("", status=999, message="m") == turn_failure("Exception", message="m")


QUEUED = '"version":1,"origin":"host","text":"x","at":"2026-11-29T20:00:00.000Z"'


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("{" + QUEUED + ',"text":"y"}', "the key 'text' appears twice in one object"),
        ("{" + QUEUED + ',"zone":"UTC"}', "object contains unknown field `zone`"),
        ('{"version":2' + QUEUED[11:] + "}", "invalid enum value 2 - at `$.version`"),
        (
            '{"version":1,"origin":"schedule","text":"x","at":"2026-11-29T20:00:00.000Z"}',
            "a schedule turn names its occurrences - at `$.occurrences`",
        ),
        (
            "{" + QUEUED + ',"occurrences":["' + KEY + '"]}',
            "only a schedule turn names occurrences - at `$.occurrences`",
        ),
        (
            '{"version":1,"origin":"person","text":"x","at":"2026-11-29T20:00:00.000Z"}',
            "invalid enum value 'person' - at `$.origin`",
        ),
        ('{"version":1,"origin":"host","text":"x"}', "object missing required field `at`"),
        ('{"version":1', "malformed JSON (Input data was truncated)"),
    ],
)
def test_turn_queued_is_decoded_strictly(data: str, problem: str) -> None:
    with pytest.raises(ValueError) as raised:
        decode_turn_queued(data.encode())
    assert str(raised.value) == problem


def test_an_occurrence_key_must_name_an_id_and_a_canonical_instant() -> None:
    for key in ("sch_0@2026-11-29T20:01:00.000Z", "sch_1@2026-11-29T20:01:00Z", "sch_1"):
        data = (
            '{"version":1,"origin":"schedule","text":"x","at":"2026-11-29T20:00:00.000Z",'
            f'"occurrences":["{key}"]}}'
        )
        with pytest.raises(ValueError, match=r"- at `\$\.occurrences\[0\]`$"):
            decode_turn_queued(data.encode())
    with pytest.raises(ValueError) as raised:
        turn_queued("x", at=AT, origin="schedule", occurrences=("sch_1",))
    assert str(raised.value) == (
        "'sch_1' is not an occurrence key like `sch_1@<canonical instant>`"
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            '{"version":1,"turn":-1,"outcome":"completed","at":"2026-11-29T20:00:00.000Z"}',
            "expected `int` >= 0 - at `$.turn`",
        ),
        (
            '{"version":1,"turn":1,"outcome":"done","at":"2026-11-29T20:00:00.000Z"}',
            "invalid enum value 'done' - at `$.outcome`",
        ),
        (
            '{"version":1,"turn":1,"turn":2,"outcome":"completed","at":"2026-11-29T20:00:00.000Z"}',
            "the key 'turn' appears twice in one object",
        ),
        (
            '{"version":1,"turn":1,"outcome":"completed","at":"2026-11-29T20:00:00.000Z","x":1}',
            "object contains unknown field `x`",
        ),
        (
            '{"version":1,"turn":1.0,"outcome":"completed","at":"2026-11-29T20:00:00.000Z"}',
            "expected `int`, got `float` - at `$.turn`",
        ),
        (
            '{"version":1,"turn":1,"outcome":"completed","at":"2026-11-29T20:00:00.000Z",'
            '"attempts":2}',
            "version 1 does not record attempts - at `$.attempts`",
        ),
        (
            '{"version":1,"turn":1,"outcome":"failed","at":"2026-11-29T20:00:00.000Z",'
            '"failure":{"error":"E","message":""}}',
            "version 1 does not record a failure - at `$.failure`",
        ),
        (
            '{"version":2,"turn":1,"outcome":"completed","at":"2026-11-29T20:00:00.000Z"}',
            "version 2 records attempts or a failure - at `$.version`",
        ),
        (
            '{"version":2,"turn":1,"outcome":"completed","at":"2026-11-29T20:00:00.000Z",'
            '"failure":{"error":"E","message":""}}',
            "only a failed turn records a failure - at `$.failure`",
        ),
        (
            '{"version":2,"turn":1,"outcome":"failed","at":"2026-11-29T20:00:00.000Z",'
            '"attempts":0}',
            "expected `int` >= 1 - at `$.attempts`",
        ),
        (
            '{"version":2,"turn":1,"outcome":"failed","at":"2026-11-29T20:00:00.000Z",'
            '"failure":{"error":"","message":""}}',
            "expected `str` of length >= 1 - at `$.failure.error`",
        ),
        (
            '{"version":2,"turn":1,"outcome":"failed","at":"2026-11-29T20:00:00.000Z",'
            '"failure":{"error":"E","status":99,"message":""}}',
            "expected `int` >= 100 - at `$.failure.status`",
        ),
        (
            '{"version":2,"turn":1,"outcome":"failed","at":"2026-11-29T20:00:00.000Z",'
            '"failure":{"error":"E","message":"' + "x" * 301 + '"}}',
            "expected `str` of length <= 300 - at `$.failure.message`",
        ),
        (
            '{"version":3,"turn":1,"outcome":"failed","at":"2026-11-29T20:00:00.000Z"}',
            "invalid enum value 3 - at `$.version`",
        ),
    ],
)
def test_turn_finished_is_decoded_strictly(data: str, problem: str) -> None:
    with pytest.raises(ValueError) as raised:
        decode_turn_finished(data.encode())
    assert str(raised.value) == problem


def test_a_damaged_turn_entry_is_reported_where_it_is() -> None:
    source = Source(
        session_id="s_7k2m4q9x3v5b", name="s_7k2m4q9x3v5b.jsonl", storage="file", lines=True
    )
    with pytest.raises(SessionCorrupt) as raised:
        decode_payload(TURN_QUEUED_TYPE, b'{"version":1}', 3, source)
    assert str(raised.value) == (
        "session s_7k2m4q9x3v5b is corrupt at entry 3 (line 5 of s_7k2m4q9x3v5b.jsonl): invalid "
        "turn/queued payload: object missing required field `origin`; the file was left "
        "untouched for inspection"
    )
