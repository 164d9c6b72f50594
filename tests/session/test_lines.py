"""Reading a format-2 file a block at a time finds exactly what reading it whole finds."""

from __future__ import annotations

import contextlib
import functools
import zlib
from collections.abc import Callable, Iterator
from typing import Final
from unittest import mock

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from session_schedule.core.changes import create_change, delete_change, encode_change
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.records import AtScheduleRecord
from session_schedule.session import lines as lines_module
from session_schedule.session.errors import SessionCorrupt
from session_schedule.session.framework import FRAMEWORK_MESSAGES_TYPE, FrameworkMessages
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


def _framework_payload(number: int) -> tuple[str, bytes]:
    """A type too long to be known by the bytes after an entry line's prefix."""
    messages = FrameworkMessages(
        version=1,
        framework="anthropic",
        turn=number,
        at="2026-05-01T09:00:00.000Z",
        messages=({"role": "user", "content": f"turn {number}"},),
    )
    return FRAMEWORK_MESSAGES_TYPE, msgspec.json.encode(messages)


def _mixed_file(count: int, commits: list[int], framework: int) -> list[bytes]:
    """The lines (each with its newline) of a file of ``count`` entries, every ``framework``-th a
    ``framework/messages`` entry, with a commit record for every entry so far after each entry
    whose position is in ``commits``."""
    header = make_header(SID, now=Instant(NOW), parent_id=None, seed_length=0, format_version=2)
    lines = [sealed_header_line(header)]
    previous = CHAIN_SEED
    for position in range(count):
        payload = _framework_payload(position) if position % framework == framework - 1 else None
        line, previous = entry_line(position, *(payload or _payload(position)), previous)
        lines.append(line)
        if position in commits:
            lines.append(commit_line(position + 1, previous))
    return lines


_DAMAGE: Final = st.tuples(
    st.integers(0, 10), st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 10_000)
)


def _damaged_more(lines: list[bytes], damage: tuple[int, int, int, int]) -> bytes:
    """:func:`_damaged`, and also: a run of zeros over line boundaries, a line moved, a stale or
    early commit record inserted anywhere."""
    kind, first, second, cut = damage
    if kind <= 6:
        return _damaged(lines, damage)
    lines = list(lines)
    i, j = 1 + first % (len(lines) - 1), 1 + second % (len(lines) - 1)
    if kind == 7:
        data = bytearray(b"".join(lines))
        start = sum(map(len, lines[:i])) + cut % len(lines[i])
        data[start : start + 1 + second % 600] = bytes(len(data[start : start + 1 + second % 600]))
        return bytes(data)
    if kind == 8:
        lines.insert(j, lines.pop(i))
        return b"".join(lines)
    if kind == 10:
        return b"".join(_resealed(lines, i, cut))
    entries = [line for line in lines[1:] if line.startswith(b'{"seq":')]
    acknowledged = cut % (len(entries) + 2)
    claimed = min(acknowledged, len(entries))
    chain = int(entries[claimed - 1][-11:-3], 16) if claimed else CHAIN_SEED
    lines.insert(i, commit_line(acknowledged, chain))
    return b"".join(lines)


_EDITS: Final = (
    (b'{"seq":', b'{"seq":1'),
    (b',"type":"', b',"type":"x/'),
    (b',"type":"', b',"type":"a\\"'),
    (b'","data":', b'","dat":'),
    (b'","data":', b'"  ,"data":'),
)


def _resealed(lines: list[bytes], at: int, edit: int) -> list[bytes]:
    """``lines`` with the entry line at or after ``at`` edited, and the checksums and commit
    records from there on written again to match: a line whose checksum holds but whose content
    is wrong, as no power cut writes."""
    old, new = _EDITS[edit % len(_EDITS)]
    lines = list(lines)
    at = next((k for k in range(at, len(lines)) if lines[k].startswith(b'{"seq":')), 0)
    if not at:
        return lines
    if edit % (len(_EDITS) + 1) == len(_EDITS):  # another entry's number, as wide
        seq = int(lines[at][7 : lines[at].index(b",")])
        other = seq + 1 if len(str(seq + 1)) == len(str(seq)) else seq - 1
        old, new = b'{"seq":%d,' % seq, b'{"seq":%d,' % max(other, 0)
    lines[at] = lines[at].replace(old, new, 1)
    checksums = [int(line[-11:-3], 16) for line in lines[1:at] if line.startswith(b'{"seq":')]
    for k in range(at, len(lines)):
        line = lines[k]
        if line.startswith(b'{"ack":'):
            acknowledged = int(line[7 : line.index(b",")])
            if 0 < acknowledged <= len(checksums):
                lines[k] = commit_line(acknowledged, checksums[acknowledged - 1])
        elif line.startswith(b"{"):
            body = line[: -len(b',"crc":"00000000"}\n')]
            checksum = zlib.crc32(body, checksums[-1] if checksums else CHAIN_SEED)
            lines[k] = body + b',"crc":"%08x"}\n' % checksum
            checksums.append(checksum)
    return lines


