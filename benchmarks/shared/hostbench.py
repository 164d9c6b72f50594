"""What the host benchmarks (``host.py``, ``stampede.py``, ``idle_index.py``) share: their
stores, a PostgreSQL schema of their own, agents that stamp every delivered reminder, the idle
CPU a child process samples, and running such a child."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

from session_schedule.core.instants import parse_instant
from session_schedule.host import AgentFactory
from session_schedule.runtime.clock import Clock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session import (
    JsonlSessionStore,
    SessionHandle,
    SessionStore,
    SqliteSessionStore,
)
from session_schedule.testing import IdleAgent

DEFAULT_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_LEASE_S: Final = 15.0
"""The PostgreSQL store's default lease."""
KEY: Final = re.compile(r"\bsch_[0-9]+@([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z)")
"""A delivered reminder's occurrence in the follow-up's text: its target instant."""


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


def stamper(stamps: list[tuple[float, float]], record: int | None) -> Callable[[str], None]:
    """Stamps every accepted follow-up with its occurrence targets (and writes them to
    ``record``, when given)."""

    def stamp(message: str) -> None:
        now = time.time()
        for target in dict.fromkeys(KEY.findall(message)):
            stamps.append((now, parse_instant(target) / 1000))
            if record is not None:
                os.write(record, f"{now:.6f} {target}\n".encode())

    return stamp


def stamping_agents(
    stamps: list[tuple[float, float]],
    opens: list[float],
    record: int | None = None,
) -> AgentFactory:
    @asynccontextmanager
    async def make(
        session: SessionHandle, clock: Clock, settings: Settings, on_wake: Callable[[], None]
    ) -> AsyncIterator[LiveSchedule]:
        started = time.perf_counter()
        agent = IdleAgent(stamper(stamps, record))
        async with LiveSchedule(
            session, agent, clock=clock, settings=settings, driven=True, on_wake=on_wake
        ) as schedule:
            opens.append(time.perf_counter() - started)
            yield schedule

    return make


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
