"""A walkthrough of Schedule's core, in virtual time: what a model sends, what is stored, and
what comes back as a follow-up turn. It reads no clock and touches no storage."""

from __future__ import annotations

import argparse
import zoneinfo
from collections.abc import Callable
from typing import Final

import msgspec

from session_schedule.cli.common import EXIT_OK
from session_schedule.core.changes import ScheduleChange, encode_change
from session_schedule.core.due import plan_delivery
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.framing import frame
from session_schedule.core.instants import MS_PER_SECOND, Instant, format_instant, parse_instant
from session_schedule.core.records import make_view
from session_schedule.core.rules import decide_create, decide_delete
from session_schedule.core.time_input import format_local, load_zone, wall_clock_at

START: Final = parse_instant("2026-11-29T20:00:00.000Z")

CREATES: Final[tuple[dict[str, object], ...]] = (
    {"prompt": "Stand up and stretch.", "after_seconds": 90},
    {"prompt": "Call Aiko about the report.", "at": "2026-11-30T09:00:00+09:00"},
    {
        "prompt": "Standup notes are due.",
        "at": {"date": "2026-11-30", "time": "08:45", "time_zone": "Europe/London"},
    },
    {"prompt": "Check the nightly build.", "every_seconds": 3600},
    {"prompt": "Post the standup summary.", "daily_at": {
        "time": "09:00", "time_zone": "Asia/Tokyo", "weekdays": ["mon", "tue", "wed", "thu", "fri"],
    }},
    {"prompt": "Too eager.", "every_seconds": 60},
    {"prompt": "A time that never happens.", "at": {
        "date": "2027-03-14", "time": "02:30", "time_zone": "America/New_York"}},
    {"prompt": "No zone given.", "at": "2026-11-30T09:00:00"},
)  # fmt: skip


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``walkthrough`` to the program's subcommands."""
    parser = commands.add_parser(
        "walkthrough",
        help="show, in virtual time, what a model sends, what is stored and what comes back",
        description="A walkthrough of Schedule's core in virtual time; it stores nothing.",
        epilog="example: session-schedule walkthrough",
    )
    parser.set_defaults(handler=_walkthrough)


def _walkthrough(_arguments: argparse.Namespace) -> int:
    run(print)
    return EXIT_OK


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
        "overdue one-shot goes first, in a turn of its own; then the recurring records share "
        "one turn, each delivering only its latest missed occurrence, with the skipped count:"
    )
    while _deliver(later, state, append, write):
        write("")

    write("6. schedule_list now shows:")
    for record in state.ordered():
        write(f"   {_json(msgspec.to_builtins(make_view(record, later)))}")

    write(
        "\n7. daily_at keeps its wall-clock time across daylight-saving changes (where `at` "
        "rejects a time in a gap). Every day in America/New_York, around the changes of 2027:"
    )
    for time, zone_name, start in DST_EXAMPLES:
        _daily_example(time, zone_name, start, write)


DST_EXAMPLES: Final = (
    ("02:30", "America/New_York", "2027-03-12T12:00:00.000Z"),
    ("01:30", "America/New_York", "2027-11-05T12:00:00.000Z"),
)
"""(time, zone, creation time) of the daily rules shown in step 7."""


def _daily_example(time: str, zone_name: str, start: str, write: Callable[[str], None]) -> None:
    """Create a daily rule at ``start``, then deliver each of its next three occurrences."""
    now = parse_instant(start)
    state = ScheduleFold(session="walkthrough")
    selector = {"time": time, "time_zone": zone_name}
    state.apply(decide_create({"prompt": "p", "daily_at": selector}, now=now, state=state))
    zone = load_zone(zone_name)
    write(f"   {_json(selector)}, created at {start}:")
    for _ in range(3):
        record = state.ordered()[0]
        target = parse_instant(record.scheduled_at)
        local = format_local(target, zone)
        write(
            f"   {local[:10]} {time}  ->  {local}  =  {record.scheduled_at}  "
            f"{_day_kind(zone, target, time, local)}"
        )
        delivery = plan_delivery(state, target)
        for dispatch in delivery.changes if delivery is not None else ():
            state.apply(dispatch)


def _day_kind(zone: zoneinfo.ZoneInfo, target: Instant, time: str, local: str) -> str:
    if local[11:16] != time:
        return "(a gap: fires as the clocks jump)"
    # The same wall time again later, at the offset in force a few hours on: an overlap.
    later = wall_clock_at(zone, Instant(target + 6 * 3_600_000)) - (target + 6 * 3_600_000)
    earlier = wall_clock_at(zone, target) - target
    repeat = Instant(target + earlier - later)
    if repeat > target and wall_clock_at(zone, repeat) == wall_clock_at(zone, target):
        return f"(an overlap: the earlier instant, once; not {format_instant(repeat)})"
    return "(an ordinary day)"


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
