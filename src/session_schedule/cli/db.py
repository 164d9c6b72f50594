"""``session-schedule db init`` and ``db migrate``: the PostgreSQL store's schema, by the program.

The store is the one the other commands name: ``--dsn``, else ``--store``, else
``$SESSION_SCHEDULE_STORE``, else ``$SESSION_SCHEDULE_PG_DSN``; a PostgreSQL URL's ``?schema=``
is the schema, as for every command, and ``--schema`` overrides it. So the command a store prints
for a missing schema (``session-schedule --store 'postgresql://…?schema=x' db init``) creates that
schema. psycopg is imported only when one of these commands runs, so the rest of the program
starts without it (it is the ``postgres`` extra). Both commands are idempotent; both refuse a
schema newer than this program's. The DSN is never printed (it may hold a password): messages
name the database and the schema.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Final

from session_schedule.cli.common import (
    DEFAULT_SCHEMA,
    DSN_VARIABLE,
    EXIT_OK,
    EXIT_STORAGE,
    EXIT_USAGE,
    STORE_VARIABLE,
    HelpFormatter,
    add_schema_option,
    fail,
    store_location,
)
from session_schedule.extras import require

if TYPE_CHECKING:
    from session_schedule.session.location import PostgresLocation

STORE_HELP: Final = (
    "the PostgreSQL store, as every command names it: postgresql://…, with ?schema=NAME for a "
    f"schema other than {DEFAULT_SCHEMA} (default: ${STORE_VARIABLE})"
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``db`` and its subcommands to the program's subcommands."""
    parser = commands.add_parser(
        "db",
        help="create or upgrade the PostgreSQL store's schema",
        description="The PostgreSQL session store keeps its tables in one schema of a database, "
        "created and upgraded only by these commands.",
        epilog="example: session-schedule \\\n"
        "           --store 'postgresql://app@db.internal/app?schema=reminders' db init",
        formatter_class=HelpFormatter,
    )
    actions = parser.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    for name, help_text, description, example in (
        (
            "init",
            "create the schema when the database has none",
            (
                "Create the store's schema at this program's version when it does not exist; an "
                "existing schema is left as it is (run `db migrate` to upgrade an older one). "
                "Refuses a schema newer than this program."
            ),
            (
                "session-schedule db init \\\n"
                "           --store 'postgresql://app@db.internal/app?schema=reminders'"
            ),
        ),
        (
            "migrate",
            "upgrade the schema to this program's version",
            (
                "Apply, in one transaction, every schema change between the schema's version "
                "and this program's (creating the schema when there is none); nothing when it is "
                "current. Refuses a schema newer than this program."
            ),
            "SESSION_SCHEDULE_PG_DSN=postgresql:///app session-schedule db migrate",
        ),
    ):
        action = actions.add_parser(
            name,
            help=help_text,
            description=description,
            epilog=f"example: {example}",
            formatter_class=HelpFormatter,
        )
        action.add_argument(
            "--dsn",
            metavar="DSN",
            help="the database, instead of --store: a libpq connection string, or a URL whose "
            f"?schema= is the schema as for --store (default: ${DSN_VARIABLE}, when neither "
            f"--store nor ${STORE_VARIABLE} is set)",
        )
        # Also accepted before the command name (``session-schedule --store URL db init``).
        action.add_argument("--store", metavar="URL", default=argparse.SUPPRESS, help=STORE_HELP)
        add_schema_option(action, metavar="NAME")
        action.set_defaults(handler=_run)


def _run(arguments: argparse.Namespace) -> int:
    location = _location(arguments)
    if isinstance(location, str):
        return fail(location, EXIT_USAGE)
    # Only these commands need the database driver: without the ``postgres`` extra this raises
    # MissingExtraError, which ``main`` reports in one line (exit 2).
    require("postgres", purpose="the PostgreSQL store")
    import psycopg  # noqa: PLC0415

    from session_schedule.session.location import setup_command  # noqa: PLC0415
    from session_schedule.session.postgres_schema import SCHEMA_VERSION, migrate  # noqa: PLC0415

    try:
        status = migrate(location.dsn, schema=location.schema, action=arguments.db_command)
    except psycopg.Error as error:
        problem = " ".join(str(error).split())
        return fail(f"the database could not be used: {problem}", EXIT_STORAGE)
    where = f"schema {status.schema} of PostgreSQL database {status.database}"
    if status.before == 0:
        print(f"created {where} at version {status.after}")
    elif status.before != status.after:
        print(f"upgraded {where} from version {status.before} to {status.after}")
    elif status.after < SCHEMA_VERSION:
        print(
            f"{where} is at version {status.after}; this program uses {SCHEMA_VERSION}: "
            f"upgrade it with `{setup_command(location, 'migrate')}`"
        )
    else:
        print(f"{where} is at version {status.after} already; nothing to do")
    return EXIT_OK


def _location(arguments: argparse.Namespace) -> PostgresLocation | str:
    """The store the command sets up: ``--dsn``, else ``--store``, else
    ``$SESSION_SCHEDULE_STORE``, else ``$SESSION_SCHEDULE_PG_DSN``, in the schema ``--schema``
    names, else its URL's ``?schema=``; a usage error's message otherwise."""
    from session_schedule.session.location import (  # noqa: PLC0415
        PostgresLocation,
        check_schema_name,
        parse_dsn,
        store_url,
    )

    command = f"db {arguments.db_command}"
    store = getattr(arguments, "store", None)
    try:
        if arguments.dsn and store:
            return f"{command} takes --dsn or --store, not both"
        if arguments.dsn:
            location = parse_dsn(arguments.dsn)
        elif store or os.environ.get(STORE_VARIABLE):
            found = store_location(arguments)
            if not isinstance(found, PostgresLocation):
                named = "--store" if store else f"${STORE_VARIABLE}"
                return (
                    f"{command} sets up a PostgreSQL store, and {named} names "
                    f"{store_url(found)}; give a postgresql://… URL"
                )
            location = found
        elif os.environ.get(DSN_VARIABLE):
            location = parse_dsn(os.environ[DSN_VARIABLE])
        else:
            return (
                f"{command} needs the PostgreSQL store: --store postgresql://… (or "
                f"${STORE_VARIABLE}), or --dsn (or ${DSN_VARIABLE})"
            )
        if arguments.schema is None:
            return location
        return PostgresLocation(dsn=location.dsn, schema=check_schema_name(arguments.schema))
    except ValueError as error:
        return str(error)
