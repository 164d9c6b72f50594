"""Errors of the session layer, and the one place their messages are worded.

Every error a store or handle raises on purpose is a :class:`SessionError`; each names the session
it concerns (``session_id``) and carries one lower-case sentence that says what to do next
(``message``). Damaged *schedule* entries are the exception: they surface as the core's
``ScheduleError("corrupt_schedule_log", ...)``, unchanged, so the tools layer reports them with
their stable code. Developer errors (an unregistered entry type, a payload that does not encode)
are ``ValueError`` and are not caught by anyone.
"""

from __future__ import annotations

import math
from typing import Final, Literal, final

from session_schedule.core.errors import ErrorCode, ScheduleError

Storage = Literal["file", "database"]
"""What a corruption message says was left untouched."""


class SessionError(Exception):
    """The root of the session layer's errors."""

    session_id: str
    """The session concerned (as given when the text was not a valid id; empty when the error
    concerns the whole store)."""
    message: str

    def __init__(self, session_id: str, message: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.message = message


@final
class SessionNotFound(SessionError):  # noqa: N818 - names fixed by the design
    """No session of that id exists in the store, or the text is not of the id form."""


@final
class SessionExists(SessionError):  # noqa: N818
    """``create`` was asked for an id that is taken already."""


@final
class SessionBusy(SessionError):  # noqa: N818
    """The session is owned by another live handle, in this process or another one."""

    lease_left: float | None
    """For a store whose ownership is a lease (PostgreSQL): the seconds until the holder's lease
    lapses unless renewed — a holder that is gone (killed) keeps the session until then.
    ``None`` where a holder that is gone releases the session at once (a file lock)."""

    def __init__(self, session_id: str, message: str, *, lease_left: float | None = None) -> None:
        super().__init__(session_id, message)
        self.lease_left = lease_left


@final
class SessionCorrupt(SessionError):  # noqa: N818
    """Stored bytes that are not a valid session (other than a torn last line, which is cut).

    The message locates the problem and says the storage was left untouched.
    """


@final
class SessionClosed(SessionError):  # noqa: N818
    """The handle was closed (or lost in a simulated crash); open the session again."""


@final
class PersistenceUncertain(SessionError):  # noqa: N818
    """A write or a barrier failed: whether the entries are durable is unknown.

    The handle is poisoned: every later append, barrier and read on it raises this error again,
    until the session is reopened from storage. ``code`` is the stable tool error code.
    """

    code: Final[ErrorCode] = "persistence_uncertain"

    def as_schedule_error(self) -> ScheduleError:
        """The same failure as the tools layer reports it."""
        return ScheduleError(self.code, self.message)


def not_a_session_id(text: str) -> SessionNotFound:
    return SessionNotFound(
        text,
        f"{text!r} is not a session id: expected s_ followed by 12 lower-case letters or digits",
    )


def session_not_found(session_id: str, place: str) -> SessionNotFound:
    return SessionNotFound(
        session_id, f"session {session_id} does not exist in {place}; check the session id"
    )


def session_exists(session_id: str, place: str) -> SessionExists:
    return SessionExists(
        session_id, f"session {session_id} exists already in {place}; choose another id"
    )


def session_busy(session_id: str, *, lease_left: float | None = None) -> SessionBusy:
    """``lease_left``: see :attr:`SessionBusy.lease_left`."""
    return SessionBusy(
        session_id,
        f"session {session_id} is open in another process or handle; "
        "close it there before opening it here",
        lease_left=lease_left,
    )


def lease_seconds_left(busy: SessionBusy) -> int | None:
    """The whole seconds, at least 1, within which the lease of ``busy``'s holder lapses if the
    holder is gone; ``None`` when the store has no lease."""
    if busy.lease_left is None:
        return None
    return max(1, math.ceil(busy.lease_left))


def session_corrupt(session_id: str, where: str, problem: str, storage: Storage) -> SessionCorrupt:
    return SessionCorrupt(
        session_id,
        f"session {session_id} is corrupt {where}: {problem}; "
        f"the {storage} was left untouched for inspection",
    )


def not_a_regular_file(session_id: str, name: str, kind: str) -> SessionCorrupt:
    return SessionCorrupt(
        session_id,
        f"session {session_id} is corrupt: {name} is {kind}, not a regular file; nothing was "
        "read from or written to it — remove it, or put the session's file back in its place",
    )


def database_damaged(session_id: str, place: str, problem: str) -> SessionCorrupt:
    """SQLite found the database file damaged (or not a database at all) while reading it:
    the whole store is concerned, not one session's rows, and only SQLite's own tools repair
    it."""
    concerning = f"session {session_id} cannot be read: " if session_id else ""
    return SessionCorrupt(
        session_id,
        f"{concerning}the SQLite database {place} is damaged ({problem}); it was left untouched "
        f"for inspection — recover what it holds with `sqlite3 {place} .recover`, or restore it "
        "from a backup",
    )


def database_unusable(session_id: str, place: str, problem: str) -> SessionError:
    """The database could not be used for a reason other than damage (an I/O error, a lock
    held too long, a file that cannot be opened): a storage failure, worth trying again."""
    concerning = f"session {session_id} is out of reach: " if session_id else ""
    return SessionError(
        session_id,
        f"{concerning}the SQLite database {place} cannot be used ({problem}); check the file, "
        "its directory and the disk, then try again",
    )


def unreadable_session_file(session_id: str, name: str, reason: str) -> SessionError:
    """A session's file that could not be read at all (its permissions, an I/O error): a storage
    failure, not damage to what it holds."""
    return SessionError(
        session_id,
        f"session {session_id} cannot be read: {name} could not be opened or read ({reason}); "
        "check the file's owner and permissions, and the disk",
    )


def session_closed(session_id: str) -> SessionClosed:
    return SessionClosed(session_id, f"session {session_id} is closed; open it again to use it")


def persistence_uncertain(session_id: str, reason: str) -> PersistenceUncertain:
    return PersistenceUncertain(
        session_id,
        f"session {session_id} cannot confirm that its entries are durable ({reason}); "
        "reopen the session from storage",
    )


def ownership_lost(session_id: str, reason: str) -> PersistenceUncertain:
    """A handle whose ownership ended behind its back (a database store's lease)."""
    return PersistenceUncertain(
        session_id,
        f"session {session_id} is no longer owned by this handle ({reason}); "
        "it can write nothing more; reopen the session from storage",
    )
