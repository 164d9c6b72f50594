"""A power cut between a reminder turn and its dispatch (Rule 4a of runtime/live.py).

The reminder turn (``turn/queued``) and the dispatch that records it are appended back to back and
made durable by one barrier, so a power cut may keep the turn and lose the dispatch. Reopened, the
queue runs the turn again (it is unfinished), and the reminder is still active: it must not be
queued a second time, or the person is reminded twice in a row.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from session_schedule import LiveSchedule, ScheduleTools, Turn, TurnQueue
from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.session.history import occurrence_history
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.turns import TURN_FINISHED_TYPE, TURN_QUEUED_TYPE
from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"


async def run(
    store: JsonlSessionStore,
    session_id: str,
    clock: FakeClock,
    *,
    create: tuple[str, dict[str, object]] | None = None,
    advance: float = 0,
) -> list[Turn]:
    """Open the session live with a turn queue, optionally make one tool call, move the clock
    and let every turn run; the turns that ran."""
    ran: list[Turn] = []
    async with await store.open(session_id) as session:
        turns = TurnQueue(session, clock=clock)
        schedule = LiveSchedule(session, turns, clock=clock)

        async def run_turn(text: str) -> None:
            current = turns.current
            assert current is not None
            assert current.text == text
            ran.append(current)

        turns.bind(run_turn)
        async with schedule, turns:
            if create is not None:
                result = await ScheduleTools(schedule).call(*create)
                assert result["ok"] is True, result
            await turns.wait_idle()
            await schedule.settled()
            clock.advance(advance)
            await schedule.settled()
            await turns.wait_idle()
            await schedule.settled()
    return ran


def cut_after_reminder_turn(log: Path) -> None:
    """Keep the log up to its first reminder turn's ``turn/queued`` line, as a power cut just
    after that line reached the disk leaves it (the checkpoint a later close wrote is gone too:
    it could not exist yet)."""
    lines = log.read_bytes().split(b"\n")
    kept = next(n for n, line in enumerate(lines) if b'"origin":"schedule"' in line)
    log.write_bytes(b"\n".join(lines[: kept + 1]) + b"\n")
    log.with_suffix(".checkpoint").unlink()


@pytest.mark.parametrize(
    ("selector", "due"),
    [
        ({"after_seconds": 60}, "2026-11-29T20:01:00.000Z"),
        ({"every_seconds": 300}, "2026-11-29T20:05:00.000Z"),
    ],
    ids=["one-shot", "every"],
)
async def test_a_turn_whose_dispatch_a_power_cut_lost_is_not_queued_twice(
    tmp_path: Path, selector: dict[str, object], due: str
) -> None:
    create = ("schedule_create", {"prompt": "stretch", **selector})
    key = f"sch_1@{due}"
    clock = FakeClock(START)
    store = JsonlSessionStore(tmp_path)
    async with await store.create(now=clock.now()) as session:
        session_id = session.id
    first = await run(store, session_id, clock, create=create, advance=300)
    assert [turn.occurrences for turn in first] == [(key,)]
    log = tmp_path / f"{session_id}.jsonl"
    cut_after_reminder_turn(log)

    clock.advance(5)
    ran = await run(store, session_id, clock)
    # The turn the cut kept runs again, once, and no second turn for the same occurrence.
    assert [(turn.occurrences, turn.restored) for turn in ran] == [((key,), True)]
    snapshot = await store.read(session_id)
    queued = [entry for entry in snapshot.entries if entry.type == TURN_QUEUED_TYPE]
    assert [entry.payload.occurrences for entry in queued] == [(key,)]  # type: ignore[attr-defined]
    dispatches = [
        entry.position
        for entry in snapshot.entries
        if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
    ]
    assert len(dispatches) == 1
    assert [entry.type for entry in snapshot.entries].count(TURN_FINISHED_TYPE) == 1
    # The history links the dispatch to that turn: one occurrence, delivered.
    runs = occurrence_history(snapshot.entries)
    assert [(run.key, run.outcome, run.turn) for run in runs] == [
        (key, "delivered", queued[0].position)
    ]
