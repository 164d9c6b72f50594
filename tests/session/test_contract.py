"""The session contract suite, run against the three backends."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from session_schedule.session import (
    JsonlSessionStore,
    MemorySessionStore,
    SessionHandle,
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
    def make_store(self, root: Path) -> SessionStore:
        return SqliteSessionStore(root / "db" / "sessions.db")

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
