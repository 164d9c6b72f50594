"""The JSONL store: one file per session in a data directory — the embedded default.

A session is the file ``<data_dir>/<session id>.jsonl`` (mode ``0600``): the header on line 1,
entry ``n`` on line ``n + 2`` (the line format is in :mod:`session_schedule.session.codec`). The
discipline, after SPEC §9:

- **Creation is atomic.** The header — and a fork's copied entries — go to a hidden temporary
  file, which is fsync'd and then hard-linked to the session's name (``link`` never replaces an
  existing session) before the directory is fsync'd. A crash leaves either no session or a
  complete one (and perhaps a stray ``.s_….tmp`` file, which nothing reads).
- **One writer.** The owning handle holds ``flock(LOCK_EX | LOCK_NB)`` on the file; a second
  owner — another descriptor in this process or another process — is refused with
  ``SessionBusy``. The kernel drops the lock when the owner closes the file or dies.
- **One write per entry.** ``append`` issues a single ``os.write`` of the whole line, newline
  included, on an ``O_APPEND`` descriptor; a failed or short write poisons the handle.
- **The barrier is an fsync** on the session's own thread, with group commit (see
  :mod:`session_schedule.session.barrier`): a hundred appends, then one barrier, cost one fsync.
- **Opening repairs only a torn last line.** Bytes after the final newline are what a crash in
  the middle of an append leaves; once every complete line has decoded, they are cut
  (``ftruncate`` + ``fsync``). Any complete line that does not decode — the last one included —
  is corruption: it is reported and the file is left byte-for-byte untouched.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final, NamedTuple, final

from session_schedule.core.instants import Instant
from session_schedule.session.codec import (
    Source,
    check_seed_length,
    decode_entry_line,
    decode_header_line,
    entry_line,
    header_line,
)
from session_schedule.session.errors import (
    SessionCorrupt,
    persistence_uncertain,
    session_busy,
    session_exists,
    session_not_found,
)
from session_schedule.session.handle import LogHandle
from session_schedule.session.ids import (
    SessionId,
    chosen_session_id,
    new_session_id,
    parse_session_id,
    require_session_id,
)
from session_schedule.session.port import (
    LogEntry,
    SessionHeader,
    SessionListing,
    SessionSnapshot,
    listed,
    listing,
    make_header,
    seed_length,
)
from session_schedule.session.worker import Worker

SUFFIX: Final = ".jsonl"
_READ_CHUNK: Final = 1 << 20


@final
class JsonlSessionHandle(LogHandle):
    """The owner of one session file: holds its descriptor and its ``flock``."""

    def __init__(
        self,
        *,
        header: SessionHeader,
        entries: list[LogEntry],
        fd: int,
        path: Path,
        worker: Worker,
    ) -> None:
        super().__init__(header=header, entries=entries)
        self._fd = fd
        self._path = path
        self._worker = worker

    @property
    def path(self) -> Path:
        return self._path

    def _write(self, position: int, entry_type: str, data: bytes) -> None:  # noqa: ARG002
        line = entry_line(entry_type, data)
        written = os.write(self._fd, line)
        if written != len(line):
            raise OSError(errno.EIO, f"short write ({written} of {len(line)} bytes)")

    def _flush(self, durable: int, target: int) -> Awaitable[None]:  # noqa: ARG002
        fd = self._fd
        return self._worker.submit(lambda: os.fsync(fd))

    async def _release(self) -> None:
        fd = self._fd
        await self._worker.stop(lambda: os.close(fd))


class _Parsed(NamedTuple):
    header: SessionHeader
    entries: list[LogEntry]
    lines: list[bytes]
    """The entries' lines, without their newlines."""
    complete: int
    """Bytes up to and including the last newline."""
    torn: int
    """Bytes after the last newline: a torn last line."""


class _Opened(NamedTuple):
    fd: int
    header: SessionHeader
    entries: list[LogEntry]


