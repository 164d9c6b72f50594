"""One ScheduleHost over many sessions: memory, idle CPU, lateness, open time; and failover.

    python3 dev.py bench host [--store sqlite|postgres|both] [--sessions N] [--reminders R]
                              [--due D] [--span S] [--idle I] [--fd-limit F] [--dsn DSN]
                              [--dir PATH]
    python3 dev.py bench host --failover K [--lease L] [--dsn DSN]

**Fleet mode** (default), per store: ``N`` sessions with ``R`` ``at`` reminders each are created
through the store (setup, not measured). ``D`` sessions get their first reminder due within a
window of ``S`` seconds that starts after the idle phase; every other reminder is due 2 to 30 days
out. Then a fresh child process runs one ``ScheduleHost`` (default settings) over the store with
an always-idle agent that stamps ``time.time()`` when ``followup()`` accepts a turn (with
``--fd-limit F``, under a soft limit of ``F`` descriptors), and reports:

- **resident memory**: ``VmRSS`` after the idle phase, and ``VmHWM`` (the peak) at the end;
- **idle CPU**: process CPU time (every thread) over ``I`` seconds when nothing is due, as a
  percentage of one core;
- **lateness**: acceptance - target of each due reminder, p50/p99/max, next to bare
  ``loop.call_at`` timers for the very same targets, scheduled in the same process at the same
  time (so both see the same load);
- **open time**: how long ``store.open`` plus starting the session's Schedule took for each
  session the host opened, p50/p99.

**Failover mode** (PostgreSQL): ``K`` times, one session with one reminder due in 8 s; host A
takes it (it opens sessions 3 s before their target), host B starts, A is SIGKILLed 0.5 s
before the target; the failover time is B's acceptance - the kill (the rest of A's lease, then
B's retry, poll and bounded wait). Leases of ``L`` seconds;
hosts poll every 0.5 s and retry a held session every 0.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).parent))

from session_schedule.core.changes import create_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant
from session_schedule.core.records import AtScheduleRecord
from session_schedule.host import HostSettings, ScheduleHost
from session_schedule.session import SessionHandle, SessionStore
from shared.hostbench import (
    DEFAULT_DSN,
    child_output,
    close_store,
    drop,
    idle_cpu_percent,
    make_store,
    postgres_place,
    stamping_agents,
)

DAY_MS: Final = 86_400_000
SETUP_CONCURRENCY: Final = 16
LEAD_S: Final = 3.0
"""The failover hosts' lead: host A holds the session this long before its target."""


class TimedStore:
    """A store whose ``open`` durations are recorded (the rest passes through)."""

    def __init__(self, store: SessionStore, opens: list[float]) -> None:
        self._store = store
        self._opens = opens

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def open(self, session_id: str) -> SessionHandle:
        started = time.perf_counter()
        handle = await self._store.open(session_id)
        self._opens.append(time.perf_counter() - started)
        return handle


# -- setup ---------------------------------------------------------------------------------


async def populate(
    store: SessionStore, sessions: int, reminders: int, due_at: list[int], rng: random.Random
) -> None:
    now = int(time.time() * 1000)
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)

    async def one(index: int) -> None:
        async with gate, await store.create(now=Instant(now)) as handle:
            for number in range(1, reminders + 1):
                if number == 1 and index < len(due_at):
                    target = due_at[index]
                else:
                    target = now + 2 * DAY_MS + rng.randrange(28 * DAY_MS)
                record = AtScheduleRecord(
                    id=make_schedule_id(number),
                    prompt=f"reminder {number} of session {index}",
                    scheduled_at=format_instant(Instant(target)),
                )
                handle.append("schedule/change", create_change(record))
            await handle.barrier()

    await asyncio.gather(*(one(index) for index in range(sessions)))


# -- the measured child --------------------------------------------------------------------


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


