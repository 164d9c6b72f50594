"""``session-schedule host``: keep every session with reminders live, in one process.

The store is the data directory (JSONL, the default) or, with ``--dsn`` or ``--postgres``, a
PostgreSQL database (where several hosts share the sessions through their leases). The model is
configured as for the chat; without one the host is offline: a due reminder's follow-up turn is
recorded in the transcript, unanswered, for the person to find. It runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import Final

from session_schedule.cli.common import (
    DSN_VARIABLE,
    EXIT_OK,
    EXIT_STORAGE,
    EXIT_USAGE,
    HelpFormatter,
    add_quotas,
    add_schema_option,
    fail,
    schedule_settings,
    store_location,
)
from session_schedule.cli.model import (
    MODEL_VARIABLE,
    ModelConfig,
    add_model_options,
    connect,
    model_config,
)
from session_schedule.extras import require
from session_schedule.host import HostSettings, ScheduleHost, reference_agents
from session_schedule.runtime.live import MIN_WAIT_SECONDS
from session_schedule.session.location import (
    PostgresLocation,
    check_schema_name,
    check_store,
    open_store,
    parse_dsn,
    store_url,
)
from session_schedule.session.port import SessionStore

DESCRIPTION: Final = (
    "Keep every session that has reminders live, in one process: each session is opened shortly "
    "before its next reminder is due, its follow-up turn is answered by the model (offline: "
    "recorded in the transcript, unanswered), and it is closed again once idle. A session open "
    "elsewhere (a chat) is skipped and tried again later."
)
_LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``host`` to the program's subcommands."""
    parser = commands.add_parser(
        "host",
        help="keep every session with reminders live, answering reminders while chats are closed",
        description=DESCRIPTION,
        epilog="example: session-schedule host --model gpt-4.1-mini\n"
        "example: session-schedule host --dsn postgresql://app@db.internal/app \\\n"
        "           --lease-seconds 15",
        formatter_class=HelpFormatter,
    )
    store = parser.add_mutually_exclusive_group()
    store.add_argument(
        "--dsn",
        metavar="DSN",
        help="serve the sessions of this PostgreSQL database (the same as --store with its URL)",
    )
    store.add_argument(
        "--postgres",
        action="store_true",
        help=f"serve the PostgreSQL database named by ${DSN_VARIABLE}",
    )
    add_schema_option(parser)
    parser.add_argument(
        "--lease-seconds",
        type=_positive,
        default=15.0,
        metavar="SECONDS",
        help="PostgreSQL: how long a session stays owned by a host that stopped renewing "
        "(default: 15)",
    )
    add_model_options(
        parser,
        model=f"the model that answers follow-ups (default: ${MODEL_VARIABLE}; without one: "
        "offline)",
        base_url="an OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)",
    )
    defaults = HostSettings()
    parser.add_argument(
        "--lead",
        type=_positive,
        default=defaults.lead_seconds,
        metavar="SECONDS",
        help=f"open a session this long before its next reminder (default: "
        f"{defaults.lead_seconds:g})",
    )
    parser.add_argument(
        "--poll",
        type=_wait,
        default=defaults.poll_seconds,
        metavar="SECONDS",
        help=f"re-read the next-target index this often (default: {defaults.poll_seconds:g})",
    )
    parser.add_argument(
        "--busy-retry",
        type=_wait,
        default=defaults.busy_retry_seconds,
        metavar="SECONDS",
        help=f"try a session open elsewhere again this much later (default: "
        f"{defaults.busy_retry_seconds:g})",
    )
    parser.add_argument(
        "--max-wait-seconds",
        type=_wait,
        default=defaults.max_wait_seconds,
        metavar="SECONDS",
        help=f"never sleep longer than this before re-reading the clock; with --poll and "
        f"--lead it bounds how soon a session is taken over (default: "
        f"{defaults.max_wait_seconds:g})",
    )
    parser.add_argument(
        "--failed-retry-seconds",
        type=_wait,
        default=defaults.failed_retry_seconds,
        metavar="SECONDS",
        help=f"try a session that failed to open, or whose schedule stopped (its lease taken "
        f"over), again this much later (default: {defaults.failed_retry_seconds:g})",
    )
    parser.add_argument(
        "--drain-seconds",
        type=_positive,
        default=defaults.drain_seconds,
        metavar="SECONDS",
        help=f"on stop, give a running turn this long to finish before it is cancelled and left "
        f"for the next host to answer (default: {defaults.drain_seconds:g})",
    )
    add_quotas(parser)
    parser.add_argument(
        "--verbose", action="store_true", help="log every reminder event, not only problems"
    )
    parser.set_defaults(handler=run)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _wait(text: str) -> float:
    """A wait of the host's timer: positive, and at least ``MIN_WAIT_SECONDS`` (as the host's
    settings require), so that the timer cannot spin."""
    value = _positive(text)
    if value < MIN_WAIT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is less than {MIN_WAIT_SECONDS:g} seconds; a shorter wait lets the host spin"
        )
    return value


