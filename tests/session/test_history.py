"""Occurrence history read from the log: a week of a daily reminder with a failed turn, a
catch-up after downtime and a delete, through the library and the ``history`` command."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx2
import msgspec
import openai
import pytest

from session_schedule.cli.main import main
from session_schedule.core.instants import parse_instant
from session_schedule.runtime.live import LiveSchedule
from session_schedule.runtime.retry import TurnRetry
from session_schedule.runtime.turns import TurnQueue
from session_schedule.session.history import (
    OCCURRENCE_OUTCOMES,
    OccurrenceLog,
    away,
    occurrence_history,
)
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, user_message
from session_schedule.session.turns import turn_failure
from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"  # a Sunday
REQUEST = httpx2.Request("POST", "https://api.example.test/v1/chat/completions")


class Week:
    """One session driven through a week in virtual time, with downtime in the middle."""

    def __init__(self, data: Path) -> None:
        self.store = JsonlSessionStore(data)
        self.clock = FakeClock(START)
        self.failing = False

    async def run_turn(self, text: str) -> None:
        if self.failing:
            self.failing = False
            raise openai.AuthenticationError(
                "Error code: 401 - invalid api key",
                response=httpx2.Response(401, request=REQUEST),
                body=None,
            )

    async def live_until(self, session_id: SessionId | None, until: str) -> SessionId:
        """Open the session live (a new one when ``None``) and let time pass until ``until``."""
        if session_id is None:
            handle = await self.store.create(now=self.clock.now())
        else:
            handle = await self.store.open(session_id)
        async with handle:
            turns = TurnQueue(
                handle, self.run_turn, clock=self.clock, retry=TurnRetry(max_attempts=3)
            )
            schedule = LiveSchedule(handle, turns, clock=self.clock)
            async with schedule, turns:
                if session_id is None:
                    await schedule.create(
                        {"prompt": "standup", "daily_at": {"time": "09:00", "time_zone": "UTC"}}
                    )
                end = parse_instant(until)
                while self.clock.now() < end:
                    await schedule.settled()
                    await turns.wait_idle()
                    await schedule.settled()
                    step = self.clock.next_deadline()
                    left = (end - self.clock.now()) / 1000
                    self.clock.advance(left if step is None else min(step, left))
                await schedule.settled()
                await turns.wait_idle()
            return handle.id

    async def delete(self, session_id: SessionId) -> None:
        async with await self.store.open(session_id) as handle:
            turns = TurnQueue(handle, self.run_turn, clock=self.clock)
            async with LiveSchedule(handle, turns, clock=self.clock) as schedule:
                assert await schedule.delete({"id": "sch_1"}) == ("sch_1", True)


async def _week(data: Path) -> SessionId:
    week = Week(data)
    session_id = await week.live_until(None, "2026-12-01T08:00:00.000Z")  # Monday delivered
    week.failing = True  # Tuesday's turn fails: a 401 is permanent
    await week.live_until(session_id, "2026-12-01T12:00:00.000Z")
    # Down from Tuesday noon to Friday 10:00: Wednesday, Thursday and Friday come due.
    week.clock.advance(3 * 86_400 - 2 * 3600)
    await week.live_until(session_id, "2026-12-06T08:00:00.000Z")  # Friday's catch-up, Saturday
    await week.delete(session_id)  # Sunday 08:00, before it is due
    return session_id


def _at(text: str) -> int:
    return parse_instant(text)


async def test_a_week_of_a_daily_reminder_reads_correctly(tmp_path: Path) -> None:
    session_id = await _week(tmp_path)
    header, entries = await JsonlSessionStore(tmp_path).read(session_id)
    runs = occurrence_history(entries, seed_length=header.seed_length, session=header.id)
    summary = [(run.outcome, run.due_at, run.decided_at, run.skipped, run.attempts) for run in runs]
    assert summary == [
        ("delivered", _at("2026-11-30T09:00:00.000Z"), _at("2026-11-30T09:00:00.000Z"), 0, 1),
        ("failed", _at("2026-12-01T09:00:00.000Z"), _at("2026-12-01T09:00:00.000Z"), 0, 1),
        ("delivered", _at("2026-12-04T09:00:00.000Z"), _at("2026-12-04T10:00:00.000Z"), 2, 1),
        ("delivered", _at("2026-12-05T09:00:00.000Z"), _at("2026-12-05T09:00:00.000Z"), 0, 1),
        ("deleted", _at("2026-12-06T09:00:00.000Z"), None, 0, None),
    ]
    assert [run.key for run in runs] == [
        "sch_1@2026-11-30T09:00:00.000Z",
        "sch_1@2026-12-01T09:00:00.000Z",
        "sch_1@2026-12-02T09:00:00.000Z",
        "sch_1@2026-12-05T09:00:00.000Z",
        "sch_1@2026-12-06T09:00:00.000Z",
    ]
    assert runs[1].failure == turn_failure(
        "AuthenticationError", status=401, message="Error code: 401 - invalid api key"
    )
    assert [run.lateness_seconds for run in runs] == [0.0, 0.0, 3600.0, 0.0, None]
    # What a view shows, read in two slices: the latest run and the count, until the delete.
    log = OccurrenceLog(seed_length=header.seed_length, keep=False)
    log.feed(entries[: runs[-1].position])
    found = log.last(runs[0].schedule_id)
    assert found is not None
    assert (found[0].outcome, found[0].key, found[1]) == (
        "delivered",
        "sch_1@2026-12-05T09:00:00.000Z",
        4,
    )
    log.feed(entries[runs[-1].position :])
    assert log.last(runs[0].schedule_id) is None
    assert log.runs == []


def test_the_history_command_prints_the_week_as_json_and_as_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session_id = asyncio.run(_week(tmp_path))
    assert main(["history", session_id, "sch_1", "--json", "--data-dir", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["session"] == session_id
    rows = printed["occurrences"]
    assert [row["outcome"] for row in rows] == [
        "delivered",
        "failed",
        "delivered",
        "delivered",
        "deleted",
    ]
    assert rows[1] == {
        "id": "sch_1",
        "occurrence": "sch_1@2026-12-01T09:00:00.000Z",
        "dueAt": "2026-12-01T09:00:00.000Z",
        "decidedAt": "2026-12-01T09:00:00.000Z",
        "outcome": "failed",
        "latenessSeconds": 0.0,
        "skipped": 0,
        "attempts": 1,
        "failure": "AuthenticationError (HTTP 401): Error code: 401 - invalid api key",
        "finishedAt": "2026-12-01T09:00:00.000Z",
    }
    assert rows[2]["skipped"] == 2
    assert main(["history", session_id, "--data-dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert table.startswith(f"session {session_id}: 5 occurrences\n")
    assert "failed      0 s     0         AuthenticationError (HTTP" in table
    assert main(["history", session_id, "sch_2", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"session {session_id}: 0 occurrences of sch_2\n"
    assert main(["history", session_id, "two", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith("'two' is not a reminder id like sch_1\n")


def test_the_outcome_vocabulary_is_complete() -> None:
    assert OCCURRENCE_OUTCOMES == (
        "delivered",
        "failed",
        "pending",
        "skipped",
        "missed",
        "deleted",
    )


async def test_the_reminders_answered_since_the_persons_last_message(tmp_path: Path) -> None:
    session_id = await _week(tmp_path)
    store = JsonlSessionStore(tmp_path)
    header, entries = await store.read(session_id)
    # Nobody wrote in this session: every answered reminder turn counts.
    meanwhile = away(entries, seed_length=header.seed_length)
    assert (meanwhile.answered, meanwhile.failed, meanwhile.since) == (4, 1, 0)
    assert meanwhile.line() == (
        "4 reminders were answered since your last message (1 could not be delivered; see the "
        "history)"
    )
    async with await store.open(session_id) as handle:
        handle.append(MESSAGE_ENTRY_TYPE, user_message("thanks", at=parse_instant(START)))
        await handle.barrier()
    header, entries = await store.read(session_id)
    after = away(entries, seed_length=header.seed_length)
    assert (after.answered, after.since, after.line()) == (0, len(entries), None)
    one = msgspec.structs.replace(after, answered=1)
    assert one.line() == "1 reminder was answered since your last message"


def test_a_missed_occurrence_and_a_snoozed_delivery_are_in_the_history() -> None:
    async def run() -> list[tuple[str, str]]:
        from session_schedule.session.memory import MemorySessionStore  # noqa: PLC0415
        from session_schedule.testing.agent import FakeAgent  # noqa: PLC0415

        clock = FakeClock(START)
        handle = await MemorySessionStore().create(now=clock.now())
        async with LiveSchedule(handle, FakeAgent(), clock=clock) as schedule:
            await schedule.create(
                {"prompt": "a", "every_seconds": 3600, "max_lateness_seconds": 60}
            )
            await schedule.update({"id": "sch_1", "snooze": {"after_seconds": 5400}})
            clock.advance(5400)  # 21:30: the snoozed 21:00 occurrence
            await schedule.settled()
            clock.advance(3600)  # 22:30, all at once: 22:00 is half an hour late, missed
            await schedule.settled()
            clock.advance(30)  # the owner's bounded wait: it reads the wall clock again
            await schedule.settled()
        runs = occurrence_history(handle.entries)
        return [(run.key, run.outcome) for run in runs]

    assert asyncio.run(run()) == [
        ("sch_1@2026-11-29T21:00:00.000Z", "delivered"),
        ("sch_1@2026-11-29T22:00:00.000Z", "missed"),
    ]
