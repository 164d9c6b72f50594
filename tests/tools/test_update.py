"""``schedule_update`` through the tool entry point (SPEC §11): results, and whole error messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from session_schedule.core.changes import CHANGE_EVENT_TYPE, snooze_change
from session_schedule.core.fold import fold
from session_schedule.core.framing import occurrence_keys
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import parse_instant
from session_schedule.runtime import live
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle, schedule_changes
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.tools.handlers import ScheduleTools
from tests.virtual_time import run_for

START = "2026-12-01T10:00:00.000Z"


class World:
    def __init__(self, tools: ScheduleTools, session: SessionHandle, clock: FakeClock) -> None:
        self.tools = tools
        self.session = session
        self.clock = clock

    def count(self) -> int:
        return sum(1 for entry in self.session.entries if entry.type == CHANGE_EVENT_TYPE)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    schedule = LiveSchedule(session, FakeAgent(), clock=clock)
    await schedule.start()
    yield World(ScheduleTools(schedule), session, clock)
    await schedule.close()


async def test_update_changes_the_prompt_and_keeps_the_target(world: World) -> None:
    await world.tools.call("schedule_create", {"prompt": "stretch", "every_seconds": 600})
    updated = await world.tools.call("schedule_update", {"id": "sch_1", "prompt": " walk "})
    assert updated == {
        "ok": True,
        "schedule": {
            "kind": "every",
            "id": "sch_1",
            "prompt": "walk",
            "everySeconds": 600,
            "scheduledAt": "2026-12-01T10:10:00.000Z",
            "state": "scheduled",
            "deliveryMode": "session-local",
            "runs": 0,
            "lastRun": None,
        },
    }


async def test_pause_snooze_and_resume_show_in_the_view(world: World) -> None:
    await world.tools.call(
        "schedule_create",
        {"prompt": "stretch", "every_seconds": 600, "ends": {"until": None, "max_runs": 3}},
    )
    snoozed = await world.tools.call(
        "schedule_update", {"id": "sch_1", "snooze": {"after_seconds": 1500}}
    )
    assert snoozed == {
        "ok": True,
        "schedule": {
            "kind": "every",
            "id": "sch_1",
            "prompt": "stretch",
            "everySeconds": 600,
            "scheduledAt": "2026-12-01T10:25:00.000Z",
            "ends": {"until": None, "maxRuns": 3},
            "state": "scheduled",
            "deliveryMode": "session-local",
            "runs": 0,
            "lastRun": None,
            "snoozedUntil": "2026-12-01T10:25:00.000Z",
            "runsLeft": 3,
        },
    }
    paused = await world.tools.call("schedule_update", {"id": "sch_1", "paused": True})
    assert paused["schedule"]["state"] == "paused"  # type: ignore[index]
    assert paused["schedule"]["paused"] is True  # type: ignore[index]
    assert paused["schedule"]["scheduledAt"] == "2026-12-01T10:10:00.000Z"  # type: ignore[index]
    assert "snoozedUntil" not in paused["schedule"]  # type: ignore[operator]
    world.clock.set("2026-12-01T11:05:00.000Z")
    resumed = await world.tools.call("schedule_update", {"id": "sch_1", "paused": False})
    assert resumed["schedule"]["scheduledAt"] == "2026-12-01T11:10:00.000Z"  # type: ignore[index]
    assert resumed["schedule"]["state"] == "scheduled"  # type: ignore[index]


async def test_a_snooze_to_the_instant_it_is_snoozed_to_changes_nothing(world: World) -> None:
    await world.tools.call("schedule_create", {"prompt": "stretch", "every_seconds": 600})
    snooze = {"id": "sch_1", "snooze": {"after_seconds": 1000}}
    first = await world.tools.call("schedule_update", snooze)
    assert first["ok"] is True
    written = world.count()
    assert await world.tools.call("schedule_update", snooze) == {
        "ok": False,
        "error": {
            "code": "invalid_selector",
            "message": "this update changes nothing about sch_1; give a new value for at least "
            "one field, or null for the fields to leave as they are.",
        },
    }
    assert world.count() == written
    # With a change beside it, the snooze it repeats is kept as it is, not written again.
    both = await world.tools.call(
        "schedule_update", {"id": "sch_1", "prompt": "walk", "snooze": {"after_seconds": 1000}}
    )
    assert both["ok"] is True
    assert both["schedule"]["snoozedUntil"] == "2026-12-01T10:16:40.000Z"  # type: ignore[index]
    assert world.count() == written + 1
    # Later, the same words name a later instant: a change.
    world.clock.advance(60)
    later = await world.tools.call("schedule_update", snooze)
    assert later["schedule"]["snoozedUntil"] == "2026-12-01T10:17:40.000Z"  # type: ignore[index]


async def test_the_rule_it_has_given_again_keeps_its_snooze_and_the_checks_of_one(
    world: World,
) -> None:
    """The same rule given again is no new rule: the fold keeps the snooze, so an end before it
    is refused as without the rule, never written for the fold to reject."""
    daily = {"time": "09:00", "time_zone": "UTC", "weekdays": None}
    await world.tools.call("schedule_create", {"prompt": "p", "daily_at": daily})
    snoozed = await world.tools.call(
        "schedule_update", {"id": "sch_1", "snooze": {"until": "2026-12-02T12:00:00Z"}}
    )
    assert snoozed["ok"] is True
    written = world.count()
    ends = {"until": "2026-12-02T10:00:00Z", "max_runs": None}
    refused = {
        "ok": False,
        "error": {
            "code": "invalid_rule",
            "message": "the reminder is snoozed until 2026-12-02T12:00:00.000Z, after the new end "
            "`ends.until` 2026-12-02T10:00:00.000Z; choose a later end, or snooze it to an "
            "earlier time first.",
        },
    }
    for arguments in ({"daily_at": daily, "ends": ends}, {"ends": ends}):
        assert await world.tools.call("schedule_update", {"id": "sch_1", **arguments}) == refused
    assert world.count() == written
    listed = await world.tools.call("schedule_list", {})
    assert listed["schedules"][0]["snoozedUntil"] == "2026-12-02T12:00:00.000Z"  # type: ignore[index]


async def test_a_change_the_fold_refuses_is_never_written(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were a decision ever wrong (a change the fold does not accept), the tool answers
    internal_error and the log stays one that folds: a change is folded before it is written."""
    await world.tools.call("schedule_create", {"prompt": "p", "every_seconds": 600})
    await world.tools.call("schedule_update", {"id": "sch_1", "paused": True})
    written = world.count()
    wrong = snooze_change(ScheduleId("sch_1"), parse_instant("2026-12-01T11:00:00.000Z"))
    monkeypatch.setattr(live, "decide_update", lambda *_, **__: (ScheduleId("sch_1"), (wrong,)))
    answer = await world.tools.call("schedule_update", {"id": "sch_1", "prompt": "q"})
    assert answer["error"]["code"] == "internal_error"  # type: ignore[index]
    assert world.count() == written
    folded = fold(schedule_changes(world.session.entries), session=world.session.header.id)
    assert folded.status(ScheduleId("sch_1")).paused


