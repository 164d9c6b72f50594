"""The PostgreSQL store: the contract suite, leases and fencing, group commit, stored bytes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import msgspec
import psycopg
import pytest

import session_schedule
from session_schedule.core.changes import create_change, delete_change, dispatch_change
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    EveryScheduleRecord,
)
from session_schedule.session import (
    JsonlSessionStore,
    PersistenceUncertain,
    SessionBusy,
    SessionCorrupt,
    SessionError,
    SessionHandle,
    SessionId,
    SessionNotFound,
    SessionSnapshot,
    SessionStore,
    user_message,
)
from session_schedule.session import postgres as postgres_module
from session_schedule.session.location import PostgresLocation, setup_command
from session_schedule.session.postgres import PostgresSessionStore
from session_schedule.session.postgres_schema import migrate
from session_schedule.testing.session_contract import (
    LATER,
    NOW,
    SessionStoreContract,
    contract_test,
    payloads,
    schedule_create,
    turn,
)
from tests.postgres import (
    drop_schema,
    execute,
    fresh_schema_name,
    migrated_schema,
    server_dsn,
)

SID = SessionId("s_aaaaaaaaaaaa")
UNTOUCHED = "; the database was left untouched for inspection"
LATE = "2030-01-01T00:00:00.000Z"


class TestPostgresStore(SessionStoreContract):
    @pytest.fixture(autouse=True)
    def _database(self) -> Iterator[None]:
        self._dsn = server_dsn()
        self._schemas: dict[Path, str] = {}
        self._stores: list[PostgresSessionStore] = []
        yield
        for schema in self._schemas.values():
            drop_schema(self._dsn, schema)

    def make_store(self, root: Path) -> SessionStore:
        schema = self._schemas.get(root)
        if schema is None:
            schema = self._schemas[root] = fresh_schema_name()
            migrate(self._dsn, schema=schema)
        store = PostgresSessionStore(self._dsn, schema=schema)
        self._stores.append(store)
        return store

    async def dispose(self) -> None:
        for store in self._stores:
            await store.close()

    def break_next_barrier(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Commit a row at the handle's next position behind its back: the primary key refuses
        # the handle's next commit.
        assert isinstance(store, PostgresSessionStore)
        execute(
            self._dsn,
            f"INSERT INTO {store.schema}.entries (session_id, position, type, data)"
            " VALUES (%s, %s, 'message', %s)",
            handle.id,
            len(handle.entries),
            b'{"role":"user","content":"intruder","at":"2026-05-01T09:00:00.000Z",'
            b'"origin":"person"}',
        )

    def break_next_write(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # An append only queues the row: the failure surfaces at the barrier.
        self.break_next_barrier(store, handle, monkeypatch)

    checkpoints = True
    checkpoints_while_open = True

    def read_checkpoint(self, store: SessionStore, session_id: SessionId) -> bytes | None:
        assert isinstance(store, PostgresSessionStore)
        rows = execute(
            self._dsn,
            f"SELECT data FROM {store.schema}.checkpoints WHERE session_id = %s",
            session_id,
        )
        if not rows:
            return None
        data = rows[0][0]
        assert isinstance(data, bytes)
        return data

    def write_checkpoint(
        self, store: SessionStore, session_id: SessionId, data: bytes | None
    ) -> None:
        assert isinstance(store, PostgresSessionStore)
        execute(
            self._dsn, f"DELETE FROM {store.schema}.checkpoints WHERE session_id = %s", session_id
        )
        if data is not None:
            execute(
                self._dsn,
                f"INSERT INTO {store.schema}.checkpoints (session_id, data) VALUES (%s, %s)",
                session_id,
                data,
            )

    def corrupt_entry(self, store: SessionStore, session_id: SessionId, position: int) -> str:
        assert isinstance(store, PostgresSessionStore)
        execute(
            self._dsn,
            f"UPDATE {store.schema}.entries SET type = 'calendar/event'"
            " WHERE session_id = %s AND position = %s",
            session_id,
            position,
        )
        database = str(execute(self._dsn, "SELECT current_database()")[0][0])
        return (
            f"session {session_id} is corrupt at entry {position} (schema {store.schema} of "
            f"PostgreSQL database {database}): unknown entry type 'calendar/event'{UNTOUCHED}"
        )


@pytest.fixture
def dsn() -> str:
    return server_dsn()


@pytest.fixture
def schema(dsn: str) -> Iterator[str]:
    with migrated_schema(dsn) as name:
        yield name


def lease_row(dsn: str, schema: str) -> tuple[object, ...]:
    rows = execute(
        dsn,
        f"SELECT epoch, expires_at > now(), holder FROM {schema}.leases WHERE session_id = %s",
        SID,
    )
    assert len(rows) == 1
    return rows[0]


def expire_lease(dsn: str, schema: str) -> None:
    """Make the owner's lease run out now, as if it had not renewed (a pause, a partition)."""
    execute(
        dsn,
        f"UPDATE {schema}.leases SET expires_at = now() - interval '1 second'"
        " WHERE session_id = %s",
        SID,
    )


