"""The PostgreSQL store's batch paths: opens, and closes, that arrive together share one
transaction; one session's refusal or damage is its own; leases are respected."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass

import pytest

from session_schedule.session import (
    PersistenceUncertain,
    SessionBusy,
    SessionCorrupt,
    SessionId,
    SessionNotFound,
)
from session_schedule.session.postgres import (
    DEFAULT_LEASE_SECONDS,
    PostgresSessionHandle,
    PostgresSessionStore,
)
from session_schedule.testing.session_contract import NOW, contract_test, turn
from tests.postgres import execute, migrated_schema, server_dsn

SESSIONS = 12
ENTRIES = 1_100
"""Past a checkpoint's 1,024 entries, so that some sessions open from their checkpoint."""


@dataclass(frozen=True)
class Database:
    """The test server and the fresh schema of one test."""

    dsn: str
    schema: str

    def store(self, *, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> PostgresSessionStore:
        return PostgresSessionStore(self.dsn, schema=self.schema, lease_seconds=lease_seconds)

    def execute(self, statement: str, *parameters: object) -> list[tuple[object, ...]]:
        return execute(self.dsn, statement, *parameters)

    def leases(self) -> dict[str, tuple[object, ...]]:
        rows = self.execute(
            f"SELECT session_id, epoch, expires_at > now(), holder FROM {self.schema}.leases"
        )
        return {str(row[0]): tuple(row[1:]) for row in rows}


@pytest.fixture
def db() -> Iterator[Database]:
    dsn = server_dsn()
    with migrated_schema(dsn) as schema:
        yield Database(dsn, schema)


def ids(count: int = SESSIONS) -> list[SessionId]:
    return [SessionId(f"s_{number:012d}") for number in range(count)]


@contextlib.asynccontextmanager
async def populated(
    db: Database, session_ids: list[SessionId], *, lease_seconds: float = DEFAULT_LEASE_SECONDS
) -> AsyncIterator[PostgresSessionStore]:
    """A store (with leases of ``lease_seconds``) over ``session_ids``, each written and closed: every
    other one past a checkpoint's entries, the others of 3 entries."""
    async with db.store(lease_seconds=lease_seconds) as store:
        for index, session_id in enumerate(session_ids):
            async with await store.create(now=NOW, session_id=session_id) as handle:
                for number in range(ENTRIES if index % 2 else 3):
                    handle.append("message", turn(number))
                await handle.barrier()
        yield store


async def open_all(
    store: PostgresSessionStore, session_ids: list[SessionId]
) -> list[PostgresSessionHandle | BaseException]:
    return await asyncio.gather(
        *(store.open(session_id) for session_id in session_ids), return_exceptions=True
    )


async def flush_one_turn_each(handles: list[PostgresSessionHandle]) -> list[BaseException | None]:
    """Append a turn to every handle, then wait for all their barriers at once."""
    for handle in handles:
        handle.append("message", turn(0))
    return await asyncio.gather(*(handle.barrier() for handle in handles), return_exceptions=True)


def assert_only_failed(
    handles: list[PostgresSessionHandle], outcomes: list[BaseException | None], failed: int
) -> None:
    """The flush of ``handles[failed]`` alone failed (its outcome uncertain); every other
    handle's turn is durable."""
    for index, (handle, outcome) in enumerate(zip(handles, outcomes, strict=True)):
        if index == failed:
            assert isinstance(outcome, PersistenceUncertain)
        else:
            assert outcome is None
            assert handle.durable_length == 1


async def close_handles(outcomes: Iterable[object]) -> None:
    """Close every handle among ``outcomes`` (a poisoned one's close may report its loss
    again)."""
    for outcome in outcomes:
        if isinstance(outcome, PostgresSessionHandle):
            if outcome.poisoned:
                with contextlib.suppress(PersistenceUncertain):
                    await outcome.close()
            else:
                await outcome.close()


@contextlib.asynccontextmanager
async def created(db: Database) -> AsyncIterator[list[PostgresSessionHandle]]:
    """:data:`SESSIONS` new sessions (of the ids :func:`ids` gives), open, then closed."""
    async with db.store() as store:
        handles = [await store.create(now=NOW, session_id=s) for s in ids()]
        try:
            yield handles
        finally:
            await close_handles(handles)


class TestBatchOpens:
    @contract_test
    async def test_opens_called_together_share_one_transaction(self, db: Database) -> None:
        session_ids = ids()
        async with populated(db, session_ids) as store:
            before = store._opens.batches
            handles = await open_all(store, session_ids)
            assert store._opens.batches - before == 1
            for index, handle in enumerate(handles):
                assert isinstance(handle, PostgresSessionHandle)
                assert handle.id == session_ids[index]
                assert handle.epoch == 2
                assert len(handle.entries) == (ENTRIES if index % 2 else 3)
                # From its checkpoint (written on close) or from its whole log: the same entries.
                assert handle.entries[-1].payload == turn(len(handle.entries) - 1)
                handle.append("message", turn(len(handle.entries)))
            await asyncio.gather(
                *(h.barrier() for h in handles if isinstance(h, PostgresSessionHandle))
            )
            before = store._closes.batches
            await asyncio.gather(
                *(h.close() for h in handles if isinstance(h, PostgresSessionHandle))
            )
            assert store._closes.batches - before == 1
        # Every lease let go, every session's last entry committed, every checkpoint current.
        assert all(live is False for _, live, _ in db.leases().values())
        rows = db.execute(
            f"SELECT c.session_id, count(*) FROM {db.schema}.checkpoints AS c"
            f" JOIN {db.schema}.entries AS e ON e.session_id = c.session_id"
            " GROUP BY c.session_id",
        )
        assert len(rows) == SESSIONS

    @contract_test
    async def test_a_session_held_elsewhere_or_missing_is_refused_alone(self, db: Database) -> None:
        session_ids = ids()
        async with (
            populated(db, session_ids, lease_seconds=60) as store,
            db.store(lease_seconds=60) as other,
        ):
            held = await other.open(session_ids[4])
            before = db.leases()[session_ids[4]]
            missing = SessionId("s_zzzzzzzzzzzz")
            wanted = [*session_ids, missing]
            outcomes = await open_all(store, wanted)
            for session_id, outcome in zip(wanted, outcomes, strict=True):
                if session_id == session_ids[4]:
                    assert isinstance(outcome, SessionBusy)
                elif session_id == missing:
                    assert isinstance(outcome, SessionNotFound)
                else:
                    assert isinstance(outcome, PostgresSessionHandle)
                    assert outcome.epoch == 2
            # The lease held elsewhere is untouched, and its holder still writes.
            assert db.leases()[session_ids[4]] == before
            held.append("message", turn(3))
            await held.barrier()
            await held.close()
            await close_handles(outcomes)

    @contract_test
    async def test_a_damaged_session_fails_alone_and_keeps_its_lease_untouched(
        self, db: Database
    ) -> None:
        session_ids = ids()
        async with populated(db, session_ids) as store:
            db.execute(f"DELETE FROM {db.schema}.checkpoints WHERE session_id = %s", session_ids[3])
            db.execute(
                f"UPDATE {db.schema}.entries SET type = 'calendar/event'"
                " WHERE session_id = %s AND position = 1",
                session_ids[3],
            )
            before = db.leases()
            outcomes = await open_all(store, session_ids)
            assert isinstance(outcomes[3], SessionCorrupt)
            after = db.leases()
            assert after[session_ids[3]] == before[session_ids[3]]
            for index, outcome in enumerate(outcomes):
                if index != 3:
                    assert isinstance(outcome, PostgresSessionHandle)
                    assert after[session_ids[index]][:2] == (2, True)
            await close_handles(outcomes)

    @contract_test
    async def test_a_failed_batch_opens_each_session_alone(
        self, db: Database, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        session_ids = ids(4)
        async with populated(db, session_ids) as store:

            async def broken(_ids: object) -> object:
                raise OSError("the connection was lost")

            monkeypatch.setattr(store._opens, "_batch", broken)
            handles = await open_all(store, session_ids)
            assert [h.epoch for h in handles if isinstance(h, PostgresSessionHandle)] == [2] * 4
            assert all(isinstance(handle, PostgresSessionHandle) for handle in handles)
            await close_handles(handles)
        assert all(live is False for _, live, _ in db.leases().values())

    @contract_test
    async def test_a_cancelled_open_leaves_no_lease_held(self, db: Database) -> None:
        session_ids = ids(1)
        async with populated(db, session_ids) as store:
            for yields in range(8):  # cancelled before, during and after its batch
                opening = asyncio.ensure_future(store.open(session_ids[0]))
                for _ in range(yields):
                    await asyncio.sleep(0)
                opening.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    handle = await opening
                    await handle.close()  # it had been opened before the cancel came
                # A handle opened for nobody is closed: the session can be opened again.
                for _ in range(200):
                    try:
                        async with await store.open(session_ids[0]):
                            break
                    except SessionBusy:
                        await asyncio.sleep(0.025)
                else:
                    pytest.fail("the lease of a cancelled open was never let go")


class TestBatchCommits:
    @contract_test
    async def test_flushes_that_wait_for_one_in_flight_go_together(self, db: Database) -> None:
        async with created(db) as handles:
            # The first is sent at once, alone; the others wait for it and go in one statement.
            assert await flush_one_turn_each(handles) == [None] * SESSIONS
            assert [handle.durable_length for handle in handles] == [1] * SESSIONS
        transactions = db.execute(
            f"SELECT count(*), count(DISTINCT xmin::text) FROM {db.schema}.entries"
        )
        assert transactions == [(SESSIONS, 2)]

    @contract_test
    async def test_a_lost_lease_fails_its_own_flush_and_no_other(self, db: Database) -> None:
        session_ids = ids()
        async with created(db) as handles:
            # Another owner took the lease of one of them.
            db.execute(
                f"UPDATE {db.schema}.leases SET epoch = epoch + 1 WHERE session_id = %s",
                session_ids[5],
            )
            assert_only_failed(handles, await flush_one_turn_each(handles), 5)
            assert handles[5].poisoned
        counts = {
            row[0]: row[1]
            for row in db.execute(
                f"SELECT session_id, count(*) FROM {db.schema}.entries GROUP BY session_id"
            )
        }
        assert session_ids[5] not in counts
        assert all(counts[s] == 1 for s in session_ids if s != session_ids[5])

    @contract_test
    async def test_a_failed_statement_sends_each_flush_alone(self, db: Database) -> None:
        async with created(db) as handles:
            # A row behind one session's back at the position its next append takes: the
            # shared statement fails on the primary key, so each is sent alone.
            db.execute(
                f"INSERT INTO {db.schema}.entries (session_id, position, type, data)"
                " VALUES (%s, 0, 'message', '{}')",
                handles[7].id,
            )
            assert_only_failed(handles, await flush_one_turn_each(handles), 7)
            assert handles[7].poisoned
