"""Forks of SQLite sessions, what only SQLite lets a test do: a crash before any statement of a
fork. What holds for every database store is in :mod:`tests.session.test_database_forks`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Final

import pytest

from session_schedule.session import SessionId, SqliteSessionStore
from session_schedule.session import sqlite as sqlite_module
from tests.session import fork_stores
from tests.session.database_forks import FORK, SID, assert_sound_fork, full_read, write_history

# How the SQLite fork tests reach the store's tables (the power-cut ones too).
TABLES: Final = fork_stores.SQLITE_TABLES
connect = fork_stores.connect


def stored_anywhere(store: SqliteSessionStore, session: SessionId) -> list[str]:
    """The tables holding a row of ``session``."""
    return fork_stores.SqliteForks(store).stored_anywhere(session)


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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteSessionStore(tmp_path / "sessions.db")
    await write_history(store)
    parent = await full_read(store)
    whole = crash_fork(store, 0)  # never killed: how many statements the fork runs
    assert whole.returncode == 0, whole.stderr
    statements = int(whole.stdout)
    await assert_sound_fork(store, TABLES, FORK, parent, 60, monkeypatch)
    outcomes = set()
    for kill_at in range(1, statements + 2):
        with connect(store) as connection:
            connection.execute("DELETE FROM checkpoints WHERE session_id = ?", (FORK,))
            connection.execute("DELETE FROM entries WHERE session_id = ?", (FORK,))
            connection.execute("DELETE FROM sessions WHERE id = ?", (FORK,))
        crashed = crash_fork(store, kill_at)
        assert crashed.returncode == 9, crashed.stderr
        kept = stored_anywhere(store, FORK)
        if kept:
            assert kept == ["sessions", "entries", "checkpoints"]
            await assert_sound_fork(store, TABLES, FORK, parent, 60, monkeypatch)
        outcomes.add(tuple(kept))
        assert await full_read(store) == parent
    assert outcomes == {(), ("sessions", "entries", "checkpoints")}
