"""How the operator commands read sessions: without disturbing them, at the clock's "now".

``sessions``, ``show``, ``list``, ``timeline`` and ``check`` only *read*: they take a snapshot
with ``store.read`` — no ownership, no lock, no byte changed, a torn last line ignored rather
than cut — so they work while a chat has the session open. ``fork`` creates a new session (the
parent is not modified).

"Now" is read from this module's :data:`clock` at the moment a command needs it, so a test puts a
fake clock there for every command at once. Storage errors are left to escape: ``main`` turns
them into one line on stderr and the documented exit code (3 for a missing session, 5 for a
corrupt log).
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TypeVar

from session_schedule.cli.common import read_session, run_for_result, store_location
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.session import SessionSnapshot
from session_schedule.session.location import opened_store
from session_schedule.session.port import SessionStore, schedule_changes

_T = TypeVar("_T")

clock: Clock = SystemClock()
"""Where "now" comes from (a module attribute, so tests can put a fake clock here)."""


def fold_snapshot(snapshot: SessionSnapshot) -> ScheduleFold:
    """The schedule state of a snapshot: its changes folded as the live owner folds them.

    Raises ``ScheduleError("corrupt_schedule_log")`` naming the first change that breaks a rule.
    """
    header, entries = snapshot
    return fold(schedule_changes(entries), seed_length=header.seed_length, session=header.id)


def read_snapshot(arguments: argparse.Namespace) -> SessionSnapshot:
    """The command's session (``SESSION``) as its store (``--store``) holds it, not owned."""
    return read_session(arguments, arguments.session)


def with_store(arguments: argparse.Namespace, work: Callable[[SessionStore], Awaitable[_T]]) -> _T:
    """What ``work`` returns on the command's store (``--store``), closed afterwards."""
    location = store_location(arguments)

    async def run() -> _T:
        async with opened_store(location) as store:
            return await work(store)

    return run_for_result(run)
