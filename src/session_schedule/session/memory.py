"""The in-memory store: the reference semantics of the port, with injectable faults.

"Durable" here means exactly what a barrier has covered: a store keeps, per session, the header
and the entries barriers confirmed. :meth:`MemorySessionStore.crash` plays a process crash — every
live handle is lost and whatever no barrier covered is gone — so tests can check that barriered
entries survive and nothing else is promised. :meth:`~MemorySessionStore.fail_next_write` and
:meth:`~MemorySessionStore.fail_next_barrier` make the next write or flush fail the way a disk
does, to exercise ``persistence_uncertain`` in the layers above.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Sequence
from typing import Final, Literal, final

from session_schedule.core.instants import Instant
from session_schedule.session.errors import session_busy, session_exists, session_not_found
from session_schedule.session.handle import LogHandle
from session_schedule.session.ids import (
    SessionId,
    chosen_session_id,
    new_session_id,
    require_session_id,
)
from session_schedule.session.port import (
    DEFAULT_DUE_LIMIT,
    DueSession,
    LogEntry,
    SessionHeader,
    SessionListing,
    SessionSnapshot,
    listed,
    listing,
    make_header,
    seed_length,
)
from session_schedule.session.targets import due

_PLACE: Final = "this memory store"

Fault = Literal["write", "barrier"]


@final
class _Stored:
    """A session as storage holds it: the header and the barriered entries."""

    __slots__ = ("entries", "header", "next_target")

    def __init__(self, header: SessionHeader, entries: list[LogEntry]) -> None:
        self.header = header
        self.entries = entries
        self.next_target: Instant | None = None
        """The next-target index's record of this session (a fork has nothing active)."""


@final
class MemorySessionHandle(LogHandle):
    """The owner of a session in a :class:`MemorySessionStore`."""

    def __init__(self, *, store: MemorySessionStore, stored: _Stored) -> None:
        super().__init__(header=stored.header, entries=list(stored.entries))
        self._store = store
        self._stored = stored

    def _write(self, position: int, entry_type: str, data: bytes) -> None:  # noqa: ARG002
        if self._store._take_fault("write"):
            raise OSError(errno.EIO, "injected write failure")

    async def _flush(self, durable: int, target: int) -> None:
        # Yield like a real flush does, so barriers called together share it.
        await asyncio.sleep(0)
        if not self._store._owns(self):
            raise OSError(errno.EIO, "the store crashed during the flush")
        if self._store._take_fault("barrier"):
            raise OSError(errno.EIO, "injected barrier failure")
        indexed, next_target = self._index_update(durable, target)
        del self._stored.entries[durable:]
        self._stored.entries.extend(self._entries[durable:target])
        if indexed:
            self._stored.next_target = next_target

    async def _release(self) -> None:
        self._store._release(self)

    def _lose(self) -> None:
        self._closed = True


@final
class MemorySessionStore:
    """Sessions held in this process's memory (see the module docstring)."""

    def __init__(self) -> None:
        self._sessions: dict[SessionId, _Stored] = {}
        self._owners: dict[SessionId, MemorySessionHandle] = {}
        self._faults: dict[Fault, int] = {"write": 0, "barrier": 0}

    def fail_next_write(self) -> None:
        """Make the next append of any handle of this store fail (``PersistenceUncertain``)."""
        self._faults["write"] += 1

    def fail_next_barrier(self) -> None:
        """Make the next flush of any handle of this store fail (``PersistenceUncertain``)."""
        self._faults["barrier"] += 1

    def crash(self) -> None:
        """Lose every live handle and every entry no barrier covered, as a crash would.

        Lost handles behave as closed; the sessions can be opened again at once.
        """
        for handle in self._owners.values():
            handle._lose()
        self._owners.clear()

    async def create(
        self, *, now: Instant, session_id: SessionId | None = None
    ) -> MemorySessionHandle:
        return self._new(chosen_session_id(session_id), now=now, parent=None, seed=[])

    async def open(self, session_id: str) -> MemorySessionHandle:
        stored = self._stored(session_id)
        if stored.header.id in self._owners:
            raise session_busy(stored.header.id)
        handle = MemorySessionHandle(store=self, stored=stored)
        self._owners[stored.header.id] = handle
        return handle

    async def fork(
        self,
        parent_id: str,
        *,
        at: int | None = None,
        now: Instant,
        session_id: SessionId | None = None,
    ) -> MemorySessionHandle:
        new_id = chosen_session_id(session_id)
        parent = self._stored(parent_id)
        seed = parent.entries[: seed_length(at, len(parent.entries), parent.header.id)]
        return self._new(new_id, now=now, parent=parent.header.id, seed=seed)

    async def read(self, session_id: str) -> SessionSnapshot:
        stored = self._stored(session_id)
        return SessionSnapshot(stored.header, tuple(stored.entries))

    async def list(self) -> tuple[SessionHeader, ...]:
        return listed(await self.scan())

    async def scan(self) -> SessionListing:
        # Headers held in memory are always readable.
        return listing([stored.header for stored in self._sessions.values()], [])

    async def due_sessions(
        self, before: Instant, *, limit: int = DEFAULT_DUE_LIMIT
    ) -> tuple[DueSession, ...]:
        return due(
            {session_id: stored.next_target for session_id, stored in self._sessions.items()},
            before,
            limit,
        )

    def _new(
        self,
        session_id: SessionId | None,
        *,
        now: Instant,
        parent: SessionId | None,
        seed: Sequence[LogEntry],
    ) -> MemorySessionHandle:
        if session_id is None:
            session_id = new_session_id()
            while session_id in self._sessions:
                session_id = new_session_id()
        elif session_id in self._sessions:
            raise session_exists(session_id, _PLACE)
        header = make_header(session_id, now=now, parent_id=parent, seed_length=len(seed))
        stored = _Stored(header, list(seed))
        self._sessions[session_id] = stored
        handle = MemorySessionHandle(store=self, stored=stored)
        self._owners[session_id] = handle
        return handle

    def _stored(self, session_id: str) -> _Stored:
        checked = require_session_id(session_id)
        stored = self._sessions.get(checked)
        if stored is None:
            raise session_not_found(checked, _PLACE)
        return stored

    def _take_fault(self, kind: Fault) -> bool:
        if self._faults[kind] == 0:
            return False
        self._faults[kind] -= 1
        return True

    def _owns(self, handle: MemorySessionHandle) -> bool:
        return self._owners.get(handle.id) is handle

    def _release(self, handle: MemorySessionHandle) -> None:
        if self._owns(handle):
            del self._owners[handle.id]
