"""What every command shares: the data directory, exit codes, and one-line errors."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

DATA_DIR_VARIABLE: Final = "SESSION_SCHEDULE_DATA_DIR"

EXIT_OK: Final = 0
EXIT_REJECTED: Final = 1
"""An input was rejected (``resolve``), or a command found what it reports on wanting."""
EXIT_USAGE: Final = 2
EXIT_NOT_FOUND: Final = 3
EXIT_BUSY: Final = 4
EXIT_CORRUPT: Final = 5
EXIT_STORAGE: Final = 6
"""Storage failed: a write or a flush did not complete, or the data directory is unusable."""
EXIT_INTERRUPTED: Final = 130
"""Interrupted by Ctrl-C (SIGINT), as a shell reports it: 128 + the signal's number."""

Handler = Callable[[argparse.Namespace], int]


def default_data_dir() -> Path:
    """``$SESSION_SCHEDULE_DATA_DIR``, else ``$XDG_DATA_HOME/session-schedule``, else
    ``~/.local/share/session-schedule``."""
    configured = os.environ.get(DATA_DIR_VARIABLE)
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "session-schedule"


def data_dir(arguments: argparse.Namespace) -> Path:
    chosen = arguments.data_dir
    return chosen if isinstance(chosen, Path) else default_data_dir()


def fail(message: str, code: int) -> int:
    """Print ``message`` as one line on stderr and return ``code``."""
    print(f"session-schedule: {message}", file=sys.stderr)
    return code


def exit_code_for(error: Exception) -> int:
    """The documented exit code of an error a command lets escape; re-raises any other."""
    # Imported here, not at the top: starting the program (``--help``) needs no storage layer.
    from session_schedule.core.errors import ScheduleError  # noqa: PLC0415
    from session_schedule.session.errors import (  # noqa: PLC0415
        PersistenceUncertain,
        SessionBusy,
        SessionCorrupt,
        SessionError,
        SessionExists,
        SessionNotFound,
    )

    if isinstance(error, SessionNotFound):
        return EXIT_NOT_FOUND
    if isinstance(error, SessionBusy):
        return EXIT_BUSY
    if isinstance(error, SessionCorrupt):
        return EXIT_CORRUPT
    if isinstance(error, ScheduleError):
        return EXIT_CORRUPT if error.code == "corrupt_schedule_log" else EXIT_STORAGE
    if isinstance(error, PersistenceUncertain | SessionExists | SessionError | OSError):
        return EXIT_STORAGE
    raise error


DEFAULT_FOLLOWUP_LIMIT: Final = 6
"""The default of ``--followup-limit``: ``Settings.followup_limit``."""


def add_followup_limit(parser: argparse.ArgumentParser) -> None:
    """Add ``--followup-limit N``: the follow-up budget of the command's Schedules."""
    parser.add_argument(
        "--followup-limit",
        type=_at_least_one,
        default=DEFAULT_FOLLOWUP_LIMIT,
        metavar="N",
        help="at most N reminder follow-up turns a minute per session; it also paces the "
        f"catch-up after downtime (default: {DEFAULT_FOLLOWUP_LIMIT})",
    )


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value