def host_settings(arguments: argparse.Namespace) -> HostSettings:
    """The host's settings, as its command line sets them."""
    return HostSettings(
        lead_seconds=arguments.lead,
        poll_seconds=arguments.poll,
        busy_retry_seconds=arguments.busy_retry,
        max_wait_seconds=arguments.max_wait_seconds,
        failed_retry_seconds=arguments.failed_retry_seconds,
        drain_seconds=arguments.drain_seconds,
        schedule=schedule_settings(arguments),
    )


def run(arguments: argparse.Namespace) -> int:
    config = model_config(arguments.model, arguments.base_url, os.environ)
    if isinstance(config, str):
        return fail(config, EXIT_USAGE)
    if config is not None:
        require("openai", purpose="chatting with a model")
    dsn: str | None = arguments.dsn
    if getattr(arguments, "store", None) and (dsn is not None or arguments.postgres):
        given = "--dsn" if dsn is not None else "--postgres"
        return fail(f"host takes {given} or --store, not both", EXIT_USAGE)
    if arguments.postgres:
        dsn = os.environ.get(DSN_VARIABLE) or None
        if dsn is None:
            return fail(f"host --postgres needs ${DSN_VARIABLE}", EXIT_USAGE)
    try:
        # A --dsn URL is read as --store reads it: its ?schema= is the schema, not libpq's.
        location = store_location(arguments) if dsn is None else parse_dsn(dsn)
        if isinstance(location, PostgresLocation) and arguments.schema is not None:
            # else the URL's ?schema=, or the default
            location = PostgresLocation(
                dsn=location.dsn, schema=check_schema_name(arguments.schema)
            )
    except ValueError as error:
        return fail(str(error), EXIT_USAGE)
    logging.basicConfig(
        level=logging.INFO if arguments.verbose else logging.WARNING,
        format=_LOG_FORMAT,
        stream=sys.stderr,
    )
    settings = host_settings(arguments)
    if not isinstance(location, PostgresLocation):
        store = open_store(location)
        where = f"the sessions in {store_url(location)}"
        return asyncio.run(_serve(store, where, config, settings))
    # Without the postgres extra, this raises MissingExtraError: one line, exit 2.
    store = open_store(location, lease_seconds=arguments.lease_seconds)
    import psycopg  # noqa: PLC0415 - only a PostgreSQL host needs the driver

    where = f"the sessions in {store_url(location)}"
    try:
        return asyncio.run(_serve(store, where, config, settings))
    except psycopg.Error as error:
        problem = " ".join(str(error).split())
        return fail(f"the database could not be used: {problem}", EXIT_STORAGE)


async def _serve(
    store: SessionStore, where: str, config: ModelConfig | None, settings: HostSettings
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signal_number, stop.set)
    async with connect(config) as connection, contextlib.AsyncExitStack() as resources:
        closing = getattr(store, "close", None)
        if closing is not None:
            resources.push_async_callback(closing)
        # A store that cannot be used fails here, as every command reports it, before the
        # line that says the host started — not in the timer, which would serve nothing.
        await check_store(store)
        answered = f"answering with {config.name}" if config is not None else "offline"
        print(
            f"session-schedule host: keeping {where} live ({answered}); stop with Ctrl-C",
            flush=True,
        )
        async with ScheduleHost(
            store, reference_agents(connection.model), settings=settings
        ) as host:
            stopped = asyncio.ensure_future(stop.wait())
            timer = asyncio.ensure_future(host.wait_stopped())
            await asyncio.wait({stopped, timer}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            timer.cancel()
            stats = host.stats
            failure = host.failure
        print(
            f"session-schedule host: stopped; sessions opened {stats.opened}, closed "
            f"{stats.closed}, found open elsewhere {stats.busy}, failed {stats.failed}; "
            f"turns retried {stats.turn_retries}, turns failed {stats.turns_failed}",
            flush=True,
        )
    if failure is not None:
        return fail(f"the host stopped: {failure}", EXIT_STORAGE)
    return EXIT_OK
