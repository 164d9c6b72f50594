"""What the host benchmarks (``host.py``, ``idle_index.py``) share: their stores, a PostgreSQL
schema of their own, the idle CPU a child process samples, and running such a child."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from session_schedule.session import JsonlSessionStore, SessionStore, SqliteSessionStore

DEFAULT_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_LEASE_S: Final = 15.0
"""The PostgreSQL store's default lease."""


def make_store(kind: str, place: str, *, lease: float = DEFAULT_LEASE_S) -> SessionStore:
    """A store of ``kind`` (``jsonl``, ``sqlite`` or ``postgres``) at ``place`` (a directory,
    or ``"<dsn> <schema>"``, see :func:`postgres_place`)."""
    if kind == "jsonl":
        return JsonlSessionStore(Path(place))
    if kind == "sqlite":
        return SqliteSessionStore(Path(place))
    from session_schedule.session.postgres import PostgresSessionStore  # noqa: PLC0415

    dsn, schema = place.split(" ", 1)
    return PostgresSessionStore(dsn, schema=schema, lease_seconds=lease, pool_size=10)


async def close_store(store: object) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        await close()


def postgres_place(dsn: str, prefix: str = "bench") -> tuple[str, str]:
    """A new schema at the current version (``<prefix>_<pid>``): the place to give
    :func:`make_store`, and the schema's name (for :func:`drop`)."""
    from session_schedule.session.postgres_schema import migrate  # noqa: PLC0415

    schema = f"{prefix}_{os.getpid()}"
    migrate(dsn, schema=schema)
    return f"{dsn} {schema}", schema


def drop(dsn: str, schema: str) -> None:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


async def idle_cpu_percent(idle: float) -> float:
    """The CPU time of this process (every thread) while it idles ``idle`` seconds on the event
    loop, as a percentage of one core."""
    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.sleep(idle)
    return (time.process_time() - cpu) / (time.monotonic() - wall) * 100


def child_output(script: str, *arguments: str) -> str:
    """Run ``script --child arguments`` in a fresh interpreter; the last line it printed (its
    figures, in JSON)."""
    result = subprocess.run(  # noqa: S603 - a benchmark script, with its own arguments
        [sys.executable, script, "--child", *arguments],
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.splitlines()[-1]
