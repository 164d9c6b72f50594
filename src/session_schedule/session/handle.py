"""The behaviour every backend's handle shares: positions, the live view, poisoning, barriers.

A backend supplies three things: how one encoded entry is written at once (``_write``), how a
range of entries is made durable (``_flush``, driven by group commit; optionally also
synchronously, ``flush_now``, for a lone barrier), and how the session is released
(``_release``). Everything the port promises about ordering, visibility, poisoning and
closing is implemented here once, so the backends cannot disagree about it.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Iterator, Sequence
from types import TracebackType
from typing import Self, SupportsIndex, TypeAlias, final, overload

from session_schedule.core.instants import Instant
from session_schedule.session.barrier import FlushNow, GroupCommit
from session_schedule.session.codec import encode_payload
from session_schedule.session.errors import (
    PersistenceUncertain,
    persistence_uncertain,
    session_closed,
)
from session_schedule.session.ids import SessionId
from session_schedule.session.port import LogEntry, ResumePoint, SessionHeader
from session_schedule.session.targets import NextTarget, holds_changes

_AnySlice: TypeAlias = "slice[SupportsIndex | None, SupportsIndex | None, SupportsIndex | None]"


@final
class LazyEntries(Sequence[LogEntry]):
    """A session's entries when it was opened from a checkpoint at ``position``.

    The entries from ``position`` on (and the checkpoint's window just before it) are held
    decoded; the ones before are read and strictly decoded by ``load`` the first time any of
    them is asked for (``load`` raises what opening the whole log would raise).
    """

    __slots__ = ("_load", "_prefix", "_start", "_tail", "_window", "position")

    def __init__(
        self, position: int, window: list[LogEntry], load: Callable[[], list[LogEntry]]
    ) -> None:
        self.position = position
        self._window = window
        self._start = position - len(window)
        self._load = load
        self._prefix: list[LogEntry] | None = None
        self._tail: list[LogEntry] = []

    @property
    def loaded(self) -> bool:
        """Whether the entries before the window have been read."""
        return self._prefix is not None or self._start == 0

    def append(self, entry: LogEntry) -> None:
        self._tail.append(entry)

    def extend(self, entries: list[LogEntry]) -> None:
        self._tail.extend(entries)

    def __len__(self) -> int:
        return self.position + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> LogEntry: ...

    @overload
    def __getitem__(self, index: _AnySlice) -> list[LogEntry]: ...

    def __getitem__(self, index: int | _AnySlice) -> LogEntry | list[LogEntry]:
        length = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(length)
            if step == 1 and start >= self._start:
                if start >= self.position:
                    return self._tail[start - self.position : stop - self.position]
                return (self._window + self._tail)[start - self._start : stop - self._start]
            return self._all()[index]
        position = index + length if index < 0 else index
        if not 0 <= position < length:
            raise IndexError("entry index out of range")
        if position >= self.position:
            return self._tail[position - self.position]
        if position >= self._start:
            return self._window[position - self._start]
        return self._all()[position]

    def __iter__(self) -> Iterator[LogEntry]:
        return iter(self._all())

    def _all(self) -> list[LogEntry]:
        if self._prefix is None:
            if self._start == 0:
                self._prefix = []
            else:
                self._prefix = self._load()[: self._start]
        return self._prefix + self._window + self._tail


@final
class EntriesView(Sequence[LogEntry]):
    """A live, read-only view of a handle's entries; every use checks the handle first."""

    __slots__ = ("_check", "_entries")

    def __init__(self, entries: list[LogEntry] | LazyEntries, check: Callable[[], None]) -> None:
        self._entries = entries
        self._check = check

    def __len__(self) -> int:
        self._check()
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> LogEntry: ...

    @overload
    def __getitem__(self, index: _AnySlice) -> Sequence[LogEntry]: ...

    def __getitem__(self, index: int | _AnySlice) -> LogEntry | Sequence[LogEntry]:
        self._check()
        if isinstance(index, slice):
            return tuple(self._entries[index])
        return self._entries[index]

    def __iter__(self) -> Iterator[LogEntry]:
        self._check()
        return iter(self._entries)

    def __repr__(self) -> str:
        return f"EntriesView(<{len(self._entries)} entries>)"


class LogHandle(abc.ABC):
    """The owner of one open session (see the port for the promises)."""

    def __init__(
        self,
        *,
        header: SessionHeader,
        entries: list[LogEntry] | LazyEntries,
        resume: ResumePoint | None = None,
        flush_now: FlushNow | None = None,
    ) -> None:
        self._header = header
        self._entries = entries
        self._resume = resume
        self._closed = False
        self._write_failure: str | None = None
        self._commit = GroupCommit(
            durable=len(entries), appended=entries.__len__, flush=self._flush, flush_now=flush_now
        )
        self._view = EntriesView(entries, self._check_usable)
        self._next_target = NextTarget(header, resume)

    @property
    def id(self) -> SessionId:
        return self._header.id

    @property
    def header(self) -> SessionHeader:
        return self._header

    @property
    def entries(self) -> Sequence[LogEntry]:
        self._check_usable()
        return self._view

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def resume(self) -> ResumePoint | None:
        return self._resume

    @property
    def poisoned(self) -> bool:
        return self._failure() is not None

    @property
    def durable_length(self) -> int:
        """How many leading entries a barrier has confirmed durable."""
        return self._commit.durable

    @property
    def flush_count(self) -> int:
        """How many flushes (fsyncs or commits) barriers have started on this handle."""
        return self._commit.flushes

    def append(self, type: str, payload: object) -> int:  # noqa: A002 - the wire name
        self._check_usable()
        value, data = encode_payload(type, payload)
        position = len(self._entries)
        try:
            self._write(position, type, data)
        except OSError as error:
            self._write_failure = f"writing entry {position} failed: {error}"
            raise persistence_uncertain(self.id, self._write_failure) from error
        self._entries.append(LogEntry(position=position, type=type, payload=value))
        return position

    async def barrier(self) -> None:
        self._check_usable()
        await self._commit.cover(len(self._entries))
        failure = self._failure()
        if failure is not None:
            raise failure

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._commit.settle()
        finally:
            await self._release()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "poisoned" if self.poisoned else "open"
        return f"<{type(self).__name__} {self.id} {state}, {len(self._entries)} entries>"

    def _index_update(self, durable: int, target: int) -> tuple[bool, Instant | None]:
        """For a flush of entries ``[durable, target)``: whether they hold schedule changes
        (the next-target index must then be updated with the flush), and the session's
        earliest active target once they are applied."""
        if not holds_changes(self._entries[durable:target]):
            return False, None
        return True, self._next_target.after(self._entries, target)

    def _poison(self) -> str | None:
        return self._write_failure or self._commit.failure

    def _failure(self) -> PersistenceUncertain | None:
        """The error every use of a poisoned handle raises; ``None`` while it is not poisoned.

        A backend that can lose its ownership overrides this to say so.
        """
        reason = self._poison()
        return None if reason is None else persistence_uncertain(self.id, reason)

    def _check_usable(self) -> None:
        if self._closed:
            raise session_closed(self.id)
        failure = self._failure()
        if failure is not None:
            raise failure

    @abc.abstractmethod
    def _write(self, position: int, entry_type: str, data: bytes) -> None:
        """Store entry ``position`` now (not necessarily durably); raise ``OSError`` on failure."""

    @abc.abstractmethod
    def _flush(self, durable: int, target: int) -> Awaitable[None]:
        """Make entries ``[durable, target)`` durable; fail with any exception."""

    @abc.abstractmethod
    async def _release(self) -> None:
        """Give up the session's resources and ownership (after any flush in progress)."""
