"""Who owns which session: one lock file per store, a byte of it per session.

A session has one owner at a time. Holding that ownership must not cost a descriptor per
session (a process keeps ten thousand sessions open under a limit of 1,024 descriptors), and it
must outlive the session's own descriptor, which the store may close while the session is idle
(:mod:`.descriptors`). The rules:

1. **A byte per session, locked.** A store keeps one lock file (JSONL: ``.owners`` in the data
   directory; SQLite: ``owners`` in the database's ``.locks`` directory). A session's owner holds
   an open-file-description lock (``F_OFD_SETLK``, Linux) for writing on one byte of it, at an
   offset derived from the session id (:func:`lock_offset`: 62 bits of a BLAKE2b digest). The
   kernel drops the lock when its owner dies; a SIGKILLed process leaves nothing stale.
2. **One descriptor per lock file per process.** Every owner in the process shares it; it is
   closed when the last ownership it carries is released (closing it drops every lock it holds).
3. **Exclusive within the process too.** Locks held through one open file description do not
   conflict with each other, so the process also keeps the set of the sessions it owns per lock
   file: a second owner in the same process is refused as another process's is.
4. **A shared byte refuses, never shares.** Two sessions whose ids hash to the same byte (odds
   about n² / 2⁶³ for n live sessions) cannot be owned at once: the second is refused as busy
   and may try again later. Exclusivity is never lost to a collision.

Lock files follow :mod:`.private`'s rules: created ``0600``, never through a symbolic link, and
anything but a regular file is refused.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import struct
import threading
from pathlib import Path
from typing import Final, final

from session_schedule.session.private import (
    FILE_MODE,
    OPEN_FLAGS,
    NotPrivateFile,
    irregular_kind,
    refused_kind,
)

_OFFSET_BITS: Final = 62
_F_OFD_SETLK: Final[int] = getattr(fcntl, "F_OFD_SETLK", 37)
"""Linux's number for ``F_OFD_SETLK``, in case this Python does not name it."""


def lock_offset(session_id: str) -> int:
    """The byte of a lock file that stands for ``session_id`` (the same in every process)."""
    digest = hashlib.blake2b(session_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - _OFFSET_BITS)


def _range_lock(fd: int, kind: int, offset: int) -> None:
    """``F_OFD_SETLK`` of one byte at ``offset``: ``kind`` is ``F_WRLCK`` or ``F_UNLCK``.

    Raises ``BlockingIOError`` (or ``PermissionError``) when another description holds it.
    """
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for an OFD lock), padding.
    request = struct.pack("hhqqi4x", kind, os.SEEK_SET, offset, 1, 0)
    fcntl.fcntl(fd, _F_OFD_SETLK, request)


@final
class _LockFile:
    __slots__ = ("fd", "owned")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.owned: set[str] = set()


_guard: Final = threading.Lock()
_files: Final[dict[tuple[int, int], _LockFile]] = {}
"""The lock files this process holds a descriptor of, by ``(st_dev, st_ino)``."""


@final
class OwnerLocks:
    """The owners of the sessions of one store, recorded in the lock file at ``path``."""

    __slots__ = ("_path",)

    def __init__(self, path: Path) -> None:
        self._path = path

    @property
    def path(self) -> Path:
        return self._path

    def acquire(self, session_id: str) -> bool:
        """Own ``session_id``: ``False`` when another owner (of this process or another) holds
        it. The lock file's directory must exist. Raises ``OSError`` when the lock file cannot
        be opened or locked (``NotPrivateFile`` when it is not a regular file)."""
        offset = lock_offset(session_id)
        with _guard:
            record = self._open()
            if session_id in record.owned:
                return False
            try:
                _range_lock(record.fd, fcntl.F_WRLCK, offset)
            except OSError as error:
                if not record.owned:
                    self._forget(record)
                if error.errno in (errno.EAGAIN, errno.EACCES):
                    return False
                raise
            record.owned.add(session_id)
            return True

    def release(self, session_id: str) -> None:
        """Give up ``session_id`` (nothing happens when this process does not own it)."""
        with _guard:
            for record in _files.values():
                if session_id in record.owned and self._holds(record):
                    record.owned.discard(session_id)
                    if record.owned:
                        # Unlocking cannot fail for a byte this description holds; should it,
                        # the lock lapses with the descriptor once the last owner is gone.
                        with contextlib.suppress(OSError):
                            _range_lock(record.fd, fcntl.F_UNLCK, lock_offset(session_id))
                    else:
                        self._forget(record)
                    return

    def _holds(self, record: _LockFile) -> bool:
        try:
            status = self._path.lstat()
        except OSError:
            # The lock file was removed meanwhile: any record owning the id is ours to release.
            return True
        return _files.get((status.st_dev, status.st_ino)) is record

    def _open(self) -> _LockFile:
        """This process's record of the lock file, opening (and creating) it when needed."""
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | OPEN_FLAGS, FILE_MODE)
        except OSError as error:
            kind = refused_kind(error)
            if kind is not None:
                raise NotPrivateFile(
                    error.errno or errno.EINVAL,
                    f"the owners' lock file is {kind}, not a regular file",
                    str(self._path),
                ) from None
            raise
        try:
            status = os.fstat(fd)
            _check_regular(self._path, status.st_mode)
            key = (status.st_dev, status.st_ino)
            record = _files.get(key)
            if record is not None:
                os.close(fd)
                return record
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        record = _files[key] = _LockFile(fd)
        return record

    def _forget(self, record: _LockFile) -> None:
        for key, held in list(_files.items()):
            if held is record:
                del _files[key]
        os.close(record.fd)


def _check_regular(path: Path, mode: int) -> None:
    kind = irregular_kind(mode)
    if kind is not None:
        raise NotPrivateFile(
            errno.EINVAL, f"the owners' lock file is {kind}, not a regular file", str(path)
        )


def lock_files_held() -> int:
    """How many lock-file descriptors this process holds (one per store with an owner)."""
    with _guard:
        return len(_files)
