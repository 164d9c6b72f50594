"""The pull-based Agent port under a live Schedule, in virtual time.

A due reminder is announced, handed over only to a waiting take, and dispatched only then; one
nobody takes stays due, across a reopen too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.core.due import Delivery
from session_schedule.core.framing import frame
from session_schedule.core.instants import parse_instant
from session_schedule.mcp.agent import FollowupNotTakenError, PullAgent
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.history import occurrence_history
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle
from session_schedule.testing.clock import FakeClock
from tests.virtual_time import run_for

START = "2026-11-29T20:00:00.000Z"
TAKE_SECONDS = 10.0


@dataclass
class World:
    store: MemorySessionStore
    session: SessionHandle
    clock: FakeClock
    agent: PullAgent
    schedule: LiveSchedule
    announcements: list[str] = field(default_factory=list)

    async def announce(self) -> None:
        self.announcements.append(self.clock.now_text())

    async def run_for(self, seconds: float) -> None:
        await run_for(self.schedule, self.clock, seconds)

    async def take(self) -> str | None:
        """A take while the owner runs: the owner hands over what is due, if anything."""
        task = asyncio.create_task(self.agent.take(timeout=TAKE_SECONDS))
        for _ in range(50):
            await asyncio.sleep(0)
            if task.done():
                break
        await self.schedule.settled()
        if not task.done():
            self.clock.advance(TAKE_SECONDS)
        return await task

    async def reopen(self) -> None:
        await self.schedule.close()
        await self.session.close()
        self.session = await self.store.open(self.session.id)
        self.agent = PullAgent(self.announce, clock=self.clock)
        self.schedule = LiveSchedule(self.session, self.agent, clock=self.clock)
        await self.schedule.start()

    def dispatches(self) -> list[ScheduleDispatchChange]:
        return [
            entry.payload
            for entry in self.session.entries
            if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
        ]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    announcements: list[str] = []

    async def announce() -> None:
        announcements.append(clock.now_text())

    agent = PullAgent(announce, clock=clock)
    schedule = LiveSchedule(session, agent, clock=clock)
    current = World(store, session, clock, agent, schedule, announcements)
    await schedule.start()
    yield current
    await current.schedule.close()


async def test_a_due_reminder_nobody_takes_is_announced_once_and_stays_due(world: World) -> None:
    await world.schedule.create({"prompt": "stretch", "after_seconds": 90})
    await world.run_for(89)
    assert world.announcements == []
    await world.run_for(3600)
    assert world.announcements == ["2026-11-29T20:01:30.000Z"]
    assert world.dispatches() == []
    _, views = await world.schedule.active()
    assert [(view.id, view.state) for view in views] == [("sch_1", "overdue")]
    await world.reopen()
    await world.run_for(1)
    assert world.announcements == ["2026-11-29T20:01:30.000Z", "2026-11-29T21:01:29.000Z"]
    pending = await world.schedule.pending()
    assert pending is not None
    assert [occurrence.key for occurrence in pending.occurrences] == [
        "sch_1@2026-11-29T20:01:30.000Z"
    ]
    assert world.dispatches() == []


async def test_a_take_receives_the_frame_and_only_then_is_the_dispatch_recorded(
    world: World,
) -> None:
    view = await world.schedule.create({"prompt": 'say "done"', "after_seconds": 90})
    await world.run_for(120)
    assert world.dispatches() == []
    preview = await world.schedule.pending()
    assert preview is not None
    text = await world.take()
    decided = parse_instant("2026-11-29T20:02:00.000Z")
    assert text == frame(
        Delivery(
            kind="one-shot",
            decided_at=decided,
            occurrences=preview.occurrences,
            changes=preview.changes,
        )
    )
    assert [dispatch.id for dispatch in world.dispatches()] == [view.id]
    assert await world.schedule.pending() is None
    assert await world.schedule.active() == (decided, [])


async def test_a_one_shot_taken_has_no_decision_time_in_the_history_a_recurring_one_has(
    world: World,
) -> None:
    """As ``history --help`` and the MCP and outcomes guides say: a take queues no turn, and a
    one-shot's decision time is its queued turn's; a recurring dispatch records its own."""
    await world.schedule.create({"prompt": "stretch", "after_seconds": 90})
    await world.schedule.create({"prompt": "water", "every_seconds": 600})
    await world.run_for(120)
    assert await world.take() is not None
    await world.run_for(600)
    assert await world.take() is not None
    runs = occurrence_history(world.session.entries)
    assert [(run.key, run.outcome, run.decided_at, run.lateness_seconds) for run in runs] == [
        ("sch_1@2026-11-29T20:01:30.000Z", "delivered", None, None),
        (
            "sch_2@2026-11-29T20:10:00.000Z",
            "delivered",
            parse_instant("2026-11-29T20:12:00.000Z"),
            120.0,
        ),
    ]


async def test_due_one_shots_are_taken_one_per_take_and_re_announced(world: World) -> None:
    await world.schedule.create({"prompt": "first", "after_seconds": 60})
    await world.schedule.create({"prompt": "second", "after_seconds": 61})
    await world.run_for(120)
    assert world.announcements == ["2026-11-29T20:01:00.000Z"]
    first = await world.take()
    assert first is not None
    assert "occurrence key: sch_1@2026-11-29T20:01:00.000Z" in first.splitlines()
    assert len(world.announcements) == 2
    second = await world.take()
    assert second is not None
    assert "occurrence key: sch_2@2026-11-29T20:01:01.000Z" in second.splitlines()
    assert [dispatch.id for dispatch in world.dispatches()] == ["sch_1", "sch_2"]
    assert await world.take() is None
    assert len(world.dispatches()) == 2


async def test_a_take_with_nothing_due_times_out_with_nothing(world: World) -> None:
    await world.schedule.create({"prompt": "later", "after_seconds": 3600})
    assert await world.take() is None
    assert world.dispatches() == []
    assert world.agent.waiting_takes == 0


async def test_a_cancelled_take_accepts_nothing_and_the_next_take_gets_the_reminder(
    world: World,
) -> None:
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    task = asyncio.create_task(world.agent.take(timeout=TAKE_SECONDS))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await world.run_for(120)
    assert world.dispatches() == []
    text = await world.take()
    assert text is not None
    assert 'prompt: "stretch"' in text.splitlines()
    assert [dispatch.id for dispatch in world.dispatches()] == ["sch_1"]


async def test_after_the_pending_reminder_is_deleted_a_later_one_is_announced(
    world: World,
) -> None:
    await world.schedule.create({"prompt": "first", "after_seconds": 60})
    await world.run_for(120)
    assert world.announcements == ["2026-11-29T20:01:00.000Z"]
    assert await world.schedule.delete({"id": "sch_1"}) == ("sch_1", True)
    world.agent.recheck()
    await world.schedule.settled()
    await world.schedule.create({"prompt": "second", "after_seconds": 60})
    await world.run_for(120)
    assert world.announcements == ["2026-11-29T20:01:00.000Z", "2026-11-29T20:03:00.000Z"]
    assert world.dispatches() == []
    assert world.schedule.failure is None


# -- the port on its own ---------------------------------------------------------------------


async def test_followup_needs_a_live_take() -> None:
    agent = PullAgent(clock=FakeClock(START))
    with pytest.raises(RuntimeError, match=r"^followup\(\) outside a maintenance phase$"):
        agent.followup("text")
    assert agent.begin_maintenance() is False
    task = asyncio.create_task(agent.take(timeout=TAKE_SECONDS))
    await asyncio.sleep(0)
    assert agent.begin_maintenance() is True
    assert agent.begin_maintenance() is False
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(
        FollowupNotTakenError, match=r"^the take ended before the follow-up was accepted$"
    ):
        agent.followup("text")
    agent.end_maintenance()
    with pytest.raises(RuntimeError, match=r"^end_maintenance without a maintenance phase$"):
        agent.end_maintenance()


async def test_a_follow_up_accepted_for_a_take_cancelled_after_it_goes_to_the_next_take() -> None:
    agent = PullAgent(clock=FakeClock(START))
    task = asyncio.create_task(agent.take(timeout=TAKE_SECONDS))
    await asyncio.sleep(0)
    assert agent.begin_maintenance() is True
    agent.followup("the frame")
    task.cancel()  # the host withdrew its request after the hand-over
    with pytest.raises(asyncio.CancelledError):
        await task
    agent.end_maintenance()
    assert agent.unclaimed == 1
    assert await agent.take(timeout=TAKE_SECONDS) == "the frame"
    assert agent.unclaimed == 0


async def test_a_take_bound_to_a_phase_that_delivers_nothing_gets_none() -> None:
    agent = PullAgent(clock=FakeClock(START))
    task = asyncio.create_task(agent.take(timeout=TAKE_SECONDS))
    await asyncio.sleep(0)
    assert agent.begin_maintenance() is True
    agent.end_maintenance()
    assert await task is None
