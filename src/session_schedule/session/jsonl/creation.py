"""Creating a JSONL session: a new one, or a fork of another.

**Creation is atomic.** The header — and a fork's copied entries — go to a hidden temporary file
(``.<session id>.<random>.tmp``, mode ``0600``), which is locked, fsync'd and then hard-linked to
the session's name (``link`` never replaces an existing session) before the directory is
fsync'd. A crash leaves either no session or a complete one (and perhaps a stray ``.tmp`` file,
which nothing reads, or a fork's checkpoint without its fork, which a session created later
under that name removes before it has the name). The new session is owned (its byte of the
store's lock file, see :mod:`session_schedule.session.owners`) and its file locked before it has
its public name, so no other owner can take it first; its descriptor is the process's
descriptor cache's from then on.

**A fork copies, it does not re-encode.** The parent is fsync'd first, so that what is copied is
durable. A format-2 parent's lines are copied verbatim (their chain starts at the seed, so a
copied entry keeps its checksum); a format-1 parent's entries are written anew in format 2.

1. **From the parent's checkpoint** (:func:`fork_session`). When the parent's checkpoint binds
   to its log exactly as an open would believe it (:func:`.checkpoints.bound_checkpoint`: the
   commit record it names, the window's own lines verified) and the fork point is at or after
   it, the parent's bytes up to that commit record are copied by the kernel
   (``copy_file_range``, else large reads) without being decoded, and only the entries after it
   are read — strictly, so damage there refuses the fork. The copied lines are vouched for as an
   open from that checkpoint vouches for them; damage before the window is copied as it is,
   with the checksums that expose it (``check`` finds it in the fork as in the parent). A fork
   point before the checkpoint reads and decodes the parent only up to the segment holding it
   (the checkpoint's segment index, which must verify). Everything else (no checkpoint, one
   that does not bind, an index that does not verify, a format-1 parent) reads and strictly
   decodes the whole parent once.
2. **Written with its checkpoint.** A fork that inherits entries ends with a commit record for
   them and is created with a checkpoint bound to it (a fork has no active reminder: the
   checkpoint holds the highest id its history uses and the window of its last entries). The
   checkpoint is fsync'd and renamed into place, and the directory fsync'd, *before* the fork
   is linked under its name: a fork never exists without it, even after a power cut, so opening
   one reads only its window. If the name turns out to be taken, the checkpoint is removed again.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.session import checkpoint
from session_schedule.session.codec import Source, encode_payload
from session_schedule.session.descriptors import CachedDescriptor, DescriptorCache
from session_schedule.session.errors import (
    SessionError,
    persistence_uncertain,
    session_busy,
    session_exists,
)
from session_schedule.session.handle import LazyEntries
from session_schedule.session.ids import SessionId, new_session_id
from session_schedule.session.jsonl import segments
from session_schedule.session.jsonl.checkpoints import (
    bound_checkpoint,
    checkpoint_path,
    holds_commit_of,
    read_checkpoint,
    refuse_lost_entries,
)
from session_schedule.session.jsonl.files import (
    SUFFIX,
    ensure_directory,
    open_session_file,
    pread_all,
    read_all,
    reopener,
)
from session_schedule.session.jsonl.opening import Opened
from session_schedule.session.jsonl.segments import Prefix, stored_index, thinned
from session_schedule.session.lines import (
    CHAIN_SEED,
    Checksums,
    Scan,
    TailStart,
    commit_line,
    entry_line,
    header_line_for,
    new_checksums,
    scan,
    scan_tail,
)
from session_schedule.session.owners import OwnerLocks
from session_schedule.session.port import LogEntry, ResumePoint, SessionHeader, seed_length
from session_schedule.session.private import sync_directory, write_private


class Seed(NamedTuple):
    """A new session's first entries: their format-2 lines, values and checksums."""

    lines: list[bytes]
    entries: list[LogEntry]
    checksums: Checksums


