"""The SQLite store beyond the contract: schema, modes, threads, corruption, ownership."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import final

import pytest

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.session import (
    DueSession,
    PersistenceUncertain,
    SessionCorrupt,
    SessionError,
    SessionExists,
    SessionId,
    SessionNotFound,
    SqliteSessionStore,
    checkpoint,
)
from session_schedule.session import sqlite as sqlite_module
from session_schedule.testing.session_contract import (
    NOW,
    contract_test,
    payloads,
    schedule_create,
    turn,
)

SID = SessionId("s_aaaaaaaaaaaa")
UNTOUCHED = "; the database was left untouched for inspection"


@pytest.fixture
def store(tmp_path: Path) -> SqliteSessionStore:
    return SqliteSessionStore(tmp_path / "sessions.db")


@contextlib.contextmanager
def connect(store: SqliteSessionStore) -> Iterator[sqlite3.Connection]:
    with contextlib.closing(sqlite3.connect(store.path, isolation_level=None)) as connection:
        yield connection


def dump(store: SqliteSessionStore) -> list[tuple[object, ...]]:
    with connect(store) as connection:
        connection.text_factory = bytes
        sessions = connection.execute("SELECT * FROM sessions ORDER BY id").fetchall()
        entries = connection.execute("SELECT * FROM entries ORDER BY 1, 2").fetchall()
    return sessions + entries


async def make_good_session(store: SqliteSessionStore) -> None:
    async with await store.create(now=NOW, session_id=SID) as handle:
        handle.append("message", turn(0))
        handle.append("schedule/change", schedule_create(1))
        await handle.barrier()


class TestStorage:
    @contract_test
    async def test_schema_modes_and_permissions(self, store: SqliteSessionStore) -> None:
        async with await store.create(now=NOW, session_id=SID) as handle:
            handle.append("message", turn(0))
            await handle.barrier()
            assert stat.S_IMODE(Path(f"{store.path}-wal").stat().st_mode) == 0o600
            with connect(store) as connection:
                assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
                assert connection.execute("PRAGMA user_version").fetchone() == (3,)
                rows = connection.execute("SELECT * FROM entries").fetchall()
                header = connection.execute("SELECT header FROM sessions").fetchone()[0]
        assert rows == [
            (
                SID,
                0,
                "message",
                '{"role":"user","content":"turn 0","at":"2026-05-01T09:00:00.000Z",'
                '"origin":"person"}',
            )
        ]
        assert header == (
            '{"format":1,"id":"s_aaaaaaaaaaaa","createdAt":"2026-05-01T09:00:00.000Z",'
            '"parentId":null,"seedLength":0}'
        )
        assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(store.locks_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE((store.locks_dir / "owners").stat().st_mode) == 0o600

    @contract_test
    async def test_commits_run_off_the_loop_on_the_stores_commit_lane(
        self, store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        threads: list[str] = []
        real_insert = sqlite_module._insert

        def recording(
            connection: sqlite3.Connection,
            rows: list[sqlite_module.Row],
            index: tuple[SessionId, Instant | None] | None,
        ) -> None:
            threads.append(threading.current_thread().name)
            real_insert(connection, rows, index)

        monkeypatch.setattr(sqlite_module, "_insert", recording)
        async with await store.create(now=NOW) as handle:
            for number in range(100):
                handle.append("message", turn(number))
            await handle.barrier()
            await asyncio.gather(*(handle.barrier() for _ in range(5)))
            assert handle.flush_count == 1
        assert len(threads) == 1
        assert threads[0].startswith("session-worker-")

    @contract_test
    async def test_commits_are_synced_and_checkpoints_are_not(
        self, store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        seen: list[tuple[str, int, int]] = []
        real_insert, real_checkpoint = sqlite_module._insert, sqlite_module._write_checkpoint

        def synchronous(connection: sqlite3.Connection) -> int:
            value: int = connection.execute("PRAGMA synchronous").fetchone()[0]
            return value

        def insert(
            connection: sqlite3.Connection,
            rows: list[sqlite_module.Row],
            index: tuple[SessionId, Instant | None] | None,
        ) -> None:
            seen.append(("commit", synchronous(connection), store._lane.transactions))
            real_insert(connection, rows, index)

        def write_checkpoint(
            connection: sqlite3.Connection,
            session_id: SessionId,
            content: checkpoint.CheckpointFile,
        ) -> bool:
            seen.append(("checkpoint", synchronous(connection), store._lane.transactions))
            return real_checkpoint(connection, session_id, content)

        monkeypatch.setattr(sqlite_module, "_insert", insert)
        monkeypatch.setattr(sqlite_module, "_write_checkpoint", write_checkpoint)
        async with await store.create(now=NOW) as handle:
            for number in range(1100):  # past a checkpoint's 1,024 entries
                handle.append("message", turn(number))
            await handle.barrier()
            handle.append("message", turn(1100))
            await handle.barrier()
        full, normal = 2, 1
        assert [value for kind, value, _ in seen if kind == "commit"] == [full, full]
        # A checkpoint is synced only in a transaction it shares with a barrier's commit.
        synced = {number for kind, _, number in seen if kind == "commit"}
        checkpoints = [(value, number) for kind, value, number in seen if kind == "checkpoint"]
        assert len(checkpoints) == 2
        for value, number in checkpoints:
            assert value == (full if number in synced else normal)

    @contract_test
    async def test_reading_a_missing_database_creates_nothing(
        self, store: SqliteSessionStore
    ) -> None:
        assert await store.list() == ()
        with pytest.raises(SessionNotFound):
            await store.read(SID)
        with pytest.raises(SessionNotFound):
            await store.open(SID)
        with pytest.raises(SessionNotFound):
            await store.fork(SID, now=NOW)
        assert not store.path.exists()
        store.path.touch()
        assert await store.list() == ()
        with pytest.raises(SessionNotFound):
            await store.read(SID)

    @contract_test
    async def test_another_schema_version_is_refused(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        with connect(store) as connection:
            connection.execute("PRAGMA user_version = 7")
        message = (
            f"database {store.path} has schema version 7, but this program reads version 3; "
            "upgrade the program"
        )
        for attempt in (store.list(), store.read(SID), store.open(SID)):
            with pytest.raises(SessionError) as caught:
                await attempt
            assert caught.value.message == message

    @contract_test
    async def test_a_version_1_database_gets_its_next_target_index(
        self, store: SqliteSessionStore
    ) -> None:
        await make_good_session(store)
        async with await store.create(now=NOW) as quiet:
            quiet.append("message", turn(1))
            await quiet.barrier()
        async with await store.create(now=NOW) as damaged:
            damaged.append("schedule/change", schedule_create(2))
            await damaged.barrier()
        with connect(store) as connection:
            connection.execute("DROP TABLE next_targets")
            connection.execute("DROP TABLE checkpoints")
            connection.execute("UPDATE entries SET data = 'x' WHERE session_id = ?", (damaged.id,))
            connection.execute("PRAGMA user_version = 1")
        target = parse_instant("2030-01-01T00:00:00.000Z")
        assert await store.due_sessions(Instant(target + 1)) == (DueSession(SID, target),)
        with connect(store) as connection:
            assert connection.execute("PRAGMA user_version").fetchone() == (3,)
            assert sorted(connection.execute("SELECT * FROM next_targets").fetchall()) == sorted(
                [(SID, target), (quiet.id, None)]
            )

    @contract_test
    async def test_a_version_2_database_gets_its_checkpoints_table(
        self, store: SqliteSessionStore
    ) -> None:
        await make_good_session(store)
        with connect(store) as connection:
            connection.execute("DROP TABLE checkpoints")
            connection.execute("PRAGMA user_version = 2")
        async with await store.open(SID) as handle:
            assert handle.resume is None
            expected = payloads(handle.entries)
        with connect(store) as connection:
            assert connection.execute("PRAGMA user_version").fetchone() == (3,)
            assert connection.execute("SELECT session_id FROM checkpoints").fetchall() == [(SID,)]
        async with await store.open(SID) as handle:
            assert handle.resume is not None
            assert payloads(handle.entries) == expected

    @contract_test
    async def test_another_process_is_refused(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        script = (
            "import asyncio, sys\n"
            "from pathlib import Path\n"
            "from session_schedule.session import SqliteSessionStore, SessionBusy\n"
            "try:\n"
            "    asyncio.run(SqliteSessionStore(Path(sys.argv[1])).open(sys.argv[2]))\n"
            "except SessionBusy as error:\n"
            "    print(error.message)\n"
        )
        async with await store.open(SID):
            result = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-c", script, str(store.path), SID],
                capture_output=True,
                check=True,
                text=True,
            )
        assert result.stdout.startswith(f"session {SID} is open in another process or handle")

    @contract_test
    async def test_a_taken_position_stops_the_barrier_and_nothing_interleaves(
        self, store: SqliteSessionStore
    ) -> None:
        # Two writers on one session (if ownership were bypassed) cannot interleave: the
        # primary key refuses the second commit, and that handle is poisoned.
        handle = await store.create(now=NOW, session_id=SID)
        handle.append("message", turn(0))
        await handle.barrier()
        with connect(store) as connection:
            connection.execute(
                "INSERT INTO entries SELECT session_id, 1, type, data FROM entries"
                " WHERE position = 0"
            )
        handle.append("message", turn(1))
        handle.append("message", turn(2))
        with pytest.raises(PersistenceUncertain, match="UNIQUE constraint failed"):
            await handle.barrier()
        await handle.close()
        snapshot = await store.read(SID)
        assert payloads(snapshot.entries) == [("message", turn(0)), ("message", turn(0))]

    @contract_test
    async def test_ids_taken_meanwhile_are_never_reused(
        self, store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Another process may take an id between the existence check and the insert.
        await make_good_session(store)
        monkeypatch.setattr(sqlite_module, "_exists", lambda connection, session_id: False)
        with pytest.raises(SessionExists):
            await store.create(now=NOW, session_id=SID)
        fresh = iter([SID, SessionId("s_bbbbbbbbbbbb")])
        monkeypatch.setattr(sqlite_module, "new_session_id", lambda: next(fresh))
        async with await store.create(now=NOW) as handle:
            assert handle.id == "s_bbbbbbbbbbbb"
        monkeypatch.undo()
        fresh = iter([SID, SessionId("s_cccccccccccc")])
        monkeypatch.setattr(sqlite_module, "new_session_id", lambda: next(fresh))
        async with await store.create(now=NOW) as handle:
            assert handle.id == "s_cccccccccccc"
        assert len(await store.list()) == 3

    @contract_test
    async def test_a_cancelled_open_leaks_no_ownership(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        opening = asyncio.ensure_future(store.open(SID))
        await asyncio.sleep(0)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        for _ in range(200):
            try:
                handle = await store.open(SID)
            except SessionError:
                await asyncio.sleep(0.005)
            else:
                await handle.close()
                return
        pytest.fail("the cancelled open kept the session")


class TestCorruption:
    async def _expect(
        self, store: SqliteSessionStore, error: type[Exception], message: str
    ) -> None:
        before = dump(store)
        for attempt in (store.open, store.read, lambda sid: store.fork(sid, at=0, now=NOW)):
            with pytest.raises(error) as caught:
                await attempt(SID)
            assert str(caught.value) == message
        assert dump(store) == before

    def _execute(self, store: SqliteSessionStore, statement: str, *parameters: object) -> None:
        with connect(store) as connection:
            connection.execute(statement, parameters)

    @contract_test
    async def test_a_bad_schedule_row(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(
            store, "UPDATE entries SET data = replace(data, '\"version\":1', '\"version\":2')"
        )
        await self._expect(
            store,
            ScheduleError,
            f"corrupt_schedule_log: schedule/change at entry 1 of session {SID} "
            "(sessions.db) is corrupt: an `at` schedule must be created with version 1, not 2 "
            "- at `$.version`",
        )

    @contract_test
    async def test_an_unknown_type(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(store, "UPDATE entries SET type = 'calendar/event' WHERE position = 0")
        await self._expect(
            store,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (sessions.db): "
            f"unknown entry type 'calendar/event'{UNTOUCHED}",
        )

    @contract_test
    async def test_a_missing_position(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(store, "DELETE FROM entries WHERE position = 0")
        await self._expect(
            store,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (sessions.db): "
            f"the entry is missing (the next stored is 1){UNTOUCHED}",
        )

    @contract_test
    async def test_data_that_is_not_text(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(store, "UPDATE entries SET data = 42 WHERE position = 0")
        await self._expect(
            store,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (sessions.db): invalid message payload: "
            f"expected `object`, got `int`{UNTOUCHED}",
        )

    @contract_test
    async def test_a_type_that_is_not_utf8(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(store, "UPDATE entries SET type = CAST(X'E1' AS TEXT) WHERE position = 0")
        await self._expect(
            store,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (sessions.db): the entry type is not UTF-8 "
            "text ('utf-8' codec can't decode byte 0xe1 in position 0: unexpected end of data)"
            f"{UNTOUCHED}",
        )

    @contract_test
    async def test_a_bad_header(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(
            store, "UPDATE sessions SET header = replace(header, 'Length\":0', 'Length\":5')"
        )
        await self._expect(
            store,
            SessionCorrupt,
            f"session {SID} is corrupt at its header (sessions.db): "
            f"seedLength is 5 but the session has 2 entries{UNTOUCHED}",
        )
        self._execute(store, "UPDATE sessions SET header = '{}'")
        with pytest.raises(SessionCorrupt) as caught:
            await store.list()
        assert caught.value.message == (
            f"session {SID} is corrupt at its header (sessions.db): "
            f"object missing required field `format`{UNTOUCHED}"
        )
        headers, problems = await store.scan()
        assert headers == ()
        assert [problem.message for problem in problems] == [caught.value.message]

    @contract_test
    async def test_a_repeated_key_in_a_schedule_row(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(
            store,
            'UPDATE entries SET data = \'{"operation":"delete","version":1,"id":"sch_9",'
            '"id":"sch_1"}\' WHERE position = 1',
        )
        await self._expect(
            store,
            ScheduleError,
            f"corrupt_schedule_log: schedule/change at entry 1 of session {SID} "
            "(sessions.db) is corrupt: the key `id` appears more than once - at `$`",
        )

    @contract_test
    async def test_a_repeated_key_in_the_header(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(
            store,
            "UPDATE sessions SET header = replace(header, '\"seedLength\":0', "
            '\'"seedLength":0,"seedLength":0\')',
        )
        await self._expect(
            store,
            SessionCorrupt,
            f"session {SID} is corrupt at its header (sessions.db): the key `seedLength` "
            f"appears more than once - at `$`{UNTOUCHED}",
        )

    @contract_test
    async def test_a_format_2_header_is_not_this_stores(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(
            store, "UPDATE sessions SET header = replace(header, 'format\":1', 'format\":2')"
        )
        await self._expect(
            store,
            SessionCorrupt,
            f"session {SID} is corrupt at its header (sessions.db): format 2 is not a format "
            f"of this store - at `$.format`{UNTOUCHED}",
        )

    @contract_test
    async def test_nesting_of_any_depth_is_corruption(self, store: SqliteSessionStore) -> None:
        await make_good_session(store)
        self._execute(
            store,
            "UPDATE entries SET data = ? WHERE position = 0",
            '{"role":"user","content":' + "[" * 50_000 + "]" * 50_000 + "}",
        )
        await self._expect(
            store,
            SessionCorrupt,
            f"session {SID} is corrupt at entry 0 (sessions.db): invalid message payload: "
            f"expected `str`, got `array` - at `$.content`{UNTOUCHED}",
        )
        self._execute(
            store, "UPDATE sessions SET header = ?", '{"format":' + "[" * 50_000 + "]" * 50_000
        )
        headers, problems = await store.scan()
        assert headers == ()
        assert [problem.message for problem in problems] == [
            f"session {SID} is corrupt at its header (sessions.db): expected `int`, got `array` "
            f"- at `$.format`{UNTOUCHED}"
        ]

    @contract_test
    async def test_a_row_edited_by_hand_under_a_checkpoint_is_found_by_check(
        self, store: SqliteSessionStore
    ) -> None:
        """Rows carry no checksum: a covered row other than the last, edited by hand, still
        decodes and leaves the checkpoint bound, so opening the session believes the
        checkpoint's reminders while every read shows the row's. ``check``'s reading compares
        the checkpoint with the fold of every row and says so."""
        async with await store.create(now=NOW, session_id=SID) as handle:
            handle.append("schedule/change", schedule_create(1))
            handle.append("schedule/change", schedule_create(2))
            handle.append("message", turn(2))
            await handle.barrier()
        sound = await store.checked_read(SID)
        assert (sound.snapshot, sound.problems) == (await store.read(SID), ())
        assert [record.prompt for record in sound.state.by_creation()] == [
            "reminder 1",
            "reminder 2",
        ]
        self._execute(
            store,
            "UPDATE entries SET data = replace(data, 'reminder 1', 'reminder X') "
            "WHERE position = 0",
        )
        async with await store.open(SID) as handle:
            assert handle.resume is not None
            assert [record.prompt for record in handle.resume.records] == [
                "reminder 1",
                "reminder 2",
            ]
            assert "reminder X" in str(handle.entries[0].payload)
        edited = await store.checked_read(SID)
        assert edited.snapshot == await store.read(SID)
        assert [record.prompt for record in edited.state.by_creation()] == [
            "reminder X",
            "reminder 2",
        ]
        assert edited.problems == (
            "its checkpoint (its row in the checkpoints table) is bound to its log but does not "
            "say what the log says (its active reminders are not the log's); delete the "
            f"checkpoint (DELETE FROM checkpoints WHERE session_id = '{SID}'; it is rebuilt from "
            "the log)",
        )
        self._execute(store, f"DELETE FROM checkpoints WHERE session_id = '{SID}'")
        assert (await store.checked_read(SID)).problems == ()
        async with await store.open(SID) as handle:
            assert handle.resume is None
        assert (await store.checked_read(SID)).problems == ()  # the new one says what the log says
        # An edit of the last covered row unbinds the checkpoint: it would not be used, so it is
        # no problem (the session opens from its rows).
        self._execute(
            store, "UPDATE entries SET data = replace(data, 'turn 2', 'turn X') WHERE position = 2"
        )
        assert (await store.checked_read(SID)).problems == ()
        async with await store.open(SID) as handle:
            assert handle.resume is None
        with pytest.raises(SessionNotFound):
            await store.checked_read(SessionId("s_bbbbbbbbbbbb"))


@pytest.mark.parametrize("kind", ["str", "pathlike"])
async def test_the_store_takes_its_path_as_a_string_or_a_path_like(
    tmp_path: Path, kind: str
) -> None:
    where = tmp_path / "sessions.db"
    given: str | _Where = str(where) if kind == "str" else _Where(str(where))
    store = SqliteSessionStore(given)
    assert store.path == where
    async with await store.create(now=NOW, session_id=SID):
        pass
    assert [header.id for header in await SqliteSessionStore(where).list()] == [SID]


@final
class _Where:
    """A path-like object that is not a ``Path``."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __fspath__(self) -> str:
        return self._path