async def test_a_new_rule_replaces_the_old_one_as_if_created_now(world: World) -> None:
    await world.tools.call("schedule_create", {"prompt": "tea", "after_seconds": 300})
    updated = await world.tools.call(
        "schedule_update",
        {"id": "sch_1", "daily_at": {"time": "09:00", "time_zone": "Asia/Tokyo", "weekdays": None}},
    )
    assert updated["schedule"] == {
        "kind": "daily",
        "id": "sch_1",
        "prompt": "tea",
        "time": "09:00:00.000",
        "timeZone": "Asia/Tokyo",
        "weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        "scheduledAt": "2026-12-02T00:00:00.000Z",
        "state": "scheduled",
        "deliveryMode": "session-local",
        "runs": 0,
        "lastRun": None,
    }
    listed = await world.tools.call("schedule_list")
    assert listed["schedules"] == [updated["schedule"]]


def _error(code: str, message: str) -> dict[str, object]:
    return {"ok": False, "error": {"code": code, "message": message}}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"id": "sch_9", "prompt": "x"}, _error("invalid_selector", "no active reminder has the id 'sch_9'; call schedule_list to see the active ones, or schedule_create to set a new one.")),
        ({"id": "sch_\ud83d", "paused": True}, _error("invalid_selector", "no active reminder has the id 'sch_\\ud83d'; call schedule_list to see the active ones, or schedule_create to set a new one.")),
        ({"id": 7}, _error("invalid_selector", "`id` must be the id string of a reminder (such as 'sch_1'), got 7.")),
        ({"id": "sch_1", "colour": "red"}, _error("invalid_selector", "unknown argument `colour`; schedule_update takes `id` and the fields to change: `prompt`, one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar`, `paused`, `snooze`, `ends`, `max_lateness_seconds`.")),
        ({"id": "sch_1"}, _error("invalid_selector", "this update changes nothing about sch_1; give a new value for at least one field, or null for the fields to leave as they are.")),
        ({"id": "sch_1", "prompt": "stretch"}, _error("invalid_selector", "this update changes nothing about sch_1; give a new value for at least one field, or null for the fields to leave as they are.")),
        ({"id": "sch_1", "paused": False}, _error("invalid_selector", "this update changes nothing about sch_1; give a new value for at least one field, or null for the fields to leave as they are.")),
        ({"id": "sch_1", "prompt": ""}, _error("invalid_prompt", "`prompt` is empty; say what the reminder should prompt you to do.")),
        ({"id": "sch_1", "prompt": "walk\x1f"}, _error("invalid_prompt", "`prompt` contains the control character U+001F at index 4; only newline and tab are allowed.")),
        ({"id": "sch_1", "at": "2026-12-02T09:00:00Z", "every_seconds": 600}, _error("invalid_selector", "give at most one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar` to change the rule (found `at`, `every_seconds`).")),
        ({"id": "sch_1", "every_seconds": 60}, _error("frequency_too_high", "every_seconds must be at least 300 (5 minutes), got 60; choose a longer interval.")),
        ({"id": "sch_1", "at": "2026-12-01T09:00:00Z"}, _error("not_future", "`at` names 2026-12-01T09:00:00.000Z, which is not after the current time 2026-12-01T10:00:00.000Z; choose a time in the future.")),
        ({"id": "sch_1", "paused": "yes"}, _error("invalid_selector", '`paused` must be true (pause), false (resume) or null, got "yes".')),
        ({"id": "sch_1", "paused": True, "snooze": {"after_seconds": 60, "until": None}}, _error("invalid_selector", "sch_1 cannot be paused and snoozed in one call, since a paused reminder is never due; give `paused: true` to pause it or `snooze` to move its next delivery, and null for the other.")),
        ({"id": "sch_1", "snooze": {"after_seconds": 60, "until": "2026-12-01T11:00:00Z"}}, _error("invalid_selector", "`snooze` takes exactly one of `until` and `after_seconds` (found `until`, `after_seconds`).")),
        ({"id": "sch_1", "snooze": {"minutes": 5}}, _error("invalid_selector", "unknown member `minutes` of `snooze`; it takes `until` or `after_seconds`.")),
        ({"id": "sch_1", "snooze": "10m"}, _error("invalid_selector", '`snooze` must be an object {until} or {after_seconds}, not "10m".')),
        ({"id": "sch_1", "snooze": {"after_seconds": 0}}, _error("invalid_rule", "`snooze.after_seconds` must be a positive whole number of seconds, got 0.")),
        ({"id": "sch_1", "snooze": {"until": "2026-12-01T09:00:00Z"}}, _error("not_future", "`snooze.until` names 2026-12-01T09:00:00.000Z, which is not after the current time 2026-12-01T10:00:00.000Z; choose a time in the future.")),
        ({"id": "sch_1", "snooze": {"until": "0001-01-01T00:00:00+00:01"}}, _error("not_future", "`snooze.until` names 0000-12-31T23:59:00.000Z, which is not after the current time 2026-12-01T10:00:00.000Z; choose a time in the future.")),
        ({"id": "sch_1", "snooze": {"until": {"date": "0000-06-01", "time": "12:00", "time_zone": "UTC"}}}, _error("not_future", "`snooze.until` names 0000-06-01T12:00:00.000Z, which is not after the current time 2026-12-01T10:00:00.000Z; choose a time in the future.")),
        ({"id": "sch_1", "at": "0000-12-31T23:00:00-02:00"}, _error("not_future", "`at` names 0001-01-01T01:00:00.000Z, which is not after the current time 2026-12-01T10:00:00.000Z; choose a time in the future.")),
        ({"id": "sch_1", "at": {"date": "0001-01-01", "time": "00:00", "time_zone": "Asia/Tokyo"}}, _error("not_future", "`at` names 0000-12-31T14:41:01.000Z, which is not after the current time 2026-12-01T10:00:00.000Z; choose a time in the future.")),
        ({"id": "sch_1", "ends": {"until": "0000-12-31T23:59:59.999Z", "max_runs": None}}, _error("invalid_rule", "`ends.until` 0000-12-31T23:59:59.999Z is not after the current time 2026-12-01T10:00:00.000Z, so not after the reminder's first target; choose a later end or leave it null.")),
        ({"id": "sch_1", "snooze": {"until": "2026-12-01 11:00"}}, _error("invalid_selector", "'2026-12-01 11:00' is not an RFC 3339 date-time; write YYYY-MM-DDTHH:MM:SS, an optional fraction, then 'Z' or an offset, such as '2026-12-01T09:00:00+09:00'.")),
        ({"id": "sch_1", "snooze": {"until": "2026-12-31T00:00:00Z"}}, _error("invalid_rule", "the snooze until 2026-12-31T00:00:00.000Z is after the reminder's end `ends.until` 2026-12-20T00:00:00.000Z; snooze it to an earlier time or change its end.")),
        ({"id": "sch_1", "ends": {"until": "2026-12-01T10:05:00Z", "max_runs": None}}, _error("invalid_rule", "`ends.until` 2026-12-01T10:05:00.000Z is not after the reminder's first target 2026-12-01T10:10:00.000Z; choose a later end or leave it null.")),
        ({"id": "sch_1", "ends": {"until": None, "max_runs": 0}}, _error("invalid_rule", "`ends.max_runs` must be a positive whole number of deliveries, got 0.")),
        ({"id": "sch_1", "ends": {"after": 3}}, _error("invalid_selector", "unknown member `after` of `ends`; it takes `until` and `max_runs`.")),
        ({"id": "sch_1", "after_seconds": 600, "ends": {"until": None, "max_runs": 2}}, _error("invalid_rule", "`ends` applies only to a recurring reminder (every_seconds, daily_at or calendar); leave it null for a one-time reminder.")),
        ({"id": "sch_1", "max_lateness_seconds": -5}, _error("invalid_rule", "max_lateness_seconds must be a positive whole number of seconds, got -5; give one, or null to leave the reminder's limit as it is.")),
        ({"id": "sch_1", "max_lateness_seconds": 0}, _error("invalid_rule", "max_lateness_seconds must be a positive whole number of seconds, got 0; give one, or null to leave the reminder's limit as it is.")),
        # SPEC §11: the checks run in §8's order, and §8 checks the prompt first.
        ({"id": "sch_1", "prompt": "", "colour": "red"}, _error("invalid_prompt", "`prompt` is empty; say what the reminder should prompt you to do.")),
        ({"id": "sch_9", "prompt": ""}, _error("invalid_prompt", "`prompt` is empty; say what the reminder should prompt you to do.")),
        ({"id": 7, "prompt": "walk\x1f"}, _error("invalid_prompt", "`prompt` contains the control character U+001F at index 4; only newline and tab are allowed.")),
        ({"prompt": 5}, _error("invalid_prompt", "`prompt` must be a string with the reminder's content, got 5.")),
        ({"id": 7, "prompt": "walk", "colour": "red"}, _error("invalid_selector", "unknown argument `colour`; schedule_update takes `id` and the fields to change: `prompt`, one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar`, `paused`, `snooze`, `ends`, `max_lateness_seconds`.")),
        ({"prompt": "walk"}, _error("invalid_selector", "`id` must be the id string of a reminder (such as 'sch_1'), got nothing.")),
    ],
)  # fmt: skip
async def test_update_errors_are_whole_sentences_and_append_nothing(
    world: World, arguments: dict[str, object], expected: dict[str, object]
) -> None:
    await world.tools.call(
        "schedule_create",
        {
            "prompt": "stretch",
            "every_seconds": 600,
            "ends": {"until": "2026-12-20T00:00:00Z", "max_runs": None},
        },
    )
    before = world.count()
    assert await world.tools.call("schedule_update", arguments) == expected
    assert world.count() == before


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"prompt": "p", "after_seconds": 60, "ends": {"until": None, "max_runs": 2}}, _error("invalid_rule", "`ends` applies only to a recurring reminder (every_seconds, daily_at or calendar); leave it null for a one-time reminder.")),
        ({"prompt": "p", "every_seconds": 600, "ends": {"until": "2026-12-01T10:10:00Z", "max_runs": None}}, _error("invalid_rule", "`ends.until` 2026-12-01T10:10:00.000Z is not after the reminder's first target 2026-12-01T10:10:00.000Z; choose a later end or leave it null.")),
        ({"prompt": "p", "every_seconds": 600, "ends": {"until": {"date": "2026-12-01", "time": "25:00", "time_zone": "UTC"}, "max_runs": None}}, _error("invalid_selector", "`time` '25:00' is an impossible time of day; use hours 00-23, minutes 00-59 and seconds 00-59 (there is no 24:00 and no leap second).")),
        ({"prompt": "p", "every_seconds": 600, "max_lateness_seconds": 1.5}, _error("invalid_rule", "max_lateness_seconds must be a positive whole number of seconds, or null to deliver however late, got 1.5.")),
        # A Python caller's dict may have keys that are not strings.
        ({"prompt": "p", "every_seconds": 600, "ends": {2: 1, "x": 3}}, _error("invalid_selector", "unknown member `2`, `x` of `ends`; it takes `until` and `max_runs`.")),
    ],
)  # fmt: skip
async def test_create_checks_ends_and_lateness(
    world: World, arguments: dict[str, object], expected: dict[str, object]
) -> None:
    assert await world.tools.call("schedule_create", arguments) == expected
    assert world.count() == 0


