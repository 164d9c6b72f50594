"""What every command shares: the data directory, exit codes, and one-line errors."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import textwrap
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from session_schedule.core.quiet import QuietHours
    from session_schedule.runtime.live import Settings
    from session_schedule.session.location import StoreLocation
    from session_schedule.session.port import SessionSnapshot

DATA_DIR_VARIABLE: Final = "SESSION_SCHEDULE_DATA_DIR"
STORE_VARIABLE: Final = "SESSION_SCHEDULE_STORE"
STORE_HELP: Final = (
    "where sessions are: jsonl:DIR, sqlite:PATH or postgresql://… (default: "
    f"${STORE_VARIABLE}, else jsonl: in the data directory)"
)
DSN_VARIABLE: Final = "SESSION_SCHEDULE_PG_DSN"
DEFAULT_SCHEMA: Final = "session_schedule"
"""The same as ``session_schedule.session.postgres_schema.DEFAULT_SCHEMA`` (not imported here:
that module imports psycopg)."""
SQLITE_FILE: Final = "sessions.db"
"""The database file ``--store sqlite`` names in the data directory."""

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

SESSION_HELP: Final = "a session id, such as s_7k2m4q9x3v5b (see `session-schedule sessions`)"


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
    chosen = getattr(arguments, "data_dir", None)
    return chosen if isinstance(chosen, Path) else default_data_dir()


def store_location(arguments: argparse.Namespace) -> StoreLocation:
    """Where the command's sessions are: ``--store``, else ``$SESSION_SCHEDULE_STORE``, else the
    data directory's JSONL files. ``jsonl`` and ``sqlite`` alone name the data directory's
    files. Raises ``ValueError`` (a usage error) for a value that is not a store URL."""
    # Imported here, not at the top: ``--help`` needs no part of the storage layer.
    from session_schedule.session.location import (  # noqa: PLC0415
        JsonlLocation,
        SqliteLocation,
        parse_store_url,
    )

    chosen = getattr(arguments, "store", None) or os.environ.get(STORE_VARIABLE) or "jsonl"
    if chosen == "jsonl":
        return JsonlLocation(directory=data_dir(arguments))
    if chosen == "sqlite":
        return SqliteLocation(path=data_dir(arguments) / SQLITE_FILE)
    try:
        return parse_store_url(chosen)
    except ValueError as error:
        raise StoreUsageError(str(error)) from None


def store_words(arguments: argparse.Namespace) -> str:
    """The options a printed command needs to name the same store, quoted for a shell and with
    an absolute path, so that the command works from any directory: `` --store URL``, or
    `` --data-dir DIR`` for the data directory given on the command line, or nothing."""
    from session_schedule.session.location import JsonlLocation, store_url  # noqa: PLC0415

    location = store_location(arguments)
    if location == JsonlLocation(directory=data_dir(arguments)):
        if getattr(arguments, "data_dir", None) is None:
            return ""
        return f" --data-dir {shlex.quote(str(location.directory.absolute()))}"
    return f" --store {shlex.quote(store_url(location))}"


def read_session(arguments: argparse.Namespace, session_id: str) -> SessionSnapshot:
    """What the command's store (``--store``) holds of ``session_id``, read without owning it.

    Raises what ``SessionStore.read`` raises (``SessionNotFound``, ``SessionCorrupt`` …)."""
    from session_schedule.session.location import opened_store  # noqa: PLC0415

    location = store_location(arguments)

    async def read() -> SessionSnapshot:
        async with opened_store(location) as store:
            return await store.read(session_id)

    return run_for_result(read)


_T = TypeVar("_T")


def run_for_result(work: Callable[[], Awaitable[_T]]) -> _T:
    """``asyncio.run(work())``, with the result handed back outside the main task.

    When ``asyncio.run`` restores the interrupt handler it asks ``signal.getsignal`` for the one
    it installed, a partial holding the main task; the standard library then formats the repr
    of that task in an error message it discards, and a finished task's repr holds its result's.
    For a snapshot of a million entries that costs seconds (twice per run, Python 3.11), so the
    main task returns nothing and the result travels in a list.
    """
    import asyncio  # noqa: PLC0415 - only a command that runs the loop needs it

    results: list[_T] = []

    async def run() -> None:
        results.append(await work())

    asyncio.run(run())
    return results[0]


class StoreUsageError(ValueError):
    """``--store`` or ``$SESSION_SCHEDULE_STORE`` is not a store URL (exit 2)."""


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

    if isinstance(error, StoreUsageError):
        return EXIT_USAGE
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


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written, but fitted to the terminal: a paragraph of prose
    (consecutive lines that start with neither a space nor ``example:``) with a line wider than
    the terminal is filled to its width; indented lines (tables, examples) and example lines are
    kept as they are, so that they can be pasted. No line is broken at a hyphen (``session-`` /
    ``schedule``)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines: list[str] = []
        prose: list[str] = []

        def fill() -> None:
            if any(len(line) > width for line in prose):
                lines.extend(_wrap(" ".join(prose), width, indent))
            else:
                lines.extend(indent + line for line in prose)
            prose.clear()

        for line in text.splitlines():
            if line and not line[0].isspace() and not line.startswith("example:"):
                prose.append(line)
                continue
            fill()
            lines.append(indent + line if line else "")
        fill()
        return "\n".join(lines)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return _wrap(" ".join(text.split()), width, "")

    def _format_usage(
        self,
        usage: str | None,
        actions: Iterable[argparse.Action],
        groups: Iterable[argparse._MutuallyExclusiveGroup],
        prefix: str | None,
    ) -> str:
        """argparse's usage, unless a line of it is wider than the terminal (argparse keeps
        each option, or group of options, whole after a long command name): then the command
        name alone on the first line and the options filled below it, indented less."""
        formatted = super()._format_usage(usage, actions, groups, prefix)
        lines = formatted.rstrip("\n").splitlines()
        if all(len(line) <= self._width for line in lines):
            return formatted
        shown = f"{prefix or 'usage: '}{self._prog}"
        if not lines[0].startswith(shown):
            return formatted  # a usage written by hand: as written
        parts = _usage_parts(" ".join([lines[0][len(shown) :], *lines[1:]]))
        indent = " " * len(prefix or "usage: ")
        filled = [shown]
        for part in parts:
            if len(filled[-1]) + 1 + len(part) <= self._width:
                filled[-1] += " " + part
            else:
                filled.append(indent + part)
        return "\n".join(filled) + "\n\n"


def _usage_parts(text: str) -> list[str]:
    """The words of a usage line, a bracketed group (``[--a A | --b B]``) kept as one."""
    parts: list[str] = []
    depth = 0
    current = ""
    for character in text.strip():
        if character == " " and depth == 0:
            if current:
                parts.append(current)
            current = ""
            continue
        if character in "[(":
            depth += 1
        elif character in "])":
            depth -= 1
        current += character
    if current:
        parts.append(current)
    return parts


def _wrap(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    )


def add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: Handler,
    *,
    description: str,
    example: str,
) -> argparse.ArgumentParser:
    """Add command ``name``, run by ``handler``, with its description and example; its one-line
    help is the one the program lists (``main.COMMANDS``)."""
    parser = commands.add_parser(
        name,
        description=description,
        epilog=f"example: {example}",
        formatter_class=HelpFormatter,
    )
    parser.set_defaults(handler=handler)
    return parser


def add_session_argument(
    parser: argparse.ArgumentParser,
    help: str = SESSION_HELP,  # noqa: A002 - argparse's name
    *,
    optional: bool = False,
) -> None:
    """Add the ``SESSION`` argument: a session id, required unless ``optional``."""
    if optional:
        parser.add_argument("session", nargs="?", metavar="SESSION", help=help)
    else:
        parser.add_argument("session", metavar="SESSION", help=help)


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--json``: print JSON instead of a table."""
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def add_schema_option(parser: argparse.ArgumentParser, *, metavar: str | None = None) -> None:
    """Add ``--schema``: the PostgreSQL schema holding the store's tables. Its default is
    ``None``, so that a URL's ``?schema=`` stands unless ``--schema`` is given."""
    parser.add_argument(
        "--schema",
        metavar=metavar,
        help=f"the PostgreSQL schema holding the tables (default: the URL's ?schema=, else "
        f"{DEFAULT_SCHEMA})",
    )


