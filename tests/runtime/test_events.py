"""Operator events in virtual time: every event's record, its log record, and its callbacks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from session_schedule.runtime.events import EVENT_LOGGER, ScheduleEvent
from session_schedule.runtime.live import LiveSchedule
from session_schedule.runtime.retry import TurnRetry
from session_schedule.runtime.turns import TurnQueue
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.tools.handlers import ScheduleTools
from tests.virtual_time import run_for

START = "2026-11-29T20:00:00.000Z"


@dataclass
class World:
    store: MemorySessionStore
    session: SessionHandle
    clock: FakeClock
    agent: FakeAgent
    schedule: LiveSchedule
    events: list[ScheduleEvent] = field(default_factory=list)

    async def run_for(self, seconds: float) -> None:
        await run_for(self.schedule, self.clock, seconds)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    agent = FakeAgent()
    schedule = LiveSchedule(session, agent, clock=clock)
    current = World(store, session, clock, agent, schedule)
    schedule.events.subscribe(current.events.append)
    await schedule.start()
    yield current
    await schedule.close()


def _event(world: World, **fields: object) -> ScheduleEvent:
    values: dict[str, object] = {"session_id": world.session.id, **fields}
    return ScheduleEvent(**values)  # type: ignore[arg-type]


async def test_create_delete_and_dispatch_are_traced(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    await world.schedule.create({"prompt": "stretch", "after_seconds": 90})
    await world.schedule.create({"prompt": "water", "every_seconds": 600})
    await world.run_for(100)
    await world.schedule.delete({"id": "sch_2"})
    await world.schedule.delete({"id": "sch_2"})
    assert world.events == [
        _event(world, kind="create", decided_at=START, outcome="created", schedule_id="sch_1"),
        _event(world, kind="create", decided_at=START, outcome="created", schedule_id="sch_2"),
        _event(
            world,
            kind="dispatch",
            decided_at="2026-11-29T20:01:30.000Z",
            outcome="dispatched",
            schedule_id="sch_1",
            occurrence_key="sch_1@2026-11-29T20:01:30.000Z",
        ),
        _event(
            world,
            kind="delete",
            decided_at="2026-11-29T20:01:40.000Z",
            outcome="deleted",
            schedule_id="sch_2",
        ),
        _event(
            world,
            kind="delete",
            decided_at="2026-11-29T20:01:40.000Z",
            outcome="not active",
            schedule_id="sch_2",
        ),
    ]
    records = [record for record in caplog.records if record.name == EVENT_LOGGER]
    assert [record.getMessage() for record in records] == [
        f"session {world.session.id}: create created schedule=sch_1",
        f"session {world.session.id}: create created schedule=sch_2",
        f"session {world.session.id}: dispatch dispatched schedule=sch_1 "
        "occurrence=sch_1@2026-11-29T20:01:30.000Z",
        f"session {world.session.id}: delete deleted schedule=sch_2",
        f"session {world.session.id}: delete not active schedule=sch_2",
    ]
    dispatch = records[2]
    assert dispatch.levelno == logging.INFO
    assert dispatch.__dict__["event"] == "dispatch"
    for name, value in world.events[2].log_fields().items():
        assert dispatch.__dict__[name] == value
    assert dispatch.__dict__["occurrence_key"] == "sch_1@2026-11-29T20:01:30.000Z"
    assert dispatch.__dict__["decided_at"] == "2026-11-29T20:01:30.000Z"


async def test_a_refused_followup_and_the_back_off_are_traced(world: World) -> None:
    world.agent.refuse("the host is gone")
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    await world.run_for(62)
    failed = _event(
        world,
        kind="followup-failed",
        decided_at="2026-11-29T20:01:00.000Z",
        outcome="not accepted",
        schedule_id="sch_1",
        occurrence_key="sch_1@2026-11-29T20:01:00.000Z",
        detail="RuntimeError: the host is gone",
    )
    assert world.events[1:] == [
        failed,
        _event(
            world,
            kind="back-off",
            decided_at="2026-11-29T20:01:00.000Z",
            outcome="agent refused",
            retry_in_seconds=1.0,
        ),
        _event(world, **{**_fields(failed), "decided_at": "2026-11-29T20:01:01.000Z"}),
        _event(
            world,
            kind="back-off",
            decided_at="2026-11-29T20:01:01.000Z",
            outcome="agent refused",
            retry_in_seconds=2.0,
        ),
    ]
    world.agent.accept()
    await world.run_for(2)
    assert world.events[-1].kind == "dispatch"
    assert world.events[-1].decided_at == "2026-11-29T20:01:03.000Z"


async def test_an_agent_that_stays_busy_is_traced_as_a_back_off(world: World) -> None:
    class Stubborn:
        """Reports idle, yet never lets a maintenance phase begin."""

        async def wait_idle(self) -> None:
            return  # idle at once, without yielding: the owner parks only in its back-off

        def begin_maintenance(self) -> bool:
            return False

        def end_maintenance(self) -> None:
            raise AssertionError("no maintenance phase was begun")

        def followup(self, message: str) -> None:
            raise AssertionError("no maintenance phase was begun")

    await world.schedule.close()
    agent = Stubborn()
    world.schedule = LiveSchedule(world.session, agent, clock=world.clock)
    world.schedule.events.subscribe(world.events.append)
    await world.schedule.start()
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    await world.run_for(61)
    backoffs = [event for event in world.events if event.kind == "back-off"]
    assert backoffs[:2] == [
        _event(
            world,
            kind="back-off",
            decided_at="2026-11-29T20:01:00.000Z",
            outcome="agent busy",
            retry_in_seconds=1.0,
        ),
        _event(
            world,
            kind="back-off",
            decided_at="2026-11-29T20:01:01.000Z",
            outcome="agent busy",
            retry_in_seconds=2.0,
        ),
    ]


async def test_a_tool_error_is_traced_as_a_refusal(world: World) -> None:
    tools = ScheduleTools(world.schedule)
    await tools.call("schedule_create", {"prompt": "water", "every_seconds": 60})
    await tools.call("schedule_delete", {"id": 7})
    await tools.call("schedule_cancel", "{}")
    await tools.call("schedule_create", {"prompt": "later", "after_seconds": 3600})
    world.store.fail_next_barrier()
    await tools.call("schedule_delete", '{"id": "sch_1"}')
    assert world.events[3] == _event(
        world, kind="create", decided_at=START, outcome="created", schedule_id="sch_1"
    )
    assert world.events[4:] == [
        _event(
            world,
            kind="refusal",
            decided_at=START,
            outcome="refused",
            schedule_id="sch_1",
            error_code="persistence_uncertain",
            tool="schedule_delete",
            detail=f"session {world.session.id} cannot confirm that its entries are durable "
            "(OSError: [Errno 5] injected barrier failure); reopen the session from storage",
        )
    ]
    assert world.events[:3] == [
        _event(
            world,
            kind="refusal",
            decided_at=START,
            outcome="refused",
            error_code="frequency_too_high",
            tool="schedule_create",
            detail="every_seconds must be at least 300 (5 minutes), got 60; "
            "choose a longer interval.",
        ),
        _event(
            world,
            kind="refusal",
            decided_at=START,
            outcome="refused",
            error_code="invalid_selector",
            tool="schedule_delete",
            detail="`id` must be the id string of a reminder (such as 'sch_1'), got 7.",
        ),
        _event(
            world,
            kind="refusal",
            decided_at=START,
            outcome="refused",
            error_code="invalid_selector",
            tool="schedule_cancel",
            detail="there is no tool 'schedule_cancel'; the schedule tools are "
            "schedule_create, schedule_list, schedule_delete, schedule_update.",
        ),
    ]


async def test_a_raising_callback_is_logged_and_delivery_goes_on(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: ScheduleEvent) -> None:
        raise ValueError(f"cannot handle {event.kind}")

    later: list[ScheduleEvent] = []
    world.schedule.events.subscribe(broken)
    unsubscribe = world.schedule.events.subscribe(later.append)
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    await world.run_for(61)
    assert len(world.agent.followups) == 1
    assert [event.kind for event in later] == ["create", "dispatch"]
    assert [event.kind for event in world.events] == ["create", "dispatch"]
    failures = [
        record
        for record in caplog.records
        if record.getMessage() == "a schedule event callback raised; delivery goes on"
    ]
    assert len(failures) == 2
    assert failures[0].exc_info is not None
    assert str(failures[0].exc_info[1]) == "cannot handle create"
    unsubscribe()
    unsubscribe()
    await world.schedule.delete({"id": "sch_9"})
    assert [event.kind for event in later] == ["create", "dispatch"]


def _fields(event: ScheduleEvent) -> dict[str, object]:
    return {
        name: getattr(event, name)
        for name in ScheduleEvent.__struct_fields__
        if name != "session_id"
    }


async def test_a_batch_dispatch_is_one_event_per_reminder_at_one_decision_time(
    world: World,
) -> None:
    await world.schedule.create({"prompt": "water", "every_seconds": 300})
    await world.schedule.create({"prompt": "stretch", "every_seconds": 600})
    await world.schedule.settled()
    world.clock.jump(1_000)  # the wall clock moves on; the owner notices within its bound
    await world.run_for(30)
    dispatches = [event for event in world.events if event.kind == "dispatch"]
    assert dispatches == [
        _event(
            world,
            kind="dispatch",
            decided_at="2026-11-29T20:17:10.000Z",
            outcome="dispatched",
            schedule_id="sch_1",
            occurrence_key="sch_1@2026-11-29T20:05:00.000Z",
        ),
        _event(
            world,
            kind="dispatch",
            decided_at="2026-11-29T20:17:10.000Z",
            outcome="dispatched",
            schedule_id="sch_2",
            occurrence_key="sch_2@2026-11-29T20:10:00.000Z",
        ),
    ]


async def test_a_turn_queue_agent_s_failed_attempts_are_traced_without_wiring_of_one_s_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A loop of one's own, set up as the docs show (a TurnQueue as the Schedule's agent): its
    # turns' failures are operator events, once each, for as long as the Schedule runs.
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    clock = FakeClock(START)
    session = await MemorySessionStore().create(now=clock.now())
    attempts: list[str] = []

    async def run_turn(text: str) -> None:
        attempts.append(text)
        raise ConnectionError("the endpoint refused the connection")

    turns = TurnQueue(session, run_turn, clock=clock, retry=TurnRetry(max_attempts=2))
    schedule = LiveSchedule(session, turns, clock=clock)
    events: list[ScheduleEvent] = []
    schedule.events.subscribe(events.append)
    async with schedule, turns:
        await schedule.create({"prompt": "stretch", "after_seconds": 60})
        clock.advance(60)
        await schedule.settled()
        await asyncio.sleep(0)
        retry_in = events[-1].retry_in_seconds
        assert retry_in is not None
        clock.advance(retry_in)
        await turns.wait_idle()
    key = "sch_1@2026-11-29T20:01:00.000Z"
    detail = "ConnectionError: the endpoint refused the connection"
    assert [(e.kind, e.outcome, e.occurrence_key, e.detail) for e in events[2:]] == [
        ("turn-retry", "retrying", key, detail),
        ("turn-failed", "failed", key, detail),
    ]
    assert [r.levelname for r in caplog.records if r.name == EVENT_LOGGER][2:] == [
        "WARNING",
        "ERROR",
    ]
    # Closed, the Schedule no longer listens: a later queue's failures are not its events.
    later = TurnQueue(session, run_turn, clock=clock, retry=TurnRetry(max_attempts=1))
    async with later:
        later.submit("hello")
        await later.wait_idle()
    assert len(events) == 4
    assert len(attempts) == 3
