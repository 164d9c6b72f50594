"""The JSONL store beyond the contract: exact format, torn tails, corruption, faults, group commit."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from session_schedule.core.errors import ScheduleError
from session_schedule.session import (
    JsonlSessionStore,
    PersistenceUncertain,
    SessionBusy,
    SessionCorrupt,
    SessionId,
)
from session_schedule.session import jsonl as jsonl_module
from session_schedule.testing.session_contract import (
    NOW,
    contract_test,
    payloads,
    schedule_create,
    turn,
)
from tests.session.faults import one_shot

SID = SessionId("s_aaaaaaaaaaaa")
NAME = f"{SID}.jsonl"
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
    store.data_dir.mkdir(exist_ok=True)
    path = store.path_of(SID)
    path.write_bytes(content)
    return path


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
        assert path.read_bytes() == GOOD

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
        assert len(names) == 2
        assert all(name.startswith("s_") and name.endswith(".jsonl") for name in names)

    @contract_test
    async def test_a_fork_copies_the_lines_verbatim(self, store: JsonlSessionStore) -> None:
        await make_good_session(store)
        async with await store.fork(SID, at=2, now=NOW) as fork:
            lines = fork.path.read_bytes().splitlines(keepends=True)
        assert lines[1:] == [MESSAGE_LINE, SCHEDULE_LINE]
        assert b'"parentId":"s_aaaaaaaaaaaa","seedLength":2}}' in lines[0]

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
        monkeypatch.setattr(jsonl_module, "new_session_id", lambda: next(fresh))
        async with await store.create(now=NOW) as handle:
            assert handle.id == "s_bbbbbbbbbbbb"
        assert path.read_bytes() == GOOD
        assert len(list(store.data_dir.iterdir())) == 2

    @contract_test
    async def test_list_skips_a_file_that_vanishes(self, store: JsonlSessionStore) -> None:
        await make_good_session(store)
        (store.data_dir / "s_bbbbbbbbbbbb.jsonl").symlink_to(store.data_dir / "gone")
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
    def _expect(
        self,
        store: JsonlSessionStore,
        content: bytes,
        error: type[Exception],
        message: str | re.Pattern[str],
    ) -> None:
        path = write_session(store, content)
        for attempt in (store.open, store.read, lambda sid: store.fork(sid, at=0, now=NOW)):
            with pytest.raises(error) as caught:
                asyncio.run(attempt(SID))
            if isinstance(message, str):
                assert str(caught.value) == message
            else:
                assert message.fullmatch(str(caught.value))
        assert path.read_bytes() == content
        assert sorted(p.name for p in store.data_dir.iterdir()) == [NAME]

    def test_a_garbage_line_in_the_middle(self, store: JsonlSessionStore) -> None:
        self._expect(
            store,
            HEADER_LINE + MESSAGE_LINE + b"garbage\n" + SCHEDULE_LINE + LAST_LINE[:-3],
            SessionCorrupt,
            f"session {SID} is corrupt at entry 1 (line 3 of {NAME}): malformed JSON "
            f"(JSON is malformed: invalid character (byte 0)){UNTOUCHED}",
        )

    def test_an_empty_line(self, store: JsonlSessionStore) -> None:
        self._expect(
            store,
            HEADER_LINE + b"\n" + MESSAGE_LINE,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): malformed JSON "
            f"(Input data was truncated){UNTOUCHED}",
        )

    def test_a_bad_last_complete_line_is_not_a_torn_tail(self, store: JsonlSessionStore) -> None:
        self._expect(
            store,
            HEADER_LINE + MESSAGE_LINE + LAST_LINE[:-9] + b"\n",
            SessionCorrupt,
            f"session {SID} is corrupt at entry 1 (line 3 of {NAME}): malformed JSON "
            f"(Input data was truncated){UNTOUCHED}",
        )

    def test_a_bad_schedule_entry_is_a_schedule_error(self, store: JsonlSessionStore) -> None:
        self._expect(
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
        self._expect(
            store,
            HEADER_LINE + SCHEDULE_LINE.replace(b"reminder", b"r\xe1minder"),
            ScheduleError,
            f"corrupt_schedule_log: schedule/change at entry 0 of session {SID} "
            f"(line 2 of {NAME}) is corrupt: invalid UTF-8 in a string (invalid continuation "
            "byte)",
        )

    def test_an_unknown_entry_type(self, store: JsonlSessionStore) -> None:
        self._expect(
            store,
            HEADER_LINE + b'{"type":"calendar/event","data":{}}\n' + MESSAGE_LINE,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): "
            f"unknown entry type 'calendar/event'{UNTOUCHED}",
        )

    def test_an_envelope_with_an_extra_field(self, store: JsonlSessionStore) -> None:
        self._expect(
            store,
            HEADER_LINE + MESSAGE_LINE[:-2] + b',"crc":1}\n',
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): "
            f"object contains unknown field `crc`{UNTOUCHED}",
        )

    def test_a_bad_message_entry(self, store: JsonlSessionStore) -> None:
        self._expect(
            store,
            HEADER_LINE + MESSAGE_LINE.replace(b'"person"', b'"model"'),
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (line 2 of {NAME}): invalid message payload: "
            f"a user turn cannot have origin 'model'{UNTOUCHED}",
        )

    def test_corruption_wins_over_a_torn_tail(self, store: JsonlSessionStore) -> None:
        self._expect(
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
            (b'"format":1', b'"format":2', "invalid enum value 2 - at `$.format`"),
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
        self._expect(
            store, HEADER_LINE.replace(before, after) + MESSAGE_LINE, SessionCorrupt, expected
        )

    def test_a_broken_schedule_line_is_a_schedule_error(self, store: JsonlSessionStore) -> None:
        self._expect(
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

        real_write = os.write

        def short(fd: int, data: bytes) -> int:
            return real_write(fd, data[:-10])

        monkeypatch.setattr(os, "write", short)
        with pytest.raises(PersistenceUncertain) as caught:
            handle.append("message", turn(1))
        monkeypatch.undo()
        assert caught.value.message == (
            f"session {SID} cannot confirm that its entries are durable (writing entry 1 "
            f"failed: [Errno 5] short write ({len(MESSAGE_LINE) - 10} of {len(MESSAGE_LINE)} "
            "bytes)); reopen the session from storage"
        )
        await handle.close()
        assert not store.path_of(SID).read_bytes().endswith(b"\n")
        async with await store.open(SID) as reopened:
            assert payloads(reopened.entries) == [("message", turn(0))]
        assert store.path_of(SID).read_bytes() == HEADER_LINE + MESSAGE_LINE

    @contract_test
    async def test_a_failing_fsync_while_cutting_a_torn_tail(
        self, store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        write_session(store, GOOD[:-5])
        monkeypatch.setattr(
            os, "fsync", one_shot(os.fsync, OSError(errno.EIO, "Input/output error"))
        )
        with pytest.raises(PersistenceUncertain, match="cutting the torn last line failed"):
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
        assert list(store.data_dir.iterdir()) == []
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

        async with await store.create(now=NOW) as handle:
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
        assert all(name.startswith("session-jsonl") for name in threads)
        assert threading.current_thread().name not in threads
