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


def test_a_connection_that_fails_is_still_reported_when_the_open_is_then_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="psycopg"), server(answers=True) as dsn:
        cancel_a_first_use(dsn, 0.5)
    failures = reported(caplog)
    assert failures
    assert all(message.startswith("error connecting in 'session-schedule ") for message in failures)
    assert all("Connection refused" in message for message in failures)


@pytest.mark.parametrize("after", [0.0, 0.001, 0.002, 0.003, 0.005, 0.01])
def test_a_cancelled_open_of_the_server_reports_nothing(
    caplog: pytest.LogCaptureFixture, after: float
) -> None:
    dsn = server_dsn()
    with caplog.at_level(logging.DEBUG, logger="psycopg"):
        # Cancelled while connecting, or while checking the schema, or after finding it missing.
        cancel_a_first_use(dsn, after, (asyncio.CancelledError, SessionError))
    assert reported(caplog) == []
