"""Entry point of the ``session-schedule`` command.

The program starts like a native tool: the parser lists every command by name, but a command's
arguments are registered — and its module imported — only once the command line names it. So
``--help`` imports no command at all, ``list`` imports its own module (``cli.listing``) and never
the web server or a model SDK, and only ``serve`` loads the web overlay.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol, cast, final

from session_schedule import __version__
from session_schedule.cli.common import (
    DATA_DIR_VARIABLE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    STORE_HELP,
    STORE_VARIABLE,
    HelpFormatter,
    exit_code_for,
    fail,
)
from session_schedule.extras import MissingExtraError

if TYPE_CHECKING:
    _SubParsersAction = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at run time
    _SubParsersAction = argparse._SubParsersAction

EPILOG = f"""\
exit codes: 0 success; 1 an input was rejected; 2 usage error; 3 session not found;
4 session open elsewhere; 5 corrupt session log; 6 storage failure; 130 interrupted.
The data directory is --data-dir, else ${DATA_DIR_VARIABLE}, else
$XDG_DATA_HOME/session-schedule (~/.local/share/session-schedule). The store is --store, else
${STORE_VARIABLE}, else the data directory's JSONL files: jsonl:DIR, sqlite:PATH or
postgresql://…"""

SESSION_ID_PREFIX: Final = "s_"
"""How every session id starts; a first word that starts so is taken as ``chat``'s session."""

DATA_DIR_HELP = "where sessions are stored (one JSONL file each)"


class Command(NamedTuple):
    """A command as the top-level help lists it, and the module that registers and runs it."""

    name: str
    module: str
    """A module of ``session_schedule.cli`` with a :class:`CommandModule` ``register``."""
    help: str
    data_dir: bool = True
    """Whether it takes ``--data-dir`` (the database commands do not)."""
    store: bool = False
    """Whether it opens sessions, and so takes ``--store``."""


COMMANDS: Final = (
    Command(
        "chat",
        "chat",
        "chat with an agent that sets reminders (offline without a model; the default)",
        store=True,
    ),
    Command("sessions", "sessions", "list the sessions in the store", store=True),
    Command("show", "show", "show a session's transcript and schedule events", store=True),
    Command(
        "list", "listing", "list a session's active reminders as the model sees them", store=True
    ),
    Command("timeline", "timeline", "show a session's upcoming reminder occurrences", store=True),
    Command("check", "check", "validate a session's whole log strictly", store=True),
    Command(
        "history",
        "history",
        "show what became of each occurrence of a session's reminders",
        store=True,
    ),
    Command("fork", "fork", "fork a session and print the new session's id", store=True),
    Command("catalog", "definitions", "print the persistence catalog as JSON"),
    Command("tools", "definitions", "print the schedule tool definitions as JSON"),
    Command(
        "serve",
        "serve",
        "the web overlay: chat in the browser, the browser's time zone on every prompt",
        store=True,
    ),
    Command(
        "host",
        "host",
        "keep every session with reminders live, answering reminders while chats are closed",
        store=True,
    ),
    Command(
        "mcp",
        "mcp",
        "an MCP server (stdio) for one session: the schedule tools and pulled follow-ups",
        store=True,
    ),
    Command(
        "walkthrough",
        "walkthrough",
        "show, in virtual time, what a model sends, what is stored and what comes back",
    ),
    Command(
        "resolve",
        "resolve",
        "resolve `at`, `daily_at` and `calendar` inputs to UTC, or show the error a model "
        "would get",
    ),
    Command("db", "db", "create or upgrade the PostgreSQL store's schema", data_dir=False),
)
"""Every command, in the order the help lists them."""


