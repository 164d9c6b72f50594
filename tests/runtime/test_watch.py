"""The wall-clock watch: idle owners with far targets park on one timer and are released once
their target is within one wait. On the real clock, with short periods; every assertion is about
what was released or parked, never how long it took."""

from __future__ import annotations

import asyncio
import time

from session_schedule.core.instants import Instant
from session_schedule.runtime import watch
from session_schedule.runtime.clock import SystemClock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.agent import FakeAgent

PERIOD = 0.02


async def ticks(count: int) -> None:
    await asyncio.sleep(PERIOD * count + 0.01)


async def test_an_owner_is_released_once_its_target_is_within_one_period() -> None:
    loop = asyncio.get_running_loop()
    now = SystemClock().now()
    near, far, never = loop.create_future(), loop.create_future(), loop.create_future()
    watch.park(PERIOD, Instant(now + 30), near)
    watch.park(PERIOD, Instant(now + 86_400_000), far)
    watch.park(PERIOD, None, never)  # nothing active: only a wake-up releases it
    assert watch.parked() == 2
    await ticks(2)
    assert near.done()
    assert not far.done()
    assert not never.done()
    assert watch.parked() == 1
    far.cancel()  # its owner woke otherwise: the watch drops it at its next tick
    await ticks(2)
    assert watch.parked() == 0


async def test_idle_owners_park_on_the_watch_and_a_near_reminder_is_delivered() -> None:
    store = MemorySessionStore()
    clock = SystemClock()
    settings = Settings(max_wait_seconds=PERIOD * 5)
    agents = [FakeAgent() for _ in range(20)]
    sessions = [await store.create(now=clock.now()) for _ in agents]
    schedules = [
        LiveSchedule(session, agent, clock=clock, settings=settings)
        for session, agent in zip(sessions, agents, strict=True)
    ]
    try:
        for schedule in schedules:
            await schedule.start()
            await schedule.create({"prompt": "next month", "after_seconds": 30 * 86_400})
        for schedule in schedules:
            await schedule.settled()
        # Twenty idle owners: none has a timer of its own.
        assert watch.parked() == 20
        await schedules[3].create({"prompt": "soon", "after_seconds": 1})
        deadline = time.monotonic() + 10
        while not agents[3].followups and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(agents[3].followups) == 1
        assert "soon" in agents[3].followups[0]
        assert all(not agent.followups for index, agent in enumerate(agents) if index != 3)
        await schedules[3].settled()
        assert watch.parked() == 20  # back on the watch: its next target is a month away
    finally:
        for schedule in schedules:
            await schedule.close()
    await ticks(6)
    assert watch.parked() == 0
