"""Every PostgreSQL statement that updates several lease rows locks them in session id order,
whatever plan the server picks: two such statements at once (a renewal and a flush of the same
host, or batches of two hosts) then never deadlock.

Each test holds the lock of the middle one of three rows from another connection, runs a batch
over the three, and looks, once the batch waits, at which of the other two it has locked: the
first in id order, never the last. The rows are stored in the reverse of id order and hash
joins are forced, so a statement that locked rows in the order its plan visits them (the
table's physical order) would lock the last first."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Final

import psycopg
import pytest
from psycopg import errors

from session_schedule.session.postgres import DEFAULT_LEASE_SECONDS, _Statements
from tests.postgres import execute, migrated_schema, server_dsn

FIRST, MIDDLE, LAST = "s_lockorder0a", "s_lockorder0b", "s_lockorder0c"
OTHERS: Final = 200
"""Rows of other sessions, so that the planner hashes the batch and scans the table."""
HASH_JOINS: Final = "SET enable_nestloop = off; SET enable_mergejoin = off"


@pytest.fixture
def schema() -> Iterator[tuple[str, str]]:
    dsn = server_dsn()
    with migrated_schema(dsn) as name:
        ids = [*(f"s_other{n:06d}" for n in range(OTHERS)), LAST, MIDDLE, FIRST]
        for session_id in ids:  # stored in the reverse of id order
            execute(dsn, f"INSERT INTO {name}.sessions (id, header) VALUES (%s, '')", session_id)
            execute(
                dsn,
                f"INSERT INTO {name}.leases VALUES (%s, 1, 'h', now() + interval '1 hour')",
                session_id,
            )
        execute(dsn, f"ANALYZE {name}.leases")
        yield dsn, name


def _batch_waits_on_the_middle_row(
    dsn: str, schema: str, run: Callable[[psycopg.Connection[tuple[object, ...]]], object]
) -> None:
    """Hold the middle row, start ``run`` on a connection of its own (hash joins only), and
    check what it has locked once it waits for that row."""
    with (
        psycopg.connect(dsn) as holder,
        psycopg.connect(dsn) as batch,
        psycopg.connect(dsn, autocommit=True) as probe,
    ):
        holder.execute(f"SELECT 1 FROM {schema}.leases WHERE session_id = %s FOR UPDATE", (MIDDLE,))
        for setting in HASH_JOINS.split("; "):
            batch.execute(setting.encode())
        failure: list[BaseException] = []

        def work() -> None:
            try:
                run(batch)
                batch.commit()
            except BaseException as error:  # reported by the test below
                failure.append(error)

        worker = threading.Thread(target=work)
        worker.start()
        deadline = time.monotonic() + 30
        pid = batch.info.backend_pid
        while not probe.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'", (pid,)
        ).fetchall():
            assert time.monotonic() < deadline, "the batch never waited for the held row"
            time.sleep(0.01)
        locked = []
        for session_id in (FIRST, LAST):
            try:
                with probe.transaction():
                    probe.execute(
                        f"SELECT 1 FROM {schema}.leases WHERE session_id = %s FOR UPDATE NOWAIT",
                        (session_id,),
                    )
            except errors.LockNotAvailable:
                locked.append(session_id)
        holder.rollback()
        worker.join(30)
        assert not worker.is_alive()
        assert failure == []
    assert locked == [FIRST]


def test_a_renewal_locks_lease_rows_in_session_order(schema: tuple[str, str]) -> None:
    dsn, name = schema
    statements = _Statements(name)
    ids = [FIRST, MIDDLE, LAST]
    lost: list[object] = []

    def run(connection: psycopg.Connection[tuple[object, ...]]) -> None:
        cursor = connection.execute(
            statements.renew, (",".join(ids), "1,1,1", DEFAULT_LEASE_SECONDS)
        )
        lost.extend(cursor.fetchall())

    _batch_waits_on_the_middle_row(dsn, name, run)
    assert lost == []  # every lease kept


def test_a_flush_of_many_sessions_locks_lease_rows_in_session_order(
    schema: tuple[str, str],
) -> None:
    dsn, name = schema
    statements = _Statements(name)
    ids = [FIRST, MIDDLE, LAST]

    def run(connection: psycopg.Connection[tuple[object, ...]]) -> None:
        connection.execute(
            statements.flush_many,
            (
                ids,
                [1, 1, 1],
                [False, False, False],
                [None, None, None],
                DEFAULT_LEASE_SECONDS,
                ids,
                [0, 0, 0],
                ["message", "message", "message"],
                [b"{}", b"{}", b"{}"],
            ),
        )

    _batch_waits_on_the_middle_row(dsn, name, run)
    rows = execute(dsn, f"SELECT session_id FROM {name}.entries ORDER BY session_id")
    assert rows == [(FIRST,), (MIDDLE,), (LAST,)]


def test_a_release_of_many_sessions_locks_lease_rows_in_session_order(
    schema: tuple[str, str],
) -> None:
    dsn, name = schema
    statements = _Statements(name)

    def run(connection: psycopg.Connection[tuple[object, ...]]) -> None:
        connection.execute(statements.release_many, ([FIRST, MIDDLE, LAST], [1, 1, 1]))

    _batch_waits_on_the_middle_row(dsn, name, run)
    held = execute(
        dsn,
        f"SELECT session_id FROM {name}.leases WHERE expires_at > now() AND session_id <> ALL(%s)",
        [f"s_other{n:06d}" for n in range(OTHERS)],
    )
    assert held == []  # all three released
