"""What the fork tests share: the parent's history, reading a session back and the highest
reminder id it creates (every store, JSONL too); for the database stores (SQLite, PostgreSQL),
counting the entries strictly decoded and what a sound fork is.

A test reads its store's tables (:data:`Tables`, or a
:class:`tests.session.fork_stores.ForkedStore`) and hands them to :func:`assert_sound_fork`."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import TypeAlias, TypeVar

import msgspec
import pytest

from session_schedule.core.changes import ScheduleCreateChange
from session_schedule.session import SessionId, SessionStore, SqliteSessionStore
from session_schedule.session.checkpoint import WINDOW, CheckpointFile
from session_schedule.session.codec import EntryDecoder
from session_schedule.session.handle import LazyEntries
from session_schedule.session.postgres import PostgresSessionStore
from session_schedule.testing.session_contract import NOW, payloads
from tests.session.histories import append_history

SID = SessionId("s_aaaaaaaaaaaa")
FORK = SessionId("s_bbbbbbbbbbbb")
GRANDCHILD = SessionId("s_cccccccccccc")
UNTOUCHED = "; the database was left untouched for inspection"

Store = TypeVar("Store", SqliteSessionStore, PostgresSessionStore)
Tables: TypeAlias = tuple[
    Callable[[Store, SessionId], list[tuple[object, ...]]],
    Callable[[Store, SessionId], CheckpointFile | None],
]
"""How a test module reads its store's tables: a session's rows (position, type, data) as
stored, in order, and its stored checkpoint, if any."""


def decode_checkpoint(data: bytes) -> CheckpointFile:
    """A stored checkpoint's content (the line after its seal)."""
    return msgspec.json.decode(data.partition(b"\n")[2], type=CheckpointFile)


async def write_history(store: SessionStore) -> None:
    """Turns, creates and deletes in several barriers (closed: the session has a checkpoint at
    its end); the odd-numbered Every records stay active."""
    async with await store.create(now=NOW, session_id=SID) as handle:
        await append_history(handle, 1, 60)


async def full_read(store: SessionStore, session: SessionId = SID) -> list[tuple[str, object]]:
    return payloads((await store.read(session)).entries)


def max_id(entries: list[tuple[str, object]]) -> int:
    """The highest reminder id number that ``entries`` create (0: none)."""
    return max(
        (
            int(payload.schedule.id.removeprefix("sch_"))
            for kind, payload in entries
            if kind == "schedule/change" and isinstance(payload, ScheduleCreateChange)
        ),
        default=0,
    )


@contextlib.contextmanager
def decodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The positions of the entries strictly decoded meanwhile, in order."""
    seen: list[int] = []
    real = EntryDecoder.add

    def add(
        self: EntryDecoder, entry_type: str, data: bytes, position: int, **kw: int | None
    ) -> None:
        seen.append(position)
        real(self, entry_type, data, position, **kw)

    with monkeypatch.context() as patch:
        patch.setattr(EntryDecoder, "add", add)
        yield seen


async def assert_sound_fork(
    store: Store,
    tables: Tables[Store],
    fork: SessionId,
    inherited: list[tuple[str, object]],
    highest: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """:func:`assert_fork_is_sound`, reading ``store`` through ``tables``."""
    rows_of, checkpoint_of = tables
    await assert_fork_is_sound(
        store,
        functools.partial(rows_of, store),
        functools.partial(checkpoint_of, store),
        fork,
        inherited,
        highest,
        monkeypatch,
    )


async def assert_fork_is_sound(
    store: SqliteSessionStore | PostgresSessionStore,
    rows_of: Callable[[SessionId], list[tuple[object, ...]]],
    checkpoint_of: Callable[[SessionId], CheckpointFile | None],
    fork: SessionId,
    inherited: list[tuple[str, object]],
    highest: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fork holds exactly ``inherited`` (its rows the parent's, as stored), opens from the
    checkpoint it was created with — decoding no entry before that checkpoint's window — with
    none of its parent's reminders, and its next reminder's id is past every inherited one."""
    assert await full_read(store, fork) == inherited
    assert rows_of(fork) == rows_of(SID)[: len(inherited)]
    own = checkpoint_of(fork)
    assert own is not None
    assert (own.entries, own.active, own.pending, own.window) == (len(inherited), [], [], [])
    with decodes(monkeypatch) as decoded:
        handle = await store.open(fork)
    async with handle:
        assert decoded == list(range(max(0, len(inherited) - WINDOW), len(inherited)))
        assert handle.resume is not None
        assert handle.resume.position == len(inherited)
        assert handle.resume.records == ()
        assert handle.resume.pending == ()
        assert handle.resume.highest_id == highest
        entries = handle._entries
        assert isinstance(entries, LazyEntries)
        assert entries.start == max(0, len(inherited) - WINDOW)  # only the window decoded
        assert payloads(handle.entries) == inherited
