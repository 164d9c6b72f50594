"""Live delivery in virtual time: every rule of SPEC §6 with the fake clock and the fake agent."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleDispatchChange,
    dispatch_change,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.records import CalendarScheduleView
from session_schedule.core.rules import Limits
from session_schedule.runtime import live as live_module
from session_schedule.runtime.agent import FollowUp
from session_schedule.runtime.events import ScheduleEvent
from session_schedule.runtime.live import LiveSchedule, ScheduleClosedError, Settings
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, user_message
from session_schedule.session.port import SessionHandle
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.tools import ScheduleTools
from tests.virtual_time import run_for

START = "2026-11-29T20:00:00.000Z"


@dataclass
class World:
    store: MemorySessionStore
    session: SessionHandle
    clock: FakeClock
    agent: FakeAgent
    schedule: LiveSchedule

    async def run_for(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass, waking the owner at each of its deadlines."""
        await run_for(self.schedule, self.clock, seconds)

    async def reopen(self, agent: FakeAgent | None = None) -> None:
        """Close the live Schedule and the handle, then open the Session live again."""
        await self.schedule.close()
        await self.session.close()
        self.session = await self.store.open(self.session.id)
        self.agent = agent or self.agent
        self.schedule = LiveSchedule(
            self.session, self.agent, clock=self.clock, settings=self.schedule.settings
        )
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
    agent = FakeAgent()
    schedule = LiveSchedule(session, agent, clock=clock, settings=Settings())
    await schedule.start()
    current = World(store, session, clock, agent, schedule)
    yield current
    await current.schedule.close()
    await current.session.close()


def keys(followup: str) -> list[str]:
    return [
        line.removeprefix("occurrence key: ")
        for line in followup.splitlines()
        if line.startswith("occurrence key: ")
    ]


async def test_a_reminder_arrives_as_one_followup_at_its_target(world: World) -> None:
    view = await world.schedule.create({"prompt": "stretch", "after_seconds": 90})
    assert view.scheduled_at == "2026-11-29T20:01:30.000Z"
    await world.run_for(89.999)
    assert world.agent.followups == []
    await world.run_for(0.001)
    assert len(world.agent.followups) == 1
    assert keys(world.agent.followups[0]) == ["sch_1@2026-11-29T20:01:30.000Z"]
    assert "decided at: 2026-11-29T20:01:30.000Z" in world.agent.followups[0]
    assert world.dispatches() == [dispatch_change(ScheduleId("sch_1"))]
    now, views = await world.schedule.active()
    assert views == []
    assert now == parse_instant("2026-11-29T20:01:30.000Z")


async def test_nothing_is_delivered_while_the_agent_is_busy(world: World) -> None:
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    world.agent.start_turn()
    await world.run_for(600)
    assert world.agent.followups == []
    _, views = await world.schedule.active()
    assert [view.state for view in views] == ["overdue"]
    world.agent.finish_turn()
    await world.schedule.settled()
    assert len(world.agent.followups) == 1
    assert "decided at: 2026-11-29T20:10:00.000Z" in world.agent.followups[0]


async def test_tool_calls_during_a_turn_do_not_wait_for_the_due_task(world: World) -> None:
    await world.schedule.create({"prompt": "first", "after_seconds": 60})
    world.agent.start_turn()
    await world.run_for(120)
    # The due task is waiting for idle; the running turn's tool calls still go through.
    view = await world.schedule.create({"prompt": "second", "after_seconds": 60})
    assert view.id == "sch_2"
    _, views = await world.schedule.active()
    assert [v.id for v in views] == ["sch_1", "sch_2"]
    assert (await world.schedule.delete({"id": "sch_2"})) == ("sch_2", True)
    world.agent.finish_turn()
    await world.schedule.settled()
    assert [keys(f) for f in world.agent.followups] == [["sch_1@2026-11-29T20:01:00.000Z"]]