async def until_poisoned(handle: SessionHandle) -> None:
    for _ in range(200):
        if handle.poisoned:
            return
        await asyncio.sleep(0.025)
    pytest.fail("the handle was never poisoned")


class TestLeases:
    @contract_test
    async def test_each_owner_takes_a_higher_epoch(self, dsn: str, schema: str) -> None:
        async with PostgresSessionStore(dsn, schema=schema) as store:
            async with await store.create(now=NOW, session_id=SID) as handle:
                assert handle.epoch == 1
                epoch, live, holder = lease_row(dsn, schema)
                assert (epoch, live) == (1, True)
                assert isinstance(holder, str)
                assert holder.endswith(f" pid {os.getpid()}")
            assert lease_row(dsn, schema)[:2] == (1, False)
            for expected in (2, 3):
                async with await store.open(SID) as handle:
                    assert handle.epoch == expected
                    assert lease_row(dsn, schema)[:2] == (expected, True)

    @contract_test
    async def test_a_taken_over_owner_cannot_write_another_byte(
        self, dsn: str, schema: str
    ) -> None:
        async with (
            PostgresSessionStore(dsn, schema=schema, lease_seconds=60) as first_store,
            PostgresSessionStore(dsn, schema=schema, lease_seconds=60) as second_store,
        ):
            first = await first_store.create(now=NOW, session_id=SID)
            first.append("message", turn(0))
            await first.barrier()
            with pytest.raises(SessionBusy):
                await second_store.open(SID)
            expire_lease(dsn, schema)
            second = await second_store.open(SID)
            assert (first.epoch, second.epoch) == (1, 2)

            first.append("message", turn(1))
            first.append("schedule/change", schedule_create(1))
            with pytest.raises(PersistenceUncertain) as caught:
                await first.barrier()
            expected = (
                f"session {SID} is no longer owned by this handle (another owner took over its "
                "lease; this handle held epoch 1, and nothing it appended since its last barrier "
                "was written); it can write nothing more; reopen the session from storage"
            )
            assert caught.value.message == expected
            assert caught.value.code == "persistence_uncertain"
            with pytest.raises(PersistenceUncertain) as again:
                first.append("message", turn(2))
            assert again.value.message == expected
            assert payloads((await second_store.read(SID)).entries) == [("message", turn(0))]

            assert second.append("message", turn(3)) == 1
            await second.barrier()
            await first.close()  # releasing a lease it no longer holds changes nothing
            assert lease_row(dsn, schema)[:2] == (2, True)
            with pytest.raises(SessionBusy):
                await first_store.open(SID)
            await second.close()
        assert payloads((await _read(dsn, schema, SID)).entries) == [
            ("message", turn(0)),
            ("message", turn(3)),
        ]

    @contract_test
    async def test_renewal_keeps_the_lease_and_notices_a_takeover(
        self, dsn: str, schema: str
    ) -> None:
        # A short lease, renewed every 0.4 s: it outlives two and a half lease lengths untouched.
        async with (
            PostgresSessionStore(dsn, schema=schema, lease_seconds=1.2) as store,
            PostgresSessionStore(dsn, schema=schema) as other,
        ):
            handle = await store.create(now=NOW, session_id=SID)
            await asyncio.sleep(3.0)
            assert not handle.poisoned
            assert lease_row(dsn, schema)[:2] == (1, True)
            with pytest.raises(SessionBusy):
                await other.open(SID)
            # Another owner's takeover (its epoch) is noticed without a write.
            execute(dsn, f"UPDATE {schema}.leases SET epoch = 2 WHERE session_id = %s", SID)
            await until_poisoned(handle)
            with pytest.raises(PersistenceUncertain) as caught:
                await handle.barrier()
            assert caught.value.message == (
                f"session {SID} is no longer owned by this handle (another owner took over its "
                "lease; this handle held epoch 1); it can write nothing more; reopen the session "
                "from storage"
            )

    @contract_test
    async def test_a_lease_that_cannot_be_renewed_poisons_the_handle(
        self, dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with PostgresSessionStore(dsn, schema=schema, lease_seconds=0.3) as store:
            handle = await store.create(now=NOW, session_id=SID)
            handle.append("message", turn(0))

            async def unreachable(handles: object) -> set[str]:
                raise psycopg.OperationalError("server closed the connection unexpectedly")

            monkeypatch.setattr(store, "_renew_leases", unreachable)
            await until_poisoned(handle)
            with pytest.raises(PersistenceUncertain) as caught:
                handle.append("message", turn(1))
            assert caught.value.message == (
                f"session {SID} is no longer owned by this handle (its lease could not be "
                "renewed before it expired; last attempt: OperationalError: server closed the "
                "connection unexpectedly); it can write nothing more; reopen the session from "
                "storage"
            )
            await handle.close()
            assert (await store.read(SID)).entries == ()
            async with await store.open(SID) as reopened:
                assert reopened.epoch == 2

    @contract_test
    async def test_one_statement_renews_the_leases_of_many_sessions(
        self, dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with (
            PostgresSessionStore(dsn, schema=schema, lease_seconds=1.2) as store,
            PostgresSessionStore(dsn, schema=schema) as other,
        ):
            batches: list[list[str]] = []
            real_renew = store._renew_leases

            async def recording(batch: postgres_module._Renewal) -> set[str]:
                batches.append([handle.id for handle in batch.ordered])
                return await real_renew(batch)

            monkeypatch.setattr(store, "_renew_leases", recording)
            ids = [SessionId(f"s_{number:012d}") for number in range(20)]
            handles = await asyncio.gather(
                *(store.create(now=NOW, session_id=session_id) for session_id in ids)
            )
            # Renewals gather into batches until one statement renews every lease.
            for _ in range(400):
                if batches and batches[-1] == sorted(ids):
                    break
                await asyncio.sleep(0.025)
            assert batches[-1] == sorted(ids)
            assert all(not handle.poisoned for handle in handles)
            with pytest.raises(SessionBusy):
                await other.open(ids[3])
            # One takeover among them poisons that handle only.
            execute(dsn, f"UPDATE {schema}.leases SET epoch = 2 WHERE session_id = %s", ids[3])
            await until_poisoned(handles[3])
            seen = len(batches)
            for _ in range(400):
                if len(batches) > seen and ids[3] not in batches[-1]:
                    break
                await asyncio.sleep(0.025)
            assert batches[-1] == sorted(ids[:3] + ids[4:])
            assert [handle.poisoned for handle in handles] == [index == 3 for index in range(20)]
            for handle in handles:
                await handle.close()
            assert store._keeper is not None
            await asyncio.wait_for(store._keeper, 5)

    @contract_test
    async def test_one_renewal_statement_per_interval_however_many_sessions(
        self, dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Renewed every 0.5 s; sessions keep being opened, a batch every eighth of a second, so
        # that their leases fall due at every moment of the interval.
        interval = 0.5
        async with PostgresSessionStore(dsn, schema=schema, lease_seconds=3 * interval) as store:
            sent: list[tuple[set[str], set[str]]] = []
            """Each renewal statement: the sessions it renewed, and those open as it was sent."""
            real_execute = psycopg.AsyncConnection.execute

            async def counting(
                connection: psycopg.AsyncConnection[object], query: object, params: object = None
            ) -> object:
                if query == store._sql.renew:
                    assert isinstance(params, tuple)
                    held: set[str] = {handle.id for handle in store._handles}
                    sent.append((set(str(params[0]).split(",")), held))
                return await real_execute(connection, query, params)  # type: ignore[call-overload]

            monkeypatch.setattr(psycopg.AsyncConnection, "execute", counting)
            loop = asyncio.get_running_loop()
            handles = []
            started = loop.time()
            for group in range(16):
                handles += await asyncio.gather(
                    *(
                        store.create(now=NOW, session_id=SessionId(f"s_{group:04d}{n:08d}"))
                        for n in range(25)
                    )
                )
                await asyncio.sleep(interval / 4)
            await asyncio.sleep(2 * interval)
            elapsed = loop.time() - started
            # One statement per interval, each renewing every lease the store held at the last.
            assert 3 <= len(sent) <= elapsed / interval + 1
            assert all(sent[n][0] >= sent[n - 1][1] for n in range(1, len(sent)))
            assert sent[-1][0] == {handle.id for handle in handles}
            assert all(not handle.poisoned for handle in handles)
            # One takeover among 400 is still noticed, by that statement, and poisons that
            # handle only; a closed session's lease is not renewed any more.
            execute(
                dsn, f"UPDATE {schema}.leases SET epoch = 2 WHERE session_id = %s", handles[7].id
            )
            await handles[9].close()
            await until_poisoned(handles[7])
            assert [handle.poisoned for handle in handles] == [n == 7 for n in range(400)]
            count = len(sent)
            while len(sent) < count + 2:
                await asyncio.sleep(0.05)
            assert sent[-1][0] == {handle.id for handle in handles} - {handles[7].id, handles[9].id}
            rows = execute(
                dsn,
                f"SELECT epoch, expires_at > now() FROM {schema}.leases WHERE session_id = %s",
                handles[9].id,
            )
            assert rows == [(1, False)]

    @contract_test
    async def test_a_renewal_during_a_slow_create_commit_leaves_the_new_session_alone(
        self, dsn: str, schema: str
    ) -> None:
        # The create's commit takes more than a renewal interval (a deferred trigger sleeps in
        # it): a renewal run meanwhile could not see the new lease, and used to poison the
        # handle as if another owner had taken the session over.
        execute(
            dsn,
            f"CREATE FUNCTION {schema}.slow_commit() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN PERFORM pg_sleep(0.6); RETURN NULL; END $$",
        )
        execute(
            dsn,
            f"CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON {schema}.sessions"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
            f" EXECUTE FUNCTION {schema}.slow_commit()",
        )
        async with PostgresSessionStore(dsn, schema=schema, lease_seconds=1.5) as store:
            handle = await store.create(now=NOW, session_id=SID)
            await asyncio.sleep(1.2)  # two renewal intervals after the create began
            assert not handle.poisoned
            handle.append("message", turn(0))
            await handle.barrier()
            await handle.close()
        assert [entry.position for entry in (await _read(dsn, schema, SID)).entries] == [0]

    @contract_test
    async def test_a_corrupt_session_keeps_its_lease_untouched(self, dsn: str, schema: str) -> None:
        async with PostgresSessionStore(dsn, schema=schema) as store:
            async with await store.create(now=NOW, session_id=SID) as handle:
                handle.append("message", turn(0))
                await handle.barrier()
            before = lease_row(dsn, schema)
            execute(dsn, f"UPDATE {schema}.entries SET type = 'calendar/event'")
            with pytest.raises(SessionCorrupt):
                await store.open(SID)
            assert lease_row(dsn, schema) == before


class TestCommits:
    @contract_test
    async def test_concurrent_barriers_share_one_commit(self, dsn: str, schema: str) -> None:
        async with PostgresSessionStore(dsn, schema=schema) as store:
            handle = await store.create(now=NOW, session_id=SID)
            for number in range(50):
                handle.append("message", turn(number))
            await asyncio.gather(*(handle.barrier() for _ in range(10)))
            assert handle.flush_count == 1
            # A barrier while a commit is in flight waits for it, then shares the next one.
            handle.append("message", turn(50))
            first = asyncio.ensure_future(handle.barrier())
            await asyncio.sleep(0)
            for number in range(51, 60):
                handle.append("message", turn(number))
            await asyncio.gather(first, *(handle.barrier() for _ in range(5)))
            assert handle.flush_count == 3
            await handle.close()
        # Each row's xmin is the transaction that inserted it: one per flush.
        assert execute(
            dsn,
            f"SELECT count(*), count(DISTINCT xmin::text) FROM {schema}.entries"
            " WHERE session_id = %s",
            SID,
        ) == [(60, 3)]

    @contract_test
    async def test_payloads_are_stored_byte_for_byte_as_jsonl_writes_them(
        self, dsn: str, schema: str, tmp_path: Path
    ) -> None:
        every = EveryScheduleRecord(
            id=make_schedule_id(2),
            prompt='stretch ☕ "now"\n\t\\ </script>',
            every_seconds=300,
            scheduled_at="2026-05-01T09:05:00.000Z",
        )
        after = AfterScheduleRecord(
            id=make_schedule_id(3),
            prompt="東京 \u2028 \u202e \U000e0041",
            after_seconds=90,
            scheduled_at="2026-05-01T09:01:30.000Z",
        )
        written = [
            ("message", user_message("remind me", at=NOW)),
            ("schedule/change", schedule_create(1)),
            ("schedule/change", create_change(every)),
            ("schedule/change", create_change(after)),
            ("schedule/change", dispatch_change(make_schedule_id(2), Instant(LATER))),
            ("schedule/change", dispatch_change(make_schedule_id(1))),
            ("schedule/change", delete_change(make_schedule_id(2))),
        ]
        jsonl = JsonlSessionStore(tmp_path)
        async with (
            await jsonl.create(now=NOW, session_id=SID) as file_handle,
            PostgresSessionStore(dsn, schema=schema) as store,
            await store.create(now=NOW, session_id=SID) as database_handle,
        ):
            for entry_type, payload in written:
                file_handle.append(entry_type, payload)
                database_handle.append(entry_type, payload)
            await file_handle.barrier()
            await database_handle.barrier()
        lines = (tmp_path / f"{SID}.jsonl").read_bytes().splitlines()
        fields = [msgspec.json.decode(line, type=dict[str, msgspec.Raw]) for line in lines]
        file_entries = [
            (msgspec.json.decode(line["type"], type=str), bytes(line["data"]))
            for line in fields[1:]
            if "data" in line
        ]
        rows = execute(
            dsn,
            f"SELECT type, data FROM {schema}.entries WHERE session_id = %s ORDER BY position",
            SID,
        )
        stored: list[tuple[str, bytes]] = []
        for stored_type, stored_data in rows:
            assert isinstance(stored_type, str)
            assert isinstance(stored_data, bytes)
            stored.append((stored_type, stored_data))
        assert stored == file_entries
        assert len(stored) == len(written)
        header = execute(dsn, f"SELECT header FROM {schema}.sessions")[0][0]
        assert isinstance(header, bytes)
        # The same header, apart from the storage format each store writes.
        file_header = msgspec.json.decode(bytes(fields[0]["data"]))
        database_header = msgspec.json.decode(header)
        assert isinstance(file_header, dict)
        assert isinstance(database_header, dict)
        assert {**file_header, "format": None} == {**database_header, "format": None}


class TestSchemaAndDamage:
    def test_a_program_whose_opens_race_to_a_missing_schema_ends(self, dsn: str) -> None:
        # Two first uses at once: the one that opened the pool fails the schema check while the
        # other is still opening its own, which ``asyncio.run`` then cancels on the way out. A
        # cancelled open used to leave the pool's workers connecting, and the program hung.
        script = textwrap.dedent(
            f"""
            import asyncio
            from session_schedule.core.instants import Instant
            from session_schedule.session.errors import SessionError
            from session_schedule.session.postgres import PostgresSessionStore

            async def main() -> None:
                async with PostgresSessionStore({dsn!r}, schema={fresh_schema_name()!r}) as store:
                    async def one() -> None:
                        async with await store.create(now=Instant(0)):
                            pass
                    await asyncio.gather(one(), one())

            try:
                asyncio.run(main())
            except SessionError as error:
                print(error.message)
            """
        )
        finished = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(Path(session_schedule.__file__).parents[1])},
            check=True,
        )
        assert "holds no session store; create it with `session-schedule " in finished.stdout
        assert finished.stdout.endswith(" db init`\n")

    @contract_test
    async def test_a_store_refuses_a_missing_older_or_newer_schema(self, dsn: str) -> None:
        name = fresh_schema_name()
        database = str(execute(dsn, "SELECT current_database()")[0][0])
        where = f"schema {name} of PostgreSQL database {database}"
        try:
            with pytest.raises(SessionError) as caught:
                await PostgresSessionStore(dsn, schema=name).list()
            assert caught.value.message == (
                f"{where} holds no session store; create it with "
                f"`{setup_command(PostgresLocation(dsn=dsn, schema=name), 'init')}`"
            )
            migrate(dsn, schema=name)
            execute(dsn, f"INSERT INTO {name}.schema_version (version) VALUES (3)")
            store = PostgresSessionStore(dsn, schema=name)
            for attempt in (store.list(), store.read(SID), store.open(SID)):
                with pytest.raises(SessionError) as refused:
                    await attempt
                assert refused.value.message == (
                    f"{where} is at version 3, newer than this program's 2; upgrade the program"
                )
        finally:
            drop_schema(dsn, name)

    @contract_test
    async def test_damage_is_reported_and_left_untouched(self, dsn: str, schema: str) -> None:
        database = str(execute(dsn, "SELECT current_database()")[0][0])
        place = f"schema {schema} of PostgreSQL database {database}"
        async with PostgresSessionStore(dsn, schema=schema) as store:
            async with await store.create(now=NOW, session_id=SID) as handle:
                handle.append("message", turn(0))
                handle.append("schedule/change", schedule_create(1))
                await handle.barrier()
            cases: list[tuple[str, type[Exception], str]] = [
                (
                    f"UPDATE {schema}.entries SET data = convert_to(replace("
                    "convert_from(data, 'UTF8'), '\"version\":1', '\"version\":2'), 'UTF8')",
                    ScheduleError,
                    f"corrupt_schedule_log: schedule/change at entry 1 of session {SID} "
                    f"({place}) is corrupt: an `at` schedule must be created with version 1, "
                    "not 2 - at `$.version`",
                ),
                (
                    f"UPDATE {schema}.entries SET type = 'calendar/event' WHERE position = 0",
                    SessionCorrupt,
                    f"session {SID} is corrupt at entry 0 ({place}): "
                    f"unknown entry type 'calendar/event'{UNTOUCHED}",
                ),
                (
                    f"DELETE FROM {schema}.entries WHERE position = 0",
                    SessionCorrupt,
                    f"session {SID} is corrupt at entry 0 ({place}): "
                    f"the entry is missing (the next stored is 1){UNTOUCHED}",
                ),
            ]
            for statement, error, message in cases:
                execute(dsn, statement)
                before = execute(dsn, f"SELECT * FROM {schema}.entries ORDER BY position")
                for attempt in (store.open, store.read, lambda s: store.fork(s, at=0, now=NOW)):
                    with pytest.raises(error) as caught:
                        await attempt(SID)
                    assert str(caught.value) == message
                assert execute(dsn, f"SELECT * FROM {schema}.entries ORDER BY position") == before
                execute(dsn, f"DELETE FROM {schema}.entries")
                async with await store.open(SID) as repaired:
                    repaired.append("message", turn(0))
                    repaired.append("schedule/change", schedule_create(1))
                    await repaired.barrier()
            execute(dsn, f"UPDATE {schema}.sessions SET header = '{{}}'::bytea")
            headers, problems = await store.scan()
            assert headers == ()
            assert [problem.message for problem in problems] == [
                f"session {SID} is corrupt at its header ({place}): "
                f"object missing required field `format`{UNTOUCHED}"
            ]

    @contract_test
    async def test_a_row_edited_by_hand_under_a_checkpoint_is_found_by_check(
        self, dsn: str, schema: str
    ) -> None:
        """Rows carry no checksum: a covered row other than the last, edited by hand, still
        decodes and leaves the checkpoint bound, so opening the session believes the
        checkpoint's reminders while every read shows the row's. ``check``'s reading compares
        the checkpoint with the fold of every row and says so."""

        def edit(position: int, old: str, new: str) -> None:
            execute(
                dsn,
                f"UPDATE {schema}.entries SET data = convert_to(replace("
                "convert_from(data, 'UTF8'), %s, %s), 'UTF8') WHERE position = %s",
                old,
                new,
                position,
            )

        async with PostgresSessionStore(dsn, schema=schema) as store:
            async with await store.create(now=NOW, session_id=SID) as handle:
                handle.append("schedule/change", schedule_create(1))
                handle.append("schedule/change", schedule_create(2))
                handle.append("message", turn(2))
                await handle.barrier()
            sound = await store.checked_read(SID)
            assert (sound.snapshot, sound.problems) == (await store.read(SID), ())
            edit(0, "reminder 1", "reminder X")
            async with await store.open(SID) as handle:
                assert handle.resume is not None
                assert [record.prompt for record in handle.resume.records] == [
                    "reminder 1",
                    "reminder 2",
                ]
                assert "reminder X" in str(handle.entries[0].payload)
            edited = await store.checked_read(SID)
            assert edited.snapshot == await store.read(SID)
            assert [record.prompt for record in edited.state.by_creation()] == [
                "reminder X",
                "reminder 2",
            ]
            assert edited.problems == (
                "its checkpoint (its row in the checkpoints table) is bound to its log but does "
                "not say what the log says (its active reminders are not the log's); delete the "
                f"checkpoint (DELETE FROM \"{schema}\".checkpoints WHERE session_id = '{SID}'; "
                "it is rebuilt from the log)",
            )
            execute(dsn, f"DELETE FROM {schema}.checkpoints WHERE session_id = %s", SID)
            assert (await store.checked_read(SID)).problems == ()
            async with await store.open(SID) as handle:
                assert handle.resume is None
            assert (await store.checked_read(SID)).problems == ()
            # An edit of the last covered row unbinds the checkpoint: it would not be used.
            edit(2, "turn 2", "turn X")
            assert (await store.checked_read(SID)).problems == ()
            with pytest.raises(SessionNotFound):
                await store.checked_read(SessionId("s_bbbbbbbbbbbb"))


async def _read(dsn: str, schema: str, session_id: SessionId) -> SessionSnapshot:
    async with PostgresSessionStore(dsn, schema=schema) as store:
        return await store.read(session_id)


def at_change(number: int, target: str) -> object:
    return create_change(
        AtScheduleRecord(id=make_schedule_id(number), prompt=f"at {number}", scheduled_at=target)
    )


class TestNextTargets:
    @contract_test
    async def test_commits_keep_each_sessions_next_target(
        self, dsn: str, schema: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        ids = [SessionId(f"s_{letter * 12}") for letter in "abcde"]
        a, b, c, d, e = ids
        async with PostgresSessionStore(dsn, schema=schema) as store:
            handles = {sid: await store.create(now=NOW, session_id=sid) for sid in ids}
            handles[a].append("schedule/change", at_change(1, "2026-05-01T10:00:00.000Z"))
            handles[a].append("schedule/change", at_change(2, "2026-05-01T12:00:00.000Z"))
            handles[b].append("schedule/change", at_change(1, "2026-05-01T09:30:00.000Z"))
            handles[c].append("message", turn(0))
            handles[d].append("schedule/change", at_change(1, "2026-05-01T09:00:00.001Z"))
            handles[d].append("schedule/change", delete_change(make_schedule_id(1)))
            every = EveryScheduleRecord(
                id=make_schedule_id(1),
                prompt="every",
                every_seconds=600,
                scheduled_at="2026-05-01T09:10:00.000Z",
            )
            handles[e].append("schedule/change", create_change(every))
            await asyncio.gather(*(handle.barrier() for handle in handles.values()))

            def due(text: str) -> list[tuple[str, str]]:
                return [(row.session_id, format_instant(row.next_target)) for row in found[text]]

            found = {
                text: await store.due_sessions(parse_instant(text))
                for text in ("2026-05-01T23:00:00.000Z", "2026-05-01T09:30:00.000Z")
            }
            assert due("2026-05-01T23:00:00.000Z") == [
                (e, "2026-05-01T09:10:00.000Z"),
                (b, "2026-05-01T09:30:00.000Z"),
                (a, "2026-05-01T10:00:00.000Z"),
            ]
            assert due("2026-05-01T09:30:00.000Z") == [(e, "2026-05-01T09:10:00.000Z")]
            assert len(await store.due_sessions(parse_instant(LATE), limit=1)) == 1

            # Dispatches move it; a message-only commit leaves it; a delete of the last clears it.
            handles[a].append("schedule/change", dispatch_change(make_schedule_id(1)))
            handles[e].append(
                "schedule/change",
                dispatch_change(make_schedule_id(1), parse_instant("2026-05-01T09:25:00.000Z")),
            )
            handles[b].append("schedule/change", delete_change(make_schedule_id(1)))
            handles[b].append("message", turn(1))
            await asyncio.gather(*(handle.barrier() for handle in handles.values()))
            handles[a].append("message", turn(2))
            await handles[a].barrier()
            assert [
                (row.session_id, format_instant(row.next_target))
                for row in await store.due_sessions(parse_instant(LATE))
            ] == [(e, "2026-05-01T09:30:00.000Z"), (a, "2026-05-01T12:00:00.000Z")]

            # A log the fold rejects is indexed as having nothing active, and says why.
            handles[a].append("schedule/change", delete_change(make_schedule_id(7)))
            await handles[a].barrier()
            assert [row.session_id for row in await store.due_sessions(parse_instant(LATE))] == [e]
            assert f"session {a}: its next target is not indexed: corrupt_schedule_log" in (
                caplog.text
            )

            # A fork has nothing active of its own (its inherited creates only reserve their
            # ids); a reopened session picks up where it was.
            async with await store.fork(e, now=LATER) as fork:
                fork.append("message", turn(3))
                await fork.barrier()
                fork.append("schedule/change", at_change(2, "2026-05-01T11:00:00.000Z"))
                await fork.barrier()
            await handles[e].close()
            async with await store.open(e) as reopened:
                reopened.append("schedule/change", at_change(2, "2026-05-01T09:15:00.000Z"))
                await reopened.barrier()
            assert [
                (row.session_id, format_instant(row.next_target))
                for row in await store.due_sessions(parse_instant(LATE))
            ] == [(e, "2026-05-01T09:15:00.000Z"), (fork.id, "2026-05-01T11:00:00.000Z")]

    @contract_test
    async def test_a_fenced_commit_leaves_the_index_alone(self, dsn: str, schema: str) -> None:
        async with (
            PostgresSessionStore(dsn, schema=schema) as first_store,
            PostgresSessionStore(dsn, schema=schema) as second_store,
        ):
            first = await first_store.create(now=NOW, session_id=SID)
            expire_lease(dsn, schema)
            async with await second_store.open(SID):
                first.append("schedule/change", at_change(1, "2026-05-01T10:00:00.000Z"))
                with pytest.raises(PersistenceUncertain):
                    await first.barrier()
                assert await second_store.due_sessions(parse_instant(LATE)) == ()

    @contract_test
    async def test_a_commit_that_leaves_the_target_as_it_was_leaves_the_row_alone(
        self, dsn: str, schema: str
    ) -> None:
        def row() -> tuple[object, ...]:
            # ``xmin``: the transaction that wrote the row's current version.
            [found] = execute(dsn, f"SELECT xmin::text, next_target FROM {schema}.next_targets")
            return found

        async with PostgresSessionStore(dsn, schema=schema) as store:
            handle = await store.create(now=NOW, session_id=SID)
            handle.append("schedule/change", at_change(1, "2026-05-01T10:00:00.000Z"))
            await handle.barrier()
            first = row()
            # A later reminder: the earliest target is still the first one's.
            handle.append("schedule/change", at_change(2, "2026-05-01T12:00:00.000Z"))
            await handle.barrier()
            assert row() == first
            # An earlier one moves it, and its commit writes the row.
            handle.append("schedule/change", at_change(3, "2026-05-01T09:00:00.000Z"))
            await handle.barrier()
            moved = row()
            assert moved[0] != first[0]
            assert [
                (found.session_id, format_instant(found.next_target))
                for found in await store.due_sessions(parse_instant(LATE))
            ] == [(SID, "2026-05-01T09:00:00.000Z")]
            await handle.close()
            # A new owner does not know what the row holds: its first commit with a schedule
            # change writes it, even with the same target.
            async with await store.open(SID) as reopened:
                reopened.append("schedule/change", at_change(4, "2026-05-01T13:00:00.000Z"))
                await reopened.barrier()
                again = row()
                assert (again[0] != moved[0], again[1]) == (True, moved[1])


class TestStoreEdges:
    def test_a_lease_and_a_pool_must_be_positive(self) -> None:
        for bad in (0, -1.0):
            with pytest.raises(ValueError, match=f"lease_seconds must be positive, not {bad}"):
                PostgresSessionStore("postgresql:///unused", lease_seconds=bad)
        with pytest.raises(ValueError, match="pool_size must be at least 1, not 0"):
            PostgresSessionStore("postgresql:///unused", pool_size=0)

    @contract_test
    async def test_a_random_id_taken_meanwhile_is_never_reused(
        self, dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        fresh = iter([SID, SessionId("s_bbbbbbbbbbbb")])
        monkeypatch.setattr(postgres_module, "new_session_id", lambda: next(fresh))
        async with PostgresSessionStore(dsn, schema=schema) as store:
            async with await store.create(now=NOW, session_id=SID):
                pass
            async with await store.create(now=NOW) as handle:
                assert handle.id == "s_bbbbbbbbbbbb"
            assert [header.id for header in await store.list()] == [SID, "s_bbbbbbbbbbbb"]
