"""The JSONL store beyond the contract: exact format, torn tails, corruption, faults, group commit."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import re
import stat
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core.errors import ScheduleError
from session_schedule.session import (
    JsonlSessionStore,
    PersistenceUncertain,
    SessionBusy,
    SessionCorrupt,
    SessionExists,
    SessionId,
)
from session_schedule.session.jsonl import creation as creation_module
from session_schedule.session.jsonl.store import OWNERS_NAME
from session_schedule.session.lines import commit_line
from session_schedule.testing.session_contract import (
    NOW,
    contract_test,
    payloads,
    schedule_create,
    turn,
)
from tests import invalid_utf8
from tests.session.faults import one_shot
from tests.session.files import reseal_entry
from tests.session.fsyncs import record_fsync_threads

SID = SessionId("s_aaaaaaaaaaaa")
NAME = f"{SID}.jsonl"
# Format 2: what the store writes.
V2_HEADER_LINE = (
    b'{"type":"header","data":{"format":2,"id":"s_aaaaaaaaaaaa",'
    b'"createdAt":"2026-05-01T09:00:00.000Z","parentId":null,"seedLength":0},"crc":"ddf36d5c"}\n'
)
V2_MESSAGE_LINE = (
    b'{"seq":0,"type":"message","data":{"role":"user","content":"turn 0",'
    b'"at":"2026-05-01T09:00:00.000Z","origin":"person"},"crc":"ea677e84"}\n'
)
V2_SCHEDULE_LINE = (
    b'{"seq":1,"type":"schedule/change","data":{"operation":"create","version":1,"schedule":'
    b'{"kind":"at","id":"sch_1","prompt":"reminder 1","scheduledAt":"2030-01-01T00:00:00.000Z"}},'
    b'"crc":"9089b7a0"}\n'
)
V2_LAST_LINE = (
    b'{"seq":2,"type":"message","data":{"role":"user","content":"turn 2",'
    b'"at":"2026-05-01T09:00:00.002Z","origin":"person"},"crc":"5c959cfe"}\n'
)
V2_COMMIT_LINE = b'{"ack":3,"chain":"5c959cfe","crc":"fb36f8e1"}\n'
V2_GOOD = V2_HEADER_LINE + V2_MESSAGE_LINE + V2_SCHEDULE_LINE + V2_LAST_LINE + V2_COMMIT_LINE
# Format 1: sessions written before format 2, still read and appended to.
HEADER_LINE = (
    b'{"type":"header","data":{"format":1,"id":"s_aaaaaaaaaaaa",'
    b'"createdAt":"2026-05-01T09:00:00.000Z","parentId":null,"seedLength":0}}\n'
)
MESSAGE_LINE = (
    b'{"type":"message","data":{"role":"user","content":"turn 0",'
    b'"at":"2026-05-01T09:00:00.000Z","origin":"person"}}\n'
)
SCHEDULE_LINE = (
    b'{"type":"schedule/change","data":{"operation":"create","version":1,"schedule":'
    b'{"kind":"at","id":"sch_1","prompt":"reminder 1","scheduledAt":"2030-01-01T00:00:00.000Z"}}}\n'
)
LAST_LINE = (
    b'{"type":"message","data":{"role":"user","content":"turn 2",'
    b'"at":"2026-05-01T09:00:00.002Z","origin":"person"}}\n'
)
GOOD = HEADER_LINE + MESSAGE_LINE + SCHEDULE_LINE + LAST_LINE
UNTOUCHED = "; the file was left untouched for inspection"


@pytest.fixture
def store(tmp_path: Path) -> JsonlSessionStore:
    return JsonlSessionStore(tmp_path / "data")


def write_session(store: JsonlSessionStore, content: bytes) -> Path:
    """The session file as ``content`` (a new history: without the checkpoint an earlier
    history's close left, which would count entries this one never held)."""
    store.data_dir.mkdir(exist_ok=True)
    path = store.path_of(SID)
    path.write_bytes(content)
    store.checkpoint_path(SID).unlink(missing_ok=True)
    return path


def expect_refused(
    store: JsonlSessionStore,
    content: bytes,
    error: type[Exception],
    message: str | re.Pattern[str],
) -> None:
    """Every way of reading ``content`` raises ``error`` with ``message``; nothing is touched."""
    path = write_session(store, content)
    for attempt in (store.open, store.read, lambda sid: store.fork(sid, at=0, now=NOW)):
        with pytest.raises(error) as caught:
            asyncio.run(attempt(SID))
        if isinstance(message, str):
            assert str(caught.value) == message
        else:
            assert message.fullmatch(str(caught.value))
    assert path.read_bytes() == content
    # Besides the session, only the owners' lock file (empty) the open took a byte of.
    assert sorted(p.name for p in store.data_dir.iterdir()) == [OWNERS_NAME, NAME]
    assert (store.data_dir / OWNERS_NAME).stat().st_size == 0


async def make_good_session(store: JsonlSessionStore) -> Path:
    async with await store.create(now=NOW, session_id=SID) as handle:
        handle.append("message", turn(0))
        handle.append("schedule/change", schedule_create(1))
        handle.append("message", turn(2))
        await handle.barrier()
    return store.path_of(SID)


class TestFormat:
    @contract_test
    async def test_the_file_is_exactly_the_documented_lines(self, store: JsonlSessionStore) -> None:
        path = await make_good_session(store)
        assert path.read_bytes() == V2_GOOD

    def test_the_checksums_follow_the_documented_rule(self) -> None:
        # Each seal is the CRC-32 of the bytes before `,"crc":`; an entry's register starts from
        # the previous entry's checksum (entry 0's from 0); headers and commits start from 0.
        previous = 0
        for line in (V2_MESSAGE_LINE, V2_SCHEDULE_LINE, V2_LAST_LINE):
            body, seal = line.split(b',"crc":"')
            previous = zlib.crc32(body, previous)
            assert seal == b"%08x" % previous + b'"}\n'
        for line in (V2_HEADER_LINE, V2_COMMIT_LINE):
            body, seal = line.split(b',"crc":"')
            assert seal == b"%08x" % zlib.crc32(body) + b'"}\n'
        assert V2_COMMIT_LINE.startswith(b'{"ack":3,"chain":"%08x"' % previous)

    @contract_test
    async def test_the_handle_exposes_each_entry_checksum(self, store: JsonlSessionStore) -> None:
        await make_good_session(store)
        async with await store.open(SID) as handle:
            assert [handle.checksum(n) for n in range(3)] == [0xEA677E84, 0x9089B7A0, 0x5C959CFE]
            with pytest.raises(IndexError):
                handle.checksum(3)
            handle.append("message", turn(3))
            assert handle.checksum(3) == zlib.crc32(
                b'{"seq":3,"type":"message","data":{"role":"user","content":"turn 3",'
                b'"at":"2026-05-01T09:00:00.003Z","origin":"person"}',
                0x5C959CFE,
            )

    @contract_test
    async def test_inspect_exposes_each_entry_checksum_and_the_torn_tail(
        self, store: JsonlSessionStore
    ) -> None:
        path = await make_good_session(store)
        with path.open("ab") as file:
            file.write(bytes(100) + b"\n" + b'{"seq":3')
        inspection = await store.inspect(SID)
        assert list(inspection.checksums) == [0xEA677E84, 0x9089B7A0, 0x5C959CFE]
        assert [entry.position for entry in inspection.snapshot.entries] == [0, 1, 2]
        assert (inspection.torn_bytes, inspection.torn_lines) == (109, 1)

    @contract_test
    async def test_a_format_1_session_stays_in_format_1(self, store: JsonlSessionStore) -> None:
        path = write_session(store, GOOD[: -len(LAST_LINE)])
        async with await store.open(SID) as handle:
            assert handle.format == 1
            handle.append("message", turn(2))
            await handle.barrier()
            with pytest.raises(ValueError, match="format 1, which has no checksums"):
                handle.checksum(0)
        assert path.read_bytes() == GOOD

    @contract_test
    async def test_a_fork_of_a_format_1_session_is_written_in_format_2(
        self, store: JsonlSessionStore
    ) -> None:
        write_session(store, GOOD)
        async with await store.fork(SID, now=NOW, session_id=SessionId("s_bbbbbbbbbbbb")) as fork:
            assert fork.format == 2
            lines = fork.path.read_bytes().splitlines(keepends=True)
        # The entries written anew, then the commit record the fork's checkpoint is bound to.
        assert lines[1:] == [
            V2_MESSAGE_LINE,
            V2_SCHEDULE_LINE,
            V2_LAST_LINE,
            commit_line(3, 0x5C959CFE),
        ]
        snapshot = await store.read("s_bbbbbbbbbbbb")
        assert payloads(snapshot.entries) == payloads((await store.read(SID)).entries)
        # Created with its checkpoint, which says what its log says.
        assert await store.derived_problems("s_bbbbbbbbbbbb") == ()
        async with await store.open("s_bbbbbbbbbbbb") as fork:
            assert fork.resume is not None
            assert fork.resume.position == 3

    @contract_test
    async def test_files_are_private_and_nothing_else_is_left(
        self, store: JsonlSessionStore
    ) -> None:
        path = await make_good_session(store)
        async with await store.fork(SID, now=NOW):
            pass
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(store.data_dir.stat().st_mode) == 0o700
        names = sorted(p.name for p in store.data_dir.iterdir())
        # Each has a checkpoint: the parent's written at its close, the fork's with the fork.
        # Both hold a schedule change: their closes recorded them in the next-target index.
        # The owners' lock file stays (it holds no data).
        sessions = [name for name in names if name.endswith(".jsonl")]
        assert len(sessions) == 2
        assert sorted(set(names) - set(sessions)) == [
            ".index-key",
            ".next-targets",
            ".owners",
            *sorted(name.replace(".jsonl", ".checkpoint") for name in sessions),
        ]
        assert all(name.startswith("s_") for name in sessions)
        assert stat.S_IMODE(store.checkpoint_path(SID).stat().st_mode) == 0o600
        assert stat.S_IMODE((store.data_dir / ".next-targets").stat().st_mode) == 0o600
        assert stat.S_IMODE((store.data_dir / ".index-key").stat().st_mode) == 0o600
        assert stat.S_IMODE((store.data_dir / ".owners").stat().st_mode) == 0o600

    @contract_test
    async def test_a_fork_copies_the_lines_verbatim(self, store: JsonlSessionStore) -> None:
        await make_good_session(store)
        async with await store.fork(SID, at=2, now=NOW) as fork:
            lines = fork.path.read_bytes().splitlines(keepends=True)
            assert [fork.checksum(n) for n in range(2)] == [0xEA677E84, 0x9089B7A0]
        assert lines[1:] == [V2_MESSAGE_LINE, V2_SCHEDULE_LINE, V2_COMMIT_TWO]
        assert b'"parentId":"s_aaaaaaaaaaaa","seedLength":2},"crc":' in lines[0]

    @contract_test
    async def test_list_ignores_files_that_are_not_sessions(self, store: JsonlSessionStore) -> None:
        await make_good_session(store)
        for name in ("notes.txt", f".{SID}.0badcafe.tmp", "s_BAD.jsonl", "s_aaaaaaaaaaab.txt"):
            (store.data_dir / name).write_bytes(b"not a session\n")
        assert [header.id for header in await store.list()] == [SID]

    @contract_test
    async def test_a_minted_id_never_replaces_a_session(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = await make_good_session(store)
        fresh = iter([SID, SessionId("s_bbbbbbbbbbbb")])
        monkeypatch.setattr(creation_module, "new_session_id", lambda: next(fresh))
        async with await store.create(now=NOW) as handle:
            assert handle.id == "s_bbbbbbbbbbbb"
        assert path.read_bytes() == V2_GOOD
        assert sorted(p.name for p in store.data_dir.iterdir()) == [
            ".index-key",
            ".next-targets",
            ".owners",
            f"{SID}.checkpoint",
            f"{SID}.jsonl",
            "s_bbbbbbbbbbbb.jsonl",
        ]

    @contract_test
    async def test_list_skips_a_file_that_vanishes(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        await make_good_session(store)
        listed = list(store.data_dir.iterdir())
        gone = store.data_dir / "s_bbbbbbbbbbbb.jsonl"
        monkeypatch.setattr(Path, "iterdir", lambda _self: iter([*listed, gone]))
        assert [header.id for header in await store.list()] == [SID]


class TestOwnership:
    @contract_test
    async def test_the_owner_holds_an_flock_that_other_descriptors_cannot_take(
        self, store: JsonlSessionStore
    ) -> None:
        path = await make_good_session(store)
        handle = await store.open(SID)
        fd = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            await handle.close()
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with pytest.raises(SessionBusy):
                await store.open(SID)
        finally:
            os.close(fd)
        async with await store.open(SID):
            pass

    @contract_test
    async def test_another_process_is_refused(self, store: JsonlSessionStore) -> None:
        await make_good_session(store)
        script = (
            "import asyncio, sys\n"
            "from pathlib import Path\n"
            "from session_schedule.session import JsonlSessionStore, SessionBusy\n"
            "try:\n"
            "    asyncio.run(JsonlSessionStore(Path(sys.argv[1])).open(sys.argv[2]))\n"
            "except SessionBusy as error:\n"
            "    print(error.message)\n"
        )
        async with await store.open(SID):
            result = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-c", script, str(store.data_dir), SID],
                capture_output=True,
                check=True,
                text=True,
            )
        assert result.stdout == (
            f"session {SID} is open in another process or handle; "
            "close it there before opening it here\n"
        )

    @contract_test
    async def test_a_cancelled_open_leaks_no_ownership(self, store: JsonlSessionStore) -> None:
        await make_good_session(store)
        opening = asyncio.ensure_future(store.open(SID))
        await asyncio.sleep(0)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        for _ in range(200):
            try:
                handle = await store.open(SID)
            except SessionBusy:
                await asyncio.sleep(0.005)
            else:
                await handle.close()
                return
        pytest.fail("the cancelled open kept the session")


class TestTornTail:
    def test_a_torn_last_line_is_cut_at_every_offset(self, store: JsonlSessionStore) -> None:
        start = len(GOOD) - len(LAST_LINE)
        for cut in range(start + 1, len(GOOD)):
            path = write_session(store, GOOD[:cut])
            asyncio.run(self._recover(store, path, start))

    async def _recover(self, store: JsonlSessionStore, path: Path, start: int) -> None:
        async with await store.open(SID) as handle:
            assert len(handle.entries) == 2
            assert path.read_bytes() == GOOD[:start]
            assert handle.append("message", turn(2)) == 2
            await handle.barrier()
        assert path.read_bytes() == GOOD

    @contract_test
    async def test_read_and_fork_ignore_a_torn_tail_without_cutting_it(
        self, store: JsonlSessionStore
    ) -> None:
        torn = GOOD[:-7]
        path = write_session(store, torn)
        snapshot = await store.read(SID)
        assert payloads(snapshot.entries) == [
            ("message", turn(0)),
            ("schedule/change", schedule_create(1)),
        ]
        async with await store.fork(SID, now=NOW) as fork:
            assert fork.header.seed_length == 2
        assert path.read_bytes() == torn

    @contract_test
    async def test_a_torn_header_is_corruption(self, store: JsonlSessionStore) -> None:
        path = write_session(store, HEADER_LINE[:-9])
        with pytest.raises(SessionCorrupt) as caught:
            await store.open(SID)
        assert caught.value.message == (
            f"session {SID} is corrupt at its header (line 1 of {NAME}): "
            f"the file has no complete header line{UNTOUCHED}"
        )
        with pytest.raises(SessionCorrupt):
            await store.list()
        headers, problems = await store.scan()
        assert headers == ()
        assert [problem.message for problem in problems] == [caught.value.message]
        assert path.read_bytes() == HEADER_LINE[:-9]


def _flip_high_bit(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x80]) + data[index + 1 :]


class TestCorruption:
    def test_a_garbage_line_in_the_middle(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + MESSAGE_LINE + b"garbage\n" + SCHEDULE_LINE + LAST_LINE[:-3],
            SessionCorrupt,
            f"session {SID} is corrupt at entry 1 (line 3 of {NAME}): malformed JSON "
            f"(JSON is malformed: invalid character (byte 0)){UNTOUCHED}",
        )

    def test_an_empty_line(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + b"\n" + MESSAGE_LINE,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): malformed JSON "
            f"(Input data was truncated){UNTOUCHED}",
        )

    def test_a_bad_last_complete_line_is_not_a_torn_tail(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + MESSAGE_LINE + LAST_LINE[:-9] + b"\n",
            SessionCorrupt,
            f"session {SID} is corrupt at entry 1 (line 3 of {NAME}): malformed JSON "
            f"(Input data was truncated){UNTOUCHED}",
        )

    def test_a_bad_schedule_entry_is_a_schedule_error(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + MESSAGE_LINE + SCHEDULE_LINE.replace(b'"version":1', b'"version":2'),
            ScheduleError,
            f"corrupt_schedule_log: schedule/change at entry 1 of session {SID} "
            f"(line 3 of {NAME}) is corrupt: an `at` schedule must be created with version 1, "
            "not 2 - at `$.version`",
        )

    def test_invalid_utf8_in_a_schedule_entry_is_a_schedule_error(
        self, store: JsonlSessionStore
    ) -> None:
        expect_refused(
            store,
            HEADER_LINE + SCHEDULE_LINE.replace(b"reminder", b"r\xe1minder"),
            ScheduleError,
            f"corrupt_schedule_log: schedule/change at entry 0 of session {SID} "
            f"(line 2 of {NAME}) is corrupt: "
            + invalid_utf8.in_a_string("invalid continuation byte"),
        )

    def test_an_unknown_entry_type(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + b'{"type":"calendar/event","data":{}}\n' + MESSAGE_LINE,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): "
            f"unknown entry type 'calendar/event'{UNTOUCHED}",
        )

    def test_an_envelope_with_an_extra_field(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + MESSAGE_LINE[:-2] + b',"crc":1}\n',
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): "
            f"object contains unknown field `crc`{UNTOUCHED}",
        )

    def test_a_bad_message_entry(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + MESSAGE_LINE.replace(b'"person"', b'"model"'),
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): invalid message payload: "
            f"a user turn cannot have origin 'model'{UNTOUCHED}",
        )

    def test_corruption_wins_over_a_torn_tail(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + b"{}\n" + LAST_LINE[:20],
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): "
            f"object missing required field `type`{UNTOUCHED}",
        )

    @pytest.mark.parametrize(
        ("before", "after", "problem"),
        [
            (b'"seedLength":0', b'"seedLength":9', "seedLength is 9 but the session has 1 entries"),
            (
                b'"id":"s_aaaaaaaaaaaa"',
                b'"id":"s_bbbbbbbbbbbb"',
                "the header names session s_bbbbbbbbbbbb",
            ),
            (
                b'"id":"s_aaaaaaaaaaaa"',
                b'"id":"../aaaaaaaaaa"',
                "'../aaaaaaaaaa' is not a session id - at `$.id`",
            ),
            (
                b'"parentId":null',
                b'"parentId":"s_aaaaaaaaaaaa"',
                "'s_aaaaaaaaaaaa' is not a parent id - at `$.parentId`",
            ),
            (
                b'"parentId":null',
                b'"parentId":"nope"',
                "'nope' is not a parent id - at `$.parentId`",
            ),
            # The wording of this one belongs to the core's instant field.
            (b"09:00:00.000Z", b"09:00:00Z", re.compile(r".* - at `\$\.createdAt`")),
            (b'"format":1', b'"format":2', "a format-2 header must end with its checksum"),
            (b'"format":1', b'"format":3', "invalid enum value 3 - at `$.format`"),
            (b'"seedLength":0', b'"seedLength":-1', "expected `int` >= 0 - at `$.seedLength`"),
            (
                b'"type":"header"',
                b'"type":"message"',
                "expected the header, found a 'message' record",
            ),
            (
                b'{"type":"header","data":{',
                b'{"type":"header","data":{"x":1,',
                "object contains unknown field `x`",
            ),
        ],
    )
    def test_header_problems(
        self,
        store: JsonlSessionStore,
        before: bytes,
        after: bytes,
        problem: str | re.Pattern[str],
    ) -> None:
        prefix = f"session {SID} is corrupt at its header (line 1 of {NAME}): "
        expected = (
            f"{prefix}{problem}{UNTOUCHED}"
            if isinstance(problem, str)
            else re.compile(re.escape(prefix) + problem.pattern + re.escape(UNTOUCHED))
        )
        expect_refused(
            store, HEADER_LINE.replace(before, after) + MESSAGE_LINE, SessionCorrupt, expected
        )

    def test_a_broken_schedule_line_is_a_schedule_error(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + SCHEDULE_LINE[:60] + b"\n" + MESSAGE_LINE,
            ScheduleError,
            f"corrupt_schedule_log: schedule/change at entry 0 of session {SID} "
            f"(line 2 of {NAME}) is corrupt: malformed JSON (Input data was truncated)",
        )

    def test_a_flipped_byte_anywhere_in_a_middle_line_is_reported(
        self, store: JsonlSessionStore
    ) -> None:
        # Setting the high bit of an ASCII byte always breaks UTF-8 or the JSON structure: every
        # such flip must be found. (A flip that yields other valid JSON cannot be told apart from
        # real content without a checksum, which the format does not have.)
        for index in range(len(HEADER_LINE) + len(MESSAGE_LINE)):
            content = _flip_high_bit(GOOD, index)
            write_session(store, content)
            with pytest.raises(SessionCorrupt):
                asyncio.run(store.open(SID))
        line_start = len(HEADER_LINE) + len(MESSAGE_LINE)
        data_start = line_start + len(b'{"type":"schedule/change","data":')
        for index in range(line_start, line_start + len(SCHEDULE_LINE)):
            content = _flip_high_bit(GOOD, index)
            path = write_session(store, content)
            expected = ScheduleError if index >= data_start else SessionCorrupt
            with pytest.raises(expected):
                asyncio.run(store.open(SID))
            assert path.read_bytes() == content


