"""Opening a PostgreSQL store's pool: a cancelled open is no connection failure, and psycopg's
pool reports none for it; a connection that fails is still reported."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import pytest

from session_schedule.core.instants import Instant
from session_schedule.session import SessionError
from session_schedule.session.postgres import PostgresSessionStore
from tests.postgres import fresh_schema_name, server_dsn


@contextlib.contextmanager
def server(*, answers: bool) -> Iterator[str]:
    """The DSN of a port on this machine that takes connections and never answers them
    (``answers=False``: a server that hangs), or that refuses them (``answers=True``: nothing
    there to answer)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        if not answers:
            listener.listen(8)
        port = listener.getsockname()[1]
        yield f"postgresql://postgres@127.0.0.1:{port}/test?connect_timeout=30"


def cancel_a_first_use(
    dsn: str, after: float, ending: tuple[type[BaseException], ...] = (asyncio.CancelledError,)
) -> None:
    """Create a session with a new store of ``dsn`` (a schema that does not exist), cancel that
    after ``after`` seconds unless it ended with one of ``ending`` before, close the store, and
    end the loop as ``asyncio.run`` does (it cancels what is left)."""

    async def main() -> None:
        store = PostgresSessionStore(dsn, schema=fresh_schema_name())
        creating = asyncio.ensure_future(store.create(now=Instant(0)))
        await asyncio.sleep(after)
        creating.cancel()
        with pytest.raises(ending):
            await creating
        await store.close()

    asyncio.run(main())


def reported(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith("psycopg") and record.levelno >= logging.WARNING
    ]


def test_a_cancelled_open_of_a_server_that_does_not_answer_reports_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="psycopg"), server(answers=False) as dsn:
        cancel_a_first_use(dsn, 0.5)
    assert reported(caplog) == []
    # The attempt was under way when the open was cancelled.
    assert any("connection attempt" in record.getMessage() for record in caplog.records)


def _first_use_fails(dsn: str) -> SessionError:
    """What a first use of a new store of ``dsn`` raises (a ``SessionError``)."""

    async def main() -> SessionError:
        store = PostgresSessionStore(dsn, schema=fresh_schema_name())
        try:
            with pytest.raises(SessionError) as failed:
                await store.create(now=Instant(0))
        finally:
            await store.close()
        return failed.value

    return asyncio.run(main())


def test_a_server_that_refuses_connections_is_reported_at_once_with_libpqs_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression: the pool retried in the background for its whole timeout (30 s) and then
    raised psycopg's ``PoolTimeout``, which said only that it timed out (the program printed a
    traceback and exited 1). A first connection now fails the first use at once, naming why."""
    with caplog.at_level(logging.DEBUG, logger="psycopg"), server(answers=True) as dsn:
        error = _first_use_fails(dsn)
    port = dsn.split(":")[2].split("/")[0]
    assert str(error).startswith(
        "the PostgreSQL database cannot be used: connection failed: connection to server at "
        f'"127.0.0.1", port {port} failed: Connection refused'
    )
    assert error.session_id == ""
    assert not any("pool" in record.getMessage() for record in caplog.records)


def test_a_database_that_does_not_exist_is_reported_at_once_with_libpqs_reason() -> None:
    dsn = server_dsn()
    missing = dsn.split("?")[0].rsplit("/", 1)[0] + "/no_such_database_here"
    said = str(_first_use_fails(missing))
    assert said.startswith("the PostgreSQL database cannot be used: connection failed: ")
    assert said.endswith('FATAL: database "no_such_database_here" does not exist')


@pytest.mark.parametrize("after", [0.0, 0.001, 0.002, 0.003, 0.005, 0.01])
def test_a_cancelled_open_of_the_server_reports_nothing(
    caplog: pytest.LogCaptureFixture, after: float
) -> None:
    dsn = server_dsn()
    with caplog.at_level(logging.DEBUG, logger="psycopg"):
        # Cancelled while connecting, or while checking the schema, or after finding it missing.
        cancel_a_first_use(dsn, after, (asyncio.CancelledError, SessionError))
    assert reported(caplog) == []
