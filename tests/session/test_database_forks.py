"""Forks in the database stores, each test run on SQLite and on PostgreSQL: the prefix copied in
SQL from the parent's checkpoint, the fork's own checkpoint written in the transaction that
creates it, and a damaged parent reported.

The PostgreSQL runs need ``$SESSION_SCHEDULE_PG_DSN`` (see :mod:`tests.postgres`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from session_schedule.session import SessionCorrupt, SessionExists, SessionId, checkpoint
from session_schedule.session.checkpoint import WINDOW, seal
from session_schedule.session.handle import LazyEntries
from session_schedule.testing.session_contract import NOW, payloads, turn
from tests.session.database_forks import (
    FORK,
    GRANDCHILD,
    SID,
    UNTOUCHED,
    decodes,
    full_read,
    max_id,
    write_history,
)
from tests.session.fork_stores import STORES, ForkedStore, forked_store
from tests.session.histories import append_history


@pytest.fixture(params=STORES)
async def forked(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ForkedStore]:
    async with forked_store(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
async def parent(forked: ForkedStore) -> list[tuple[str, object]]:
    """The parent session's history written (:func:`write_history`); what a read of it gives."""
    await write_history(forked.store)
    return await full_read(forked.store)


async def test_a_fork_copies_the_rows_and_decodes_only_the_parents_window(
    forked: ForkedStore, parent: list[tuple[str, object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = forked.store
    found = forked.checkpoint_of(SID)
    assert found is not None
    assert found.entries == len(parent) == 150
    with decodes(monkeypatch) as decoded:
        async with await store.fork(SID, now=NOW, session_id=FORK) as fork:
            assert fork.resume is not None
            assert (fork.resume.position, fork.resume.highest_id) == (150, 60)
            assert isinstance(fork._entries, LazyEntries)
            assert fork._entries.start == 150 - WINDOW
            assert payloads(fork.entries[150 - WINDOW :]) == parent[150 - WINDOW :]
    # The parent's window, checked as an open checks it; nothing before it.
    assert decoded == list(range(150 - WINDOW, 150))
    assert sorted(forked.stored_anywhere(FORK)) == forked.whole_fork
    await forked.assert_sound_fork(FORK, parent, 60, monkeypatch)


async def test_the_forks_checkpoint_is_bound_to_its_own_header(forked: ForkedStore) -> None:
    """What binds the fork's checkpoint is the fork's header and its entry ``n-1``."""
    await write_history(forked.store)
    await (await forked.store.fork(SID, now=NOW, session_id=FORK)).close()
    found = forked.checkpoint_of(FORK)
    assert found is not None
    assert forked.rows_of(FORK)[-1][0] == 149
    entry_type, data = forked.entry_of(FORK, 149)
    assert found.chain == checkpoint.row_digest(forked.header_of(FORK), entry_type, data)


async def test_a_fork_after_the_parents_checkpoint_decodes_only_the_rows_after_its_window(
    forked: ForkedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = forked.store
    await write_history(store)
    async with await store.open(SID) as parent:
        await append_history(parent, 61, 70)  # after the checkpoint, which stays where it was
        checkpointed = forked.checkpoint_of(SID)
        assert checkpointed is not None
        assert checkpointed.entries == 150
        everything = payloads(parent.entries)
        for at in (150, 155, len(everything)):
            fork = SessionId(f"s_fork{at:08d}")
            with decodes(monkeypatch) as decoded:
                await (await store.fork(SID, at=at, now=NOW, session_id=fork)).close()
            assert decoded == list(range(150 - WINDOW, len(everything)))
            inherited = everything[:at]
            await forked.assert_sound_fork(fork, inherited, max_id(inherited), monkeypatch)


@pytest.mark.parametrize("rows_after_the_checkpoint", [False, True])
async def test_a_fork_before_the_parents_checkpoint_decodes_the_rows_before_the_fork_point(
    forked: ForkedStore, monkeypatch: pytest.MonkeyPatch, rows_after_the_checkpoint: bool
) -> None:
    """With the parent closed at its checkpoint, or open with rows after it: the parent's rows
    from its checkpoint's window on are checked, then those before the fork point decoded."""
    store = forked.store
    await write_history(store)
    async with contextlib.AsyncExitStack() as stack:
        if rows_after_the_checkpoint:
            parent = await stack.enter_async_context(await store.open(SID))
            await append_history(parent, 61, 70)
            everything = payloads(parent.entries)
            assert len(everything) > 150
        else:
            everything = await full_read(store)
            assert len(everything) == 150
        for at in (1, 20, 149):
            fork = SessionId(f"s_fork{at:08d}")
            with decodes(monkeypatch) as decoded:
                await (await store.fork(SID, at=at, now=NOW, session_id=fork)).close()
            assert decoded == [*range(150 - WINDOW, len(everything)), *range(at)]
            inherited = everything[:at]
            await forked.assert_sound_fork(fork, inherited, max_id(inherited), monkeypatch)


async def test_a_fork_at_0_inherits_nothing_and_has_no_checkpoint(forked: ForkedStore) -> None:
    await write_history(forked.store)
    async with await forked.store.fork(SID, at=0, now=NOW, session_id=FORK) as fork:
        assert (fork.header.seed_length, fork.header.parent_id, fork.resume) == (0, SID, None)
    assert await full_read(forked.store, FORK) == []
    assert sorted(forked.stored_anywhere(FORK)) == [
        table for table in forked.whole_fork if table not in ("entries", "checkpoints")
    ]


async def test_a_parent_without_a_checkpoint_is_decoded_once(
    forked: ForkedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(forked.store)
    forked.store_checkpoint(SID, None)
    parent = await full_read(forked.store)
    with decodes(monkeypatch) as decoded:
        await (await forked.store.fork(SID, now=NOW, session_id=FORK)).close()
    assert decoded == list(range(150))
    await forked.assert_sound_fork(FORK, parent, 60, monkeypatch)


async def test_a_forged_parent_checkpoint_is_not_copied_from(
    forked: ForkedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(forked.store)
    found = forked.checkpoint_of(SID)
    assert found is not None
    # Bound to another entry 149 than the log's: ignored, the parent decoded whole.
    forked.store_checkpoint(SID, seal(msgspec.structs.replace(found, chain=found.chain ^ 1)))
    with decodes(monkeypatch) as decoded:
        await (await forked.store.fork(SID, now=NOW, session_id=FORK)).close()
    assert decoded == list(range(150))
    await forked.assert_sound_fork(FORK, await full_read(forked.store), 60, monkeypatch)


async def test_forks_of_forks(
    forked: ForkedStore, parent: list[tuple[str, object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = forked.store
    async with await store.fork(SID, now=NOW, session_id=FORK) as fork:
        fork.append("message", turn(500))
        await fork.barrier()
    child = await full_read(store, FORK)
    assert child == [*parent, ("message", turn(500))]
    # The child's checkpoint (written at its close) binds: the grandchild copies up to it.
    with decodes(monkeypatch) as decoded:
        async with await store.fork(FORK, now=NOW, session_id=GRANDCHILD) as grandchild:
            assert grandchild.header.seed_length == len(child)
    assert decoded == list(range(len(child) - WINDOW, len(child)))
    assert forked.rows_of(GRANDCHILD) == forked.rows_of(FORK)
    assert await full_read(store, GRANDCHILD) == child
    found = forked.checkpoint_of(GRANDCHILD)
    assert found is not None
    assert found.entries == len(child)


async def test_a_parent_damaged_after_its_checkpoint_is_not_forked(forked: ForkedStore) -> None:
    store = forked.store
    await write_history(store)
    async with await store.open(SID) as parent:
        await append_history(parent, 61, 62)
        # Damage an acknowledged entry after the checkpoint.
        forked.set_entry_type(SID, 152, "calendar/event")
        message = (
            f"session {SID} is corrupt at entry 152 ({forked.where}): "
            f"unknown entry type 'calendar/event'{UNTOUCHED}"
        )
        with pytest.raises(SessionCorrupt) as caught:
            await store.fork(SID, now=NOW, session_id=FORK)
        assert str(caught.value) == message
    assert forked.stored_anywhere(FORK) == []
    # What an open of the parent reports, word for word.
    with pytest.raises(SessionCorrupt) as opened:
        await store.open(SID)
    assert str(opened.value) == message


async def test_a_gap_before_the_parents_window_is_reported_not_forked(
    forked: ForkedStore,
) -> None:
    await write_history(forked.store)
    forked.delete_entry(SID, 10)
    with pytest.raises(SessionCorrupt) as caught:
        await forked.store.fork(SID, now=NOW, session_id=FORK)
    assert str(caught.value) == (
        f"session {SID} is corrupt at entry 10 ({forked.where}): "
        f"the entry is missing (the next stored is 11){UNTOUCHED}"
    )
    assert forked.stored_anywhere(FORK) == []
    # The same error a read of the parent gives.
    with pytest.raises(SessionCorrupt) as read:
        await forked.store.read(SID)
    assert str(read.value) == str(caught.value)


async def test_a_fork_whose_name_is_taken_leaves_the_sessions_rows_and_checkpoint(
    forked: ForkedStore,
) -> None:
    store = forked.store
    await write_history(store)
    async with await store.create(now=NOW, session_id=FORK) as other:
        other.append("message", turn(1))
        await other.barrier()
    before = (forked.rows_of(FORK), forked.checkpoint_of(FORK))
    with pytest.raises(SessionExists):
        await store.fork(SID, now=NOW, session_id=FORK)
    assert (forked.rows_of(FORK), forked.checkpoint_of(FORK)) == before


async def test_a_fork_that_fails_mid_transaction_leaves_nothing_and_its_id_free(
    forked: ForkedStore, parent: list[tuple[str, object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = forked.store
    with monkeypatch.context() as patch:
        error, pattern = forked.fail_in_fork_transaction(patch)
        with pytest.raises(error, match=pattern):
            await store.fork(SID, now=NOW, session_id=FORK)
    # The rows copied (and on PostgreSQL the lease taken) went with the transaction.
    assert forked.stored_anywhere(FORK) == []
    # Not owned any more: the same fork succeeds.
    await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    await forked.assert_sound_fork(FORK, parent, 60, monkeypatch)


_CRASH = textwrap.dedent(
    """
    import asyncio, os, sys
    from session_schedule.core.instants import parse_instant
    from session_schedule.session import SqliteSessionStore, checkpoint
    from session_schedule.session.postgres import PostgresSessionStore

    parent, fork, when, kind, *where = sys.argv[1:]

    def crash(*args, **kwargs):
        os._exit(9)  # the rows copied, the transaction not committed

    if when == "in":
        checkpoint.seal = crash

    async def main():
        if kind == "sqlite":
            store = SqliteSessionStore(*where)
        else:
            store = PostgresSessionStore(where[0], schema=where[1])
        now = parse_instant("2026-05-01T09:00:00.000Z")
        await store.fork(parent, now=now, session_id=fork)
        os._exit(9)  # committed: the fork is made

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("when", ["in", "after"])
async def test_a_crash_in_a_fork_leaves_no_fork_or_a_whole_one(
    forked: ForkedStore, parent: list[tuple[str, object]], when: str
) -> None:
    crashed = subprocess.run(
        [sys.executable, "-c", _CRASH, SID, FORK, when, *forked.arguments()],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(checkpoint.__file__).parents[2])},
    )
    assert crashed.returncode == 9, crashed.stderr
    if when == "in":
        assert forked.stored_anywhere(FORK) == []
    else:
        assert sorted(forked.stored_anywhere(FORK)) == forked.whole_fork
        assert await full_read(forked.store, FORK) == parent
        found = forked.checkpoint_of(FORK)
        assert found is not None
        assert found.entries == len(parent)
    assert await full_read(forked.store) == parent
