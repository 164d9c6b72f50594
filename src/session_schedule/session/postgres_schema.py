"""The PostgreSQL store's schema: its tables, its version, and the program that creates it.

The schema is created and upgraded only by the program (``session-schedule db init`` and
``session-schedule db migrate``, or :func:`migrate` from Python), never by hand. Every table lives
in one PostgreSQL schema (``session_schedule`` unless told otherwise), so several independent
stores can share a database::

    schema_version(version integer PRIMARY KEY, applied_at timestamptz)  -- one row per step
    sessions(id text PRIMARY KEY, header bytea)        -- the header's canonical JSON
    entries(session_id text, position integer, type text, data bytea,  -- data: canonical JSON
            PRIMARY KEY (session_id, position))
    leases(session_id text PRIMARY KEY, epoch bigint, holder text, expires_at timestamptz)
    next_targets(session_id text PRIMARY KEY, next_target timestamptz)  -- NULL: nothing active
    checkpoints(session_id text PRIMARY KEY, data bytea)  -- derived (version 2)

Migration steps run in order, each version once, all in one transaction that first takes a
transaction-level advisory lock for the schema (two ``migrate`` runs at once serialise). A schema
whose version is newer than this program's is refused, by the commands and by the store alike.
"""

from __future__ import annotations

import re
from typing import Final, Literal, NamedTuple, final

from session_schedule.extras import require

require("postgres", purpose="the PostgreSQL store")  # before anything imports psycopg

import psycopg
from psycopg import sql

from session_schedule.session.errors import SessionError

DEFAULT_SCHEMA: Final = "session_schedule"
SCHEMA_VERSION: Final = 2
"""The version this program reads and writes."""

_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}", re.ASCII)

# Step n brings a schema from version n - 1 to version n. ``{s}`` is the quoted schema name.
_STEPS: Final[tuple[tuple[str, ...], ...]] = (
    (
        "CREATE SCHEMA IF NOT EXISTS {s}",
        (
            "CREATE TABLE {s}.schema_version ("
            " version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        ),
        "CREATE TABLE {s}.sessions (id text PRIMARY KEY, header bytea NOT NULL)",
        (
            "CREATE TABLE {s}.entries ("
            " session_id text NOT NULL REFERENCES {s}.sessions (id),"
            " position integer NOT NULL CHECK (position >= 0),"
            " type text NOT NULL,"
            " data bytea NOT NULL,"
            " PRIMARY KEY (session_id, position))"
        ),
        (
            "CREATE TABLE {s}.leases ("
            " session_id text PRIMARY KEY REFERENCES {s}.sessions (id),"
            " epoch bigint NOT NULL CHECK (epoch > 0),"
            " holder text NOT NULL,"
            " expires_at timestamptz NOT NULL)"
        ),
        (
            "CREATE TABLE {s}.next_targets ("
            " session_id text PRIMARY KEY REFERENCES {s}.sessions (id),"
            " next_target timestamptz)"
        ),
        (
            "CREATE INDEX next_targets_due ON {s}.next_targets (next_target)"
            " WHERE next_target IS NOT NULL"
        ),
    ),
    (
        (
            "CREATE TABLE {s}.checkpoints ("
            " session_id text PRIMARY KEY REFERENCES {s}.sessions (id),"
            " data bytea NOT NULL)"
        ),
    ),
)

Action = Literal["init", "migrate"]


@final
class SchemaStatus(NamedTuple):
    """What ``init`` or ``migrate`` found and left."""

    database: str
    schema: str
    before: int
    """The version found (0: no schema)."""
    after: int


def check_schema_name(name: str) -> str:
    """``name`` when it can name the store's schema; ``ValueError`` otherwise."""
    if _SCHEMA_NAME.fullmatch(name) is None:
        raise ValueError(
            f"{name!r} cannot name a schema: use 1 to 63 lower-case letters, digits or "
            "underscores, not starting with a digit"
        )
    return name


def quoted(schema: str) -> str:
    """The schema's name as an SQL identifier (``schema`` must pass :func:`check_schema_name`)."""
    return sql.Identifier(check_schema_name(schema)).as_string()


def version_queries(schema: str) -> tuple[str, str]:
    """Two queries: whether the schema's version table exists, then its version (one row each).

    Two statements, since a query naming a missing table fails before it runs.
    """
    table = f"{quoted(schema)}.schema_version"
    return (
        f"SELECT to_regclass('{table}') IS NOT NULL",
        f"SELECT max(version) FROM {table}",  # noqa: S608 - a checked schema name
    )


def version_problem(found: int | None, *, database: str, schema: str) -> SessionError | None:
    """Why a store cannot use a schema at version ``found`` (``None``: no schema), if it cannot."""
    where = f"schema {schema} of PostgreSQL database {database}"
    if found is None or found == 0:
        return SessionError(
            "", f"{where} holds no session store; create it with `session-schedule db init`"
        )
    if found > SCHEMA_VERSION:
        return newer_schema(found, where)
    if found < SCHEMA_VERSION:
        return SessionError(
            "",
            f"{where} is at version {found}, but this program uses version {SCHEMA_VERSION}; "
            "upgrade it with `session-schedule db migrate`",
        )
    return None


def newer_schema(found: int, where: str) -> SessionError:
    return SessionError(
        "",
        f"{where} is at version {found}, newer than this program's {SCHEMA_VERSION}; "
        "upgrade the program",
    )


def migrate(
    dsn: str,
    *,
    schema: str = DEFAULT_SCHEMA,
    action: Action = "migrate",
) -> SchemaStatus:
    """Bring ``schema`` in the database at ``dsn`` to this program's version; idempotent.

    ``init`` creates a missing schema and leaves an existing one as it is; ``migrate`` also
    upgrades an older one. Both refuse a schema newer than this program with ``SessionError``
    (nothing is changed).
    Raises ``psycopg.Error`` when the database cannot be reached or refuses a statement.
    """
    name = quoted(schema)
    with psycopg.connect(dsn, autocommit=True) as connection:
        database = connection.info.dbname
        where = f"schema {schema} of PostgreSQL database {database}"
        with connection.transaction():
            connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"session-schedule {schema}",)
            )
            exists, select = version_queries(schema)
            row = connection.execute(exists).fetchone()
            if row is not None and row[0]:
                row = connection.execute(select).fetchone()
                found = 0 if row is None or row[0] is None else int(row[0])
            else:
                found = 0
            if found > SCHEMA_VERSION:
                raise newer_schema(found, where)
            if action == "init" and found > 0:
                return SchemaStatus(database, schema, found, found)
            for version in range(found + 1, SCHEMA_VERSION + 1):
                for statement in _STEPS[version - 1]:
                    connection.execute(statement.replace("{s}", name))
                connection.execute(
                    f"INSERT INTO {name}.schema_version (version) VALUES (%s)",  # noqa: S608
                    (version,),
                )
        return SchemaStatus(database, schema, found, SCHEMA_VERSION)
