"""Private files beside the sessions: the rules every file a store or a front end keeps in a data
directory follows, as the session files do.

- **Only regular files.** A file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``'d
  before a byte moves: a symbolic link is not followed and a FIFO does not block; a symbolic
  link, FIFO, device, socket or directory is refused with :class:`NotPrivateFile`.
- **Bounded reads.** A read takes at most the limit its caller names: a larger file (or
  ``/dev/zero`` behind a name) is refused before it fills memory.
- **Owner only.** Files are created ``0600`` and directories ``0700``, whatever the umask.
- **Atomic replacement.** :func:`write_private` writes a hidden temporary file (``O_EXCL``,
  never through a link), fsyncs it, renames it over the name and fsyncs the directory.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Final, final

FILE_MODE: Final = 0o600
DIRECTORY_MODE: Final = 0o700
OPEN_FLAGS: Final = os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
"""What every open of a private file adds: no link followed, no FIFO waited on."""
_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


@final
class NotPrivateFile(OSError):  # noqa: N818 - an OSError, named for what was found
    """The path is not a regular file of at most the size asked for (``strerror`` says what it
    is instead)."""


def read_private(path: Path, *, limit: int) -> bytes | None:
    """The contents of the regular file ``path`` (``None`` when there is none).

    Raises :class:`NotPrivateFile` when ``path`` is a symbolic link, FIFO, device, socket or
    directory, or holds more than ``limit`` bytes; other ``OSError`` as the system raises them.
    """
    try:
        fd = os.open(path, os.O_RDONLY | OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise refusal(path, error) from None
    try:
        status = os.fstat(fd)
        check_regular(path, status.st_mode)
        if status.st_size > limit:
            raise NotPrivateFile(
                errno.EFBIG, f"it holds {status.st_size} bytes, more than {limit}", str(path)
            )
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(limit + 1 - size, 1 << 20) or 1):
            size += len(chunk)
            if size > limit:  # it grew while being read
                raise NotPrivateFile(errno.EFBIG, f"it holds more than {limit} bytes", str(path))
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def file_mode(path: Path) -> int | None:
    """The permission bits of the regular file ``path`` (``None`` when there is none); raises
    :class:`NotPrivateFile` when it is anything but a regular file."""
    try:
        status = path.lstat()
    except FileNotFoundError:
        return None
    check_regular(path, status.st_mode)
    return stat.S_IMODE(status.st_mode)


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with a ``0600`` file holding ``data``, durably: a temporary file beside
    it, fsync'd, renamed over it, then the directory fsync'd. A failure leaves ``path`` as it
    was (and no temporary file)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | OPEN_FLAGS, FILE_MODE)
    try:
        try:
            os.fchmod(fd, FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    sync_directory(path.parent)


def append_private(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` in one ``write``, creating it ``0600``; refused with
    :class:`NotPrivateFile` when ``path`` is anything but a regular file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | OPEN_FLAGS, FILE_MODE)
    except OSError as error:
        raise refusal(path, error) from None
    try:
        check_regular(path, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(errno.EIO, f"short write ({written} of {len(data)} bytes)", str(path))
    finally:
        os.close(fd)


def private_directory(path: Path) -> None:
    """Make ``path`` a directory, creating it and any missing parent ``0700`` whatever the
    umask (an existing directory is left as it is)."""
    missing: list[Path] = []
    at = path
    while not at.exists() and at != at.parent:
        missing.append(at)
        at = at.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIRECTORY_MODE)
        except FileExistsError:
            continue
        directory.chmod(DIRECTORY_MODE)
    if not path.is_dir():
        raise NotPrivateFile(errno.ENOTDIR, "it is not a directory", str(path))


def sync_directory(path: Path) -> None:
    """fsync the directory ``path`` (so a rename or a new name in it is durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def irregular_kind(mode: int) -> str | None:
    """What a file of ``mode`` is instead of a regular file (``None``: it is one)."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def refused_kind(error: OSError) -> str | None:
    """What an open with :data:`OPEN_FLAGS` that failed with ``error`` found instead of a regular
    file (``None``: it failed for another reason)."""
    return {
        errno.ELOOP: "a symbolic link",
        errno.EISDIR: "a directory",
        errno.ENXIO: "a socket or a device without a driver",
    }.get(error.errno or 0)


def check_regular(path: Path, mode: int) -> None:
    kind = irregular_kind(mode)
    if kind is not None:
        raise NotPrivateFile(errno.EINVAL, f"it is {kind}, not a regular file", str(path))


def refusal(path: Path, error: OSError) -> OSError:
    kind = refused_kind(error)
    if kind is None:
        return error
    return NotPrivateFile(
        error.errno or errno.EINVAL, f"it is {kind}, not a regular file", str(path)
    )