def non_negative_seconds(text: str) -> float:
    """An option's number of seconds, 0 or more (an argparse ``type``)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def at_least_one(text: str) -> int:
    """An option's whole number, 1 or more (an argparse ``type``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


DEFAULT_FOLLOWUP_LIMIT: Final = 6
"""The default of ``--followup-limit``: ``Settings.followup_limit``."""


def add_followup_limit(parser: argparse.ArgumentParser) -> None:
    """Add ``--followup-limit N``: the follow-up budget of the command's Schedules."""
    parser.add_argument(
        "--followup-limit",
        type=at_least_one,
        default=DEFAULT_FOLLOWUP_LIMIT,
        metavar="N",
        help="at most N reminder follow-up turns a minute per session; it also paces the "
        f"catch-up after downtime (default: {DEFAULT_FOLLOWUP_LIMIT})",
    )


def add_quotas(parser: argparse.ArgumentParser) -> None:
    """Add ``--followup-limit N``, ``--turns-per-day N`` and ``--quiet-hours 'START-END ZONE'``:
    the quotas of the command's Schedules (read them back with :func:`schedule_settings`)."""
    add_followup_limit(parser)
    parser.add_argument(
        "--turns-per-day",
        type=at_least_one,
        default=None,
        metavar="N",
        help="at most N reminder turns in any 24 hours per session; more wait (default: no "
        "such quota)",
    )
    parser.add_argument(
        "--quiet-hours",
        type=_quiet_hours,
        default=None,
        metavar="'START-END ZONE'",
        help="reminders due within these local hours, such as '22:00-07:00 Europe/Paris', "
        "wait until they end (default: none)",
    )


def schedule_settings(arguments: argparse.Namespace) -> Settings:
    """The Schedule settings the options of :func:`add_quotas` chose."""
    from session_schedule.runtime.live import Settings  # noqa: PLC0415 - keeps --help quick

    return Settings(
        followup_limit=arguments.followup_limit,
        max_reminder_turns_per_day=arguments.turns_per_day,
        quiet_hours=arguments.quiet_hours,
    )


def _quiet_hours(text: str) -> QuietHours:
    from session_schedule.core.quiet import parse_quiet_hours  # noqa: PLC0415

    try:
        return parse_quiet_hours(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
