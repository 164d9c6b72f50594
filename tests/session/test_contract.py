"""The session contract suite, run against the three backends."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path

import pytest

from session_schedule.session import (
    JsonlSessionStore,
    MemorySessionStore,
    SessionHandle,
    SessionId,
    SessionStore,
    SqliteSessionStore,
)
from session_schedule.testing.session_contract import SessionStoreContract
from tests.session.faults import one_shot, take_next_position

_MEMORY_STORES: dict[Path, MemorySessionStore] = {}


class TestMemoryStore(SessionStoreContract):
    def make_store(self, root: Path) -> SessionStore:
        return _MEMORY_STORES.setdefault(root, MemorySessionStore())

    def break_next_barrier(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        assert isinstance(store, MemorySessionStore)
        store.fail_next_barrier()

    def break_next_write(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        assert isinstance(store, MemorySessionStore)
        store.fail_next_write()


class TestJsonlStore(SessionStoreContract):
    header_format = 2
    checkpoints = True
    checkpoints_while_open = True

    def read_checkpoint(self, store: SessionStore, session_id: SessionId) -> bytes | None:
        assert isinstance(store, JsonlSessionStore)
        path = store.checkpoint_path(session_id)
        return path.read_bytes() if path.exists() else None

    def write_checkpoint(
        self, store: SessionStore, session_id: SessionId, data: bytes | None
    ) -> None:
        assert isinstance(store, JsonlSessionStore)
        path = store.checkpoint_path(session_id)
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(data)

    def corrupt_entry(self, store: SessionStore, session_id: SessionId, position: int) -> str:
        pytest.skip("tests/session/test_checkpoint.py alters a JSONL log before its checkpoint")

    def make_store(self, root: Path) -> SessionStore:
        return JsonlSessionStore(root / "sessions")

    def break_next_barrier(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(
            os, "fsync", one_shot(os.fsync, OSError(errno.EIO, "Input/output error"))
        )

    def break_next_write(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(
            os,
            "write",
            one_shot(
                os.write,
                OSError(errno.ENOSPC, "No space left on device"),
                # An entry line, maybe after the commit record of the barrier before it.
                when=lambda fd, data: b'{"seq":' in bytes(data),
            ),
        )


class TestJsonlStoreFlushingOnItsThread(TestJsonlStore):
    """Every flush on the session's thread, lone barriers included."""

    def make_store(self, root: Path) -> SessionStore:
        return JsonlSessionStore(root / "sessions", flush_on_loop=False)


class TestSqliteStore(SessionStoreContract):
    checkpoints = True
    checkpoints_while_open = True

    def make_store(self, root: Path) -> SessionStore:
        return SqliteSessionStore(root / "db" / "sessions.db")

    def read_checkpoint(self, store: SessionStore, session_id: SessionId) -> bytes | None:
        assert isinstance(store, SqliteSessionStore)
        with contextlib.closing(sqlite3.connect(store.path)) as connection:
            row = connection.execute(
                "SELECT data FROM checkpoints WHERE session_id = ?", (session_id,)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def write_checkpoint(
        self, store: SessionStore, session_id: SessionId, data: bytes | None
    ) -> None:
        assert isinstance(store, SqliteSessionStore)
        with contextlib.closing(sqlite3.connect(store.path)) as connection, connection:
            connection.execute("DELETE FROM checkpoints WHERE session_id = ?", (session_id,))
            if data is not None:
                connection.execute(
                    "INSERT INTO checkpoints (session_id, data) VALUES (?, ?)", (session_id, data)
                )

    def corrupt_entry(self, store: SessionStore, session_id: SessionId, position: int) -> str:
        assert isinstance(store, SqliteSessionStore)
        with contextlib.closing(sqlite3.connect(store.path)) as connection, connection:
            connection.execute(
                "UPDATE entries SET type = 'calendar/event' WHERE session_id = ? AND position = ?",
                (session_id, position),
            )
        return (
            f"session {session_id} is corrupt at entry {position} (sessions.db): unknown entry "
            "type 'calendar/event'; the database was left untouched for inspection"
        )

    def break_next_barrier(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        assert isinstance(store, SqliteSessionStore)
        take_next_position(store, handle)

    def break_next_write(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # A database append only queues the row: the failure surfaces at the barrier.
        assert isinstance(store, SqliteSessionStore)
        take_next_position(store, handle)
