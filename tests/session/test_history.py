"""Occurrence history read from the log: a week of a daily reminder with a failed turn, a
catch-up after downtime and a delete, through the library and the ``history`` command."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from pathlib import Path

import httpx2
import msgspec
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.cli.main import main
from session_schedule.core.changes import (
    CHANGE_CLASSES,
    CHANGE_EVENT_TYPE,
    ScheduleDispatchChange,
    ScheduleMissChange,
    create_change,
    delete_change,
    pause_change,
    resume_change,
    snooze_change,
    update_change,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.ids import ScheduleId, id_number, make_schedule_id
from session_schedule.core.instants import (
    Instant,
    canonical_instant,
    format_instant,
    parse_instant,
)
from session_schedule.core.records import (
    RECURRING_RECORDS,
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    Ends,
    EveryScheduleRecord,
    ScheduleRecord,
)
from session_schedule.runtime.live import LiveSchedule
from session_schedule.runtime.retry import TurnRetry
from session_schedule.runtime.turns import TurnQueue
from session_schedule.session.history import (
    OCCURRENCE_OUTCOMES,
    Away,
    OccurrenceLog,
    away,
    occurrence_history,
)
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, UserOrigin, user_message
from session_schedule.session.port import LogEntry
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    TurnFinished,
    TurnQueued,
    turn_failure,
)
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
    # No create made sch_2: a mistyped id is a usage error, not a reminder that never fired.
    assert main(["history", session_id, "sch_2", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"session-schedule: session {session_id} never had a reminder sch_2; "
        "check the reminder id\n"
    )
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
        "3 reminders were answered since your last message, and 1 could not be delivered (see "
        "the history)"
    )
    async with await store.open(session_id) as handle:
        handle.append(MESSAGE_ENTRY_TYPE, user_message("thanks", at=parse_instant(START)))
        await handle.barrier()
    header, entries = await store.read(session_id)
    after = away(entries, seed_length=header.seed_length)
    assert (after.answered, after.since, after.line()) == (0, len(entries), None)
    one = msgspec.structs.replace(after, answered=1)
    assert one.line() == "1 reminder was answered since your last message"
    # A failed reminder turn was not answered: it is not called so.
    failed = msgspec.structs.replace(after, answered=1, failed=1)
    assert failed.line() == (
        "1 reminder could not be delivered since your last message (see the history)"
    )
    mixed = msgspec.structs.replace(after, answered=3, failed=2)
    assert mixed.line() == (
        "1 reminder was answered since your last message, and 2 could not be delivered (see the "
        "history)"
    )


@pytest.mark.parametrize(
    ("answered", "unanswered", "failed", "line"),
    [
        (0, 0, 0, None),
        (2, 0, 0, "2 reminders were answered since your last message"),
        (1, 1, 0, "1 reminder was delivered since your last message but not answered (no model was connected)"),
        (2, 2, 0, "2 reminders were delivered since your last message but not answered (no model was connected)"),
        (1, 0, 1, "1 reminder could not be delivered since your last message (see the history)"),
        (3, 2, 0, "1 reminder was answered since your last message, and 2 were delivered but not answered (no model was connected)"),
        (3, 1, 0, "2 reminders were answered since your last message, and 1 was delivered but not answered (no model was connected)"),
        (3, 0, 2, "1 reminder was answered since your last message, and 2 could not be delivered (see the history)"),
        (3, 2, 1, "2 reminders were delivered since your last message but not answered (no model was connected), and 1 could not be delivered (see the history)"),
        (6, 2, 1, "3 reminders were answered since your last message, 2 were delivered but not answered (no model was connected), and 1 could not be delivered (see the history)"),
    ],
)  # fmt: skip
def test_the_away_line_names_each_kind_of_reminder_turn(
    answered: int, unanswered: int, failed: int, line: str | None
) -> None:
    meanwhile = Away(answered=answered, unanswered=unanswered, failed=failed, since=0)
    assert meanwhile.line() == line


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


def test_a_missed_snoozed_occurrence_is_due_at_its_snooze_instant() -> None:
    """SPEC §11 measures lateness from the snooze instant S when snoozed: a miss of a snoozed
    occurrence is due at S, as a delivery of it is, and keeps its key ``id@T``."""

    async def run() -> list[tuple[str, str, str, float | None, str]]:
        from session_schedule.session.memory import MemorySessionStore  # noqa: PLC0415
        from session_schedule.testing.agent import FakeAgent  # noqa: PLC0415

        clock = FakeClock(START)
        handle = await MemorySessionStore().create(now=clock.now())
        async with LiveSchedule(handle, FakeAgent(), clock=clock) as schedule:
            # sch_1: T 21:00, S 22:00; sch_2: T 21:00, S 21:30 (then every hour).
            await schedule.create(
                {"prompt": "a", "after_seconds": 3600, "max_lateness_seconds": 600}
            )
            await schedule.create(
                {"prompt": "b", "every_seconds": 3600, "max_lateness_seconds": 600}
            )
            await schedule.update({"id": "sch_1", "snooze": {"after_seconds": 7200}})
            await schedule.update({"id": "sch_2", "snooze": {"after_seconds": 5400}})
            await schedule.settled()
            clock.set("2026-11-29T22:39:30.000Z")  # all at once: both snoozed deliveries late
            await schedule.settled()
            clock.advance(30)  # the owner's bounded wait: it reads the wall clock again
            await schedule.settled()
        return [
            (
                run.key,
                format_instant(run.due_at),
                "-" if run.decided_at is None else format_instant(run.decided_at),
                run.lateness_seconds,
                run.outcome,
            )
            for run in occurrence_history(handle.entries)
        ]

    assert asyncio.run(run()) == [
        (
            "sch_1@2026-11-29T21:00:00.000Z",
            "2026-11-29T22:00:00.000Z",
            "2026-11-29T22:40:00.000Z",
            2400.0,
            "missed",
        ),
        (
            "sch_2@2026-11-29T21:00:00.000Z",
            "2026-11-29T21:30:00.000Z",
            "2026-11-29T22:40:00.000Z",
            4200.0,
            "missed",
        ),
    ]


# -- feeding a batch is reading entry by entry ------------------------------------------------

_BASE = parse_instant("2030-01-01T00:00:00.000Z")
_QUARTER = 900_000
_DAMAGED = ("2030-01-01T00:00:00Z", "2030-02-30T00:00:00.000Z", "later")
"""Texts that are not canonical instants: a damaged log."""


def _one_in(draw: st.DrawFn, chances: int) -> bool:
    """True once in about ``chances`` draws (a middle value: Hypothesis favours the bounds)."""
    return draw(st.integers(1, chances)) == (chances + 1) // 2


@st.composite
def _text(draw: st.DrawFn, at: int) -> str:
    """``at`` as a canonical instant, now and then a damaged text instead."""
    if _one_in(draw, 150):
        return draw(st.sampled_from(_DAMAGED))
    return format_instant(Instant(at))


@st.composite
def _record(draw: st.DrawFn, number: int, now: int, *, plain: bool = False) -> ScheduleRecord:
    """A reminder of any kind, now and then bounded or with a maximum lateness; with ``plain``,
    mostly a plain ``every`` reminder (the commonest record of a long log)."""
    schedule_id = make_schedule_id(number)
    at = draw(_text(now + draw(st.integers(-1, 4)) * _QUARTER))
    kinds: list[ScheduleRecord] = [
        EveryScheduleRecord(
            id=schedule_id,
            prompt="p",
            every_seconds=draw(st.sampled_from([900, 3600])),
            scheduled_at=at,
        ),
        DailyScheduleRecord(
            id=schedule_id,
            prompt="p",
            local_time="09:00",
            time_zone="Europe/Paris",
            weekdays=["mon", "fri"],
            scheduled_at=at,
        ),
        AtScheduleRecord(id=schedule_id, prompt="p", scheduled_at=at),
        AfterScheduleRecord(id=schedule_id, prompt="p", after_seconds=60, scheduled_at=at),
    ]
    if plain and not _one_in(draw, 8):
        return kinds[0]
    record = draw(st.sampled_from(kinds))
    if isinstance(record, RECURRING_RECORDS) and _one_in(draw, 4):
        until = draw(st.none() | _text(now + draw(st.integers(0, 12)) * _QUARTER))
        runs = draw(st.integers(1, 3)) if until is None else draw(st.none() | st.integers(1, 3))
        record = msgspec.structs.replace(record, ends=Ends(until=until, max_runs=runs))
    if _one_in(draw, 4):
        record = msgspec.structs.replace(record, max_lateness_seconds=draw(st.integers(1, 7200)))
    return record


def _occurrence(shadow: ScheduleFold, schedule_id: ScheduleId) -> str | None:
    """The occurrence an active reminder's next delivery stands for, if it has one."""
    try:
        return format_instant(shadow.occurrence_of(schedule_id))
    except (KeyError, ValueError):
        return None


