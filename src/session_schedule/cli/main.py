"""Entry point of the ``session-schedule`` command."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from session_schedule.cli import chat, db, host, mcp, operator, resolve, serve, walkthrough
from session_schedule.cli.common import (
    DATA_DIR_VARIABLE,
    EXIT_OK,
    EXIT_REJECTED,
    exit_code_for,
    fail,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.time_input import parse_rfc3339
from session_schedule.runtime.clock import SystemClock
from session_schedule.session.errors import SessionError

EPILOG = f"""\
exit codes: 0 success; 1 an input was rejected; 2 usage error; 3 session not found;
4 session open elsewhere; 5 corrupt session log; 6 storage failure.
The data directory is --data-dir, else ${DATA_DIR_VARIABLE}, else
$XDG_DATA_HOME/session-schedule (~/.local/share/session-schedule)."""


DATA_DIR_HELP = "where sessions are stored (one JSONL file each)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="session-schedule",
        description="Durable, session-local reminders for LLM agents: a chat with reminders, "
        "and the tools to inspect its sessions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data-dir", type=Path, metavar="DIR", help=DATA_DIR_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chat.register(commands)
    operator.register(commands)
    serve.register(commands)
    host.register(commands)
    mcp.register(commands)
    walkthrough_parser = commands.add_parser(
        "walkthrough",
        help="show, in virtual time, what a model sends, what is stored and what comes back",
        description="A walkthrough of Schedule's core in virtual time; it stores nothing.",
        epilog="example: session-schedule walkthrough",
    )
    walkthrough_parser.set_defaults(handler=_walkthrough)
    resolve_parser = commands.add_parser(
        "resolve",
        help="resolve `at` and `daily_at` inputs to UTC, or show the error a model would get",
        description="Resolve `at` and `daily_at` inputs exactly as schedule_create does. Each "
        "input is an RFC 3339 string with an offset, the local form "
        + resolve.LOCAL_FORM_HELP
        + ", or "
        + resolve.DAILY_FORM_HELP
        + f" (its next {resolve.OCCURRENCES_SHOWN} occurrences, with their offsets).",
        epilog="example: session-schedule resolve '2026-12-01T09:00:00+09:00' "
        "'2027-03-14 02:30 America/New_York' 'daily 02:30 America/New_York'",
    )
    resolve_parser.add_argument("inputs", nargs="+", metavar="INPUT")
    resolve_parser.add_argument(
        "--after",
        metavar="TIME",
        help="list daily occurrences after this RFC 3339 time (default: now)",
    )
    resolve_parser.set_defaults(handler=_resolve)
    for command in commands.choices.values():
        # Also accepted after the command name; SUPPRESS keeps a value given before it.
        command.add_argument(
            "--data-dir", type=Path, metavar="DIR", default=argparse.SUPPRESS, help=DATA_DIR_HELP
        )
    db.register(commands)  # after the loop: the database commands take no data directory
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    given = sys.argv[1:] if argv is None else argv
    arguments = parser.parse_args(given)
    if arguments.command is None:
        arguments = parser.parse_args([*given, "chat"])
    try:
        code: int = arguments.handler(arguments)
    except BrokenPipeError:
        # The reader went away (``session-schedule show … | head``): stop quietly, and keep
        # Python from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (SessionError, ScheduleError, OSError) as error:
        return fail(str(error), exit_code_for(error))
    except KeyboardInterrupt:
        return EXIT_OK
    return code


def _walkthrough(_arguments: argparse.Namespace) -> int:
    walkthrough.run(print)
    return EXIT_OK


def _resolve(arguments: argparse.Namespace) -> int:
    after = SystemClock().now() if arguments.after is None else parse_rfc3339(arguments.after)
    results = [resolve.resolve(text, after=after) for text in arguments.inputs]
    for _, line in results:
        print(line)
    return EXIT_OK if all(ok for ok, _ in results) else EXIT_REJECTED
