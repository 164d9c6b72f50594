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

With ``--store sqlite`` the session is a SQLite database's (its rows inserted directly, then
opened and closed once so it has its checkpoint), and the baseline is copying its rows in SQL
within the database (``INSERT … SELECT`` of the session's rows under a new id, with its session
row, in one ``BEGIN IMMEDIATE`` transaction, committed with ``synchronous=FULL`` as the store
commits). Measured, each in a fresh process: that copy; ``store.fork`` of the whole session and
at its middle (before the parent's checkpoint); opening the parent, the fork, and the fork
without its checkpoint (what opening a fork cost when its process died before closing it, before
forks were written with one). ``--before DIR`` also runs the two forks with the package in
``DIR`` (another checkout's ``src``), alternately with this one's, in the same run.

    python3 dev.py bench fork [--store jsonl|sqlite] [--changes N] [--repeat R] [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
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


async def build_sqlite(data: Path, changes: int) -> None:
    from replay import synthetic_log  # noqa: PLC0415 - only in the parent process

    data.mkdir(mode=0o700)
    store = SqliteSessionStore(data / DATABASE)
    await (await store.create(now=FakeClock(NOW).now(), session_id=SID)).close()
    payloads = synthetic_log(changes)
    with contextlib.closing(sqlite3.connect(store.path)) as connection, connection:
        for start in range(0, len(payloads), _BATCH):
            connection.executemany(
                "INSERT INTO entries (session_id, position, type, data) VALUES (?, ?, ?, ?)",
                (
                    (SID, start + n, "schedule/change", payload.decode())
                    for n, payload in enumerate(payloads[start : start + _BATCH])
                ),
            )
    await open_and_close(store, SID)  # decodes it whole once, and writes its checkpoint


def copy_rows(path: Path) -> None:
    """The baseline: the session's rows copied under a new id in SQL, as a store commits."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            "INSERT INTO sessions (id, header) SELECT ?, header FROM sessions WHERE id = ?",
            (COPY, SID),
        )
        connection.execute(
            "INSERT INTO entries (session_id, position, type, data)"
            " SELECT ?, position, type, data FROM entries WHERE session_id = ?"
            " ORDER BY position",
            (COPY, SID),
        )
        connection.execute("COMMIT")
    finally:
        connection.close()


def reset_sqlite(path: Path) -> None:
    """Remove the fork and the copy, so the next run starts as the first did."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        for session in (FORK, COPY):
            for table, column in (
                ("checkpoints", "session_id"),
                ("next_targets", "session_id"),
                ("entries", "session_id"),
                ("sessions", "id"),
            ):
                connection.execute(f"DELETE FROM {table} WHERE {column} = ?", (session,))  # noqa: S608
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def sqlite_child(operation: str, data: Path) -> tuple[float, float]:
    path = data / DATABASE
    store = SqliteSessionStore(path)
    start, cpu = time.perf_counter(), time.process_time()
    if operation == "copy":
        copy_rows(path)
    elif operation in ("fork", "fork-middle"):
        at = None
        if operation == "fork-middle":
            at = int(os.environ["FORK_AT"])
        handle = await store.fork(SID, at=at, now=FakeClock(NOW).now(), session_id=FORK)
        await handle.close()
    elif operation == "open-fork-cold":
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
            connection.execute("DELETE FROM checkpoints WHERE session_id = ?", (FORK,))
        start, cpu = time.perf_counter(), time.process_time()
        await open_and_close(store, FORK)
    elif operation == "open-parent":
        await open_and_close(store, SID)
    else:
        await open_and_close(store, FORK)
    return time.perf_counter() - start, time.process_time() - cpu


def run_sqlite(changes: int, repeat: int, before: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        asyncio.run(build_sqlite(data, changes))
        path = data / DATABASE
        size = path.stat().st_size
        keys = ["copy", "fork", "middle", "parent", "open", "cold"]
        if before:
            keys += ["fork-before", "middle-before"]
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in keys}

        def fork_runs(suffix: str, src: str | None) -> None:
            reset_sqlite(path)
            times[f"middle{suffix}"].append(
                run_child("fork-middle", data, changes, store="sqlite", src=src)
            )
            reset_sqlite(path)
            times[f"fork{suffix}"].append(run_child("fork", data, store="sqlite", src=src))

        for _ in range(repeat):
            reset_sqlite(path)
            times["copy"].append(run_child("copy", data, store="sqlite"))
            if before:
                fork_runs("-before", before)
            fork_runs("", None)
            times["parent"].append(run_child("open-parent", data, store="sqlite"))
            times["open"].append(run_child("open-fork", data, store="sqlite"))
            times["cold"].append(run_child("open-fork-cold", data, store="sqlite"))
        wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
        print(
            f"SQLite session of {changes:,} changes ({size / 1e6:.1f} MB database), "
            f"medians of {repeat} fresh processes (wall, and CPU of the process):"
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
    parser.add_argument("--store", choices=("jsonl", "sqlite"), default="jsonl")
    parser.add_argument("--before", help="also fork with the package in this directory")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run = sqlite_child if args.store == "sqlite" else child
        print(*asyncio.run(run(args.child[0], Path(args.child[1]))))
        return
    if args.store == "sqlite":
        run_sqlite(args.changes, args.repeat, args.before)
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