async def child(kind: str, place: str, idle: float, window_end: float) -> dict[str, object]:
    stamps: list[tuple[float, float]] = []
    opens: list[float] = []
    starts: list[float] = []
    store = make_store(kind, place)
    timed = TimedStore(store, opens)
    loop = asyncio.get_running_loop()
    baseline: list[float] = []
    host = ScheduleHost(timed, stamping_agents(stamps, starts))  # type: ignore[arg-type]  # a proxy
    async with host:
        await asyncio.sleep(5.0)  # the first poll and its opens
        idle_cpu = await idle_cpu_percent(idle)
        idle_rss = rss_kib("VmRSS")
        # Bare timers for the same targets, in this process, from now on.
        due = await store.due_sessions(Instant(int(window_end * 1000) + 1), limit=100_000)
        for _, target in due:
            seconds = target / 1000

            def fire(seconds: float = seconds) -> None:
                baseline.append(time.time() - seconds)

            loop.call_at(loop.time() + (seconds - time.time()), fire)
        while time.time() < window_end + 5 and len(stamps) < len(due):
            await asyncio.sleep(0.5)
        stats = host.stats
    await close_store(store)
    lateness = [accepted - target for accepted, target in stamps]
    return {
        "idle_cpu_percent": idle_cpu,
        "idle_rss_mib": idle_rss / 1024,
        "peak_rss_mib": rss_kib("VmHWM") / 1024,
        "due": len(due),
        "delivered": len(stamps),
        "lateness_ms": summary(lateness),
        "baseline_ms": summary(baseline),
        "open_ms": summary(opens),
        "start_ms": summary(starts),
        "opened": stats.opened,
        "closed": stats.closed,
        "failed": stats.failed,
        "out_of_descriptors": stats.out_of_descriptors,
    }


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered) * 1000,
        "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000,
        "max": ordered[-1] * 1000,
    }


# -- fleet mode ----------------------------------------------------------------------------


def fleet(kind: str, place: str, arguments: argparse.Namespace) -> None:
    rng = random.Random(1)
    started = time.time()
    store = make_store(kind, place)
    # The window opens once setup, the child's start-up and its idle phase are over.
    setup_guess = arguments.sessions / 80
    window_start = started + setup_guess + 10 + arguments.idle + 40
    window_end = window_start + arguments.span
    due_at = sorted(
        int((window_start + rng.random() * arguments.span) * 1000) for _ in range(arguments.due)
    )

    async def setup() -> None:
        await populate(store, arguments.sessions, arguments.reminders, due_at, rng)
        await close_store(store)

    asyncio.run(setup())
    set_up = time.time()
    if set_up + 10 + arguments.idle + 35 > window_start:
        sys.exit(f"setup took {set_up - started:.0f} s, past the window; try fewer sessions")
    print(
        f"{kind}: {arguments.sessions} sessions x {arguments.reminders} reminders set up in "
        f"{set_up - started:.1f} s; {arguments.due} due over {arguments.span:.0f} s",
        flush=True,
    )
    figures = json.loads(
        child_output(
            __file__, kind, place, str(arguments.idle), str(window_end), str(arguments.fd_limit)
        )
    )
    late, base = figures["lateness_ms"], figures["baseline_ms"]
    print(
        f"  resident memory: {figures['idle_rss_mib']:.0f} MiB idle, peak "
        f"{figures['peak_rss_mib']:.0f} MiB (goal <= 300)\n"
        f"  idle CPU: {figures['idle_cpu_percent']:.2f} % of a core over {arguments.idle:.0f} s "
        f"(goal <= 1 %)\n"
        f"  delivered {figures['delivered']} of {figures['due']}; lateness p50 "
        f"{late.get('p50', 0):.1f} ms, p99 {late.get('p99', 0):.1f} ms, max "
        f"{late.get('max', 0):.1f} ms; bare timers p50 {base.get('p50', 0):.2f} ms, p99 "
        f"{base.get('p99', 0):.2f} ms\n"
        f"  open a session: p50 {figures['open_ms'].get('p50', 0):.1f} ms, p99 "
        f"{figures['open_ms'].get('p99', 0):.1f} ms; start its Schedule: p50 "
        f"{figures['start_ms'].get('p50', 0):.2f} ms; opened {figures['opened']}, closed "
        f"{figures['closed']}, failed {figures['failed']}, refused for lack of descriptors "
        f"{figures['out_of_descriptors']}",
        flush=True,
    )


# -- failover mode -------------------------------------------------------------------------