async def test_closing_the_last_session_leaves_the_store_no_connection(tmp_path: Path) -> None:
    """Once the last open session's ``close`` has returned, the store holds no connection to
    the database: SQLite has folded its write-ahead log back into it, and the file may be
    copied, moved or removed at once."""
    where = tmp_path / "sessions.db"
    store = SqliteSessionStore(where)
    async with await store.create(now=NOW, session_id=SID) as first:
        async with await store.create(now=NOW, session_id=SessionId("s_bbbbbbbbbbbb")) as second:
            second.append("message", turn(1))
            await second.barrier()
        # Another session is still open: the store's connections stay.
        assert Path(f"{where}-wal").exists()
        first.append("message", turn(2))
        await first.barrier()
    assert not Path(f"{where}-wal").exists()
    assert not Path(f"{where}-shm").exists()
    snapshot = await store.read(SID)
    assert payloads(snapshot.entries) == [("message", turn(2))]


def damage_page(store: SqliteSessionStore, name: str, count: int | None = None) -> None:
    """XOR the last ``count`` bytes (all, when ``None``) of the root page of table or index
    ``name`` in the database file, as a disk that returns wrong bytes would leave them."""
    with connect(store) as connection:
        found = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,))
        root = found.fetchone()[0]
        size = connection.execute("PRAGMA page_size").fetchone()[0]
    length = size if count is None else count
    with store.path.open("r+b") as file:
        file.seek(root * size - length)
        damaged = bytes(byte ^ 0x55 for byte in file.read(length))
        file.seek(root * size - length)
        file.write(damaged)


