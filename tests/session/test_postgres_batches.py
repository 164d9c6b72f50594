"""The PostgreSQL store's batch paths: opens, and closes, that arrive together share one
transaction; one session's refusal or damage is its own; leases are respected."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

from session_schedule.session import (
    PersistenceUncertain,
    SessionBusy,
    SessionCorrupt,
    SessionId,
    SessionNotFound,
)
from session_schedule.session.postgres import PostgresSessionHandle, PostgresSessionStore
from session_schedule.testing.session_contract import NOW, contract_test, turn
from tests.postgres import execute, migrated_schema, server_dsn

SESSIONS = 12
ENTRIES = 1_100
"""Past a checkpoint's 1,024 entries, so that some sessions open from their checkpoint."""


@pytest.fixture
def dsn() -> str:
    return server_dsn()


@pytest.fixture
def schema(dsn: str) -> Iterator[str]:
    with migrated_schema(dsn) as name:
        yield name


def ids(count: int) -> list[SessionId]:
    return [SessionId(f"s_{number:012d}") for number in range(count)]


def leases(dsn: str, schema: str) -> dict[str, tuple[object, ...]]:
    rows = execute(
        dsn, f"SELECT session_id, epoch, expires_at > now(), holder FROM {schema}.leases"
    )
    return {str(row[0]): tuple(row[1:]) for row in rows}


async def populate(store: PostgresSessionStore, session_ids: list[SessionId]) -> None:
    for index, session_id in enumerate(session_ids):
        async with await store.create(now=NOW, session_id=session_id) as handle:
            for number in range(ENTRIES if index % 2 else 3):
                handle.append("message", turn(number))
            await handle.barrier()


async def open_all(
    store: PostgresSessionStore, session_ids: list[SessionId]
) -> list[PostgresSessionHandle | BaseException]:
    return await asyncio.gather(
        *(store.open(session_id) for session_id in session_ids), return_exceptions=True
    )


