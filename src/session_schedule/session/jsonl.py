"""The JSONL store: one file per session in a data directory — the embedded default.

A session is the file ``<data_dir>/<session id>.jsonl`` (mode ``0600``): the header on line 1,
then the entries, one line each, in order. New sessions are written in format 2 (sequence
numbers, chained checksums and commit records); sessions of format 1 are still read and appended
to in format 1. Both formats are in :mod:`session_schedule.session.lines`. The discipline, after
SPEC §9:

- **Creation is atomic.** The header — and a fork's copied entries — go to a hidden temporary
  file, which is fsync'd and then hard-linked to the session's name (``link`` never replaces an
  existing session) before the directory is fsync'd. A crash leaves either no session or a
  complete one (and perhaps a stray ``.s_….tmp`` file, which nothing reads).
- **Only regular files.** Every session file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and
  ``fstat``'d before a byte moves: a symbolic link, FIFO, device, socket or directory under a
  session's name is ``SessionCorrupt`` (``scan`` lists it beside the others, and never hangs on
  a FIFO). A data directory writable by group or others is logged as a warning, once per store.
- **One writer.** The owning handle holds ``flock(LOCK_EX | LOCK_NB)`` on the file; a second
  owner — another descriptor in this process or another process — is refused with
  ``SessionBusy``. The kernel drops the lock when the owner closes the file or dies.
- **One write per entry.** ``append`` issues a single ``os.write`` of the whole line, newline
  included, on an ``O_APPEND`` descriptor; a failed or short write poisons the handle.
- **The barrier is an fsync**, with group commit (see :mod:`session_schedule.session.barrier`):
  a hundred appends, then one barrier, cost one fsync. A lone barrier fsyncs on the event
  loop's thread; barriers called together share one fsync on the session's own thread
  (``flush_on_loop=False``: every flush there).
  In format 2, once the fsync has returned, a commit record for the entries it made durable is
  appended (durable itself with the next fsync). A flush on the session's thread writes it
  there, and a failure fails the barrier; a lone barrier leaves it to a loop callback run once
  its caller has gone on, or to the next entry's ``write``, which carries it ahead of the line,
  and a failure then poisons the handle (the entries are durable already).
- **A next-target index** beside the sessions, ``.next-targets``, a cache of the logs kept by
  the owners and checked against each file's inode, size and mtime by readers
  (:mod:`session_schedule.session.jsonl_targets`), answers ``due_sessions``. An owner's record
  is written on the session's thread after the barrier has returned: it is derived data, which
  a reader rebuilds from the log whenever it does not describe the file, so neither its fold nor
  its write is on the path of a create.
- **A checkpoint** beside the file (``<session id>.checkpoint``, format 3, see
  :mod:`session_schedule.session.checkpoint`) is bound to a commit record. It is written on the
  session's thread after a barrier once :data:`~.checkpoint.EVERY` entries have become durable
  since the last, and at close; the entries before its window then leave memory and are read
  back from the file, chain-checked, a segment at a time, when asked for. It carries the index
  of where those segments start (see :class:`_Prefix`).
- **Opening repairs only a torn tail.** In format 2 that is everything from the first line that
  does not verify, provided no commit record vouches for an entry at or past it; in format 1,
  the bytes after the final newline. The tail is cut (``ftruncate`` + ``fsync``); in format 2,
  intact entries that no commit record covers yet are fsync'd and then vouched for by a commit
  record, as a barrier would. Anything else that does not verify is corruption: it is reported
  and the file is left byte-for-byte untouched.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import errno
import fcntl
import itertools
import logging
import os
import secrets
import stat
import threading
from collections.abc import Awaitable, Callable, Collection, Sequence
from pathlib import Path
from typing import Final, NamedTuple, NoReturn, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant
from session_schedule.session import checkpoint, codec
from session_schedule.session.codec import Source, encode_payload
from session_schedule.session.errors import (
    SessionCorrupt,
    SessionError,
    SessionNotFound,
    not_a_regular_file,
    persistence_uncertain,
    session_busy,
    session_exists,
    session_not_found,
)
from session_schedule.session.handle import LazyEntries, LogHandle
from session_schedule.session.handover import RequestFiles
from session_schedule.session.ids import (
    SessionId,
    chosen_session_id,
    new_session_id,
    parse_session_id,
    require_session_id,
)
from session_schedule.session.jsonl_targets import INDEX_NAME, TargetIndexFile
from session_schedule.session.lines import (
    CHAIN_SEED,
    CURRENT_FORMAT,
    HEADER_LIMIT,
    HEADER_TOO_LONG,
    Checksums,
    Format,
    Scan,
    TailStart,
    commit_line,
    decode_header_line,
    entry_line,
    header_line_for,
    intact_commit,
    new_checksums,
    scan,
    scan_tail,
    stated_entry_checksum,
)
from session_schedule.session.port import (
    DEFAULT_DUE_LIMIT,
    DueSession,
    LogEntry,
    ResumePoint,
    SessionHeader,
    SessionListing,
    SessionSnapshot,
    listed,
    listing,
    make_header,
    seed_length,
)
from session_schedule.session.private import private_directory
from session_schedule.session.targets import check_limit, holds_changes, next_target_of
from session_schedule.session.worker import Worker

SUFFIX: Final = ".jsonl"
_log: Final = logging.getLogger(__name__)
_READ_CHUNK: Final = 1 << 20


@final
class JsonlSessionHandle(LogHandle):
    """The owner of one session file: holds its descriptor and its ``flock``."""

    def __init__(
        self,
        *,
        opened: _Opened,
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
            older = _Prefix(opened.fd, opened.header, [head], _source(opened.header.id))
            entries = LazyEntries(0, list(entries), older.read, chunk=_CHUNK)
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
        self._fd = opened.fd
        self._path = path
        self._worker = worker
        self._lines = opened.lines
        """Complete lines in the file when it was opened, plus the entry lines written since."""
        self._commit_lines = 0
        """Commit records written since (counted on the worker thread)."""
        self._unwritten_commit: bytes | None = None
        """A lone barrier's commit record, until it is written (see :meth:`_after_flush`)."""
        self._checkpoint_end: TailStart | None = None
        """Where that commit record ends, when a checkpoint is due at it."""
        self._index_due = False
        """Whether a flush covered schedule changes that no next-target record describes yet."""
        self._closed_fd = False
        """Whether the file is being released (no more bookkeeping writes)."""
        self._index = index
        # Opened from a checkpoint, the log may hold a schedule change before it: record it.
        self._indexed = opened.resume is not None or holds_changes(opened.entries)
        """Whether the log holds a schedule change (a session that never had one needs no
        next-target record until a reader rebuilds it)."""

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
            prefix = _read_prefix(self._fd, self._prefix_bytes, _source(self.id), self._origin + 1)
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
        _write_all(self._fd, line if commit is None else commit + line)
        if commit is not None:
            self._unwritten_commit = None
            self._commit_lines += 1
        self._lines += 1
        if checksum is not None:
            self._checksums.append(checksum)

    def _flush_now(self, durable: int, target: int) -> None:
        """A lone barrier's flush, on the loop's thread (see :mod:`.barrier`).

        Only the ``fsync`` is on the barrier's path. The commit record (format 2) and the
        next-target record are bookkeeping that no waiter needs: they are done by a callback
        the loop runs once the barrier's caller has gone on (see :meth:`_after_flush`). What
        they need is prepared before the ``fsync`` (which changes none of it), so that only
        two assignments follow it: code run right after a blocking ``fsync`` runs slowly.
        """
        if self._holds_changes(durable, target):
            self._indexed = self._index_due = True
        commit = None
        checkpoint_due = self._checkpoint_due(target)
        if self.header.format == 2:
            commit = commit_line(target, self._checksums[target - 1 - self._origin])
        # Nothing else is written to the file before this commit record (the next entry line
        # carries it, or the callback writes it): it will end there.
        end = self._binding(target, after=commit) if checkpoint_due and commit else None
        # Scheduled first: should the fsync fail, the callback finds the handle poisoned and
        # does nothing.
        asyncio.get_running_loop().call_soon(self._after_flush, target)
        os.fsync(self._fd)
        self._unwritten_commit = commit
        if checkpoint_due:
            self._checkpoint_end = end

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
            _write_all(self._fd, commit)
        except OSError as error:
            self._write_failure = f"writing a commit record failed: {error}"
            return
        self._commit_lines += 1

    def _flush(self, durable: int, target: int) -> Awaitable[None]:
        fd = self._fd
        indexed = self._index_due or self._holds_changes(durable, target)
        self._index_due = False
        if self.header.format == 1:
            return self._flushed(
                self._worker.submit(lambda: os.fsync(fd)), target=target, indexed=indexed
            )
        # Written once the fsync has returned: a readable commit record never vouches for bytes
        # that were not durable. It becomes durable itself with the next barrier's fsync.
        commit = commit_line(target, self._checksums[target - 1 - self._origin])

        def flush() -> None:
            os.fsync(fd)
            _write_all(fd, commit)
            self._commit_lines += 1

        return self._flushed(self._worker.submit(flush), target=target, indexed=indexed)

    async def _flushed(self, flush: Awaitable[None], *, target: int, indexed: bool) -> None:
        await flush
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
            size = os.fstat(self._fd).st_size
        except OSError as error:
            _log.warning("session %s: no checkpoint written: %s", self.id, error)
            return None
        return TailStart(
            target,
            size + len(after),
            self._lines + self._commit_lines + (1 if after else 0),
            self._checksums[target - 1 - self._origin],
        )

    async def shed_inherited(self) -> None:
        """Let a new fork's inherited entries leave memory: write the commit record for them and
        a checkpoint bound to it (a fork's file otherwise ends without one, so none could be
        taken before its first barrier), then keep only the checkpoint's window decoded, as an
        open session does after a checkpoint. A failure leaves the entries held (it is
        logged); the session works as before either way."""
        target = len(self._entries)
        if self.header.format != 2 or target == 0 or self._checkpointed >= target:
            return
        commit = commit_line(target, self._checksums[target - 1 - self._origin])
        end = self._binding(target, after=commit)
        if end is None:
            return
        try:
            _write_all(self._fd, commit)  # durable with the next fsync, as any commit record
        except OSError as error:
            self._write_failure = f"writing a commit record failed: {error}"
            return
        self._commit_lines += 1
        self._checkpoint_while_open(end)
        await self._worker.submit(lambda: None)  # the checkpoint's save ran before this
        await asyncio.sleep(0)  # and handed back to the loop

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
        segments = _segments_of(self._index_starts(), end)
        self._checkpoint_posted = end.entries
        self._posted_ends.append(end)
        session_id, fd, where = self.id, self._fd, checkpoint_path(self._path)
        entries, fold = self._entries, self._next_target
        loop = asyncio.get_running_loop()

        def save() -> None:
            try:
                if _commit_ending_at(fd, end.offset) != (end.entries, end.chain):
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
                    segments=segments,
                )
                data = checkpoint.seal(bound, chain=end.chain)
                _write_checkpoint(where, data)
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
            starts = _thinned(starts, end) or starts
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
        """Queue the next-target record of the file as it is now (see :mod:`.jsonl_targets`).

        On the event loop, between flushes: the file holds exactly these entries now, so its
        ``fstat`` and the entry count are taken here. Folding the new entries and writing the
        record (a cache, never fsync'd) run on the session's thread, in order, after anything
        queued before; no barrier waits for them.
        """
        session_id, entries, end = self.id, self._entries, len(self._entries)
        try:
            status = os.fstat(self._fd)
        except OSError as error:
            _log.warning("session %s: its next target was not indexed: %s", session_id, error)
            return
        # Only that thread ever folds: ``after`` is called in order, with ``end`` never
        # moving backwards, and reads entries that are never changed once appended.
        fold, index = self._next_target, self._index
        self._worker.post(lambda: index.record(session_id, fold.after(entries, end), status))

    async def _release(self) -> None:
        fd = self._fd
        if self._poison() is None:
            self._write_unwritten_commit()
        self._closed_fd = True
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
            os.close(fd)

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
        fd = self._fd
        chain = self._checksums[count - 1 - self._origin]
        target = checkpoint_path(self._path)
        starts = self._index_starts()

        def save() -> None:
            size = os.fstat(fd).st_size
            if _commit_ending_at(fd, size) != (count, chain):
                return
            lines = self._lines + self._commit_lines
            end = TailStart(count, size, lines, chain)
            bound = msgspec.structs.replace(
                content,
                offset=size,
                lines=lines,
                window=checkpoint.window_of(window),
                segments=_segments_of(starts, end),
            )
            _write_checkpoint(target, checkpoint.seal(bound, chain=chain))

        return save