V2_ENTRY_LINES = [V2_MESSAGE_LINE, V2_SCHEDULE_LINE, V2_LAST_LINE]
V2_FIRST_TWO = V2_HEADER_LINE + V2_MESSAGE_LINE + V2_SCHEDULE_LINE
V2_COMMIT_TWO = commit_line(2, 0x9089B7A0)


def _v2(*lines: bytes) -> bytes:
    return b"".join([V2_HEADER_LINE, *lines])


class TestFormat2TornTail:
    """Format 2: whatever follows the last acknowledged entry and does not verify is cut."""

    def test_an_unacknowledged_line_is_cut_at_every_offset(self, store: JsonlSessionStore) -> None:
        acknowledged = V2_FIRST_TWO + V2_COMMIT_TWO
        for cut in range(len(V2_LAST_LINE)):
            write_session(store, acknowledged + V2_LAST_LINE[:cut])
            asyncio.run(self._recover(store, acknowledged))

    async def _recover(self, store: JsonlSessionStore, acknowledged: bytes) -> None:
        path = store.path_of(SID)
        async with await store.open(SID) as handle:
            assert len(handle.entries) == 2
            assert path.read_bytes() == acknowledged
            handle.append("message", turn(2))
            await handle.barrier()
        assert path.read_bytes() == acknowledged + V2_LAST_LINE + commit_line(3, 0x5C959CFE)

    @pytest.mark.parametrize(
        "tail",
        [
            bytes(len(V2_LAST_LINE)),
            bytes(len(V2_LAST_LINE) - 1) + b"\n",
            bytes(50) + V2_LAST_LINE[50:],
            V2_LAST_LINE[:-30] + bytes(29) + b"\n",
            bytes(4096) + b"\n" + V2_LAST_LINE,
            V2_LAST_LINE.replace(b"turn 2", b"turn 9"),
            V2_LAST_LINE.replace(b'"seq":2', b'"seq":3'),
            V2_LAST_LINE[:40] + V2_LAST_LINE[60:],
            commit_line(3, 0x5C959CFE)[:-9] + b"\n" + V2_LAST_LINE,
        ],
    )
    def test_damage_after_the_last_commit_record_is_a_torn_tail(
        self, store: JsonlSessionStore, tail: bytes
    ) -> None:
        acknowledged = V2_FIRST_TWO + V2_COMMIT_TWO
        path = write_session(store, acknowledged + tail)
        snapshot = asyncio.run(store.read(SID))
        assert len(snapshot.entries) == 2
        assert path.read_bytes() == acknowledged + tail
        asyncio.run(self._recover(store, acknowledged))

    @contract_test
    async def test_intact_entries_past_the_last_commit_record_are_made_durable_and_vouched_for(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = write_session(store, V2_FIRST_TWO + V2_COMMIT_TWO + V2_LAST_LINE + b'{"seq":3,')
        calls: list[int] = []
        monkeypatch.setattr(os, "fsync", _counting(os.fsync, calls))
        async with await store.open(SID) as handle:
            assert payloads(handle.entries)[2] == ("message", turn(2))
            assert handle.durable_length == 3
        assert len(calls) == 1
        assert path.read_bytes() == V2_FIRST_TWO + V2_COMMIT_TWO + V2_LAST_LINE + V2_COMMIT_LINE

    @contract_test
    async def test_entries_a_crash_left_unacknowledged_stay_when_intact(
        self, store: JsonlSessionStore
    ) -> None:
        path = write_session(store, V2_FIRST_TWO)
        async with await store.open(SID) as handle:
            assert len(handle.entries) == 2
        assert path.read_bytes() == V2_FIRST_TWO + V2_COMMIT_TWO

    @contract_test
    async def test_entries_whose_commit_record_followed_a_torn_line_are_vouched_for_again(
        self, store: JsonlSessionStore
    ) -> None:
        """Entry 2 was appended while the fsync of entries 0 and 1 ran, and their commit record
        written after it; a power cut then zero-filled entry 2's line. The commit record goes
        with the torn tail, so opening writes one (a checkpoint binds to it at close)."""
        torn = bytes(len(V2_LAST_LINE) - 1) + b"\n"
        path = write_session(store, V2_FIRST_TWO + torn + V2_COMMIT_TWO)
        async with await store.open(SID) as handle:
            assert len(handle.entries) == 2
            assert handle.durable_length == 2
        assert path.read_bytes() == V2_FIRST_TWO + V2_COMMIT_TWO
        async with await store.open(SID) as again:
            assert again.resume is not None
            assert again.resume.position == 2
        assert path.read_bytes() == V2_FIRST_TWO + V2_COMMIT_TWO


class TestFormat2Corruption:
    """Format 2: an acknowledged line that is damaged, missing, repeated or moved is reported."""

    @pytest.mark.parametrize(
        ("content", "error", "message"),
        [
            (
                _v2(V2_SCHEDULE_LINE, V2_LAST_LINE, V2_COMMIT_LINE),
                SessionCorrupt,
                f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): found entry 1 where "
                f"entry 0 belongs: a line is missing, repeated or out of order{UNTOUCHED}",
            ),
            (
                _v2(V2_MESSAGE_LINE, V2_LAST_LINE, V2_COMMIT_LINE),
                SessionCorrupt,
                f"session {SID} is corrupt at entry 1 (line 3 of {NAME}): found entry 2 where "
                f"entry 1 belongs: a line is missing, repeated or out of order{UNTOUCHED}",
            ),
            (
                _v2(V2_MESSAGE_LINE, V2_SCHEDULE_LINE, V2_COMMIT_LINE),
                SessionCorrupt,
                f"session {SID} is corrupt at entry 2 (line 4 of {NAME}): entry 2 is missing: "
                f"the commit record on line 4 acknowledges 3 entries{UNTOUCHED}",
            ),
            (
                _v2(V2_MESSAGE_LINE, V2_MESSAGE_LINE, V2_SCHEDULE_LINE, V2_LAST_LINE),
                SessionCorrupt,
                f"session {SID} is corrupt at entry 1 (line 3 of {NAME}): found entry 0 where "
                f"entry 1 belongs: a line is missing, repeated or out of order{UNTOUCHED}",
            ),
            (
                V2_GOOD + V2_LAST_LINE,
                SessionCorrupt,
                f"session {SID} is corrupt at entry 3 (line 6 of {NAME}): found entry 2 where "
                f"entry 3 belongs: a line is missing, repeated or out of order{UNTOUCHED}",
            ),
            (
                _v2(V2_SCHEDULE_LINE, V2_MESSAGE_LINE, V2_LAST_LINE, V2_COMMIT_LINE),
                SessionCorrupt,
                f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): found entry 1 where "
                f"entry 0 belongs: a line is missing, repeated or out of order{UNTOUCHED}",
            ),
            (
                _v2(V2_MESSAGE_LINE, V2_SCHEDULE_LINE, V2_COMMIT_LINE, V2_LAST_LINE),
                SessionCorrupt,
                f"session {SID} is corrupt at entry 2 (line 4 of {NAME}): entry 2 is missing: "
                f"the commit record on line 4 acknowledges 3 entries{UNTOUCHED}",
            ),
        ],
    )
    def test_a_moved_acknowledged_line(
        self, store: JsonlSessionStore, content: bytes, error: type[Exception], message: str
    ) -> None:
        expect_refused(store, content, error, message)

    def test_an_altered_acknowledged_schedule_line_is_a_schedule_error(
        self, store: JsonlSessionStore
    ) -> None:
        expect_refused(
            store,
            V2_GOOD.replace(b"reminder 1", b"reminder 2"),
            ScheduleError,
            f"corrupt_schedule_log: schedule/change at entry 1 of session {SID} "
            f"(line 3 of {NAME}) is corrupt: the line does not match its checksum: it, or a line "
            "before it, was altered",
        )

    def test_an_altered_acknowledged_message_line(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            V2_GOOD.replace(b"turn 0", b"turn 9"),
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): the line does not match "
            f"its checksum: it, or a line before it, was altered{UNTOUCHED}",
        )

    def test_a_zero_filled_acknowledged_line(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            _v2(V2_MESSAGE_LINE, bytes(len(V2_SCHEDULE_LINE) - 1) + b"\n", V2_LAST_LINE)
            + V2_COMMIT_LINE,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 1 (line 3 of {NAME}): the line is not an entry "
            f"line (it is damaged or zero-filled){UNTOUCHED}",
        )

    def test_a_commit_record_that_contradicts_the_chain(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            V2_FIRST_TWO + commit_line(2, 0x12345678),
            SessionCorrupt,
            f"session {SID} is corrupt at line 4 of {NAME}: the commit record acknowledges "
            f"entry 1 with checksum 12345678, but the entry's checksum is 9089b7a0{UNTOUCHED}",
        )

    def test_a_sealed_line_that_does_not_decode_is_corruption_even_unacknowledged(
        self, store: JsonlSessionStore
    ) -> None:
        body = b'{"seq":0,"type":"schedule/change","data":{"operation":"delete","version":2,"id":"sch_1"}'
        sealed = body + b',"crc":"%08x"}\n' % zlib.crc32(body)
        expect_refused(
            store,
            V2_HEADER_LINE + sealed,
            ScheduleError,
            f"corrupt_schedule_log: schedule/change at entry 0 of session {SID} "
            f"(line 2 of {NAME}) is corrupt: invalid enum value 2 - at `$.version`",
        )

    def test_a_fork_missing_a_copied_line(self, store: JsonlSessionStore) -> None:
        header = V2_HEADER_LINE.replace(b'"seedLength":0', b'"seedLength":2')
        body = header[: header.index(b',"crc":"')]
        header = body + b',"crc":"%08x"}\n' % zlib.crc32(body)
        expect_refused(
            store,
            header + V2_SCHEDULE_LINE,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): found entry 1 where "
            f"entry 0 belongs: a line is missing, repeated or out of order{UNTOUCHED}",
        )

    def test_a_header_that_does_not_match_its_checksum(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            V2_GOOD.replace(b"09:00:00.000Z", b"09:00:01.000Z", 1),
            SessionCorrupt,
            f"session {SID} is corrupt at its header (line 1 of {NAME}): the header does not "
            f"match its checksum{UNTOUCHED}",
        )

    def test_every_deletion_repeat_and_swap_of_an_acknowledged_line_is_reported(
        self, store: JsonlSessionStore
    ) -> None:
        lines = V2_GOOD.splitlines(keepends=True)
        variants: list[list[bytes]] = []
        for index in range(1, 4):
            variants.append(lines[:index] + lines[index + 1 :])
            variants.extend(
                [*lines[:place], lines[index], *lines[place:]]
                for place in range(1, len(lines) + 1)
                if place not in (index, index + 1)
            )
            swapped = list(lines)
            swapped[index], swapped[index + 1] = swapped[index + 1], swapped[index]
            variants.append(swapped)
        for variant in variants:
            content = b"".join(variant)
            path = write_session(store, content)
            with pytest.raises((SessionCorrupt, ScheduleError)):
                asyncio.run(store.open(SID))
            assert path.read_bytes() == content
        assert len(variants) == 3 * (1 + 3 + 1)