async def host_process(place: str, lease: float, record_path: str) -> None:
    record = os.open(record_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    store = make_store("postgres", place, lease=lease)
    settings = HostSettings(
        lead_seconds=LEAD_S,
        poll_seconds=0.5,
        max_wait_seconds=1.0,
        busy_retry_seconds=0.5,
        failed_retry_seconds=0.5,
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await store.due_sessions(Instant(0))
    print("ready", flush=True)
    async with ScheduleHost(store, stamping_agents([], [], record), settings=settings):
        await stop.wait()
    await close_store(store)


def start_host(place: str, lease: float, record: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(  # noqa: S603 - this very script, with our own arguments
        [sys.executable, __file__, "--host-process", place, str(lease), str(record)],
        stdout=subprocess.PIPE,
        text=True,
    )
    if process.stdout is not None:
        process.stdout.readline()
    return process


def failover(place: str, kills: int, lease: float, directory: Path) -> None:
    from session_schedule.session.postgres import PostgresSessionStore  # noqa: PLC0415

    dsn, schema = place.split(" ", 1)
    times: list[float] = []
    for round_number in range(kills):
        target = time.time() + LEAD_S + 5.0

        async def one(target: float = target) -> str:
            async with PostgresSessionStore(dsn, schema=schema) as store:
                async with await store.create(now=Instant(int(time.time() * 1000))) as handle:
                    record = AtScheduleRecord(
                        id=make_schedule_id(1),
                        prompt="failover",
                        scheduled_at=format_instant(Instant(int(target * 1000))),
                    )
                    handle.append("schedule/change", create_change(record))
                    await handle.barrier()
                return handle.id

        asyncio.run(one())
        records = [directory / f"round-{round_number}-{name}.txt" for name in "ab"]
        hosts = [start_host(place, lease, records[0])]
        # A opens the session LEAD_S before its target; B starts once A holds it.
        time.sleep(max(0.0, target - LEAD_S + 0.5 - time.time()))
        hosts.append(start_host(place, lease, records[1]))
        time.sleep(max(0.0, target - 0.5 - time.time()))
        killed_at = time.time()
        hosts[0].send_signal(signal.SIGKILL)
        hosts[0].wait()
        deadline = target + lease + 20
        while time.time() < deadline and not records[1].exists():
            time.sleep(0.05)
        while time.time() < deadline and not records[1].read_text():
            time.sleep(0.05)
        hosts[1].send_signal(signal.SIGTERM)
        hosts[1].wait()
        for process in hosts:
            if process.stdout is not None:
                process.stdout.close()
        text = records[1].read_text() if records[1].exists() else ""
        if records[0].exists() and records[0].read_text():
            print(f"  round {round_number}: host A delivered before the kill", flush=True)
            continue
        if not text:
            print(f"  round {round_number}: not delivered within the lease + 20 s", flush=True)
            continue
        times.append(float(text.split()[0]) - killed_at)
    ordered = sorted(times)
    print(
        f"failover after SIGKILL ({len(times)} of {kills} rounds, lease {lease:g} s): p50 "
        f"{statistics.median(ordered):.2f} s, p99 "
        f"{ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]:.2f} s, max "
        f"{ordered[-1]:.2f} s",
        flush=True,
    )


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        kind, place, idle, window_end, fd_limit = sys.argv[2:7]
        if int(fd_limit):
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(int(fd_limit), hard), hard))
        print(json.dumps(asyncio.run(child(kind, place, float(idle), float(window_end)))))
        return
    if sys.argv[1:2] == ["--host-process"]:
        asyncio.run(host_process(sys.argv[2], float(sys.argv[3]), sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--reminders", type=int, default=10)
    parser.add_argument("--due", type=int, default=1000)
    parser.add_argument("--span", type=float, default=60.0)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--dsn", default=os.environ.get("SESSION_SCHEDULE_PG_DSN", DEFAULT_DSN))
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--failover", type=int, metavar="K")
    parser.add_argument("--lease", type=float, default=5.0)
    parser.add_argument(
        "--fd-limit", type=int, default=0, help="the host's soft descriptor limit (0: unchanged)"
    )
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=arguments.dir) as directory:
        if arguments.failover:
            place, schema = postgres_place(arguments.dsn, "bench")
            try:
                failover(place, arguments.failover, arguments.lease, Path(directory))
            finally:
                drop(arguments.dsn, schema)
            return
        if arguments.store in {"sqlite", "both"}:
            fleet("sqlite", str(Path(directory) / "sessions.db"), arguments)
        if arguments.store in {"postgres", "both"}:
            place, schema = postgres_place(arguments.dsn, "bench")
            try:
                fleet("postgres", place, arguments)
            finally:
                drop(arguments.dsn, schema)


if __name__ == "__main__":
    main()