async def test_create_with_ends_and_lateness_writes_version_3(world: World) -> None:
    created = await world.tools.call(
        "schedule_create",
        {
            "prompt": "p",
            "every_seconds": 600,
            "ends": {"until": None, "max_runs": 2},
            "max_lateness_seconds": 120,
        },
    )
    assert created["schedule"]["maxLatenessSeconds"] == 120  # type: ignore[index]
    assert created["schedule"]["runsLeft"] == 2  # type: ignore[index]
    [entry] = [e for e in world.session.entries if e.type == CHANGE_EVENT_TYPE]
    assert entry.payload.version == 3  # type: ignore[attr-defined]


# -- max_runs counts every delivery since the create (SPEC §11) -------------------------------


async def test_max_runs_given_later_counts_the_deliveries_made_before_it() -> None:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    agent = FakeAgent()
    schedule = LiveSchedule(session, agent, clock=clock)
    await schedule.start()
    tools = ScheduleTools(schedule)
    try:
        await tools.call("schedule_create", {"prompt": "stretch", "every_seconds": 600})
        await run_for(schedule, clock, 1200)  # delivered at 10:10 and 10:20
        assert len(agent.followups) == 2
        assert await tools.call(
            "schedule_update", {"id": "sch_1", "ends": {"until": None, "max_runs": 2}}
        ) == _error(
            "invalid_rule",
            "`ends.max_runs` is 2, but the reminder has already been delivered 2 times; give a "
            "larger number or leave it null.",
        )
        bounded = await tools.call(
            "schedule_update", {"id": "sch_1", "ends": {"until": None, "max_runs": 3}}
        )
        assert bounded["schedule"]["runsLeft"] == 1  # type: ignore[index]
        # Its end dropped and given again: the count goes on from the create all the same.
        await tools.call("schedule_update", {"id": "sch_1", "ends": None})
        again = await tools.call(
            "schedule_update", {"id": "sch_1", "ends": {"until": None, "max_runs": 4}}
        )
        assert again["schedule"]["runsLeft"] == 2  # type: ignore[index]
        await run_for(schedule, clock, 3600)
        # The 3rd and 4th deliveries, then the end.
        assert len(agent.followups) == 4
        assert "its last delivery; it will not be delivered again" in agent.followups[-1]
        assert (await tools.call("schedule_list", {}))["total"] == 0
    finally:
        await schedule.close()