class CommandModule(Protocol):
    """What a command's module offers the entry point."""

    def register(self, commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        """Add the module's commands, with their arguments and handlers, to ``commands``."""


@final
class _Commands(_SubParsersAction):
    """The subcommands, listed by name from the start and registered in full by their module
    only when the command line names one of them."""

    pending: dict[str, Command]
    """The commands whose module has not registered them yet."""

    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser:
        """The parser of a listed command, given the module's description, epilog and
        formatter; the one-line ``help`` must be the one listed."""
        command = self.pending.pop(name, None)
        if command is None:
            raise ValueError(f"{name!r} is not a command listed in COMMANDS, or is registered")
        parser = self.choices[name]
        for key, value in kwargs.items():
            if key == "help" and value == command.help:
                continue
            if key in {"description", "epilog"} and isinstance(value, str):
                setattr(parser, key, value)
            elif (
                key == "formatter_class"
                and isinstance(value, type)
                and issubclass(value, argparse.HelpFormatter)
            ):
                parser.formatter_class = value
            else:
                raise ValueError(f"command {name!r}: {key}={value!r} differs from COMMANDS")
        return parser

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        if isinstance(values, Sequence) and values and isinstance(values[0], str):
            self.register(values[0])
        super().__call__(parser, namespace, values, option_string)

    def register(self, name: str) -> None:
        """Have the module of command ``name`` register its commands, unless it did already."""
        command = self.pending.get(name)
        if command is None:
            return  # registered already, or no such command (argparse reports that)
        mine = [other for other in self.pending.values() if other.module == command.module]
        module = importlib.import_module(f"session_schedule.cli.{command.module}")
        cast(CommandModule, module).register(self)
        for registered in mine:
            if registered.name in self.pending:
                raise ValueError(f"{command.module} did not register command {registered.name!r}")
            if not registered.data_dir:
                continue
            # Also accepted after the command name; SUPPRESS keeps a value given before it.
            self.choices[registered.name].add_argument(
                "--data-dir",
                type=Path,
                metavar="DIR",
                default=argparse.SUPPRESS,
                help=DATA_DIR_HELP,
            )
            if registered.store:
                add_store_option(self.choices[registered.name], default=argparse.SUPPRESS)


def add_store_option(parser: argparse.ArgumentParser, *, default: object) -> None:
    """Give ``parser`` the ``--store URL`` option every command that opens sessions takes."""
    parser.add_argument("--store", metavar="URL", default=default, help=STORE_HELP)


def build_parser() -> argparse.ArgumentParser:
    """The program's parser; a command's arguments are registered once it is named."""
    parser = argparse.ArgumentParser(
        prog="session-schedule",
        description="Durable, session-local reminders for LLM agents: a chat with reminders, "
        "and the tools to inspect its sessions.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--data-dir", type=Path, metavar="DIR", help=DATA_DIR_HELP)
    add_store_option(parser, default=None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    if not isinstance(commands, _Commands):
        raise TypeError(f"argparse made a {type(commands).__name__} of the subcommands")
    commands.pending = {}
    for command in COMMANDS:
        argparse._SubParsersAction.add_parser(commands, command.name, help=command.help)
        commands.pending[command.name] = command
    return parser


def register_all(parser: argparse.ArgumentParser) -> None:
    """Register every command of ``parser`` in full (for tests and documentation)."""
    for action in parser._actions:
        if isinstance(action, _Commands):
            for name in list(action.pending):
                action.register(name)


def _with_default_command(parser: argparse.ArgumentParser, given: list[str]) -> list[str]:
    """``given``, with ``chat`` put before a session id that stands where the command would
    (``session-schedule s_7k2m4q9x3v5b`` resumes that session's chat, the default command).
    Only the program's own options may come before the id; chat's go after it."""
    taking_a_value = {
        option
        for action in parser._actions
        if action.nargs != 0 and action.option_strings
        for option in action.option_strings
    }
    position = 0
    while position < len(given):
        word = given[position]
        if word == "--":
            return given
        if word in taking_a_value:
            position += 2
            continue
        if word.startswith("-"):
            position += 1
            continue
        if word in {command.name for command in COMMANDS}:
            return given
        # A word shaped like a session id, even a malformed one, is chat's to judge: it then
        # answers as ``chat s_…`` does, not with argparse's list of commands.
        if word.startswith(SESSION_ID_PREFIX):
            return [*given[:position], "chat", *given[position:]]
        return given
    return given


def main(argv: list[str] | None = None) -> int:
    """Run the program with ``argv`` (default: the process's arguments); the exit code."""
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except MissingExtraError as error:
        return fail(str(error), EXIT_USAGE)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _main(given: list[str]) -> int:
    parser = build_parser()
    arguments = parser.parse_args(_with_default_command(parser, given))
    if arguments.command is None:
        arguments = parser.parse_args([*given, "chat"])
    try:
        code: int = arguments.handler(arguments)
    except BrokenPipeError:
        # The reader went away (``session-schedule show … | head``): stop quietly, and keep
        # Python from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (MissingExtraError, KeyboardInterrupt):
        raise
    except Exception as error:  # exit_code_for re-raises what it does not know
        return fail(str(error), exit_code_for(error))
    return code
