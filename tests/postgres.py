"""The PostgreSQL server the PostgreSQL tests use, and a fresh schema per test.

The server is ``$SESSION_SCHEDULE_PG_DSN``; without it, under CI (``$CI`` set) the local default
``postgresql://postgres@127.0.0.1:5432/test``, which must then be reachable: CI never skips these
tests. Elsewhere, without a DSN, they are skipped with a one-line reason.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
from collections.abc import Iterator
from typing import Final

import psycopg
import pytest
from psycopg import sql

from session_schedule.session.postgres_schema import migrate

DSN_VARIABLE: Final = "SESSION_SCHEDULE_PG_DSN"
CI_DEFAULT_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"


@functools.cache
def _server() -> tuple[str | None, str]:
    """The DSN to use, or ``None`` and why not; a DSN that was asked for must work."""
    dsn = os.environ.get(DSN_VARIABLE) or (CI_DEFAULT_DSN if os.environ.get("CI") else None)
    if dsn is None:
        return None, f"PostgreSQL tests need ${DSN_VARIABLE} (e.g. {CI_DEFAULT_DSN})"
    try:
        with psycopg.connect(dsn, connect_timeout=10) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        return None, f"PostgreSQL at ${DSN_VARIABLE} or the CI default is unreachable: {error}"
    return dsn, ""


def server_dsn() -> str:
    """The DSN of the test server; skips (not under CI, no DSN) or fails (otherwise)."""
    dsn, reason = _server()
    if dsn is not None:
        return dsn
    if os.environ.get(DSN_VARIABLE) or os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def fresh_schema_name() -> str:
    return f"test_{secrets.token_hex(6)}"


def drop_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


@contextlib.contextmanager
def migrated_schema(dsn: str) -> Iterator[str]:
    """A new schema at the current version, dropped afterwards."""
    schema = fresh_schema_name()
    try:
        migrate(dsn, schema=schema)
        yield schema
    finally:
        drop_schema(dsn, schema)


def execute(dsn: str, statement: str, *parameters: object) -> list[tuple[object, ...]]:
    """Run one statement in its own transaction; its rows (none for a command)."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        cursor = connection.execute(statement.encode(), parameters or None)
        return cursor.fetchall() if cursor.description is not None else []