async def test_the_runs_of_a_reminder_without_ends_survive_a_restart(tmp_path: Path) -> None:
    # A checkpoint (format 6) counts the runs of a recurring reminder that has no `ends`.
    store = JsonlSessionStore(tmp_path)
    clock = FakeClock(START)
    async with await store.create(now=clock.now()) as session:
        schedule = LiveSchedule(session, FakeAgent(), clock=clock)
        await schedule.start()
        await ScheduleTools(schedule).call(
            "schedule_create", {"prompt": "stretch", "every_seconds": 600}
        )
        await run_for(schedule, clock, 1200)
        await schedule.close()
    session_id = session.id
    assert read_checkpoint_statuses(store, session_id) == [["sch_1", False, None, 2, None]]
    async with await store.open(session_id) as session:
        assert session.resume is not None
        schedule = LiveSchedule(session, FakeAgent(), clock=clock)
        await schedule.start()
        try:
            bounded = await ScheduleTools(schedule).call(
                "schedule_update", {"id": "sch_1", "ends": {"until": None, "max_runs": 3}}
            )
            assert bounded["schedule"]["runsLeft"] == 1  # type: ignore[index]
        finally:
            await schedule.close()
    # The whole log folds to the same count.
    snapshot = await store.read(session_id)
    assert fold(schedule_changes(snapshot.entries)).status(ScheduleId("sch_1")).runs == 2