def fork_seed(parent: Scan, count: int) -> Seed:
    """A fork's first ``count`` entries: format-2 lines are copied verbatim (their chain starts
    at 0, so a copied entry keeps its checksum); format-1 entries are written anew."""
    entries = parent.entries[:count]
    if parent.header.format == 2:
        return Seed(parent.lines[:count], entries, parent.checksums[:count])
    lines: list[bytes] = []
    checksums = new_checksums()
    previous = CHAIN_SEED
    for entry in entries:
        _, data = encode_payload(entry.type, entry.payload)
        line, previous = entry_line(entry.position, entry.type, data, previous)
        lines.append(line[:-1])
        checksums.append(previous)
    return Seed(lines, entries, checksums)


class Owning(NamedTuple):
    """Where a new session's ownership and descriptor go."""

    owners: OwnerLocks
    cache: DescriptorCache

    def claim(self, session_id: SessionId, chosen: SessionId | None) -> bool:
        """Own ``session_id`` before its file has its name: ``False`` when another owner holds
        a minted id (try another); ``SessionBusy`` for a chosen one."""
        if self.owners.acquire(session_id):
            return True
        if chosen is not None:
            raise session_busy(session_id)
        return False

    def cached(self, path: Path, session_id: SessionId, fd: int) -> CachedDescriptor:
        """The new file's descriptor, given to the cache; closing it gives up the ownership."""
        return CachedDescriptor(
            self.cache,
            fd,
            reopener(path, fd),
            released=functools.partial(self.owners.release, session_id),
        )


def create_session(
    data_dir: Path,
    chosen: SessionId | None,
    header_for: Callable[[SessionId], SessionHeader],
    seed: Seed,
    owning: Owning,
) -> Opened:
    """Create and own a new session file holding the header and the seed's lines."""
    ensure_directory(data_dir)
    body = b"".join(line + b"\n" for line in seed.lines)
    while True:
        session_id = chosen or new_session_id()
        if not owning.claim(session_id, chosen):
            continue
        try:
            header = header_for(session_id)
            fd = _publish(data_dir, session_id, header_line_for(header), _Body(tail=body))
            if fd is not None:
                sync_directory(data_dir)
        except BaseException:
            owning.owners.release(session_id)
            raise
        if fd is not None:
            return Opened(
                owning.cached(data_dir / f"{session_id}{SUFFIX}", session_id, fd),
                header,
                list(seed.entries),
                seed.checksums,
                1 + len(seed.lines),
                len(header_line_for(header)),
            )
        owning.owners.release(session_id)
        if chosen is not None:
            raise session_exists(session_id, str(data_dir))


class _Plan(NamedTuple):
    """What a fork of ``length`` entries is made of, after its header."""

    length: int
    copy: tuple[int, int]
    """The parent's bytes copied verbatim (``start``, ``stop``): entry lines and commit records
    of the entries before ``base.entries``."""
    base: TailStart
    """Where the copied bytes end in the parent (its header's end when nothing is copied)."""
    parent_head: int
    """The parent's header line's bytes (its newline included)."""
    lines: list[bytes]
    """The entry lines after the copied bytes (without newlines)."""
    chain: int
    """Entry ``count - 1``'s chained checksum."""
    resume: ResumePoint | None
    """The fork's fold of the copied entries (``None``: nothing is copied)."""
    after: list[LogEntry]
    """The entries of :attr:`lines`, decoded."""
    window: list[LogEntry]
    """The entries just before ``count`` a checkpoint holds."""
    segments: list[checkpoint.SegmentStart]
    """Where the parent's segments start up to ``base`` (empty: unknown)."""


