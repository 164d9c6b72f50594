"""The segment index a JSONL checkpoint carries: a session opened from it reads an entry before the
checkpoint's window by scanning the one segment that holds it, not every byte before it; an index
that does not hold is dropped for a scan, and a corrupt log is still reported as one.

The sessions here are a few megabytes, with segments, checkpoints and the chunks of older entries
handed out made small (``segments.SEGMENT``, ``checkpoint.EVERY``, ``segments.CHUNK``) so that
they hold many of each."""

from __future__ import annotations

import itertools
import logging
import zlib
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from session_schedule.harness.transcript import recent_context
from session_schedule.session import JsonlSessionStore, SessionCorrupt, SessionId
from session_schedule.session import checkpoint as checkpoint_module
from session_schedule.session.checkpoint import CHECKPOINT_VERSION, CheckpointFile, SegmentStart
from session_schedule.session.jsonl import files as files_module
from session_schedule.session.jsonl import segments as segments_module
from session_schedule.session.lines import CHAIN_SEED
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, assistant_message, user_message
from session_schedule.testing.session_contract import NOW, payloads, turn

SID = SessionId("s_aaaaaaaaaaaa")
LOGGER = "session_schedule.session.jsonl"
SEGMENT = 128 * 1024
ROUNDS = 2_000
"""Prompt-and-answer rounds: 4,000 entries of about 670 bytes, 2.7 MB."""
FILLER = "the next thing, in a sentence long enough to make the log a few megabytes. " * 14


@pytest.fixture(autouse=True)
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments_module, "SEGMENT", SEGMENT)
    monkeypatch.setattr(segments_module, "CHUNK", 16)
    monkeypatch.setattr(checkpoint_module, "EVERY", 50)


@pytest.fixture
def store(tmp_path: Path) -> JsonlSessionStore:
    return JsonlSessionStore(tmp_path / "data")


