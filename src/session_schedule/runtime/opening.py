"""Opening a session another process may hold: ask it to hand the session over, say so once,
and wait a bounded time (see :mod:`session_schedule.session.handover`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from session_schedule.runtime.clock import Clock
from session_schedule.session.errors import SessionBusy, lease_seconds_left
from session_schedule.session.handover import HandoverStore
from session_schedule.session.ids import SessionId, require_session_id
from session_schedule.session.port import SessionHandle, SessionStore

RETRY_SECONDS: Final = 0.5
"""A front end waiting for a session tries to open it again this often (renewing its request)."""
WAIT_SECONDS: Final = 60.0
"""How long a front end waits for a session held elsewhere before giving up (``SessionBusy``)."""


async def open_when_free(
    store: SessionStore,
    session_id: str,
    *,
    clock: Clock,
    wait_seconds: float = WAIT_SECONDS,
    note: Callable[[str], None],
) -> SessionHandle:
    """Open ``session_id``; while another process holds it, ask it to hand the session over
    (when ``store`` is a :class:`HandoverStore`), say so once through ``note`` and try again every
    :data:`RETRY_SECONDS`, for at most ``wait_seconds``.

    Raises ``SessionBusy`` when the session is still held after ``wait_seconds``, and what
    ``SessionStore.open`` raises otherwise.
    """
    deadline = clock.monotonic() + wait_seconds
    handover = store if isinstance(store, HandoverStore) else None
    requested: SessionId | None = None
    said = False
    try:
        while True:
            try:
                return await store.open(session_id)
            except SessionBusy as busy:
                if clock.monotonic() >= deadline:
                    raise
                if handover is not None:
                    requested = require_session_id(session_id)
                    await handover.request_handover(requested)
                if not said:
                    asked = handover is not None
                    note(_waiting_line(session_id, wait_seconds, asked=asked, busy=busy))
                    said = True
                await clock.sleep(RETRY_SECONDS)
    finally:
        if handover is not None and requested is not None:
            await handover.withdraw_handover(requested)


def _lease_clause(busy: SessionBusy) -> str:
    """What a holder's lease means for the wait: nothing where a holder that is gone lets the
    session go at once."""
    left = lease_seconds_left(busy)
    if left is None:
        return ""
    return f"; if the process holding it is gone, its lease lapses within {left} s"


def _waiting_line(session_id: str, wait_seconds: float, *, asked: bool, busy: SessionBusy) -> str:
    lease = _lease_clause(busy)
    waiting = f"waiting up to {wait_seconds:g} s (Ctrl-C gives up)"
    if asked:
        return (
            f"session {session_id} is open in another process — asked it to hand the session "
            f"over (a host does within 2 s once its reminder is answered){lease}; {waiting}"
        )
    return (
        f"session {session_id} is open in another process — a host delivering a reminder lets it "
        f"go once the reminder is answered{lease}; {waiting}"
    )
