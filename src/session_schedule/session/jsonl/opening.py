"""Opening JSONL sessions: the owner's open, with recovery, and the readers' reads.

An owner (:func:`open_session`) locks the file and reads it; a reader (:func:`read_session`,
:func:`scan_directory`) takes no lock and changes nothing. The rules:

1. **One writer.** The owner holds the session's byte of the store's lock file ``.owners``
   (:mod:`session_schedule.session.owners`), which outlives the session's descriptor: that one
   is the process's descriptor cache's (:mod:`session_schedule.session.descriptors`), closed
   while the session is idle and others need the room, and opened again (the same inode, never
   through a link) when next used. While it is open it also holds ``flock(LOCK_EX | LOCK_NB)``
   on the file, and a file another descriptor holds so is refused. A second owner — in this
   process or another — is refused with ``SessionBusy``. The kernel drops both locks when the
   owner dies.
2. **From a checkpoint when one binds.** A checkpoint that binds to the log (see
   :mod:`.checkpoints`) spares the decoding of everything before its window: only the log's tail
   after its commit record is scanned, and the entries before the window are read back on
   demand (:class:`~.segments.Prefix`). One that does not bind is logged (at ``info`` for
   another version, ``warning`` otherwise) and the whole log is read; should that log hold
   fewer entries than the checkpoint (of this session) covers, entries made durable are gone,
   and that is corruption (:func:`~.checkpoints.refuse_lost_entries`). A whole log is read a
   block of :data:`BLOCK` bytes at a time (:func:`~session_schedule.session.lines.scan_blocks`):
   its bytes and lines are never held whole, only the entries decoded from them.
3. **Opening repairs only a torn tail.** In format 2 that is everything from the first line that
   does not verify, provided no commit record vouches for an entry at or past it; in format 1,
   the bytes after the final newline. The tail is cut (``ftruncate`` + ``fsync``); in format 2,
   intact entries that no commit record covers yet are fsync'd and then vouched for by a commit
   record, as a barrier would. Anything else that does not verify is corruption: it is reported
   and the file is left byte-for-byte untouched. That includes, after a checkpoint, a verbatim
   copy of an entry's line from before it (read back from its segment, only for a line that
   claims such an entry), as a whole read finds it.
4. **Readers ignore a torn tail** (they do not cut it) and never use a checkpoint: ``read``,
   ``inspect`` and ``check`` verify every line. (A fork reads its parent in
   :mod:`.creation`.)
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, NamedTuple

from session_schedule.session import checkpoint
from session_schedule.session.codec import Source
from session_schedule.session.descriptors import CachedDescriptor, DescriptorCache
from session_schedule.session.errors import (
    SessionCorrupt,
    SessionError,
    SessionNotFound,
    persistence_uncertain,
    session_busy,
    unreadable_session_file,
)
from session_schedule.session.handle import LazyEntries
from session_schedule.session.ids import SessionId, parse_session_id
from session_schedule.session.jsonl import files, segments
from session_schedule.session.jsonl.checkpoints import (
    checkpoint_path,
    holds_commit_of,
    read_checkpoint,
    refuse_lost_entries,
    window_verifies,
)
from session_schedule.session.jsonl.files import (
    SUFFIX,
    open_session_file,
    source_of,
    write_all,
)
from session_schedule.session.jsonl.segments import Prefix, stored_index
from session_schedule.session.lines import (
    CHAIN_SEED,
    HEADER_LIMIT,
    HEADER_TOO_LONG,
    Checksums,
    Scan,
    TailStart,
    commit_line,
    decode_header_line,
    header_line_for,
    new_checksums,
    scan_blocks,
    scan_tail,
)
from session_schedule.session.owners import OwnerLocks
from session_schedule.session.port import (
    LogEntry,
    ResumePoint,
    SessionHeader,
    SessionListing,
    listing,
)
from session_schedule.session.stores import report_rejected

# The package's one logger: its records keep the name they have always had.
_log: Final = logging.getLogger("session_schedule.session.jsonl")


class Opened(NamedTuple):
    """A session file as its new owner finds it (see :class:`~.handle.JsonlSessionHandle`)."""

    file: CachedDescriptor
    """Its descriptor, in the process's descriptor cache; closing it for good gives up the
    ownership."""
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
    older: Prefix | None = None
    """What reads the entries before the checkpoint (opened from one)."""


def open_session(path: Path, source: Source, owners: OwnerLocks, cache: DescriptorCache) -> Opened:
    """Own the session file at ``path``: locked, recovered, and read (from its checkpoint when
    one binds). Its descriptor is ``cache``'s from then on."""
    fd = open_session_file(path, os.O_RDWR | os.O_APPEND, source)
    try:
        reopen = files.reopener(path, fd)
        owned = _lock(fd) and owners.acquire(source.session_id)
    except BaseException:
        os.close(fd)
        raise
    if not owned:
        os.close(fd)
        raise session_busy(source.session_id)
    file = CachedDescriptor(
        cache, fd, reopen, released=functools.partial(owners.release, source.session_id)
    )
    try:
        with file.use() as fd:
            found = _checkpoint_of(checkpoint_path(path), source)
            resumed = None if found is None else _open_from_checkpoint(fd, file, found, source)
            if resumed is not None:
                return resumed
            parsed = scan_blocks(blocks_of(fd), source, keep_lines=False)
            if found is not None and parsed.header.format == 2:
                # A checkpoint that does not bind is no cache to use, but it still says how
                # many entries had been made durable: a log that holds fewer has lost some.
                refuse_lost_entries(found, len(parsed.entries), source)
            wrote = _recover(fd, parsed, torn=parsed.size - parsed.keep, source=source)
    except BaseException:
        file.close()  # and the ownership with it
        raise
    return Opened(
        file,
        parsed.header,
        parsed.entries,
        parsed.checksums,
        parsed.kept_lines + wrote,
        # The header decodes only from its canonical line, so this is the line as stored.
        len(header_line_for(parsed.header)),
    )