def read_checkpoint_statuses(store: JsonlSessionStore, session_id: SessionId) -> object:
    body = store.checkpoint_path(session_id).read_bytes().partition(b"\n")[2]
    return msgspec.json.decode(body)["statuses"]


async def test_a_reminder_with_no_occurrence_left_is_not_resumed_and_the_error_says_why(
    world: World,
) -> None:
    # Its own rule spent while paused (COUNT=2): only a new rule would help.
    calendar = {"rule": "FREQ=DAILY;COUNT=2", "time": "09:00", "time_zone": "UTC"}
    await world.tools.call("schedule_create", {"prompt": "twice", "calendar": calendar})
    # Its end (ends.until) passed while paused: a later end would help.
    ends = {"until": "2026-12-01T11:00:00Z", "max_runs": None}
    await world.tools.call(
        "schedule_create", {"prompt": "bounded", "every_seconds": 600, "ends": ends}
    )
    for schedule_id in ("sch_1", "sch_2"):
        await world.tools.call("schedule_update", {"id": schedule_id, "paused": True})
    world.clock.set("2026-12-05T10:00:00.000Z")
    before = world.count()
    assert await world.tools.call("schedule_update", {"id": "sch_1", "paused": False}) == _error(
        "invalid_rule",
        "sch_1's rule has no occurrence left after now, so it cannot be resumed; give it a new "
        "rule or delete it.",
    )
    assert await world.tools.call("schedule_update", {"id": "sch_2", "paused": False}) == _error(
        "invalid_rule",
        "sch_2 has no occurrence left before its end, so it cannot be resumed; change its end "
        "(ends) or delete it.",
    )
    assert world.count() == before


