"""The one real-clock test: a reminder on the JSONL backend arrives about a second later."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.core.instants import parse_instant
from session_schedule.runtime.clock import SystemClock
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.testing.agent import FakeAgent


async def test_a_reminder_is_delivered_on_the_real_clock(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    clock = SystemClock()
    agent = FakeAgent()
    session = await store.create(now=clock.now())
    async with LiveSchedule(session, agent, clock=clock) as schedule:
        view = await schedule.create({"prompt": "stretch", "after_seconds": 1})
        deadline = time.monotonic() + 10
        while not agent.followups and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        delivered_at = clock.now()
    await session.close()
    assert len(agent.followups) == 1
    # Never early. (How late is a benchmark's question: benchmarks/delivery.py.)
    assert delivered_at >= parse_instant(view.scheduled_at)
    snapshot = await store.read(session.id)
    dispatches = [
        entry.payload
        for entry in snapshot.entries
        if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
    ]
    assert [dispatch.id for dispatch in dispatches] == ["sch_1"]