@st.composite
def _histories(draw: st.DrawFn, *, plain: bool = False) -> list[LogEntry]:
    """A session's entries: reminders of every kind created, changed and deleted, and reminder
    turns (queued, dispatching, finished at once, later or never) as a shadow fold of the
    changes sees them, the wall clock moving on; now and then a damaged entry (an instant
    that is not canonical, a change of a reminder no longer active, a dispatch before its
    target, a finish of any entry, an occurrence key no dispatch carries). With ``plain``, the
    reminders are mostly plain ``every`` ones and turns finish twice as often."""
    entries: list[LogEntry] = []
    shadow = ScheduleFold()
    unfinished: list[int] = []
    now: int = _BASE

    def add(entry_type: str, payload: object) -> int:
        if isinstance(payload, CHANGE_CLASSES):
            with contextlib.suppress(ScheduleError, ValueError):
                shadow.apply(payload)
        entries.append(LogEntry(position=len(entries), type=entry_type, payload=payload))
        return len(entries) - 1

    for _ in range(draw(st.integers(0, 30))):
        now += draw(st.integers(0, 3)) * _QUARTER + draw(st.integers(0, 999))
        active = [record.id for record in shadow.by_creation()]
        chosen = draw(st.sampled_from(active)) if active and not _one_in(draw, 16) else None
        schedule_id = chosen or make_schedule_id(draw(st.integers(1, 6)))
        kind = draw(st.integers(0, 9))
        if kind <= 1 or not active:
            number = max(1, shadow.highest_id + (not _one_in(draw, 40)))
            add(CHANGE_EVENT_TYPE, create_change(draw(_record(number, now, plain=plain))))
        elif kind <= 5:
            # A reminder turn: queued, naming the occurrence, then the dispatch.
            occurrence = _occurrence(shadow, schedule_id) if not _one_in(draw, 6) else None
            key = f"{schedule_id}@{occurrence or draw(_text(now))}"
            turn = None
            if not _one_in(draw, 4):
                queued = TurnQueued(
                    version=1,
                    origin=draw(st.sampled_from(["schedule", "schedule", "schedule", "host"])),
                    text="t",
                    at=draw(_text(now)),
                    occurrences=(key,),
                )
                turn = add(TURN_QUEUED_TYPE, queued)
            record = shadow.get(schedule_id)
            one_shot = record is not None and not isinstance(record, RECURRING_RECORDS)
            # Mostly decided once due (the target, or a catch-up later), now and then early.
            due = canonical_instant(record.scheduled_at) if record is not None else None
            if due is not None and not _one_in(draw, 8):
                late = draw(st.integers(0, 6)) * _QUARTER + draw(st.integers(0, 999))
                now = max(now, due + late)
            accepted_at = msgspec.UNSET if one_shot and not _one_in(draw, 12) else draw(_text(now))
            add(
                CHANGE_EVENT_TYPE,
                ScheduleDispatchChange(version=1, id=schedule_id, accepted_at=accepted_at),
            )
            if turn is not None:
                unfinished.append(turn)
        elif kind == 6 and not plain:
            origin: UserOrigin = draw(st.sampled_from(["person", "person", "followup"]))
            add(MESSAGE_ENTRY_TYPE, user_message("hello", at=Instant(now), origin=origin))
        elif kind <= 7:
            turn = (
                unfinished.pop(draw(st.integers(0, len(unfinished) - 1)))
                if unfinished and not _one_in(draw, 6)
                else draw(st.integers(0, len(entries)))
            )
            failed = draw(st.booleans())
            finished = TurnFinished(
                version=2,
                turn=turn,
                outcome="failed" if failed else "completed",
                at=draw(_text(now + 2_300)),
                attempts=draw(st.integers(1, 3)),
                failure=turn_failure("RuntimeError", message="down") if failed else None,
            )
            add(TURN_FINISHED_TYPE, finished)
        else:
            later = Instant(now + draw(st.integers(1, 8)) * _QUARTER)
            paused = shadow.status(schedule_id).paused
            change = draw(
                st.sampled_from(
                    [
                        delete_change(schedule_id),
                        resume_change(schedule_id, Instant(now)),
                    ]
                    if paused and not _one_in(draw, 8)
                    else [
                        delete_change(schedule_id),
                        pause_change(schedule_id),
                        snooze_change(schedule_id, later),
                        snooze_change(schedule_id, later),
                        snooze_change(schedule_id, later),
                        update_change(draw(_record(id_number(schedule_id), now))),
                        ScheduleMissChange(
                            version=3,
                            id=schedule_id,
                            scheduled_at=_occurrence(shadow, schedule_id) or draw(_text(now)),
                            accepted_at=draw(_text(now)),
                        ),
                    ]
                )
            )
            add(CHANGE_EVENT_TYPE, change)
    return entries


