"""The SQLite store's commit lane: barriers of many sessions share a transaction, each write in
a savepoint of its own, reported only once the transaction has committed."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from session_schedule.session import PersistenceUncertain, SqliteSessionStore
from session_schedule.session.commit_lane import CommitLane
from session_schedule.testing.session_contract import NOW, turn

SESSIONS = 20


@pytest.fixture
def store(tmp_path: Path) -> SqliteSessionStore:
    return SqliteSessionStore(tmp_path / "sessions.db")


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        yield connection


def connected(lane: CommitLane) -> bool:
    """Whether ``lane`` holds its connection now (read through a call: each look is new)."""
    return lane._connection is not None


def rows(path: Path, session_id: str) -> list[int]:
    with connect(path) as connection:
        found = connection.execute(
            "SELECT position FROM entries WHERE session_id = ? ORDER BY position", (session_id,)
        ).fetchall()
    return [position for (position,) in found]


async def test_barriers_of_many_sessions_called_together_share_a_transaction(
    store: SqliteSessionStore,
) -> None:
    handles = [await store.create(now=NOW) for _ in range(SESSIONS)]
    try:
        before = store._lane.transactions
        for handle in handles:
            handle.append("message", turn(0))
        await asyncio.gather(*(handle.barrier() for handle in handles))
        # One transaction for all of them (the first may have gone alone, ahead of the rest).
        assert store._lane.transactions - before <= 2
        for handle in handles:
            assert handle.durable_length == 1
            assert rows(store.path, handle.id) == [0]
    finally:
        for handle in handles:
            await handle.close()


async def test_a_failed_write_fails_its_own_session_and_no_other(
    store: SqliteSessionStore,
) -> None:
    handles = [await store.create(now=NOW) for _ in range(SESSIONS)]
    victim = handles[SESSIONS // 2]
    try:
        # A row behind the victim's back at the position its next append takes: its insert
        # fails on the primary key, as a second writer's would.
        with connect(store.path) as connection:
            connection.execute(
                "INSERT INTO entries (session_id, position, type, data) VALUES (?, 0, 'x', '{}')",
                (victim.id,),
            )
        for handle in handles:
            handle.append("message", turn(0))
        before = store._lane.transactions
        outcomes = await asyncio.gather(
            *(handle.barrier() for handle in handles), return_exceptions=True
        )
        assert store._lane.transactions - before <= 2  # the victim shared a transaction
        for handle, outcome in zip(handles, outcomes, strict=True):
            if handle is victim:
                assert isinstance(outcome, PersistenceUncertain)
                assert handle.poisoned
            else:
                assert outcome is None
                assert handle.durable_length == 1
                assert rows(store.path, handle.id) == [0]
    finally:
        for handle in handles:
            with contextlib.suppress(PersistenceUncertain):
                await handle.close()


async def test_a_failed_transaction_fails_every_write_in_it(tmp_path: Path) -> None:
    path = tmp_path / "lane.db"
    with connect(path) as connection:
        connection.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
    lane = CommitLane(lambda: sqlite3.connect(path, isolation_level=None, check_same_thread=False))
    lane.attach()

    def insert(number: int) -> Callable[[sqlite3.Connection], int]:
        def work(connection: sqlite3.Connection) -> int:
            connection.execute("INSERT INTO t (n) VALUES (?)", (number,))
            return number

        return work

    def lost(connection: sqlite3.Connection) -> None:
        # As SQLite does after some errors (a full disk, an I/O error): the whole transaction
        # is rolled back, the writes before this one included.
        connection.execute("ROLLBACK")
        raise sqlite3.OperationalError("disk I/O error")

    first, second = lane.commit(insert(1)), lane.commit(insert(2))
    failing, third = lane.commit(lost), lane.commit(insert(3))
    outcomes = await asyncio.gather(first, second, failing, third, return_exceptions=True)
    assert all(isinstance(outcome, sqlite3.OperationalError) for outcome in outcomes)
    assert await lane.commit(insert(4)) == 4
    lane.detach()
    with connect(path) as connection:
        assert connection.execute("SELECT n FROM t").fetchall() == [(4,)]


async def test_writes_are_reported_after_their_commit_and_the_connection_closes_when_unused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lane.db"
    with connect(path) as connection:
        connection.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
    lane = CommitLane(lambda: sqlite3.connect(path, isolation_level=None, check_same_thread=False))
    lane.attach()

    def insert(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO t (n) VALUES (1)")

    await lane.commit(insert)
    # Reported: visible to another connection, so committed.
    with connect(path) as connection:
        assert connection.execute("SELECT n FROM t").fetchall() == [(1,)]
    assert connected(lane)
    assert lane.detach() is not None  # the last handle: the lane closes its connection
    await lane.commit(lambda _connection: None, durable=False)  # runs after the close call
    lane.attach()  # the write above opened it again; detaching closes it once more
    lane.attach()
    assert lane.detach() is None  # another handle is still attached
    assert connected(lane)
    closed = lane.detach()
    assert closed is not None
    await closed
    assert not connected(lane)