# -- a snoozed one-shot, paused and resumed, keeps its snooze instant as its target (SPEC §11) --


async def _snoozed_then_paused(resume_at: str) -> tuple[FakeAgent, list[str], dict[str, object]]:
    """An `at 11:00` reminder snoozed at 10:55 until 12:00, paused at 11:30 and resumed at
    ``resume_at``: the follow-ups made until 13:00, the keys they name, and the resumed view."""
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    agent = FakeAgent()
    schedule = LiveSchedule(session, agent, clock=clock)
    await schedule.start()
    tools = ScheduleTools(schedule)
    try:
        await tools.call(
            "schedule_create", {"prompt": "call the bank", "at": "2026-12-01T11:00:00Z"}
        )
        await run_for(schedule, clock, 55 * 60)
        await tools.call(
            "schedule_update", {"id": "sch_1", "snooze": {"until": "2026-12-01T12:00:00Z"}}
        )
        await run_for(schedule, clock, 35 * 60)
        paused = await tools.call("schedule_update", {"id": "sch_1", "paused": True})
        assert paused["schedule"]["scheduledAt"] == "2026-12-01T12:00:00.000Z"  # type: ignore[index]
        assert "snoozedUntil" not in paused["schedule"]  # type: ignore[operator]
        await run_for(schedule, clock, (parse_instant(resume_at) - clock.now()) / 1000)
        resumed = await tools.call("schedule_update", {"id": "sch_1", "paused": False})
        await run_for(
            schedule, clock, (parse_instant("2026-12-01T13:00:00.000Z") - clock.now()) / 1000
        )
    finally:
        await schedule.close()
    keys = [key for text in agent.followups for key in occurrence_keys(text)]
    return agent, keys, resumed["schedule"]  # type: ignore[return-value]


