"""A walkthrough of Schedule's core, in virtual time: what a model sends, what is stored, and
what comes back as a follow-up turn. It reads no clock and touches no storage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import msgspec

from session_schedule.core.changes import ScheduleChange, encode_change
from session_schedule.core.due import plan_delivery
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.framing import frame
from session_schedule.core.instants import MS_PER_SECOND, Instant, format_instant, parse_instant
from session_schedule.core.records import make_view
from session_schedule.core.rules import decide_create, decide_delete

START: Final = parse_instant("2026-11-29T20:00:00.000Z")

CREATES: Final[tuple[dict[str, object], ...]] = (
    {"prompt": "Stand up and stretch.", "after_seconds": 90},
    {"prompt": "Call Aiko about the report.", "at": "2026-11-30T09:00:00+09:00"},
    {
        "prompt": "Standup notes are due.",
        "at": {"date": "2026-11-30", "time": "08:45", "time_zone": "Europe/London"},
    },
    {"prompt": "Check the nightly build.", "every_seconds": 3600},
    {"prompt": "Too eager.", "every_seconds": 60},
    {"prompt": "A time that never happens.", "at": {
        "date": "2027-03-14", "time": "02:30", "time_zone": "America/New_York"}},
    {"prompt": "No zone given.", "at": "2026-11-30T09:00:00"},
)  # fmt: skip


def run(write: Callable[[str], None]) -> None:
    """Write the walkthrough, line by line, through ``write``."""
    state = ScheduleFold(session="walkthrough")
    log: list[ScheduleChange] = []

    def append(change: ScheduleChange) -> None:
        state.apply(change, position=len(log))
        log.append(change)

    write(f"Virtual time starts at {format_instant(START)}.\n")
    write("1. The model calls schedule_create:")
    for arguments in CREATES:
        write(f"   {_json(arguments)}")
        try:
            change = decide_create(arguments, now=START, state=state)
        except ScheduleError as error:
            write(f"   -> {error.code}: {error.message}")
            continue
        append(change)
        view = make_view(change.schedule, START)
        write(f"   -> {view.id} scheduled at {view.scheduled_at}")

    write("\n2. schedule_delete of sch_3, then of sch_3 again (not an error, nothing appended):")
    for _ in range(2):
        delete = decide_delete({"id": "sch_3"}, state=state)
        write(f"   deleted: {delete is not None}")
        if delete is not None:
            append(delete)

    write("\n3. The durable log so far (schedule/change events, canonical JSON):")
    for logged in log:
        write(f"   {encode_change(logged).decode()}")

    write("\n4. Ninety seconds later the one-shot is due; the follow-up turn reads:")
    _deliver(Instant(START + 90 * MS_PER_SECOND), state, append, write)

    later = Instant(START + 5 * 3600 * MS_PER_SECOND + 17 * MS_PER_SECOND)
    write(
        f"\n5. The Session stays cold until {format_instant(later)}. When it is live again the "
        "overdue one-shot goes first, in a turn of its own; then the hourly record delivers "
        "only its latest missed occurrence, with the skipped count:"
    )
    while _deliver(later, state, append, write):
        write("")

    write("6. schedule_list now shows:")
    for record in state.ordered():
        write(f"   {_json(msgspec.to_builtins(make_view(record, later)))}")


def _deliver(
    now: Instant,
    state: ScheduleFold,
    append: Callable[[ScheduleChange], None],
    write: Callable[[str], None],
) -> bool:
    """Deliver what is due at ``now`` as one follow-up turn; ``False`` when nothing is."""
    delivery = plan_delivery(state, now)
    if delivery is None:
        return False
    write("   " + frame(delivery).replace("\n", "\n   "))
    for change in delivery.changes:
        append(change)
    return True


def _json(value: object) -> str:
    return msgspec.json.encode(value).decode()