def fork_session(
    data_dir: Path,
    parent: Path,
    parent_source: Source,
    chosen: SessionId | None,
    header_for: Callable[[SessionId, int], SessionHeader],
    at: int | None,
    owning: Owning,
) -> Opened:
    """Create and lock a fork of the session file ``parent`` holding its first ``at`` entries
    (all its durable ones when ``None``), written with its checkpoint (see the module rules).

    ``header_for(new id, count)`` is the fork's header. Raises what reading the parent raises
    (corruption, a missing parent), ``ValueError`` for ``at`` out of range.
    """
    fd = open_session_file(parent, os.O_RDONLY, parent_source)
    try:
        try:
            os.fsync(fd)
        except OSError as error:
            raise persistence_uncertain(
                parent_source.session_id,
                f"making the session durable before the fork failed: {error}",
            ) from error
        plan = _plan_from_checkpoint(fd, parent, parent_source, at)
        if plan is None:
            parsed = scan(read_all(fd), parent_source)
            found = read_checkpoint(checkpoint_path(parent), parent_source)
            if (
                isinstance(found, checkpoint.CheckpointFile)
                and parsed.header.format == 2
                and len(parsed.entries) < found.entries
                and not holds_commit_of(fd, found, os.fstat(fd).st_size)
            ):
                # A parent that lost entries its checkpoint vouched for is refused, as its open
                # refuses it. (One whose file holds them now, its commit record included, was
                # read before its owner wrote them and that checkpoint: a snapshot to copy.)
                refuse_lost_entries(found, len(parsed.entries), parent_source)
            plan = _plan_from_log(parsed, at, parent_source)
        ensure_directory(data_dir)
        while True:
            session_id = chosen or new_session_id()
            if not owning.claim(session_id, chosen):
                continue
            try:
                header = header_for(session_id, plan.length)
                opened = _publish_fork(data_dir, session_id, header, plan, fd, owning)
            except BaseException:
                owning.owners.release(session_id)
                raise
            if opened is not None:
                return opened
            owning.owners.release(session_id)
            if chosen is not None:
                raise session_exists(session_id, str(data_dir))
    finally:
        os.close(fd)


def _plan_from_checkpoint(fd: int, parent: Path, source: Source, at: int | None) -> _Plan | None:
    """The fork copying the parent's bytes up to its checkpoint, or ``None`` when the parent has
    none that binds, or the fork point lies before it."""
    bound = bound_checkpoint(fd, checkpoint_path(parent), source)
    if bound is None:
        return None
    header, found, restored, head = bound
    size = os.fstat(fd).st_size
    base = _bound(found)
    # Strictly, as a reader: damage after the checkpoint refuses the fork; a torn tail is left.
    parsed = scan_tail(header, pread_all(fd, size - found.offset, found.offset), source, after=base)
    count = seed_length(at, found.entries + len(parsed.entries), source.session_id)
    if count == 0:
        return None
    if count < found.entries:
        return _plan_from_segment(fd, header, found, head, count, source)
    taken = count - found.entries
    chain = parsed.checksums[taken - 1] if taken else found.chain
    after = parsed.entries[:taken]
    resume = ResumePoint(
        found.entries,
        (),
        restored.state.highest_id,
        runs=(),
        provenance=(),
    )
    window = [*restored.window, *after][-checkpoint.WINDOW :]
    return _Plan(
        count,
        (head, found.offset),
        base,
        head,
        parsed.lines[:taken],
        chain,
        resume,
        after,
        window,
        list(found.segments),
    )


def _plan_from_segment(
    fd: int,
    header: SessionHeader,
    found: checkpoint.CheckpointFile,
    head: int,
    count: int,
    source: Source,
) -> _Plan | None:
    """The fork of ``count`` entries, fewer than the parent's checkpoint covers: the parent's
    bytes are read and decoded only up to the start of the segment after entry ``count - 1``
    (the checkpoint's segment index), which must end exactly as the index says; ``None`` when
    the index is missing or does not verify (the whole parent is then read, and any damage
    reported)."""
    header_end = TailStart(0, head, 1, CHAIN_SEED)
    starts = stored_index(found.segments, header_end, _bound(found))
    if isinstance(starts, str):
        return None
    stop = next(start for start in starts if start.entries >= count)
    try:
        parsed = scan_tail(
            msgspec.structs.replace(header, seed_length=0),
            pread_all(fd, stop.offset - head, head),
            source,
            after=header_end,
        )
    except (SessionError, ScheduleError):
        return None
    if (
        len(parsed.entries) != stop.entries
        or parsed.keep != stop.offset
        or not parsed.checksums
        or parsed.checksums[-1] != stop.chain
    ):
        return None
    return _plan_from_log(parsed._replace(header=header), count, source)


def _bound(found: checkpoint.CheckpointFile) -> TailStart:
    """Where the checkpoint ``found`` is bound in its log."""
    return TailStart(found.entries, found.offset, found.lines, found.chain)


