"""Creating a JSONL session: a new one, or a fork of another.

**Creation is atomic.** The header — and a fork's copied entries — go to a hidden temporary file
(``.<session id>.<random>.tmp``, mode ``0600``), which is locked, fsync'd and then hard-linked to
the session's name (``link`` never replaces an existing session) before the directory is
fsync'd. A crash leaves either no session or a complete one (and perhaps a stray ``.tmp`` file,
which nothing reads). The new session is owned (its byte of the store's lock file, see
:mod:`session_schedule.session.owners`) and its file locked before it has its public name, so
no other owner can take it first.

A fork copies its parent's format-2 lines verbatim (their chain starts at the seed, so a copied
entry keeps its checksum); a format-1 parent's entries are written anew in format 2.
"""

from __future__ import annotations

import fcntl
import functools
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from session_schedule.session.codec import encode_payload
from session_schedule.session.descriptors import CachedDescriptor, DescriptorCache
from session_schedule.session.errors import session_busy, session_exists
from session_schedule.session.ids import SessionId, new_session_id
from session_schedule.session.jsonl.files import SUFFIX, ensure_directory, reopener
from session_schedule.session.jsonl.opening import Opened
from session_schedule.session.lines import (
    CHAIN_SEED,
    Checksums,
    Scan,
    entry_line,
    header_line_for,
    new_checksums,
)
from session_schedule.session.owners import OwnerLocks
from session_schedule.session.port import LogEntry, SessionHeader
from session_schedule.session.private import sync_directory


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


def create_session(
    data_dir: Path,
    chosen: SessionId | None,
    header_for: Callable[[SessionId], SessionHeader],
    seed: Seed,
    owners: OwnerLocks,
    cache: DescriptorCache,
) -> Opened:
    """Create and own a new session file holding the header and the seed's lines."""
    ensure_directory(data_dir)
    body = b"".join(line + b"\n" for line in seed.lines)
    while True:
        session_id = chosen or new_session_id()
        # Owned before its file has its name: no other owner can take it first.
        if not owners.acquire(session_id):
            if chosen is not None:
                raise session_busy(session_id)
            continue
        try:
            header = header_for(session_id)
            line = header_line_for(header)
            fd = _publish(data_dir, session_id, line + body)
            if fd is not None:
                sync_directory(data_dir)
        except BaseException:
            owners.release(session_id)
            raise
        if fd is None:
            owners.release(session_id)
            if chosen is not None:
                raise session_exists(session_id, str(data_dir))
            continue
        path = data_dir / f"{session_id}{SUFFIX}"
        return Opened(
            CachedDescriptor(
                cache,
                fd,
                reopener(path, fd),
                released=functools.partial(owners.release, session_id),
            ),
            header,
            list(seed.entries),
            seed.checksums,
            1 + len(seed.lines),
            len(line),
        )


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
