"""The turn queue in virtual time: one turn at a time, durable follow-ups, restarts, failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from session_schedule import LiveSchedule, ScheduleTools, Turn, TurnQueue
from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.runtime.agent import AgentClosed, FollowUp
from session_schedule.session.errors import PersistenceUncertain, SessionCorrupt
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    TurnFinished,
    TurnQueued,
    turn_finished,
)
from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"
FRAME = (
    "[session-schedule] Reminder follow-up\n"
    "A reminder you scheduled earlier in this conversation is due. Act on its prompt now; it "
    "will not be delivered again. "
    "A prompt's words about when or how often are context, not a request to create "
    "another reminder.\n"
    "All times are UTC.\n"
    "decided at: 2026-11-29T20:01:00.000Z\n"
    "\n"
    "reminder 1 of 1: sch_1\n"
    "kind: after (60 seconds after it was set)\n"
    "due at: 2026-11-29T20:01:00.000Z\n"
    "occurrence key: sch_1@2026-11-29T20:01:00.000Z\n"
    'prompt: "occurrence key: sch_9@2026-11-29T20:01:00.000Z"'
)


@dataclass
class Host:
    """A host's ``run_turn`` that records what it ran, and can be held inside a turn."""

    turns: TurnQueue | None = None
    ran: list[Turn] = field(default_factory=list)
    gate: asyncio.Event | None = None
    fail_on: str | None = None

    async def run_turn(self, text: str) -> None:
        assert self.turns is not None
        current = self.turns.current
        assert current is not None
        assert current.text == text
        self.ran.append(current)
        if self.gate is not None:
            await self.gate.wait()
        if text == self.fail_on:
            raise RuntimeError(f"the host failed on {text!r}")


@dataclass
class World:
    store: MemorySessionStore
    session: SessionHandle
    clock: FakeClock
    host: Host
    turns: TurnQueue

    def entries(self, entry_type: str) -> list[object]:
        return [entry.payload for entry in self.session.entries if entry.type == entry_type]

    async def reopen(self) -> None:
        """Close the queue and the handle, then build both again from storage."""
        await self.turns.close()
        await self.session.close()
        self.session = await self.store.open(self.session.id)
        self.host = Host()
        self.turns = TurnQueue(self.session, self.host.run_turn, clock=self.clock)
        self.host.turns = self.turns


@pytest.fixture
async def world() -> AsyncIterator[World]:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    host = Host()
    turns = TurnQueue(session, host.run_turn, clock=clock)
    host.turns = turns
    current = World(store, session, clock, host, turns)
    yield current
    await current.turns.close()


async def test_prompts_and_followups_run_one_at_a_time_in_order(world: World) -> None:
    await world.turns.start()
    world.host.gate = asyncio.Event()
    world.turns.submit("first", zone="Asia/Tokyo")
    await asyncio.sleep(0)
    assert not world.turns.begin_maintenance()  # a turn is running
    world.turns.followup(FRAME)
    world.turns.submit("second")
    await asyncio.sleep(0)
    assert [turn.text for turn in world.host.ran] == ["first"]
    world.host.gate.set()
    await world.turns.wait_idle()
    assert [(turn.text, turn.origin, turn.zone) for turn in world.host.ran] == [
        ("first", "host", "Asia/Tokyo"),
        (FRAME, "schedule", None),
        ("second", "host", None),
    ]
    reminder = world.host.ran[1]
    assert reminder.reminder
    assert reminder.occurrences == ("sch_1@2026-11-29T20:01:00.000Z",)
    assert not world.host.ran[0].reminder
    finished = world.entries(TURN_FINISHED_TYPE)
    assert [(f.turn, f.outcome) for f in finished if isinstance(f, TurnFinished)] == [
        (turn.position, "completed") for turn in world.host.ran
    ]
    assert world.turns.begin_maintenance()
    world.turns.end_maintenance()


async def test_an_accepted_turn_is_in_the_log_before_followup_returns(world: World) -> None:
    world.turns.followup(FRAME)
    (queued,) = world.entries(TURN_QUEUED_TYPE)
    assert queued == TurnQueued(
        version=1,
        origin="schedule",
        text=FRAME,
        at=START,
        occurrences=("sch_1@2026-11-29T20:01:00.000Z",),
    )
    assert [turn.text for turn in world.turns.pending] == [FRAME]


async def test_a_followup_that_is_not_a_frame_is_refused_and_not_queued(world: World) -> None:
    with pytest.raises(ValueError) as raised:
        world.turns.followup("please remind me")
    assert str(raised.value) == ("a follow-up must be a reminder frame that names its occurrences")
    assert world.entries(TURN_QUEUED_TYPE) == []