def _plan_from_log(parsed: Scan, at: int | None, source: Source) -> _Plan:
    """The fork writing the first ``at`` entries of the whole parent, read and decoded once."""
    count = seed_length(at, len(parsed.entries), source.session_id)
    seed = fork_seed(parsed, count)
    start = TailStart(0, 0, 1, CHAIN_SEED)
    return _Plan(
        count,
        (0, 0),
        start,
        0,
        seed.lines,
        seed.checksums[-1] if count else CHAIN_SEED,
        ResumePoint(0, (), 0, runs=(), provenance=()) if count else None,
        seed.entries,
        seed.entries[-checkpoint.WINDOW :],
        [],
    )


def _publish_fork(
    data_dir: Path,
    session_id: SessionId,
    header: SessionHeader,
    plan: _Plan,
    parent_fd: int,
    owning: Owning,
) -> Opened | None:
    """Write the fork ``plan`` describes under ``session_id`` (owned already), with its
    checkpoint; ``None`` when the name is taken."""
    path = data_dir / f"{session_id}{SUFFIX}"
    head = header_line_for(header)
    tail = b"".join(line + b"\n" for line in plan.lines)
    if plan.resume is None:
        # Nothing inherited: the fork is a new session with a header naming its parent.
        fd = _publish(data_dir, session_id, head, _Body(tail=tail))
        if fd is None:
            return None
        sync_directory(data_dir)
        return Opened(
            owning.cached(path, session_id, fd), header, [], new_checksums(), 1, len(head)
        )
    start, stop = plan.copy
    shift = len(head) - plan.parent_head
    copied_lines = plan.base.lines - 1  # the parent's lines after its header
    # Copied bytes end with the commit record for the entries they hold: one more only for
    # entries after them.
    commit = commit_line(plan.length, plan.chain) if plan.lines else b""
    lines = 1 + copied_lines + len(plan.lines) + (1 if commit else 0)
    size = len(head) + (stop - start) + len(tail) + len(commit)
    end = TailStart(plan.length, size, lines, plan.chain)
    header_end = TailStart(0, len(head), 1, CHAIN_SEED)
    content = _fork_checkpoint(session_id, header, plan, plan.resume, end, header_end, shift)
    fd = _publish(
        data_dir,
        session_id,
        head,
        _Body(copy=(parent_fd, start, stop), tail=tail + commit),
        checkpoint=checkpoint.seal(content),
    )
    if fd is None:
        return None
    file = owning.cached(path, session_id, fd)
    try:
        sync_directory(data_dir)
    except BaseException:
        file.close()
        raise
    source = Source(session_id=session_id, name=f"{session_id}{SUFFIX}", storage="file", lines=True)
    stored = stored_index(content.segments, header_end, end)
    older = (
        Prefix(file, header, [header_end, end], source)
        if isinstance(stored, str)
        else Prefix(file, header, stored, source, stored=True)
    )
    checksums = new_checksums()
    checksums.append(plan.chain)
    return Opened(
        file,
        header,
        LazyEntries(
            plan.length - len(plan.window),
            list(plan.window),
            older.read,
            chunk=segments.CHUNK,
        ),
        checksums,
        lines,
        len(head),
        origin=plan.length - 1,
        offset=size,
        # What a reopen restores from the checkpoint: the inherited ids and nothing active.
        resume=ResumePoint(plan.length, (), content.highest_id, runs=(), provenance=()),
        older=older,
    )


def _fork_checkpoint(
    session_id: SessionId,
    header: SessionHeader,
    plan: _Plan,
    resume: ResumePoint,
    end: TailStart,
    header_end: TailStart,
    shift: int,
) -> checkpoint.CheckpointFile:
    """The fork's checkpoint at ``end``: its fold of the inherited entries (which keeps only
    their ids, Rule 5) and the window of the last of them; the parent's segment index, moved by
    the header's change in length, when it has one."""
    progress = checkpoint.Progress(session=session_id, seed=header.seed_length, resume=resume)
    progress.add(plan.after)
    starts: Sequence[TailStart] = [header_end]
    if plan.segments and plan.segments[-1].entries == plan.base.entries:
        starts = [TailStart(s.entries, s.offset + shift, s.lines, s.chain) for s in plan.segments]
    # A fork that ends where the copied bytes do ends at the parent's last start, moved.
    index = list(starts) if starts[-1] == end else thinned(starts, end)
    content = checkpoint.draft(
        session=session_id,
        binding=checkpoint.Binding(end.entries, end.chain, end.offset, end.lines),
        progress=progress,
        window=plan.window,
    )
    found = [] if index is None else [checkpoint.SegmentStart(*start) for start in index]
    return msgspec.structs.replace(content, segments=found)


