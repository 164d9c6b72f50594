"""Fault injection shared by the session tests: one-shot failures of real system calls."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import msgspec

from session_schedule.session import SessionHandle, SqliteSessionStore, user_message
from session_schedule.testing.session_contract import NOW

P = ParamSpec("P")
R = TypeVar("R")


def one_shot(
    real: Callable[P, R], error: OSError, *, when: Callable[P, bool] | None = None
) -> Callable[P, R]:
    """``real``, except that its first call (for which ``when`` holds) raises ``error``."""
    armed = [True]

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        if armed and (when is None or when(*args, **kwargs)):
            armed.clear()
            raise error
        return real(*args, **kwargs)

    return call


def take_next_position(store: SqliteSessionStore, handle: SessionHandle) -> None:
    """Commit a row at ``handle``'s next position behind its back: its next barrier must fail."""
    data = msgspec.json.encode(user_message("intruder", at=NOW)).decode()
    with contextlib.closing(sqlite3.connect(store.path)) as connection, connection:
        connection.execute(
            "INSERT INTO entries (session_id, position, type, data) VALUES (?, ?, 'message', ?)",
            (handle.id, len(handle.entries), data),
        )