@final
class JsonlInspection(NamedTuple):
    """A session file as :meth:`JsonlSessionStore.inspect` finds it."""

    snapshot: SessionSnapshot
    torn_bytes: int
    """Bytes a torn tail holds: opening the session cuts them."""
    torn_lines: int
    """Complete lines among them (0: only an incomplete last line)."""
    checksums: Sequence[int]
    """Entry ``n``'s chained checksum at index ``n`` (format 2; empty for format 1)."""


class _Opened(NamedTuple):
    fd: int
    header: SessionHeader
    entries: list[LogEntry] | LazyEntries
    checksums: Checksums
    lines: int
    """Complete lines in the file."""
    head: int
    """The header line's bytes (its newline included)."""
    origin: int = 0
    """The position of ``checksums[0]``."""
    offset: int = 0
    """The bytes a checkpoint covered (0: opened without one)."""
    resume: ResumePoint | None = None
    older: _Prefix | None = None
    """What reads the entries before the checkpoint (opened from one)."""


@final
class JsonlSessionStore:
    """Sessions as JSONL files in ``data_dir`` (created ``0700`` when missing)."""

    def __init__(self, data_dir: str | os.PathLike[str], *, flush_on_loop: bool = True) -> None:
        """``data_dir``: a path, as a string or a path object; ``flush_on_loop``: a lone barrier
        fsyncs on the event loop's thread (fast, but the loop waits for the disk meanwhile);
        ``False`` sends every flush to the session's thread."""
        data_dir = Path(data_dir)
        self._dir = data_dir
        self._index = TargetIndexFile(data_dir, suffix=SUFFIX, read_log=_read_log)
        self._flush_on_loop = flush_on_loop
        self._directory_lock = threading.Lock()
        self._directory_checked = False
        self._handovers = RequestFiles(data_dir)

    def check_directory(self) -> None:
        """Log a warning when others than its owner may write the data directory.

        Whoever can write the data directory can plant or replace session files (a symbolic
        link, a FIFO, another session's file), so it should be private (mode ``0700``, as the
        store creates it). Checked once per store, the first time the directory exists.
        """
        with self._directory_lock:
            if self._directory_checked:
                return
            try:
                mode = stat.S_IMODE(self._dir.stat().st_mode)
            except FileNotFoundError:
                return
            self._directory_checked = True
        if mode & 0o022:
            _log.warning(
                "session data directory %s is writable by %s (mode %04o): another user "
                "could plant or replace session files; make it private (chmod 700)",
                self._dir,
                "its group and others"
                if mode & 0o022 == 0o022
                else "its group"
                if mode & 0o020
                else "others",
                mode,
            )

    @property
    def data_dir(self) -> Path:
        return self._dir

    def path_of(self, session_id: SessionId) -> Path:
        """The file of session ``session_id``."""
        return self._dir / f"{session_id}{SUFFIX}"

    async def request_handover(self, session_id: SessionId) -> None:
        """Ask the holder of ``session_id`` to let it go (a file beside the session's)."""
        await self._handovers.request(session_id)

    async def withdraw_handover(self, session_id: SessionId) -> None:
        await self._handovers.withdraw(session_id)

    async def handover_requests(self, session_ids: Collection[SessionId]) -> frozenset[SessionId]:
        return await self._handovers.live(session_ids)

    async def create(
        self, *, now: Instant, session_id: SessionId | None = None
    ) -> JsonlSessionHandle:
        chosen = chosen_session_id(session_id)

        def job() -> _Opened:
            opened = _create(
                self._dir,
                chosen,
                lambda new_id: make_header(
                    new_id,
                    now=now,
                    parent_id=None,
                    seed_length=0,
                    format_version=CURRENT_FORMAT,
                ),
                _Seed([], [], new_checksums()),
            )
            self.check_directory()
            return opened

        return await self._own(job)

    async def open(self, session_id: str) -> JsonlSessionHandle:
        """Own an existing session (see :class:`SessionStore`), from its checkpoint when one
        matches the log (see :mod:`session_schedule.session.checkpoint`)."""
        checked = require_session_id(session_id)
        return await self._own(
            lambda: _open(self._checked(self.path_of(checked)), _source(checked))
        )

    def checkpoint_path(self, session_id: SessionId) -> Path:
        """The checkpoint file of session ``session_id`` (beside its log)."""
        return checkpoint_path(self.path_of(session_id))

    async def fork(
        self,
        parent_id: str,
        *,
        at: int | None = None,
        now: Instant,
        session_id: SessionId | None = None,
    ) -> JsonlSessionHandle:
        chosen = chosen_session_id(session_id)
        parent = require_session_id(parent_id)

        def job() -> _Opened:
            parsed = _read(self._checked(self.path_of(parent)), _source(parent), sync=True)
            count = seed_length(at, len(parsed.entries), parent)
            return _create(
                self._dir,
                chosen,
                lambda new_id: make_header(
                    new_id,
                    now=now,
                    parent_id=parent,
                    seed_length=count,
                    format_version=CURRENT_FORMAT,
                ),
                _seed(parsed, count),
            )

        handle = await self._own(job)
        if len(handle.entries) > FORK_HELD:
            # The parent's history stays in the file, not in memory: twenty forks of a long
            # session would otherwise hold twenty copies of it.
            await handle.shed_inherited()
        return handle

    async def read(self, session_id: str) -> SessionSnapshot:
        checked = require_session_id(session_id)
        parsed = await asyncio.to_thread(
            lambda: _read(self._checked(self.path_of(checked)), _source(checked), sync=False)
        )
        return SessionSnapshot(parsed.header, tuple(parsed.entries))

    async def inspect(self, session_id: str) -> JsonlInspection:
        """Like :meth:`read`, and also what opening the session would cut."""
        checked = require_session_id(session_id)

        def job() -> JsonlInspection:
            parsed = _read(self._checked(self.path_of(checked)), _source(checked), sync=False)
            return JsonlInspection(
                SessionSnapshot(parsed.header, tuple(parsed.entries)),
                parsed.size - parsed.keep,
                parsed.lines_cut,
                parsed.checksums,
            )

        return await asyncio.to_thread(job)

    async def derived_problems(self, session_id: str) -> tuple[str, ...]:
        """What the files derived from ``session_id``'s log say that its log does not, where
        they would be believed: its checkpoint, when it is bound to the log's commit record (so
        opening the session may use it) but holds other reminders, pending turns or entries
        than the log; its record in the next-target index, when it verifies and describes the
        file but names another next target. Each problem is one clause; none: ``()``.

        A derived file that would not be believed (stale, damaged, unsigned) is no problem: it
        is rebuilt from the log."""
        checked = require_session_id(session_id)
        path = self._checked(self.path_of(checked))
        source = _source(checked)

        def job() -> tuple[str, ...]:
            parsed = _read(path, source, sync=False)
            problems: list[str] = []
            found = _read_checkpoint(checkpoint_path(path), source)
            if isinstance(found, checkpoint.CheckpointFile) and parsed.header.format == 2:
                fd = _open_session_file(path, os.O_RDONLY, source)
                try:
                    bound = found.offset <= os.fstat(fd).st_size and _commit_ending_at(
                        fd, found.offset
                    ) == (found.entries, found.chain)
                finally:
                    os.close(fd)
                difference = (
                    checkpoint.mismatch(
                        found,
                        parsed.entries,
                        seed=parsed.header.seed_length,
                        session=checked,
                    )
                    if bound
                    else None
                )
                if difference is not None:
                    problems.append(
                        f"its checkpoint {checkpoint_path(path).name} is bound to its log but "
                        f"does not say what the log says ({difference}); delete the checkpoint "
                        "(it is rebuilt from the log)"
                    )
            target = next_target_of(parsed.header, parsed.entries)
            indexed = self._index.mismatch(checked, path.lstat(), target)
            if indexed is not None:
                problems.append(f"{indexed}; delete {INDEX_NAME} (it is rebuilt from the logs)")
            return tuple(problems)

        return await asyncio.to_thread(job)

    async def list(self) -> tuple[SessionHeader, ...]:
        return listed(await self.scan())

    async def scan(self) -> SessionListing:
        return await asyncio.to_thread(lambda: _scan(self))

    async def due_sessions(
        self, before: Instant, *, limit: int = DEFAULT_DUE_LIMIT
    ) -> tuple[DueSession, ...]:
        """See the port; answered from the sidecar index ``.next-targets`` of the data directory
        (:mod:`session_schedule.session.jsonl_targets`), which reads a session's log only when
        its record is missing or stale."""
        check_limit(limit)
        return await asyncio.to_thread(lambda: self._index.due(before, limit))

    def _checked(self, path: Path) -> Path:
        self.check_directory()
        return path

    async def _own(self, job: Callable[[], _Opened]) -> JsonlSessionHandle:
        worker = Worker("session-jsonl")
        opened = await worker.start(job, undo=lambda opened: os.close(opened.fd))
        return JsonlSessionHandle(
            opened=opened,
            path=self.path_of(opened.header.id),
            worker=worker,
            index=self._index,
            flush_on_loop=self._flush_on_loop,
        )


