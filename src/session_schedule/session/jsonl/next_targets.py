"""The JSONL store's next-target index: a sidecar file per data directory, a cache of the logs.

The logs stay the source of truth. The file ``<data_dir>/.next-targets`` holds one line per
record, ``["<session id>", <target ms or null>, <inode>, <size>, <mtime ns>, "<digest>"]``: the
session's earliest active target as of the moment its file had that inode, size and modification
time. A line whose inode is ``-1`` is a **mark** instead: the session's owner is about to write
entries that can move its target to a file now ``<size>`` bytes long. The last record of a
session wins; a mark stays **pending** until a record of a larger file follows it.

- **Writers.** Before the first entry that can move the target (``schedule/change``,
  ``turn/*``) reaches the file after the owner's last record, the owner appends a mark (on the
  event loop, no fsync: one ``write``). It appends a record (no fsync: it is a cache) after every
  barrier whose entries hold such an entry, and when it closes the session — only while every
  entry the file holds is durable: a power cut may zero-fill the bytes of the others yet keep
  the file's size and modification time, and a record that counted them would then look fresh.
  The file's state (its ``fstat``) and the entry count are taken on the event loop between
  flushes, so the target, folded up to exactly that count, covers exactly the entries the file
  holds at that size; the fold and the write then run on the session's own thread, in order,
  off the barrier's path (a create does not wait for them; the close does). A record posted
  before a mark may land after it: it describes a file no larger than the mark's, so it does
  not settle the mark.
- **Readers keep what they learnt between polls** (one :class:`TargetIndexFile` per store), so
  an idle poll costs a ``stat`` of the index and one of the directory, whatever the number of
  sessions. A reader holds the index open and reads only the bytes appended since its last
  poll; a session named by a new line is ``stat``'d, and so is every session with a pending
  mark, at every poll until it is settled. A session whose file differs from its record and
  from the state the reader last read it in (a crash between the entries and the record, a
  torn tail cut, a file replaced) is read again from its log; a reader appends what it rebuilt
  (never for a session with a pending mark: only an owner's record settles one).
- **Full scans.** A new reader, one that finds the index replaced (another inode, or shorter
  than what it read), and one that meets a line it cannot decode, ``stat``\\ s every session
  file. The directory's modification time tells a reader that files were added, removed or
  renamed over: it then lists the directory (names and inode numbers, no ``stat``) and
  ``stat``\\ s the new ones; it lists it again at the next poll while that time is within
  :data:`_SETTLE_NS` of the clock (a change in the same clock tick leaves it unchanged).
- **Compaction.** When superseded lines outnumber live ones (or the index cannot be used), a
  reader writes a record of every session it knows and every pending mark to a temporary file
  and fsyncs it; then, holding an exclusive ``flock`` on the old file, copies the lines appended
  since it last read, and renames the new file into place. Appenders hold a shared ``flock``
  while they write and write again to the new file when theirs was renamed over
  (``st_nlink == 0``), so no record or mark is lost to a compaction.
- **Power cuts.** Every process starts anew, with a full scan; a record the cut lost only
  costs a read of its log, and marks only matter to readers that outlive their writers.
- A line of the index that does not decode is logged and ignored (its session is then read
  again): the index is derived data, rebuilt from the logs.
- **A private file.** The index is read, appended to and replaced as the session files are
  (:mod:`session_schedule.session.private`): ``0600``, never through a symbolic link, never
  blocking on a FIFO, and never read past :data:`MAX_INDEX_BYTES`; an index that is not such a
  file is not used (every session is ``stat``'d at every poll) and is replaced by a compaction.
- **Keyed records.** A record is trusted only when its digest verifies against the directory's
  key (:class:`_Keys`); a mark is honoured whether or not it does (it only makes readers look),
  so an owner appends its marks without one.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import fcntl
import hashlib
import hmac
import logging
import os
import secrets
import stat
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Final, NamedTuple, TypeAlias, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant, format_instant
from session_schedule.session.errors import SessionError
from session_schedule.session.ids import SessionId, parse_session_id
from session_schedule.session.jsonl.files import write_all
from session_schedule.session.port import DueSession, LogEntry, SessionHeader
from session_schedule.session.private import (
    FILE_MODE,
    OPEN_FLAGS,
    NotPrivateFile,
    check_regular,
    read_private,
    refusal,
    sync_directory,
)
from session_schedule.session.targets import check_limit, next_target_of

INDEX_NAME: Final = ".next-targets"
MAX_INDEX_BYTES: Final = 256 * 1024 * 1024
"""The largest index read (a million sessions' records fit); a larger file is not used."""
_SLACK: Final = 64
"""Superseded lines tolerated beyond the live ones before the reader compacts the file."""

_log: Final = logging.getLogger(__name__)

ReadLog: TypeAlias = Callable[[Path, SessionId], tuple[SessionHeader, list[LogEntry]]]
"""Reads a session file's header and entries (``SessionError``/``ScheduleError`` for damage)."""


@final
class _Record(msgspec.Struct, frozen=True, array_like=True):
    id: str
    target: int | None
    inode: int
    size: int
    mtime: int
    mac: str = ""
    """The record's keyed digest (see :class:`_Keys`); empty in records of older versions."""


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(_Record)
KEY_NAME: Final = ".index-key"
_KEY_BYTES: Final = 32


@final
class _Keys:
    """The data directory's index key (:data:`KEY_NAME`, 32 random bytes, ``0600``), made on
    first use (and again if it was cut short), and the digests it gives records. Without a
    usable key no record verifies (every session is read from its log): slower, never wrong."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / KEY_NAME
        self._key: bytes | None = None
        self._tried = False
        self._lock = threading.Lock()
        """Held while the key is read or made: the store's worker threads sign records at once
        (sessions created together), and none may find it "tried" before it is known."""

    def sign(self, record: _Record) -> _Record:
        key = self._load()
        if key is None:
            return record
        return msgspec.structs.replace(record, mac=_digest(key, record))

    def verifies(self, record: _Record) -> bool:
        key = self._load()
        return key is not None and hmac.compare_digest(record.mac, _digest(key, record))

    def _load(self) -> bytes | None:
        with self._lock:
            if not self._tried:
                self._key = self._first_load()
                self._tried = True
            return self._key

    def _first_load(self) -> bytes | None:
        try:
            key = read_private(self._path, limit=_KEY_BYTES)
            if key is None:
                key = _make_key(self._path)
        except OSError as error:
            _log.warning(
                "%s: the next-target index key cannot be used (%s); every session is read "
                "from its log",
                self._path,
                error.strerror or error,
            )
            return None
        if len(key) != _KEY_BYTES:
            # Cut short (a power cut after its creation, say): a new key; the records signed
            # with the old one no longer verify, and their sessions are read again.
            try:
                self._path.unlink(missing_ok=True)
                key = _make_key(self._path)
            except OSError as error:
                _log.warning("%s: no index key: %s", self._path, error.strerror or error)
                return None
            if len(key) != _KEY_BYTES:
                return None
        return key


def _make_key(path: Path) -> bytes:
    """A new key in ``path`` — or the one another process made first. The key is written to a
    temporary file linked into place whole, so no process ever reads one half written."""
    key = secrets.token_bytes(_KEY_BYTES)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(temporary, flags, 0o600)
    try:
        try:
            os.write(fd, key)  # no fsync: a key lost to a power cut only costs a rebuild
        finally:
            os.close(fd)
        os.link(temporary, path)
    except FileExistsError:
        found = read_private(path, limit=_KEY_BYTES)
        return b"" if found is None else found
    finally:
        temporary.unlink(missing_ok=True)
    return key


def _digest(key: bytes, record: _Record) -> str:
    fields = _encoder.encode((record.id, record.target, record.inode, record.size, record.mtime))
    return hmac.new(key, fields, hashlib.sha256).hexdigest()[:32]


class _Loaded(NamedTuple):
    records: dict[SessionId, _Record]
    lines: int


_State: TypeAlias = tuple[int, int, int]
"""A session file's inode, size and modification time (ns)."""
_MARK: Final = -1
"""The inode of a mark (and of a record of a file that changed while it was read)."""
_BULK: Final = 256
"""More sessions checked in one poll than this, and the due order is sorted anew once."""
_SETTLE_NS: Final = 2_000_000_000
"""How recent a directory's modification time is listed again at the next poll."""


def _state(status: os.stat_result) -> _State:
    return (status.st_ino, status.st_size, status.st_mtime_ns)


def _matches(record: _Record, status: os.stat_result) -> bool:
    return (record.inode, record.size, record.mtime) == _state(status)


@final
class _Descriptor:
    """The index's descriptor, closed when no reader or writer holds it any more."""

    __slots__ = ("__weakref__", "fd", "inode")

    def __init__(self, fd: int, inode: int) -> None:
        self.fd = fd
        self.inode = inode
        weakref.finalize(self, os.close, fd)


@final
class TargetIndexFile:
    """The sidecar index of the data directory ``data_dir`` (see the module docstring).

    ``suffix`` names session files; ``read_log`` reads one (blocking) when a record is rebuilt.
    Every method blocks: call it off the event loop (but :meth:`mark`, one ``write``).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        suffix: str,
        read_log: ReadLog,
    ) -> None:
        self._dir = data_dir
        self._path = data_dir / INDEX_NAME
        self._suffix = suffix
        self._read_log = read_log
        self._keys = _Keys(data_dir)
        self._file_lock = threading.Lock()
        """Held for every use of :attr:`_file` (appends from any thread, the reader's reads)."""
        self._file: _Descriptor | None = None
        self._poll_lock = threading.Lock()
        # What the reader learnt (under ``_poll_lock``).
        self._read: _Descriptor | None = None
        """The index file read so far (``None``: none, or one that cannot be used)."""
        self._offset = 0
        """Bytes of it read (complete lines only)."""
        self._lines = 0
        self._usable = True
        self._scan_all = True
        """Whether the next poll ``stat``\\ s every session file."""
        self._records: dict[SessionId, _Record] = {}
        """The last verified record of each session read from the index, until it is looked at."""
        self._marks: dict[SessionId, int] = {}
        """The pending marks: the largest size each names."""
        self._check: set[SessionId] = set()
        """The sessions the next poll ``stat``\\ s."""
        self._inodes: dict[SessionId, int] = {}
        """The session files the reader knows, by their inode number."""
        self._known: dict[SessionId, _State] = {}
        """The file state each session's target was learnt for (a matching record, or a read)."""
        self._targets: dict[SessionId, Instant | None] = {}
        self._order: list[tuple[Instant, SessionId]] = []
        """The sessions with a target, soonest first, then by id."""
        self._listed: int | None = None
        """The directory's modification time when it was last listed."""
        self._statted: dict[SessionId, os.stat_result] = {}
        """The files a full listing ``stat``'d, for the checks that follow it."""

    @property
    def path(self) -> Path:
        return self._path

    def record(self, session_id: SessionId, target: Instant | None, status: os.stat_result) -> None:
        """Append the record of ``session_id`` with ``target``, for its file as ``status`` (an
        ``fstat`` of it) describes it.

        A failure is logged, not raised: the session then looks stale and is read again.
        """
        record = _Record(session_id, target, status.st_ino, status.st_size, status.st_mtime_ns)
        try:
            self._append(_encoder.encode(self._keys.sign(record)) + b"\n")
        except OSError as error:
            _log.warning("session %s: its next target was not indexed: %s", session_id, error)

    def mark(self, session_id: SessionId, size: int) -> None:
        """Append a mark: entries that can move the target of ``session_id`` are about to be
        written to its file, ``size`` bytes long now. Readers ``stat`` the file at every poll
        until a record of a larger file follows.

        A failure is logged, not raised (a reader that starts later still finds the change).
        """
        # Unsigned: a reader honours a mark whether or not it verifies, and the digest (an
        # HMAC) would be computed on the event loop, before the entry it precedes.
        mark = _Record(session_id, None, _MARK, size, _MARK)
        try:
            self._append(_encoder.encode(mark) + b"\n")
        except OSError as error:
            _log.warning(
                "session %s: its next target was not marked as moving: %s", session_id, error
            )

    def due(self, before: Instant, limit: int) -> tuple[DueSession, ...]:
        """The sessions of the directory due before ``before`` (see ``due_sessions``)."""
        check_limit(limit)
        with self._poll_lock:
            try:
                listed = self._dir.stat()
            except FileNotFoundError:
                self._forget_all()
                return ()
            if not stat.S_ISDIR(listed.st_mode):
                self._forget_all()
                return ()
            self._read_index()
            self._list(listed.st_mtime_ns)
            rebuilt = self._examine()
            if rebuilt:
                self._append_rebuilt(rebuilt)
            if not self._usable or self._lines > 2 * len(self._inodes) + _SLACK:
                self._compact()
            return self._soonest(before, limit)

    def mismatch(
        self, session_id: SessionId, status: os.stat_result, target: Instant | None
    ) -> str | None:
        """How the index's record of ``session_id`` differs from ``target``, the log's next
        target, when the record would be trusted (it verifies and describes the file as
        ``status`` says); ``None`` when it agrees, or would not be trusted."""
        record = self._load().records.get(session_id)
        if record is None or not _matches(record, status):
            return None
        recorded = None if record.target is None else Instant(record.target)
        if recorded == target:
            return None
        said = "nothing active" if recorded is None else f"a target at {format_instant(recorded)}"
        real = "nothing active" if target is None else f"a target at {format_instant(target)}"
        return f"its record in {INDEX_NAME} says {said}, and the log says {real}"

    # Appending (any thread).

    def _append(self, data: bytes) -> None:
        """Write ``data`` at the end of the index in one ``write``, under a shared ``flock``;
        again to the new file when a compaction renamed it over the one held."""
        with self._file_lock:
            for _ in range(8):
                held = self._file
                if held is None:
                    held = self._file = self._open(create=True)
                fcntl.flock(held.fd, fcntl.LOCK_SH)
                try:
                    if os.fstat(held.fd).st_nlink == 0:
                        self._file = None  # renamed over or removed: open the one there now
                        continue
                    written = os.write(held.fd, data)
                finally:
                    fcntl.flock(held.fd, fcntl.LOCK_UN)
                if written != len(data):
                    raise OSError(
                        errno.EIO, f"short write ({written} of {len(data)} bytes)", str(self._path)
                    )
                return
            raise OSError(errno.EAGAIN, "the index kept being replaced", str(self._path))

    def _open(self, *, create: bool) -> _Descriptor:
        """The index, opened to read and append (refused unless a regular file)."""
        flags = os.O_RDWR | os.O_APPEND | OPEN_FLAGS | (os.O_CREAT if create else 0)
        try:
            fd = os.open(self._path, flags, FILE_MODE)
        except OSError as error:
            raise refusal(self._path, error) from None
        try:
            status = os.fstat(fd)
            check_regular(self._path, status.st_mode)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return _Descriptor(fd, status.st_ino)

    # Reading (under ``_poll_lock``).

    def _forget_all(self) -> None:
        self._read = None
        self._offset = self._lines = 0
        self._usable = self._scan_all = True
        self._records.clear()
        self._marks.clear()
        self._check.clear()
        self._inodes.clear()
        self._known.clear()
        self._targets.clear()
        self._order.clear()
        self._listed = None

    def _read_index(self) -> None:
        """Take in the lines appended since the last poll, or the whole index when it is new."""
        try:
            status = self._path.lstat()
        except FileNotFoundError:
            status = None
        held = self._read
        if (
            held is not None
            and status is not None
            and status.st_ino == held.inode
            and status.st_size >= self._offset
            and stat.S_ISREG(status.st_mode)
        ):
            if status.st_size == self._offset or status.st_size > MAX_INDEX_BYTES:
                return  # idle (or too large to take in: replaced by the next compaction)
            self._take(self._pread(held, self._offset, status.st_size - self._offset))
            return
        # New, replaced, cut or gone: read it whole, and check every session file.
        self._read = None
        self._offset = self._lines = 0
        self._records.clear()
        self._marks.clear()
        self._scan_all = True
        self._usable = True
        if status is None:
            return
        try:
            opened = self._open(create=False)
            size = os.fstat(opened.fd).st_size
            if size > MAX_INDEX_BYTES:
                raise NotPrivateFile(
                    errno.EFBIG,
                    f"it holds {size} bytes, more than {MAX_INDEX_BYTES}",
                    str(self._path),
                )
            data = self._pread(opened, 0, size)
        except FileNotFoundError:
            return
        except OSError as error:
            _log.warning(
                "%s: the next-target index is not used (%s); every session is read from its log",
                self._path,
                error.strerror or error,
            )
            self._usable = False
            return
        self._read = opened
        self._take(data)

    def _pread(self, held: _Descriptor, offset: int, size: int) -> bytes:
        chunks: list[bytes] = []
        while size > 0:  # ``pread`` moves no shared offset: appenders need not wait
            chunk = os.pread(held.fd, min(size, 1 << 20), offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def _take(self, data: bytes) -> None:
        """Apply the complete lines of ``data``, read at :attr:`_offset`."""
        end = data.rfind(b"\n") + 1  # a torn last line is read again once complete
        if not end:
            return
        self._offset += end
        lines = data[:end].split(b"\n")
        lines.pop()
        self._lines += len(lines)
        bad = unverified = 0
        for line in lines:
            decoded = _decoded(line)
            if decoded is None:
                bad += 1
                continue
            record, session_id = decoded
            self._check.add(session_id)
            if record.inode == _MARK:
                # A mark only makes readers look at the log more: it need not verify.
                self._marks[session_id] = max(self._marks.get(session_id, -1), record.size)
            elif not self._keys.verifies(record):
                # Not written by a holder of the key (forged, or of an older version): its
                # session is read again, so no record can hide a due reminder.
                self._records.pop(session_id, None)
                self._known.pop(session_id, None)
                unverified += 1
            else:
                self._records[session_id] = record
                if self._marks.get(session_id, record.size) < record.size:
                    del self._marks[session_id]
        if bad:
            # Whose line it was is unknown: every session file is checked.
            self._scan_all = True
        _report_rejected(self._path, bad, unverified)

    def _list(self, mtime: int) -> None:
        """List the directory when it changed (or all of it is checked): new session files and
        files renamed over are checked, removed ones forgotten."""
        scan_all, self._scan_all = self._scan_all, False
        if not self._usable:
            scan_all = True  # no index: every file is checked at every poll
        if not scan_all and mtime == self._listed:
            return
        # A change in the same clock tick as this listing would leave the time as it is.
        self._listed = mtime if time.time_ns() - mtime > _SETTLE_NS else None
        found: dict[SessionId, int] = {}
        with os.scandir(self._dir) as entries:
            for entry in entries:
                if not entry.name.endswith(self._suffix):
                    continue
                session_id = parse_session_id(entry.name.removesuffix(self._suffix))
                if session_id is None:
                    continue
                found[session_id] = entry.inode()
                if scan_all:  # an lstat relative to the open directory: cheaper than by path
                    with contextlib.suppress(FileNotFoundError):
                        self._statted[session_id] = entry.stat(follow_symlinks=False)
        for session_id in self._inodes.keys() - found.keys():
            self._forget(session_id)
        for session_id, inode in found.items():
            if scan_all or self._inodes.get(session_id) != inode:
                self._check.add(session_id)
        self._inodes = found

    def _examine(self) -> list[_Record]:
        """``stat`` the sessions to check and those with a pending mark; read again those whose
        file is neither as their record nor as last read. Returns the records rebuilt that may
        be appended (of files unchanged while read, without a pending mark)."""
        check, self._check = self._check | self._marks.keys(), set()
        statted, self._statted = self._statted, {}
        bulk = len(check) > _BULK
        rebuilt: list[_Record] = []
        for session_id in check:
            path = self._dir / f"{session_id}{self._suffix}"
            status = statted.get(session_id)
            try:
                if status is None:
                    status = path.lstat()
            except FileNotFoundError:
                self._forget(session_id)
                continue
            if not stat.S_ISREG(status.st_mode):
                self._forget(session_id)  # not a session file; scan() and open() report it
                continue
            self._inodes[session_id] = status.st_ino
            state = _state(status)
            # Once looked at, a record is of no more use: ``_known`` says what was learnt.
            record = self._records.pop(session_id, None)
            if record is not None and _matches(record, status):
                self._known[session_id] = state
                self._set_target(session_id, record.target, bulk=bulk)
                continue
            if self._known.get(session_id) == state:
                continue
            fresh = self._rebuild(session_id, path, status)
            self._set_target(session_id, fresh.target, bulk=bulk)
            if fresh.inode == _MARK:
                # It changed while being read: read again at the next poll.
                self._known.pop(session_id, None)
                self._check.add(session_id)
                continue
            self._known[session_id] = state
            if session_id not in self._marks:
                rebuilt.append(fresh)
        if bulk:
            self._order = sorted(
                (target, session_id)
                for session_id, target in self._targets.items()
                if target is not None
            )
        return rebuilt

    def _forget(self, session_id: SessionId) -> None:
        self._inodes.pop(session_id, None)
        self._known.pop(session_id, None)
        self._marks.pop(session_id, None)
        self._records.pop(session_id, None)
        self._set_target(session_id, None)
        self._targets.pop(session_id, None)

    def _set_target(self, session_id: SessionId, target: int | None, *, bulk: bool = False) -> None:
        """Set the target of ``session_id`` (``bulk``: leave :attr:`_order` to be sorted anew)."""
        new = None if target is None else Instant(target)
        old = self._targets.get(session_id)
        self._targets[session_id] = new
        if old == new or bulk:
            return
        if old is not None:
            at = bisect.bisect_left(self._order, (old, session_id))
            if at < len(self._order) and self._order[at] == (old, session_id):
                del self._order[at]  # (absent during a bulk update, sorted anew after it)
        if new is not None:
            bisect.insort(self._order, (new, session_id))

    def _soonest(self, before: Instant, limit: int) -> tuple[DueSession, ...]:
        end = bisect.bisect_left(self._order, (before,))
        return tuple(
            DueSession(session_id, target) for target, session_id in self._order[: min(end, limit)]
        )

    def _append_rebuilt(self, rebuilt: list[_Record]) -> None:
        """Append the records rebuilt from the logs, under an exclusive ``flock``: none of a
        session named by a line appended since this poll read the index (a mark among them
        must not be followed by a reader's record, which would settle it)."""
        held = self._read
        with self._file_lock:
            try:
                if held is None:
                    if self._file is None or os.fstat(self._file.fd).st_nlink == 0:
                        self._file = self._open(create=True)
                    held = self._file
                    start = 0
                else:
                    start = self._offset
                fcntl.flock(held.fd, fcntl.LOCK_EX)
                try:
                    if os.fstat(held.fd).st_nlink == 0:
                        return  # replaced: the next poll reads the new one
                    size = os.fstat(held.fd).st_size
                    since = os.pread(held.fd, size - start, start) if size > start else b""
                    named = {line.split(b",", 1)[0] for line in since.split(b"\n")}
                    body = b"".join(
                        _encoder.encode(self._keys.sign(record)) + b"\n"
                        for record in rebuilt
                        if b"[" + _encoder.encode(record.id) not in named
                    )
                    write_all(held.fd, body)
                finally:
                    fcntl.flock(held.fd, fcntl.LOCK_UN)
            except OSError as error:
                _log.warning("%s: rebuilt next targets were not appended: %s", self._path, error)

    def _compact(self) -> None:
        """Replace the index with a record of every session known and every pending mark, and
        the lines appended to the old file meanwhile (see the module docstring)."""
        lines = [
            _encoder.encode(
                self._keys.sign(_Record(session_id, self._targets.get(session_id), *state))
            )
            for session_id, state in self._known.items()
            if session_id in self._inodes
        ]
        lines.extend(
            _encoder.encode(self._keys.sign(_Record(session_id, None, _MARK, size, _MARK)))
            for session_id, size in self._marks.items()
        )
        body = b"".join(line + b"\n" for line in lines)
        temporary = self._path.with_name(f".{INDEX_NAME}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(
                temporary,
                os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | OPEN_FLAGS,
                FILE_MODE,
            )
        except OSError as error:
            _log.warning("%s: the next-target index was not rewritten: %s", self._path, error)
            return
        fresh = _Descriptor(fd, os.fstat(fd).st_ino)
        try:
            os.fchmod(fd, FILE_MODE)
            os.set_blocking(fd, True)
            write_all(fd, body)
            os.fsync(fd)
            tail = self._replace(temporary, fd)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            _log.warning("%s: the next-target index was not rewritten: %s", self._path, error)
            return
        if tail is None:
            temporary.unlink(missing_ok=True)
            return  # another reader replaced it first: the next poll reads that one
        with self._file_lock:
            self._file = fresh
        self._read = fresh
        self._offset = len(body)
        self._lines = len(lines)
        self._usable = True
        self._take(tail)
        try:
            sync_directory(self._dir)
        except OSError as error:
            _log.warning("%s: %s", self._dir, error)

    def _replace(self, temporary: Path, fd: int) -> bytes | None:
        """Rename ``temporary`` (open as ``fd``) over the index, holding an exclusive ``flock``
        on the one it replaces, once the lines appended to that one since this reader read it
        are copied to its end; returns them (``None``: the index is not the file this reader
        read — another compaction came first — and was left as it is)."""
        with self._file_lock:
            try:
                old = self._open(create=False)
            except FileNotFoundError:
                try:
                    os.link(temporary, self._path)  # only if no appender created one meanwhile
                except FileExistsError:
                    return None
                temporary.unlink()
                return b""
            except NotPrivateFile:
                temporary.replace(self._path)  # never read: replaced
                return b""
            fcntl.flock(old.fd, fcntl.LOCK_EX)
            try:
                held = self._read
                if not self._usable:
                    start = None  # too large to read: replaced
                elif held is None:
                    start = 0  # created by an appender after this poll found none
                elif held.inode == old.inode:
                    start = self._offset
                else:
                    return None
                tail = b""
                if start is not None:
                    size = os.fstat(old.fd).st_size
                    since = os.pread(old.fd, size - start, start) if size > start else b""
                    tail = since[: since.rfind(b"\n") + 1]
                write_all(fd, tail)
                temporary.replace(self._path)
                return tail
            finally:
                fcntl.flock(old.fd, fcntl.LOCK_UN)

    def _load(self) -> _Loaded:
        try:
            data = read_private(self._path, limit=MAX_INDEX_BYTES)
        except OSError as error:
            _log.warning(
                "%s: the next-target index is not used (%s); every session is read from its log",
                self._path,
                error.strerror or error,
            )
            return _Loaded({}, 0)
        if data is None:
            return _Loaded({}, 0)
        records: dict[SessionId, _Record] = {}
        lines = data.split(b"\n")
        torn = lines.pop()  # b"" when the file ends with a newline
        bad = unverified = 0
        for line in lines:
            decoded = _decoded(line)
            if decoded is None:
                bad += 1
                continue
            record, session_id = decoded
            if record.inode == _MARK:
                continue  # a mark describes no file, and need not verify (see mark)
            if not self._keys.verifies(record):
                # Not written by a holder of the key (forged, or of an older version): its
                # session is read again, so no record can hide a due reminder.
                records.pop(session_id, None)
                unverified += 1
                continue
            records[session_id] = record
        _report_rejected(self._path, bad, unverified)
        return _Loaded(records, len(lines) + (1 if torn else 0))

    def _rebuild(self, session_id: SessionId, path: Path, status: os.stat_result) -> _Record:
        target: Instant | None
        try:
            header, entries = self._read_log(path, session_id)
        except (SessionError, ScheduleError) as error:
            _log.warning("session %s: its next target is not indexed: %s", session_id, error)
            target = None
        else:
            target = next_target_of(header, entries)
        try:
            after = path.lstat()
        except FileNotFoundError:
            after = status
        record = _Record(session_id, target, status.st_ino, status.st_size, status.st_mtime_ns)
        if not _matches(record, after):
            # It changed while being read: record nothing that could look fresh.
            return _Record(session_id, target, -1, -1, -1)
        return self._keys.sign(record)


def _decoded(line: bytes) -> tuple[_Record, SessionId] | None:
    """The record on ``line`` of the index and its session's id; ``None`` for a line that does
    not decode or names no valid session (the caller counts it for :func:`_report_rejected`)."""
    try:
        record = _decoder.decode(line)
    except msgspec.DecodeError:
        return None
    session_id = parse_session_id(record.id)
    return None if session_id is None else (record, session_id)


def _report_rejected(path: Path, bad: int, unverified: int) -> None:
    """Log the index lines that do not decode and the records that do not verify (their
    sessions are then read again from their logs)."""
    if bad:
        _log.warning(
            "%s: %d line(s) of the next-target index do not decode; their sessions are read "
            "again from their logs",
            path,
            bad,
        )
    if unverified:
        _log.warning(
            "%s: %d record(s) of the next-target index do not verify against the index key; "
            "their sessions are read again from their logs",
            path,
            unverified,
        )