def _read_by(
    read: Callable[[OccurrenceLog, list[LogEntry]], None],
    entries: list[LogEntry],
    *,
    seed: int,
    keep: bool,
) -> tuple[object, ...]:
    log = OccurrenceLog(seed_length=seed, session="s", keep=keep)
    error: tuple[str, str] | None = None
    try:
        read(log, entries)
    except (ScheduleError, ValueError) as failure:
        error = type(failure).__name__, str(failure)
    state = log.state
    return (
        error,
        log.position,
        log.runs,
        [log.last(make_schedule_id(number)) for number in range(1, 8)],
        log._queued,
        log._by_turn,
        state.highest_id,
        state.by_creation(),
        state.statuses(),
    )


def _entry_by_entry(log: OccurrenceLog, entries: list[LogEntry]) -> None:
    """The reference: each entry read on its own (how the history was read before it was read
    a batch at a time)."""
    for entry in entries:
        log._read(entry)
        log.position = entry.position + 1


@settings(max_examples=400, deadline=None)
@given(_histories(), st.integers(0, 60), st.lists(st.integers(0, 60), max_size=3), st.booleans())
def test_feeding_batches_reads_what_reading_entry_by_entry_reads(
    entries: list[LogEntry], seed: int, cuts: list[int], keep: bool
) -> None:
    """:meth:`OccurrenceLog.feed` gives the runs, the latest runs, the queued and unfinished
    turns, the fold and the error that reading one entry at a time gives — for histories of
    every kind of reminder, snoozed, paused, bounded and counted, with dispatches of inactive
    reminders, dispatches before their target, finishes of any turn, instants that are not
    canonical, and a fork point anywhere."""
    seed = min(seed, len(entries))

    def in_batches(log: OccurrenceLog, entries: list[LogEntry]) -> None:
        for start, end in itertools.pairwise([0, *sorted(cuts), len(entries)]):
            log.feed(iter(entries[start:end]) if start % 2 else entries[start:end])

    assert _read_by(in_batches, entries, seed=seed, keep=keep) == _read_by(
        _entry_by_entry, entries, seed=seed, keep=keep
    )


@settings(max_examples=300, deadline=None)
@given(_histories(plain=True), st.integers(0, 10), st.booleans())
def test_feeding_the_reminder_turns_of_plain_every_reminders_reads_what_reading_one_by_one_reads(
    entries: list[LogEntry], seed: int, keep: bool
) -> None:
    """The same for histories of mostly plain ``every`` reminders whose turns are queued,
    dispatched and finished (completed or failed, in any order, some never): the dispatches and
    finishes that :meth:`OccurrenceLog.feed` reads without a call."""
    seed = min(seed, len(entries))

    def at_once(log: OccurrenceLog, entries: list[LogEntry]) -> None:
        log.feed(entries)

    assert _read_by(at_once, entries, seed=seed, keep=keep) == _read_by(
        _entry_by_entry, entries, seed=seed, keep=keep
    )