def _read_log(path: Path, session_id: SessionId) -> tuple[SessionHeader, list[LogEntry]]:
    parsed = _read(path, _source(session_id), sync=False)
    return parsed.header, parsed.entries


def _source(session_id: str) -> Source:
    return Source(session_id=session_id, name=f"{session_id}{SUFFIX}", storage="file", lines=True)


# Blocking work, run on a worker thread.


def _open(path: Path, source: Source) -> _Opened:
    fd = _open_session_file(path, os.O_RDWR | os.O_APPEND, source)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise session_busy(source.session_id) from None
        resumed = _open_from_checkpoint(fd, checkpoint_path(path), source)
        if resumed is not None:
            return resumed
        data = _read_all(fd)
        parsed = scan(data, source)
        wrote = _recover(fd, parsed, torn=len(data) - parsed.keep, source=source)
    except BaseException:
        os.close(fd)
        raise
    return _Opened(
        fd,
        parsed.header,
        parsed.entries,
        parsed.checksums,
        parsed.kept_lines + wrote,
        data.find(b"\n") + 1,
    )


def checkpoint_path(log: Path) -> Path:
    """The checkpoint file beside the session file ``log``."""
    return log.with_suffix(checkpoint.SUFFIX)


FORK_HELD: Final = checkpoint.WINDOW
"""A fork inheriting more entries than this keeps only a checkpoint's window of them decoded."""
_COMMIT_READ: Final = 256
"""Bytes read back from the end of a file to find its last commit record (a few dozen)."""


