"""Handing a session over: a front end that wants a session a host holds asks for it, and the
host closes it once idle.

Theory of operation
-------------------
A session has one owner at a time (its byte of a JSONL or SQLite store's owners' lock file, see
:mod:`session_schedule.session.owners`; a PostgreSQL lease). A
:class:`~session_schedule.host.ScheduleHost` holds a session only around its reminders' targets,
but a person who opens it meanwhile must not wait for the host's turn to end by luck.

- **The request.** A front end (chat, page, MCP server) refused with ``SessionBusy`` calls
  :meth:`HandoverStore.request_handover` and tries again every half second
  (``runtime.opening``), renewing the request each time. A request is live for
  :data:`REQUEST_SECONDS` after it was last renewed, so one left behind by a killed front end
  lapses by itself.
- **The hand-over.** A host asks :meth:`HandoverStore.handover_requests` about the sessions it
  holds every half second; a requested one is closed as soon as its agent is idle and no pass is
  delivering (a turn in flight finishes first, so nothing is cut off). While a request is live the
  host does not open the session again.
- **Taking it back.** Once it has the session, the front end withdraws its request
  (:meth:`HandoverStore.withdraw_handover`); the host's next attempt after that (``busy`` retries,
  every ``busy_retry_seconds``) opens the session once the front end has closed it.

Nothing here touches the log: a hand-over is only an owner closing and another opening, so every
crash at any moment is the crash of an ordinary owner — reminders are recovered from the log.

The stores keep requests where their locks are: a file ``<session>.handover`` beside the session
file (JSONL) or in the database's ``.locks`` directory (SQLite), a ``NOTIFY`` on the schema's
channel (PostgreSQL).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Final, Protocol, final, runtime_checkable

from session_schedule.session.ids import SessionId
from session_schedule.session.private import FILE_MODE, NotPrivateFile, irregular_kind

REQUEST_SECONDS: Final = 5.0
"""A request lapses this long after it was last renewed."""
REQUEST_SUFFIX: Final = ".handover"


@runtime_checkable
class HandoverStore(Protocol):
    """A store whose owners can be asked to let a session go."""

    async def request_handover(self, session_id: SessionId) -> None:
        """Ask whoever holds ``session_id`` to close it once idle (renews a live request)."""
        ...

    async def withdraw_handover(self, session_id: SessionId) -> None:
        """Withdraw the request for ``session_id`` (nothing happens when there is none)."""
        ...

    async def handover_requests(self, session_ids: Collection[SessionId]) -> frozenset[SessionId]:
        """Those of ``session_ids`` with a live request."""
        ...


@final
class RequestFiles:
    """Requests as files ``<session><REQUEST_SUFFIX>`` in ``directory``, live while their
    modification time is less than :data:`REQUEST_SECONDS` old. Blocking calls run on a thread."""

    __slots__ = ("_directory",)

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def path_of(self, session_id: SessionId) -> Path:
        return self._directory / f"{session_id}{REQUEST_SUFFIX}"

    async def request(self, session_id: SessionId) -> None:
        await asyncio.to_thread(self._touch, self.path_of(session_id))

    async def withdraw(self, session_id: SessionId) -> None:
        await asyncio.to_thread(_unlink, self.path_of(session_id))

    async def live(self, session_ids: Collection[SessionId]) -> frozenset[SessionId]:
        if not session_ids:
            return frozenset()
        return await asyncio.to_thread(self._live, tuple(session_ids))

    def _touch(self, path: Path) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(path, flags, FILE_MODE)
        except OSError as error:
            raise _refusal(path, error) from None
        try:
            os.utime(fd)
        finally:
            os.close(fd)

    def _live(self, session_ids: tuple[SessionId, ...]) -> frozenset[SessionId]:
        now = time.time()
        found: set[SessionId] = set()
        for session_id in session_ids:
            try:
                modified = os.lstat(self.path_of(session_id)).st_mtime
            except FileNotFoundError:
                continue
            if now - modified < REQUEST_SECONDS:
                found.add(session_id)
        return frozenset(found)


def _refusal(path: Path, error: OSError) -> OSError:
    """``error`` from opening the request file ``path``, saying what is there instead of a
    regular file when that is why (a FIFO with no reader fails with ``ENXIO``, a link with
    ``ELOOP``)."""
    try:
        kind = irregular_kind(os.lstat(path).st_mode)
    except OSError:
        return error
    if kind is None:
        return error
    return NotPrivateFile(error.errno or 0, f"it is {kind}, not a regular file", str(path))


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
