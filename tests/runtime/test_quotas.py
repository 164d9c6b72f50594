"""The quotas a person sets: reminder turns per day and quiet hours (runtime/live.py Rule 5d)."""

from __future__ import annotations

import msgspec
import pytest

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.quiet import QuietHours
from session_schedule.runtime.events import ScheduleEvent
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.turns import TURN_QUEUED_TYPE, turn_queued
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from tests.runtime.test_live import START, World, _drive

NIGHT = QuietHours(start="22:00", end="07:00", time_zone="Europe/Paris")


def _decided(followup: str) -> str:
    return next(
        line.removeprefix("decided at: ")
        for line in followup.splitlines()
        if line.startswith("decided at: ")
    )


async def _world(settings: Settings) -> World:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    agent = FakeAgent()
    schedule = LiveSchedule(session, agent, clock=clock, settings=settings)
    await schedule.start()
    return World(store, session, clock, agent, schedule)


async def test_reminder_turns_beyond_the_daily_quota_wait_for_the_next_day() -> None:
    world = await _world(Settings(max_reminder_turns_per_day=3))
    events: list[ScheduleEvent] = []
    world.schedule.events.subscribe(events.append)
    await world.schedule.create({"prompt": "again", "after_seconds": 1})
    times = await _drive(world, 86_410, recreate=True)
    assert times == [1, 2, 3, 86_401, 86_402, 86_403]
    held = [event for event in events if event.kind == "back-off"]
    assert [(e.decided_at, e.outcome, e.retry_in_seconds, e.detail) for e in held] == [
        (
            "2026-11-29T20:00:04.000Z",
            "follow-up budget",
            86_397.0,
            "3 reminder follow-ups within 86400 s",
        ),
        (
            "2026-11-30T20:00:04.000Z",
            "follow-up budget",
            86_397.0,
            "3 reminder follow-ups within 86400 s",
        ),
    ]
    assert (
        "decided at: 2026-11-30T20:00:01.000Z\n"
        "delayed since: 2026-11-29T20:00:04.000Z, because this session had 3 reminder "
        "follow-ups within 86400 seconds, the most it allows."
    ) in world.agent.followups[3]
    assert "delayed since" not in world.agent.followups[4]
    await world.schedule.close()
    await world.session.close()


async def test_the_daily_quota_counts_the_reminder_turns_the_log_holds() -> None:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    earlier = parse_instant("2026-11-29T08:00:00.000Z")
    for second in range(3):
        session.append(
            TURN_QUEUED_TYPE,
            turn_queued(
                "a reminder",
                at=Instant(earlier + second * 1000),
                origin="schedule",
                occurrences=(f"sch_9@2026-11-29T08:00:0{second}.000Z",),
            ),
        )
    session.append(TURN_QUEUED_TYPE, turn_queued("a prompt", at=earlier, origin="host"))
    agent = FakeAgent()
    settings = Settings(max_reminder_turns_per_day=3)
    async with LiveSchedule(session, agent, clock=clock, settings=settings) as schedule:
        world = World(store, session, clock, agent, schedule)
        await schedule.create({"prompt": "later", "after_seconds": 60})
        assert await _drive(world, 12 * 3600 + 60, recreate=False) == [12 * 3600]
        text = agent.followups[0]
        assert "decided at: 2026-11-30T08:00:00.000Z\n" in text
        assert "delayed since: 2026-11-29T20:01:00.000Z, because this session had 3 " in text
    await session.close()


async def test_a_reminder_due_in_quiet_hours_comes_when_they_end() -> None:
    world = await _world(Settings(quiet_hours=NIGHT))
    events: list[ScheduleEvent] = []
    world.schedule.events.subscribe(events.append)
    # START is 21:00 in Paris: the reminder is due at 22:00, when the quiet hours begin.
    await world.schedule.create({"prompt": "during", "after_seconds": 3600})
    await world.run_for(11 * 3600)
    assert [_decided(text) for text in world.agent.followups] == ["2026-11-30T06:00:00.000Z"]
    assert (
        "decided at: 2026-11-30T06:00:00.000Z\n"
        "deferred since: 2026-11-29T21:00:00.000Z, by the user's quiet hours (22:00 to 07:00 "
        "Europe/Paris), which have just ended.\n"
    ) in world.agent.followups[0]
    deferred = [event for event in events if event.kind == "back-off"]
    assert [(e.decided_at, e.outcome, e.retry_in_seconds, e.detail) for e in deferred] == [
        ("2026-11-29T21:00:00.000Z", "quiet hours", 32_400.0, "22:00 to 07:00 Europe/Paris")
    ]
    await world.schedule.close()
    await world.session.close()


