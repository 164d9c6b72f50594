"""Reading a format-2 file a block at a time finds exactly what reading it whole finds."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core.changes import create_change, delete_change, encode_change
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.records import AtScheduleRecord
from session_schedule.session.errors import SessionCorrupt
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl.files import source_of
from session_schedule.session.lines import (
    CHAIN_SEED,
    commit_line,
    entry_line,
    scan,
    scan_blocks,
    sealed_header_line,
)
from session_schedule.session.message import MessageEntry
from session_schedule.session.port import make_header

SID = SessionId("s_aaaaaaaaaaaa")
SOURCE = source_of(SID)
NOW = parse_instant("2026-05-01T09:00:00.000Z")


def _payload(number: int) -> tuple[str, bytes]:
    if number % 3 == 0:
        message = MessageEntry(
            role="user", content=f"turn {number}", at="2026-05-01T09:00:00.000Z", origin="person"
        )
        return "message", msgspec.json.encode(message)
    record_id = make_schedule_id(number // 3 + 1)
    if number % 3 == 1:
        record = AtScheduleRecord(
            id=record_id, prompt=f"reminder {number}", scheduled_at="2030-01-01T00:00:00.000Z"
        )
        return "schedule/change", encode_change(create_change(record))
    return "schedule/change", encode_change(delete_change(record_id))


def _file(count: int, every: int) -> list[bytes]:
    """The lines (each with its newline) of a sound file of ``count`` entries, with a commit
    record after every ``every`` entries."""
    header = make_header(SID, now=Instant(NOW), parent_id=None, seed_length=0, format_version=2)
    lines = [sealed_header_line(header)]
    previous = CHAIN_SEED
    for position in range(count):
        line, previous = entry_line(position, *_payload(position), previous)
        lines.append(line)
        if (position + 1) % every == 0:
            lines.append(commit_line(position + 1, previous))
    return lines


def _damaged(lines: list[bytes], damage: tuple[int, int, int, int]) -> bytes:
    kind, first, second, cut = damage
    lines = list(lines)
    i, j = 1 + first % (len(lines) - 1), 1 + second % (len(lines) - 1)
    if kind == 1:
        lines[i] = lines[j]  # a line repeated (or left in place)
    elif kind == 2:
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 3:
        del lines[i]
    elif kind == 4:
        lines[i] = bytes(len(lines[i]) - 1) + b"\n"
    elif kind == 5:
        line = bytearray(lines[i])
        line[cut % (len(line) - 1)] ^= 1
        lines[i] = bytes(line)
    data = b"".join(lines)
    return data[: len(data) - cut] if kind == 6 else data


def _blocks(data: bytes, size: int) -> Callable[[], Iterator[bytes]]:
    def blocks() -> Iterator[bytes]:
        for start in range(0, len(data), size):
            yield data[start : start + size]

    return blocks


def _outcome(read: Callable[[], object]) -> tuple[object, ...]:
    try:
        parsed = read()
    except (ScheduleError, SessionCorrupt) as error:
        return type(error).__name__, str(error)
    assert isinstance(parsed, tuple)
    return parsed[0], parsed[1], list(parsed[3]), *parsed[4:]


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 5),
    st.tuples(st.integers(0, 6), st.integers(0, 100), st.integers(0, 100), st.integers(0, 300)),
    st.integers(1, 400),
    st.booleans(),
)
def test_a_file_read_in_blocks_reads_as_a_whole_file(
    count: int, every: int, damage: tuple[int, int, int, int], size: int, keep_lines: bool
) -> None:
    data = _damaged(_file(count, every), damage)
    whole = _outcome(lambda: scan(data, SOURCE))
    in_blocks = _outcome(lambda: scan_blocks(_blocks(data, size), SOURCE, keep_lines=keep_lines))
    assert in_blocks == whole
    if keep_lines and not isinstance(whole[0], str):
        assert scan_blocks(_blocks(data, size), SOURCE).lines == scan(data, SOURCE).lines


def _scan_in_blocks(data: bytes, size: int) -> object:
    return scan_blocks(_blocks(data, size), SOURCE, keep_lines=False)


def test_a_repeated_earlier_line_is_found_without_keeping_the_lines() -> None:
    lines = _file(6, 2)
    data = b"".join([*lines, lines[1]])  # entry 0's line again, after the last commit record
    expected = (
        f"session {SID} is corrupt at entry 6 (line 11 of {SID}.jsonl): found entry 0 where "
        "entry 6 belongs: a line is missing, repeated or out of order; the file was left "
        "untouched for inspection"
    )
    for size in (1, 7, len(data)):
        assert _outcome(functools.partial(_scan_in_blocks, data, size)) == (
            "SessionCorrupt",
            expected,
        )
    assert _outcome(lambda: scan(data, SOURCE)) == ("SessionCorrupt", expected)