@final
class JsonlSessionStore:
    """Sessions as JSONL files in ``data_dir`` (created ``0700`` when missing)."""

    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir

    @property
    def data_dir(self) -> Path:
        return self._dir

    def path_of(self, session_id: SessionId) -> Path:
        """The file of session ``session_id``."""
        return self._dir / f"{session_id}{SUFFIX}"

    async def create(
        self, *, now: Instant, session_id: SessionId | None = None
    ) -> JsonlSessionHandle:
        chosen = chosen_session_id(session_id)
        return await self._own(
            lambda: _create(
                self._dir,
                chosen,
                lambda new_id: make_header(new_id, now=now, parent_id=None, seed_length=0),
                [],
                [],
            )
        )

    async def open(self, session_id: str) -> JsonlSessionHandle:
        checked = require_session_id(session_id)
        return await self._own(lambda: _open(self.path_of(checked), _source(checked)))

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
            parsed = _read(self.path_of(parent), _source(parent), sync=True)
            count = seed_length(at, len(parsed.entries), parent)
            return _create(
                self._dir,
                chosen,
                lambda new_id: make_header(new_id, now=now, parent_id=parent, seed_length=count),
                parsed.lines[:count],
                parsed.entries[:count],
            )

        return await self._own(job)

    async def read(self, session_id: str) -> SessionSnapshot:
        checked = require_session_id(session_id)
        parsed = await asyncio.to_thread(
            lambda: _read(self.path_of(checked), _source(checked), sync=False)
        )
        return SessionSnapshot(parsed.header, tuple(parsed.entries))

    async def list(self) -> tuple[SessionHeader, ...]:
        return listed(await self.scan())

    async def scan(self) -> SessionListing:
        return await asyncio.to_thread(lambda: _scan(self))

    async def _own(self, job: Callable[[], _Opened]) -> JsonlSessionHandle:
        worker = Worker("session-jsonl")
        opened = await worker.start(job, undo=lambda opened: os.close(opened.fd))
        return JsonlSessionHandle(
            header=opened.header,
            entries=opened.entries,
            fd=opened.fd,
            path=self.path_of(opened.header.id),
            worker=worker,
        )


def _source(session_id: str) -> Source:
    return Source(session_id=session_id, name=f"{session_id}{SUFFIX}", storage="file", lines=True)


# Blocking work, run on a worker thread.


def _open(path: Path, source: Source) -> _Opened:
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    except FileNotFoundError:
        raise session_not_found(source.session_id, str(path.parent)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise session_busy(source.session_id) from None
        parsed = _parse(_read_all(fd), source)
        if parsed.torn:
            try:
                os.ftruncate(fd, parsed.complete)
                os.fsync(fd)
            except OSError as error:
                raise persistence_uncertain(
                    source.session_id, f"cutting the torn last line failed: {error}"
                ) from error
    except BaseException:
        os.close(fd)
        raise
    return _Opened(fd, parsed.header, parsed.entries)


def _read(path: Path, source: Source, *, sync: bool) -> _Parsed:
    """The file's complete lines, ignoring (not cutting) a torn tail; no lock is taken.

    With ``sync``, the file is fsync'd first, so everything read is durable even when its owner
    has not called a barrier yet.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise session_not_found(source.session_id, str(path.parent)) from None
    try:
        if sync:
            try:
                os.fsync(fd)
            except OSError as error:
                raise persistence_uncertain(
                    source.session_id, f"making the session durable before the fork failed: {error}"
                ) from error
        return _parse(_read_all(fd), source)
    finally:
        os.close(fd)


def _parse(data: bytes, source: Source) -> _Parsed:
    complete = data.rfind(b"\n") + 1
    lines = data[:complete].split(b"\n")[:-1]
    if not lines:
        raise source.corrupt(None, "the file has no complete header line")
    header = decode_header_line(lines[0], source)
    entries = [decode_entry_line(line, position, source) for position, line in enumerate(lines[1:])]
    check_seed_length(header, len(entries), source)
    return _Parsed(header, entries, lines[1:], complete, len(data) - complete)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, _READ_CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _create(
    data_dir: Path,
    chosen: SessionId | None,
    header_for: Callable[[SessionId], SessionHeader],
    lines: list[bytes],
    entries: list[LogEntry],
) -> _Opened:
    """Create and lock a new session file holding the header and ``lines``."""
    _ensure_directory(data_dir)
    body = b"".join(line + b"\n" for line in lines)
    while True:
        session_id = chosen or new_session_id()
        header = header_for(session_id)
        fd = _publish(data_dir, session_id, header_line(header) + body)
        if fd is not None:
            _fsync_directory(data_dir)
            return _Opened(fd, header, list(entries))
        if chosen is not None:
            raise session_exists(session_id, str(data_dir))


def _publish(data_dir: Path, session_id: SessionId, content: bytes) -> int | None:
    """Write ``content`` to a locked temporary file and link it into place.

    Returns the locked descriptor, or ``None`` when the session's name is taken already.
    """
    temporary = data_dir / f".{session_id}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
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
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
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
    headers: list[SessionHeader] = []
    problems: list[SessionCorrupt] = []
    for path in store.data_dir.iterdir():
        session_id = parse_session_id(path.name.removesuffix(SUFFIX))
        if session_id is None or not path.name.endswith(SUFFIX):
            continue
        source = _source(session_id)
        try:
            headers.append(_read_header(path, source))
        except FileNotFoundError:
            continue
        except SessionCorrupt as problem:
            problems.append(problem)
    return listing(headers, problems)


def _read_header(path: Path, source: Source) -> SessionHeader:
    with path.open("rb") as file:
        line = file.readline()
    if not line.endswith(b"\n"):
        raise source.corrupt(None, "the file has no complete header line")
    return decode_header_line(line[:-1], source)
