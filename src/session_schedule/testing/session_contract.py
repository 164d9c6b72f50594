# ruff: noqa: S101 - a pytest suite shipped in the package: assert is how pytest reports
"""The contract every Session store must honour, as a reusable pytest suite.

Subclass :class:`SessionStoreContract` in a test module, name the subclass ``Test…`` and implement
its three hooks; pytest then runs every contract test against your store::

    class TestMyStore(SessionStoreContract):
        def make_store(self, root: Path) -> SessionStore:
            return MyStore(root / "sessions")

        def break_next_barrier(self, store, handle, monkeypatch) -> None:
            ...  # make the next flush of `handle` fail the way your storage fails

        def break_next_write(self, store, handle, monkeypatch) -> None:
            ...  # make the next append of `handle` fail (or its next flush)

``make_store`` called twice with the same ``root`` must return stores over the same storage: the
second plays another process. A store that keeps connections open can close them in the optional
``dispose`` hook, which runs at the end of every test, in its event loop. The tests use fixed
instants, never the clock, and run each coroutine with ``asyncio.run`` (no pytest plugin needed).

What the suite pins down: append order and immediacy; header and fork semantics; what a barrier
guarantees (everything appended before it survives a close and is seen by another reader) and
what nothing guarantees before one (after a close without a barrier, a prefix of the unbarriered
entries — possibly none — survives); poisoned handles; ownership refusal; reopening after close;
many sessions side by side; the next-target index behind ``due_sessions``.

A store that keeps checkpoints (:mod:`session_schedule.session.checkpoint`) sets
``checkpoints = True`` and implements :meth:`~SessionStoreContract.read_checkpoint` and
:meth:`~SessionStoreContract.write_checkpoint` (and, to have a damaged entry before a
checkpoint's window checked, :meth:`~SessionStoreContract.corrupt_entry`); one that writes them
while a session is open also sets ``checkpoints_while_open = True``. The suite then checks that
a valid checkpoint is used without reading the log before its window (a live Schedule and a turn
queue started on it included), that each kind of unusable checkpoint is ignored, logged and
rewritten, that a fork's checkpoint activates nothing inherited, that older entries are still
read strictly, and that an open session keeps a bounded number of entries in memory.
"""

from __future__ import annotations

import abc
import asyncio
import functools
import logging
import zlib
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Final, NamedTuple, ParamSpec, final

import msgspec
import pytest
from msgspec import UNSET