async def test_a_deferral_whose_reminder_was_deleted_does_not_hide_the_next_one() -> None:
    world = await _world(Settings(quiet_hours=NIGHT))
    events: list[ScheduleEvent] = []
    world.schedule.events.subscribe(events.append)
    await world.schedule.create({"prompt": "deleted at night", "after_seconds": 3600})
    await world.run_for(2 * 3600)
    await world.schedule.delete({"id": "sch_1"})
    await world.schedule.create({"prompt": "the next night", "after_seconds": 24 * 3600})
    await world.run_for(2 * 24 * 3600)
    deferred = [event for event in events if event.kind == "back-off"]
    assert [(e.decided_at, e.outcome) for e in deferred] == [
        ("2026-11-29T21:00:00.000Z", "quiet hours"),
        ("2026-11-30T22:00:00.000Z", "quiet hours"),
    ]
    assert [_decided(text) for text in world.agent.followups] == ["2026-12-01T06:00:00.000Z"]
    assert "deferred since: 2026-11-30T22:00:00.000Z," in world.agent.followups[0]
    await world.schedule.close()
    await world.session.close()


async def test_a_quota_that_does_not_exist_is_refused_and_nothing_is_written() -> None:
    world = await _world(Settings())
    before = len(world.session.entries)
    with pytest.raises(ValueError) as refused:
        await world.schedule.set_quota("bogus", 3)  # type: ignore[arg-type]
    assert str(refused.value) == (
        "'bogus' is not a quota; the quotas are turns_per_day, quiet_hours and max_active."
    )
    assert len(world.session.entries) == before
    await world.schedule.close()
    await world.session.close()


async def test_settled_returns_once_the_owner_sleeps_on_the_virtual_clock() -> None:
    world = await _world(Settings())
    for seconds in (10, 11, 12):
        await world.schedule.create({"prompt": f"in {seconds} s", "after_seconds": seconds})
    await world.schedule.settled()
    assert world.clock.next_deadline() == 10.0
    world.clock.advance(10)
    await world.schedule.settled()
    # The owner delivered the first and sleeps until the second: its sleep is registered.
    assert world.clock.next_deadline() == 1.0
    await world.schedule.close()
    await world.session.close()


async def test_a_reminder_due_before_the_quiet_hours_is_not_deferred() -> None:
    world = await _world(Settings(quiet_hours=NIGHT))
    await world.schedule.create({"prompt": "before", "after_seconds": 59 * 60})
    await world.run_for(3600)
    assert [_decided(text) for text in world.agent.followups] == ["2026-11-29T20:59:00.000Z"]
    assert "deferred since" not in world.agent.followups[0]
    await world.schedule.close()
    await world.session.close()


async def test_a_recurring_reminder_catches_up_once_when_the_quiet_hours_end() -> None:
    world = await _world(Settings(quiet_hours=NIGHT))
    await world.schedule.create({"prompt": "tick", "every_seconds": 3600})
    await world.run_for(10 * 3600)
    # 22:00 to 07:00 Paris is 21:00Z to 06:00Z: one catch-up turn at its end.
    assert [_decided(text) for text in world.agent.followups] == ["2026-11-30T06:00:00.000Z"]
    assert "skipped occurrences: 9" in world.agent.followups[0]
    assert "deferred since: 2026-11-29T21:00:00.000Z" in world.agent.followups[0]
    await world.schedule.close()
    await world.session.close()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            Settings(max_reminder_turns_per_day=0),
            "max_reminder_turns_per_day must be at least 1 (or None)",
        ),
        (
            Settings(quiet_hours=QuietHours(start="22:00", end="22:00", time_zone="UTC")),
            "quiet hours: the window opens and closes at 22:00; leave it out",
        ),
    ],
)
async def test_a_quota_that_cannot_hold_is_refused(settings: Settings, message: str) -> None:
    session = await MemorySessionStore().create(now=FakeClock(START).now())
    with pytest.raises(ValueError) as raised:
        LiveSchedule(session, FakeAgent(), settings=settings)
    assert str(raised.value) == message
    await session.close()


async def test_a_session_s_daily_quota_beats_the_program_s_and_survives_a_reopen() -> None:
    world = await _world(Settings(max_reminder_turns_per_day=50))
    quotas = await world.schedule.set_quota("turns_per_day", 3)
    assert (quotas.turns_per_day, quotas.turns_per_day_set_by) == (3, "session")
    assert world.session.entries[-1].type == "schedule/quotas"
    await world.schedule.create({"prompt": "again", "after_seconds": 1})
    assert await _drive(world, 86_410, recreate=True) == [1, 2, 3, 86_401, 86_402, 86_403]
    await world.schedule.close()
    # Reopened, the session still applies its own quota (and the turns it already had).
    async with LiveSchedule(world.session, FakeAgent(), clock=world.clock) as schedule:
        assert schedule.quotas().turns_per_day == 3
        assert (await schedule.set_quota("turns_per_day", None)).turns_per_day is None
        assert (await schedule.set_quota("turns_per_day", msgspec.UNSET)).turns_per_day_set_by == (
            "program"
        )
    await world.session.close()


