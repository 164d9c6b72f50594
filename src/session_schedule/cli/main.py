"""Entry point of the ``session-schedule`` command."""

from __future__ import annotations

import argparse

from session_schedule.cli import resolve, walkthrough

EXIT_OK = 0
EXIT_INPUT_REJECTED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="session-schedule",
        description="Durable, session-local reminders for LLM agents.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser(
        "walkthrough",
        help="show, in virtual time, what a model sends, what is stored and what comes back "
        "(the default)",
    )
    resolve_parser = commands.add_parser(
        "resolve",
        help="show the canonical UTC target of `at` inputs, or the error a model would get",
        description="Resolve `at` inputs exactly as schedule_create does. Each input is an "
        "RFC 3339 string with an offset, or the local form " + resolve.LOCAL_FORM_HELP + ".",
        epilog="example: session-schedule resolve '2026-12-01T09:00:00+09:00' "
        "'2027-03-14 02:30 America/New_York'",
    )
    resolve_parser.add_argument("inputs", nargs="+", metavar="AT")
    return parser


def main(argv: list[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    if arguments.command == "resolve":
        results = [resolve.resolve(text) for text in arguments.inputs]
        for _, line in results:
            print(line)
        return EXIT_OK if all(ok for ok, _ in results) else EXIT_INPUT_REJECTED
    walkthrough.run(print)
    return EXIT_OK