def _open_from_checkpoint(fd: int, where: Path, source: Source) -> _Opened | None:
    """The session opened from its checkpoint, or ``None`` when there is none that matches
    the log (then the reason is logged and the whole log is read)."""
    found = _read_checkpoint(where, source)
    if isinstance(found, checkpoint.Rejected):
        if found.reason != "missing":
            log = _log.info if found.reason == "version" else _log.warning
            log("checkpoint of session %s not used (%s): %s", source.session_id, *found)
        return None
    size = os.fstat(fd).st_size
    head = _pread_all(fd, min(size, HEADER_LIMIT + 1), 0)
    end = head.find(b"\n")
    if end < 0:
        return None  # the whole-log read reports it
    header = decode_header_line(head[:end], source)
    if (
        header.format != 2
        or found.offset > size
        or _commit_ending_at(fd, found.offset) != (found.entries, found.chain)
    ):
        _log.warning(
            "checkpoint of session %s not used (log mismatch): the log has no commit record "
            "for %d entries with checksum %08x where it says",
            source.session_id,
            found.entries,
            found.chain,
        )
        return None
    restored = checkpoint.restore(found, source)
    if isinstance(restored, checkpoint.Rejected):
        _log.warning("checkpoint of session %s not used (%s): %s", source.session_id, *restored)
        return None
    if not _window_verifies(fd, header, found, restored.window, source):
        # The whole-log read that follows reports the damage, with its line.
        _log.warning(
            "checkpoint of session %s not used (window mismatch): the log's lines of the %d "
            "entries before it do not verify or differ from the checkpoint's window",
            source.session_id,
            len(restored.window),
        )
        return None
    after = TailStart(found.entries, found.offset, found.lines, found.chain)
    parsed = scan_tail(
        header, _pread_all(fd, size - found.offset, found.offset), source, after=after
    )
    count = found.entries + len(parsed.entries)
    last = parsed.checksums[-1] if parsed.checksums else found.chain
    wrote = _recover(fd, parsed, torn=size - parsed.keep, source=source, count=count, last=last)
    first = found.entries - len(restored.window)
    header_end = TailStart(0, end + 1, 1, CHAIN_SEED)
    stored = _stored_index(found.segments, header_end, after)
    if isinstance(stored, str) and found.segments:
        _log.warning(
            "segment index in the checkpoint of session %s not used: %s", source.session_id, stored
        )
    older = (
        _Prefix(fd, header, [header_end, after], source)
        if isinstance(stored, str)
        else _Prefix(fd, header, stored, source, stored=True)
    )
    entries = LazyEntries(first, restored.window + parsed.entries, older.read, chunk=_CHUNK)
    checksums = new_checksums()
    checksums.append(found.chain)
    checksums.extend(parsed.checksums)
    return _Opened(
        fd,
        header,
        entries,
        checksums,
        parsed.kept_lines + wrote,
        end + 1,
        origin=found.entries - 1,
        offset=found.offset,
        resume=restored.resume_point(),
        older=older,
    )


