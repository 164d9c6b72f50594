"""Forking a JSONL session and opening the fork, against copying its bytes and opening its parent.

Builds a format-2 JSONL session of ``--changes`` realistic history changes (the replay
benchmark's mix: creates, dispatches at new minutes, deletes) and opens and closes it once so it
has its checkpoint, then reads it back whole once and appends an entry, so that its checkpoint
carries the index of where each megabyte of the log starts, as a session in use does. Then,
each in a fresh process, ``--repeat`` times:

- a raw copy of the file's bytes (``shutil.copyfile``, which is ``sendfile`` on Linux, then
  fsync'd) — the baseline;
- ``store.fork`` of the whole session (closing the fork at once);
- ``store.fork`` at the middle of the session, before the parent's checkpoint (the fork then
  reads and decodes its parent up to the segment that holds the fork point);
- opening the parent and the fork (``store.open`` plus ``LiveSchedule.start``);
- opening the parent, and the fork, out of the page cache (``posix_fadvise(DONTNEED)`` of the
  log and its checkpoint), as after a reboot: for the fork, that is opening it after a power
  cut (the fork and its checkpoint are fsync'd as it is created, so the disk holds both);
- opening the fork without its checkpoint (what a fork cost when its checkpoint was lost).

Prints medians of wall time and the ratios to the raw copy and to the parent's open.

With ``--store sqlite`` (or ``postgres``: a new schema in the database at
``$SESSION_SCHEDULE_PG_DSN``, dropped afterwards) the session is a database's (its rows inserted
directly, then opened and closed once so it has its checkpoint), and the baseline is copying its
rows in SQL within the database (``INSERT … SELECT`` of the session's rows under a new id, with
its session row, in one transaction, committed as the store commits: SQLite's with
``synchronous=FULL``). Measured, each in a fresh process: that copy; ``store.fork`` of the whole
session and at its middle (before the parent's checkpoint); opening the parent, the fork, the
fork in a process already using the store (its connection or pool open, as a host's is), and the
fork without its checkpoint (what opening a fork cost when its process died before closing it,
before forks were written with one). ``--before DIR`` also runs the two forks with the package in
``DIR`` (another checkout's ``src``), alternately with this one's, in the same run.

    python3 dev.py bench fork [--store jsonl|sqlite|postgres] [--changes N] [--repeat R]
        [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from session_schedule.runtime.live import LiveSchedule
from session_schedule.runtime.turns import TurnQueue
from session_schedule.session import (
    JsonlSessionStore,
    SessionId,
    SessionStore,
    SqliteSessionStore,
    user_message,
)
from session_schedule.testing import FakeClock

SID = SessionId("s_benchopen000")  # the id open_session.write_jsonl writes
FORK = SessionId("s_benchfork001")
NOW = "2026-11-29T20:00:00.000Z"


async def open_and_close(store: SessionStore, session_id: SessionId) -> None:
    handle = await store.open(session_id)
    turns = TurnQueue(handle)
    live = LiveSchedule(handle, turns, clock=FakeClock(NOW))
    await live.start()
    await live.close()
    await turns.close()
    await handle.close()


async def build(data: Path, changes: int) -> None:
    from open_session import write_jsonl  # noqa: PLC0415 - only in the parent process
    from replay import synthetic_log  # noqa: PLC0415

    store = JsonlSessionStore(data)
    data.mkdir(mode=0o700)
    write_jsonl(store.path_of(SID), synthetic_log(changes))
    await open_and_close(store, SID)  # writes the parent's checkpoint
    # A session in use has read its older entries back (and checkpointed every 1,024 entries):
    # its checkpoint carries the index of where each megabyte of the log starts.
    handle = await store.open(SID)
    for _ in handle.entries:
        pass
    handle.append("message", user_message("the index is built", at=FakeClock(NOW).now()))
    await handle.barrier()
    await handle.close()


async def child(operation: str, data: Path) -> tuple[float, float]:
    store = JsonlSessionStore(data)
    start, cpu = time.perf_counter(), time.process_time()
    if operation == "copy":
        target = data / "copy.tmp"
        shutil.copyfile(store.path_of(SID), target)  # sendfile(2) on Linux
        with target.open("rb") as file:
            os.fsync(file.fileno())
    elif operation in ("fork", "fork-middle"):
        at = None
        if operation == "fork-middle":
            at = (await store.read(SID)).header.seed_length + int(os.environ["FORK_AT"])
            start, cpu = time.perf_counter(), time.process_time()
        handle = await store.fork(SID, at=at, now=FakeClock(NOW).now(), session_id=FORK)
        await handle.close()
    elif operation in ("open-fork-evicted", "open-parent-evicted"):
        session = FORK if operation == "open-fork-evicted" else SID
        for path in (store.path_of(session), store.checkpoint_path(session)):
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        start, cpu = time.perf_counter(), time.process_time()
        await open_and_close(store, session)
    elif operation == "open-fork-cold":
        store.checkpoint_path(FORK).unlink()
        start, cpu = time.perf_counter(), time.process_time()
        await open_and_close(store, FORK)
    elif operation == "open-parent":
        await open_and_close(store, SID)
    else:
        await open_and_close(store, FORK)
    return time.perf_counter() - start, time.process_time() - cpu


DATABASE = "sessions.db"
COPY = SessionId("s_benchcopy001")
_BATCH = 50_000
DSN_VARIABLE = "SESSION_SCHEDULE_PG_DSN"


def _dsn() -> str:
    return os.environ[DSN_VARIABLE]


@contextlib.asynccontextmanager
async def database_store(kind: str, where: str) -> AsyncIterator[SessionStore]:
    """The store of ``kind`` at ``where`` (SQLite: the directory of its database file;
    PostgreSQL: the schema, in the database at ``$SESSION_SCHEDULE_PG_DSN``)."""
    if kind == "sqlite":
        yield SqliteSessionStore(Path(where) / DATABASE)
        return
    from session_schedule.session.postgres import PostgresSessionStore  # noqa: PLC0415

    # Decoding the whole parent (the code before forks had checkpoints) can outlast 15 s.
    async with PostgresSessionStore(_dsn(), schema=where, lease_seconds=600) as store:
        yield store


def run_sql(kind: str, where: str, statements: Sequence[tuple[str, Sequence[object]]]) -> None:
    """``statements`` in one transaction, committed durably (``{t}``: where the tables are)."""
    if kind == "sqlite":
        connection = sqlite3.connect(Path(where) / DATABASE, isolation_level=None)
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute("BEGIN IMMEDIATE")
            for statement, parameters in statements:
                connection.execute(statement.format(t=""), parameters)
            connection.execute("COMMIT")
        finally:
            connection.close()
        return
    import psycopg  # noqa: PLC0415 - only with a database

    with psycopg.connect(_dsn()) as pg, pg.transaction():
        for statement, parameters in statements:
            text = statement.format(t=f"{where}.").replace("?", "%s")
            pg.execute(text.encode(), parameters)


async def build_database(kind: str, where: str, changes: int) -> None:
    from replay import synthetic_log  # noqa: PLC0415 - only in the parent process

    if kind == "sqlite":
        Path(where).mkdir(mode=0o700)
    else:
        from session_schedule.session.postgres_schema import migrate  # noqa: PLC0415

        migrate(_dsn(), schema=where)
    payloads = synthetic_log(changes)
    async with database_store(kind, where) as store:
        await (await store.create(now=FakeClock(NOW).now(), session_id=SID)).close()
        insert = "INSERT INTO {t}entries (session_id, position, type, data) VALUES (?, ?, ?, ?)"
        if kind == "sqlite":
            database = Path(where) / DATABASE
            with contextlib.closing(sqlite3.connect(database)) as connection, connection:
                for start in range(0, len(payloads), _BATCH):
                    connection.executemany(
                        insert.format(t=""),
                        (
                            (SID, start + n, "schedule/change", payload.decode())
                            for n, payload in enumerate(payloads[start : start + _BATCH])
                        ),
                    )
        else:
            import psycopg  # noqa: PLC0415

            with psycopg.connect(_dsn(), autocommit=True) as pg:
                copy_sql = f"COPY {where}.entries (session_id, position, type, data) FROM STDIN"
                with pg.cursor() as cursor, cursor.copy(copy_sql.encode()) as copy:
                    for position, payload in enumerate(payloads):
                        copy.write_row((SID, position, "schedule/change", payload))
        await open_and_close(store, SID)  # decodes it whole once, and writes its checkpoint


COPY_ROWS = [
    (
        "INSERT INTO {t}sessions (id, header) SELECT ?, header FROM {t}sessions WHERE id = ?",
        (COPY, SID),
    ),
    (
        (
            "INSERT INTO {t}entries (session_id, position, type, data)"
            " SELECT ?, position, type, data FROM {t}entries WHERE session_id = ? ORDER BY position"
        ),
        (COPY, SID),
    ),
]
"""The baseline: the session's rows copied under a new id in SQL, as a store commits."""