async def test_one_shots_go_first_one_per_turn_then_everies_as_one_batch(world: World) -> None:
    world.agent = FakeAgent(finish_followups=False)
    await world.reopen(world.agent)
    await world.schedule.create({"prompt": "every a", "every_seconds": 300})
    await world.schedule.create({"prompt": "at b", "at": "2026-11-29T20:04:00Z"})
    await world.schedule.create({"prompt": "after c", "after_seconds": 240})
    await world.schedule.create({"prompt": "every d", "every_seconds": 600})
    world.agent.start_turn()
    await world.run_for(3600)
    assert world.agent.followups == []
    world.agent.finish_turn()
    await world.schedule.settled()
    # Both one-shots are due at 20:04; the earlier-created goes first, alone.
    assert [keys(f) for f in world.agent.followups] == [["sch_2@2026-11-29T20:04:00.000Z"]]
    world.agent.finish_turn()
    await world.schedule.settled()
    assert keys(world.agent.followups[1]) == ["sch_3@2026-11-29T20:04:00.000Z"]
    world.agent.finish_turn()
    await world.schedule.settled()
    batch = world.agent.followups[2]
    assert keys(batch) == ["sch_1@2026-11-29T20:05:00.000Z", "sch_4@2026-11-29T20:10:00.000Z"]
    assert "skipped occurrences: 11\n" in batch
    assert "skipped occurrences: 5\n" in batch
    accepted = {change.accepted_at for change in world.dispatches()[2:]}
    assert accepted == {"2026-11-29T21:00:00.000Z"}
    world.agent.finish_turn()
    await world.schedule.settled()
    assert len(world.agent.followups) == 3


async def test_catch_up_after_a_week_cold_delivers_only_the_latest_occurrence(world: World) -> None:
    await world.schedule.create({"prompt": "check", "every_seconds": 300})
    await world.run_for(300)
    assert len(world.agent.followups) == 1
    await world.schedule.close()  # the Session goes cold: nothing runs
    world.clock.advance(7 * 86_400 + 17)
    await world.reopen()
    await world.schedule.settled()
    assert len(world.agent.followups) == 2
    assert "skipped occurrences: 2015\n" in world.agent.followups[1]
    assert "due at: 2026-12-06T20:05:00.000Z\n" in world.agent.followups[1]
    _, views = await world.schedule.active()
    assert views[0].scheduled_at == "2026-12-06T20:10:00.000Z"


async def test_a_wall_clock_jump_forward_is_seen_within_the_bounded_wait(world: World) -> None:
    await world.schedule.create({"prompt": "later", "after_seconds": 3600})
    await world.schedule.settled()
    world.clock.jump(7200)  # e.g. the machine was suspended: elapsed time stood still
    await world.run_for(29.999)
    assert len(world.agent.followups) == 0
    await world.run_for(0.001)
    assert len(world.agent.followups) == 1


async def test_a_wall_clock_jump_backwards_delays_delivery_to_the_wall_time(world: World) -> None:
    await world.schedule.create({"prompt": "later", "after_seconds": 60})
    world.clock.jump(-3600)
    await world.run_for(3600 + 59)
    assert world.agent.followups == []
    await world.run_for(1)
    assert len(world.agent.followups) == 1


async def test_a_create_wakes_the_owner_at_once(world: World) -> None:
    await world.run_for(10)
    await world.schedule.create({"prompt": "soon", "after_seconds": 1})
    await world.run_for(1)
    assert len(world.agent.followups) == 1


async def test_a_refused_followup_keeps_the_reminder_and_backs_off(world: World) -> None:
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    world.agent.refuse()
    await world.run_for(60)
    assert world.agent.refused == 1
    assert world.dispatches() == []
    await world.run_for(1)  # back-off 1 s
    assert world.agent.refused == 2
    await world.run_for(2)  # then 2 s
    assert world.agent.refused == 3
    await world.run_for(3.999)  # then 4 s: not yet
    assert world.agent.refused == 3
    await world.run_for(600)  # until 20:11:06.999
    # Retries at +4, +8, +16, +32 s (20:01:07 … 20:02:03), then every 60 s up to 20:11:03.
    assert world.agent.refused == 16
    world.agent.accept()
    await world.run_for(60)
    assert len(world.agent.followups) == 1
    assert world.dispatches() == [dispatch_change(ScheduleId("sch_1"))]