_WINDOW_READ: Final = 1 << 16
"""Bytes first read back from a checkpoint's commit record to verify its window's lines (the
window's 64 lines, and the line before them, are a few kilobytes in a typical session)."""


def _window_verifies(
    fd: int,
    header: SessionHeader,
    found: checkpoint.CheckpointFile,
    window: Sequence[LogEntry],
    source: Source,
) -> bool:
    """Whether the log's own lines of the checkpoint's ``window`` (the entries just before its
    commit record at ``found.offset``) verify — each checksum against the chain from the line
    before them to the commit record's — and hold the very entries the window does.

    Reads the file backwards from the commit record until it holds the line before the window
    (or the header, for a window that starts at entry 0).
    """
    if not window:
        return True
    first = found.entries - len(window)
    size = min(found.offset, _WINDOW_READ)
    while True:
        start = found.offset - size
        data = _pread_all(fd, size, start)
        lines = data.split(b"\n")[:-1]  # the data ends with the commit record's newline
        seed = _line_before(lines, first, whole=start == 0)
        if seed is not None:
            break
        if start == 0:
            return False
        size = min(found.offset, size * 4)
    index, chain = seed
    begin = sum(len(line) + 1 for line in lines[: index + 1])
    try:
        parsed = scan_tail(
            header, data[begin:], source, after=TailStart(first, start + begin, 0, chain)
        )
    except (SessionError, ScheduleError, ValueError):
        return False
    return (
        bool(parsed.checksums)
        and parsed.checksums[-1] == found.chain
        and [(e.position, e.type, e.payload) for e in parsed.entries]
        == [(e.position, e.type, e.payload) for e in window]
    )


def _line_before(lines: list[bytes], first: int, *, whole: bool) -> tuple[int, int] | None:
    """The index in ``lines`` of the line before entry ``first``'s — entry ``first - 1``'s, or
    the header's when ``first`` is 0 — and the checksum the chain goes on from; ``None`` when
    ``lines`` do not hold it (``whole``: they start at the file's start)."""
    if first == 0:
        return (0, CHAIN_SEED) if whole and lines else None
    for index in range(len(lines) - 1, 0 if not whole else -1, -1):
        stated = stated_entry_checksum(lines[index], first - 1)
        if stated is not None:
            return index, stated
    return None


def _commit_ending_at(fd: int, offset: int) -> tuple[int, int] | None:
    """The entry count and checksum of the commit record whose line ends the file's first
    ``offset`` bytes (``None``: no intact commit record ends there)."""
    size = min(offset, _COMMIT_READ)
    return intact_commit(_pread_all(fd, size, offset - size))


_CHUNK: Final = 1024
"""How many entries before a checkpoint's window are handed out per read."""
_SEGMENT: Final = 1 << 20
"""Bytes of the log before a checkpoint scanned at once."""