from session_schedule.core.changes import (
    create_change,
    delete_change,
    dispatch_change,
    pause_change,
    resume_change,
    snooze_change,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import fold
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.records import (
    AtScheduleRecord,
    Ends,
    EveryScheduleRecord,
    ScheduleRecord,
)
from session_schedule.runtime.live import LiveSchedule
from session_schedule.runtime.turns import TurnQueue
from session_schedule.session import (
    DueSession,
    LogEntry,
    MessageEntry,
    PersistenceUncertain,
    SessionBusy,
    SessionClosed,
    SessionCorrupt,
    SessionExists,
    SessionHandle,
    SessionId,
    SessionNotFound,
    SessionStore,
    ToolCall,
    assistant_message,
    parse_session_id,
    tool_message,
    user_message,
)
from session_schedule.session.checkpoint import EVERY, WINDOW
from session_schedule.session.handle import LazyEntries
from session_schedule.session.quotas import QUOTAS_ENTRY_TYPE, quotas_entry
from session_schedule.session.turns import turn_finished, turn_queued
from session_schedule.testing.clock import FakeClock

P = ParamSpec("P")

NOW: Final = parse_instant("2026-05-01T09:00:00.000Z")
LATER: Final = parse_instant("2026-05-01T10:30:00.000Z")
MALFORMED_IDS: Final = ("", "s_", "../s_aaaaaaaaaaaa", "s_aaaaaaaaaaaa\n", "s_AAAAAAAAAAAA", "x")


def contract_test(
    test: Callable[P, Coroutine[object, object, None]],
) -> Callable[P, None]:
    """Run an ``async`` test method to completion in a fresh event loop.

    On a :class:`SessionStoreContract`, its :meth:`~SessionStoreContract.dispose` hook runs
    afterwards in the same loop, whatever the outcome.
    """

    async def body(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            await test(*args, **kwargs)
        finally:
            if args and isinstance(args[0], SessionStoreContract):
                await args[0].dispose()

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        asyncio.run(body(*args, **kwargs))

    return run


def turn(number: int) -> MessageEntry:
    """A distinct, valid ``message`` payload."""
    return user_message(f"turn {number}", at=Instant(NOW + number))


def schedule_create(number: int) -> object:
    """A distinct, valid ``schedule/change`` create payload."""
    record = AtScheduleRecord(
        id=make_schedule_id(number),
        prompt=f"reminder {number}",
        scheduled_at="2030-01-01T00:00:00.000Z",
    )
    return create_change(record)


def payloads(entries: Sequence[LogEntry]) -> list[tuple[str, object]]:
    return [(entry.type, entry.payload) for entry in entries]


class SessionStoreContract(abc.ABC):
    """The contract tests; subclass and implement the hooks (see the module docstring)."""

    header_format: int = 1
    """The format version a new session's header states."""

    @abc.abstractmethod
    def make_store(self, root: Path) -> SessionStore:
        """A store over the storage under ``root`` (same root, same sessions)."""

    @abc.abstractmethod
    def break_next_barrier(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Make the next flush of ``handle`` fail; storage must work normally afterwards."""

    @abc.abstractmethod
    def break_next_write(
        self, store: SessionStore, handle: SessionHandle, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Make the next append of ``handle`` fail, at the append or at the next barrier."""

    checkpoints: bool = False
    """Whether the store keeps checkpoints (then the checkpoint hooks below are implemented)."""
    checkpoints_while_open: bool = False
    """Whether it also writes them while a session is open, letting older entries leave
    memory."""

    def read_checkpoint(self, store: SessionStore, session_id: SessionId) -> bytes | None:
        """The stored checkpoint of ``session_id`` (``None``: there is none)."""
        raise NotImplementedError

    def write_checkpoint(
        self, store: SessionStore, session_id: SessionId, data: bytes | None
    ) -> None:
        """Replace the stored checkpoint of ``session_id`` (``None``: delete it)."""
        raise NotImplementedError

    def corrupt_entry(self, store: SessionStore, session_id: SessionId, position: int) -> str:
        """Damage the stored entry ``position`` of a closed session so that it no longer
        decodes, leaving every other entry (and the checkpoint's binding) as it is; return the
        message of the ``SessionCorrupt`` reading it raises. ``pytest.skip`` when the storage
        cannot be damaged that way."""
        raise NotImplementedError

    async def dispose(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Release what ``make_store`` opened (pools, connections) at the end of each test.

        Runs in the test's event loop. The default does nothing: stores that hold nothing open
        between calls need no clean-up.
        """

    # Creation and headers.

    @contract_test
    async def test_create_writes_a_fresh_header(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            header = handle.header
            assert parse_session_id(handle.id) == handle.id
            assert (header.format, header.id, header.created_at) == (
                self.header_format,
                handle.id,
                "2026-05-01T09:00:00.000Z",
            )
            assert (header.parent_id, header.seed_length) == (None, 0)
            assert list(handle.entries) == []
            assert (handle.closed, handle.poisoned) == (False, False)
        assert handle.closed
        assert await store.list() == (header,)

    @contract_test
    async def test_create_takes_a_chosen_id_once(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        chosen = SessionId("s_0123456789az")
        async with await store.create(now=NOW, session_id=chosen) as handle:
            assert handle.id == chosen
        with pytest.raises(SessionExists) as caught:
            await store.create(now=LATER, session_id=chosen)
        assert caught.value.session_id == chosen
        assert caught.value.message.startswith(f"session {chosen} exists already in ")
        assert caught.value.message.endswith("; choose another id")
        with pytest.raises(ValueError, match="is not a session id"):
            await store.create(now=NOW, session_id=SessionId("../escape"))
        assert [header.id for header in await store.list()] == [chosen]

    @contract_test
    async def test_created_ids_are_distinct(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        ids = set()
        for _ in range(5):
            async with await store.create(now=NOW) as handle:
                ids.add(handle.id)
        assert len(ids) == 5

    # Appending and reading.

    @contract_test
    async def test_append_is_immediate_and_ordered(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            view = handle.entries
            assert handle.append("message", turn(0)) == 0
            assert handle.append("schedule/change", schedule_create(1)) == 1
            assert handle.append("message", turn(2)) == 2
            assert len(view) == 3
            assert [entry.position for entry in view] == [0, 1, 2]
            assert payloads(view) == [
                ("message", turn(0)),
                ("schedule/change", schedule_create(1)),
                ("message", turn(2)),
            ]
            assert view[-1] == LogEntry(position=2, type="message", payload=turn(2))
            assert view[1:] == tuple(view)[1:]
            await handle.barrier()
            assert payloads(handle.entries) == payloads(view)

    @contract_test
    async def test_append_refuses_developer_errors_without_harm(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            handle.append("message", turn(0))
            with pytest.raises(ValueError, match="not registered in the persistence catalog"):
                handle.append("no/such-type", turn(1))
            with pytest.raises(ValueError, match="payload must decode strictly"):
                handle.append("message", {"role": "user", "content": "x"})
            with pytest.raises(ValueError, match="payload must decode strictly"):
                handle.append("schedule/change", turn(1))
            with pytest.raises(ValueError, match="payload must decode strictly"):
                handle.append("message", object())
            assert not handle.poisoned
            assert handle.append("message", turn(1)) == 1
            await handle.barrier()
        snapshot = await store.read(handle.id)
        assert payloads(snapshot.entries) == [("message", turn(0)), ("message", turn(1))]

    @contract_test
    async def test_payloads_round_trip_through_storage(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        every = EveryScheduleRecord(
            id=make_schedule_id(2),
            prompt='stretch ☕ "now"\n\tthen sit',
            every_seconds=300,
            scheduled_at="2026-05-01T09:05:00.000Z",
        )
        written = [
            ("message", user_message("remind me, 東京 time", at=NOW)),
            ("message", user_message("[reminder sch_1]", at=LATER, origin="followup")),
            (
                "message",
                assistant_message(
                    "",
                    at=NOW,
                    tool_calls=(
                        ToolCall(id="call_1", name="schedule_create", arguments='{"a":1}'),
                    ),
                ),
            ),
            ("message", tool_message('{"ok":true}', at=NOW, tool_call_id="call_1")),
            ("schedule/change", schedule_create(1)),
            ("schedule/change", create_change(every)),
            ("schedule/change", dispatch_change(make_schedule_id(2), Instant(LATER))),
            ("schedule/change", dispatch_change(make_schedule_id(1))),
            ("schedule/change", delete_change(make_schedule_id(2))),
        ]
        async with await store.create(now=NOW) as handle:
            for entry_type, payload in written:
                handle.append(entry_type, payload)
            await handle.barrier()
        async with await store.open(handle.id) as reopened:
            assert payloads(reopened.entries) == written
            first = reopened.entries[0].payload
            assert isinstance(first, MessageEntry)
            assert first.tool_calls is msgspec.UNSET

    # Barriers and durability.

    @contract_test
    async def test_barrier_shows_entries_to_another_reader(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        elsewhere = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            for number in range(3):
                handle.append("message", turn(number))
            await handle.barrier()
            snapshot = await elsewhere.read(handle.id)
            assert snapshot.header == handle.header
            assert payloads(snapshot.entries) == payloads(handle.entries)
            assert [entry.position for entry in snapshot.entries] == [0, 1, 2]

    @contract_test
    async def test_reopen_after_close_shows_every_barriered_entry(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            handle.append("message", turn(0))
            await handle.barrier()
            handle.append("schedule/change", schedule_create(1))
            await handle.barrier()
        async with await self.make_store(tmp_path).open(handle.id) as reopened:
            assert reopened.header == handle.header
            assert payloads(reopened.entries) == [
                ("message", turn(0)),
                ("schedule/change", schedule_create(1)),
            ]
            assert reopened.append("message", turn(2)) == 2
            await reopened.barrier()
        snapshot = await store.read(handle.id)
        assert len(snapshot.entries) == 3

    @contract_test
    async def test_close_without_barrier_keeps_at_most_a_prefix(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            handle.append("message", turn(0))
            await handle.barrier()
            for number in range(1, 4):
                handle.append("message", turn(number))
            appended = payloads(handle.entries)
        async with await store.open(handle.id) as reopened:
            survived = payloads(reopened.entries)
            assert 1 <= len(survived) <= 4
            assert survived == appended[: len(survived)]
            position = reopened.append("message", turn(9))
            assert position == len(survived)

    @contract_test
    async def test_barriers_share_flushes_and_tolerate_nothing_pending(
        self, tmp_path: Path
    ) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            await handle.barrier()
            for number in range(50):
                handle.append("message", turn(number))
            await asyncio.gather(*(handle.barrier() for _ in range(10)))
            await handle.barrier()
            handle.append("message", turn(50))
            first = asyncio.ensure_future(handle.barrier())
            await asyncio.sleep(0)
            handle.append("message", turn(51))
            await asyncio.gather(first, handle.barrier())
        snapshot = await store.read(handle.id)
        assert [entry.payload for entry in snapshot.entries] == [turn(n) for n in range(52)]

    @contract_test
    async def test_close_lets_a_flush_in_progress_finish(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        handle = await store.create(now=NOW)
        handle.append("message", turn(0))
        flushing = asyncio.ensure_future(handle.barrier())
        await asyncio.sleep(0)
        await handle.close()
        await flushing
        assert payloads((await store.read(handle.id)).entries) == [("message", turn(0))]

    @contract_test
    async def test_a_cancelled_barrier_harms_nothing(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            handle.append("message", turn(0))
            waiting = asyncio.ensure_future(handle.barrier())
            await asyncio.sleep(0)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            handle.append("message", turn(1))
            await handle.barrier()
            assert not handle.poisoned
        assert len((await store.read(handle.id)).entries) == 2

    # Poisoning.

    @contract_test
    async def test_a_failed_barrier_poisons_the_handle(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = self.make_store(tmp_path)
        handle = await store.create(now=NOW)
        handle.append("message", turn(0))
        await handle.barrier()
        view = handle.entries
        self.break_next_barrier(store, handle, monkeypatch)
        handle.append("message", turn(1))
        with pytest.raises(PersistenceUncertain) as caught:
            await handle.barrier()
        await self._check_poisoned(handle, caught.value, view)
        await handle.close()
        await handle.close()
        async with await store.open(handle.id) as reopened:
            assert payloads(reopened.entries)[:1] == [("message", turn(0))]
            reopened.append("message", turn(2))
            await reopened.barrier()

    @contract_test
    async def test_a_failed_write_poisons_the_handle(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = self.make_store(tmp_path)
        handle = await store.create(now=NOW)
        handle.append("message", turn(0))
        await handle.barrier()
        view = handle.entries
        self.break_next_write(store, handle, monkeypatch)
        try:
            handle.append("message", turn(1))
        except PersistenceUncertain as failure:
            caught = failure
        else:
            with pytest.raises(PersistenceUncertain) as raised:
                await handle.barrier()
            caught = raised.value
        await self._check_poisoned(handle, caught, view)
        await handle.close()
        async with await store.open(handle.id) as reopened:
            assert payloads(reopened.entries)[:1] == [("message", turn(0))]

    async def _check_poisoned(
        self, handle: SessionHandle, failure: PersistenceUncertain, view: Sequence[LogEntry]
    ) -> None:
        assert failure.code == "persistence_uncertain"
        assert failure.session_id == handle.id
        assert failure.message.startswith(
            f"session {handle.id} cannot confirm that its entries are durable ("
        )
        assert failure.message.endswith("); reopen the session from storage")
        assert failure.as_schedule_error().code == "persistence_uncertain"
        assert handle.poisoned
        with pytest.raises(PersistenceUncertain) as again:
            await handle.barrier()
        assert again.value.message == failure.message
        with pytest.raises(PersistenceUncertain):
            handle.append("message", turn(7))
        with pytest.raises(PersistenceUncertain):
            _ = handle.entries
        with pytest.raises(PersistenceUncertain):
            len(view)
        with pytest.raises(PersistenceUncertain):
            view[0]
        with pytest.raises(PersistenceUncertain):
            list(view)

    # Ownership.

    @contract_test
    async def test_a_second_owner_is_refused(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        elsewhere = self.make_store(tmp_path)
        handle = await store.create(now=NOW)
        for other in (store, elsewhere):
            with pytest.raises(SessionBusy) as caught:
                await other.open(handle.id)
            assert caught.value.session_id == handle.id
            assert caught.value.message == (
                f"session {handle.id} is open in another process or handle; "
                "close it there before opening it here"
            )
        handle.append("message", turn(0))
        await handle.barrier()
        await handle.close()
        async with await elsewhere.open(handle.id) as reopened:
            assert len(reopened.entries) == 1
            with pytest.raises(SessionBusy):
                await store.open(handle.id)
        async with await store.open(handle.id):
            pass

    @contract_test
    async def test_a_closed_handle_refuses_everything(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        handle = await store.create(now=NOW)
        handle.append("message", turn(0))
        view = handle.entries
        await handle.barrier()
        await handle.close()
        await handle.close()
        assert handle.closed
        expected = f"session {handle.id} is closed; open it again to use it"
        with pytest.raises(SessionClosed, match="is closed"):
            handle.append("message", turn(1))
        with pytest.raises(SessionClosed) as caught:
            await handle.barrier()
        assert caught.value.message == expected
        with pytest.raises(SessionClosed):
            _ = handle.entries
        with pytest.raises(SessionClosed):
            len(view)
        assert handle.header.id == handle.id

    @contract_test
    async def test_unknown_and_malformed_ids_are_not_found(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW):
            pass
        absent = "s_zzzzzzzzzzzz"
        with pytest.raises(SessionNotFound) as caught:
            await store.open(absent)
        assert caught.value.message.startswith(f"session {absent} does not exist in ")
        with pytest.raises(SessionNotFound):
            await store.read(absent)
        with pytest.raises(SessionNotFound):
            await store.fork(absent, now=NOW)
        for text in MALFORMED_IDS:
            for attempt in (store.open, store.read):
                with pytest.raises(SessionNotFound) as malformed:
                    await attempt(text)
                assert malformed.value.message == (
                    f"{text!r} is not a session id: "
                    "expected s_ followed by 12 lower-case letters or digits"
                )
        assert len(await store.list()) == 1

    @contract_test
    async def test_read_neither_owns_nor_blocks(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            handle.append("message", turn(0))
            await handle.barrier()
            await store.read(handle.id)
        snapshot = await store.read(handle.id)
        header, entries = snapshot
        assert header == handle.header
        assert payloads(entries) == [("message", turn(0))]
        async with await store.open(handle.id):
            pass

    # Forks.

    @contract_test
    async def test_fork_copies_a_prefix_and_then_lives_alone(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as parent:
            for number in range(4):
                parent.append("message", turn(number))
            await parent.barrier()
            fork = await store.fork(parent.id, at=2, now=LATER)
            assert fork.id != parent.id
            assert fork.header.parent_id == parent.id
            assert fork.header.seed_length == 2
            assert fork.header.created_at == "2026-05-01T10:30:00.000Z"
            assert payloads(fork.entries) == payloads(parent.entries)[:2]
            assert [entry.position for entry in fork.entries] == [0, 1]
            assert fork.append("schedule/change", schedule_create(1)) == 2
            await fork.barrier()
            parent.append("message", turn(4))
            await parent.barrier()
            own = fork.entries[fork.header.seed_length :]
            assert payloads(own) == [("schedule/change", schedule_create(1))]
            await fork.close()
        parent_snapshot = await store.read(parent.id)
        fork_snapshot = await store.read(fork.id)
        assert [entry.payload for entry in parent_snapshot.entries] == [turn(n) for n in range(5)]
        assert len(fork_snapshot.entries) == 3
        assert fork_snapshot.header == fork.header

    @contract_test
    async def test_fork_bounds(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as parent:
            parent.append("message", turn(0))
            parent.append("message", turn(1))
            await parent.barrier()
        async with await store.fork(parent.id, now=LATER) as everything:
            assert everything.header.seed_length == 2
            assert len(everything.entries) == 2
        async with await store.fork(parent.id, at=0, now=LATER) as nothing:
            assert nothing.header.seed_length == 0
            assert list(nothing.entries) == []
        for at in (-1, 3):
            with pytest.raises(ValueError, match=f"cannot fork session {parent.id} at entry"):
                await store.fork(parent.id, at=at, now=LATER)
        chosen = SessionId("s_f0f0f0f0f0f0")
        async with await store.fork(parent.id, at=1, now=LATER, session_id=chosen) as named:
            assert named.id == chosen
        with pytest.raises(SessionExists):
            await store.fork(parent.id, at=1, now=LATER, session_id=chosen)
        async with await store.fork(chosen, now=LATER) as grandchild:
            assert grandchild.header.parent_id == chosen
            assert grandchild.header.seed_length == 1
        assert len(await store.list()) == 5

    @contract_test
    async def test_a_fork_is_owned_and_the_parent_untouched(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        parent = await store.create(now=NOW)
        parent.append("message", turn(0))
        await parent.barrier()
        fork = await store.fork(parent.id, now=LATER)
        with pytest.raises(SessionBusy):
            await self.make_store(tmp_path).open(fork.id)
        assert parent.append("message", turn(1)) == 1
        await parent.barrier()
        await fork.close()
        await parent.close()
        assert len((await store.read(parent.id)).entries) == 2

    # Many sessions.

    @contract_test
    async def test_many_sessions_side_by_side(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        handles = [await store.create(now=Instant(NOW + number)) for number in range(5)]
        for round_number in range(4):
            for index, handle in enumerate(handles):
                handle.append("message", turn(100 * index + round_number))
        await asyncio.gather(*(handle.barrier() for handle in handles))
        for handle in handles:
            await handle.close()
        reader = self.make_store(tmp_path)
        for index, handle in enumerate(handles):
            snapshot = await reader.read(handle.id)
            assert [entry.payload for entry in snapshot.entries] == [
                turn(100 * index + n) for n in range(4)
            ]
        assert [header.id for header in await reader.list()] == [h.id for h in handles]
        assert await reader.scan() == ((*(await reader.list()),), ())

    @contract_test
    async def test_an_empty_store_lists_nothing(self, tmp_path: Path) -> None:
        assert await self.make_store(tmp_path).list() == ()
        assert await self.make_store(tmp_path).scan() == ((), ())

    @contract_test
    async def test_a_bad_schedule_payload_is_refused_with_the_codec_error(
        self, tmp_path: Path
    ) -> None:
        store = self.make_store(tmp_path)
        async with await store.create(now=NOW) as handle:
            bad = {"version": 2, "operation": "delete", "id": "sch_1"}
            with pytest.raises(ValueError, match="payload must decode strictly") as caught:
                handle.append("schedule/change", bad)
            assert isinstance(caught.value.__cause__, ScheduleError)
            assert caught.value.__cause__.code == "corrupt_schedule_log"
            assert list(handle.entries) == []

    # The next-target index.

    @contract_test
    async def test_due_sessions_follow_committed_schedule_changes(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        early, late = (
            parse_instant("2030-01-01T00:00:00.000Z"),
            parse_instant("2030-06-01T00:00:00.000Z"),
        )
        far = parse_instant("2031-01-01T00:00:00.000Z")
        quiet = await store.create(now=NOW)
        quiet.append("message", turn(1))
        await quiet.barrier()
        one = await store.create(now=NOW)
        one.append(CHANGE, at_create(1, late))
        await one.barrier()
        two = await store.create(now=NOW)
        two.append(CHANGE, at_create(1, late))
        two.append(CHANGE, at_create(2, early))
        two.append("message", turn(2))
        await two.barrier()
        assert await store.due_sessions(far) == (
            DueSession(two.id, early),
            DueSession(one.id, late),
        )
        assert await store.due_sessions(far, limit=1) == (DueSession(two.id, early),)
        assert await store.due_sessions(late) == (DueSession(two.id, early),)
        assert await store.due_sessions(early) == ()
        # A one-shot dispatched, and one deleted: the next target moves, then there is none.
        two.append(CHANGE, dispatch_change(make_schedule_id(2)))
        await two.barrier()
        one.append(CHANGE, delete_change(make_schedule_id(1)))
        await one.barrier()
        assert await store.due_sessions(far) == (DueSession(two.id, late),)
        # Seen by another store over the same storage, after the owners closed.
        fork = await store.fork(two.id, now=LATER)
        await fork.barrier()
        for handle in (quiet, one, two, fork):
            await handle.close()
        assert await self.make_store(tmp_path).due_sessions(far) == (DueSession(two.id, late),)
        # A fork inherits no active reminder, until it creates its own.
        async with await self.make_store(tmp_path).open(fork.id) as reopened:
            reopened.append(CHANGE, at_create(3, early))
            await reopened.barrier()
        assert await self.make_store(tmp_path).due_sessions(far) == (
            DueSession(fork.id, early),
            DueSession(two.id, late),
        )

    @contract_test
    async def test_a_session_with_an_unfinished_turn_is_due_at_once(self, tmp_path: Path) -> None:
        """A turn cut off by a crash: its session is due from the turn's queue time, however
        far its next reminder is, until a ``turn/finished`` entry answers the turn."""
        store = self.make_store(tmp_path)
        far = parse_instant("2031-01-01T00:00:00.000Z")
        later = parse_instant("2030-06-01T00:00:00.000Z")
        handle = await store.create(now=NOW)
        handle.append(CHANGE, at_create(1, later))
        queued = handle.append(
            "turn/queued",
            turn_queued(
                "stretch",
                at=NOW,
                origin="schedule",
                occurrences=(f"sch_1@{format_instant(later)}",),
            ),
        )
        await handle.barrier()
        assert await store.due_sessions(LATER) == (DueSession(handle.id, NOW),)
        await handle.close()
        # Seen by another store over the same storage, as a host that takes over sees it.
        assert await self.make_store(tmp_path).due_sessions(LATER) == (DueSession(handle.id, NOW),)
        async with await self.make_store(tmp_path).open(handle.id) as reopened:
            reopened.append("turn/finished", turn_finished(queued, at=LATER, outcome="completed"))
            await reopened.barrier()
        assert await self.make_store(tmp_path).due_sessions(LATER) == ()
        assert await self.make_store(tmp_path).due_sessions(far) == (DueSession(handle.id, later),)

    @contract_test
    async def test_quotas_set_while_a_reminder_waits_show_in_the_index(
        self, tmp_path: Path
    ) -> None:
        """A ``schedule/quotas`` entry after the earliest target lists the session from the
        entry's ``at`` (still due, but the record changed: a host that remembers a hold sees
        it); one before the target leaves the target as it is."""
        store = self.make_store(tmp_path)
        far = parse_instant("2031-01-01T00:00:00.000Z")
        later = parse_instant("2030-06-01T00:00:00.000Z")
        waiting = await store.create(now=NOW)
        waiting.append(CHANGE, at_create(1, NOW))
        waiting.append(QUOTAS_ENTRY_TYPE, quotas_entry(at=LATER, turns_per_day=5))
        await waiting.barrier()
        ahead = await store.create(now=NOW)
        ahead.append(CHANGE, at_create(1, later))
        ahead.append(QUOTAS_ENTRY_TYPE, quotas_entry(at=LATER, turns_per_day=5))
        await ahead.barrier()
        expected = (DueSession(waiting.id, LATER), DueSession(ahead.id, later))
        assert await store.due_sessions(far) == expected
        for handle in (waiting, ahead):
            await handle.close()
        assert await self.make_store(tmp_path).due_sessions(far) == expected
        # Dispatched: the next target is the reminder's again (none here).
        async with await self.make_store(tmp_path).open(waiting.id) as reopened:
            reopened.append(CHANGE, dispatch_change(make_schedule_id(1)))
            await reopened.barrier()
        assert await self.make_store(tmp_path).due_sessions(far) == (DueSession(ahead.id, later),)

    @contract_test
    async def test_due_sessions_refuses_a_limit_below_one(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        with pytest.raises(ValueError, match=r"^limit must be at least 1, not 0$"):
            await store.due_sessions(LATER, limit=0)
        assert await store.due_sessions(LATER) == ()

    # Checkpoints.

    def _need_checkpoints(self, *, while_open: bool = False) -> None:
        if not self.checkpoints or (while_open and not self.checkpoints_while_open):
            pytest.skip("this store keeps no checkpoints" + (" while open" * while_open))

    @contract_test
    async def test_a_checkpoint_is_used_without_reading_before_its_window(
        self, tmp_path: Path
    ) -> None:
        self._need_checkpoints()
        store = self.make_store(tmp_path)
        history = await write_history(store)
        async with await store.open(history.session_id) as handle:
            resume = handle.resume
            assert resume is not None
            assert resume.position == len(history.entries)
            assert list(resume.records) == history.active
            assert [entry.position for entry in resume.pending] == history.pending
            entries = lazy(handle)
            assert entries.start <= len(history.entries) - WINDOW
            turns = TurnQueue(handle)
            live = LiveSchedule(handle, turns, clock=FakeClock(format_instant(LATER)))
            await live.start()
            assert [turn.position for turn in turns.pending] == history.pending
            assert sorted(view.id for view in (await live.active())[1]) == sorted(
                record.id for record in history.active
            )
            assert payloads(handle.entries[-WINDOW:]) == payloads(history.entries[-WINDOW:])
            assert entries.reads == 0
            await live.close()
            await turns.close()
            # The older entries are still there, read (strictly) when asked for.
            assert handle.entries[0] == history.entries[0]
            assert payloads(handle.entries) == payloads(history.entries)
            assert entries.reads > 0

    @contract_test
    async def test_an_unusable_checkpoint_is_ignored_logged_and_rewritten(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        self._need_checkpoints()
        store = self.make_store(tmp_path)
        history = await write_history(store)
        sid = history.session_id
        good = self.read_checkpoint(store, sid)
        assert good is not None
        edits: dict[str, dict[str, object]] = {
            "version": {"checkpoint": 1},
            "session": {"session": "s_bbbbbbbbbbbb"},
            "log mismatch": {"chain": int(str(_document(good)["chain"])) ^ 1},
            "invalid": {"highestId": 0},
        }
        cases: list[tuple[str, bytes | None]] = [
            ("missing", None),
            ("damaged", good[:-2] + b"0}"),
            *((reason, _reseal(good, edit)) for reason, edit in edits.items()),
        ]
        for reason, damaged in cases:
            self.write_checkpoint(store, sid, damaged)
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="session_schedule"):
                async with await store.open(sid) as handle:
                    assert handle.resume is None, reason
                    assert payloads(handle.entries) == payloads(history.entries)
            said = [
                record.getMessage()
                for record in caplog.records
                if record.getMessage().startswith(f"checkpoint of session {sid} not used")
            ]
            if reason == "missing":
                assert said == []
            else:
                assert len(said) == 1, reason
                assert said[0].startswith(f"checkpoint of session {sid} not used ({reason}): ")
            rewritten = self.read_checkpoint(store, sid)
            assert rewritten is not None
            assert rewritten != damaged
            async with await store.open(sid) as handle:
                assert handle.resume is not None, reason
                assert list(handle.resume.records) == history.active

    @contract_test
    async def test_managed_reminders_reopen_from_a_checkpoint_without_reading_before_it(
        self, tmp_path: Path
    ) -> None:
        # A counted, a paused, a snoozed and a late-resumed reminder, their runs, then enough
        # messages that all of it lies before the checkpoint's window.
        self._need_checkpoints()
        store = self.make_store(tmp_path)
        session_id, pending_turn = await write_managed_history(store)
        async with await store.open(session_id) as handle:
            resume = handle.resume
            assert resume is not None
            assert [schedule_id for schedule_id, _ in resume.statuses] == [
                make_schedule_id(number) for number in (1, 2, 3, 4)
            ]
            entries = lazy(handle)
            assert entries.start <= resume.position - WINDOW
            resumed = await _views(handle)
            assert entries.reads == 0
            # A turn queued before the checkpoint finishes after it.
            handle.append("turn/finished", turn_finished(pending_turn, at=LATER, outcome="failed"))
            await handle.barrier()
            finished = await _views(handle)
            assert entries.reads == 0
        # The same session opened from its whole log says the same.
        self.write_checkpoint(store, session_id, None)
        async with await store.open(session_id) as handle:
            assert handle.resume is None
            # Provenance (``setDuring``) included: the checkpoint records it (format 5).
            assert await _views(handle) == finished
            handle.append("turn/queued", turn_queued("next", at=LATER, origin="host"))
            await handle.barrier()
        async with await store.open(session_id) as handle:
            assert handle.resume is not None
            assert await _views(handle) == finished
        by_id = {view["id"]: view for view in resumed}
        assert by_id["sch_1"]["runs"] == 1
        assert by_id["sch_1"]["runsLeft"] == 4
        assert by_id["sch_1"]["lastRun"] == {
            "occurrence": "sch_1@2026-05-01T08:00:00.000Z",
            "outcome": "delivered",
            "at": "2026-05-01T09:00:00.000Z",
        }
        assert by_id["sch_2"]["paused"] is True
        assert by_id["sch_2"]["lastRun"] == {
            "occurrence": "sch_2@2026-05-01T08:00:00.000Z",
            "outcome": "pending",
            "at": "2026-05-01T09:00:00.000Z",
        }
        assert by_id["sch_3"]["snoozedUntil"] == "2026-05-01T12:30:00.000Z"
        assert {view["id"]: view["lastRun"] for view in finished}["sch_2"] == {
            "occurrence": "sch_2@2026-05-01T08:00:00.000Z",
            "outcome": "failed",
            "at": "2026-05-01T09:00:00.000Z",
        }

    @contract_test
    async def test_a_forks_checkpoint_activates_nothing_inherited(self, tmp_path: Path) -> None:
        self._need_checkpoints()
        store = self.make_store(tmp_path)
        history = await write_history(store)
        async with await store.fork(history.session_id, now=LATER) as child:
            child.append("message", turn(9000))
            await child.barrier()
            fork_id = child.id
        async with await store.open(fork_id) as child:
            resume = child.resume
            assert resume is not None
            assert resume.position == len(history.entries) + 1
            assert resume.records == ()
            assert resume.pending == ()
            assert resume.highest_id == history.highest_id
            turns = TurnQueue(child)
            live = LiveSchedule(child, turns, clock=FakeClock(format_instant(LATER)))
            await live.start()
            assert turns.pending == ()
            assert (await live.active())[1] == []
            await live.close()
            await turns.close()

    @contract_test
    async def test_a_damaged_entry_before_the_window_is_reported_when_read(
        self, tmp_path: Path
    ) -> None:
        self._need_checkpoints()
        store = self.make_store(tmp_path)
        history = await write_history(store)
        message = self.corrupt_entry(store, history.session_id, 0)
        async with await store.open(history.session_id) as handle:
            assert handle.resume is not None
            assert payloads(handle.entries[-WINDOW:]) == payloads(history.entries[-WINDOW:])
            with pytest.raises(SessionCorrupt) as caught:
                handle.entries[0]
            assert str(caught.value) == message
            with pytest.raises(SessionCorrupt) as caught:
                list(handle.entries)
            assert str(caught.value) == message
        with pytest.raises(SessionCorrupt) as caught:
            await store.read(history.session_id)
        assert str(caught.value) == message

    @contract_test
    async def test_an_open_session_keeps_a_bounded_number_of_entries(self, tmp_path: Path) -> None:
        self._need_checkpoints(while_open=True)
        store = self.make_store(tmp_path)
        count = 5 * EVERY
        async with await store.create(now=NOW) as handle:
            for number in range(count):
                handle.append("message", turn(number))
                if number % 100 == 99:
                    await handle.barrier()
            await handle.barrier()
            entries = lazy(handle)
            assert len(handle.entries) == count
            assert entries.resident <= 2 * EVERY + WINDOW
            assert entries.start > 0
            assert handle.entries[0].payload == turn(0)
            assert handle.entries[EVERY + 1].payload == turn(EVERY + 1)
            assert [entry.payload for entry in handle.entries] == [turn(n) for n in range(count)]
            assert entries.resident <= 2 * EVERY + WINDOW + max(1, entries.start)
            session_id = handle.id
        async with await store.open(session_id) as handle:
            assert handle.resume is not None
            assert handle.resume.position == count


@final
class History(NamedTuple):
    """A closed session :func:`write_history` wrote."""

    session_id: SessionId
    entries: list[LogEntry]
    active: list[ScheduleRecord]
    """Its active records, in creation order."""
    highest_id: int
    pending: list[int]
    """The positions of its pending ``turn/queued`` entries."""


async def write_history(store: SessionStore) -> History:
    """A session of 234 entries — messages, schedule creates, deletes and dispatches, turns
    queued and finished (one left pending, long before the end) — closed after a barrier."""
    async with await store.create(now=NOW) as handle:
        for number in range(1, 201):
            handle.append("message", turn(number))
            if number % 10 == 0:
                handle.append(
                    "schedule/change",
                    create_change(
                        EveryScheduleRecord(
                            id=make_schedule_id(number // 10),
                            prompt=f"reminder {number // 10}",
                            every_seconds=3600,
                            scheduled_at="2030-01-01T00:00:00.000Z",
                        )
                    ),
                )
            if number % 30 == 0:
                handle.append("schedule/change", delete_change(make_schedule_id(number // 10 - 1)))
            if number % 40 == 0:
                handle.append(
                    "schedule/change",
                    dispatch_change(
                        make_schedule_id(number // 10),
                        parse_instant("2030-01-01T00:00:01.000Z"),
                    ),
                )
            if number == 20:
                handle.append("turn/queued", turn_queued("left pending", at=NOW, origin="host"))
            if number == 30:
                queued = handle.append("turn/queued", turn_queued("done", at=NOW, origin="host"))
                handle.append("turn/finished", turn_finished(queued, at=NOW, outcome="completed"))
            if number % 50 == 0:
                await handle.barrier()
        await handle.barrier()
        entries = list(handle.entries)
        session_id = handle.id
    changes = [(entry.position, entry.payload) for entry in entries if entry.type == CHANGE]
    state = fold(changes, session=session_id)  # type: ignore[arg-type]
    pending = [entry.position for entry in entries if entry.type == "turn/queued"][:1]
    return History(session_id, entries, list(state.by_creation()), state.highest_id, pending)


async def write_managed_history(store: SessionStore) -> tuple[SessionId, int]:
    """A session with four reminders that have a SPEC §11 status — ``sch_1`` counting runs
    (one delivered), ``sch_2`` paused with its run's turn pending, ``sch_3`` snoozed, ``sch_4``
    resumed after its target — followed by more than a window of messages, closed after a
    barrier. Returns its id and the position of the pending turn."""
    first = "2026-05-01T08:00:00.000Z"
    async with await store.create(now=NOW) as handle:
        counted = Ends(until=None, max_runs=5)
        for number, ends in ((1, counted), (2, UNSET)):
            schedule_id = make_schedule_id(number)
            record = EveryScheduleRecord(
                id=schedule_id,
                prompt=f"reminder {number}",
                every_seconds=3600,
                scheduled_at=first,
                ends=ends,
            )
            handle.append(CHANGE, create_change(record))
            queued = handle.append(
                "turn/queued",
                turn_queued(
                    f"reminder {number}",
                    at=NOW,
                    origin="schedule",
                    occurrences=(f"{schedule_id}@{first}",),
                ),
            )
            handle.append(CHANGE, dispatch_change(schedule_id, NOW))
            if number == 1:
                handle.append("turn/finished", turn_finished(queued, at=NOW, outcome="completed"))
        pending_turn = queued
        handle.append(CHANGE, pause_change(make_schedule_id(2)))
        handle.append(CHANGE, create_change(at_record(3, "2026-05-01T11:00:00.000Z")))
        handle.append(
            CHANGE,
            snooze_change(make_schedule_id(3), parse_instant("2026-05-01T12:30:00.000Z")),
        )
        handle.append(CHANGE, create_change(at_record(4, "2026-05-01T08:30:00.000Z")))
        handle.append(CHANGE, pause_change(make_schedule_id(4)))
        handle.append(CHANGE, resume_change(make_schedule_id(4), NOW))
        for number in range(2 * WINDOW):
            handle.append("message", turn(number))
        await handle.barrier()
        return handle.id, pending_turn


def at_record(number: int, scheduled_at: str) -> AtScheduleRecord:
    return AtScheduleRecord(
        id=make_schedule_id(number), prompt=f"reminder {number}", scheduled_at=scheduled_at
    )


async def _views(handle: SessionHandle) -> list[dict[str, object]]:
    """The views a live Schedule on ``handle`` lists at ``LATER``, as JSON values."""
    turns = TurnQueue(handle)
    live = LiveSchedule(handle, turns, clock=FakeClock(format_instant(LATER)))
    await live.start()
    try:
        views = (await live.active())[1]
    finally:
        await live.close()
        await turns.close()
    plain = msgspec.to_builtins(views)
    assert isinstance(plain, list)
    return plain


CHANGE: Final = "schedule/change"


def lazy(handle: SessionHandle) -> LazyEntries:
    """The entries behind a handle opened from (or keeping) checkpoints."""
    entries = getattr(handle, "_entries", None)
    assert isinstance(entries, LazyEntries), entries
    return entries


def _document(data: bytes) -> dict[str, object]:
    document = msgspec.json.decode(data.partition(b"\n")[2])
    assert isinstance(document, dict)
    return document


def _reseal(data: bytes, edit: dict[str, object]) -> bytes:
    """The checkpoint ``data`` with ``edit`` applied, sealed again as a writer of it would."""
    document = _document(data)
    document.update(edit)
    body = msgspec.json.encode(document)
    return b"%08x\n" % zlib.crc32(body) + body


def at_create(number: int, target: Instant) -> object:
    """A ``schedule/change`` create of an ``at`` reminder ``sch_<number>`` due at ``target``."""
    record = AtScheduleRecord(
        id=make_schedule_id(number),
        prompt=f"reminder {number}",
        scheduled_at=format_instant(target),
    )
    return create_change(record)
