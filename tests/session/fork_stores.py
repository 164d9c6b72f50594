"""The database stores (SQLite, PostgreSQL) as the fork tests see them: the store and what a test
does behind its back, in that store's own tables (:class:`ForkedStore`).

A test that holds for both stores takes the ``forked`` fixture of
:mod:`tests.session.test_database_forks`, which runs it once on each; the PostgreSQL run needs
``$SESSION_SCHEDULE_PG_DSN`` (see :mod:`tests.postgres`)."""

from __future__ import annotations

import abc
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psycopg
import pytest

from session_schedule.session import SessionId, SqliteSessionStore, checkpoint
from session_schedule.session import sqlite as sqlite_module
from session_schedule.session.checkpoint import CheckpointFile
from session_schedule.session.errors import SessionError
from session_schedule.session.postgres import PostgresSessionStore
from tests.postgres import execute, migrated_schema, server_dsn
from tests.session.database_forks import Tables, assert_fork_is_sound, decode_checkpoint

STORES: Final = ("sqlite", "postgres")
"""The kinds of database store, as :func:`forked_store` names them."""

_SESSION_TABLES: Final = (
    ("sessions", "id"),
    ("entries", "session_id"),
    ("checkpoints", "session_id"),
    ("next_targets", "session_id"),
)
"""Each table of both stores that holds rows of a session, and its column naming the session."""


