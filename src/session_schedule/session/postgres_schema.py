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

The commands also refuse a schema the connecting role does not own whole
(:func:`ownership_problem`): a schema of another role, a table (or view, sequence, index) in it
of another role — a role that owns a table can drop it or read it, and look-alike tables set up
in advance could carry a trigger that copies every entry out — or any trigger on its tables.
Each refusal names the schema, the objects and the roles.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple, final

from session_schedule.extras import require

require("postgres", purpose="the PostgreSQL store")  # before anything imports psycopg

import psycopg
from psycopg import sql

from session_schedule.session.errors import SessionError
from session_schedule.session.location import PostgresLocation, check_schema_name, setup_command

DEFAULT_SCHEMA: Final = "session_schedule"
SCHEMA_VERSION: Final = 2
"""The version this program reads and writes."""

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


def version_problem(
    found: int | None, *, database: str, schema: str, dsn: str
) -> SessionError | None:
    """Why a store cannot use a schema at version ``found`` (``None``: no schema), if it cannot.

    The command it names works as printed: it names the store's database and schema (``dsn``,
    a password hidden), not the defaults of ``db init``."""
    where = f"schema {schema} of PostgreSQL database {database}"
    location = PostgresLocation(dsn=dsn, schema=schema)
    if found is None or found == 0:
        return SessionError(
            "",
            f"{where} holds no session store; create it with `{setup_command(location, 'init')}`",
        )
    if found > SCHEMA_VERSION:
        return newer_schema(found, where)
    if found < SCHEMA_VERSION:
        return SessionError(
            "",
            f"{where} is at version {found}, but this program uses version {SCHEMA_VERSION}; "
            f"upgrade it with `{setup_command(location, 'migrate')}`",
        )
    return None


def newer_schema(found: int, where: str) -> SessionError:
    return SessionError(
        "",
        f"{where} is at version {found}, newer than this program's {SCHEMA_VERSION}; "
        "upgrade the program",
    )


_SCHEMA_OWNER: Final = """
SELECT pg_get_userbyid(nspowner), current_user FROM pg_namespace WHERE nspname = %s
"""
_FOREIGN_OBJECTS: Final = """
SELECT c.relname, pg_get_userbyid(c.relowner) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND pg_get_userbyid(c.relowner) <> current_user ORDER BY 1
"""
_TRIGGERS: Final = """
SELECT c.relname, t.tgname FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND NOT t.tgisinternal ORDER BY 1, 2
"""


def ownership_problem(
    connection: psycopg.Connection[tuple[object, ...]], schema: str, *, where: str
) -> SessionError | None:
    """Why the connecting role must not use ``schema`` as its store, if it must not: the schema,
    or a table, view, sequence or index in it, belongs to another role (which could drop the
    tables, or had put look-alike ones there), or a table in it has a trigger (the store makes
    none: one could copy entries out). ``None`` for a schema the role owns whole, or none."""
    row = connection.execute(_SCHEMA_OWNER, (schema,)).fetchone()
    if row is None:
        return None  # no such schema yet: this role creates it, and owns it
    owner, role = str(row[0]), str(row[1])
    if owner != role:
        return SessionError(
            "",
            f"{where} is owned by the role {owner}, not by {role}, the role this program "
            f"connects as; the owner could drop or replace the store's tables. Use a schema "
            f"{role} owns (--schema), or connect as {owner}",
        )
    foreign = connection.execute(_FOREIGN_OBJECTS, (schema,)).fetchall()
    if foreign:
        names = ", ".join(f"{name} (owned by {other})" for name, other in foreign)
        return SessionError(
            "",
            f"{where} holds {names}, not owned by {role}, the role this program connects as; "
            "another role's table can be dropped or read by it. Move them out of the schema, or "
            "use another schema (--schema)",
        )
    triggers = connection.execute(_TRIGGERS, (schema,)).fetchall()
    if triggers:
        named = ", ".join(f"{table}.{trigger}" for table, trigger in triggers)
        return SessionError(
            "",
            f"{where} has triggers the store does not make ({named}); a trigger can copy "
            "entries elsewhere. Drop them, or use another schema (--schema)",
        )
    return None


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
            problem = ownership_problem(connection, schema, where=where)
            if problem is not None:
                raise problem
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
