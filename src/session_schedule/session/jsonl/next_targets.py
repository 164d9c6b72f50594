"""The JSONL store's next-target index: a sidecar file per data directory, a cache of the logs.

The logs stay the source of truth. The file ``<data_dir>/.next-targets`` holds one line per
record, ``["<session id>", <target ms or null>, <inode>, <size>, <mtime ns>]``: the session's
earliest active target as of the moment its file had that inode, size and modification time.
The last record of a session wins.

- **Writers.** A session's owner appends a record (one ``write`` on an ``O_APPEND`` descriptor,
  no fsync: it is a cache) after every barrier whose entries hold a ``schedule/change``, and when
  it closes the session — only while every entry the file holds is durable: a power cut may
  zero-fill the bytes of the others yet keep the file's size and modification time, and a record
  that counted them would then look fresh. The file's state (its ``fstat``) and the entry count
  are taken on the event loop between flushes, so the target, folded up to exactly that count,
  covers exactly the entries the file holds at that size; the fold and the write then run on the
  session's own thread, in order, off the barrier's path (a create does not wait for them; the
  close does).
- **Readers trust a record only while it describes the file.** ``due`` stats every session file;
  a session without a record, or whose file's inode, size or modification time differ from its
  record (a crash before the record was written, a torn tail cut, a file replaced), is read
  again from its log and its record rebuilt. A log that cannot be read is logged and indexed as
  having nothing active until the file changes (opening it reports the damage).
- **Compaction.** When records were rebuilt, or superseded lines outnumber live ones, the reader
  writes the live records to a temporary file and renames it into place. A record an owner
  appends to the old file meanwhile is lost; its session then looks stale and is read again —
  never wrongly fresh, since a session file only grows under one inode.
- A line of the index that does not decode is logged and ignored (its session is then read
  again): the index is derived data, rebuilt from the logs.
- **A private file.** The index is read, appended to and replaced as the session files are
  (:mod:`session_schedule.session.private`): ``0600``, never through a symbolic link, never
  blocking on a FIFO, and never read past :data:`MAX_INDEX_BYTES`; an index that is not such a
  file is not used (every session is read from its log) and is replaced by the next compaction.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final, NamedTuple, TypeAlias, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant, format_instant
from session_schedule.session.errors import SessionError
from session_schedule.session.ids import SessionId, parse_session_id
from session_schedule.session.port import DueSession, LogEntry, SessionHeader
from session_schedule.session.private import append_private, read_private, write_private
from session_schedule.session.targets import due, next_target_of

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

    def sign(self, record: _Record) -> _Record:
        key = self._load()
        if key is None:
            return record
        return msgspec.structs.replace(record, mac=_digest(key, record))

    def verifies(self, record: _Record) -> bool:
        key = self._load()
        return key is not None and hmac.compare_digest(record.mac, _digest(key, record))

    def _load(self) -> bytes | None:
        if self._tried:
            return self._key
        self._tried = True
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
        self._key = key
        return key


def _make_key(path: Path) -> bytes:
    """A new key in ``path`` — or the one another process made first."""
    key = secrets.token_bytes(_KEY_BYTES)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        found = read_private(path, limit=_KEY_BYTES)
        return b"" if found is None else found
    try:
        os.write(fd, key)  # no fsync: a key lost to a power cut only costs a rebuild
    finally:
        os.close(fd)
    return key


def _digest(key: bytes, record: _Record) -> str:
    fields = _encoder.encode((record.id, record.target, record.inode, record.size, record.mtime))
    return hmac.new(key, fields, hashlib.sha256).hexdigest()[:32]


class _Loaded(NamedTuple):
    records: dict[SessionId, _Record]
    lines: int


def _matches(record: _Record, status: os.stat_result) -> bool:
    return (record.inode, record.size, record.mtime) == (
        status.st_ino,
        status.st_size,
        status.st_mtime_ns,
    )


@final
class TargetIndexFile:
    """The sidecar index of the data directory ``data_dir`` (see the module docstring).

    ``suffix`` names session files; ``read_log`` reads one (blocking) when a record is rebuilt.
    Every method blocks: call it off the event loop.
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

    @property
    def path(self) -> Path:
        return self._path

    def record(self, session_id: SessionId, target: Instant | None, status: os.stat_result) -> None:
        """Append the record of ``session_id`` with ``target``, for its file as ``status`` (an
        ``fstat`` of it) describes it.

        A failure is logged, not raised: the session then looks stale and is read again.
        """
        try:
            line = _encoder.encode(
                self._keys.sign(
                    _Record(session_id, target, status.st_ino, status.st_size, status.st_mtime_ns)
                )
            )
            append_private(self._path, line + b"\n")
        except OSError as error:
            _log.warning("session %s: its next target was not indexed: %s", session_id, error)

    def due(self, before: Instant, limit: int) -> tuple[DueSession, ...]:
        """The sessions of the directory due before ``before`` (see ``due_sessions``)."""
        if not self._dir.is_dir():
            return due({}, before, limit)
        loaded = self._load()
        targets: dict[SessionId, Instant | None] = {}
        live: dict[SessionId, _Record] = {}
        rebuilt = 0
        with os.scandir(self._dir) as found:
            for entry in found:
                if not entry.name.endswith(self._suffix):
                    continue
                session_id = parse_session_id(entry.name.removesuffix(self._suffix))
                if session_id is None:
                    continue
                try:
                    status = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if not stat.S_ISREG(status.st_mode):
                    continue  # not a session file; scan() and open() report it
                record = loaded.records.get(session_id)
                if record is None or not _matches(record, status):
                    record = self._rebuild(session_id, Path(entry.path), status)
                    rebuilt += 1
                live[session_id] = record
                targets[session_id] = None if record.target is None else Instant(record.target)
        if rebuilt or loaded.lines > 2 * len(live) + _SLACK:
            self._compact(live)
        return due(targets, before, limit)

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
            try:
                record = _decoder.decode(line)
            except msgspec.DecodeError:
                bad += 1
                continue
            session_id = parse_session_id(record.id)
            if session_id is None:
                bad += 1
                continue
            if not self._keys.verifies(record):
                # Not written by a holder of the key (forged, or of an older version): its
                # session is read again, so no record can hide a due reminder.
                records.pop(session_id, None)
                unverified += 1
                continue
            records[session_id] = record
        if bad:
            _log.warning(
                "%s: %d line(s) of the next-target index do not decode; their sessions are read "
                "again from their logs",
                self._path,
                bad,
            )
        if unverified:
            _log.warning(
                "%s: %d record(s) of the next-target index do not verify against the index key; "
                "their sessions are read again from their logs",
                self._path,
                unverified,
            )
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

    def _compact(self, live: dict[SessionId, _Record]) -> None:
        body = b"".join(_encoder.encode(record) + b"\n" for record in live.values())
        try:
            write_private(self._path, body)
        except OSError as error:
            _log.warning("%s: the next-target index was not rewritten: %s", self._path, error)
