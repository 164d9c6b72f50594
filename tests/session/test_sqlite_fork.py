"""Forks of SQLite sessions: the prefix copied in SQL from the parent's checkpoint, the fork's own
checkpoint written in the same transaction as its rows, and a damaged parent reported."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from session_schedule.session import (
    SessionCorrupt,
    SessionExists,
    SessionId,
    SqliteSessionStore,
    checkpoint,
)
from session_schedule.session import sqlite as sqlite_module
from session_schedule.session.checkpoint import WINDOW, CheckpointFile, seal
from session_schedule.session.handle import LazyEntries
from session_schedule.testing.session_contract import NOW, payloads, turn
from tests.session.database_forks import (
    FORK,
    GRANDCHILD,
    SID,
    UNTOUCHED,
    Tables,
    assert_sound_fork,
    decode_checkpoint,
    decodes,
    full_read,
    max_id,
    write_history,
)
from tests.session.histories import append_history


@pytest.fixture
def store(tmp_path: Path) -> SqliteSessionStore:
    return SqliteSessionStore(tmp_path / "sessions.db")


@contextlib.contextmanager
def connect(store: SqliteSessionStore) -> Iterator[sqlite3.Connection]:
    with contextlib.closing(sqlite3.connect(store.path, isolation_level=None)) as connection:
        connection.text_factory = bytes
        yield connection


def rows_of(store: SqliteSessionStore, session: SessionId) -> list[tuple[object, ...]]:
    with connect(store) as connection:
        return connection.execute(
            "SELECT position, type, data FROM entries WHERE session_id = ? ORDER BY position",
            (session,),
        ).fetchall()


def checkpoint_of(store: SqliteSessionStore, session: SessionId) -> CheckpointFile | None:
    with connect(store) as connection:
        row = connection.execute(
            "SELECT data FROM checkpoints WHERE session_id = ?", (session,)
        ).fetchone()
    if row is None:
        return None
    return decode_checkpoint(bytes(row[0]))


def stored_anywhere(store: SqliteSessionStore, session: SessionId) -> list[str]:
    """The tables holding a row of ``session``."""
    with connect(store) as connection:
        return [
            table
            for table, column in (
                ("sessions", "id"),
                ("entries", "session_id"),
                ("checkpoints", "session_id"),
                ("next_targets", "session_id"),
            )
            if connection.execute(
                f"SELECT 1 FROM {table} WHERE {column} = ?", (session,)
            ).fetchone()
        ]


def execute(store: SqliteSessionStore, statement: str, *parameters: object) -> None:
    with connect(store) as connection:
        connection.execute(statement, parameters)


TABLES: Tables[SqliteSessionStore] = (rows_of, checkpoint_of)


async def test_a_fork_copies_the_rows_and_decodes_only_the_parents_window(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    parent = await full_read(store)
    found = checkpoint_of(store, SID)
    assert found is not None
    assert found.entries == len(parent) == 150
    with decodes(monkeypatch) as decoded:
        async with await store.fork(SID, now=NOW, session_id=FORK) as fork:
            assert fork.resume is not None
            assert (fork.resume.position, fork.resume.highest_id) == (150, 60)
            assert isinstance(fork._entries, LazyEntries)
            assert fork._entries.start == 150 - WINDOW
            assert payloads(fork.entries[150 - WINDOW :]) == parent[150 - WINDOW :]
    # The parent's window, checked as an open checks it; nothing before it.
    assert decoded == list(range(150 - WINDOW, 150))
    await assert_sound_fork(store, TABLES, FORK, parent, 60, monkeypatch)


async def test_a_fork_after_the_parents_checkpoint_decodes_only_the_rows_after_its_window(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    async with await store.open(SID) as parent:
        await append_history(parent, 61, 70)  # after the checkpoint, which stays where it was
        checkpointed = checkpoint_of(store, SID)
        assert checkpointed is not None
        assert checkpointed.entries == 150
        everything = payloads(parent.entries)
        for at in (150, 155, len(everything)):
            fork = SessionId(f"s_fork{at:08d}")
            with decodes(monkeypatch) as decoded:
                await (await store.fork(SID, at=at, now=NOW, session_id=fork)).close()
            assert decoded == list(range(150 - WINDOW, len(everything)))
            inherited = everything[:at]
            await assert_sound_fork(store, TABLES, fork, inherited, max_id(inherited), monkeypatch)


async def test_a_fork_before_the_parents_checkpoint_decodes_the_rows_before_the_fork_point(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    everything = await full_read(store)
    for at in (1, 20, 149):
        fork = SessionId(f"s_fork{at:08d}")
        with decodes(monkeypatch) as decoded:
            await (await store.fork(SID, at=at, now=NOW, session_id=fork)).close()
        assert decoded == [*range(150 - WINDOW, 150), *range(at)]
        inherited = everything[:at]
        await assert_sound_fork(store, TABLES, fork, inherited, max_id(inherited), monkeypatch)


async def test_a_fork_at_0_inherits_nothing_and_has_no_checkpoint(
    store: SqliteSessionStore,
) -> None:
    await write_history(store)
    async with await store.fork(SID, at=0, now=NOW, session_id=FORK) as fork:
        assert (fork.header.seed_length, fork.header.parent_id, fork.resume) == (0, SID, None)
    assert await full_read(store, FORK) == []
    assert stored_anywhere(store, FORK) == ["sessions"]


async def test_a_parent_without_a_checkpoint_is_decoded_once(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    execute(store, "DELETE FROM checkpoints")
    parent = await full_read(store)
    with decodes(monkeypatch) as decoded:
        await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    assert decoded == list(range(150))
    await assert_sound_fork(store, TABLES, FORK, parent, 60, monkeypatch)


async def test_a_forged_parent_checkpoint_is_not_copied_from(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    found = checkpoint_of(store, SID)
    assert found is not None
    # Bound to another entry 149 than the log's: ignored, the parent decoded whole.
    forged = seal(msgspec.structs.replace(found, chain=found.chain ^ 1))
    execute(store, "UPDATE checkpoints SET data = ? WHERE session_id = ?", forged, SID)
    with decodes(monkeypatch) as decoded:
        await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    assert decoded == list(range(150))
    await assert_sound_fork(store, TABLES, FORK, await full_read(store), 60, monkeypatch)


async def test_forks_of_forks(store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    await write_history(store)
    parent = await full_read(store)
    async with await store.fork(SID, now=NOW, session_id=FORK) as fork:
        fork.append("message", turn(500))
        await fork.barrier()
    child = await full_read(store, FORK)
    assert child == [*parent, ("message", turn(500))]
    # The child's checkpoint (written at its close) binds: the grandchild copies up to it.
    with decodes(monkeypatch) as decoded:
        async with await store.fork(FORK, now=NOW, session_id=GRANDCHILD) as grandchild:
            assert grandchild.header.seed_length == len(child)
    assert decoded == list(range(len(child) - WINDOW, len(child)))
    with connect(store) as connection:
        grand = connection.execute(
            "SELECT position, type, data FROM entries WHERE session_id = ? ORDER BY position",
            (GRANDCHILD,),
        ).fetchall()
    assert grand == rows_of(store, FORK)
    assert await full_read(store, GRANDCHILD) == child
    found = checkpoint_of(store, GRANDCHILD)
    assert found is not None
    assert found.entries == len(child)


async def test_a_parent_damaged_after_its_checkpoint_is_not_forked(
    store: SqliteSessionStore,
) -> None:
    await write_history(store)
    async with await store.open(SID) as parent:
        await append_history(parent, 61, 62)
        # Damage an acknowledged entry after the checkpoint.
        execute(
            store,
            "UPDATE entries SET type = 'calendar/event' WHERE session_id = ? AND position = ?",
            SID,
            152,
        )
        message = (
            f"session {SID} is corrupt at entry 152 (sessions.db): "
            f"unknown entry type 'calendar/event'{UNTOUCHED}"
        )
        with pytest.raises(SessionCorrupt) as caught:
            await store.fork(SID, now=NOW, session_id=FORK)
        assert str(caught.value) == message
    assert stored_anywhere(store, FORK) == []
    # What an open of the parent reports, word for word.
    with pytest.raises(SessionCorrupt) as opened:
        await store.open(SID)
    assert str(opened.value) == message


async def test_a_gap_before_the_parents_window_is_reported_not_forked(
    store: SqliteSessionStore,
) -> None:
    await write_history(store)
    execute(store, "DELETE FROM entries WHERE session_id = ? AND position = 10", SID)
    with pytest.raises(SessionCorrupt) as caught:
        await store.fork(SID, now=NOW, session_id=FORK)
    assert str(caught.value) == (
        f"session {SID} is corrupt at entry 10 (sessions.db): "
        f"the entry is missing (the next stored is 11){UNTOUCHED}"
    )
    assert stored_anywhere(store, FORK) == []
    # The same error a read of the parent gives.
    with pytest.raises(SessionCorrupt) as read:
        await store.read(SID)
    assert str(read.value) == str(caught.value)


async def test_a_fork_whose_name_is_taken_leaves_the_sessions_rows_and_checkpoint(
    store: SqliteSessionStore,
) -> None:
    await write_history(store)
    async with await store.create(now=NOW, session_id=FORK) as other:
        other.append("message", turn(1))
        await other.barrier()
    before = (rows_of(store, FORK), checkpoint_of(store, FORK))
    with pytest.raises(SessionExists):
        await store.fork(SID, now=NOW, session_id=FORK)
    assert (rows_of(store, FORK), checkpoint_of(store, FORK)) == before


async def test_a_fork_that_fails_mid_transaction_leaves_nothing_and_its_id_free(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    parent = await full_read(store)

    def failing(*args: object) -> bool:
        raise sqlite3.OperationalError("disk I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(sqlite_module, "_write_checkpoint", failing)
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            await store.fork(SID, now=NOW, session_id=FORK)
    assert stored_anywhere(store, FORK) == []
    # Not owned any more: the same fork succeeds.
    await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    await assert_sound_fork(store, TABLES, FORK, parent, 60, monkeypatch)


_CRASH = textwrap.dedent(
    """
    import asyncio, os, sys
    from session_schedule.core.instants import parse_instant
    from session_schedule.session import SqliteSessionStore
    from session_schedule.session import sqlite as module

    path, parent, fork, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    real = module._connect
    seen = []

    def connect(*args, **kwargs):
        connection = real(*args, **kwargs)

        def trace(statement):
            seen.append(statement)
            if len(seen) == kill_at:
                os._exit(9)  # a crash before this statement runs

        connection.set_trace_callback(trace)
        return connection

    module._connect = connect

    async def main():
        store = SqliteSessionStore(path)
        now = parse_instant("2026-05-01T09:00:00.000Z")
        handle = await store.fork(parent, now=now, session_id=fork)
        if kill_at > len(seen):
            os._exit(9)  # a crash once the fork is made
        await handle.close()

    asyncio.run(main())
    print(len(seen))
    """
)


def crash_fork(store: SqliteSessionStore, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CRASH, str(store.path), SID, FORK, str(kill_at)],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(Path(sqlite_module.__file__).parents[2])},
    )


async def test_a_crash_at_any_statement_of_a_fork_leaves_no_fork_or_a_whole_one(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    parent = await full_read(store)
    whole = crash_fork(store, 0)  # never killed: how many statements the fork runs
    assert whole.returncode == 0, whole.stderr
    statements = int(whole.stdout)
    await assert_sound_fork(store, TABLES, FORK, parent, 60, monkeypatch)
    outcomes = set()
    for kill_at in range(1, statements + 2):
        execute(store, "DELETE FROM checkpoints WHERE session_id = ?", FORK)
        execute(store, "DELETE FROM entries WHERE session_id = ?", FORK)
        execute(store, "DELETE FROM sessions WHERE id = ?", FORK)
        crashed = crash_fork(store, kill_at)
        assert crashed.returncode == 9, crashed.stderr
        kept = stored_anywhere(store, FORK)
        if kept:
            assert kept == ["sessions", "entries", "checkpoints"]
            await assert_sound_fork(store, TABLES, FORK, parent, 60, monkeypatch)
        outcomes.add(tuple(kept))
        assert await full_read(store) == parent
    assert outcomes == {(), ("sessions", "entries", "checkpoints")}


async def test_the_forks_checkpoint_is_bound_to_its_own_header(store: SqliteSessionStore) -> None:
    """What binds the fork's checkpoint is the fork's header and its entry ``n-1``."""
    await write_history(store)
    await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    found = checkpoint_of(store, FORK)
    assert found is not None
    with connect(store) as connection:
        header = connection.execute("SELECT header FROM sessions WHERE id = ?", (FORK,)).fetchone()
        last = connection.execute(
            "SELECT type, data FROM entries WHERE session_id = ? AND position = 149", (FORK,)
        ).fetchone()
    assert found.chain == checkpoint.row_digest(header[0], last[0].decode(), last[1])