class _Body(NamedTuple):
    """A new file's bytes after its header: ``copy`` (``fd``, ``start``, ``stop``: a range of
    another file, copied by the kernel), then ``tail``."""

    tail: bytes
    copy: tuple[int, int, int] | None = None


def _publish(
    data_dir: Path,
    session_id: SessionId,
    head: bytes,
    body: _Body,
    *,
    checkpoint: bytes | None = None,
) -> int | None:
    """Write the header and ``body`` to a locked temporary file and link it into place — after
    ``checkpoint``, when given, is durable under the session's checkpoint name.

    Returns the locked descriptor, or ``None`` when the session's name is taken already.
    """
    temporary = data_dir / f".{session_id}.{secrets.token_hex(4)}.tmp"
    name = data_dir / f"{session_id}{SUFFIX}"
    placed: Path | None = None
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o600)
    try:
        # Locked before it has its public name: no other process can own it first.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _write(fd, head)
        if body.copy is not None:
            _copy_range(*body.copy, temporary, at=len(head))
        _write(fd, body.tail)
        os.fsync(fd)
        if checkpoint is not None:
            _refuse_taken(name)
            placed = checkpoint_path(name)
            write_private(placed, checkpoint)
        else:
            _refuse_taken(name)
            _remove_stray_checkpoint(name)
        os.link(temporary, name)
    except FileExistsError:
        os.close(fd)
        if placed is not None:
            placed.unlink(missing_ok=True)
        return None
    except BaseException:
        os.close(fd)
        if placed is not None:
            placed.unlink(missing_ok=True)
        raise
    finally:
        temporary.unlink(missing_ok=True)
    return fd


def _remove_stray_checkpoint(name: Path) -> None:
    """Remove a checkpoint under the name of the session ``name``, which does not exist yet: one
    a crashed fork left (rule 2), which would otherwise count entries the new log never held
    (see :func:`.checkpoints.refuse_lost_entries`). The removal is made durable before the
    session gets its name."""
    stray = checkpoint_path(name)
    if os.path.lexists(stray):
        stray.unlink(missing_ok=True)
        sync_directory(name.parent)


def _refuse_taken(name: Path) -> None:
    """``FileExistsError`` when ``name`` exists (before a fork's checkpoint takes its name)."""
    if os.path.lexists(name):
        raise FileExistsError(errno.EEXIST, "the session exists", str(name))


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_COPY_CHUNK = 1 << 24
"""Bytes moved per ``copy_file_range`` call (or per read and write, without it)."""


_NO_KERNEL_COPY = frozenset({errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL})
"""Errors of ``copy_file_range`` saying only that this kernel or file system cannot do it."""


def _copy_range(source: int, start: int, stop: int, target: Path, *, at: int) -> None:
    """Copy bytes ``start … stop-1`` of the file ``source`` to ``target`` from offset ``at``,
    in the kernel when it can (``copy_file_range``), by large reads otherwise. A source that
    ends early is an ``OSError``."""
    out = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
    try:
        kernel = hasattr(os, "copy_file_range")
        while start < stop:
            size = min(stop - start, _COPY_CHUNK)
            moved = 0
            if kernel:
                try:
                    moved = os.copy_file_range(source, out, size, start, at)
                except OSError as error:
                    if error.errno not in _NO_KERNEL_COPY:
                        raise
                    kernel = False
            if not kernel:
                data = os.pread(source, size, start)
                moved = len(data)
                view = memoryview(data)
                position = at
                while view:
                    written = os.pwrite(out, view, position)
                    view, position = view[written:], position + written
            if moved == 0:
                raise OSError(errno.EIO, f"the parent ended at byte {start}, before {stop}")
            start, at = start + moved, at + moved
    finally:
        os.close(out)