@final
class _Prefix:
    """The entries before a checkpoint, read from the log a segment at a time.

    It covers the bytes up to the newest checkpoint's commit record (none, for a session that
    has none yet) and keeps an index of where their segments start (:class:`TailStart`: entries,
    offset, lines and chained checksum), always complete from the header's end to the covered
    end. A read of entry ``n`` scans only the segment that holds it, strictly, and checks that it
    ends where the next one starts (same entry count, same checksum): it costs O(segment), not
    O(log), and only the last segment read is kept. A segment of more than :data:`_SEGMENT`
    bytes (and more than one line) is first split, by one strict scan of it in pieces of about
    that size, chain-checked from its start to its end, keeping only where each piece starts.

    Where the starts come from, none of them by scanning on the write path:

    - the header's end, then each checkpoint's commit record as it is stored (:meth:`cover`),
      thinned so that starts are about a segment apart (:func:`_thinned`); a checkpoint stores
      the index up to its own end (``segments``);
    - a session opened from a checkpoint starts from the index it stores, when that is
      well-formed (:func:`_stored_index`), and otherwise from one segment, the header's end to
      the checkpoint's, which the first read splits (a scan of every covered byte, once).

    A stored index is derived data, never trusted over the log: when one of its segments does
    not verify, it is dropped for the one-segment index and the read scans the covered bytes
    anew. Whatever does not verify then (or with an index this handle built) is corruption,
    reported with the error of a whole read of those bytes (:func:`_read_prefix`).

    On a 2-core machine, one model request at the harness's default budget on a freshly opened
    session of 100,000 entries (17 MB), which reaches before the checkpoint's window: 25 to 27 ms
    with the stored index (one or two segments read), against 572 to 639 ms when the first read
    scanned every byte before the checkpoint (``bench recent_context``).
    """

    __slots__ = ("_cached", "_fd", "_header", "_source", "_starts", "_stored")

    def __init__(
        self,
        fd: int,
        header: SessionHeader,
        starts: list[TailStart],
        source: Source,
        *,
        stored: bool = False,
    ) -> None:
        """``starts``: the index, from the header's end (alone: nothing is covered yet) to the
        covered end; ``stored``: it was read from a checkpoint, not built by this handle."""
        self._fd = fd
        # A segment of a fork may end before its seedLength: the whole read checks that.
        self._header = msgspec.structs.replace(header, seed_length=0)
        self._starts = starts
        self._stored = stored
        self._source = source
        self._cached: tuple[TailStart, TailStart, list[LogEntry]] | None = None

    @property
    def starts(self) -> list[TailStart]:
        """A copy of the index (for a checkpoint's ``segments``)."""
        return list(self._starts)

    def cover(self, end: TailStart) -> None:
        """Cover the bytes up to ``end``, a later checkpoint's commit record."""
        starts = _thinned(self._starts, end)
        if starts is not None:
            self._starts = starts

    def read(self, begin: int, end: int) -> list[LogEntry]:
        """Entries ``begin … end-1`` (``end`` at most the checkpoint's position)."""
        found: list[LogEntry] = []
        while begin + len(found) < end:
            at = begin + len(found)
            start, entries = self._holding(at)
            found.extend(entries[at - start.entries : end - start.entries])
        return found

    def _holding(self, position: int) -> tuple[TailStart, list[LogEntry]]:
        """The segment that holds entry ``position``: where it starts, and its entries."""
        try:
            return self._segment(position)
        except _MismatchError as mismatch:
            if not self._stored:
                self._fail()
            _log.warning(
                "segment index in the checkpoint of session %s not used: %s; scanning the log "
                "before the checkpoint instead",
                self._source.session_id,
                mismatch,
            )
        self._stored = False
        self._cached = None
        self._starts = [self._starts[0], self._covered()]
        try:
            return self._segment(position)
        except _MismatchError:
            self._fail()

    def _segment(self, position: int) -> tuple[TailStart, list[LogEntry]]:
        index = self._find(position)
        start, stop = self._starts[index], self._starts[index + 1]
        # A segment is known by both ends: a later checkpoint may have moved the last one's end.
        if self._cached is not None and self._cached[:2] == (start, stop):
            return self._cached[0], self._cached[2]
        if stop.offset - start.offset > _SEGMENT and stop.lines - start.lines > 1:
            pieces = self._split(start, stop)
            self._starts[index + 1 : index + 1] = pieces
            index = self._find(position)
            start, stop = self._starts[index], self._starts[index + 1]
        parsed = self._scan(start, _pread_all(self._fd, stop.offset - start.offset, start.offset))
        self._check_ends(start, stop, parsed)
        self._cached = (start, stop, parsed.entries)
        return start, parsed.entries

    def _find(self, position: int) -> int:
        if len(self._starts) < 2 or position >= self._starts[-1].entries:
            raise ValueError(f"entry {position} is not before the checkpoint")
        return bisect.bisect_right([start.entries for start in self._starts], position) - 1

    def _split(self, start: TailStart, stop: TailStart) -> list[TailStart]:
        """Where the pieces of the segment ``start … stop`` start, after its own start: one
        strict scan of it, about :data:`_SEGMENT` bytes at a time (a line longer than that is a
        piece of its own)."""
        pieces: list[TailStart] = []
        at = start
        while at.offset < stop.offset:
            size = min(_SEGMENT, stop.offset - at.offset)
            data = _pread_all(self._fd, size, at.offset)
            cut = data.rfind(b"\n") + 1
            while not cut and at.offset + len(data) < stop.offset:
                size = min(2 * size, stop.offset - at.offset)
                data = _pread_all(self._fd, size, at.offset)
                cut = data.find(b"\n") + 1
            if not cut:
                raise _MismatchError(f"no line ends between bytes {at.offset} and {stop.offset}")
            parsed = self._scan(at, data[:cut])
            at = TailStart(
                at.entries + len(parsed.entries),
                at.offset + cut,
                parsed.kept_lines,
                parsed.checksums[-1] if parsed.checksums else at.chain,
            )
            # A piece of commit records alone joins the one before (entries stay increasing).
            if at.entries > (pieces[-1] if pieces else start).entries:
                pieces.append(at)
            elif pieces:
                pieces[-1] = at
        if not pieces or (pieces[-1].entries, pieces[-1].chain) != (stop.entries, stop.chain):
            raise _MismatchError(
                f"the bytes up to offset {stop.offset} do not end with entry {stop.entries - 1} "
                f"and checksum {stop.chain:08x}"
            )
        if self._stored and pieces[-1].lines != stop.lines:
            raise _MismatchError(f"the bytes up to offset {stop.offset} are not {stop.lines} lines")
        pieces.pop()
        return pieces

    def _check_ends(self, start: TailStart, stop: TailStart, parsed: Scan) -> None:
        """A segment's entries and chain end where the next one starts (and its lines too, in a
        stored index: a split relies on them)."""
        last = parsed.checksums[-1] if parsed.checksums else start.chain
        if (
            start.entries + len(parsed.entries) != stop.entries
            or last != stop.chain
            or (self._stored and parsed.kept_lines != stop.lines)
        ):
            raise _MismatchError(
                f"the segment from offset {start.offset} does not end as the next one starts "
                f"(entry {stop.entries}, checksum {stop.chain:08x})"
            )

    def _scan(self, start: TailStart, data: bytes) -> Scan:
        try:
            parsed = scan_tail(self._header, data, self._source, after=start)
        except (SessionCorrupt, ScheduleError) as error:
            raise _MismatchError(
                f"the segment from offset {start.offset} does not verify"
            ) from error
        if parsed.keep != start.offset + len(data):
            raise _MismatchError(f"the segment from offset {start.offset} does not verify")
        return parsed

    def _covered(self) -> TailStart:
        if len(self._starts) < 2:
            raise ValueError("no checkpoint covers any entry of this session yet")
        return self._starts[-1]

    def _fail(self) -> NoReturn:
        """Raise what a whole read of the covered bytes finds wrong."""
        end = self._covered()
        _read_prefix(self._fd, end.offset, self._source, end.entries)
        raise self._source.corrupt(
            None,
            f"the first {end.offset} bytes no longer hold the {end.entries} acknowledged "
            "entries the checkpoint was bound to",
        )