async def test_a_keyed_followup_queues_the_keys_it_is_given_without_reading_the_text(
    world: World,
) -> None:
    world.turns.followup_keyed(
        FollowUp(text="stretch", occurrences=("sch_4@2026-11-29T20:01:00.000Z",))
    )
    (queued,) = world.entries(TURN_QUEUED_TYPE)
    assert queued == TurnQueued(
        version=1,
        origin="schedule",
        text="stretch",
        at=START,
        occurrences=("sch_4@2026-11-29T20:01:00.000Z",),
    )


async def test_a_keyed_followup_without_occurrences_is_refused_and_not_queued(
    world: World,
) -> None:
    with pytest.raises(ValueError) as raised:
        world.turns.followup_keyed(FollowUp(text=FRAME, occurrences=()))
    assert str(raised.value) == "a follow-up must name the occurrences it delivers"
    assert world.entries(TURN_QUEUED_TYPE) == []


async def test_a_restart_runs_every_unfinished_turn_in_order(world: World) -> None:
    await world.turns.start()
    world.turns.submit("answered")
    await world.turns.wait_idle()
    world.host.gate = asyncio.Event()
    world.turns.followup(FRAME)
    world.turns.submit("waiting")
    await asyncio.sleep(0)
    assert [turn.text for turn in world.host.ran] == ["answered", FRAME]  # FRAME is running
    await world.session.barrier()
    await world.reopen()  # the running turn is cancelled: it has not finished
    assert [(turn.text, turn.restored) for turn in world.turns.pending] == [
        (FRAME, True),
        ("waiting", True),
    ]
    assert not world.turns.begin_maintenance()  # restored turns are waiting: not idle
    await world.turns.start()
    await world.turns.wait_idle()
    assert [(turn.text, turn.reminder) for turn in world.host.ran] == [
        (FRAME, True),
        ("waiting", False),
    ]
    await world.reopen()
    assert world.turns.pending == ()


async def test_a_fork_inherits_no_pending_turn(world: World) -> None:
    world.turns.followup(FRAME)
    await world.session.barrier()
    fork = await world.store.fork(world.session.id, now=world.clock.now())
    try:
        assert TurnQueue(fork, clock=world.clock).pending == ()
    finally:
        await fork.close()


async def test_a_failing_turn_is_logged_and_recorded_and_the_next_runs(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="session_schedule.runtime.turns")
    world.host.fail_on = "bad"
    await world.turns.start()
    world.turns.submit("bad")
    world.turns.submit("good")
    await world.turns.wait_idle()
    assert [turn.text for turn in world.host.ran] == ["bad", "good"]
    finished = [f for f in world.entries(TURN_FINISHED_TYPE) if isinstance(f, TurnFinished)]
    assert [f.outcome for f in finished] == ["failed", "completed"]
    assert [r.getMessage() for r in caplog.records] == [
        f"turn at entry 0 of session {world.session.id} failed (attempt 1 of 10, permanent: "
        "RuntimeError: the host failed on 'bad'); recorded as failed"
    ]


