"""The ``framework/messages`` entry: canonical bytes, strict decoding, and reading a
framework's conversation back from a log."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from session_schedule.core.catalog import CATALOG
from session_schedule.core.instants import parse_instant
from session_schedule.session.codec import Source, decode_payload, encode_payload
from session_schedule.session.errors import SessionCorrupt
from session_schedule.session.framework import (
    FRAMEWORK_MESSAGES_TYPE,
    decode_framework_messages,
    framework_history,
    framework_messages,
)
from session_schedule.session.port import LogEntry
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    turn_finished,
    turn_queued,
)

AT = parse_instant("2026-11-29T20:00:00.000Z")
SESSION = "s_7k2m4q9x3v5b"
HELLO = {"role": "user", "content": "hello"}
HI = {"role": "assistant", "content": "hi"}


def test_the_type_is_in_the_catalog() -> None:
    entry = CATALOG.entry(FRAMEWORK_MESSAGES_TYPE)
    assert entry is not None
    assert entry.versions == (1,)
    assert entry.module == "session_schedule.session.framework"


def test_canonical_bytes() -> None:
    entry = framework_messages("openai", turn=3, at=AT, messages=[HELLO, HI])
    data = encode_payload(FRAMEWORK_MESSAGES_TYPE, entry)[1]
    assert data == (
        b'{"version":1,"framework":"openai","turn":3,"at":"2026-11-29T20:00:00.000Z",'
        b'"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"}]}'
    )
    assert decode_framework_messages(data) == entry


GOOD = '{"version":1,"framework":"openai","turn":3,"at":"2026-11-29T20:00:00.000Z","messages":'


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (GOOD + "[]}", "expected `array` of length >= 1 - at `$.messages`"),
        (GOOD + "[1]}", "expected `object`, got `int` - at `$.messages[0]`"),
        (GOOD + '[{"a":1,"a":2}]}', "the key `a` appears more than once - at `$.messages[0]`"),
        (
            GOOD.replace('"openai"', '"Open AI"') + "[{}]}",
            "expected `str` matching regex '^[a-z][a-z0-9-]{0,31}\\\\Z' - at `$.framework`",
        ),
        (GOOD.replace('"turn":3', '"turn":-1') + "[{}]}", "expected `int` >= 0 - at `$.turn`"),
        (
            GOOD.replace('"version":1', '"version":2') + "[{}]}",
            "invalid enum value 2 - at `$.version`",
        ),
        (GOOD + '[{}],"extra":1}', "object contains unknown field `extra`"),
        (
            GOOD + "[{} ]}",
            "the bytes are not the canonical encoding of their value (whitespace, key order or escapes differ from what a writer produces)",
        ),
    ],
)
def test_the_decoder_is_strict(data: str, problem: str) -> None:
    with pytest.raises(ValueError) as raised:
        decode_framework_messages(data.encode())
    assert str(raised.value) == problem


def test_a_damaged_entry_is_reported_where_it_is() -> None:
    source = Source(session_id=SESSION, name=f"{SESSION}.jsonl", storage="file", lines=True)
    with pytest.raises(SessionCorrupt) as raised:
        decode_payload(FRAMEWORK_MESSAGES_TYPE, b'{"version":1}', 3, source)
    assert str(raised.value) == (
        "session s_7k2m4q9x3v5b is corrupt at entry 3 (line 5 of s_7k2m4q9x3v5b.jsonl): invalid "
        "framework/messages payload: object missing required field `framework`; the file was "
        "left untouched for inspection"
    )


def _log(*items: tuple[str, object]) -> list[LogEntry]:
    return [
        LogEntry(position=position, type=kind, payload=payload)
        for position, (kind, payload) in enumerate(items)
    ]


def _queued(text: str) -> tuple[str, object]:
    return TURN_QUEUED_TYPE, turn_queued(text, at=AT, origin="host")


def _finished(turn: int, outcome: str = "completed") -> tuple[str, object]:
    return TURN_FINISHED_TYPE, turn_finished(turn, at=AT, outcome=outcome)  # type: ignore[arg-type]


def _kept(
    turn: int, *messages: Mapping[str, object], framework: str = "openai"
) -> tuple[str, object]:
    return FRAMEWORK_MESSAGES_TYPE, framework_messages(
        framework, turn=turn, at=AT, messages=messages
    )


def test_the_history_is_every_completed_turns_messages_in_log_order() -> None:
    entries = _log(
        _queued("hello"),  # 0
        _kept(0, HELLO, HI),
        _finished(0),
        _queued("again"),  # 3
        _kept(3, {"role": "user", "content": "again"}, framework="anthropic"),
        _kept(3, {"role": "user", "content": "again"}),
        _finished(3),
        _queued("fails"),  # 7
        _finished(7, "failed"),
    )
    assert framework_history(SESSION, entries, "openai") == [
        HELLO,
        HI,
        {"role": "user", "content": "again"},
    ]
    assert framework_history(SESSION, entries, "anthropic") == [
        {"role": "user", "content": "again"}
    ]
    assert framework_history(SESSION, entries, "pydantic-ai") == []


def test_a_turn_cut_by_a_crash_is_left_out_and_its_rerun_counts() -> None:
    cut = _log(_queued("hello"), _kept(0, HELLO, {"role": "assistant", "content": "first"}))
    assert framework_history(SESSION, cut, "openai") == []
    rerun = _log(
        *[(entry.type, entry.payload) for entry in cut],
        _kept(0, HELLO, HI),
        _finished(0),
    )
    assert framework_history(SESSION, rerun, "openai") == [HELLO, HI]


def test_an_entry_that_names_no_earlier_turn_is_corruption() -> None:
    entries = _log(_kept(1, HELLO), _queued("hello"), _finished(1))
    with pytest.raises(SessionCorrupt) as raised:
        framework_history(SESSION, entries, "openai")
    assert str(raised.value) == (
        "session s_7k2m4q9x3v5b is corrupt at entry 0: it holds the messages of entry 1, which "
        "is not a turn queued before it; the storage was left untouched for inspection"
    )
