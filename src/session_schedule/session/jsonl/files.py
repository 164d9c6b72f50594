"""The JSONL store's files: session files opened safely, written whole, read whole.

Every byte the store moves goes through here, under three rules:

1. **Only regular files.** A session file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and
   ``fstat``'d before a byte moves: a symbolic link, FIFO, device, socket or directory under a
   session's name is ``SessionCorrupt`` (never followed, and never a hang on a FIFO).
2. **One write per line.** :func:`write_all` issues a single ``os.write`` of the whole line,
   newline included (on an ``O_APPEND`` descriptor, where it lands whole); a short write is an
   ``OSError``, which poisons the handle that made it.
3. **A new name is durable with its directory.** A data directory the store creates is private
   (``0700``, parents too) and its parent is fsync'd, as the directory is once a session's file
   is linked into it.

A session file is ``<data_dir>/<session id>.jsonl`` (:data:`SUFFIX`); the :class:`Source` of a
session names it in every error a read reports.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from session_schedule.session.codec import Source
from session_schedule.session.errors import not_a_regular_file, session_not_found
from session_schedule.session.private import (
    OPEN_FLAGS,
    irregular_kind,
    private_directory,
    refused_kind,
    sync_directory,
)

SUFFIX: Final = ".jsonl"
_READ_CHUNK: Final = 1 << 20


def source_of(session_id: str) -> Source:
    return Source(session_id=session_id, name=f"{session_id}{SUFFIX}", storage="file", lines=True)


def open_session_file(path: Path, flags: int, source: Source) -> int:
    """A descriptor of the session's file, which must be a regular file.

    A symbolic link is not followed (``O_NOFOLLOW``) and a FIFO does not block the open
    (``O_NONBLOCK``, cleared again once ``fstat`` has shown a regular file); anything but a
    regular file is refused with ``SessionCorrupt`` before a byte is read or written.
    """
    try:
        fd = os.open(path, flags | OPEN_FLAGS)
    except FileNotFoundError:
        raise session_not_found(source.session_id, str(path.parent)) from None
    except OSError as error:
        refused = refused_kind(error)
        if refused is None:
            raise
        raise not_a_regular_file(source.session_id, source.name, refused) from None
    try:
        kind = irregular_kind(os.fstat(fd).st_mode)
        if kind is None:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    if kind is not None:
        os.close(fd)
        raise not_a_regular_file(source.session_id, source.name, kind)
    return fd


def reopener(path: Path, fd: int) -> Callable[[], int]:
    """What opens an owner's session file again, after the descriptor cache closed ``fd`` (see
    :mod:`session_schedule.session.descriptors`): ``O_RDWR | O_APPEND``, never through a
    symbolic link, only of the file ``fd`` has open now, and with the ``flock`` an owner holds
    on it while it has a descriptor of it.

    The opener raises ``OSError`` when the name no longer leads to that regular file, or when
    another descriptor holds the file's ``flock`` (a process that does not take the store's
    owner lock).
    """
    status = os.fstat(fd)
    identity = (status.st_dev, status.st_ino)

    def reopen() -> int:
        again = os.open(path, os.O_RDWR | os.O_APPEND | OPEN_FLAGS)
        try:
            _check_same(again, identity, path)
        except BaseException:
            os.close(again)
            raise
        return again

    return reopen


def _check_same(fd: int, identity: tuple[int, int], path: Path) -> None:
    status = os.fstat(fd)
    if irregular_kind(status.st_mode) is not None or (status.st_dev, status.st_ino) != identity:
        raise OSError(
            errno.ESTALE, "the session file was replaced while its descriptor was closed", str(path)
        )
    os.set_blocking(fd, True)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise OSError(
            errno.EWOULDBLOCK, "another descriptor holds the session file's lock", str(path)
        ) from None


def write_all(fd: int, line: bytes) -> None:
    """One ``write`` of a whole line; a short write is an ``OSError``."""
    written = os.write(fd, line)
    if written != len(line):
        raise OSError(errno.EIO, f"short write ({written} of {len(line)} bytes)")


def read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, _READ_CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def pread_all(fd: int, size: int, offset: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 30), offset)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def ensure_directory(data_dir: Path) -> None:
    if data_dir.is_dir():
        return
    private_directory(data_dir)  # parents too: 0700 whatever the umask
    sync_directory(data_dir.parent)
