"""The owner of one JSONL session file: appends, barriers, commit records, checkpoints.

A :class:`JsonlSessionHandle` holds the session's ownership and its file's descriptor, which the
process's descriptor cache may close while the session is idle and open again when it is used
(see :mod:`.opening`); the behaviour every store's handle shares (positions, the live view,
poisoning) is :class:`~session_schedule.session.handle.LogHandle`'s. What this one adds, after
SPEC §9:

1. **One write per entry.** ``append`` issues a single ``os.write`` of the whole line, newline
   included, on an ``O_APPEND`` descriptor; a failed or short write poisons the handle. A file of
   format 1 is appended to in format 1; format 2 chains each entry's checksum to the last.
2. **The barrier is an fsync**, with group commit (see :mod:`session_schedule.session.barrier`):
   a hundred appends, then one barrier, cost one fsync. A lone barrier fsyncs on the event
   loop's thread, unless a barrier of another session of the loop is at work or a timer of the
   loop is due before that fsync would end (each fsync on the session's thread reports how long
   it took, for that estimate); barriers called together share one fsync on the session's own
   thread (``flush_on_loop=False``: every flush there).
3. **Then a commit record** (format 2), for the entries the fsync made durable (durable itself
   with the next fsync). A flush on the session's thread writes it there, and a failure fails
   the barrier; a lone barrier leaves it to a loop callback run once its caller has gone on, or
   to the next entry's ``write``, which carries it ahead of the line, and a failure then poisons
   the handle (the entries are durable already).
4. **A next-target record** (:mod:`.next_targets`) is written on the
   session's thread after a barrier whose entries hold a schedule change has returned, and at
   close — only of a file whose every entry is durable. It is derived data, which a reader
   rebuilds from the log whenever it does not describe the file, so neither its fold nor its
   write is on the path of a barrier or a create.
5. **A fork reads no unwritten commit record.** The handles open in the process are known by
   their file (:func:`write_pending_commit`): a fork of a session open on the forking event
   loop first has its handle write a lone barrier's commit record that is still waiting for its
   callback, so the fork's read of the parent finds every acknowledged entry vouched for, and
   damage to one is reported as damage, not cut as a torn tail.
6. **A checkpoint** (:mod:`.checkpoints`) is bound to a commit record. It is written on the
   session's thread after a barrier once :data:`~session_schedule.session.checkpoint.EVERY`
   entries have become durable since the last, and at close; the entries before its window then
   leave memory and are read back from the file, chain-checked, a segment at a time, when asked
   for (:mod:`.segments`). It carries the index of where those segments start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.session import checkpoint, codec
from session_schedule.session.handle import LazyEntries, LogHandle
from session_schedule.session.jsonl import checkpoints, segments
from session_schedule.session.jsonl.checkpoints import checkpoint_path, commit_ending_at
from session_schedule.session.jsonl.files import source_of, write_all
from session_schedule.session.jsonl.next_targets import TargetIndexFile
from session_schedule.session.jsonl.opening import Opened
from session_schedule.session.jsonl.segments import Prefix, read_prefix, segments_of, thinned
from session_schedule.session.lines import (
    CHAIN_SEED,
    Format,
    TailStart,
    commit_line,
    entry_line,
)
from session_schedule.session.targets import INDEXED_TYPES, holds_changes
from session_schedule.session.worker import Worker

# The package's one logger: its records keep the name they have always had.
_log: Final = logging.getLogger("session_schedule.session.jsonl")

_open_handles: Final[
    dict[Path, tuple[weakref.ref[JsonlSessionHandle], asyncio.AbstractEventLoop]]
] = {}
"""The handles open in this process, by their file's path, with the event loop they run on
(from the handle's creation to its release; a session has one owner in a process). Weakly: a
handle never closed is not kept alive by it."""


def write_pending_commit(path: Path) -> None:
    """Have the handle of the session file ``path``, when one is open on the running event loop,
    write the commit record a lone barrier left to a loop callback (nothing when none is
    pending): a reader of the file then finds every entry a barrier acknowledged vouched for.
    A handle on another event loop is left alone: its file is written only on that loop's
    thread."""
    found = _open_handles.get(path)
    if found is None:
        return
    handle, loop = found[0](), found[1]
    if (
        handle is None
        or loop is not asyncio.get_running_loop()
        or handle._closed_fd
        or handle._poison() is not None
    ):
        return
    handle._write_unwritten_commit()


@final
class JsonlSessionHandle(LogHandle):
    """The owner of one session file: holds its ownership and its (cached) descriptor."""

    def __init__(
        self,
        *,
        opened: Opened,
        path: Path,
        worker: Worker,
        index: TargetIndexFile,
        flush_on_loop: bool = True,
    ) -> None:
        entries = opened.entries
        older = opened.older
        if opened.header.format == 2 and older is None:
            # Every entry is held until the first checkpoint written while open covers some.
            head = TailStart(0, opened.head, 1, CHAIN_SEED)
            older = Prefix(opened.file, opened.header, [head], source_of(opened.header.id))
            entries = LazyEntries(0, list(entries), older.read, chunk=segments.CHUNK)
        super().__init__(
            header=opened.header,
            entries=entries,
            resume=opened.resume,
            flush_now=self._flush_now if flush_on_loop else None,
        )
        self._older = older
        """Reads the entries before the newest stored checkpoint from the file (format 2)."""
        self._checkpoint_posted = self._checkpointed
        """The position of the newest checkpoint queued for writing while open."""
        self._posted_ends: list[TailStart] = []
        """The commit records of the checkpoints queued but not yet reported written: segment
        starts the lazy reader's index does not have yet, which a checkpoint taken meanwhile
        (or at close, when those reports never arrive) still stores."""
        # ``_checksums[i]`` is entry ``_origin + i``'s (a session opened from a checkpoint at
        # ``n`` starts with entry ``n - 1``'s).
        self._checksums = opened.checksums
        self._origin = opened.origin
        self._prefix_bytes = opened.offset
        self._file = opened.file
        """The file's descriptor, in the process's descriptor cache: used only inside
        ``use()`` (it may have been closed while idle, and is then opened again). Closing it
        for good gives up the ownership."""
        self._path = path
        self._worker = worker
        self._lines = opened.lines
        """Complete lines in the file when it was opened, plus the entry lines written since."""
        self._commit_lines = 0
        """Commit records written since (counted on the worker thread)."""
        self._unwritten_commit: int | None = None
        """How many entries a lone barrier's commit record vouches for, until that record is
        written (see :meth:`_after_flush`); it is framed only then, off the barrier's path."""
        self._checkpoint_end: TailStart | None = None
        """Where that commit record ends, when a checkpoint is due at it."""
        self._index_due = False
        """Whether a flush covered schedule changes that no next-target record describes yet."""
        self._index = index
        self._index_marked = False
        """Whether the index holds a mark of this file that no record posted since covers
        (see :mod:`.next_targets`): one is appended before the next entry that can move the
        target."""
        # Opened from a checkpoint, the log may hold a schedule change before it: record it.
        self._indexed = opened.resume is not None or holds_changes(opened.entries)
        """Whether the log holds a schedule change (a session that never had one needs no
        next-target record until a reader rebuilds it)."""
        _open_handles[path] = (weakref.ref(self), asyncio.get_running_loop())

    @property
    def _closed_fd(self) -> bool:
        """Whether the file is being released (no more bookkeeping writes): its lane is stopped,
        which :meth:`_release` does before anything else can run. A property, not one more
        attribute: a handle's thirty would no longer share their dict's keys (1.3 KiB more per
        open session)."""
        return self._worker.stopped

    @property
    def path(self) -> Path:
        return self._path

    @property
    def format(self) -> Format:
        """The file's format (see :mod:`session_schedule.session.lines`)."""
        return self.header.format

    def checksum(self, position: int) -> int:
        """Entry ``position``'s chained checksum (format 2), to bind a derived snapshot to it.

        Raises ``IndexError`` for a position not appended, ``ValueError`` for a format-1 file.
        """
        if self.header.format == 1:
            raise ValueError(f"session {self.id} is in format 1, which has no checksums")
        self._check_usable()
        if not 0 <= position < self._origin + len(self._checksums):
            raise IndexError(f"session {self.id} has no entry {position}")
        if position < self._origin:
            # Before a checkpoint: the chain is read from the file (as the entries are).
            with self._file.use() as fd:
                prefix = read_prefix(fd, self._prefix_bytes, source_of(self.id), self._origin + 1)
            return prefix.checksums[position]
        return self._checksums[position - self._origin]

    def _write(self, position: int, entry_type: str, data: bytes) -> None:
        if self.header.format == 1:
            line = codec.entry_line(entry_type, data)
            checksum = None
        else:
            previous = self._checksums[-1] if position else CHAIN_SEED
            line, checksum = entry_line(position, entry_type, data, previous)
        commit = self._unwritten_commit
        with self._file.use(dirty=True) as fd:
            if entry_type in INDEXED_TYPES and not self._index_marked:
                # Readers watch the file from now until a record of it as it will be follows.
                self._index.mark(self.id, os.fstat(fd).st_size)
                self._index_marked = True
            write_all(fd, line if commit is None else self._commit_record(commit) + line)
        if commit is not None:
            self._unwritten_commit = None
            self._commit_lines += 1
        self._lines += 1
        if checksum is not None:
            self._checksums.append(checksum)

    def _flush_now(self, durable: int, target: int) -> None:
        """A lone barrier's flush, on the loop's thread (see :mod:`.barrier`).

        Only the ``fsync`` is on the barrier's path. The commit record (format 2) and the
        next-target record are bookkeeping that no waiter needs: they are framed and written by
        a callback the loop runs once the barrier's caller has gone on (see
        :meth:`_after_flush`), or carried by the next entry's ``write``. What little the
        ``fsync`` needs around it is decided before it (which changes none of it), so that only
        two assignments follow it: code run right after a blocking ``fsync`` runs slowly.
        """
        if self._holds_changes(durable, target):
            self._indexed = self._index_due = True
        commit = target if self.header.format == 2 else None
        checkpoint_due = self._checkpoint_due(target)
        # Nothing else is written to the file before this commit record (the next entry line
        # carries it, or the callback writes it): it will end there.
        end = self._binding(target, after=self._commit_record(target)) if checkpoint_due else None
        # Scheduled first: should the fsync fail, the callback finds the handle poisoned and
        # does nothing.
        asyncio.get_running_loop().call_soon(self._after_flush, target)
        self._file.sync()
        self._unwritten_commit = commit
        if checkpoint_due:
            self._checkpoint_end = end

    def _commit_record(self, count: int) -> bytes:
        """The commit record vouching for entries ``0 … count-1`` (format 2)."""
        return commit_line(count, self._checksums[count - 1 - self._origin])

    def _after_flush(self, target: int) -> None:
        """What follows a lone barrier's ``fsync``, off its path.

        The commit record for entries ``0 … target-1`` is written unless the next entry's
        write has already carried it (a commit record that is still unwritten goes out in the
        same ``write`` as the next entry line, ahead of it: the file's order is the same either
        way). A failure to write it poisons the handle, as a failed entry write does; the
        entries it vouches for are durable already. The next-target record is written only
        while the file holds exactly ``target`` entries — otherwise the flush that covers the
        later ones writes it — since a record describes the file as it is when it is taken.
        A checkpoint due at ``target`` is queued once the commit record is written.
        """
        if self._closed_fd or self._poison() is not None:
            return
        self._write_unwritten_commit()
        end, self._checkpoint_end = self._checkpoint_end, None
        if self._poison() is not None:
            return
        if self._index_due and len(self._entries) == target:
            self._index_due = False
            self._record_target()
        if end is not None:
            self._checkpoint_while_open(end)

    def _write_unwritten_commit(self) -> None:
        commit = self._unwritten_commit
        if commit is None:
            return
        self._unwritten_commit = None
        try:
            with self._file.use() as fd:
                write_all(fd, self._commit_record(commit))
        except OSError as error:
            self._write_failure = f"writing a commit record failed: {error}"
            return
        self._commit_lines += 1

    def _flush(self, durable: int, target: int) -> Awaitable[None]:
        file = self._file
        indexed = self._index_due or self._holds_changes(durable, target)
        self._index_due = False
        # Written once the fsync has returned: a readable commit record never vouches for bytes
        # that were not durable. It becomes durable itself with the next barrier's fsync.
        commit = (
            None
            if self.header.format == 1
            else commit_line(target, self._checksums[target - 1 - self._origin])
        )

        def flush() -> float:
            """The flush, on the session's thread; how long its ``fsync`` took (seconds)."""
            started = time.perf_counter()
            file.sync()
            took = time.perf_counter() - started
            if commit is not None:
                with file.use() as fd:
                    write_all(fd, commit)
                self._commit_lines += 1
            return took

        return self._flushed(self._worker.submit(flush), target=target, indexed=indexed)

    async def _flushed(self, flush: Awaitable[float], *, target: int, indexed: bool) -> None:
        # How long the fsync took tells lone barriers of this loop how long one on the loop's
        # thread would block it (see :mod:`session_schedule.session.barrier`).
        self._commit.measured(await flush)
        if indexed:
            self._indexed = True
            if len(self._entries) == target:
                self._record_target()
            else:
                # Entries appended during the fsync are not durable: a record of the file as it
                # is now would count them, and a power cut that zero-fills them while keeping
                # the file's size and mtime would leave that record looking fresh. The flush
                # that covers them writes it (as after a lone barrier).
                self._index_due = True
        # On the session's thread, the commit record was written after an fsync during which
        # entries may have been appended: only when none was does it end the file now.
        if len(self._entries) == target and self._checkpoint_due(target):
            end = self._binding(target, after=b"")
            if end is not None:
                self._checkpoint_while_open(end)

    def _checkpoint_due(self, target: int) -> bool:
        """Whether a flush of entries ``0 … target-1`` takes a checkpoint while the session is
        open: :data:`~.checkpoint.EVERY` entries have become durable since the last (format 2)."""
        return (
            self.header.format == 2
            and target - self._checkpoint_posted >= checkpoint.EVERY
            and not self._closed_fd
        )

    def _binding(self, target: int, *, after: bytes) -> TailStart | None:
        """Where the commit record for ``target`` entries ends: the file as it is now, followed
        by ``after`` (that commit record, when it is not written yet, or nothing)."""
        try:
            with self._file.use() as fd:
                size = os.fstat(fd).st_size
        except OSError as error:
            _log.warning("session %s: no checkpoint written: %s", self.id, error)
            return None
        return TailStart(
            target,
            size + len(after),
            self._lines + self._commit_lines + (1 if after else 0),
            self._checksums[target - 1 - self._origin],
        )

    def _checkpoint_while_open(self, end: TailStart) -> None:
        """Queue a checkpoint bound to ``end``, the commit record a flush wrote (on the loop).

        A lone barrier's flush takes it whenever one is due (see :meth:`_flush_now`); a flush
        on the session's thread only when no entry was appended while it ran (otherwise the
        next flush that finds the file so, or the close, does). The state is the incremental
        draft (:meth:`_checkpoint_draft`); checking that the commit record ends where
        expected, writing the file and bringing the next-target fold up to it run on the
        session's thread (the only thread that folds it), which then hands back to the loop
        (:meth:`_checkpoint_written`).
        """
        if self._closed_fd or self._poison() is not None:
            return
        # The window's payloads are encoded on the session's thread (entries never change).
        content = self._checkpoint_draft(end.entries, window=False)
        if content is None:
            return
        window = self._entries[max(0, end.entries - checkpoint.WINDOW) : end.entries]
        segment_starts = segments_of(self._index_starts(), end)
        self._checkpoint_posted = end.entries
        self._posted_ends.append(end)
        session_id, file, where = self.id, self._file, checkpoint_path(self._path)
        entries, fold = self._entries, self._next_target
        loop = asyncio.get_running_loop()

        def save() -> None:
            try:
                with file.use() as fd:
                    ending = commit_ending_at(fd, end.offset)
                if ending != (end.entries, end.chain):
                    _log.info(
                        "session %s: no checkpoint written at %d entries: the file does not "
                        "end with their commit record where it did",
                        session_id,
                        end.entries,
                    )
                    return
                bound = msgspec.structs.replace(
                    content,
                    offset=end.offset,
                    lines=end.lines,
                    window=checkpoint.window_of(window),
                    segments=segment_starts,
                )
                data = checkpoint.seal(bound, chain=end.chain)
                checkpoints.write_checkpoint(where, data)
            except OSError as error:
                _log.warning("session %s: no checkpoint written: %s", session_id, error)
                return
            # The entries before the checkpoint's window may leave memory once this returns:
            # the fold reads on from where it stopped, so it is brought up to it first.
            fold.after(entries, end.entries)
            # A closed loop has no handle left to report to.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._checkpoint_written, end)

        self._worker.post(save)

    def _index_starts(self) -> list[TailStart] | None:
        """The lazy reader's index, extended by the checkpoints queued since (see
        :attr:`_posted_ends`); ``None`` when there is no reader."""
        if self._older is None:
            return None
        starts = self._older.starts
        for end in self._posted_ends:
            starts = thinned(starts, end) or starts
        return starts

    def _checkpoint_written(self, end: TailStart) -> None:
        """A checkpoint bound to ``end`` is stored: the lazy reader of older entries covers the
        bytes up to it, and the entries before its window leave memory (on the event loop)."""
        if self._closed_fd or self._poison() is not None or end.entries <= self._checkpointed:
            return
        self._checkpointed = end.entries
        self._posted_ends = [later for later in self._posted_ends if later.entries > end.entries]
        if self._older is not None and isinstance(self._entries, LazyEntries):
            self._older.cover(end)
            self._entries.forget_before(end.entries - checkpoint.WINDOW)

    def _record_target(self) -> None:
        """Queue the next-target record of the file as it is now (see :mod:`.next_targets`).

        On the event loop, between flushes: the file holds exactly these entries now, so its
        ``fstat`` and the entry count are taken here. Folding the new entries and writing the
        record (a cache, never fsync'd) run on the session's thread, in order, after anything
        queued before; no barrier waits for them.
        """
        session_id, entries, end = self.id, self._entries, len(self._entries)
        try:
            with self._file.use() as fd:
                status = os.fstat(fd)
        except OSError as error:
            _log.warning("session %s: its next target was not indexed: %s", session_id, error)
            return
        # Only that thread ever folds: ``after`` is called in order, with ``end`` never
        # moving backwards, and reads entries that are never changed once appended.
        fold, index = self._next_target, self._index
        self._index_marked = False  # entries written after this record need a mark of their own
        self._worker.post(lambda: index.record(session_id, fold.after(entries, end), status))

    async def _release(self) -> None:
        file = self._file
        found = _open_handles.get(self._path)
        if found is not None and found[0]() is self:
            del _open_handles[self._path]
        if self._poison() is None:
            self._write_unwritten_commit()
        # From here on ``_closed_fd`` (the lane is stopped below, before any callback can run).
        # Only of a durable file (see :meth:`_flushed`); otherwise a reader rebuilds it.
        if self._indexed and self._poison() is None and self._commit.durable == len(self._entries):
            self._record_target()
        save = self._checkpoint_job()

        def last() -> None:
            if save is not None:
                try:
                    save()
                except (OSError, ScheduleError, ValueError) as error:
                    _log.warning("no checkpoint written for session %s: %s", self.id, error)
            # The descriptor first, then the ownership (``close`` gives it up once the
            # descriptor is closed): no other owner writes while it is open.
            file.close()

        await self._worker.stop(last)

    def _checkpoint_job(self) -> Callable[[], None] | None:
        """What writes a checkpoint at close, if one would be new and can be bound: every entry
        durable and the file ending with the commit record that says so. Its state is the
        incremental draft (:meth:`_checkpoint_draft`), not a fold of the whole log."""
        count = len(self._entries)
        if (
            self.header.format != 2
            or self._poison() is not None
            or count == 0
            or self._commit.durable != count
            or count <= self._checkpoint_posted
        ):
            return None
        content = self._checkpoint_draft(count, window=False)
        if content is None:
            return None
        window = self._entries[max(0, count - checkpoint.WINDOW) : count]
        file = self._file
        chain = self._checksums[count - 1 - self._origin]
        target = checkpoint_path(self._path)
        starts = self._index_starts()

        def save() -> None:
            with file.use() as fd:
                size = os.fstat(fd).st_size
                ending = commit_ending_at(fd, size)
            if ending != (count, chain):
                return
            lines = self._lines + self._commit_lines
            end = TailStart(count, size, lines, chain)
            bound = msgspec.structs.replace(
                content,
                offset=size,
                lines=lines,
                window=checkpoint.window_of(window),
                segments=segments_of(starts, end),
            )
            checkpoints.write_checkpoint(target, checkpoint.seal(bound, chain=chain))

        return save
