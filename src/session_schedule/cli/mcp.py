"""``session-schedule mcp``: serve one session's reminders to an MCP client over stdio.

The MCP SDK is an optional dependency (the ``mcp`` extra); it is imported only when this command
runs. stdout carries the protocol, so everything else — the session line, logs — goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Final

from session_schedule.cli.common import (
    DATA_DIR_VARIABLE,
    EXIT_CORRUPT,
    EXIT_OK,
    EXIT_STORAGE,
    HelpFormatter,
    add_quotas,
    add_session_argument,
    data_dir,
    fail,
    schedule_settings,
    store_location,
)

EPILOG: Final = """\
example: session-schedule mcp s_7k2m4q9x3v5b
more examples:
  session-schedule mcp    a new session; its id is printed on stderr

An MCP client starts this command and talks to it on stdin/stdout. A due reminder is not pushed:
the client is told (resources/updated for schedule://followups/pending, and a log message) and
receives it by calling the tool schedule_followups_take. A reminder nobody takes stays due.
Give the same SESSION every time so that reminders survive a restart of the client."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp`` to the program's subcommands."""
    parser = commands.add_parser(
        "mcp",
        help="an MCP server (stdio) for one session: the schedule tools and pulled follow-ups",
        description="Serve one session's schedule tools over the Model Context Protocol on "
        "stdin/stdout, for an MCP client such as a desktop chat app. Needs the mcp extra: "
        "pip install 'session-schedule[mcp]'.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    add_session_argument(
        parser, "the id of the session to serve (default: create a new one)", optional=True
    )
    add_quotas(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """The ``mcp`` command. Session errors escape for ``main`` to report (3 not found, 4 busy); an
    outbox that cannot be read as one is reported here (5, as a corrupt session log is), and a
    data directory that cannot hold the outboxes too (6, a storage failure)."""
    # The server module imports the optional SDK, which it checks for first: without the ``mcp``
    # extra this raises MissingExtraError, which ``main`` reports in one line (exit 2).
    from session_schedule.mcp.agent import (  # noqa: PLC0415
        OutboxCorruptError,
        OutboxDirectoryError,
    )
    from session_schedule.mcp.server import serve_stdio  # noqa: PLC0415 - the optional SDK
    from session_schedule.session.location import (  # noqa: PLC0415
        JsonlLocation,
        opened_store,
        store_url,
    )

    location = store_location(arguments)
    settings = schedule_settings(arguments)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    async def serve() -> None:
        if isinstance(location, JsonlLocation):
            # Given the directory, the server makes a JSONL store that flushes off its loop.
            await serve_stdio(
                location.directory,
                arguments.session,
                place=store_url(location),
                settings=settings,
            )
            return
        async with opened_store(location) as store:
            await serve_stdio(
                store,
                arguments.session,
                outbox_dir=data_dir(arguments),
                place=store_url(location),
                settings=settings,
            )

    try:
        asyncio.run(serve())
    except OutboxCorruptError as error:
        return fail(str(error), EXIT_CORRUPT)
    except OutboxDirectoryError as error:
        return fail(
            f"{error}; choose another data directory with --data-dir or ${DATA_DIR_VARIABLE}",
            EXIT_STORAGE,
        )
    return EXIT_OK
