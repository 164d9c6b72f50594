"""Opening a year-old session: 1,000,000 history changes and 100 active reminders, in each store.

For the JSONL, SQLite and PostgreSQL stores (PostgreSQL only when ``SESSION_SCHEDULE_PG_DSN`` is
set), measures ``store.open`` plus ``LiveSchedule.start`` (the fold) and constructing a
``TurnQueue`` (the pending turns) from the session's checkpoint, against the same open without
one (the whole log strictly decoded and folded), in the same run: CPU time of the process (the
opening thread and the store's thread together; PostgreSQL's server is another process) and
wall time, medians. Then, once each, the memory an open session holds (tracemalloc: the peak
while opening and what stays allocated while it is open), with and without the checkpoint.

    python3 dev.py bench open_session [--changes N] [--repeat R] [--stores jsonl,sqlite,postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from replay import synthetic_log
from session_schedule.core.changes import create_change, encode_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.records import EveryScheduleRecord
from session_schedule.runtime.live import LiveSchedule
from session_schedule.runtime.turns import TurnQueue
from session_schedule.session import JsonlSessionStore, SessionId, SqliteSessionStore
from session_schedule.session.lines import (
    CHAIN_SEED,
    commit_line,
    entry_line,
    sealed_header_line,
)
from session_schedule.session.port import SessionHandle, SessionStore, make_header
from session_schedule.testing import FakeClock

SID = SessionId("s_benchopen000")
NOW = "2026-11-29T20:00:00.000Z"
ACTIVE = 100
_BATCH = 50_000


def entry_payloads(changes: int) -> list[bytes]:
    """``changes`` history changes, then ``ACTIVE`` Every records (canonical payloads)."""
    history = synthetic_log(changes)
    first = 10 * changes  # above every id the history uses
    active = [
        encode_change(
            create_change(
                EveryScheduleRecord(
                    id=make_schedule_id(first + n),
                    prompt=f"check the build, {n}",
                    every_seconds=3600,
                    scheduled_at="2030-01-01T00:00:00.000Z",
                )
            )
        )
        for n in range(ACTIVE)
    ]
    return history + active


def write_jsonl(path: Path, payloads: list[bytes]) -> None:
    """A format-2 file holding ``payloads`` as ``schedule/change`` entries."""
    header = make_header(
        SID, now=FakeClock(NOW).now(), parent_id=None, seed_length=0, format_version=2
    )
    out = [sealed_header_line(header)]
    previous = CHAIN_SEED
    for position, data in enumerate(payloads):
        line, previous = entry_line(position, "schedule/change", data, previous)
        out.append(line)
    out.append(commit_line(len(payloads), previous))
    path.write_bytes(b"".join(out))


@dataclass
class Subject:
    """One store holding the session, and how to remove its checkpoint."""

    name: str
    store: SessionStore
    forget_checkpoint: Callable[[], Awaitable[None]]


@contextlib.asynccontextmanager
async def jsonl_subject(directory: Path, payloads: list[bytes]) -> AsyncIterator[Subject]:
    store = JsonlSessionStore(directory / "data")
    store.data_dir.mkdir(mode=0o700)
    write_jsonl(store.path_of(SID), payloads)

    async def forget() -> None:
        store.checkpoint_path(SID).unlink(missing_ok=True)

    yield Subject("JSONL", store, forget)


@contextlib.asynccontextmanager
async def sqlite_subject(directory: Path, payloads: list[bytes]) -> AsyncIterator[Subject]:
    store = SqliteSessionStore(directory / "sessions.db")
    await (await store.create(now=FakeClock(NOW).now(), session_id=SID)).close()
    with contextlib.closing(sqlite3.connect(store.path)) as connection, connection:
        for start in range(0, len(payloads), _BATCH):
            connection.executemany(
                "INSERT INTO entries (session_id, position, type, data) VALUES (?, ?, ?, ?)",
                (
                    (SID, start + n, "schedule/change", data.decode())
                    for n, data in enumerate(payloads[start : start + _BATCH])
                ),
            )

    async def forget() -> None:
        with contextlib.closing(sqlite3.connect(store.path)) as connection, connection:
            connection.execute("DELETE FROM checkpoints")

    yield Subject("SQLite", store, forget)


@contextlib.asynccontextmanager
async def postgres_subject(dsn: str, payloads: list[bytes]) -> AsyncIterator[Subject]:
    import psycopg  # noqa: PLC0415 - only with a database

    from session_schedule.session.postgres import PostgresSessionStore  # noqa: PLC0415
    from session_schedule.session.postgres_schema import migrate  # noqa: PLC0415

    schema = f"bench_open_{secrets.token_hex(4)}"
    migrate(dsn, schema=schema)
    try:
        # Decoding a million rows without a checkpoint can outlast the default 15 s lease.
        async with PostgresSessionStore(dsn, schema=schema, lease_seconds=600) as store:
            await (await store.create(now=FakeClock(NOW).now(), session_id=SID)).close()
            with psycopg.connect(dsn, autocommit=True) as connection:
                copy_sql = f"COPY {schema}.entries (session_id, position, type, data) FROM STDIN"
                with connection.cursor() as cursor, cursor.copy(copy_sql.encode()) as copy:
                    for position, data in enumerate(payloads):
                        copy.write_row((SID, position, "schedule/change", data))

            async def forget() -> None:
                with psycopg.connect(dsn, autocommit=True) as connection:
                    connection.execute(f"DELETE FROM {schema}.checkpoints".encode())  # noqa: S608

            yield Subject("PostgreSQL", store, forget)
    finally:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {schema} CASCADE".encode())


@dataclass
class Opened:
    handle: SessionHandle
    live: LiveSchedule
    turns: TurnQueue

    async def close(self) -> None:
        active = len((await self.live.active())[1])
        await self.live.close()
        await self.turns.close()
        await self.handle.close()
        if active != ACTIVE:
            raise SystemExit(f"unexpected open: {active} active reminders, not {ACTIVE}")


async def open_and_start(store: SessionStore) -> Opened:
    handle = await store.open(SID)
    turns = TurnQueue(handle)
    live = LiveSchedule(handle, turns, clock=FakeClock(NOW))
    await live.start()
    return Opened(handle, live, turns)


async def timed(store: SessionStore, *, resumed: bool) -> tuple[float, float, float]:
    """CPU and wall seconds of one open, and wall seconds of the first ``schedule_list`` after
    it (the reminders' runs read); the session is closed again (writing a checkpoint)."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    opened = await open_and_start(store)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if (opened.handle.resume is not None) != resumed:
        raise SystemExit(f"unexpected open: resumed from a checkpoint: {not resumed}")
    first = time.perf_counter()
    await opened.live.active()
    first = time.perf_counter() - first
    await opened.close()
    return cpu, wall, first


async def memory(store: SessionStore) -> tuple[int, int]:
    """The peak bytes allocated while opening, and the bytes still allocated once open."""
    gc.collect()
    tracemalloc.start()
    try:
        opened = await open_and_start(store)
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    await opened.close()
    return peak, held


async def measure(subject: Subject, repeat: int) -> None:
    store = subject.store
    cold: list[tuple[float, float, float]] = []
    warm: list[tuple[float, float, float]] = []
    for _ in range(repeat):
        await subject.forget_checkpoint()
        cold.append(await timed(store, resumed=False))  # closing writes the checkpoint
        warm.append(await timed(store, resumed=True))
    cold_cpu, cold_wall, cold_list = (statistics.median(run[k] for run in cold) for k in (0, 1, 2))
    warm_cpu, warm_wall, warm_list = (statistics.median(run[k] for run in warm) for k in (0, 1, 2))
    await subject.forget_checkpoint()
    cold_peak, cold_held = await memory(store)  # closing writes the checkpoint
    warm_peak, warm_held = await memory(store)
    name = subject.name
    print(
        f"{name:<10} without a checkpoint  CPU {cold_cpu * 1e3:9.1f} ms  wall "
        f"{cold_wall * 1e3:9.1f} ms  memory peak {cold_peak / 1e6:8.1f} MB, held "
        f"{cold_held / 1e6:8.1f} MB"
    )
    print(
        f"{name:<10} from the checkpoint   CPU {warm_cpu * 1e3:9.1f} ms  wall "
        f"{warm_wall * 1e3:9.1f} ms  memory peak {warm_peak / 1e6:8.1f} MB, held "
        f"{warm_held / 1e6:8.1f} MB  (target <= 10 ms)"
    )
    print(
        f"{name:<10} ratio                 CPU {warm_cpu / cold_cpu:9.5f}     wall "
        f"{warm_wall / cold_wall:9.5f}     memory peak {warm_peak / cold_peak:8.5f},    held "
        f"{warm_held / cold_held:8.5f}"
    )
    print(
        f"{name:<10} first schedule_list   wall {cold_list * 1e3:9.1f} ms without a checkpoint, "
        f"{warm_list * 1e3:9.1f} ms from it  (target <= 2 ms)"
    )


async def run(changes: int, repeat: int, stores: list[str]) -> None:
    payloads = entry_payloads(changes)
    print(f"session: {changes:,} history changes + {ACTIVE} active; medians of {repeat} runs")
    dsn = os.environ.get("SESSION_SCHEDULE_PG_DSN")
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        if "jsonl" in stores:
            async with jsonl_subject(root, payloads) as subject:
                await measure(subject, repeat)
        if "sqlite" in stores:
            async with sqlite_subject(root, payloads) as subject:
                await measure(subject, repeat)
    if "postgres" in stores:
        if dsn is None:
            print("PostgreSQL: not measured (set SESSION_SCHEDULE_PG_DSN to include it)")
        else:
            async with postgres_subject(dsn, payloads) as subject:
                await measure(subject, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stores", default="jsonl,sqlite,postgres")
    args = parser.parse_args()
    asyncio.run(run(args.changes, args.repeat, args.stores.split(",")))


if __name__ == "__main__":
    main()