async def test_a_snoozed_one_shot_paused_and_resumed_before_the_snooze_is_delivered_then() -> None:
    agent, keys, resumed = await _snoozed_then_paused("2026-12-01T11:31:00.000Z")
    assert resumed["scheduledAt"] == "2026-12-01T12:00:00.000Z"
    assert resumed["state"] == "scheduled"
    assert keys == ["sch_1@2026-12-01T12:00:00.000Z"]
    [text] = agent.followups
    assert "decided at: 2026-12-01T12:00:00.000Z\n" in text
    assert "due at: 2026-12-01T12:00:00.000Z\n" in text
    assert "snoozed from:" not in text


async def test_a_snoozed_one_shot_resumed_after_the_snooze_is_delivered_at_once() -> None:
    agent, keys, resumed = await _snoozed_then_paused("2026-12-01T12:10:00.000Z")
    assert resumed["scheduledAt"] == "2026-12-01T12:00:00.000Z"
    assert resumed["state"] == "overdue"
    assert keys == ["sch_1@2026-12-01T12:00:00.000Z"]
    [text] = agent.followups
    assert "decided at: 2026-12-01T12:10:00.000Z\n" in text
    assert "due at: 2026-12-01T12:00:00.000Z\n" in text
    assert "snoozed from:" not in text


async def test_a_paused_reminder_is_not_snoozed_and_the_error_says_so(world: World) -> None:
    await world.tools.call("schedule_create", {"prompt": "stretch", "every_seconds": 600})
    await world.tools.call("schedule_update", {"id": "sch_1", "paused": True})
    before = world.count()
    refused = _error(
        "invalid_selector",
        "sch_1 is paused and a paused reminder cannot be snoozed; resume it (paused: false) to "
        "snooze it, or leave snooze null.",
    )
    for paused in (None, True):
        arguments = {"id": "sch_1", "paused": paused, "snooze": {"after_seconds": 60}}
        assert await world.tools.call("schedule_update", arguments) == refused
    assert world.count() == before


async def test_the_rule_given_again_to_a_snoozed_reminder_says_how_to_move_it(
    world: World,
) -> None:
    """The fold keeps a snooze across the same rule given again, so that update changes
    nothing; the refusal says so, and what moves the delivery instead."""
    await world.tools.call("schedule_create", {"prompt": "call mum", "at": "2026-12-01T12:00:00Z"})
    await world.tools.call(
        "schedule_update", {"id": "sch_1", "snooze": {"until": "2026-12-01T13:00:00Z"}}
    )
    before = world.count()
    again = {"id": "sch_1", "at": "2026-12-01T12:00:00Z"}
    assert await world.tools.call("schedule_update", again) == _error(
        "invalid_selector",
        "this update changes nothing about sch_1, which is snoozed until "
        "2026-12-01T13:00:00.000Z: giving its rule again keeps the snooze; to move its delivery, "
        "snooze it until another time, such as its own target 2026-12-01T12:00:00.000Z.",
    )
    assert world.count() == before
    # Snoozed until its own target, it is delivered then.
    moved = await world.tools.call(
        "schedule_update", {"id": "sch_1", "snooze": {"until": "2026-12-01T12:00:00Z"}}
    )
    assert moved["schedule"]["scheduledAt"] == "2026-12-01T12:00:00.000Z"  # type: ignore[index]