def _per_line_only() -> contextlib.AbstractContextManager[object]:
    """The scan with every block read by the per-line loop (the block-level path declines)."""
    return mock.patch.object(lines_module, "_verified_block", return_value=None)


@settings(max_examples=400, deadline=None)
@example(20, [0], 50, (9, 0, 0, 0), 1 << 15, False)  # a commit record for no entries
@example(30, [3, 10], 7, (10, 5, 0, 0), 1 << 15, False)  # sealed, but not the next entry
@example(30, [3, 10], 7, (10, 5, 0, 1), 1 << 15, False)  # a type not seen yet
@example(30, [3, 10], 7, (10, 5, 0, 2), 1 << 15, False)  # a quote in the type
@example(30, [3, 10], 7, (10, 5, 0, 3), 1 << 15, False)  # no payload
@example(30, [3, 10], 7, (10, 5, 0, 4), 1 << 15, False)  # a space after the type
@example(30, [3, 10], 7, (10, 5, 0, 5), 1 << 15, False)  # another entry's number
@given(
    st.integers(1, 1_200),
    st.lists(st.integers(0, 1_200), max_size=300),
    st.integers(2, 50),
    _DAMAGE,
    st.integers(1, 1 << 15),
    st.booleans(),
)
def test_the_block_level_path_finds_what_the_per_line_loop_finds(
    count: int,
    commits: list[int],
    framework: int,
    damage: tuple[int, int, int, int],
    size: int,
    keep_lines: bool,
) -> None:
    data = _damaged_more(_mixed_file(count, commits, framework), damage)
    fast = _outcome(lambda: scan_blocks(_blocks(data, size), SOURCE, keep_lines=keep_lines))
    with _per_line_only():
        slow = _outcome(lambda: scan_blocks(_blocks(data, size), SOURCE, keep_lines=keep_lines))
    assert fast == slow
    if keep_lines and not isinstance(fast[0], str):
        kept = scan_blocks(_blocks(data, size), SOURCE).lines
        with _per_line_only():
            assert kept == scan_blocks(_blocks(data, size), SOURCE).lines


def test_a_sound_block_is_read_by_the_block_level_path() -> None:
    lines = [line[:-1] for line in _mixed_file(1_050, [5, 9, 10, 99, 1_000, 1_049], 7)]
    block = lines_module._verified_block(lines, 1, 0, CHAIN_SEED, 2, SOURCE)
    assert block is not None
    with _per_line_only():
        whole = scan(b"".join(line + b"\n" for line in lines), SOURCE)
    assert block.lines == whole.lines
    assert block.checksums == whole.checksums
    assert block.acknowledged == whole.acknowledged == 1_050
    assert block.numbers == [
        number for number, line in enumerate(lines, 1) if line.startswith(b'{"seq":')
    ]
    envelopes = [msgspec.json.decode(line) for line in whole.lines]
    assert block.types == [envelope["type"] for envelope in envelopes]
    assert block.payloads == [msgspec.json.encode(envelope["data"]) for envelope in envelopes]


def test_a_stale_commit_record_is_left_to_the_per_line_loop() -> None:
    lines = [line[:-1] for line in _mixed_file(6, [1, 3], 50)]
    stale = commit_line(2, int(lines[2][-10:-2], 16))[:-1]
    assert lines_module._verified_block([*lines, stale], 1, 0, CHAIN_SEED, 2, SOURCE) is None
    assert scan(b"".join(line + b"\n" for line in [*lines, stale]), SOURCE).acknowledged == 4