DEEP = b"[" * 100_000 + b"]" * 100_000
DEEP_HEADER = b"[" * 20_000 + b"]" * 20_000


def _sealed(body: bytes, previous: int = 0) -> bytes:
    return body + b',"crc":"%08x"}\n' % zlib.crc32(body, previous)


class TestStrictDecoding:
    """Only what a writer produces decodes: no repeated key, no depth that breaks a reader."""

    def test_a_repeated_envelope_key(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE + MESSAGE_LINE[:-2] + b',"type":"message"}\n',
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): the key `type` appears "
            f"more than once - at `$`{UNTOUCHED}",
        )

    def test_a_repeated_data_key_in_a_schedule_line(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            HEADER_LINE
            + b'{"type":"schedule/change","data":{"operation":"delete","version":1,"id":"sch_9"},'
            b'"data":{"operation":"delete","version":1,"id":"sch_1"}}\n',
            ScheduleError,
            f"corrupt_schedule_log: schedule/change at entry 0 of session {SID} (line 2 of "
            f"{NAME}) is corrupt: the key `data` appears more than once - at `$`",
        )

    def test_a_repeated_key_in_a_schedule_payload(self, store: JsonlSessionStore) -> None:
        for header, line in (
            (
                HEADER_LINE,
                b'{"type":"schedule/change","data":{"operation":"delete","version":1,'
                b'"id":"sch_9","id":"sch_1"}}\n',
            ),
            (
                V2_HEADER_LINE,
                _sealed(
                    b'{"seq":0,"type":"schedule/change","data":{"operation":"delete",'
                    b'"version":1,"id":"sch_9","id":"sch_1"}'
                ),
            ),
        ):
            expect_refused(
                store,
                header + line,
                ScheduleError,
                f"corrupt_schedule_log: schedule/change at entry 0 of session {SID} (line 2 of "
                f"{NAME}) is corrupt: the key `id` appears more than once - at `$`",
            )

    def test_a_repeated_key_in_a_sealed_entry_frame(self, store: JsonlSessionStore) -> None:
        expect_refused(
            store,
            V2_HEADER_LINE + _sealed(b'{"seq":0,"type":"message","type":"message","data":{}'),
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): the line is not an entry "
            f"line{UNTOUCHED}",
        )

    @pytest.mark.parametrize("sealed", [False, True])
    def test_a_repeated_key_in_the_header(self, store: JsonlSessionStore, sealed: bool) -> None:
        header = (V2_HEADER_LINE if sealed else HEADER_LINE).split(b',"crc":')[0]
        header = header.replace(b'"parentId":null', b'"parentId":null,"parentId":null')
        line = _sealed(header) if sealed else header + b"\n"
        expect_refused(
            store,
            line,
            SessionCorrupt,
            f"session {SID} is corrupt at its header (line 1 of {NAME}): the key `parentId` "
            f"appears more than once - at `$`{UNTOUCHED}",
        )

    @pytest.mark.parametrize(
        ("content", "error", "message"),
        [
            (
                HEADER_LINE + b'{"type":"message","data":' + DEEP + b"}\n",
                SessionCorrupt,
                f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): the JSON is nested too "
                f"deeply{UNTOUCHED}",
            ),
            (
                HEADER_LINE + b'{"type":"schedule/change","data":' + DEEP + b"}\n",
                ScheduleError,
                f"corrupt_schedule_log: schedule/change at entry 0 of session {SID} (line 2 of "
                f"{NAME}) is corrupt: the JSON is nested too deeply",
            ),
            (
                b'{"type":"header","data":' + DEEP_HEADER + b"}\n",
                SessionCorrupt,
                f"session {SID} is corrupt at its header (line 1 of {NAME}): the JSON is nested "
                f"too deeply{UNTOUCHED}",
            ),
            (
                b'{"type":"header","data":' + DEEP + b"}\n",
                SessionCorrupt,
                f"session {SID} is corrupt at its header (line 1 of {NAME}): the header line is "
                f"longer than 65536 bytes, which no header is{UNTOUCHED}",
            ),
            (
                b"{" * 70_000,
                SessionCorrupt,
                f"session {SID} is corrupt at its header (line 1 of {NAME}): the header line is "
                f"longer than 65536 bytes, which no header is{UNTOUCHED}",
            ),
            (
                V2_HEADER_LINE + _sealed(b'{"seq":0,"type":"message","data":' + DEEP),
                SessionCorrupt,
                f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): invalid message "
                f"payload: expected `object`, got `array`{UNTOUCHED}",
            ),
        ],
    )
    def test_a_deeply_nested_line(
        self, store: JsonlSessionStore, content: bytes, error: type[Exception], message: str
    ) -> None:
        expect_refused(store, content, error, message)
        headers, problems = asyncio.run(store.scan())
        if "at its header" in message:
            assert [problem.message for problem in problems] == [message]
        else:
            assert [header.id for header in headers] == [SID]

    @settings(max_examples=60, deadline=None)
    @given(
        depth=st.integers(min_value=0, max_value=30_000),
        opener=st.sampled_from([b"[", b'{"a":']),
        place=st.sampled_from(["v1 message", "v1 schedule", "v1 type", "header", "v2 data"]),
    )
    def test_any_depth_anywhere_is_a_located_corruption(
        self, tmp_path_factory: pytest.TempPathFactory, depth: int, opener: bytes, place: str
    ) -> None:
        store = JsonlSessionStore(tmp_path_factory.mktemp("deep"))
        nested = opener * depth + b"1" + (b"]" if opener == b"[" else b"}") * depth
        content = {
            "v1 message": HEADER_LINE + b'{"type":"message","data":' + nested + b"}\n",
            "v1 schedule": HEADER_LINE + b'{"type":"schedule/change","data":' + nested + b"}\n",
            "v1 type": HEADER_LINE + b'{"type":' + nested + b',"data":{}}\n',
            "header": b'{"type":"header","data":' + nested + b"}\n",
            "v2 data": V2_HEADER_LINE + _sealed(b'{"seq":0,"type":"message","data":' + nested),
        }[place]
        write_session(store, content)
        for attempt in (store.open, store.read):
            with pytest.raises((SessionCorrupt, ScheduleError)) as caught:
                asyncio.run(attempt(SID))
            if isinstance(caught.value, ScheduleError):
                assert caught.value.code == "corrupt_schedule_log"
        asyncio.run(store.scan())


