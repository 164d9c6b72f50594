"""The envelope codec: appends refuse what could not be read back; decoding promises two errors."""

from __future__ import annotations

from collections.abc import Callable
from random import Random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core.catalog import PersistenceCatalog
from session_schedule.core.changes import DECODE_CHUNK
from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant
from session_schedule.session import LogEntry, SessionCorrupt
from session_schedule.session import codec as codec_module
from session_schedule.session.codec import (
    EntryDecoder,
    Source,
    decode_entry_line,
    decode_payload,
    encode_payload,
    entry_line,
)
from session_schedule.session.turns import turn_finished, turn_queued
from session_schedule.testing.session_contract import schedule_create, turn

FILE = Source(session_id="s_aaaaaaaaaaaa", name="s_aaaaaaaaaaaa.jsonl", storage="file", lines=True)
DB = Source(session_id="s_aaaaaaaaaaaa", name="sessions.db", storage="database", lines=False)


class Unruly(msgspec.Struct, frozen=True):
    value: int


def _unruly_decoder(data: bytes, where: str) -> object:
    raise KeyError(where)


def test_locations() -> None:
    assert FILE.locate(None) == "line 1 of s_aaaaaaaaaaaa.jsonl"
    assert FILE.locate(4) == "line 6 of s_aaaaaaaaaaaa.jsonl"
    assert DB.locate(4) == "sessions.db"


def test_lines_are_canonical_and_decode_back() -> None:
    value, data = encode_payload("schedule/change", schedule_create(1))
    line = entry_line("schedule/change", data)
    assert line.endswith(b"}\n")
    assert line.count(b"\n") == 1
    assert decode_entry_line(line[:-1], 3, FILE).payload == value


def test_a_dict_payload_is_stored_canonically() -> None:
    as_dict = msgspec.to_builtins(turn(0))
    reordered = dict(reversed(list(as_dict.items())))
    assert encode_payload("message", reordered) == encode_payload("message", turn(0))


def test_a_decoder_that_leaks_an_unexpected_error_still_reports_corruption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A private catalog: the project's own must list only the project's durable types.
    catalog = PersistenceCatalog()
    catalog.register("test/unruly", versions=(1,), declaration=Unruly, decode=_unruly_decoder)
    monkeypatch.setattr(codec_module, "CATALOG", catalog)
    with pytest.raises(SessionCorrupt) as caught:
        decode_entry_line(b'{"type":"test/unruly","data":{"value":1}}', 0, DB)
    assert caught.value.message == (
        "session s_aaaaaaaaaaaa is corrupt at entry 0 (sessions.db): invalid test/unruly "
        "payload: 'at entry 0 of session s_aaaaaaaaaaaa (sessions.db)'; "
        "the database was left untouched for inspection"
    )


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"[]",
        b'{"type":1,"data":{}}',
        b'{"type":"message"}',
        b'{"type":"\xe1","data":{}}',
        b'{"type":"message","data":{"role":"user","content":"\xff"}}',
        b'{"type":"message","data":{}} ',
    ],
)
def test_damaged_lines_raise_only_session_corrupt(line: bytes) -> None:
    with pytest.raises(SessionCorrupt):
        decode_entry_line(line, 0, FILE)


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b'{"version":1}', b'{"version":1,"operation":"delete","id":"sch_\xe1"}', b"\xff"],
)
def test_damaged_schedule_payloads_raise_only_schedule_errors(data: bytes) -> None:
    with pytest.raises(ScheduleError) as caught:
        decode_entry_line(b'{"type":"schedule/change","data":' + data + b"}", 0, FILE)
    assert caught.value.code == "corrupt_schedule_log"


# -- decoding a run of entries, the changes a chunk at a time ---------------------------------

_BAD_CHANGE = b'{"operation":"delete","version":1,"id":"sch_01"}'
_BAD_MESSAGE = b'{"role":"nobody","content":"x"}'
_BAD_QUEUED = b'{"version":1,"origin":"host","text":"x","at":"2026-05-01T09:00:00.000Z","text":"y"}'
_BAD_FINISHED = b'{"version":1,"turn":0,"outcome":"completed","at":"2026-05-01T09:00:00Z"}'
_ODD_FINISHED = (
    b'{"version":1,"turn":0,"outcome":"completed","at":"2026-05-01T09:00:00.000Z","attempts":1}'
)
"""Not the canonical bytes of a turn (a default written out), which the decoder accepts."""


def _valid(kind: str, number: int) -> tuple[str, bytes]:
    if kind == "change":
        return "schedule/change", encode_payload("schedule/change", schedule_create(number + 1))[1]
    if kind == "queued":
        queued = turn_queued(f"turn {number}", at=Instant(number), origin="host")
        return "turn/queued", encode_payload("turn/queued", queued)[1]
    if kind == "finished":
        finished = turn_finished(number, at=Instant(number), outcome="completed")
        return "turn/finished", encode_payload("turn/finished", finished)[1]
    return "message", encode_payload("message", turn(number))[1]


def _one_by_one(items: list[tuple[str, bytes]]) -> list[LogEntry]:
    return [
        decode_payload(entry_type, data, position, FILE, line=position + 2)
        for position, (entry_type, data) in enumerate(items)
    ]


def _chunked(items: list[tuple[str, bytes]]) -> list[LogEntry]:
    decoder = EntryDecoder(FILE)
    for position, (entry_type, data) in enumerate(items):
        decoder.add(entry_type, data, position, line=position + 2)
    return decoder.finish()


def _outcome(
    decode: Callable[[list[tuple[str, bytes]]], list[LogEntry]], items: list[tuple[str, bytes]]
) -> object:
    try:
        return decode(items)
    except (ScheduleError, SessionCorrupt) as error:
        return type(error).__name__, str(error)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([1, 7, DECODE_CHUNK - 1, DECODE_CHUNK, DECODE_CHUNK + 1, 2 * DECODE_CHUNK + 7]),
    st.randoms(use_true_random=False),
    st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.sampled_from([_BAD_CHANGE, _BAD_MESSAGE, _BAD_QUEUED, _BAD_FINISHED, _ODD_FINISHED]),
        )
    ),
)
def test_a_run_of_entries_decodes_as_each_entry_does(
    count: int, random: Random, damage: list[tuple[int, bytes]]
) -> None:
    kinds = random.choices(
        ["change", "message", "queued", "finished"], weights=[4, 1, 1, 1], k=count
    )
    items = [_valid(kind, number) for number, kind in enumerate(kinds)]
    for at, bad in damage[:3]:
        entry_type, _ = items[at % len(items)]
        items[at % len(items)] = ("turn/finished" if bad == _ODD_FINISHED else entry_type, bad)
    assert _outcome(_chunked, items) == _outcome(_one_by_one, items)


def test_a_change_waiting_in_its_chunk_is_reported_before_a_later_problem() -> None:
    decoder = EntryDecoder(FILE)
    decoder.add("schedule/change", _valid("change", 0)[1], 0, line=2)
    decoder.add("schedule/change", _BAD_CHANGE, 1, line=3)
    decoder.add("message", _valid("message", 2)[1], 2, line=4)
    decoder.add("message", _BAD_MESSAGE, 3, line=5)
    with pytest.raises(ScheduleError) as caught:
        decoder.finish()
    assert caught.value.message == (
        "schedule/change at entry 1 of session s_aaaaaaaaaaaa (line 3 of s_aaaaaaaaaaaa.jsonl) is "
        "corrupt: expected a schedule id like `sch_1`, got 'sch_01' - at `$.id`"
    )
    assert EntryDecoder(FILE).finish() == []
