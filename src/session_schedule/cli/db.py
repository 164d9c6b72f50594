"""``session-schedule db init`` and ``db migrate``: the PostgreSQL store's schema, by the program.

The database is ``--dsn``, else ``$SESSION_SCHEDULE_PG_DSN``. psycopg is imported only when one
of these commands runs, so the rest of the program starts without it (it is the ``postgres``
extra). Both commands are idempotent; both refuse a schema newer than this program's. The DSN is
never printed (it may hold a password): messages name the database and the schema.
"""

from __future__ import annotations

import argparse
import os

from session_schedule.cli.common import (
    DSN_VARIABLE,
    EXIT_OK,
    EXIT_STORAGE,
    EXIT_USAGE,
    HelpFormatter,
    add_schema_option,
    fail,
)
from session_schedule.extras import require


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``db`` and its subcommands to the program's subcommands."""
    parser = commands.add_parser(
        "db",
        help="create or upgrade the PostgreSQL store's schema",
        description="The PostgreSQL session store keeps its tables in one schema of a database, "
        "created and upgraded only by these commands.",
        epilog="example: session-schedule db init --dsn postgresql://app@db.internal/app",
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
            "session-schedule db init --dsn postgresql://app@db.internal/app",
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
            help=f"the database: a libpq connection string or URI (default: ${DSN_VARIABLE})",
        )
        add_schema_option(action, metavar="NAME")
        action.set_defaults(handler=_run)


def _run(arguments: argparse.Namespace) -> int:
    dsn = arguments.dsn or os.environ.get(DSN_VARIABLE)
    if not dsn:
        return fail(f"db {arguments.db_command} needs --dsn or ${DSN_VARIABLE}", EXIT_USAGE)
    # Only these commands need the database driver: without the ``postgres`` extra this raises
    # MissingExtraError, which ``main`` reports in one line (exit 2).
    require("postgres", purpose="the PostgreSQL store")
    import psycopg  # noqa: PLC0415

    from session_schedule.session.postgres_schema import (  # noqa: PLC0415
        SCHEMA_VERSION,
        check_schema_name,
        migrate,
    )

    try:
        check_schema_name(arguments.schema)
    except ValueError as error:
        return fail(str(error), EXIT_USAGE)
    try:
        status = migrate(dsn, schema=arguments.schema, action=arguments.db_command)
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
            "upgrade it with `session-schedule db migrate`"
        )
    else:
        print(f"{where} is at version {status.after} already; nothing to do")
    return EXIT_OK
