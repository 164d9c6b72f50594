"""The 09:00 stampede: every session due in the same second, delivered by 1, 2, 3 hosts.

    python3 dev.py bench stampede [--store sqlite|postgres|both] [--sessions N]
                                  [--hosts 1,2,3] [--answer S] [--lead S] [--max-opening K]
                                  [--dsn DSN] [--dir PATH]

Per store, ``N`` sessions (default 10,000) are created through the store, each with one ``at``
reminder due at the same instant ``T`` (setup, not measured; ``T`` is chosen from the rate of a
short calibration run so that setup and the hosts' start-up are over before it). Then ``H`` fresh
child processes each run one ``ScheduleHost`` (default settings) over the store with an
always-idle agent that stamps ``time.time()`` when ``followup()`` accepts a turn (``--lead`` and
``--max-opening`` override those two settings). With ``--answer S`` each session's agent is
instead a turn queue whose model takes ``S`` seconds to answer, as a real model does: the turn
is stamped when it starts, and its session stays open until the answer is in, so a host's
``max_open`` bounds how many it answers at once. PostgreSQL is
measured with 1, 2 and 3 host processes (a schema of its own per run, dropped after), SQLite
with one (a file store is served by one host). Reported:

- **delivered/s**: reminders delivered / (the last acceptance - ``T``);
- **lateness**: acceptance - ``T`` of every reminder, p50 / p99 / max;
- **bare timers**: ``N`` ``loop.call_at`` timers for ``T`` in each host process, started with
  the host (the same process, the same load): their lateness is the baseline.

A run ends once every reminder is delivered or 600 s after ``T``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import msgspec

sys.path.insert(0, str(Path(__file__).parent))

from session_schedule.core.changes import create_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant
from session_schedule.core.records import AtScheduleRecord
from session_schedule.host import AgentFactory, HostSettings, ScheduleHost, turn_queue_agents
from session_schedule.runtime.turns import RunTurn
from session_schedule.session import SessionStore
from session_schedule.session.port import SessionHandle
from session_schedule.tools.handlers import ScheduleTools
from shared.hostbench import (
    DEFAULT_DSN,
    close_store,
    drop,
    make_store,
    postgres_place,
    stamper,
    stamping_agents,
)

SETUP_CONCURRENCY: Final = 16
CALIBRATION: Final = 100
"""Sessions created first (with a reminder a week out) to time the setup."""
START_SECONDS: Final = 15.0
"""Time left for the host processes to start and read the index before ``T``."""
GIVE_UP_SECONDS: Final = 600.0
WEEK_MS: Final = 7 * 86_400_000


async def populate(store: SessionStore, count: int, target_ms: int) -> None:
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)
    now = Instant(int(time.time() * 1000))

    async def one(index: int) -> None:
        async with gate, await store.create(now=now) as handle:
            record = AtScheduleRecord(
                id=make_schedule_id(1),
                prompt=f"the stampede, session {index}",
                scheduled_at=format_instant(Instant(target_ms)),
            )
            handle.append("schedule/change", create_change(record))
            await handle.barrier()

    await asyncio.gather(*(one(index) for index in range(count)))


def set_up(kind: str, place: str, sessions: int) -> float:
    """Create the sessions; return ``T`` (seconds since the epoch)."""

    async def run() -> float:
        store = make_store(kind, place)
        try:
            started = time.time()
            await populate(store, CALIBRATION, int(started * 1000) + WEEK_MS)
            per_session = (time.time() - started) / CALIBRATION
            target = time.time() + per_session * sessions * 1.5 + 5 + START_SECONDS
            target = float(int(target) + 1)  # a whole second, as 09:00 is
            await populate(store, sessions, int(target * 1000))
            return target
        finally:
            await close_store(store)

    return asyncio.run(run())


# -- one host process ------------------------------------------------------------------------


def answering_agents(answer: float, record: int) -> AgentFactory:
    """A turn queue per session whose model answers each turn in ``answer`` seconds; a turn is
    stamped as it starts."""
    stamp = stamper([], record)

    def run_turn_for(_session: SessionHandle, _tools: ScheduleTools) -> RunTurn:
        async def run_turn(text: str) -> None:
            stamp(text)
            await asyncio.sleep(answer)

        return run_turn

    return turn_queue_agents(run_turn_for)


async def host_process(
    kind: str,
    place: str,
    target: float,
    record_path: str,
    settings: HostSettings,
    answer: float,
) -> None:
    record = os.open(record_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    store = make_store(kind, place)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    baseline: list[float] = []

    def fire() -> None:
        baseline.append(time.time() - target)

    for _ in range(int(sys.argv[6])):
        loop.call_at(loop.time() + (target - time.time()), fire)
    agents = answering_agents(answer, record) if answer > 0 else stamping_agents([], [], record)
    async with ScheduleHost(store, agents, settings=settings):
        print("ready", flush=True)
        await stop.wait()
    await close_store(store)
    print(json.dumps(baseline), flush=True)


# -- the parent ------------------------------------------------------------------------------


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    return {
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "max": ordered[-1],
    }


def delivered(records: list[Path]) -> list[float]:
    """The acceptance times recorded so far."""
    times: list[float] = []
    for path in records:
        if path.exists():
            times.extend(float(line.split()[0]) for line in path.read_text().splitlines())
    return times


def run(
    kind: str,
    place: str,
    sessions: int,
    hosts: int,
    directory: Path,
    answer: float,
    tuning: list[str],
) -> None:
    started = time.time()
    target = set_up(kind, place, sessions)
    records = [directory / f"{kind}-{hosts}-{number}.txt" for number in range(hosts)]
    if time.time() + START_SECONDS / 2 > target:
        sys.exit("setup took longer than planned; try fewer sessions")
    processes = []
    for path in records:
        process = subprocess.Popen(  # noqa: S603 - this very script, with our own arguments
            [
                sys.executable,
                __file__,
                "--host-process",
                kind,
                place,
                str(target),
                str(path),
                str(sessions),
                str(answer),
                *tuning,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        processes.append(process)
    for process in processes:
        if process.stdout is not None:
            process.stdout.readline()
    while time.time() < target + GIVE_UP_SECONDS:
        if len(delivered(records)) >= sessions:
            break
        time.sleep(0.5)
    baseline: list[float] = []
    for process in processes:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate()
        baseline.extend(json.loads(output.splitlines()[-1]))
    accepted = delivered(records)
    late = summary([moment - target for moment in accepted])
    bare = summary(baseline)
    span = max(accepted, default=target) - target
    rate = len(accepted) / span if span > 0 else 0.0
    answered = f", answers taking {answer:g} s" if answer > 0 else ""
    print(
        f"{kind}, {hosts} host{'s' if hosts > 1 else ''}{answered}: {sessions} sessions due "
        f"at once (set up in {target - started - START_SECONDS:.0f} s); delivered {len(accepted)} "
        f"in {span:.1f} s = {rate:.0f}/s; lateness p50 {late['p50']:.2f} s, p99 "
        f"{late['p99']:.2f} s, max {late['max']:.2f} s; bare timers p50 "
        f"{bare['p50'] * 1000:.1f} ms, p99 {bare['p99'] * 1000:.1f} ms",
        flush=True,
    )


def main() -> None:
    if sys.argv[1:2] == ["--host-process"]:
        kind, place, target, record = sys.argv[2:6]
        settings = HostSettings()
        if len(sys.argv) > 8:
            settings = msgspec.structs.replace(
                settings, lead_seconds=float(sys.argv[8]), max_opening=int(sys.argv[9])
            )
        answer = float(sys.argv[7])
        asyncio.run(host_process(kind, place, float(target), record, settings, answer))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument(
        "--hosts", default="1,2,3", help="host processes to measure PostgreSQL with"
    )
    parser.add_argument(
        "--answer",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="each turn's model answers in SECONDS (default: an always-idle agent)",
    )
    parser.add_argument("--lead", type=float, help="the hosts' lead_seconds (default: theirs)")
    parser.add_argument("--max-opening", type=int, help="the hosts' max_opening")
    parser.add_argument("--dsn", default=os.environ.get("SESSION_SCHEDULE_PG_DSN", DEFAULT_DSN))
    parser.add_argument("--dir", type=Path)
    arguments = parser.parse_args()
    counts = [int(count) for count in arguments.hosts.split(",")]
    tuning: list[str] = []
    if arguments.lead is not None or arguments.max_opening is not None:
        defaults = HostSettings()
        tuning = [
            str(arguments.lead if arguments.lead is not None else defaults.lead_seconds),
            str(arguments.max_opening or defaults.max_opening),
        ]
    with tempfile.TemporaryDirectory(dir=arguments.dir) as name:
        directory = Path(name)
        if arguments.store in {"sqlite", "both"}:
            run(
                "sqlite",
                str(directory / "sessions.db"),
                arguments.sessions,
                1,
                directory,
                arguments.answer,
                tuning,
            )
        if arguments.store in {"postgres", "both"}:
            for hosts in counts:
                place, schema = postgres_place(arguments.dsn)
                try:
                    run(
                        "postgres",
                        place,
                        arguments.sessions,
                        hosts,
                        directory,
                        arguments.answer,
                        tuning,
                    )
                finally:
                    drop(arguments.dsn, schema)


if __name__ == "__main__":
    main()
