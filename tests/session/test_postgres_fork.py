"""Forks of PostgreSQL sessions: the prefix copied in SQL from the parent's checkpoint, the
fork's own checkpoint written in the transaction that creates it, and a damaged parent reported.

Needs ``$SESSION_SCHEDULE_PG_DSN`` (see :mod:`tests.postgres`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import psycopg
import pytest

from session_schedule.session import SessionCorrupt, SessionExists, SessionId, checkpoint
from session_schedule.session.checkpoint import WINDOW, CheckpointFile, seal
from session_schedule.session.handle import LazyEntries
from session_schedule.session.postgres import PostgresSessionStore
from session_schedule.testing.session_contract import NOW, payloads, turn
from tests.postgres import execute, migrated_schema, server_dsn
from tests.session.database_forks import (
    FORK,
    GRANDCHILD,
    SID,
    UNTOUCHED,
    Tables,
    assert_sound_fork,
    decode_checkpoint,
    decodes,
    full_read,
    max_id,
    write_history,
)
from tests.session.histories import append_history


@pytest.fixture
def dsn() -> str:
    return server_dsn()


@pytest.fixture
def schema(dsn: str) -> Iterator[str]:
    with migrated_schema(dsn) as name:
        yield name


@pytest.fixture
async def store(dsn: str, schema: str) -> AsyncIterator[PostgresSessionStore]:
    async with PostgresSessionStore(dsn, schema=schema) as opened:
        yield opened


def rows_of(store: PostgresSessionStore, session: SessionId) -> list[tuple[object, ...]]:
    return execute(
        server_dsn(),
        f"SELECT position, type, data FROM {store.schema}.entries WHERE session_id = %s"
        " ORDER BY position",
        session,
    )


def checkpoint_of(store: PostgresSessionStore, session: SessionId) -> CheckpointFile | None:
    rows = execute(
        server_dsn(), f"SELECT data FROM {store.schema}.checkpoints WHERE session_id = %s", session
    )
    if not rows:
        return None
    data = rows[0][0]
    assert isinstance(data, bytes)
    return decode_checkpoint(data)


def stored_anywhere(store: PostgresSessionStore, session: SessionId) -> list[str]:
    """The tables holding a row of ``session``."""
    return [
        table
        for table, column in (
            ("sessions", "id"),
            ("entries", "session_id"),
            ("checkpoints", "session_id"),
            ("next_targets", "session_id"),
            ("leases", "session_id"),
        )
        if execute(
            server_dsn(), f"SELECT 1 FROM {store.schema}.{table} WHERE {column} = %s", session
        )
    ]


TABLES: Tables[PostgresSessionStore] = (rows_of, checkpoint_of)


async def test_a_fork_copies_the_rows_and_decodes_only_the_parents_window(
    store: PostgresSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    parent = await full_read(store)
    found = checkpoint_of(store, SID)
    assert found is not None
    assert found.entries == len(parent) == 150
    with decodes(monkeypatch) as decoded:
        async with await store.fork(SID, now=NOW, session_id=FORK) as fork:
            assert fork.resume is not None
            assert (fork.resume.position, fork.resume.highest_id) == (150, 60)
            assert isinstance(fork._entries, LazyEntries)
            assert fork._entries.start == 150 - WINDOW
    assert decoded == list(range(150 - WINDOW, 150))
    assert sorted(stored_anywhere(store, FORK)) == [
        "checkpoints",
        "entries",
        "leases",
        "next_targets",
        "sessions",
    ]
    await assert_sound_fork(store, TABLES, FORK, parent, 60, monkeypatch)
    # Bound to the fork's own header and last row.
    own = checkpoint_of(store, FORK)
    assert own is not None
    header = execute(
        server_dsn(), f"SELECT header FROM {store.schema}.sessions WHERE id = %s", FORK
    )
    last = rows_of(store, FORK)[-1]
    assert isinstance(header[0][0], bytes)
    assert isinstance(last[1], str)
    assert isinstance(last[2], bytes)
    assert own.chain == checkpoint.row_digest(header[0][0], last[1], last[2])


async def test_forks_after_and_before_the_parents_checkpoint(
    store: PostgresSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    async with await store.open(SID) as parent:
        await append_history(parent, 61, 70)  # after the checkpoint, which stays where it was
        everything = payloads(parent.entries)
        for at in (150, 155, len(everything)):
            fork = SessionId(f"s_fork{at:08d}")
            with decodes(monkeypatch) as decoded:
                await (await store.fork(SID, at=at, now=NOW, session_id=fork)).close()
            assert decoded == list(range(150 - WINDOW, len(everything)))
            inherited = everything[:at]
            await assert_sound_fork(store, TABLES, fork, inherited, max_id(inherited), monkeypatch)
        for at in (1, 20, 149):
            fork = SessionId(f"s_fork{at:08d}")
            with decodes(monkeypatch) as decoded:
                await (await store.fork(SID, at=at, now=NOW, session_id=fork)).close()
            assert decoded == [*range(150 - WINDOW, len(everything)), *range(at)]
            inherited = everything[:at]
            await assert_sound_fork(store, TABLES, fork, inherited, max_id(inherited), monkeypatch)


async def test_a_parent_without_a_usable_checkpoint_is_decoded_once(
    store: PostgresSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    found = checkpoint_of(store, SID)
    assert found is not None
    forged = seal(msgspec.structs.replace(found, chain=found.chain ^ 1))
    execute(
        server_dsn(),
        f"UPDATE {store.schema}.checkpoints SET data = %s WHERE session_id = %s",
        forged,
        SID,
    )
    with decodes(monkeypatch) as decoded:
        await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    assert decoded == list(range(150))
    await assert_sound_fork(store, TABLES, FORK, await full_read(store), 60, monkeypatch)


async def test_forks_of_forks(store: PostgresSessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    await write_history(store)
    parent = await full_read(store)
    async with await store.fork(SID, now=NOW, session_id=FORK) as fork:
        fork.append("message", turn(500))
        await fork.barrier()
    child = await full_read(store, FORK)
    assert child == [*parent, ("message", turn(500))]
    with decodes(monkeypatch) as decoded:
        async with await store.fork(FORK, now=NOW, session_id=GRANDCHILD) as grandchild:
            assert grandchild.header.seed_length == len(child)
    assert decoded == list(range(len(child) - WINDOW, len(child)))
    assert rows_of(store, GRANDCHILD) == rows_of(store, FORK)
    assert await full_read(store, GRANDCHILD) == child


async def test_a_parent_damaged_after_its_checkpoint_is_not_forked(
    store: PostgresSessionStore,
) -> None:
    await write_history(store)
    async with await store.open(SID) as parent:
        await append_history(parent, 61, 62)
        execute(
            server_dsn(),
            f"UPDATE {store.schema}.entries SET type = 'calendar/event'"
            " WHERE session_id = %s AND position = 152",
            SID,
        )
        with pytest.raises(SessionCorrupt) as caught:
            await store.fork(SID, now=NOW, session_id=FORK)
    database = psycopg.conninfo.conninfo_to_dict(server_dsn())["dbname"]
    message = (
        f"session {SID} is corrupt at entry 152 (schema {store.schema} of PostgreSQL database "
        f"{database}): unknown entry type 'calendar/event'{UNTOUCHED}"
    )
    assert str(caught.value) == message
    assert stored_anywhere(store, FORK) == []
    with pytest.raises(SessionCorrupt) as opened:
        await store.open(SID)
    assert str(opened.value) == message


async def test_a_gap_before_the_parents_window_is_reported_not_forked(
    store: PostgresSessionStore,
) -> None:
    await write_history(store)
    execute(
        server_dsn(),
        f"DELETE FROM {store.schema}.entries WHERE session_id = %s AND position = 10",
        SID,
    )
    with pytest.raises(SessionCorrupt) as caught:
        await store.fork(SID, now=NOW, session_id=FORK)
    with pytest.raises(SessionCorrupt) as read:
        await store.read(SID)
    assert str(caught.value) == str(read.value)
    assert "at entry 10" in str(caught.value)
    assert "the entry is missing (the next stored is 11)" in str(caught.value)
    assert stored_anywhere(store, FORK) == []


async def test_a_fork_whose_name_is_taken_leaves_the_session(
    store: PostgresSessionStore,
) -> None:
    await write_history(store)
    async with await store.create(now=NOW, session_id=FORK) as other:
        other.append("message", turn(1))
        await other.barrier()
    before = (rows_of(store, FORK), checkpoint_of(store, FORK))
    with pytest.raises(SessionExists):
        await store.fork(SID, now=NOW, session_id=FORK)
    assert (rows_of(store, FORK), checkpoint_of(store, FORK)) == before


async def test_a_fork_that_fails_in_its_transaction_leaves_nothing(
    store: PostgresSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    parent = await full_read(store)

    def failing(content: object, *, chain: int | None = None) -> bytes:
        raise RuntimeError("the checkpoint could not be sealed")

    with monkeypatch.context() as patch:
        patch.setattr(checkpoint, "seal", failing)
        with pytest.raises(RuntimeError, match="could not be sealed"):
            await store.fork(SID, now=NOW, session_id=FORK)
    # The rows copied and the lease taken went with the transaction.
    assert stored_anywhere(store, FORK) == []
    await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    await assert_sound_fork(store, TABLES, FORK, parent, 60, monkeypatch)


_CRASH = textwrap.dedent(
    """
    import asyncio, os, sys
    from session_schedule.core.instants import parse_instant
    from session_schedule.session import checkpoint
    from session_schedule.session.postgres import PostgresSessionStore

    dsn, schema, parent, fork, when = sys.argv[1:6]

    def crash(*args, **kwargs):
        os._exit(9)  # the rows copied and the lease taken, the transaction not committed

    if when == "in":
        checkpoint.seal = crash

    async def main():
        store = PostgresSessionStore(dsn, schema=schema)
        now = parse_instant("2026-05-01T09:00:00.000Z")
        await store.fork(parent, now=now, session_id=fork)
        os._exit(9)  # committed: the fork is made

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("when", ["in", "after"])
async def test_a_crash_in_a_fork_leaves_no_fork_or_a_whole_one(
    store: PostgresSessionStore, when: str
) -> None:
    await write_history(store)
    parent = await full_read(store)
    crashed = subprocess.run(
        [sys.executable, "-c", _CRASH, server_dsn(), store.schema, SID, FORK, when],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(checkpoint.__file__).parents[2])},
    )
    assert crashed.returncode == 9, crashed.stderr
    if when == "in":
        assert stored_anywhere(store, FORK) == []
    else:
        assert sorted(stored_anywhere(store, FORK)) == [
            "checkpoints",
            "entries",
            "leases",
            "next_targets",
            "sessions",
        ]
        assert await full_read(store, FORK) == parent
        found = checkpoint_of(store, FORK)
        assert found is not None
        assert found.entries == len(parent)
    assert await full_read(store) == parent
