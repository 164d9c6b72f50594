"""Store URLs: one way to name where sessions live, for every program and every backend.

- ``jsonl:DIR`` — one JSONL file per session in the directory ``DIR``;
- ``sqlite:PATH`` — every session in the SQLite database file ``PATH``;
- ``postgresql://…`` (or ``postgres://…``) — every session in a PostgreSQL database, the URL
  being the libpq connection URI; a ``schema`` query parameter (``?schema=reminders``) names the
  schema of the tables (default ``session_schedule``; see :func:`check_schema_name`) and is not
  passed to the driver.

A relative ``DIR`` or ``PATH`` is taken from the current directory. :func:`parse_store_url` reads
a URL into a :data:`StoreLocation` (``ValueError`` with a one-sentence message otherwise),
:func:`store_url` writes one back — the form every hint a program prints uses, with an absolute
path and a PostgreSQL password hidden — :func:`open_store` makes the store, and
:func:`check_store` uses it once, so that a program that serves a store refuses one that cannot
be used before it says it started.
:func:`parse_dsn` reads the ``--dsn`` of the commands that name only a PostgreSQL database (a URL
as here, or a libpq keyword string), and :func:`setup_command` prints the ``db`` command that
creates or upgrades a location's schema. Only :func:`open_store` imports a backend, and only the
one it opens: a PostgreSQL URL needs the ``postgres`` extra then, not before.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeAlias, assert_never, final

from session_schedule.core.instants import Instant
from session_schedule.session.port import SessionStore

SCHEMES: Final = ("jsonl:DIR", "sqlite:PATH", "postgresql://…")
"""The forms of a store URL, as messages name them."""
POSTGRES_SCHEMA: Final = "session_schedule"
"""The schema a PostgreSQL URL's tables are in (the same as ``postgres_schema.DEFAULT_SCHEMA``,
which needs the driver to import)."""
_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}", re.ASCII)
"""A schema name the store uses as it is: an SQL identifier that needs no quoting, and that
PostgreSQL does not truncate (63 bytes)."""
_PASSWORD: Final = re.compile(r"(?<=:)[^:@/]*(?=@)")
"""The password of a URI's ``user:password@`` part."""
_PASSWORD_KEYWORD: Final = re.compile(r"^password=.*$")
"""The ``password=…`` word of a libpq keyword string."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class JsonlLocation:
    """Sessions as JSONL files in ``directory``."""

    directory: Path


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SqliteLocation:
    """Sessions in the SQLite database file ``path``."""

    path: Path


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresLocation:
    """Sessions in the PostgreSQL database ``dsn`` names, in the tables of ``schema``."""

    dsn: str
    schema: str = POSTGRES_SCHEMA


StoreLocation: TypeAlias = JsonlLocation | SqliteLocation | PostgresLocation


def check_schema_name(name: str) -> str:
    """``name`` when it can name the store's schema; ``ValueError`` otherwise.

    Here, not with the tables (``postgres_schema``, which needs the driver): a store URL's
    ``?schema=`` is checked as the URL is read, so that every command refuses a bad name as a
    usage error before it connects.
    """
    if _SCHEMA_NAME.fullmatch(name) is None:
        raise ValueError(
            f"{name!r} cannot name a schema: use 1 to 63 lower-case letters, digits or "
            "underscores, not starting with a digit"
        )
    return name


def parse_store_url(text: str) -> StoreLocation:
    """The location ``text`` names; ``ValueError`` when it is not a store URL."""
    scheme, colon, rest = text.partition(":")
    if colon:
        match scheme.lower():
            case "jsonl" if rest:
                return JsonlLocation(directory=Path(rest).expanduser())
            case "sqlite" if rest:
                return SqliteLocation(path=Path(rest).expanduser())
            case "postgresql" | "postgres" if rest.startswith("//"):
                return _postgres(text)
            case "jsonl":
                raise ValueError(
                    f"the store URL {text!r} names no directory; write jsonl:DIR, such as "
                    "jsonl:~/sessions"
                )
            case "sqlite":
                raise ValueError(
                    f"the store URL {text!r} names no file; write sqlite:PATH, such as "
                    "sqlite:~/sessions.db"
                )
            case _:
                pass
    raise ValueError(
        f"{text!r} is not a store URL; write {', '.join(SCHEMES[:-1])} or {SCHEMES[-1]}, such as "
        "sqlite:sessions.db"
    )


def _postgres(text: str) -> PostgresLocation:
    """A PostgreSQL URL's location: a ``schema`` query parameter is ours (the schema of the
    tables), every other part is the driver's."""
    parts = urllib.parse.urlsplit(text)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    if not schemas:
        return PostgresLocation(dsn=text)
    if len(schemas) > 1 or not schemas[0]:
        raise ValueError(f"the store URL {text!r} must name one schema, such as ?schema=reminders")
    check_schema_name(schemas[0])
    rest = urllib.parse.urlencode([(key, value) for key, value in query if key != "schema"])
    return PostgresLocation(
        dsn=urllib.parse.urlunsplit(parts._replace(query=rest)), schema=schemas[0]
    )