async def test_a_session_s_quiet_hours_defer_a_reminder_and_off_lifts_the_program_s() -> None:
    world = await _world(Settings())
    await world.schedule.set_quota("quiet_hours", NIGHT)
    await world.schedule.create({"prompt": "during", "after_seconds": 3600})
    await world.run_for(11 * 3600)
    assert [_decided(text) for text in world.agent.followups] == ["2026-11-30T06:00:00.000Z"]
    await world.schedule.close()
    await world.session.close()
    lifted = await _world(Settings(quiet_hours=NIGHT))
    assert (await lifted.schedule.set_quota("quiet_hours", None)).quiet_hours is None
    await lifted.schedule.create({"prompt": "during", "after_seconds": 3600})
    await lifted.run_for(2 * 3600)
    assert [_decided(text) for text in lifted.agent.followups] == ["2026-11-29T21:00:00.000Z"]
    await lifted.schedule.close()
    await lifted.session.close()


async def test_a_session_s_active_reminder_quota_only_lowers_the_program_s() -> None:
    world = await _world(Settings())
    await world.schedule.set_quota("max_active", 1)
    await world.schedule.create({"prompt": "one", "after_seconds": 60})
    with pytest.raises(ScheduleError) as raised:
        await world.schedule.create({"prompt": "two", "after_seconds": 60})
    assert raised.value.message == (
        "this session already has 1 active reminders, the most it may have (max_active = 1); "
        "delete one before creating another."
    )
    with pytest.raises(ValueError) as refused:
        await world.schedule.set_quota("max_active", 101)
    assert str(refused.value) == (
        "active reminders must be a whole number from 1 to 100, the most this program allows, "
        "or default."
    )
    with pytest.raises(ValueError) as refused:
        await world.schedule.set_quota("turns_per_day", 0)
    assert str(refused.value) == (
        "reminder turns per day must be a whole number from 1 to 100,000, off or default."
    )
    assert world.schedule.quotas().max_active == 1
    await world.schedule.close()
    await world.session.close()


async def test_a_log_that_never_sets_quotas_holds_no_quotas_entry() -> None:
    world = await _world(Settings(max_reminder_turns_per_day=3, quiet_hours=NIGHT))
    await world.schedule.create({"prompt": "again", "after_seconds": 1})
    await world.run_for(60)
    assert all(entry.type != "schedule/quotas" for entry in world.session.entries)
    await world.schedule.close()
    await world.session.close()


async def _deferred_frame(*, reopen: bool) -> str:
    """The follow-up of a reminder due at 22:01 UTC in quiet hours 22:00 to 23:00, from a
    session kept open throughout, or closed at 22:02 and opened again at 22:32."""
    clock = FakeClock("2026-12-01T21:59:00.000Z")
    settings = Settings(quiet_hours=QuietHours(start="22:00", end="23:00", time_zone="UTC"))
    store = MemorySessionStore()
    session = await store.create(now=clock.now())
    agent = FakeAgent()
    schedule = LiveSchedule(session, agent, clock=clock, settings=settings)
    await schedule.start()
    world = World(store, session, clock, agent, schedule)
    await schedule.create({"prompt": "p", "after_seconds": 120})
    if reopen:
        await world.run_for(180)
        await schedule.close()
        await session.close()
        clock.advance(1800)
        session = await store.open(session.id)
        schedule = LiveSchedule(session, agent, clock=clock, settings=settings)
        await schedule.start()
        world = World(store, session, clock, agent, schedule)
        await world.run_for(1900)
    else:
        await world.run_for(3700)
    await schedule.close()
    await session.close()
    assert len(agent.followups) == 1
    return agent.followups[0]


async def test_deferred_since_is_when_the_deferral_began_however_often_the_session_reopened() -> (
    None
):
    kept_open = await _deferred_frame(reopen=False)
    reopened = await _deferred_frame(reopen=True)
    assert reopened == kept_open
    assert (
        "decided at: 2026-12-01T23:00:00.000Z\n"
        "deferred since: 2026-12-01T22:01:00.000Z, by the user's quiet hours (22:00 to 23:00 "
        "UTC), which have just ended.\n"
    ) in reopened


async def test_a_reminder_opened_only_after_the_quiet_hours_says_it_was_deferred() -> None:
    """Nobody watched the wait (no host): the frame still says since when quiet hours held
    the reminder, and the same as an owner that watched it would."""
    clock = FakeClock("2026-12-01T21:59:00.000Z")
    settings = Settings(quiet_hours=QuietHours(start="22:00", end="23:00", time_zone="UTC"))
    store = MemorySessionStore()
    async with await store.create(now=clock.now()) as session:
        await LiveSchedule(session, FakeAgent(), clock=clock, settings=settings).create(
            {"prompt": "p", "after_seconds": 30}
        )
    clock.advance(2 * 3600)
    agent = FakeAgent()
    async with await store.open(session.id) as session:
        schedule = LiveSchedule(session, agent, clock=clock, settings=settings)
        await schedule.start()
        await schedule.settled()
        await schedule.close()
    assert (
        "decided at: 2026-12-01T23:59:00.000Z\n"
        "deferred since: 2026-12-01T22:00:00.000Z, by the user's quiet hours (22:00 to 23:00 "
        "UTC), which have just ended.\n"
    ) in agent.followups[0]