BLOCK: Final = 1 << 20
"""Bytes of a session file read at once when it is read whole (its lines are verified and
decoded a block at a time, so the file is never held whole)."""


def blocks_of(fd: int) -> Callable[[], Iterator[bytes]]:
    """What reads the file open at ``fd`` from its start, :data:`BLOCK` bytes at a time."""

    def blocks() -> Iterator[bytes]:
        offset = 0
        while block := os.pread(fd, BLOCK, offset):
            yield block
            offset += len(block)

    return blocks


def _lock(fd: int) -> bool:
    """Take the file's ``flock``: ``False`` when another descriptor holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _checkpoint_of(where: Path, source: Source) -> checkpoint.CheckpointFile | None:
    """The checkpoint at ``where`` when it decodes (of this version and session), otherwise
    ``None``, with the reason logged unless there is none."""
    found = read_checkpoint(where, source)
    if isinstance(found, checkpoint.Rejected):
        if found.reason != "missing":
            report_rejected(_log, source.session_id, found)
        return None
    return found


def _open_from_checkpoint(
    fd: int, file: CachedDescriptor, found: checkpoint.CheckpointFile, source: Source
) -> Opened | None:
    """The session opened from its checkpoint ``found``, or ``None`` when it does not match
    the log (then the reason is logged and the whole log is read)."""
    size = os.fstat(fd).st_size
    head = files.pread_all(fd, min(size, HEADER_LIMIT + 1), 0)
    end = head.find(b"\n")
    if end < 0:
        return None  # the whole-log read reports it
    header = decode_header_line(head[:end], source)
    if header.format != 2 or not holds_commit_of(fd, found, size):
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
    if not window_verifies(fd, header, found, restored.window, source):
        # The whole-log read that follows reports the damage, with its line.
        _log.warning(
            "checkpoint of session %s not used (window mismatch): the log's lines of the %d "
            "entries before it do not verify or differ from the checkpoint's window",
            source.session_id,
            len(restored.window),
        )
        return None
    after = TailStart(found.entries, found.offset, found.lines, found.chain)
    header_end = TailStart(0, end + 1, 1, CHAIN_SEED)
    stored = stored_index(found.segments, header_end, after)
    if isinstance(stored, str) and found.segments:
        _log.warning(
            "segment index in the checkpoint of session %s not used: %s", source.session_id, stored
        )
    older = (
        Prefix(file, header, [header_end, after], source)
        if isinstance(stored, str)
        else Prefix(file, header, stored, source, stored=True)
    )
    # A line after the checkpoint that claims an entry before it is compared with that entry's
    # line (one segment read back, only then): a verbatim copy is corruption, as a whole read
    # finds it, not a torn tail to cut.
    parsed = scan_tail(
        header,
        files.pread_all(fd, size - found.offset, found.offset),
        source,
        after=after,
        before=older.line_of,
    )
    count = found.entries + len(parsed.entries)
    last = parsed.checksums[-1] if parsed.checksums else found.chain
    wrote = _recover(fd, parsed, torn=size - parsed.keep, source=source, count=count, last=last)
    first = found.entries - len(restored.window)
    entries = LazyEntries(first, restored.window + parsed.entries, older.read, chunk=segments.CHUNK)
    checksums = new_checksums()
    checksums.append(found.chain)
    checksums.extend(parsed.checksums)
    return Opened(
        file,
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
            write_all(fd, commit_line(count, parsed.checksums[-1] if last is None else last))
            return 1
    except OSError as error:
        what = "cutting the torn tail" if torn else "making the recovered entries durable"
        raise persistence_uncertain(source.session_id, f"{what} failed: {error}") from error
    return 0


def read_session(path: Path, source: Source, *, lines: bool = True) -> Scan:
    """The file's complete lines, ignoring (not cutting) a torn tail; no lock is taken.

    Without ``lines``, the entries' lines are not kept (the result's ``lines`` is empty): a
    reader that wants the entries holds them alone.
    """
    fd = open_session_file(path, os.O_RDONLY, source)
    try:
        return scan_blocks(blocks_of(fd), source, keep_lines=lines)
    finally:
        os.close(fd)


def read_log(path: Path, session_id: SessionId) -> tuple[SessionHeader, list[LogEntry]]:
    """A session's header and entries, read as :func:`read_session` does (what the next-target
    index rebuilds a record from)."""
    parsed = read_session(path, source_of(session_id), lines=False)
    return parsed.header, parsed.entries


def scan_directory(data_dir: Path) -> SessionListing:
    """The headers of the sessions in ``data_dir``, beside the session files whose header
    cannot be read (a missing directory holds none)."""
    if not data_dir.is_dir():
        return listing([], [])
    headers: list[SessionHeader] = []
    problems: list[SessionError] = []
    for path in data_dir.iterdir():
        session_id = parse_session_id(path.name.removesuffix(SUFFIX))
        if session_id is None or not path.name.endswith(SUFFIX):
            continue
        source = source_of(session_id)
        try:
            headers.append(_read_header(path, source))
        except SessionNotFound:
            continue
        except SessionCorrupt as problem:
            problems.append(problem)
        except OSError as error:  # one file this user may not read: the others are listed
            problems.append(
                unreadable_session_file(session_id, path.name, error.strerror or str(error))
            )
    return listing(headers, problems)


def _read_header(path: Path, source: Source) -> SessionHeader:
    fd = open_session_file(path, os.O_RDONLY, source)
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