def reset_database(kind: str, where: str) -> None:
    """Remove the fork and the copy, so the next run starts as the first did."""
    tables = [("checkpoints", "session_id"), ("next_targets", "session_id")]
    if kind == "postgres":
        tables.append(("leases", "session_id"))
    tables += [("entries", "session_id"), ("sessions", "id")]
    run_sql(
        kind,
        where,
        [
            (f"DELETE FROM {{t}}{table} WHERE {column} = ?", (session,))  # noqa: S608
            for session in (FORK, COPY)
            for table, column in tables
        ],
    )
    if kind == "sqlite":
        with contextlib.closing(sqlite3.connect(Path(where) / DATABASE)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def database_child(kind: str, operation: str, where: str) -> tuple[float, float]:
    async with database_store(kind, where) as store:
        start, cpu = time.perf_counter(), time.process_time()
        if operation == "copy":
            run_sql(kind, where, COPY_ROWS)
        elif operation in ("fork", "fork-middle"):
            at = None
            if operation == "fork-middle":
                at = int(os.environ["FORK_AT"])
            handle = await store.fork(SID, at=at, now=FakeClock(NOW).now(), session_id=FORK)
            await handle.close()
        elif operation == "open-fork-cold":
            run_sql(kind, where, [("DELETE FROM {t}checkpoints WHERE session_id = ?", (FORK,))])
            start, cpu = time.perf_counter(), time.process_time()
            await open_and_close(store, FORK)
        elif operation == "open-parent":
            await open_and_close(store, SID)
        elif operation == "open-fork-warm":
            # A process already using the store (its connection or pool open), as a host or an
            # application opening a fork is.
            await store.list()
            start, cpu = time.perf_counter(), time.process_time()
            await open_and_close(store, FORK)
        else:
            await open_and_close(store, FORK)
        return time.perf_counter() - start, time.process_time() - cpu


def run_database(kind: str, changes: int, repeat: int, before: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        where = (
            str(Path(tmp) / "data") if kind == "sqlite" else f"bench_fork_{secrets.token_hex(4)}"
        )
        try:
            asyncio.run(build_database(kind, where, changes))
            measure_database(kind, where, changes, repeat, before)
        finally:
            if kind == "postgres":
                import psycopg  # noqa: PLC0415

                with psycopg.connect(_dsn(), autocommit=True) as connection:
                    connection.execute(f"DROP SCHEMA {where} CASCADE".encode())


def measure_database(kind: str, where: str, changes: int, repeat: int, before: str | None) -> None:
    keys = ["copy", "fork", "middle", "parent", "open", "warm", "cold"]
    if before:
        keys += ["fork-before", "middle-before"]
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in keys}

    def child_run(operation: str, src: str | None = None) -> tuple[float, float]:
        return run_child(operation, Path(where), changes, store=kind, src=src)

    def fork_runs(suffix: str, src: str | None) -> None:
        reset_database(kind, where)
        times[f"middle{suffix}"].append(child_run("fork-middle", src))
        reset_database(kind, where)
        times[f"fork{suffix}"].append(child_run("fork", src))

    for _ in range(repeat):
        reset_database(kind, where)
        times["copy"].append(child_run("copy"))
        if before:
            fork_runs("-before", before)
        fork_runs("", None)
        times["parent"].append(child_run("open-parent"))
        times["open"].append(child_run("open-fork"))
        times["warm"].append(child_run("open-fork-warm"))
        times["cold"].append(child_run("open-fork-cold"))
    wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
    name = "SQLite" if kind == "sqlite" else "PostgreSQL"
    print(
        f"{name} session of {changes:,} changes, medians of {repeat} fresh processes "
        "(wall, and CPU of the process):"
    )

    def line(key: str, label: str, base: str, name: str) -> None:
        print(
            f"  {label:<40} {wall[key] * 1e3:8.1f} ms wall {cpu[key] * 1e3:8.1f} ms CPU"
            f"  {wall[key] / wall[base]:7.2f}x {name}"
        )

    line("copy", "copy the rows in SQL (INSERT … SELECT)", "copy", "the copy")
    line("fork", "fork (whole session)", "copy", "the copy")
    if before:
        line("fork-before", "fork (whole session), before", "copy", "the copy")
    line("middle", "fork at the middle", "copy", "the copy")
    if before:
        line("middle-before", "fork at the middle, before", "copy", "the copy")
    line("parent", "open the parent (checkpoint)", "parent", "the parent's open")
    line("open", "open the fork", "parent", "the parent's open")
    line("warm", "open the fork, store already in use", "parent", "the parent's open")
    line("cold", "open the fork, checkpoint deleted", "parent", "the parent's open")


def reset(data: Path) -> None:
    """Remove the fork (and the raw copy) so the next ``fork`` run starts as the first did."""
    for path in data.iterdir():
        if path.name.startswith((FORK, "copy")) or FORK in path.name:
            path.unlink()


def run_child(
    operation: str, data: Path, changes: int = 0, *, store: str = "jsonl", src: str | None = None
) -> tuple[float, float]:
    env = {**os.environ, "FORK_AT": str(changes // 2)}
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, __file__, "--store", store, "--child", operation, str(data)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--store", choices=("jsonl", "sqlite", "postgres"), default="jsonl")
    parser.add_argument("--before", help="also fork with the package in this directory")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        operation, where = args.child
        if args.store == "jsonl":
            print(*asyncio.run(child(operation, Path(where))))
        else:
            print(*asyncio.run(database_child(args.store, operation, where)))
        return
    if args.store != "jsonl":
        run_database(args.store, args.changes, args.repeat, args.before)
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        asyncio.run(build(data, args.changes))
        size = JsonlSessionStore(data).path_of(SID).stat().st_size
        keys = ("copy", "fork", "middle", "parent", "open", "parent-evicted", "evicted", "cold")
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in keys}
        for _ in range(args.repeat):
            reset(data)
            times["copy"].append(run_child("copy", data))
            times["middle"].append(run_child("fork-middle", data, args.changes))
            reset(data)
            times["fork"].append(run_child("fork", data))
            times["parent"].append(run_child("open-parent", data))
            times["open"].append(run_child("open-fork", data))
            times["parent-evicted"].append(run_child("open-parent-evicted", data))
            times["evicted"].append(run_child("open-fork-evicted", data))
            times["cold"].append(run_child("open-fork-cold", data))
        wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
        print(
            f"JSONL session of {args.changes:,} changes ({size / 1e6:.1f} MB), "
            f"medians of {args.repeat} fresh processes (wall, and CPU of the process):"
        )

        def line(key: str, label: str, base: str, name: str) -> None:
            print(
                f"  {label:<34} {wall[key] * 1e3:8.1f} ms wall {cpu[key] * 1e3:8.1f} ms CPU"
                f"  {wall[key] / wall[base]:7.2f}x {name}"
            )

        line("copy", "raw copy of the bytes (fsync)", "copy", "the raw copy")
        line("fork", "fork (whole session)", "copy", "the raw copy")
        line("middle", "fork at the middle", "copy", "the raw copy")
        line("parent", "open the parent (checkpoint)", "parent", "the parent's open")
        line("open", "open the fork", "parent", "the parent's open")
        line("parent-evicted", "open the parent, out of the cache", "parent", "the parent's open")
        line("evicted", "open the fork after a power cut", "parent", "the parent's open")
        line("cold", "open the fork, checkpoint deleted", "parent", "the parent's open")


if __name__ == "__main__":
    main()
