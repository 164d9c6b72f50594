"""What a live session costs a process: threads, descriptors, memory, tasks and idle CPU.

    python3 dev.py bench live_sessions [--store jsonl|sqlite|postgres|all] [--sessions N]
                                       [--idle I] [--fd-limit F] [--dsn DSN] [--dir PATH]

Per store: ``N`` sessions with one ``at`` reminder each, due 30 days out, are created through
the store (setup, not measured). Then a fresh child process, whose soft descriptor limit is ``F``
(default: the hard limit), builds the store and reads its **baseline** — threads, open
descriptors, ``VmRSS`` and asyncio tasks — with nothing open; then opens every session and
starts a :class:`~session_schedule.runtime.live.LiveSchedule` (with its own owner task, as a
chat, the overlay or an application keeping sessions open would) on an always-idle agent, and
reads the same figures again, plus the process CPU time (every thread) over ``I`` seconds of
idling (default 60: two of an owner's longest sleeps, so every periodic wake-up falls inside
it), as a percentage of one core. Each figure is printed next to its baseline and as a cost
per live session. A session that cannot be opened (``EMFILE``, a database that cannot open one
more file) stops the opening; the child reports how many were live and what stopped it (it keeps
a few descriptors in reserve while opening, so that it can still measure after that).

Goals (issue 25): with 10,000 live sessions, at most 1,024 descriptors and 64 threads,
150 MiB and 0.5 % idle CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Final

from session_schedule.core.changes import create_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant
from session_schedule.core.records import AtScheduleRecord
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session import JsonlSessionStore, SessionStore, SqliteSessionStore
from session_schedule.session.ids import SessionId
from session_schedule.testing import IdleAgent

DAY_MS: Final = 86_400_000
DEFAULT_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"
SETUP_CONCURRENCY: Final = 16
SPARE_DESCRIPTORS: Final = 16
"""Held while opening and released before measuring (they count in neither figure)."""
STORES: Final = ("jsonl", "sqlite", "postgres")


def make_store(kind: str, place: str) -> SessionStore:
    if kind == "jsonl":
        return JsonlSessionStore(Path(place))
    if kind == "sqlite":
        return SqliteSessionStore(Path(place))
    from session_schedule.session.postgres import PostgresSessionStore  # noqa: PLC0415

    dsn, schema = place.split(" ", 1)
    return PostgresSessionStore(dsn, schema=schema, pool_size=10)


async def close_store(store: object) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        await close()


async def populate(store: SessionStore, sessions: int) -> list[SessionId]:
    now = int(time.time() * 1000)
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)
    made: list[SessionId] = []

    async def one(index: int) -> None:
        async with gate, await store.create(now=Instant(now)) as handle:
            record = AtScheduleRecord(
                id=make_schedule_id(1),
                prompt=f"reminder of session {index}",
                scheduled_at=format_instant(Instant(now + 30 * DAY_MS)),
            )
            handle.append("schedule/change", create_change(record))
            await handle.barrier()
            made.append(handle.id)

    await asyncio.gather(*(one(index) for index in range(sessions)))
    return made


# -- the measured child --------------------------------------------------------------------


def figures() -> dict[str, float]:
    rss = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return {
        "threads": threading.active_count(),
        "descriptors": sum(1 for _ in Path("/proc/self/fd").iterdir()),
        "rss_mib": rss / 1024,
        "tasks": len(asyncio.all_tasks()),
    }


async def child(kind: str, place: str, ids: list[SessionId], idle: float) -> dict[str, object]:
    store = make_store(kind, place)
    # The store's own resources (a pool, the index) are part of the baseline.
    await store.due_sessions(Instant(0))
    baseline = figures()
    # Kept for the measuring: a process out of descriptors could not even list its own.
    spare = [os.open(os.devnull, os.O_RDONLY) for _ in range(SPARE_DESCRIPTORS)]
    stopped = ""
    async with AsyncExitStack() as resources:
        started = time.perf_counter()
        live = 0
        for session_id in ids:
            try:
                handle = await resources.enter_async_context(await store.open(session_id))
                await resources.enter_async_context(LiveSchedule(handle, IdleAgent()))
            except Exception as error:  # what stopped the opening is the figure
                stopped = f"{type(error).__name__}: {error}"
                break
            live += 1
        opening = time.perf_counter() - started
        for fd in spare:
            os.close(fd)
        await asyncio.sleep(1.0)
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(idle)
        idle_cpu = (time.process_time() - cpu) / (time.monotonic() - wall) * 100
        loaded = figures()
    await close_store(store)
    return {
        "baseline": baseline,
        "live": loaded,
        "sessions": live,
        "opening_s": opening,
        "idle_cpu_percent": idle_cpu,
        "stopped": stopped,
    }


def child_main(kind: str, place: str, ids_file: str, idle: str, fd_limit: str) -> None:
    limit = int(fd_limit)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard) if limit else hard, hard))
    ids = [SessionId(line) for line in Path(ids_file).read_text().split()]
    print(json.dumps(asyncio.run(child(kind, place, ids, float(idle)))))


# -- the parent ----------------------------------------------------------------------------


def measure(kind: str, place: str, arguments: argparse.Namespace, directory: Path) -> None:
    started = time.time()

    async def setup() -> list[SessionId]:
        store = make_store(kind, place)
        try:
            return await populate(store, arguments.sessions)
        finally:
            await close_store(store)

    ids = asyncio.run(setup())
    ids_file = directory / f"{kind}.ids"
    ids_file.write_text("\n".join(ids))
    print(f"{kind}: {len(ids)} sessions set up in {time.time() - started:.1f} s", flush=True)
    result = subprocess.run(  # noqa: S603 - this very script, with our own arguments
        [
            sys.executable,
            __file__,
            "--child",
            kind,
            place,
            str(ids_file),
            str(arguments.idle),
            str(arguments.fd_limit),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    found = json.loads(result.stdout.splitlines()[-1])
    base, live, count = found["baseline"], found["live"], max(1, found["sessions"])
    print(
        f"  live sessions: {found['sessions']} of {len(ids)} (opened in "
        f"{found['opening_s']:.1f} s)"
        + (f"; stopped by {found['stopped']}" if found["stopped"] else "")
    )
    for name, unit in (("threads", ""), ("descriptors", ""), ("rss_mib", " MiB"), ("tasks", "")):
        grown = live[name] - base[name]
        print(
            f"  {name:<12} {live[name]:>9.0f}{unit} (baseline {base[name]:.0f}{unit}; "
            f"{grown / count:.3f}{unit} per live session)"
        )
    print(f"  idle CPU     {found['idle_cpu_percent']:.3f} % of a core over {arguments.idle:.0f} s")


def drop(dsn: str, schema: str) -> None:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=(*STORES, "all"), default="all")
    parser.add_argument("--sessions", type=int, default=10_000)
    # Two of an owner's longest sleeps (max_wait_seconds, 30 s): a shorter window can miss
    # every periodic wake-up.
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument(
        "--fd-limit", type=int, default=0, help="the child's soft descriptor limit (0: the hard)"
    )
    parser.add_argument("--dsn", default=os.environ.get("SESSION_SCHEDULE_PG_DSN", DEFAULT_DSN))
    parser.add_argument("--dir", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        child_main(*argv[1:])
        return
    arguments = parse(argv)
    print(
        f"load average before: {' '.join(f'{value:.2f}' for value in os.getloadavg())}; "
        f"{os.cpu_count()} cores",
        flush=True,
    )
    with tempfile.TemporaryDirectory(dir=arguments.dir) as temporary:
        directory = Path(temporary)
        for kind in STORES if arguments.store == "all" else (arguments.store,):
            if kind == "jsonl":
                place = str(directory / "jsonl")
            elif kind == "sqlite":
                place = str(directory / "sessions.db")
            else:
                from session_schedule.session.postgres_schema import migrate  # noqa: PLC0415

                schema = f"bench_live_{os.getpid()}"
                migrate(arguments.dsn, schema=schema)
                place = f"{arguments.dsn} {schema}"
            try:
                measure(kind, place, arguments, directory)
            finally:
                if kind == "postgres":
                    drop(arguments.dsn, schema)
    print(f"load average after: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main(sys.argv[1:])
