"""The JSONL store's checkpoints: where one lives, how it is written, and whether it binds.

A checkpoint (:mod:`session_schedule.session.checkpoint`, the store-neutral content) is the
file ``<session id>.checkpoint`` beside the session's log. The rules this store adds:

1. **Bound to a commit record.** A checkpoint of ``n`` entries names the byte offset where the
   format-2 commit record for them ends, and their chained checksum. It is believed only while
   the log holds exactly that commit record there (:func:`commit_ending_at`, a few hundred
   bytes read back), and the log's own lines of its window verify — each checksum chained from
   the line before them to the commit record's — and hold the very entries the window does
   (:func:`window_verifies`). Anything else and the session opens from its whole log.
2. **Written off every waiter's path, never fsync'd.** The handle writes one on the session's
   thread after a barrier once :data:`~session_schedule.session.checkpoint.EVERY` entries have
   become durable since the last, and at close (see :mod:`.handle`); it goes to a temporary file
   renamed into place (:func:`write_checkpoint`). A lost or torn checkpoint is ignored and
   costs only time. (A fork's first checkpoint is the exception: rule 4.)
3. **Read as a private file.** Never through a symbolic link, never blocking on a FIFO; one that
   is not a regular file is rejected as damaged, as is one that does not decode.
4. **A fork's is durable.** A fork is created with its checkpoint, fsync'd and in place before
   the fork has its name (see :mod:`.creation`); a fork copies its parent's bytes up to the
   parent's checkpoint only when that checkpoint binds as an open would believe it
   (:func:`bound_checkpoint`).
5. **Derived data, checked on request.** :func:`checkpoint_problem` says what a checkpoint that
   would be believed says that its log does not (``check`` reports it).
6. **A witness of durable entries.** A checkpoint is written only once the entries it covers
   were made durable by an ``fsync`` (its commit record is written after that ``fsync``, and
   it after its commit record). So a log that, its torn tail set aside, holds fewer entries than
   a checkpoint of its session covers has lost acknowledged entries — no power cut loses them —
   and that is corruption (:func:`refuse_lost_entries`), reported by the open and by ``check``
   alike. A log that holds them all but not the commit record (which may have been lost with
   unsynced bytes), or other bytes after them, merely does not bind: rule 1.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NamedTuple

from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.session import checkpoint
from session_schedule.session.codec import Source
from session_schedule.session.errors import SessionError, session_corrupt
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl import files
from session_schedule.session.jsonl.files import open_session_file, read_all, write_all
from session_schedule.session.lines import (
    CHAIN_SEED,
    HEADER_LIMIT,
    Scan,
    TailStart,
    decode_header_line,
    intact_commit,
    scan_tail,
    stated_entry_checksum,
)
from session_schedule.session.port import LogEntry, SessionHeader, SessionSnapshot
from session_schedule.session.private import OPEN_FLAGS


def checkpoint_path(log: Path) -> Path:
    """The checkpoint file beside the session file ``log``."""
    return log.with_suffix(checkpoint.SUFFIX)


_COMMIT_READ: Final = 256
"""Bytes read back from the end of a file to find its last commit record (a few dozen)."""


def read_checkpoint(where: Path, source: Source) -> checkpoint.CheckpointFile | checkpoint.Rejected:
    try:
        fd = os.open(where, os.O_RDONLY | OPEN_FLAGS)
    except FileNotFoundError:
        return checkpoint.Rejected("missing", "there is none")
    except OSError as error:
        return checkpoint.Rejected("damaged", f"it cannot be opened: {error}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return checkpoint.Rejected("damaged", "it is not a regular file")
        os.set_blocking(fd, True)
        data = read_all(fd)
    finally:
        os.close(fd)
    return checkpoint.decode_checkpoint(data, source)


def write_checkpoint(target: Path, data: bytes) -> None:
    """Replace the checkpoint (no fsync: a lost or torn one is ignored, and costs only time)."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    try:
        temporary.replace(target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def refuse_lost_entries(found: checkpoint.CheckpointFile, count: int, source: Source) -> None:
    """Raise ``SessionCorrupt`` when the log holds only ``count`` entries (its torn tail set
    aside) while its checkpoint ``found`` (decoded, of this session) covers more: entries that
    were made durable before the checkpoint was written are gone (rule 6)."""
    if count >= found.entries:
        return
    held = "no entry" if count == 0 else f"{count} entries (0 to {count - 1})"
    raise session_corrupt(
        source.session_id,
        f"at entry {count} (the end of {source.name})",
        f"the log holds {held}, but its checkpoint {source.session_id}{checkpoint.SUFFIX} "
        f"vouches for {found.entries} entries made durable: entries {count} to "
        f"{found.entries - 1} are missing (the log was cut short or replaced; a log replaced on "
        "purpose needs its checkpoint deleted)",
        source.storage,
    )


def holds_commit_of(fd: int, found: checkpoint.CheckpointFile, size: int) -> bool:
    """Whether the log open at ``fd``, ``size`` bytes long now, holds the commit record the
    checkpoint ``found`` is bound to (ending at its offset, vouching for its entries with its
    chain)."""
    return found.offset <= size and commit_ending_at(fd, found.offset) == (
        found.entries,
        found.chain,
    )


_WINDOW_READ: Final = 1 << 16
"""Bytes first read back from a checkpoint's commit record to verify its window's lines (the
window's 64 lines, and the line before them, are a few kilobytes in a typical session)."""


def window_verifies(
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
        data = files.pread_all(fd, size, start)
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


def commit_ending_at(fd: int, offset: int) -> tuple[int, int] | None:
    """The entry count and checksum of the commit record whose line ends the file's first
    ``offset`` bytes (``None``: no intact commit record ends there)."""
    size = min(offset, _COMMIT_READ)
    return intact_commit(files.pread_all(fd, size, offset - size))


class Bound(NamedTuple):
    """A checkpoint that binds to its log (see :func:`bound_checkpoint`)."""

    header: SessionHeader
    found: checkpoint.CheckpointFile
    restored: checkpoint.Checkpoint
    head: int
    """The header line's bytes (its newline included)."""


def bound_checkpoint(fd: int, where: Path, source: Source) -> Bound | None:
    """The checkpoint at ``where`` when it binds to the format-2 log ``fd`` as an open would
    believe it — intact, of this version and session, bound to the commit record it names,
    decoding strictly, its window's own lines verified (:func:`window_verifies`) — otherwise
    ``None``. Nothing is logged: the caller then reads the whole log, which reports damage."""
    found = read_checkpoint(where, source)
    if isinstance(found, checkpoint.Rejected):
        return None
    size = os.fstat(fd).st_size
    start = files.pread_all(fd, min(size, HEADER_LIMIT + 1), 0)
    end = start.find(b"\n")
    if end < 0:
        return None
    try:
        header = decode_header_line(start[:end], source)
    except (SessionError, ScheduleError):
        return None
    if header.format != 2 or not holds_commit_of(fd, found, size):
        return None
    restored = checkpoint.restore(found, source)
    if isinstance(restored, checkpoint.Rejected) or not window_verifies(
        fd, header, found, restored.window, source
    ):
        return None
    return Bound(header, found, restored, end + 1)


def checkpoint_problem(
    log: Path, parsed: Scan | SessionSnapshot, source: Source, session_id: SessionId
) -> str | None:
    """What the checkpoint beside ``log`` says that the log (``parsed``, read whole) does not,
    when it is bound to the log's commit record (so opening the session may use it): other
    reminders, pending turns or entries. ``None`` when it agrees, or would not be believed
    (missing, damaged, stale: it is rebuilt from the log). Raises ``SessionCorrupt`` when it
    covers entries the log no longer holds (:func:`refuse_lost_entries`)."""
    found = _bound_file(log, parsed, source)
    if found is None:
        return None
    return checkpoint.mismatch(
        found, parsed.entries, seed=parsed.header.seed_length, session=session_id
    )


def checked_fold(
    log: Path, parsed: Scan | SessionSnapshot, source: Source, session_id: SessionId
) -> tuple[ScheduleFold, str | None]:
    """The fold of the log's changes (``parsed``, read whole; raises as
    :func:`~session_schedule.core.fold.fold` does) and :func:`checkpoint_problem`, with the
    log's entries folded once (see :func:`.checkpoint.checked_fold`). Raises ``SessionCorrupt``
    as :func:`checkpoint_problem` does."""
    return checkpoint.checked_fold(
        _bound_file(log, parsed, source),
        parsed.entries,
        seed=parsed.header.seed_length,
        session=session_id,
    )


def _bound_file(
    log: Path, parsed: Scan | SessionSnapshot, source: Source
) -> checkpoint.CheckpointFile | None:
    """The checkpoint beside ``log`` when it decodes and is bound to the log's commit record.

    ``parsed`` was read before the checkpoint, without owning the session (``check``), so its
    owner may have made more entries durable meanwhile and written a checkpoint of them. One
    that covers more entries than ``parsed`` holds is therefore of a later state when the file
    now holds the commit record it is bound to (``None``: nothing to compare), and witnesses
    lost entries when it does not (raises ``SessionCorrupt``, :func:`refuse_lost_entries`)."""
    found = read_checkpoint(checkpoint_path(log), source)
    if not isinstance(found, checkpoint.CheckpointFile) or parsed.header.format != 2:
        return None
    fd = open_session_file(log, os.O_RDONLY, source)
    try:
        bound = holds_commit_of(fd, found, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    if len(parsed.entries) < found.entries:
        if bound:
            return None  # written after ``parsed`` was read: the log has grown since
        refuse_lost_entries(found, len(parsed.entries), source)
    return found if bound else None
