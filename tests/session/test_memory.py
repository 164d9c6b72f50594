"""The in-memory reference store: crash semantics and injectable faults."""

from __future__ import annotations

import asyncio

import pytest

from session_schedule.session import (
    MemorySessionStore,
    PersistenceUncertain,
    SessionClosed,
    SessionId,
)
from session_schedule.session import memory as memory_module
from session_schedule.testing.session_contract import NOW, contract_test, turn

SID = SessionId("s_aaaaaaaaaaaa")


class TestCrash:
    @contract_test
    async def test_a_crash_keeps_exactly_what_barriers_covered(self) -> None:
        store = MemorySessionStore()
        handle = await store.create(now=NOW, session_id=SID)
        handle.append("message", turn(0))
        await handle.barrier()
        handle.append("message", turn(1))
        store.crash()
        assert handle.closed
        with pytest.raises(SessionClosed):
            handle.append("message", turn(2))
        async with await store.open(SID) as reopened:
            assert [entry.payload for entry in reopened.entries] == [turn(0)]

    @contract_test
    async def test_a_crash_during_a_flush_fails_it(self) -> None:
        store = MemorySessionStore()
        handle = await store.create(now=NOW, session_id=SID)
        handle.append("message", turn(0))
        flushing = asyncio.ensure_future(handle.barrier())
        await asyncio.sleep(0)
        store.crash()
        with pytest.raises(PersistenceUncertain, match="the store crashed during the flush"):
            await flushing
        assert (await store.read(SID)).entries == ()

    @contract_test
    async def test_read_and_fork_see_only_barriered_entries(self) -> None:
        store = MemorySessionStore()
        async with await store.create(now=NOW, session_id=SID) as handle:
            handle.append("message", turn(0))
            await handle.barrier()
            handle.append("message", turn(1))
            assert len((await store.read(SID)).entries) == 1
            with pytest.raises(ValueError, match="it has 1 durable entries"):
                await store.fork(SID, at=2, now=NOW)
            async with await store.fork(SID, now=NOW) as fork:
                assert fork.header.seed_length == 1


class TestValues:
    @contract_test
    async def test_handles_and_views_describe_themselves(self) -> None:
        store = MemorySessionStore()
        handle = await store.create(now=NOW, session_id=SID)
        handle.append("message", turn(0))
        view = handle.entries
        assert repr(handle) == f"<MemorySessionHandle {SID} open, 1 entries>"
        assert repr(view) == "EntriesView(<1 entries>)"
        store.fail_next_barrier()
        with pytest.raises(PersistenceUncertain):
            await handle.barrier()
        assert repr(handle) == f"<MemorySessionHandle {SID} poisoned, 1 entries>"
        await handle.close()
        assert repr(handle) == f"<MemorySessionHandle {SID} closed, 1 entries>"

    @contract_test
    async def test_a_minted_id_never_reuses_a_taken_one(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = MemorySessionStore()
        async with await store.create(now=NOW, session_id=SID):
            pass
        fresh = iter([SID, SID, SessionId("s_bbbbbbbbbbbb")])
        monkeypatch.setattr(memory_module, "new_session_id", lambda: next(fresh))
        async with await store.create(now=NOW) as handle:
            assert handle.id == "s_bbbbbbbbbbbb"


class TestFaults:
    @contract_test
    async def test_faults_fire_once_each_in_order(self) -> None:
        store = MemorySessionStore()
        store.fail_next_write()
        store.fail_next_barrier()
        first = await store.create(now=NOW)
        with pytest.raises(PersistenceUncertain, match="injected write failure"):
            first.append("message", turn(0))
        second = await store.create(now=NOW)
        second.append("message", turn(0))
        with pytest.raises(PersistenceUncertain, match="injected barrier failure"):
            await second.barrier()
        third = await store.create(now=NOW)
        third.append("message", turn(0))
        await third.barrier()
        for handle in (first, second, third):
            await handle.close()
