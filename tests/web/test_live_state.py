"""The web overlay's fold of a live session (``LiveSession.state``): kept between calls and
brought up to date with what was appended since, always what a fold of the whole log makes."""

from __future__ import annotations

from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.core.timeline import record_misses
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session import MemorySessionStore
from session_schedule.session.port import SessionHandle, schedule_changes
from session_schedule.testing import FakeAgent, FakeClock
from session_schedule.tools import ScheduleTools
from session_schedule.web.live import LiveSession

START = "2026-11-29T20:00:00.000Z"


def whole_log(handle: SessionHandle) -> ScheduleFold:
    header = handle.header
    return fold(schedule_changes(handle.entries), seed_length=header.seed_length, session=header.id)


def assert_same(kept: ScheduleFold, fresh: ScheduleFold, now: Instant) -> None:
    assert kept.by_creation() == fresh.by_creation()
    assert kept.ordered() == fresh.ordered()
    assert kept.statuses() == fresh.statuses()
    assert kept.highest_id == fresh.highest_id
    # The misses the timeline records are applied to the copy, as to a fresh fold.
    later = Instant(now + 7200 * MS_PER_SECOND)
    assert record_misses(kept, later) == record_misses(fresh, later)
    assert kept.ordered() == fresh.ordered()
    assert kept.statuses() == fresh.statuses()


async def test_the_kept_fold_is_the_whole_logs_after_each_change_and_each_copy_its_own() -> None:
    clock = FakeClock(START)
    store = MemorySessionStore()
    handle = await store.create(now=clock.now())
    schedule = LiveSchedule(handle, FakeAgent(), clock=clock)
    await schedule.start()
    tools = ScheduleTools(schedule)
    live = LiveSession(handle, max_pending=8)
    calls: list[tuple[str, dict[str, object]]] = [
        ("schedule_create", {"prompt": "stretch", "every_seconds": 300}),
        ("schedule_create", {"prompt": "drink", "after_seconds": 600}),
        ("schedule_create", {"prompt": "late", "every_seconds": 900, "max_lateness_seconds": 60}),
        ("schedule_update", {"id": "sch_1", "paused": True}),
        ("schedule_update", {"id": "sch_3", "snooze": {"after_seconds": 1200}}),
        ("schedule_delete", {"id": "sch_2"}),
        ("schedule_update", {"id": "sch_1", "paused": False}),
        (
            "schedule_create",
            {
                "prompt": "weekly",
                "calendar": {
                    "rule": "FREQ=WEEKLY;BYDAY=MO",
                    "time": "09:00",
                    "time_zone": "Europe/Berlin",
                },
            },
        ),
    ]
    try:
        assert_same(live.state(), whole_log(handle), clock.now())
        for name, arguments in calls:
            result = await tools.call(name, arguments)
            assert result["ok"] is True, result
            # Twice: a copy that the first call's misses changed is not the one kept.
            for _ in range(2):
                assert_same(live.state(), whole_log(handle), clock.now())
        # Dispatches, and the misses the owner records, read after the fold was kept.
        clock.advance(3600)
        await schedule.settled()
        assert_same(live.state(), whole_log(handle), clock.now())
    finally:
        await schedule.close()
        await handle.close()


async def test_a_forks_kept_fold_leaves_out_its_inherited_reminders() -> None:
    clock = FakeClock(START)
    store = MemorySessionStore()
    async with await store.create(now=clock.now()) as parent:
        schedule = LiveSchedule(parent, FakeAgent(), clock=clock)
        await schedule.start()
        tools = ScheduleTools(schedule)
        assert (await tools.call("schedule_create", {"prompt": "a", "after_seconds": 600}))["ok"]
        await schedule.close()
    fork = await store.fork(parent.id, now=clock.now())
    schedule = LiveSchedule(fork, FakeAgent(), clock=clock)
    await schedule.start()
    live = LiveSession(fork, max_pending=8)
    try:
        assert_same(live.state(), whole_log(fork), clock.now())
        assert len(live.state()) == 0
        tools = ScheduleTools(schedule)
        assert (await tools.call("schedule_create", {"prompt": "b", "after_seconds": 60}))["ok"]
        assert_same(live.state(), whole_log(fork), clock.now())
        assert [record.id for record in live.state().by_creation()] == ["sch_2"]
    finally:
        await schedule.close()
        await fork.close()
