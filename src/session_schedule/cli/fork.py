"""``session-schedule fork SESSION``: fork a session and print only the new session's id.

The new session keeps the parent's history — all of it, or its first ``--at N`` entries — but
none of its active reminders; the parent may be open elsewhere and is not modified. A cut between
a tool call and its results is refused, naming the nearest entries to cut at.
"""

from __future__ import annotations

import argparse
from typing import Final

from session_schedule.cli import reading
from session_schedule.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    add_command,
    add_session_argument,
    fail,
)
from session_schedule.cli.reading import with_store
from session_schedule.core.instants import Instant
from session_schedule.harness.transcript import check_fork_cut
from session_schedule.session import SessionId
from session_schedule.session.port import SessionStore

DESCRIPTION: Final = (
    "Create a new session that keeps the session's history — all of it, or its "
    "first N entries — but none of its active reminders. Only the new id is printed, so a "
    "script can capture it. The parent may be open elsewhere; it is not modified. A cut "
    "between a tool call and its results is refused, naming the nearest entries to cut at."
)
EXAMPLE: Final = "child=$(session-schedule fork s_7k2m4q9x3v5b --at 12)"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fork`` to the program's subcommands."""
    parser = add_command(commands, "fork", run, description=DESCRIPTION, example=EXAMPLE)
    add_session_argument(parser)
    parser.add_argument(
        "--at",
        type=_non_negative,
        metavar="N",
        help="copy only the first N entries (default: every entry)",
    )


async def fork_session(store: SessionStore, parent: str, at: int | None, now: Instant) -> SessionId:
    """Fork ``parent`` (its first ``at`` entries, or all) and return the new id, closed again.

    Raises ``ValueError`` — a ``ForkCutError`` when the cut would part a tool call from its
    results, or when ``at`` is beyond the parent's entries.
    """
    check_fork_cut(parent, (await store.read(parent)).entries, at)
    async with await store.fork(parent, at=at, now=now) as handle:
        return handle.id


def run(arguments: argparse.Namespace) -> int:
    try:
        child = with_store(
            arguments,
            lambda store: fork_session(store, arguments.session, arguments.at, reading.clock.now()),
        )
    except ValueError as error:  # --at beyond the parent's entries, or through a tool call
        return fail(str(error), EXIT_USAGE)
    print(child)
    return EXIT_OK


def _non_negative(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number (0 or more), got {text!r}")
    return int(text)