_SPIN = "a shorter wait or back-off lets the owner spin"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"retry_initial_seconds": 0}, f"retry_initial_seconds must be at least 0.01 seconds, not 0: {_SPIN}"),
        ({"retry_initial_seconds": 0.001}, f"retry_initial_seconds must be at least 0.01 seconds, not 0.001: {_SPIN}"),
        ({"retry_max_seconds": -1}, f"retry_max_seconds must be at least 0.01 seconds, not -1: {_SPIN}"),
        ({"max_wait_seconds": 0}, f"max_wait_seconds must be at least 0.01 seconds, not 0: {_SPIN}"),
        ({"max_wait_seconds": 1e-6}, f"max_wait_seconds must be at least 0.01 seconds, not 1e-06: {_SPIN}"),
        ({"retry_initial_seconds": float("nan")}, "retry_initial_seconds must be a finite number of seconds, not nan"),
        ({"retry_max_seconds": float("inf")}, "retry_max_seconds must be a finite number of seconds, not inf"),
        ({"max_wait_seconds": float("inf")}, "max_wait_seconds must be a finite number of seconds, not inf"),
        ({"max_wait_seconds": float("-inf")}, "max_wait_seconds must be a finite number of seconds, not -inf"),
        (
            {"retry_max_seconds": 0.5},
            "retry_max_seconds (0.5) must be at least retry_initial_seconds (1): the back-off "
            "doubles from the first up to the second",
        ),
    ],
)  # fmt: skip
def test_a_wait_or_back_off_that_would_let_the_owner_spin_is_refused(
    fields: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        msgspec.structs.replace(Settings(), **fields)  # replace runs the same check
    assert str(refused.value) == message


async def test_the_shortest_back_off_asks_a_refusing_agent_at_most_100_times_a_second() -> None:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    agent = FakeAgent()
    fastest = Settings(max_wait_seconds=0.01, retry_initial_seconds=0.01, retry_max_seconds=0.01)
    async with LiveSchedule(session, agent, clock=clock, settings=fastest) as schedule:
        world = World(store, session, clock, agent, schedule)
        await schedule.create({"prompt": "stretch", "after_seconds": 60})
        agent.refuse()
        await world.run_for(60)
        assert agent.refused == 1
        await world.run_for(1)
        assert agent.refused == 101
    await session.close()


@pytest.mark.parametrize("step", [-3600, 3600])
async def test_a_back_off_lasts_its_elapsed_time_whatever_the_wall_clock_does(
    world: World, step: int
) -> None:
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    world.agent.refuse()
    world.clock.jump(7200)  # the reminder is now two hours overdue
    await world.run_for(30)  # the owner's bounded wait ends, and it is refused
    assert world.agent.refused == 1  # then a back-off of 1 s
    world.agent.accept()
    world.clock.jump(step)
    await world.run_for(0.999)
    assert world.agent.followups == []
    await world.run_for(0.001)
    assert len(world.agent.followups) == 1
    assert world.dispatches() == [dispatch_change(ScheduleId("sch_1"))]


async def test_a_barrier_failure_mid_delivery_poisons_and_repeats_after_reopen(
    world: World,
) -> None:
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    # Nothing is pending at the due task's first barrier, so the flush that fails is the one
    # after the dispatch append: the follow-up was accepted, its dispatch is not durable.
    world.store.fail_next_barrier()
    await world.run_for(60)
    assert len(world.agent.followups) == 1
    assert isinstance(world.schedule.failure, ScheduleError)
    assert world.schedule.failure.code == "persistence_uncertain"
    with pytest.raises(ScheduleError) as caught:
        await world.schedule.active()
    assert caught.value.code == "persistence_uncertain"
    await world.reopen()
    await world.schedule.settled()
    # At-least-once: the reminder repeats, under the same occurrence key.
    assert len(world.agent.followups) == 2
    assert keys(world.agent.followups[0]) == keys(world.agent.followups[1])
    assert keys(world.agent.followups[1]) == ["sch_1@2026-11-29T20:01:00.000Z"]
    assert world.dispatches() == [dispatch_change(ScheduleId("sch_1"))]


async def test_a_barrier_failure_before_followup_queues_nothing(world: World) -> None:
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    # A transcript entry is pending, so the due task's first barrier has something to flush.
    world.session.append(MESSAGE_ENTRY_TYPE, user_message("hello", at=world.clock.now()))
    world.store.fail_next_barrier()
    await world.run_for(60)
    assert world.agent.followups == []
    assert isinstance(world.schedule.failure, ScheduleError)
    assert world.schedule.failure.code == "persistence_uncertain"


async def test_an_every_record_ends_at_the_year_9999_bound(world: World) -> None:
    world.clock.set("9999-12-31T22:00:00.000Z")
    await world.schedule.create({"prompt": "hourly", "every_seconds": 3600})
    await world.run_for(3600)
    assert len(world.agent.followups) == 1
    _, views = await world.schedule.active()
    assert views == []
    await world.run_for(7200)
    assert len(world.agent.followups) == 1


async def test_a_fork_keeps_history_but_not_reminders_and_never_reuses_ids(world: World) -> None:
    await world.schedule.create({"prompt": "parent", "after_seconds": 600})
    await world.schedule.create({"prompt": "parent 2", "every_seconds": 600})
    fork = await world.store.fork(world.session.id, now=world.clock.now())
    agent = FakeAgent()
    async with LiveSchedule(fork, agent, clock=world.clock) as forked:
        _, views = await forked.active()
        assert views == []
        view = await forked.create({"prompt": "child", "after_seconds": 60})
        assert view.id == "sch_3"
        assert await forked.delete({"id": "sch_1"}) == ("sch_1", False)
        world.clock.advance(600)
        await forked.settled()
        assert [keys(f) for f in agent.followups] == [["sch_3@2026-11-29T20:01:00.000Z"]]
    await fork.close()


async def test_create_and_delete_await_the_barrier_after_appending(world: World) -> None:
    world.store.fail_next_barrier()
    with pytest.raises(ScheduleError) as caught:
        await world.schedule.create({"prompt": "p", "after_seconds": 60})
    assert caught.value.code == "persistence_uncertain"
    assert world.session.poisoned


async def test_every_operation_reports_persistence_uncertain_once_poisoned(world: World) -> None:
    await world.schedule.create({"prompt": "p", "after_seconds": 600})
    world.store.fail_next_write()
    with pytest.raises(ScheduleError) as caught:
        await world.schedule.delete({"id": "sch_1"})
    assert caught.value.code == "persistence_uncertain"
    for operation in (
        world.schedule.active(),
        world.schedule.create({"prompt": "p", "after_seconds": 60}),
        world.schedule.delete({"id": "sch_1"}),
    ):
        with pytest.raises(ScheduleError) as caught:
            await operation
        assert caught.value.code == "persistence_uncertain"


async def test_model_errors_leave_the_log_untouched(world: World) -> None:
    with pytest.raises(ScheduleError) as caught:
        await world.schedule.create({"prompt": "p", "every_seconds": 60})
    assert caught.value.code == "frequency_too_high"
    assert list(world.session.entries) == []


async def test_the_active_cap_applies(world: World) -> None:
    schedule = LiveSchedule(
        world.session,
        world.agent,
        clock=world.clock,
        settings=Settings(limits=Limits(max_active=1)),
    )
    await world.schedule.close()
    world.schedule = schedule
    await schedule.start()
    await schedule.create({"prompt": "p", "after_seconds": 60})
    with pytest.raises(ScheduleError) as caught:
        await schedule.create({"prompt": "q", "after_seconds": 60})
    assert caught.value.code == "invalid_rule"


@dataclass
class NeverMaintainable:
    """A misbehaving agent: reports idle, yet refuses every maintenance phase."""

    attempts: int = 0

    async def wait_idle(self) -> None:
        return None

    def begin_maintenance(self) -> bool:
        self.attempts += 1
        return False

    def end_maintenance(self) -> None:
        raise AssertionError("never entered")

    def followup(self, message: str) -> None:
        raise AssertionError("never in maintenance")


async def test_an_agent_that_never_grants_maintenance_does_not_make_the_owner_spin(
    world: World,
) -> None:
    agent = NeverMaintainable()
    await world.schedule.close()
    world.schedule = LiveSchedule(world.session, agent, clock=world.clock)
    await world.schedule.start()
    await world.schedule.create({"prompt": "p", "after_seconds": 1})
    await world.run_for(1)
    # Three quick tries, then one try per back-off: after 1 s, 2 s, 4 s …
    assert agent.attempts == 3
    await world.run_for(1)
    assert agent.attempts == 4
    await world.run_for(1.999)
    assert agent.attempts == 4
    await world.run_for(0.001)
    assert agent.attempts == 5


@settings(max_examples=300, deadline=None)
@given(
    offset=st.integers(min_value=0, max_value=999),
    length=st.integers(min_value=1, max_value=200_000),
)
@example(offset=0, length=2_007)  # 2.007 * 1000 == 2007.0000000000002
@example(offset=999, length=30_000 + 29_999)
def test_the_owner_decides_exactly_at_the_target(offset: int, length: int) -> None:
    """Whatever the sleep length in milliseconds, the owner wakes and decides at the target —
    not a millisecond later (seconds-to-milliseconds rounding once made it late)."""

    async def run() -> None:
        store = MemorySessionStore()
        clock = FakeClock(Instant(parse_instant(START) + offset))
        session = await store.create(now=clock.now())
        agent = FakeAgent()
        async with LiveSchedule(session, agent, clock=clock) as schedule:
            target = format_instant(Instant(clock.now() + length))
            await schedule.create({"prompt": "p", "at": target})
            while not agent.followups:
                await schedule.settled()
                assert clock.now_text() <= target
                clock.advance_to_next_wakeup()
                await schedule.settled()
            assert clock.now_text() == target
            assert f"decided at: {target}\n" in agent.followups[0]

    asyncio.run(run())


async def test_a_planner_that_disagrees_with_the_wake_up_cannot_make_the_owner_spin(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """next_wakeup says a reminder is due; plan_delivery (here: broken) says nothing is. The
    owner must yield and back off, not loop without awaiting anything."""
    plans: list[Instant] = []

    def nothing_due(state: object, now: Instant) -> None:
        plans.append(now)
        if len(plans) > 50:
            raise AssertionError("the owner is spinning")

    monkeypatch.setattr(live_module, "plan_delivery", nothing_due)
    events: list[ScheduleEvent] = []
    world.schedule.events.subscribe(events.append)
    await world.schedule.create({"prompt": "p", "after_seconds": 60})
    await world.run_for(60)
    assert len(plans) == 2  # once, then a second look: they disagree
    for wait in (1, 2, 4, 8):
        assert world.clock.next_deadline() == wait
        await world.run_for(wait)
    assert len(plans) == 6
    assert world.schedule.failure is None
    assert world.agent.followups == []
    back_offs = [event for event in events if event.kind == "back-off"]
    assert [event.retry_in_seconds for event in back_offs] == [1, 2, 4, 8, 16]
    assert {(event.outcome, event.detail) for event in back_offs} == {
        (
            "nothing due",
            "a reminder was due at 2026-11-29T20:01:00.000Z but nothing was due to deliver",
        )
    }


async def _drive(
    world: World, seconds: int, *, recreate: bool, times: list[int] | None = None
) -> list[int]:
    """Run the owner until ``seconds`` after START; after each follow-up, the "model" re-creates
    the reminder one second out when ``recreate``. The seconds (from START) at which follow-ups
    came, appended to ``times``."""
    start = parse_instant(START)
    times = [] if times is None else times
    while True:
        await world.schedule.settled()
        while len(times) < len(world.agent.followups):
            times.append((world.clock.now() - start) // 1000)
            if recreate:
                await world.schedule.create({"prompt": "again", "after_seconds": 1})
                await world.schedule.settled()
        step = world.clock.next_deadline()
        if step is None or world.clock.now() - start + step * 1000 > seconds * 1000:
            return times
        world.clock.advance(step)


async def test_a_reminder_that_re_creates_itself_is_held_to_the_follow_up_budget(
    world: World,
) -> None:
    events: list[ScheduleEvent] = []
    world.schedule.events.subscribe(events.append)
    await world.schedule.create({"prompt": "again", "after_seconds": 1})
    times = await _drive(world, 180, recreate=True)
    assert times[:8] == [1, 2, 3, 4, 5, 6, 61, 62]
    held = [event for event in events if event.kind == "back-off"]
    assert [(e.decided_at, e.outcome, e.retry_in_seconds, e.detail) for e in held[:1]] == [
        ("2026-11-29T20:00:07.000Z", "follow-up budget", 54.0, "6 reminder follow-ups within 60 s")
    ]
    assert len(held) == 3  # once per hold, one hold a minute
    assert len(times) == 18  # six in each minute, not one a second
    assert all(times[i + 6] - times[i] >= 60 for i in range(len(times) - 6))
    followups = world.agent.followups
    assert all("delayed since" not in text for text in followups[:6])
    assert (
        "decided at: 2026-11-29T20:01:01.000Z\n"
        "delayed since: 2026-11-29T20:00:07.000Z, because this session had 6 reminder "
        "follow-ups within 60 seconds, the most it allows. Do not create a reminder from a "
        "follow-up just to be called again; re-create one only if the user asked for it to "
        "repeat.\n"
        "\n"
        "reminder 1 of 1: sch_7\n"
    ) in followups[6]
    assert "delayed since" not in followups[7]


async def test_reminders_beyond_the_budget_wait_and_none_is_dropped(world: World) -> None:
    for number in range(8):
        await world.schedule.create({"prompt": f"r{number}", "after_seconds": 10})
    times = await _drive(world, 69, recreate=False)
    assert times == [10] * 6
    assert len(world.dispatches()) == 6  # the other two are still active, not dispatched
    times = await _drive(world, 71, recreate=False, times=times)
    assert times == [10] * 6 + [70, 70]
    assert [
        text.count("delayed since: 2026-11-29T20:00:10.000Z") for text in world.agent.followups
    ] == [0] * 6 + [1, 1]
    assert len(world.dispatches()) == 8


async def test_the_follow_up_budget_is_configurable() -> None:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    agent = FakeAgent()
    settings = Settings(followup_limit=2, followup_window_seconds=10)
    async with LiveSchedule(session, agent, clock=clock, settings=settings) as schedule:
        world = World(store, session, clock, agent, schedule)
        await schedule.create({"prompt": "again", "after_seconds": 1})
        assert (await _drive(world, 30, recreate=True))[:5] == [1, 2, 11, 12, 21]
    with pytest.raises(
        ValueError, match=r"^followup_limit and followup_window_seconds must be at least 1$"
    ):
        LiveSchedule(session, agent, clock=clock, settings=Settings(followup_limit=0))


async def test_the_batch_frame_budget_comes_from_the_limits() -> None:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    agent = FakeAgent()
    settings = Settings(limits=Limits(max_frame_chars=500))
    async with LiveSchedule(session, agent, clock=clock, settings=settings) as schedule:
        world = World(store, session, clock, agent, schedule)
        for prompt in ("first", "second"):
            await schedule.create({"prompt": prompt, "every_seconds": 300})
        await world.run_for(300)
    assert len(agent.followups) == 1
    assert 'prompt: "first"\n' in agent.followups[0]
    assert agent.followups[0].endswith("\nprompt: not shown; call schedule_list to read it")
    assert (
        "prompts not shown: 1 of 2, to keep this turn within 500 characters" in agent.followups[0]
    )


async def test_a_daily_reminder_follows_the_wall_clock_and_catches_up_after_downtime(
    world: World,
) -> None:
    # Every weekday at 09:00 in Tokyo; it is Sunday 2026-11-29 20:00Z (Monday 05:00 in Tokyo).
    weekdays = ["mon", "tue", "wed", "thu", "fri"]
    daily_at = {"time": "09:00", "time_zone": "Asia/Tokyo", "weekdays": weekdays}
    view = await world.schedule.create({"prompt": "standup", "daily_at": daily_at})
    assert view.scheduled_at == "2026-11-30T00:00:00.000Z"
    await world.run_for(4 * 3600)
    assert len(world.agent.followups) == 1
    assert "kind: daily (09:00 Asia/Tokyo, mon tue wed thu fri)\n" in world.agent.followups[0]
    assert keys(world.agent.followups[0]) == ["sch_1@2026-11-30T00:00:00.000Z"]
    await world.schedule.close()  # cold for about three weeks
    world.clock.advance(20 * 86_400)
    await world.reopen()
    await world.schedule.settled()
    assert len(world.agent.followups) == 2
    # Tuesday 2026-12-01 to Friday 2026-12-18: 14 weekdays due, the last delivered.
    assert (
        "due at: 2026-12-18T00:00:00.000Z\nskipped occurrences: 13\n" in (world.agent.followups[1])
    )
    _, views = await world.schedule.active()
    assert views[0].scheduled_at == "2026-12-21T00:00:00.000Z"
    assert world.dispatches()[-1] == dispatch_change(
        ScheduleId("sch_1"), parse_instant("2026-12-20T00:00:00.000Z")
    )


async def test_a_calendar_reminder_survives_a_restart_and_catches_up_once(world: World) -> None:
    # The first Monday of every month at 09:00 in Paris; it is Sunday 2026-11-29 20:00Z.
    calendar = {"rule": "FREQ=MONTHLY;BYDAY=1MO", "time": "09:00", "time_zone": "Europe/Paris"}
    view = await world.schedule.create({"prompt": "team lunch", "calendar": calendar})
    assert isinstance(view, CalendarScheduleView)
    assert (view.scheduled_at, view.start_date) == ("2026-12-07T08:00:00.000Z", "2026-11-29")
    await world.run_for(8 * 86_400)
    assert len(world.agent.followups) == 1
    assert (
        "kind: calendar (FREQ=MONTHLY;BYDAY=1MO at 09:00 Europe/Paris)\n"
        in world.agent.followups[0]
    )
    assert keys(world.agent.followups[0]) == ["sch_1@2026-12-07T08:00:00.000Z"]
    await world.schedule.close()  # cold for about a year
    world.clock.advance(365 * 86_400)
    await world.reopen()
    await world.schedule.settled()
    assert len(world.agent.followups) == 2
    # January to December 2027: twelve first Mondays due, the last (6 December) delivered.
    assert "due at: 2027-12-06T08:00:00.000Z\nskipped occurrences: 11\n" in world.agent.followups[1]
    _, views = await world.schedule.active()
    assert views[0].scheduled_at == "2028-01-03T08:00:00.000Z"


class RightShape:
    """Every method of the Agent port in its right shape; the subclasses each break one."""

    async def wait_idle(self) -> None:
        return None

    def begin_maintenance(self) -> bool:
        return True

    def end_maintenance(self) -> None:
        return None

    def followup(self, message: str) -> None:
        return None


class AsyncFollowup(RightShape):
    """``async def followup``: every reminder would be recorded and lost unawaited."""

    async def followup(self, message: str) -> None:  # type: ignore[override]
        return None


class AsyncFollowupKeyed(RightShape):
    """The optional keyed method as ``async def``: as lossy as an ``async def followup``."""

    async def followup_keyed(self, followup: FollowUp) -> None:
        return None


class AsyncMaintenance(RightShape):
    async def begin_maintenance(self) -> bool:  # type: ignore[override]
        return True


class AsyncEndMaintenance(RightShape):
    async def end_maintenance(self) -> None:  # type: ignore[override]
        return None


class PlainWaitIdle(RightShape):
    def wait_idle(self) -> None:  # type: ignore[override]
        return None


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        (
            AsyncFollowup(),
            "the agent's followup() is `async def`; it must be a plain method that does its "
            "work before it returns (a coroutine nobody awaits would lose reminders)",
        ),
        (
            AsyncFollowupKeyed(),
            "the agent's followup_keyed() is `async def`; it must be a plain method that does "
            "its work before it returns (a coroutine nobody awaits would lose reminders)",
        ),
        (
            AsyncMaintenance(),
            "the agent's begin_maintenance() is `async def`; it must be a plain method that "
            "does its work before it returns (a coroutine nobody awaits would lose reminders)",
        ),
        (
            AsyncEndMaintenance(),
            "the agent's end_maintenance() is `async def`; it must be a plain method that "
            "does its work before it returns (a coroutine nobody awaits would lose reminders)",
        ),
        (PlainWaitIdle(), "the agent's wait_idle() must be `async def`"),
        (object(), "the agent has no followup() method"),
    ],
)
async def test_an_agent_of_the_wrong_shape_is_refused_at_start(
    world: World, agent: object, message: str
) -> None:
    schedule = LiveSchedule(world.session, agent, clock=world.clock)  # type: ignore[arg-type]
    with pytest.raises(TypeError) as raised:
        await schedule.start()
    assert str(raised.value) == message


class SneakyAwaitables:
    """Plain methods that nevertheless return coroutines (a decorator could do this)."""

    def __init__(self, *, maintenance: bool) -> None:
        self.maintenance = maintenance
        self.ran: list[str] = []
        self.returned: list[Coroutine[None, None, None]] = []

    async def wait_idle(self) -> None:
        return None

    def begin_maintenance(self) -> object:
        if self.maintenance:
            return self._coroutine("begin_maintenance")
        return True

    def end_maintenance(self) -> None:
        return None

    def followup(self, message: str) -> object:
        return self._coroutine("followup")

    def _coroutine(self, name: str) -> Coroutine[None, None, None]:
        async def run() -> None:
            self.ran.append(name)

        coroutine = run()
        self.returned.append(coroutine)
        return coroutine


class SneakyKeyed(SneakyAwaitables):
    """A keyed follow-up method that returns a coroutine."""

    def followup_keyed(self, followup: FollowUp) -> object:
        return self._coroutine("followup_keyed")


@pytest.mark.parametrize("method", ["followup", "followup_keyed", "begin_maintenance"])
async def test_an_awaitable_returned_at_call_time_is_closed_and_records_no_dispatch(
    world: World, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    maintenance = method == "begin_maintenance"
    agent = (SneakyKeyed if method == "followup_keyed" else SneakyAwaitables)(
        maintenance=maintenance
    )
    await world.schedule.close()
    world.schedule = LiveSchedule(world.session, agent, clock=world.clock)  # type: ignore[arg-type]
    await world.schedule.start()
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    await world.run_for(60)
    assert world.dispatches() == []
    assert agent.ran == []
    assert agent.returned
    states = {inspect.getcoroutinestate(coroutine) for coroutine in agent.returned}
    assert states == {inspect.CORO_CLOSED}  # closed, never run, not left for the collector
    assert caplog.records[0].getMessage() == (
        f"the agent's {method}() returned an awaitable instead of doing its work; it was "
        f"discarded and nothing was recorded (write {method}() as a plain method)"
    )
    active = await world.schedule.active()
    assert [view.id for view in active[1]] == ["sch_1"]


class KeyedAgent(RightShape):
    """An agent with the optional keyed method: given the keys with the text, never the text
    alone."""

    def __init__(self) -> None:
        self.given: list[FollowUp] = []

    def followup(self, message: str) -> None:
        raise AssertionError("an agent with followup_keyed() is not given the text alone")

    def followup_keyed(self, followup: FollowUp) -> None:
        self.given.append(followup)


async def test_a_keyed_agent_is_given_the_occurrence_keys_with_the_text(world: World) -> None:
    agent = KeyedAgent()
    await world.schedule.close()
    world.schedule = LiveSchedule(world.session, agent, clock=world.clock)
    await world.schedule.start()
    for prompt in ("drink water", "stand up"):
        await world.schedule.create({"prompt": prompt, "every_seconds": 3_600})
    await world.run_for(3_600)
    (given,) = agent.given
    assert given.occurrences == (
        "sch_1@2026-11-29T21:00:00.000Z",
        "sch_2@2026-11-29T21:00:00.000Z",
    )
    assert keys(given.text) == list(given.occurrences)  # the keys the frame names, in its order
    assert [dispatch.id for dispatch in world.dispatches()] == ["sch_1", "sch_2"]


async def test_a_plain_agent_and_a_keyed_agent_are_given_the_same_text(world: World) -> None:
    await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
    await world.run_for(60)
    (plain,) = world.agent.followups
    store = MemorySessionStore()
    session = await store.create(now=parse_instant(START))
    clock = FakeClock(START)
    agent = KeyedAgent()
    async with LiveSchedule(session, agent, clock=clock) as schedule:
        await schedule.create({"prompt": "stretch", "after_seconds": 60})
        clock.advance(60)
        await schedule.settled()
    (keyed,) = agent.given
    assert keyed == FollowUp(text=plain, occurrences=("sch_1@2026-11-29T20:01:00.000Z",))


async def test_tools_called_before_start_see_the_log_and_reuse_no_id(tmp_path: Path) -> None:
    """Regression: a management call made before ``start`` decided on an empty state — it
    listed nothing and gave a new reminder an id the log had used already, a change the fold
    then refused, so the session could never start again."""
    store = JsonlSessionStore(tmp_path)
    clock = FakeClock(START)
    async with (
        await store.create(now=clock.now()) as session,
        LiveSchedule(session, FakeAgent(), clock=clock) as schedule,
    ):
        await ScheduleTools(schedule).call(
            "schedule_create", {"prompt": "stretch", "after_seconds": 600}
        )
    async with await store.open(session.id) as session:
        schedule = LiveSchedule(session, FakeAgent(), clock=clock)
        tools = ScheduleTools(schedule)
        listed = await tools.call_json("schedule_list")
        assert [view["id"] for view in json.loads(listed)["schedules"]] == ["sch_1"]
        created = await tools.call_json("schedule_create", '{"prompt":"water","after_seconds":900}')
        assert json.loads(created)["schedule"]["id"] == "sch_2"
        async with schedule:
            _, views = await schedule.active()
            assert [view.id for view in views] == ["sch_1", "sch_2"]
    async with (
        await store.open(session.id) as session,
        LiveSchedule(session, FakeAgent(), clock=clock) as schedule,
    ):
        _, views = await schedule.active()
        assert [view.id for view in views] == ["sch_1", "sch_2"]


async def test_a_closed_schedule_refuses_management_and_does_not_start_again() -> None:
    clock = FakeClock(START)
    session = await MemorySessionStore().create(now=clock.now())
    schedule = LiveSchedule(session, FakeAgent(), clock=clock)
    async with schedule:
        await schedule.create({"prompt": "stretch", "after_seconds": 600})
    with pytest.raises(ScheduleClosedError) as refused:
        await schedule.create({"prompt": "water", "after_seconds": 600})
    assert str(refused.value) == (
        "this LiveSchedule is closed: open the session again and start a new one"
    )
    with pytest.raises(RuntimeError) as restarted:
        await schedule.start()
    assert str(restarted.value) == "this LiveSchedule was closed; a closed one does not start again"
