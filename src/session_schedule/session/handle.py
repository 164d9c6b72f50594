"""The behaviour every backend's handle shares: positions, the live view, poisoning, barriers.

A backend supplies three things: how one encoded entry is written at once (``_write``), how a
range of entries is made durable (``_flush``, driven by group commit; optionally also
synchronously, ``flush_now``, for a lone barrier), and how the session is released
(``_release``). Everything the port promises about ordering, visibility, poisoning and
closing is implemented here once, so the backends cannot disagree about it.

A backend that keeps checkpoints (:mod:`session_schedule.session.checkpoint`) also gets the
content of one at a durable position from :meth:`LogHandle._checkpoint_draft` (kept up to date
incrementally, never by refolding the log) and reports a stored one with
:meth:`LogHandle._checkpoint_stored`, which lets the entries before its window leave memory when
the handle's entries are :class:`LazyEntries`.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from types import TracebackType
from typing import Final, Self, SupportsIndex, TypeAlias, final, overload

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant
from session_schedule.session import checkpoint
from session_schedule.session.barrier import FlushNow, GroupCommit
from session_schedule.session.checkpoint import CheckpointFile, Progress
from session_schedule.session.codec import encode_payload
from session_schedule.session.errors import (
    PersistenceUncertain,
    persistence_uncertain,
    session_closed,
)
from session_schedule.session.ids import SessionId
from session_schedule.session.port import LogEntry, ResumePoint, SessionHeader
from session_schedule.session.targets import INDEXED_TYPES, NextTarget, holds_changes

_log: Final = logging.getLogger(__name__)
_AnySlice: TypeAlias = "slice[SupportsIndex | None, SupportsIndex | None, SupportsIndex | None]"


@final
class LazyEntries(Sequence[LogEntry]):
    """A session's entries, of which only those from :attr:`start` on are held decoded.

    An entry before :attr:`start` is read from storage and strictly decoded by ``load(begin,
    end)`` (entries ``begin … end-1``; it raises what opening the whole log would raise) when
    someone asks for it, ``chunk`` entries at a time; only the last chunk read is kept.
    Iterating reads the older entries chunk by chunk too. :meth:`forget_before` lets entries
    that storage holds leave memory.
    """

    __slots__ = ("_cache", "_cache_start", "_chunk", "_load", "_span", "reads")

    def __init__(
        self,
        start: int,
        held: list[LogEntry],
        load: Callable[[int, int], list[LogEntry]],
        *,
        chunk: int,
    ) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, not {chunk}")
        # The position of the first held entry and the held entries, replaced together: a
        # reader on another thread (a store's own thread reading entries it was handed) sees
        # either the span before :meth:`forget_before` or the one after, never half of each.
        self._span: tuple[int, list[LogEntry]] = (start, held)
        self._load = load
        self._chunk = chunk
        self._cache: list[LogEntry] = []
        self._cache_start = 0
        self.reads = 0
        """How many times entries before :attr:`start` were read from storage."""

    @property
    def start(self) -> int:
        """The position of the first entry held in memory."""
        return self._span[0]

    @property
    def loaded(self) -> bool:
        """Whether any entry before the held ones has been read (or there is none)."""
        return self.reads > 0 or self._span[0] == 0

    @property
    def resident(self) -> int:
        """How many decoded entries are held in memory (the held ones and the last chunk read)."""
        return len(self._span[1]) + len(self._cache)

    def append(self, entry: LogEntry) -> None:
        self._span[1].append(entry)

    def extend(self, entries: list[LogEntry]) -> None:
        self._span[1].extend(entries)

    def forget_before(self, position: int) -> None:
        """Stop holding the entries before ``position`` (storage must hold them)."""
        start, held = self._span
        drop = min(position, start + len(held)) - start
        if drop > 0:
            self._span = (start + drop, held[drop:])

    def __len__(self) -> int:
        start, held = self._span
        return start + len(held)

    @overload
    def __getitem__(self, index: int) -> LogEntry: ...

    @overload
    def __getitem__(self, index: _AnySlice) -> list[LogEntry]: ...

    def __getitem__(self, index: int | _AnySlice) -> LogEntry | list[LogEntry]:
        first, held = self._span
        length = first + len(held)
        if isinstance(index, slice):
            start, stop, step = index.indices(length)
            if step != 1:
                return list(self)[index]
            if stop <= start:
                return []
            tail = held[max(start, first) - first : stop - first]
            if start >= first:
                return tail
            return self._read(start, min(stop, first)) + tail
        position = index + length if index < 0 else index
        if not 0 <= position < length:
            raise IndexError("entry index out of range")
        if position >= first:
            return held[position - first]
        cached = position - self._cache_start
        if not 0 <= cached < len(self._cache):
            begin = position - position % self._chunk
            self._cache = self._read(begin, min(begin + self._chunk, first))
            self._cache_start = begin
            cached = position - begin
        return self._cache[cached]

    def __iter__(self) -> Iterator[LogEntry]:
        return self._iterate(self._span[0], len(self))

    def _iterate(self, start: int, end: int) -> Iterator[LogEntry]:
        """Entries ``0 … end-1``, those before ``start`` read chunk by chunk."""
        for begin in range(0, start, self._chunk):
            yield from self._read(begin, min(begin + self._chunk, start))
        for position in range(start, end):
            yield self[position]

    def _read(self, begin: int, end: int) -> list[LogEntry]:
        self.reads += 1
        return self._load(begin, end)


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
        self._progress: Progress | None = None
        self._progress_broken = False
        self._checkpointed = 0 if resume is None else resume.position
        """The position of the newest checkpoint known to be stored."""
        self._last_change = -1
        """The position of the last ``schedule/change`` appended through this handle (-1: none;
        the entries it opened with are durable, so no flush covers them)."""

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
        if type in INDEXED_TYPES:
            self._last_change = position
        return position

    async def barrier(self) -> None:
        self._check_usable()
        target = len(self._entries)
        if self._commit.durable >= target:
            return  # nothing to make durable: the check above is the whole answer
        await self._commit.cover(target)
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
        if not self._holds_changes(durable, target):
            return False, None
        return True, self._next_target.after(self._entries, target)

    def _holds_changes(self, durable: int, target: int) -> bool:
        """Whether entries ``[durable, target)`` hold a ``schedule/change`` (the next-target
        index must then be updated with their flush). A flush covers everything appended so
        far, which the last change's position answers without looking at the entries."""
        if target == len(self._entries):
            return self._last_change >= durable
        return holds_changes(self._entries[durable:target])

    def _checkpoint_draft(self, count: int, *, window: bool = True) -> CheckpointFile | None:
        """The content of a checkpoint at ``count`` (every entry before it durable), unbound,
        with the window of entries before ``count`` unless told not to (a store that reads them
        from its log); ``None`` when there is none newer than the last, when the log's fold
        fails (logged)."""
        if count <= self._checkpointed or self._progress_broken or self._poison() is not None:
            return None
        try:
            if self._progress is None:
                self._progress = Progress(
                    session=self.id, seed=self._header.seed_length, resume=self._resume
                )
            progress = self._progress
            progress.add(self._entries[progress.position : count])
        except (ScheduleError, ValueError) as error:
            _log.warning("session %s: no checkpoint will be written: %s", self.id, error)
            self._progress_broken = True
            return None
        return checkpoint.draft(
            session=self.id,
            binding=checkpoint.Binding(count, 0),
            progress=progress,
            window=self._entries[max(0, count - checkpoint.WINDOW) : count] if window else (),
        )

    def _checkpoint_stored(self, count: int) -> None:
        """A checkpoint at ``count`` is stored: the entries before its window may leave memory
        (they are read from storage again when asked for)."""
        self._checkpointed = max(self._checkpointed, count)
        if isinstance(self._entries, LazyEntries):
            # The next-target fold reads on from where it stopped: bring it up to the
            # checkpoint while those entries are still held.
            if self._poison() is None:
                self._next_target.after(self._entries, count)
            self._entries.forget_before(count - checkpoint.WINDOW)

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