class _MismatchError(Exception):
    """A segment that does not verify against the index (an index read from a checkpoint is
    then dropped; otherwise the log is corrupt)."""


def _thinned(starts: Sequence[TailStart], end: TailStart) -> list[TailStart] | None:
    """The index ``starts`` (complete up to its last start) extended to ``end``, a later commit
    record: ``end`` replaces the last start when the segment before it would still be at most
    :data:`_SEGMENT` bytes, so that starts stay about a segment apart and the index always ends
    at the newest checkpoint. ``None`` when ``end`` is not past the last start."""
    last = starts[-1]
    if end.entries <= last.entries or end.offset <= last.offset:
        return None
    if len(starts) > 1 and end.offset - starts[-2].offset <= _SEGMENT:
        return [*starts[:-1], end]
    return [*starts, end]


def _segments_of(
    starts: Sequence[TailStart] | None, end: TailStart
) -> list[checkpoint.SegmentStart]:
    """A checkpoint's ``segments``, for one bound to ``end``: the index extended to it."""
    index = None if starts is None else _thinned(starts, end)
    return [] if index is None else [checkpoint.SegmentStart(*start) for start in index]


def _stored_index(
    segments: Sequence[checkpoint.SegmentStart], head: TailStart, bound: TailStart
) -> list[TailStart] | str:
    """The index a checkpoint bound to ``bound`` stores, when it is well-formed: it starts at
    ``head`` (the header's end), its entries, offsets and lines strictly increase, and it ends
    at ``bound``. Otherwise why not (it is then ignored, not the checkpoint)."""
    starts = [TailStart(s.entries, s.offset, s.lines, s.chain) for s in segments]
    if not starts:
        return "it holds none"
    if starts[0] != head:
        return "it does not start at the end of the header"
    if starts[-1] != bound:
        return "it does not end at the checkpoint's commit record"
    for before, after in itertools.pairwise(starts):
        if not (
            before.entries < after.entries
            and before.offset < after.offset
            and before.lines < after.lines
            and 0 <= after.chain <= _CHAIN_MAX
        ):
            return f"its start at offset {after.offset} does not follow the one before"
    return starts


_CHAIN_MAX: Final = 0xFFFF_FFFF