OTHER = SessionId("s_bbbbbbbbbbbb")


async def _create_and_close(store: JsonlSessionStore) -> None:
    async with await store.create(now=NOW):
        pass


def _not_regular(name: str, kind: str) -> str:
    return (
        f"session {OTHER} is corrupt: {name} is {kind}, not a regular file; nothing was read "
        "from or written to it — remove it, or put the session's file back in its place"
    )


class TestSpecialFiles:
    """Only regular files are sessions: links are not followed, FIFOs and devices not read."""

    def _refused(self, store: JsonlSessionStore, message: str) -> None:
        async def attempts() -> None:
            for attempt in (
                store.open,
                store.read,
                lambda sid: store.fork(sid, now=NOW),
                store.inspect,
            ):
                with pytest.raises(SessionCorrupt) as caught:
                    await attempt(OTHER)
                assert caught.value.message == message
            headers, problems = await store.scan()
            assert [header.id for header in headers] == [SID]
            assert [problem.message for problem in problems] == [message]

        asyncio.run(attempts())

    def test_a_symbolic_link_is_not_followed(
        self, store: JsonlSessionStore, tmp_path: Path
    ) -> None:
        asyncio.run(make_good_session(store))
        elsewhere = tmp_path / "elsewhere.jsonl"
        elsewhere.write_bytes(V2_GOOD.replace(SID.encode(), OTHER.encode()))
        before = elsewhere.read_bytes()
        store.path_of(OTHER).symlink_to(elsewhere)
        self._refused(store, _not_regular(f"{OTHER}.jsonl", "a symbolic link"))
        assert elsewhere.read_bytes() == before

    def test_a_link_to_dev_zero_is_not_read(self, store: JsonlSessionStore) -> None:
        asyncio.run(make_good_session(store))
        store.path_of(OTHER).symlink_to("/dev/zero")
        self._refused(store, _not_regular(f"{OTHER}.jsonl", "a symbolic link"))

    def test_a_fifo_does_not_hang_anything(self, store: JsonlSessionStore) -> None:
        asyncio.run(make_good_session(store))
        os.mkfifo(store.path_of(OTHER), 0o600)
        self._refused(store, _not_regular(f"{OTHER}.jsonl", "a named pipe (FIFO)"))

    def test_a_device_is_not_read(self, store: JsonlSessionStore) -> None:
        asyncio.run(make_good_session(store))
        try:
            os.mknod(store.path_of(OTHER), stat.S_IFCHR | 0o600, os.makedev(1, 5))
        except PermissionError:
            pytest.skip("creating a device node needs CAP_MKNOD")
        self._refused(store, _not_regular(f"{OTHER}.jsonl", "a character device"))

    def test_a_directory_in_place_of_a_file(self, store: JsonlSessionStore) -> None:
        asyncio.run(make_good_session(store))
        store.path_of(OTHER).mkdir()
        self._refused(store, _not_regular(f"{OTHER}.jsonl", "a directory"))

    @contract_test
    async def test_create_never_writes_through_a_planted_link(
        self, store: JsonlSessionStore, tmp_path: Path
    ) -> None:
        store.data_dir.mkdir()
        target = tmp_path / "target"
        target.write_bytes(b"precious\n")
        store.path_of(OTHER).symlink_to(target)
        with pytest.raises(SessionExists):
            await store.create(now=NOW, session_id=OTHER)
        assert target.read_bytes() == b"precious\n"

    def test_a_shared_data_directory_is_warned_about_once(
        self, store: JsonlSessionStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        store.data_dir.mkdir()
        store.data_dir.chmod(0o777)
        with caplog.at_level(logging.WARNING, logger="session_schedule.session.jsonl"):
            asyncio.run(make_good_session(store))
            asyncio.run(store.read(SID))
            asyncio.run(store.scan())
            asyncio.run(store.read(SID))
            JsonlSessionStore(store.data_dir).check_directory()
        assert [record.getMessage() for record in caplog.records] == [
            f"session data directory {store.data_dir} is writable by its group and others "
            "(mode 0777): another user could plant or replace session files; make it private "
            "(chmod 700)"
        ] * 2

    def test_a_private_data_directory_is_not_warned_about(
        self, store: JsonlSessionStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        asyncio.run(make_good_session(store))
        store.data_dir.chmod(0o750)
        with caplog.at_level(logging.WARNING, logger="session_schedule.session.jsonl"):
            asyncio.run(store.scan())
        assert caplog.records == []
        store.data_dir.chmod(0o770)
        with caplog.at_level(logging.WARNING, logger="session_schedule.session.jsonl"):
            JsonlSessionStore(store.data_dir).check_directory()
        assert [record.getMessage() for record in caplog.records] == [
            f"session data directory {store.data_dir} is writable by its group (mode 0770): "
            "another user could plant or replace session files; make it private (chmod 700)"
        ]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="session_schedule.session.jsonl"):
            asyncio.run(_create_and_close(JsonlSessionStore(store.data_dir)))
        assert len(caplog.records) == 1


def _counting(real: Callable[[int], None], calls: list[int]) -> Callable[[int], None]:
    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    return fsync


class TestFaults:
    @contract_test
    async def test_a_failing_fsync_poisons_and_is_never_retried(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        calls: list[int] = []

        def failing(fd: int) -> None:
            calls.append(fd)
            raise OSError(errno.EIO, "Input/output error")

        handle = await store.create(now=NOW, session_id=SID)
        handle.append("message", turn(0))
        monkeypatch.setattr(os, "fsync", failing)
        expected = (
            f"session {SID} cannot confirm that its entries are durable "
            "(OSError: [Errno 5] Input/output error); reopen the session from storage"
        )
        for _ in range(3):
            with pytest.raises(PersistenceUncertain) as caught:
                await handle.barrier()
            assert caught.value.message == expected
        assert len(calls) == 1
        assert handle.durable_length == 0
        await handle.close()
        monkeypatch.undo()
        async with await store.open(SID) as reopened:
            assert payloads(reopened.entries) == [("message", turn(0))]

    @contract_test
    async def test_a_short_write_poisons_and_its_tail_is_cut_on_reopen(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        handle = await store.create(now=NOW, session_id=SID)
        handle.append("message", turn(0))
        await handle.barrier()
        await asyncio.sleep(0)  # the barrier's commit record is written on its own

        real_write = os.write

        def short(fd: int, data: bytes) -> int:
            return real_write(fd, data[:-10])

        monkeypatch.setattr(os, "write", short)
        with pytest.raises(PersistenceUncertain) as caught:
            handle.append("message", turn(1))
        monkeypatch.undo()
        line = V2_MESSAGE_LINE.replace(b'"seq":0', b'"seq":1').replace(b"turn 0", b"turn 1")
        assert caught.value.message == (
            f"session {SID} cannot confirm that its entries are durable (writing entry 1 "
            f"failed: [Errno 5] short write ({len(line) - 10} of {len(line)} "
            "bytes)); reopen the session from storage"
        )
        await handle.close()
        assert not store.path_of(SID).read_bytes().endswith(b"\n")
        async with await store.open(SID) as reopened:
            assert payloads(reopened.entries) == [("message", turn(0))]
        assert store.path_of(SID).read_bytes() == (
            V2_HEADER_LINE + V2_MESSAGE_LINE + commit_line(1, 0xEA677E84)
        )

    @contract_test
    async def test_a_failing_fsync_while_cutting_a_torn_tail(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        write_session(store, GOOD[:-5])
        monkeypatch.setattr(
            os, "fsync", one_shot(os.fsync, OSError(errno.EIO, "Input/output error"))
        )
        with pytest.raises(PersistenceUncertain, match="cutting the torn tail failed"):
            await store.open(SID)
        async with await store.open(SID) as handle:
            assert len(handle.entries) == 2

    @contract_test
    async def test_a_fork_needs_the_parent_durable(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        await make_good_session(store)
        monkeypatch.setattr(
            os, "fsync", one_shot(os.fsync, OSError(errno.EIO, "Input/output error"))
        )
        with pytest.raises(PersistenceUncertain, match="before the fork failed"):
            await store.fork(SID, now=NOW)
        assert [header.id for header in await store.list()] == [SID]

    @contract_test
    async def test_a_failed_creation_leaves_nothing(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(os, "link", one_shot(os.link, OSError(errno.EIO, "Input/output error")))
        with pytest.raises(OSError, match="Input/output error"):
            await store.create(now=NOW, session_id=SID)
        assert [p.name for p in store.data_dir.iterdir()] == [OWNERS_NAME]  # an empty lock file
        async with await store.create(now=NOW, session_id=SID):
            pass


class TestGroupCommit:
    @contract_test
    async def test_a_hundred_appends_then_one_barrier_cost_one_fsync(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        calls: list[int] = []
        async with await store.create(now=NOW) as handle:
            monkeypatch.setattr(os, "fsync", _counting(os.fsync, calls))
            for number in range(100):
                handle.append("message", turn(number))
            await handle.barrier()
            assert len(calls) == 1
            await asyncio.gather(*(handle.barrier() for _ in range(10)))
            assert len(calls) == 1
            handle.append("message", turn(100))
            await asyncio.gather(*(handle.barrier() for _ in range(10)))
            assert len(calls) == 2
            assert handle.flush_count == 2
            assert handle.durable_length == 101

    @contract_test
    async def test_a_barrier_during_an_fsync_waits_for_the_next_one(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        release = threading.Event()
        threads: list[str] = []
        real_fsync = os.fsync

        def slow(fd: int) -> None:
            threads.append(threading.current_thread().name)
            release.wait(5)
            real_fsync(fd)

        threaded = JsonlSessionStore(store.data_dir, flush_on_loop=False)
        async with await threaded.create(now=NOW) as handle:
            monkeypatch.setattr(os, "fsync", slow)
            handle.append("message", turn(0))
            first = asyncio.ensure_future(handle.barrier())
            await asyncio.sleep(0.01)
            handle.append("message", turn(1))
            second = asyncio.ensure_future(handle.barrier())
            ticks = 0
            for _ in range(5):
                await asyncio.sleep(0.005)
                ticks += 1
            assert ticks == 5
            assert not first.done()
            assert not second.done()
            assert handle.durable_length == 0
            release.set()
            await first
            await second
            assert handle.durable_length == 2
            assert handle.flush_count == 2
        assert len(threads) == 2
        assert all(name.startswith("session-worker-") for name in threads)
        assert threading.current_thread().name not in threads


class TestFlushOnTheLoop:
    @contract_test
    async def test_a_lone_barrier_fsyncs_on_the_loops_thread(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with await store.create(now=NOW) as handle:
            threads = record_fsync_threads(monkeypatch)
            handle.append("message", turn(0))
            await handle.barrier()
            assert threads == [threading.current_thread().name]
            assert handle.flush_count == 1
            assert handle.durable_length == 1
            checksum = handle.checksum(0)
        assert (await store.read(handle.id)).entries[0].payload == turn(0)
        assert store.path_of(handle.id).read_bytes().endswith(commit_line(1, checksum))

    @contract_test
    async def test_barriers_called_together_share_one_fsync_on_the_sessions_thread(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with await store.create(now=NOW) as handle:
            threads = record_fsync_threads(monkeypatch)

            async def write(number: int) -> None:
                handle.append("message", turn(number))
                await handle.barrier()

            await asyncio.gather(*(write(number) for number in range(10)))
            assert len(threads) == 1
            assert threads[0].startswith("session-worker-")
            assert handle.flush_count == 1
            assert handle.durable_length == 10

    @contract_test
    async def test_cancelling_a_lone_barrier_while_it_yields_strands_nobody(
        self, store: JsonlSessionStore
    ) -> None:
        async with await store.create(now=NOW) as handle:
            handle.append("message", turn(0))
            lone = asyncio.ensure_future(handle.barrier())
            joined = asyncio.ensure_future(handle.barrier())
            # The first yields before flushing, the second joins it as a waiter; then the
            # first is cancelled while it yields.
            await asyncio.sleep(0)
            lone.cancel()
            with pytest.raises(asyncio.CancelledError):
                await lone
            await asyncio.wait_for(joined, 5)
            assert handle.durable_length == 1
            assert not handle.poisoned

    @contract_test
    async def test_a_failed_fsync_on_the_loop_poisons_the_handle(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        handle = await store.create(now=NOW)
        monkeypatch.setattr(
            os, "fsync", one_shot(os.fsync, OSError(errno.EIO, "Input/output error"))
        )
        handle.append("message", turn(0))
        with pytest.raises(PersistenceUncertain, match=r"OSError: \[Errno 5\] Input/output error"):
            await handle.barrier()
        assert handle.durable_length == 0
        with pytest.raises(PersistenceUncertain):
            handle.append("message", turn(1))
        await handle.close()


async def test_a_lone_barriers_commit_record_goes_out_with_the_next_entry(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    writes: list[bytes] = []
    real_write = os.write

    def recording(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    handle = await store.create(now=NOW, session_id=SID)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "write", recording)
        handle.append("message", turn(0))
        await handle.barrier()
        # No yield: the commit record is still unwritten, and travels ahead of the next line.
        handle.append("message", turn(1))
        await handle.barrier()
        await asyncio.sleep(0)
    await handle.close()
    kinds = [[line[:7].decode() for line in data.splitlines()] for data in writes]
    assert kinds == [['{"seq":'], ['{"ack":', '{"seq":'], ['{"ack":']]
    lines = (tmp_path / NAME).read_bytes().splitlines()[1:]
    assert [line[:7] for line in lines] == [b'{"seq":', b'{"ack":', b'{"seq":', b'{"ack":']
    async with await store.open(SID) as reopened:
        assert payloads(reopened.entries) == [("message", turn(0)), ("message", turn(1))]


async def test_a_failed_commit_record_write_poisons_the_handle_after_its_barrier(
    tmp_path: Path,
) -> None:
    store = JsonlSessionStore(tmp_path)
    handle = await store.create(now=NOW, session_id=SID)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            os,
            "write",
            one_shot(
                os.write,
                OSError(errno.ENOSPC, "No space left on device"),
                when=lambda fd, data: bytes(data).startswith(b'{"ack":'),
            ),
        )
        handle.append("message", turn(0))
        # The entry is durable once the fsync has returned: the barrier succeeds.
        await handle.barrier()
        await asyncio.sleep(0)
    assert handle.poisoned
    with pytest.raises(PersistenceUncertain) as caught:
        handle.append("message", turn(1))
    assert str(caught.value) == (
        f"session {SID} cannot confirm that its entries are durable (writing a commit record "
        "failed: [Errno 28] No space left on device); reopen the session from storage"
    )
    await handle.close()
    async with await store.open(SID) as reopened:
        assert payloads(reopened.entries) == [("message", turn(0))]


_BAD_CHANGE_MESSAGE = (
    f"corrupt_schedule_log: schedule/change at entry 1 of session {SID} (line 3 of {NAME}) is corrupt: expected a "
    "schedule id like `sch_1`, got 'sch_01' - at `$.id`"
)


def test_a_bad_change_is_reported_before_a_bad_entry_after_it(
    store: JsonlSessionStore,
) -> None:
    # Changes are decoded a chunk at a time, after the entries that follow them were read: the
    # error is still the first bad entry's.
    path = asyncio.run(make_good_session(store))
    reseal_entry(path, 1, "schedule/change", b'{"operation":"delete","version":1,"id":"sch_01"}')
    reseal_entry(path, 2, "message", b'{"role":"nobody","content":"x"}')
    _leave_only(path)
    expect_refused(store, path.read_bytes(), ScheduleError, _BAD_CHANGE_MESSAGE)


@pytest.mark.parametrize("damage", ["repeat", "tear"])
def test_a_bad_change_is_reported_before_a_damaged_line_after_it(
    store: JsonlSessionStore, damage: str
) -> None:
    path = asyncio.run(make_good_session(store))
    reseal_entry(path, 1, "schedule/change", b'{"operation":"delete","version":1,"id":"sch_01"}')
    lines = path.read_bytes().split(b"\n")
    assert lines[3].startswith(b'{"seq":2,')
    if damage == "repeat":
        lines[3] = lines[1]  # entry 0's line again where entry 2 belongs: found while reading
    else:
        lines[3] = lines[3].replace(b"turn 2", b"turn 3")  # a seal that no longer matches,
        # before a commit record that vouches for it: found once every line is read
    _leave_only(path)
    expect_refused(store, b"\n".join(lines), ScheduleError, _BAD_CHANGE_MESSAGE)


def _leave_only(path: Path) -> None:
    """Remove the files beside a session's log (its checkpoint, the next-target record)."""
    for other in path.parent.iterdir():
        if other != path:
            other.unlink()


@pytest.mark.parametrize("kind", ["str", "pathlike"])
async def test_the_store_takes_its_directory_as_a_string_or_a_path_like(
    tmp_path: Path, kind: str
) -> None:
    where = tmp_path / "sessions"
    given: str | _Where = str(where) if kind == "str" else _Where(str(where))
    store = JsonlSessionStore(given)
    assert store.data_dir == where
    async with await store.create(now=NOW) as session:
        created = session.id
    assert [header.id for header in await JsonlSessionStore(where).list()] == [created]


@final
class _Where:
    """A path-like object that is not a ``Path``."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __fspath__(self) -> str:
        return self._path