class Reads:
    """The bytes the store reads from session files with ``pread`` (what reading older entries
    uses), counted from the last :meth:`reset`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        original = files_module.pread_all

        def counted(fd: int, size: int, offset: int) -> bytes:
            data = original(fd, size, offset)
            self.bytes += len(data)
            return data

        monkeypatch.setattr(files_module, "pread_all", counted)

    def reset(self) -> None:
        self.bytes = 0


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    return Reads(monkeypatch)


async def write_long(store: JsonlSessionStore, rounds: int = ROUNDS, *, burst: int = 25) -> None:
    """A closed session of ``rounds`` prompts and answers, a barrier after every ``burst``."""
    async with await store.create(now=NOW, session_id=SID) as handle:
        for n in range(rounds):
            handle.append(MESSAGE_ENTRY_TYPE, user_message(f"question {n}", at=NOW))
            handle.append(MESSAGE_ENTRY_TYPE, assistant_message(f"answer {n}: {FILLER}", at=NOW))
            if n % burst == burst - 1:
                await handle.barrier()
        await handle.barrier()


def stored(store: JsonlSessionStore) -> CheckpointFile:
    body = store.checkpoint_path(SID).read_bytes().partition(b"\n")[2]
    return msgspec.json.decode(body, type=CheckpointFile)


def header_end(store: JsonlSessionStore) -> int:
    return store.path_of(SID).read_bytes().index(b"\n") + 1


def rewrite(store: JsonlSessionStore, edit: dict[str, object]) -> None:
    """Change fields of the checkpoint and seal it again, as a writer of that content would."""
    path = store.checkpoint_path(SID)
    document = msgspec.json.decode(path.read_bytes().partition(b"\n")[2])
    document.update(edit)
    body = msgspec.json.encode(document)
    path.write_bytes(b"%08x\n" % zlib.crc32(body) + body)


async def check_index(store: JsonlSessionStore) -> list[SegmentStart]:
    """The checkpoint's index, after checking that every start is where the log says: from the
    header's end to the checkpoint's, each at the end of a line, after the entries, lines and
    chained checksum it states."""
    found = stored(store)
    segments = found.segments
    log = store.path_of(SID).read_bytes()
    checksums = [CHAIN_SEED, *(await store.inspect(SID)).checksums]
    assert segments[0] == SegmentStart(0, header_end(store), 1, CHAIN_SEED)
    assert segments[-1] == SegmentStart(found.entries, found.offset, found.lines, found.chain)
    for start in segments:
        assert log[: start.offset].endswith(b"\n")
        assert log[: start.offset].count(b"\n") == start.lines
        assert log[: start.offset].count(b'{"seq":') == start.entries
        assert checksums[start.entries] == start.chain
    return segments


async def test_a_reopened_session_reads_an_old_entry_from_one_segment(
    store: JsonlSessionStore, reads: Reads
) -> None:
    await write_long(store)
    size = store.path_of(SID).stat().st_size
    expected = payloads((await store.read(SID)).entries)
    segments = await check_index(store)
    # A checkpoint at every barrier (50 entries, about 34 KB), thinned to a segment apart.
    assert size > 2_500_000
    assert size // SEGMENT < len(segments) < 2 * ROUNDS // 50
    assert all(b.offset - a.offset <= SEGMENT for a, b in itertools.pairwise(segments))
    async with await store.open(SID) as handle:
        assert handle.resume is not None
        assert handle.resume.position == 2 * ROUNDS
        reads.reset()
        assert payloads([handle.entries[5]]) == [expected[5]]
        assert SEGMENT // 2 < reads.bytes <= SEGMENT
        reads.reset()
        assert payloads(handle.entries[2_000:2_010]) == expected[2_000:2_010]
        assert reads.bytes <= SEGMENT
        reads.reset()
        # Every entry, segment after segment: each byte before the checkpoint read once.
        assert payloads(handle.entries) == expected
        assert reads.bytes == stored(store).offset - header_end(store)


async def test_a_request_that_reaches_before_the_window_reads_a_segment(
    store: JsonlSessionStore, reads: Reads
) -> None:
    await write_long(store)
    async with await store.open(SID) as handle:
        reads.reset()
        request = recent_context({"role": "system", "content": "s"}, handle.entries, 60_000)
        assert request[-1] == {"role": "assistant", "content": f"answer {ROUNDS - 1}: {FILLER}"}
        assert len(request) > 64
        assert reads.bytes <= 2 * SEGMENT


def _wrong_offset(segments: list[list[int]]) -> str:
    segments[3][1] += 1
    return f"the segment from offset {segments[2][1]} does not verify"


def _wrong_chain(segments: list[list[int]]) -> str:
    segments[3][3] ^= 1
    return (
        f"the segment from offset {segments[2][1]} does not end as the next one starts "
        f"(entry {segments[3][0]}, checksum {segments[3][3]:08x})"
    )


def _wrong_lines(segments: list[list[int]]) -> str:
    segments[3][2] += 1
    return (
        f"the segment from offset {segments[2][1]} does not end as the next one starts "
        f"(entry {segments[3][0]}, checksum {segments[3][3]:08x})"
    )


def _not_from_the_header(segments: list[list[int]]) -> str:
    del segments[0]
    return "it does not start at the end of the header"


def _not_to_the_checkpoint(segments: list[list[int]]) -> str:
    del segments[-1]
    return "it does not end at the checkpoint's commit record"


def _out_of_order(segments: list[list[int]]) -> str:
    segments[3], segments[4] = segments[4], segments[3]
    return f"its start at offset {segments[4][1]} does not follow the one before"


@pytest.mark.parametrize(
    ("spoil", "on_open"),
    [
        (_wrong_offset, False),
        (_wrong_chain, False),
        (_wrong_lines, False),
        (_not_from_the_header, True),
        (_not_to_the_checkpoint, True),
        (_out_of_order, True),
    ],
)
async def test_an_index_that_does_not_hold_is_dropped_and_the_read_scans(
    store: JsonlSessionStore,
    reads: Reads,
    caplog: pytest.LogCaptureFixture,
    spoil: Callable[[list[list[int]]], str],
    on_open: bool,
) -> None:
    await write_long(store)
    expected = payloads((await store.read(SID)).entries)
    segments = [[s.entries, s.offset, s.lines, s.chain] for s in stored(store).segments]
    reason = spoil(segments)
    rewrite(store, {"segments": segments})
    with caplog.at_level(logging.INFO, logger=LOGGER):
        async with await store.open(SID) as handle:
            # The checkpoint itself is used.
            assert handle.resume is not None
            assert [record.getMessage() for record in caplog.records] == (
                [f"segment index in the checkpoint of session {SID} not used: {reason}"]
                if on_open
                else []
            )
            caplog.clear()
            assert payloads(handle.entries) == expected
            assert [record.getMessage() for record in caplog.records] == (
                []
                if on_open
                else [
                    f"segment index in the checkpoint of session {SID} not used: {reason}; "
                    "scanning the log before the checkpoint instead"
                ]
            )
            handle.append("message", turn(9000))
            await handle.barrier()
    caplog.clear()
    # The next checkpoint carries the index the scan built.
    await check_index(store)
    expected.append(("message", turn(9000)))
    async with await store.open(SID) as handle:
        reads.reset()
        assert payloads([handle.entries[7]]) == [expected[7]]
        assert reads.bytes <= SEGMENT
        assert payloads(handle.entries) == expected
    assert caplog.records == []


async def test_a_log_corrupted_in_an_old_segment_is_reported_when_that_segment_is_read(
    store: JsonlSessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    await write_long(store)
    path = store.path_of(SID)
    path.write_bytes(
        path.read_bytes().replace(b'"content":"question 3"', b'"content":"question 9"')
    )
    with pytest.raises(SessionCorrupt) as whole:
        await store.read(SID)
    async with await store.open(SID) as handle:
        assert payloads([handle.entries[3_000]])[0][0] == "message"  # another segment: intact
        with pytest.raises(SessionCorrupt) as found:
            handle.entries[6]
    assert str(found.value) == str(whole.value)
    assert "does not match its checksum" in str(whole.value)
    # The stored index was not trusted with it: the error is the whole read's.
    assert [record.getMessage() for record in caplog.records] == [
        f"segment index in the checkpoint of session {SID} not used: the segment from offset "
        f"{header_end(store)} does not verify; scanning the log before the checkpoint instead"
    ]


async def test_a_checkpoint_without_an_index_opens_and_the_first_read_scans(
    store: JsonlSessionStore, reads: Reads, caplog: pytest.LogCaptureFixture
) -> None:
    # A checkpoint of format 2, which has no segments (nor format 4's statuses and runs, nor
    # format 5's provenance and quotas).
    await write_long(store)
    expected = payloads((await store.read(SID)).entries)
    path = store.checkpoint_path(SID)
    document = msgspec.json.decode(path.read_bytes().partition(b"\n")[2])
    for field in ("segments", "statuses", "runs", "provenance", "quotas"):
        del document[field]
    document["checkpoint"] = 2
    body = msgspec.json.encode(document)
    path.write_bytes(b"%08x\n" % zlib.crc32(body) + body)
    covered = stored(store).offset - header_end(store)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        async with await store.open(SID) as handle:
            assert handle.resume is not None
            assert handle.resume.position == 2 * ROUNDS
            reads.reset()
            assert payloads([handle.entries[5]]) == [expected[5]]
            # The covered bytes, scanned once to index them, then the segment read.
            assert covered < reads.bytes <= covered + 2 * SEGMENT
            reads.reset()
            assert payloads([handle.entries[3_000]]) == [expected[3_000]]
            assert reads.bytes <= SEGMENT
            handle.append("message", turn(9000))
            await handle.barrier()
    assert caplog.records == []
    assert stored(store).checkpoint == CHECKPOINT_VERSION
    await check_index(store)
    async with await store.open(SID) as handle:
        reads.reset()
        assert payloads([handle.entries[5]]) == [expected[5]]
        assert reads.bytes <= SEGMENT


async def test_a_segment_longer_than_segments_are_is_split_when_first_read(
    store: JsonlSessionStore, reads: Reads
) -> None:
    # One barrier for everything: the only checkpoint is the close's, one segment long.
    await write_long(store, burst=ROUNDS)
    expected = payloads((await store.read(SID)).entries)
    found = stored(store)
    assert len(found.segments) == 2
    covered = found.offset - header_end(store)
    async with await store.open(SID) as handle:
        reads.reset()
        assert payloads([handle.entries[3_500]]) == [expected[3_500]]
        # The split scans the segment (a line at each piece's end twice), then the one or two
        # pieces that hold the chunk of entries handed out are read.
        assert covered < reads.bytes <= covered + 3 * SEGMENT
        older = handle._older
        assert older is not None
        assert len(older.starts) > covered // SEGMENT
        reads.reset()
        assert payloads([handle.entries[10]]) == [expected[10]]
        assert reads.bytes <= SEGMENT
        assert payloads(handle.entries) == expected
