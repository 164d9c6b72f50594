"""IdleAgent: always idle, one maintenance phase at a time, every follow-up to its callback."""

from __future__ import annotations

import pytest

from session_schedule.core.instants import parse_instant
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing import FakeClock, IdleAgent

START = "2026-11-29T20:00:00.000Z"


async def test_due_reminders_reach_the_callback_in_order() -> None:
    clock = FakeClock(START)
    taken: list[str] = []
    session = await MemorySessionStore().create(now=clock.now())
    async with LiveSchedule(session, IdleAgent(taken.append), clock=clock) as schedule:
        await schedule.create({"prompt": "first", "after_seconds": 60})
        await schedule.create({"prompt": "second", "after_seconds": 120})
        await schedule.settled()
        while clock.now() < parse_instant("2026-11-29T20:02:00.000Z"):
            clock.advance_to_next_wakeup()
            await schedule.settled()
    assert len(taken) == 2
    assert "sch_1@2026-11-29T20:01:00.000Z" in taken[0]
    assert "sch_2@2026-11-29T20:02:00.000Z" in taken[1]


async def test_it_is_always_idle_and_refuses_a_second_maintenance_phase() -> None:
    agent = IdleAgent(lambda message: None)
    await agent.wait_idle()
    assert agent.begin_maintenance() is True
    assert agent.begin_maintenance() is False
    agent.end_maintenance()
    assert agent.begin_maintenance() is True


def test_without_a_callback_a_followup_is_an_error() -> None:
    agent = IdleAgent()
    with pytest.raises(RuntimeError) as raised:
        agent.followup("a follow-up")
    assert str(raised.value) == "no follow-up was expected, got 'a follow-up'"
