"""The envelope codec: appends refuse what could not be read back; decoding promises two errors."""

from __future__ import annotations

import msgspec
import pytest

from session_schedule.core.catalog import PersistenceCatalog
from session_schedule.core.errors import ScheduleError
from session_schedule.session import SessionCorrupt
from session_schedule.session import codec as codec_module
from session_schedule.session.codec import (
    Source,
    decode_entry_line,
    encode_payload,
    entry_line,
)
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
