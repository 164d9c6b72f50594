"""A host's idle CPU over many JSONL sessions: what the next-target index costs when nothing moves.

    python3 dev.py bench idle_index [--sessions N] [--idle I] [--polls P] [--dir PATH]
                                    [--postgres] [--dsn DSN]

Setup (not measured): ``N`` JSONL sessions, each with one ``at`` reminder due 2 to 30 days out,
created through the store; then the data directory's modification time is set an hour back, as
after a quiet hour (a directory changed within the last seconds is listed again at each poll).
Then, each in a fresh child process, in this order:

- **empty**: one ``ScheduleHost`` (default settings: a poll every 10 s) with an idle agent over an
  empty JSONL data directory: the same-run floor of a host that has nothing to read;
- **jsonl**: the same host over the ``N`` sessions;
- **postgres** (with ``--postgres``): the same host over ``N`` PostgreSQL sessions set up alike;

each reporting the process CPU time (every thread) over ``I`` seconds, counted from the end of
the host's first poll, as a percentage of one core. Then one child calls ``due_sessions`` ``P``
times on a fresh JSONL store over the ``N`` sessions, for the next 40 s as a host does (none is
due): the first call (a new reader: every session file is ``stat``'d) and the median of the
others (idle polls: the index's ``lstat`` and the directory's ``stat``), in wall time, thread
hop included; then creates one session (from another store) and times the next call, which
lists the directory again.

Goal (issue 25, item 3): idle CPU at 50,000 JSONL sessions <= 0.05 % of a core.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).parent))

from session_schedule.core.changes import create_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant
from session_schedule.core.records import AtScheduleRecord
from session_schedule.host import ScheduleHost
from session_schedule.runtime.clock import Clock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session import JsonlSessionStore, SessionHandle, SessionStore
from session_schedule.testing import IdleAgent
from shared import hostbench

DAY_MS: Final = 86_400_000
SETUP_CONCURRENCY: Final = 16
HORIZON_S: Final = 40.0
"""How far ahead a host's poll looks by default (``lead_seconds`` + ``poll_seconds``)."""


async def populate(store: SessionStore, sessions: int) -> None:
    rng = random.Random(1)
    now = int(time.time() * 1000)
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)

    async def one(index: int) -> None:
        record = AtScheduleRecord(
            id=make_schedule_id(1),
            prompt=f"reminder of session {index}",
            scheduled_at=format_instant(Instant(now + 2 * DAY_MS + rng.randrange(28 * DAY_MS))),
        )
        async with gate, await store.create(now=Instant(now)) as handle:
            handle.append("schedule/change", create_change(record))
            await handle.barrier()

    await asyncio.gather(*(one(index) for index in range(sessions)))
    await hostbench.close_store(store)


async def idle_host(kind: str, place: str, idle: float) -> dict[str, float]:
    store = hostbench.make_store(kind, place)

    @asynccontextmanager
    async def agents(
        session: SessionHandle, clock: Clock, settings: Settings, on_wake: Callable[[], None]
    ) -> AsyncIterator[LiveSchedule]:
        agent = IdleAgent(lambda _: None)
        async with LiveSchedule(
            session, agent, clock=clock, settings=settings, driven=True, on_wake=on_wake
        ) as schedule:
            yield schedule

    host = ScheduleHost(store, agents)
    async with host:
        while host.stats.polls < 1:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # whatever the first poll started
        idle_cpu = await hostbench.idle_cpu_percent(idle)
        polls = host.stats.polls
    await hostbench.close_store(store)
    return {"idle_cpu_percent": idle_cpu, "polls": polls}


async def polls(place: str, count: int) -> dict[str, float]:
    store = JsonlSessionStore(Path(place))
    times: list[float] = []
    found = 0
    for _ in range(count):
        started = time.perf_counter()
        horizon = Instant(int((time.time() + HORIZON_S) * 1000))
        found = len(await store.due_sessions(horizon, limit=1000))
        times.append(time.perf_counter() - started)
    # One new session (another store, as another process would): the directory is listed.
    await populate(JsonlSessionStore(Path(place)), 1)
    started = time.perf_counter()
    await store.due_sessions(Instant(int((time.time() + HORIZON_S) * 1000)), limit=1000)
    listed = time.perf_counter() - started
    return {
        "first_ms": times[0] * 1000,
        "idle_us": statistics.median(times[1:]) * 1e6,
        "found": found,
        "listed_ms": listed * 1000,
    }


def run_child(*arguments: str) -> dict[str, float]:
    figures: dict[str, float] = json.loads(hostbench.child_output(__file__, *arguments))
    return figures


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        mode, kind, place, value = sys.argv[2:6]
        if mode == "host":
            figures = asyncio.run(idle_host(kind, place, float(value)))
        else:
            figures = asyncio.run(polls(place, int(value)))
        print(json.dumps(figures))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50_000)
    parser.add_argument("--idle", type=float, default=120.0)
    parser.add_argument("--polls", type=int, default=50)
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument(
        "--dsn", default=os.environ.get("SESSION_SCHEDULE_PG_DSN", hostbench.DEFAULT_DSN)
    )
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=arguments.dir) as directory:
        empty = Path(directory) / "empty"
        empty.mkdir(mode=0o700)
        data = Path(directory) / "sessions"
        started = time.monotonic()
        asyncio.run(populate(JsonlSessionStore(data), arguments.sessions))
        hour_ago = time.time_ns() - 3600 * 10**9
        os.utime(data, ns=(hour_ago, hour_ago))
        print(
            f"{arguments.sessions} JSONL sessions set up in {time.monotonic() - started:.0f} s; "
            f"idle phases of {arguments.idle:.0f} s",
            flush=True,
        )
        idle = str(arguments.idle)
        floor = run_child("host", "jsonl", str(empty), idle)
        print(
            f"  empty data directory (baseline): idle CPU {floor['idle_cpu_percent']:.4f} % "
            f"of a core ({floor['polls']:.0f} polls)",
            flush=True,
        )
        fleet = run_child("host", "jsonl", str(data), idle)
        print(
            f"  {arguments.sessions} JSONL sessions: idle CPU {fleet['idle_cpu_percent']:.4f} % "
            f"of a core ({fleet['polls']:.0f} polls); "
            f"{fleet['idle_cpu_percent'] / max(floor['idle_cpu_percent'], 1e-9):.2f}x the "
            "empty directory (goal <= 0.05 %)",
            flush=True,
        )
        poll = run_child("poll", "jsonl", str(data), str(arguments.polls))
        print(
            f"  due_sessions on a fresh store ({poll['found']:.0f} found): first call (a full "
            f"scan) {poll['first_ms']:.0f} ms; idle polls median {poll['idle_us']:.0f} us "
            f"({poll['first_ms'] * 1000 / poll['idle_us']:.0f}x less); the poll after one "
            f"session was created (the directory listed again): {poll.get('listed_ms', 0):.0f} ms",
            flush=True,
        )
        if arguments.postgres:
            place, schema = hostbench.postgres_place(arguments.dsn, "bench_idle_index")
            try:
                asyncio.run(populate(hostbench.make_store("postgres", place), arguments.sessions))
                base = run_child("host", "postgres", place, idle)
            finally:
                hostbench.drop(arguments.dsn, schema)
            print(
                f"  {arguments.sessions} PostgreSQL sessions: idle CPU "
                f"{base['idle_cpu_percent']:.4f} % of a core ({base['polls']:.0f} polls); JSONL "
                f"is {fleet['idle_cpu_percent'] / max(base['idle_cpu_percent'], 1e-9):.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
