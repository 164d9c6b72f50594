"""One host of a fleet, for the failover tests and benchmark: ``python -m tests.host.fleet_child
DSN SCHEMA LEASE_SECONDS RECORD_FILE [ANSWER_SECONDS]``.

It runs a :class:`ScheduleHost` over the PostgreSQL store with an agent that is always idle and
records every follow-up it accepts — ``<unix time> <session id> <occurrence key>`` per key, one
``write`` on an ``O_APPEND`` descriptor — before returning, so a SIGKILL right after the
acceptance still leaves the record. With ``ANSWER_SECONDS``, the agent is a turn queue whose
model takes that long to answer, and a turn is recorded once it has been answered instead. It
prints ``ready`` once its store works, and runs until SIGTERM or SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Final

from session_schedule.core.instants import Instant
from session_schedule.host import AgentFactory, HostSettings, ScheduleHost, turn_queue_agents
from session_schedule.runtime.clock import Clock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.runtime.turns import RunTurn
from session_schedule.session.port import SessionHandle
from session_schedule.session.postgres import PostgresSessionStore
from session_schedule.testing import IdleAgent
from session_schedule.tools.handlers import ScheduleTools

KEY: Final = re.compile(r"\bsch_[0-9]+@[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z")

SETTINGS: Final = HostSettings(
    lead_seconds=1.0,
    poll_seconds=0.5,
    max_wait_seconds=1.0,
    busy_retry_seconds=0.5,
    failed_retry_seconds=0.5,
    schedule=Settings(max_wait_seconds=1.0, followup_limit=100),
)
"""The documented bound on a takeover beyond the lease is busy_retry + poll + max_wait."""


def recorder(session_id: str, record: int) -> Callable[[str], None]:
    """Writes each accepted follow-up's occurrence keys to the record file."""

    def write(message: str) -> None:
        now = time.time()
        keys = dict.fromkeys(KEY.findall(message))
        lines = "".join(f"{now:.3f} {session_id} {key}\n" for key in keys)
        os.write(record, lines.encode())

    return write


def slow_model(answer_seconds: float, record: int) -> AgentFactory:
    """A turn queue per session whose model answers after ``answer_seconds``; each answered
    turn's occurrence keys are recorded."""

    def run_turn_for(session: SessionHandle, _tools: ScheduleTools) -> RunTurn:
        write = recorder(session.id, record)

        async def run_turn(text: str) -> None:
            await asyncio.sleep(answer_seconds)
            write(text)

        return run_turn

    return turn_queue_agents(run_turn_for)


async def main(
    dsn: str, schema: str, lease_seconds: float, record_path: str, answer_seconds: float
) -> None:
    record = os.open(record_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    @asynccontextmanager
    async def agents(
        session: SessionHandle, clock: Clock, settings: Settings, on_wake: Callable[[], None]
    ) -> AsyncIterator[LiveSchedule]:
        agent = IdleAgent(recorder(session.id, record))
        async with LiveSchedule(
            session, agent, clock=clock, settings=settings, driven=True, on_wake=on_wake
        ) as schedule:
            yield schedule

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with PostgresSessionStore(dsn, schema=schema, lease_seconds=lease_seconds) as store:
        await store.due_sessions(Instant(0))
        print("ready", flush=True)
        factory = slow_model(answer_seconds, record) if answer_seconds > 0 else agents
        async with ScheduleHost(store, factory, settings=SETTINGS):
            await stop.wait()


if __name__ == "__main__":
    answer = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], answer))
