"""Durable create on PostgreSQL: ``ScheduleTools.call`` against one raw INSERT + COMMIT.

    python3 dev.py bench pg_create [--dsn DSN] [--iterations N]

The database is ``--dsn``, else ``$SESSION_SCHEDULE_PG_DSN``, else
``postgresql://postgres@127.0.0.1:5432/test``. The run creates a schema of its own (through the
program's migration) and drops it at the end.

Each iteration measures, interleaved so that both see the same server and disk:

- **baseline**: one INSERT of the same canonical ``schedule/change`` bytes into a table of the
  same shape as ``entries``, on a dedicated autocommit connection — one statement, one commit,
  no pool, no lease: the floor of a durable write;
- **create**: ``await tools.call("schedule_create", {...})`` on a live Schedule over a
  ``PostgresSessionStore`` session — the barrier before the decision, the append, and the
  barrier after it (one conditional statement: lease check + insert, one commit), plus the
  tool's own work (argument checks, rules, fold, result).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time

import psycopg

from session_schedule.core.changes import create_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant
from session_schedule.core.records import AfterScheduleRecord
from session_schedule.core.rules import Limits
from session_schedule.runtime.clock import SystemClock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session.codec import encode_payload
from session_schedule.session.postgres import PostgresSessionStore
from session_schedule.session.postgres_schema import migrate
from session_schedule.testing import IdleAgent
from session_schedule.tools.handlers import ScheduleTools

PROMPT = "check whether the nightly export finished and tell me what failed, if anything"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
WARM_UP = 20
DELAY_SECONDS = 86_400


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def canonical_bytes(now: Instant) -> bytes:
    record = AfterScheduleRecord(
        id=make_schedule_id(1),
        prompt=PROMPT,
        after_seconds=DELAY_SECONDS,
        scheduled_at=format_instant(Instant(now + DELAY_SECONDS * 1000)),
    )
    return encode_payload("schedule/change", create_change(record))[1]


async def run(dsn: str, schema: str, iterations: int) -> None:
    clock = SystemClock()
    data = canonical_bytes(clock.now())
    raw = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await raw.execute(
        f"CREATE TABLE {schema}.raw_entries (session_id text, position integer, type text,"
        " data bytea, PRIMARY KEY (session_id, position))"
    )
    insert = (
        f"INSERT INTO {schema}.raw_entries (session_id, position, type, data)"  # noqa: S608
        " VALUES ('s_aaaaaaaaaaaa', %s, 'schedule/change', %s)"
    )
    settings = {
        name: str((await (await raw.execute(f"SHOW {name}")).fetchone() or ("?",))[0])
        for name in ("server_version", "synchronous_commit", "fsync")
    }
    async with PostgresSessionStore(dsn, schema=schema) as store:
        session = await store.create(now=clock.now())
        limits = Limits(max_active=iterations + WARM_UP)
        async with LiveSchedule(session, IdleAgent(), settings=Settings(limits=limits)) as live:
            tools = ScheduleTools(live)
            arguments = {"prompt": PROMPT, "after_seconds": DELAY_SECONDS}
            baseline: list[float] = []
            creates: list[float] = []
            for iteration in range(WARM_UP + iterations):
                start = time.perf_counter_ns()
                await raw.execute(insert, (iteration, data))
                middle = time.perf_counter_ns()
                result = await tools.call("schedule_create", arguments)
                end = time.perf_counter_ns()
                if result.get("ok") is not True:
                    raise RuntimeError(f"schedule_create failed: {result}")
                if iteration >= WARM_UP:
                    baseline.append((middle - start) / 1_000)
                    creates.append((end - middle) / 1_000)
            flushes = session.flush_count
        await session.close()
    await raw.close()

    print(
        f"Python {platform.python_version()}, PostgreSQL {settings['server_version']} "
        f"(synchronous_commit={settings['synchronous_commit']}, fsync={settings['fsync']}), "
        f"{os.cpu_count()} CPUs"
    )
    print(f"{iterations} iterations after {WARM_UP} warm-up, interleaved; payload {len(data)} B")
    print(f"{flushes} commits for {WARM_UP + iterations} creates on the store")
    print()
    print("durable write (µs)                    p50      p90      p99   p50 / baseline")
    floor = statistics.median(baseline)
    for label, samples in (
        ("raw INSERT + COMMIT (baseline)", baseline),
        ("ScheduleTools.call schedule_create", creates),
    ):
        p50 = statistics.median(samples)
        print(
            f"{label:<35} {p50:8.1f} {percentile(samples, 0.9):8.1f} "
            f"{percentile(samples, 0.99):8.1f}   {p50 / floor:6.2f}"
        )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn", default=os.environ.get("SESSION_SCHEDULE_PG_DSN", DEFAULT_DSN))
    parser.add_argument("--iterations", type=int, default=1000)
    arguments = parser.parse_args(argv)
    schema = f"bench_{os.getpid()}"
    migrate(arguments.dsn, schema=schema)
    try:
        asyncio.run(run(arguments.dsn, schema, arguments.iterations))
    finally:
        with psycopg.connect(arguments.dsn, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main(sys.argv[1:])