def recover_advice(store: SqliteSessionStore) -> str:
    return (
        f"; it was left untouched for inspection — recover what it holds with "
        f"`sqlite3 {store.path} .recover`, or restore it from a backup"
    )


class TestDamagedDatabase:
    """Damage SQLite itself finds in the file is ``SessionCorrupt``, any other failure of the
    database a ``SessionError``: never a bare ``sqlite3`` error."""

    @contract_test
    async def test_a_truncated_database_is_corrupt_for_every_use(
        self, store: SqliteSessionStore
    ) -> None:
        await make_good_session(store)
        with store.path.open("r+b") as file:
            file.truncate(8192)
        damaged = f"the SQLite database {store.path} is damaged (database disk image is malformed)"
        for attempt in (store.open, store.read, lambda sid: store.fork(sid, at=0, now=NOW)):
            with pytest.raises(SessionCorrupt) as caught:
                await attempt(SID)
            assert str(caught.value) == f"session {SID} cannot be read: {damaged}" + (
                recover_advice(store)
            )
        for listing in (store.scan, store.list, lambda: store.due_sessions(NOW)):
            with pytest.raises(SessionCorrupt) as caught:
                await listing()
            assert str(caught.value) == damaged + recover_advice(store)
        other = SessionId("s_bbbbbbbbbbbb")
        with pytest.raises(SessionCorrupt) as caught:
            await store.create(now=NOW, session_id=other)
        assert str(caught.value) == f"session {other} cannot be read: {damaged}" + (
            recover_advice(store)
        )

    @contract_test
    async def test_a_file_that_is_not_a_database(self, store: SqliteSessionStore) -> None:
        store.path.write_bytes(b"not a database, but long enough to hold its header. " * 100)
        with pytest.raises(SessionCorrupt) as caught:
            await store.open(SID)
        assert str(caught.value) == (
            f"session {SID} cannot be read: the SQLite database {store.path} is damaged (SQLite "
            "does not take it for a database: its first page is damaged, or it is another kind "
            f"of file){recover_advice(store)}"
        )

    @pytest.mark.parametrize("table", ["checkpoints", "next_targets_by_target"])
    @contract_test
    async def test_unreadable_pages_of_derived_data_are_reported_not_skipped(
        self, store: SqliteSessionStore, table: str
    ) -> None:
        await make_good_session(store)
        damage_page(store, table)
        damaged = f"the SQLite database {store.path} is damaged (database disk image is malformed)"
        if table == "checkpoints":
            with pytest.raises(SessionCorrupt) as caught:
                await store.open(SID)
            assert str(caught.value) == f"session {SID} cannot be read: {damaged}" + (
                recover_advice(store)
            )
        else:
            with pytest.raises(SessionCorrupt) as caught:
                await store.due_sessions(parse_instant("2100-01-01T00:00:00.000Z"))
            assert str(caught.value) == damaged + recover_advice(store)

    @contract_test
    async def test_a_damaged_index_of_sessions_is_not_a_missing_session(
        self, store: SqliteSessionStore
    ) -> None:
        await make_good_session(store)
        # Cells that point past their page: a lookup finds nothing rather than failing.
        damage_page(store, "sqlite_autoindex_sessions_1", 64)
        for attempt in (store.open, store.read):
            with pytest.raises(SessionCorrupt) as caught:
                await attempt(SID)
            assert str(caught.value) == (
                f"session {SID} cannot be read: the SQLite database {store.path} is damaged (its "
                "table of sessions does not verify: On tree page 3 cell 0: Extends off end of "
                f"page){recover_advice(store)}"
            )

    @contract_test
    async def test_a_session_missing_from_a_sound_database_is_not_found(
        self, store: SqliteSessionStore
    ) -> None:
        await make_good_session(store)
        with pytest.raises(SessionNotFound):
            await store.open(SessionId("s_bbbbbbbbbbbb"))

    @contract_test
    async def test_a_directory_in_the_databases_place(self, tmp_path: Path) -> None:
        (tmp_path / "sessions.db").mkdir()
        store = SqliteSessionStore(tmp_path / "sessions.db")
        with pytest.raises(SessionError) as caught:
            await store.open(SID)
        assert type(caught.value) is SessionError
        assert str(caught.value) == (
            f"session {SID} is out of reach: the SQLite database {store.path} cannot be used "
            "(it is a directory, not a database file); check the file, its directory and the "
            "disk, then try again"
        )

    @contract_test
    async def test_a_failing_database_is_a_storage_failure(
        self, store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        await make_good_session(store)

        def failing(path: Path, *, create: bool) -> sqlite3.Connection:
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(sqlite_module, "_connect", failing)
        with pytest.raises(SessionError) as caught:
            await store.read(SID)
        assert type(caught.value) is SessionError
        assert str(caught.value) == (
            f"session {SID} is out of reach: the SQLite database {store.path} cannot be used "
            "(disk I/O error); check the file, its directory and the disk, then try again"
        )
        with pytest.raises(SessionError) as caught:
            await store.due_sessions(NOW)
        assert str(caught.value) == (
            f"the SQLite database {store.path} cannot be used (disk I/O error); check the file, "
            "its directory and the disk, then try again"
        )
