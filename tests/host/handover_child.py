"""One side of a hand-over, for the hand-over crash test: ``python -m tests.host.handover_child
host STORE_URL RECORD_FILE`` runs a host until SIGTERM or SIGKILL; ``python -m
tests.host.handover_child front STORE_URL RECORD_FILE SESSION HOLD_SECONDS`` opens SESSION as a
front end does (asking the host to hand it over), runs its Schedule for HOLD_SECONDS and closes
it. Both record every follow-up's occurrence keys as ``fleet_child`` does; the front end prints
``opened <seconds it waited>``."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.runtime.opening import open_when_free
from session_schedule.session.location import open_store, parse_store_url
from session_schedule.session.port import SessionHandle, SessionStore
from session_schedule.testing import IdleAgent
from tests.host.fleet_child import SETTINGS, recorder


def _store(url: str) -> SessionStore:
    return open_store(parse_store_url(url), lease_seconds=2.0)


async def host(url: str, record_path: str) -> None:
    from session_schedule.host import ScheduleHost  # noqa: PLC0415 - the host side only

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
    store = _store(url)
    try:
        print("ready", flush=True)
        async with ScheduleHost(store, agents, settings=SETTINGS):
            await stop.wait()
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            await close()


async def front(url: str, record_path: str, session_id: str, hold_seconds: float) -> None:
    record = os.open(record_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    store = _store(url)
    try:
        began = time.monotonic()
        session = await open_when_free(
            store, session_id, clock=SystemClock(), wait_seconds=30, note=lambda _text: None
        )
        print(f"opened {time.monotonic() - began:.3f}", flush=True)
        async with session:
            agent = IdleAgent(recorder(session.id, record))
            async with LiveSchedule(session, agent, settings=SETTINGS.schedule):
                await asyncio.sleep(hold_seconds)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            await close()


if __name__ == "__main__":
    if sys.argv[1] == "host":
        asyncio.run(host(sys.argv[2], sys.argv[3]))
    else:
        asyncio.run(front(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])))