def _read_checkpoint(
    where: Path, source: Source
) -> checkpoint.CheckpointFile | checkpoint.Rejected:
    try:
        fd = os.open(where, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return checkpoint.Rejected("missing", "there is none")
    except OSError as error:
        return checkpoint.Rejected("damaged", f"it cannot be opened: {error}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return checkpoint.Rejected("damaged", "it is not a regular file")
        os.set_blocking(fd, True)
        data = _read_all(fd)
    finally:
        os.close(fd)
    return checkpoint.decode_checkpoint(data, source)


def _read_prefix(fd: int, size: int, source: Source, count: int) -> Scan:
    """The first ``size`` bytes of a session file, which a checkpoint said hold ``count``
    entries followed by the commit record for them: anything else is corruption."""
    parsed = scan(_pread_all(fd, size, 0), source)
    if len(parsed.entries) != count or parsed.keep != size or parsed.acknowledged < count:
        raise source.corrupt(
            None,
            f"the first {size} bytes no longer hold the {count} acknowledged entries the "
            "checkpoint was bound to",
        )
    return parsed


def _pread_all(fd: int, size: int, offset: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 30), offset)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_checkpoint(target: Path, data: bytes) -> None:
    """Replace the checkpoint (no fsync: a lost or torn one is ignored, and costs only time)."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    try:
        temporary.replace(target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _recover(
    fd: int,
    parsed: Scan,
    *,
    torn: int,
    source: Source,
    count: int | None = None,
    last: int | None = None,
) -> int:
    """Cut a torn tail; in format 2, also vouch for entries no commit record covers yet.

    Entries past the last commit record were written before a crash but perhaps never made
    durable: they are fsync'd before a commit record for them is written, as a barrier does.
    ``count`` and ``last`` are the entry count and the last entry's checksum when ``parsed``
    is a tail. Returns how many lines it wrote (0 or 1).
    """
    if count is None:
        count = len(parsed.entries)
    # Only a commit record that stays counts: one in the torn tail is cut with it.
    unacknowledged = parsed.header.format == 2 and count > parsed.kept_acknowledged
    if not torn and not unacknowledged:
        return 0
    try:
        if torn:
            os.ftruncate(fd, parsed.keep)
        os.fsync(fd)
        if unacknowledged:
            _write_all(fd, commit_line(count, parsed.checksums[-1] if last is None else last))
            return 1
    except OSError as error:
        what = "cutting the torn tail" if torn else "making the recovered entries durable"
        raise persistence_uncertain(source.session_id, f"{what} failed: {error}") from error
    return 0


def _read(path: Path, source: Source, *, sync: bool) -> Scan:
    """The file's complete lines, ignoring (not cutting) a torn tail; no lock is taken.

    With ``sync``, the file is fsync'd first, so everything read is durable even when its owner
    has not called a barrier yet.
    """
    fd = _open_session_file(path, os.O_RDONLY, source)
    try:
        if sync:
            try:
                os.fsync(fd)
            except OSError as error:
                raise persistence_uncertain(
                    source.session_id, f"making the session durable before the fork failed: {error}"
                ) from error
        return scan(_read_all(fd), source)
    finally:
        os.close(fd)


_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _open_session_file(path: Path, flags: int, source: Source) -> int:
    """A descriptor of the session's file, which must be a regular file.

    A symbolic link is not followed (``O_NOFOLLOW``) and a FIFO does not block the open
    (``O_NONBLOCK``, cleared again once ``fstat`` has shown a regular file); anything but a
    regular file is refused with ``SessionCorrupt`` before a byte is read or written.
    """
    try:
        fd = os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise session_not_found(source.session_id, str(path.parent)) from None
    except OSError as error:
        kind = {
            errno.ELOOP: "a symbolic link",
            errno.EISDIR: "a directory",
            errno.ENXIO: "a socket or a device without a driver",
        }.get(error.errno or 0)
        if kind is None:
            raise
        raise not_a_regular_file(source.session_id, source.name, kind) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((kind for test, kind in _KINDS if test(mode)), "not a regular file")
        raise not_a_regular_file(source.session_id, source.name, kind)
    return fd


def _write_all(fd: int, line: bytes) -> None:
    """One ``write`` of a whole line; a short write is an ``OSError``."""
    written = os.write(fd, line)
    if written != len(line):
        raise OSError(errno.EIO, f"short write ({written} of {len(line)} bytes)")


class _Seed(NamedTuple):
    """A new session's first entries: their format-2 lines, values and checksums."""

    lines: list[bytes]
    entries: list[LogEntry]
    checksums: Checksums


def _seed(parent: Scan, count: int) -> _Seed:
    """A fork's first ``count`` entries: format-2 lines are copied verbatim (their chain starts
    at 0, so a copied entry keeps its checksum); format-1 entries are written anew."""
    entries = parent.entries[:count]
    if parent.header.format == 2:
        return _Seed(parent.lines[:count], entries, parent.checksums[:count])
    lines: list[bytes] = []
    checksums = new_checksums()
    previous = CHAIN_SEED
    for entry in entries:
        _, data = encode_payload(entry.type, entry.payload)
        line, previous = entry_line(entry.position, entry.type, data, previous)
        lines.append(line[:-1])
        checksums.append(previous)
    return _Seed(lines, entries, checksums)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, _READ_CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _create(
    data_dir: Path,
    chosen: SessionId | None,
    header_for: Callable[[SessionId], SessionHeader],
    seed: _Seed,
) -> _Opened:
    """Create and lock a new session file holding the header and the seed's lines."""
    _ensure_directory(data_dir)
    body = b"".join(line + b"\n" for line in seed.lines)
    while True:
        session_id = chosen or new_session_id()
        header = header_for(session_id)
        fd = _publish(data_dir, session_id, header_line_for(header) + body)
        if fd is not None:
            _fsync_directory(data_dir)
            return _Opened(
                fd,
                header,
                list(seed.entries),
                seed.checksums,
                1 + len(seed.lines),
                len(header_line_for(header)),
            )
        if chosen is not None:
            raise session_exists(session_id, str(data_dir))


def _publish(data_dir: Path, session_id: SessionId, content: bytes) -> int | None:
    """Write ``content`` to a locked temporary file and link it into place.

    Returns the locked descriptor, or ``None`` when the session's name is taken already.
    """
    temporary = data_dir / f".{session_id}.{secrets.token_hex(4)}.tmp"
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o600)
    try:
        # Locked before it has its public name: no other process can own it first.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.link(temporary, data_dir / f"{session_id}{SUFFIX}")
    except FileExistsError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    finally:
        temporary.unlink(missing_ok=True)
    return fd


def _ensure_directory(data_dir: Path) -> None:
    if data_dir.is_dir():
        return
    private_directory(data_dir)  # parents too: 0700 whatever the umask
    _fsync_directory(data_dir.parent)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _scan(store: JsonlSessionStore) -> SessionListing:
    if not store.data_dir.is_dir():
        return listing([], [])
    store.check_directory()
    headers: list[SessionHeader] = []
    problems: list[SessionCorrupt] = []
    for path in store.data_dir.iterdir():
        session_id = parse_session_id(path.name.removesuffix(SUFFIX))
        if session_id is None or not path.name.endswith(SUFFIX):
            continue
        source = _source(session_id)
        try:
            headers.append(_read_header(path, source))
        except SessionNotFound:
            continue
        except SessionCorrupt as problem:
            problems.append(problem)
    return listing(headers, problems)


def _read_header(path: Path, source: Source) -> SessionHeader:
    fd = _open_session_file(path, os.O_RDONLY, source)
    try:
        start = b""
        while b"\n" not in start and len(start) <= HEADER_LIMIT:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            start += chunk
    finally:
        os.close(fd)
    end = start.find(b"\n")
    if end > HEADER_LIMIT or (end < 0 and len(start) > HEADER_LIMIT):
        raise source.corrupt(None, HEADER_TOO_LONG)
    if end < 0:
        raise source.corrupt(None, "the file has no complete header line")
    return decode_header_line(start[:end], source)