class ForkedStore(abc.ABC):
    """A database store under test, with what a test reads and does in its tables directly.

    The SQL here runs on both stores: ``{}`` stands before each table's name (for PostgreSQL's
    schema), ``?`` for each parameter."""

    store: SqliteSessionStore | PostgresSessionStore
    session_tables: tuple[tuple[str, str], ...] = _SESSION_TABLES
    """Each table holding rows of a session, and its column naming the session."""

    @property
    @abc.abstractmethod
    def where(self) -> str:
        """How the store's errors name where the sessions are stored."""

    @property
    @abc.abstractmethod
    def whole_fork(self) -> list[str]:
        """The tables (sorted) holding rows of a fork once it is made."""

    @abc.abstractmethod
    def fail_in_fork_transaction(self, patch: pytest.MonkeyPatch) -> tuple[type[Exception], str]:
        """Make a fork fail once its rows are copied, before it commits; what it then raises
        (the exception's type, and a pattern of its message)."""

    @abc.abstractmethod
    def arguments(self) -> list[str]:
        """How another process opens the store: ``sqlite PATH`` or ``postgres DSN SCHEMA``."""

    @abc.abstractmethod
    def query(self, statement: str, *parameters: object) -> list[tuple[object, ...]]:
        """Run ``statement`` in a transaction of its own; its rows (none for a command)."""

    def rows_of(self, session: SessionId) -> list[tuple[object, ...]]:
        """The session's rows (position, type, data) as stored, in order."""
        return self.query(
            "SELECT position, type, data FROM {}entries WHERE session_id = ? ORDER BY position",
            session,
        )

    def checkpoint_of(self, session: SessionId) -> CheckpointFile | None:
        """The session's stored checkpoint, if any."""
        rows = self.query("SELECT data FROM {}checkpoints WHERE session_id = ?", session)
        if not rows:
            return None
        data = rows[0][0]
        assert isinstance(data, bytes)
        return decode_checkpoint(data)

    def header_of(self, session: SessionId) -> bytes:
        """The session's stored header."""
        ((header,),) = self.query("SELECT header FROM {}sessions WHERE id = ?", session)
        assert isinstance(header, bytes)
        return header

    def entry_of(self, session: SessionId, position: int) -> tuple[str, bytes]:
        """The type and data stored for the session's entry ``position``."""
        ((entry_type, data),) = self.query(
            "SELECT type, data FROM {}entries WHERE session_id = ? AND position = ?",
            session,
            position,
        )
        if isinstance(entry_type, bytes):  # SQLite's text, read as bytes
            entry_type = entry_type.decode()
        assert isinstance(entry_type, str)
        assert isinstance(data, bytes)
        return entry_type, data

    def stored_anywhere(self, session: SessionId) -> list[str]:
        """The tables holding a row of ``session``, in :attr:`session_tables` order."""
        return [
            table
            for table, column in self.session_tables
            if self.query(f"SELECT 1 FROM {{}}{table} WHERE {column} = ?", session)
        ]

    def store_checkpoint(self, session: SessionId, data: bytes | None) -> None:
        """Replace the session's stored checkpoint with ``data`` (``None``: delete it)."""
        if data is None:
            self.query("DELETE FROM {}checkpoints WHERE session_id = ?", session)
        else:
            self.query("UPDATE {}checkpoints SET data = ? WHERE session_id = ?", data, session)

    def delete_entry(self, session: SessionId, position: int) -> None:
        self.query("DELETE FROM {}entries WHERE session_id = ? AND position = ?", session, position)

    def set_entry_type(self, session: SessionId, position: int, entry_type: str) -> None:
        self.query(
            "UPDATE {}entries SET type = ? WHERE session_id = ? AND position = ?",
            entry_type,
            session,
            position,
        )

    async def assert_sound_fork(
        self,
        fork: SessionId,
        inherited: list[tuple[str, object]],
        highest: int,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """:func:`tests.session.database_forks.assert_sound_fork` on this store."""
        await assert_fork_is_sound(
            self.store, self.rows_of, self.checkpoint_of, fork, inherited, highest, monkeypatch
        )


@contextlib.contextmanager
def connect(store: SqliteSessionStore) -> Iterator[sqlite3.Connection]:
    """A connection of its own to a SQLite store's database, reading text as bytes."""
    with contextlib.closing(sqlite3.connect(store.path, isolation_level=None)) as connection:
        connection.text_factory = bytes
        yield connection


@dataclass(frozen=True)
class SqliteForks(ForkedStore):
    """A SQLite store as a :class:`ForkedStore`."""

    store: SqliteSessionStore

    @property
    def where(self) -> str:
        return self.store.path.name

    @property
    def whole_fork(self) -> list[str]:
        return ["checkpoints", "entries", "sessions"]

    def fail_in_fork_transaction(self, patch: pytest.MonkeyPatch) -> tuple[type[Exception], str]:
        def failing(*args: object) -> bool:
            raise sqlite3.OperationalError("disk I/O error")

        patch.setattr(sqlite_module, "_write_checkpoint", failing)
        # The store reports a failing database as a storage failure, its cause in the message.
        return SessionError, r"cannot be used \(disk I/O error\)"

    def arguments(self) -> list[str]:
        return ["sqlite", str(self.store.path)]

    def query(self, statement: str, *parameters: object) -> list[tuple[object, ...]]:
        with connect(self.store) as connection:
            return connection.execute(statement.format(""), parameters).fetchall()


SQLITE_TABLES: Final[Tables[SqliteSessionStore]] = (
    lambda store, session: SqliteForks(store).rows_of(session),
    lambda store, session: SqliteForks(store).checkpoint_of(session),
)
"""A SQLite store's tables as :func:`tests.session.database_forks.assert_sound_fork` reads them."""


@dataclass(frozen=True)
class PostgresForks(ForkedStore):
    """A PostgreSQL store (on the test server, in a schema of its own) as a :class:`ForkedStore`."""

    store: PostgresSessionStore
    dsn: str
    session_tables = (*_SESSION_TABLES, ("leases", "session_id"))

    @property
    def where(self) -> str:
        database = psycopg.conninfo.conninfo_to_dict(self.dsn)["dbname"]
        return f"schema {self.store.schema} of PostgreSQL database {database}"

    @property
    def whole_fork(self) -> list[str]:
        return ["checkpoints", "entries", "leases", "next_targets", "sessions"]

    def fail_in_fork_transaction(self, patch: pytest.MonkeyPatch) -> tuple[type[Exception], str]:
        def failing(content: object, *, chain: int | None = None) -> bytes:
            raise RuntimeError("the checkpoint could not be sealed")

        patch.setattr(checkpoint, "seal", failing)
        return RuntimeError, "could not be sealed"

    def arguments(self) -> list[str]:
        return ["postgres", self.dsn, self.store.schema]

    def query(self, statement: str, *parameters: object) -> list[tuple[object, ...]]:
        prefixed = statement.format(f"{self.store.schema}.").replace("?", "%s")
        return execute(self.dsn, prefixed, *parameters)


@contextlib.asynccontextmanager
async def forked_store(kind: str, directory: Path) -> AsyncIterator[ForkedStore]:
    """A new, empty store of ``kind`` (one of :data:`STORES`): SQLite in ``directory``,
    PostgreSQL in a fresh schema of the test server, dropped afterwards."""
    if kind == "sqlite":
        yield SqliteForks(SqliteSessionStore(directory / "sessions.db"))
        return
    assert kind == "postgres", kind
    dsn = server_dsn()
    with migrated_schema(dsn) as schema:
        async with PostgresSessionStore(dsn, schema=schema) as store:
            yield PostgresForks(store, dsn)