class TestBatchOpens:
    @contract_test
    async def test_opens_called_together_share_one_transaction(self, dsn: str, schema: str) -> None:
        session_ids = ids(SESSIONS)
        async with PostgresSessionStore(dsn, schema=schema) as store:
            await populate(store, session_ids)
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
        assert all(live is False for _, live, _ in leases(dsn, schema).values())
        rows = execute(
            dsn,
            f"SELECT c.session_id, count(*) FROM {schema}.checkpoints AS c"
            f" JOIN {schema}.entries AS e ON e.session_id = c.session_id GROUP BY c.session_id",
        )
        assert len(rows) == SESSIONS

    @contract_test
    async def test_a_session_held_elsewhere_or_missing_is_refused_alone(
        self, dsn: str, schema: str
    ) -> None:
        session_ids = ids(SESSIONS)
        async with (
            PostgresSessionStore(dsn, schema=schema, lease_seconds=60) as store,
            PostgresSessionStore(dsn, schema=schema, lease_seconds=60) as other,
        ):
            await populate(store, session_ids)
            held = await other.open(session_ids[4])
            before = leases(dsn, schema)[session_ids[4]]
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
            assert leases(dsn, schema)[session_ids[4]] == before
            held.append("message", turn(3))
            await held.barrier()
            await held.close()
            for outcome in outcomes:
                if isinstance(outcome, PostgresSessionHandle):
                    await outcome.close()

    @contract_test
    async def test_a_damaged_session_fails_alone_and_keeps_its_lease_untouched(
        self, dsn: str, schema: str
    ) -> None:
        session_ids = ids(SESSIONS)
        async with PostgresSessionStore(dsn, schema=schema) as store:
            await populate(store, session_ids)
            execute(
                dsn,
                f"DELETE FROM {schema}.checkpoints WHERE session_id = %s",
                session_ids[3],
            )
            execute(
                dsn,
                f"UPDATE {schema}.entries SET type = 'calendar/event'"
                " WHERE session_id = %s AND position = 1",
                session_ids[3],
            )
            before = leases(dsn, schema)
            outcomes = await open_all(store, session_ids)
            assert isinstance(outcomes[3], SessionCorrupt)
            after = leases(dsn, schema)
            assert after[session_ids[3]] == before[session_ids[3]]
            for index, outcome in enumerate(outcomes):
                if index != 3:
                    assert isinstance(outcome, PostgresSessionHandle)
                    assert after[session_ids[index]][:2] == (2, True)
                    await outcome.close()

    @contract_test
    async def test_a_failed_batch_opens_each_session_alone(
        self, dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        session_ids = ids(4)
        async with PostgresSessionStore(dsn, schema=schema) as store:
            await populate(store, session_ids)

            async def broken(_ids: object) -> object:
                raise OSError("the connection was lost")

            monkeypatch.setattr(store._opens, "_batch", broken)
            handles = await open_all(store, session_ids)
            assert [h.epoch for h in handles if isinstance(h, PostgresSessionHandle)] == [2] * 4
            for handle in handles:
                assert isinstance(handle, PostgresSessionHandle)
                await handle.close()
        assert all(live is False for _, live, _ in leases(dsn, schema).values())

    @contract_test
    async def test_a_cancelled_open_leaves_no_lease_held(self, dsn: str, schema: str) -> None:
        session_ids = ids(1)
        async with PostgresSessionStore(dsn, schema=schema) as store:
            await populate(store, session_ids)
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
    async def test_flushes_that_wait_for_one_in_flight_go_together(
        self, dsn: str, schema: str
    ) -> None:
        session_ids = ids(SESSIONS)
        async with PostgresSessionStore(dsn, schema=schema) as store:
            handles = [await store.create(now=NOW, session_id=s) for s in session_ids]
            for handle in handles:
                handle.append("message", turn(0))
            # The first is sent at once, alone; the others wait for it and go in one statement.
            await asyncio.gather(*(handle.barrier() for handle in handles))
            for handle in handles:
                assert handle.durable_length == 1
                await handle.close()
        transactions = execute(
            dsn, f"SELECT count(*), count(DISTINCT xmin::text) FROM {schema}.entries"
        )
        assert transactions == [(SESSIONS, 2)]

    @contract_test
    async def test_a_lost_lease_fails_its_own_flush_and_no_other(
        self, dsn: str, schema: str
    ) -> None:
        session_ids = ids(SESSIONS)
        async with PostgresSessionStore(dsn, schema=schema) as store:
            handles = [await store.create(now=NOW, session_id=s) for s in session_ids]
            # Another owner took the lease of one of them.
            execute(
                dsn,
                f"UPDATE {schema}.leases SET epoch = epoch + 1 WHERE session_id = %s",
                session_ids[5],
            )
            for handle in handles:
                handle.append("message", turn(0))
            outcomes = await asyncio.gather(
                *(handle.barrier() for handle in handles), return_exceptions=True
            )
            for index, (handle, outcome) in enumerate(zip(handles, outcomes, strict=True)):
                if index == 5:
                    assert isinstance(outcome, PersistenceUncertain)
                    assert handle.poisoned
                else:
                    assert outcome is None
                    assert handle.durable_length == 1
                with contextlib.suppress(PersistenceUncertain):
                    await handle.close()
        counts = {
            row[0]: row[1]
            for row in execute(
                dsn, f"SELECT session_id, count(*) FROM {schema}.entries GROUP BY session_id"
            )
        }
        assert session_ids[5] not in counts
        assert all(counts[s] == 1 for s in session_ids if s != session_ids[5])

    @contract_test
    async def test_a_failed_statement_sends_each_flush_alone(self, dsn: str, schema: str) -> None:
        session_ids = ids(SESSIONS)
        async with PostgresSessionStore(dsn, schema=schema) as store:
            handles = [await store.create(now=NOW, session_id=s) for s in session_ids]
            # A row behind one session's back at the position its next append takes: the
            # shared statement fails on the primary key, so each is sent alone.
            execute(
                dsn,
                f"INSERT INTO {schema}.entries (session_id, position, type, data)"
                " VALUES (%s, 0, 'message', '{}')",
                session_ids[7],
            )
            for handle in handles:
                handle.append("message", turn(0))
            outcomes = await asyncio.gather(
                *(handle.barrier() for handle in handles), return_exceptions=True
            )
            for index, (handle, outcome) in enumerate(zip(handles, outcomes, strict=True)):
                if index == 7:
                    assert isinstance(outcome, PersistenceUncertain)
                else:
                    assert outcome is None
                    assert handle.durable_length == 1
                with contextlib.suppress(PersistenceUncertain):
                    await handle.close()