def parse_dsn(text: str) -> PostgresLocation:
    """The location a ``--dsn`` names: a ``postgresql://`` (or ``postgres://``) URL read as
    :func:`parse_store_url` reads it (its ``?schema=`` is the schema, not the driver's), or a
    libpq keyword string (``host=db dbname=app``), which names the database alone.
    ``ValueError`` for a URL whose ``?schema=`` is not a schema name."""
    scheme, _, rest = text.partition(":")
    if scheme.lower() in {"postgresql", "postgres"} and rest.startswith("//"):
        return _postgres(text)
    return PostgresLocation(dsn=text)


def setup_command(location: PostgresLocation, action: Literal["init", "migrate"]) -> str:
    """The ``session-schedule db`` command that creates (``init``) or upgrades (``migrate``)
    the schema of ``location``, as it can be pasted (a password is shown as ``***``)."""
    if "//" in location.dsn:
        return f"session-schedule --store {shlex.quote(store_url(location))} db {action}"
    words = [_PASSWORD_KEYWORD.sub("password=***", word) for word in location.dsn.split()]
    command = f"session-schedule db {action} --dsn {shlex.quote(' '.join(words))}"
    if location.schema != POSTGRES_SCHEMA:
        command += f" --schema {location.schema}"
    return command


def store_url(location: StoreLocation) -> str:
    """The URL of ``location``, for people to read and paste (a password is shown as ``***``).

    A relative directory or file is written from the current directory, absolute: a printed
    command names the same store wherever it is run from."""
    match location:
        case JsonlLocation(directory=directory):
            return f"jsonl:{directory.absolute()}"
        case SqliteLocation(path=path):
            return f"sqlite:{path.absolute()}"
        case PostgresLocation(dsn=dsn, schema=schema):
            if "//" not in dsn:  # a libpq keyword string (the host's --dsn): not a URL
                words = [_PASSWORD_KEYWORD.sub("password=***", word) for word in dsn.split()]
                shown = f" (schema {schema})" if schema != POSTGRES_SCHEMA else ""
                return "postgresql:" + " ".join(words) + shown
            if schema != POSTGRES_SCHEMA:
                dsn += ("&" if "?" in dsn else "?") + urllib.parse.urlencode({"schema": schema})
            scheme, _, rest = dsn.partition("//")
            authority, slash, tail = rest.partition("/")
            if "@" in authority:
                authority = _PASSWORD.sub("***", authority, count=1)
            return f"{scheme}//{authority}{slash}{tail}"
        case _:
            assert_never(location)


def open_store(location: StoreLocation, *, lease_seconds: float | None = None) -> SessionStore:
    """A store for ``location`` (nothing is read or created until it is used); ``lease_seconds``
    sets a PostgreSQL store's lease (default: the store's).

    A PostgreSQL location raises ``MissingExtraError`` without the ``postgres`` extra.
    """
    match location:
        case JsonlLocation(directory=directory):
            from session_schedule.session.jsonl import JsonlSessionStore  # noqa: PLC0415

            return JsonlSessionStore(directory)
        case SqliteLocation(path=path):
            from session_schedule.session.sqlite import SqliteSessionStore  # noqa: PLC0415

            return SqliteSessionStore(path)
        case PostgresLocation(dsn=dsn, schema=schema):
            from session_schedule.session.postgres import PostgresSessionStore  # noqa: PLC0415

            if lease_seconds is None:
                return PostgresSessionStore(dsn, schema=schema)
            return PostgresSessionStore(dsn, schema=schema, lease_seconds=lease_seconds)
        case _:
            assert_never(location)


@contextlib.asynccontextmanager
async def opened_store(location: StoreLocation) -> AsyncIterator[SessionStore]:
    """:func:`open_store`, closed on exit when the store holds resources (a connection pool)."""
    store = open_store(location)
    try:
        yield store
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            await close()


async def check_store(store: SessionStore) -> None:
    """Use ``store`` once, as a program that serves it does before it says it started: a store
    that cannot be used raises here what every command reports for it — a JSONL directory that
    is a file (``NotPrivateFile``, exit 6), a damaged SQLite database (``SessionCorrupt``, exit
    5), a PostgreSQL schema that is missing or older than the program (``SessionError`` naming
    the ``db`` command that creates or upgrades it, exit 6). A store not created yet passes, and
    is not created.

    The read is the cheapest the port has: the first entry of the next-target index."""
    await store.due_sessions(Instant(0), limit=1)