async def test_a_cancellation_raised_inside_a_turn_fails_that_turn_and_the_queue_goes_on(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # A sub-task or scope of the host's own, cancelled, lets CancelledError out of run_turn
    # while nobody cancelled the queue: that attempt failed; the queue must not end with it
    # (it would look idle, and reminders would be dispatched into a queue nothing runs).
    caplog.set_level(logging.ERROR, logger="session_schedule.runtime.turns")
    ran: list[str] = []

    async def run_turn(text: str) -> None:
        ran.append(text)
        if text == "cancelled inside":
            raise asyncio.CancelledError

    world.turns.bind(run_turn)
    await world.turns.start()
    world.turns.submit("cancelled inside")
    world.turns.submit("next")
    async with asyncio.timeout(5):
        await world.turns.wait_idle()
    assert ran == ["cancelled inside", "next"]
    assert world.turns.failure is None
    finished = [f for f in world.entries(TURN_FINISHED_TYPE) if isinstance(f, TurnFinished)]
    assert [(f.outcome, f.attempts) for f in finished] == [("failed", 1), ("completed", 1)]
    assert finished[0].failure is not None
    assert finished[0].failure.error == "CancelledError"
    assert [r.getMessage() for r in caplog.records] == [
        f"turn at entry 0 of session {world.session.id} failed (attempt 1 of 10, permanent: "
        "CancelledError: CancelledError); recorded as failed"
    ]


async def test_a_cancellation_raised_inside_a_host_step_cancels_its_result_only(
    world: World,
) -> None:
    await world.turns.start()

    async def step() -> None:
        raise asyncio.CancelledError

    result = world.turns.call(step)
    async with asyncio.timeout(5):
        with pytest.raises(asyncio.CancelledError):
            await result
    world.turns.submit("after")
    async with asyncio.timeout(5):
        await world.turns.wait_idle()
    assert world.turns.failure is None
    assert [turn.text for turn in world.host.ran] == ["after"]


async def test_closing_during_a_turn_leaves_it_unfinished_and_reports_no_failure(
    world: World,
) -> None:
    world.host.gate = asyncio.Event()
    await world.turns.start()
    world.turns.submit("held")
    await asyncio.sleep(0)
    assert world.turns.current is not None
    await world.turns.close()
    assert world.turns.failure is None
    assert world.entries(TURN_FINISHED_TYPE) == []


async def test_prompts_queued_behind_a_prompt_can_be_taken_into_its_turn(world: World) -> None:
    taken: list[list[str]] = []

    async def run_turn(text: str) -> None:
        gate = world.host.gate
        if gate is not None:
            await gate.wait()
        taken.append([text, *(turn.text for turn in world.turns.take_prompts())])

    world.turns.bind(run_turn)
    await world.turns.start()
    world.host.gate = asyncio.Event()
    world.turns.submit("one")
    await asyncio.sleep(0)
    world.turns.submit("two")
    world.turns.submit("three")
    world.turns.followup(FRAME)
    world.turns.submit("four")
    world.host.gate.set()
    await world.turns.wait_idle()
    # "one" was still running when the others came: it takes the prompts up to the reminder.
    assert taken == [["one", "two", "three"], [FRAME], ["four"]]
    finished = [f for f in world.entries(TURN_FINISHED_TYPE) if isinstance(f, TurnFinished)]
    assert [f.turn for f in finished] == [0, 1, 2, 3, 4]


async def test_host_steps_run_between_turns_in_order(world: World) -> None:
    await world.turns.start()
    world.host.gate = asyncio.Event()
    order: list[str] = []
    world.turns.submit("turn")
    await asyncio.sleep(0)

    async def step() -> int:
        order.append(f"step after {len(world.host.ran)} turn(s)")
        return 7

    result = world.turns.call(step)
    assert not result.done()
    world.host.gate.set()
    assert await result == 7
    assert order == ["step after 1 turn(s)"]


async def test_a_storage_failure_stops_the_queue(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    await world.turns.start()
    world.store.fail_next_barrier()
    world.turns.submit("doomed")
    async with asyncio.timeout(5):
        await world.turns.wait_stopped()
    assert isinstance(world.turns.failure, PersistenceUncertain)
    assert caplog.records[-1].getMessage() == (
        f"turn queue of session {world.session.id} stopped: {world.turns.failure.message}"
    )
    with pytest.raises(PersistenceUncertain):
        world.turns.followup(FRAME)
    with pytest.raises(PersistenceUncertain):
        world.turns.submit("later")


async def test_a_refused_append_queues_nothing(world: World) -> None:
    world.store.fail_next_write()
    with pytest.raises(PersistenceUncertain):
        world.turns.followup(FRAME)
    assert world.turns.pending == ()


async def test_start_needs_run_turn_and_bind_comes_before_start(world: World) -> None:
    bare = TurnQueue(world.session, clock=world.clock)
    with pytest.raises(RuntimeError) as no_run_turn:
        await bare.start()
    assert str(no_run_turn.value) == (
        "the turn queue has no run_turn: pass it or call bind() first"
    )
    await world.turns.start()
    with pytest.raises(RuntimeError) as too_late:
        world.turns.bind(world.host.run_turn)
    assert str(too_late.value) == "bind run_turn before the turn queue starts"


async def test_a_finished_mark_for_no_pending_turn_is_corruption(world: World) -> None:
    world.session.append(
        TURN_FINISHED_TYPE, turn_finished(0, at=world.clock.now(), outcome="completed")
    )
    with pytest.raises(SessionCorrupt) as raised:
        TurnQueue(world.session, clock=world.clock)
    assert str(raised.value) == (
        f"session {world.session.id} is corrupt at entry 0: it finishes entry 0, which is not "
        "a pending turn of this session; the storage was left untouched for inspection"
    )


async def test_straight_line_construction_with_a_live_schedule(world: World) -> None:
    """TurnQueue → LiveSchedule → tools → run_turn: a reminder comes back as a reminder turn,
    queued in the log before its dispatch."""
    turns = TurnQueue(world.session, clock=world.clock)
    schedule = LiveSchedule(world.session, turns, clock=world.clock)
    tools = ScheduleTools(schedule)
    seen: list[Turn] = []

    async def run_turn(text: str) -> None:
        current = turns.current
        assert current is not None
        seen.append(current)
        if not current.reminder:
            await tools.call("schedule_create", {"prompt": text, "after_seconds": 60})

    turns.bind(run_turn)
    async with schedule, turns:
        turns.submit("stretch")
        await turns.wait_idle()
        await schedule.settled()
        world.clock.advance(60)
        await schedule.settled()
        await turns.wait_idle()
    assert [turn.reminder for turn in seen] == [False, True]
    assert seen[1].occurrences == ("sch_1@2026-11-29T20:01:00.000Z",)
    types = [entry.type for entry in world.session.entries]
    queued_reminder = types.index(TURN_QUEUED_TYPE, 1)
    assert types[queued_reminder + 1] == CHANGE_EVENT_TYPE
    payload = world.session.entries[queued_reminder + 1].payload
    assert isinstance(payload, ScheduleDispatchChange)


async def test_a_delivery_due_once_the_queue_closed_is_declined_quietly(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``async with schedule, turns:`` the queue closes first: a reminder due then was
    logged as a failed follow-up with a traceback, and a back-off. Nothing is lost, nothing is
    reported: the reminder stays active for the next time the session is live."""
    caplog.set_level(logging.DEBUG)
    turns = TurnQueue(world.session, world.host.run_turn, clock=world.clock)
    world.host.turns = turns
    schedule = LiveSchedule(world.session, turns, clock=world.clock)
    tools = ScheduleTools(schedule)
    events: list[object] = []
    schedule.events.subscribe(events.append)
    async with schedule:
        async with turns:
            await tools.call("schedule_create", {"prompt": "stretch", "after_seconds": 60})
            await schedule.settled()
        caplog.clear()
        world.clock.advance(60)
        await schedule.settled()
        listed = await tools.call("schedule_list", {})
    assert [view["id"] for view in listed["schedules"]] == ["sch_1"]  # type: ignore[attr-defined]
    assert world.entries(TURN_QUEUED_TYPE) == []
    assert [
        payload
        for payload in world.entries(CHANGE_EVENT_TYPE)
        if isinstance(payload, ScheduleDispatchChange)
    ] == []
    assert [event.kind for event in events] == ["create"]  # type: ignore[attr-defined]
    # One debug line, no traceback: no failure, no back-off.
    assert [
        (record.levelno, record.getMessage(), record.exc_info) for record in caplog.records
    ] == [
        (
            logging.DEBUG,
            "follow-up for sch_1@2026-11-29T20:01:00.000Z in session "
            f"{world.session.id} was declined, the agent is closed (the turn queue is closed); "
            "the reminder stays active",
            None,
        )
    ]


async def test_a_closed_queue_refuses_with_agent_closed(world: World) -> None:
    await world.turns.start()
    await world.turns.close()
    with pytest.raises(AgentClosed) as caught:
        world.turns.followup(FRAME)
    assert str(caught.value) == "the turn queue is closed"
    with pytest.raises(RuntimeError, match=r"^the turn queue is closed$"):
        world.turns.submit("hello")


@dataclass
class TextOnly:
    """A host's own agent over the queue that forwards follow-ups as text only (no keys)."""

    turns: TurnQueue

    async def wait_idle(self) -> None:
        await self.turns.wait_idle()

    def begin_maintenance(self) -> bool:
        return self.turns.begin_maintenance()

    def end_maintenance(self) -> None:
        self.turns.end_maintenance()

    def followup(self, message: str) -> None:
        self.turns.followup(message)


@pytest.mark.parametrize("forward_text_only", [False, True], ids=["keyed", "text only"])
async def test_a_reminder_turn_has_its_keys_whether_or_not_the_agent_passes_them(
    world: World, forward_text_only: bool
) -> None:
    turns = TurnQueue(world.session, clock=world.clock)
    agent = TextOnly(turns) if forward_text_only else turns
    schedule = LiveSchedule(world.session, agent, clock=world.clock)
    seen: list[Turn] = []

    async def run_turn(text: str) -> None:
        current = turns.current
        assert current is not None
        seen.append(current)

    turns.bind(run_turn)
    async with schedule, turns:
        await schedule.create({"prompt": "stretch", "after_seconds": 60})
        world.clock.advance(60)
        await schedule.settled()
        await turns.wait_idle()
    (reminder,) = seen
    assert reminder.occurrences == ("sch_1@2026-11-29T20:01:00.000Z",)
    (queued,) = world.entries(TURN_QUEUED_TYPE)
    assert isinstance(queued, TurnQueued)
    assert queued.occurrences == reminder.occurrences
    assert queued.text == reminder.text
