"""``session-schedule resolve``: show the canonical UTC target an ``at`` input names, or the next
occurrences of a ``daily_at`` or ``calendar`` input.

With the SPEC §11 options (``--until``, ``--max-runs``, ``--max-lateness``, ``--snooze``,
``--resume``) each input is created, managed and delivered in a scratch schedule through the
core's own decisions — ``decide_create``, ``decide_update``, ``plan_misses``, ``plan_delivery``
and the fold — so what it prints is what a model's tool calls would get, errors included."""

from __future__ import annotations

import argparse
import zoneinfo
from typing import Final, final

import msgspec

from session_schedule.cli.common import EXIT_OK, EXIT_REJECTED
from session_schedule.core.calendar import make_schedule, parse_calendar, parse_rule, upcoming
from session_schedule.core.changes import ScheduleChange
from session_schedule.core.daily import (
    first_after,
    listed_from,
    make_rule,
    occurrence_on,
    weekday_of,
)
from session_schedule.core.due import End, Occurrence, plan_delivery, plan_misses
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.framing import ends_text, short_time
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import (
    MAX_INSTANT,
    MIN_INSTANT,
    MS_PER_SECOND,
    Instant,
    civil_from_days,
    days_from_civil,
    describe_instant,
    format_instant,
)
from session_schedule.core.records import (
    WEEKDAYS,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    ScheduleRecord,
    record_target,
)
from session_schedule.core.rules import decide_create, decide_update
from session_schedule.core.standing import LAST_RUN, NO_LATER_TARGET, no_occurrence_left
from session_schedule.core.time_input import (
    format_local,
    load_zone,
    parse_at,
    parse_daily_at,
    parse_rfc3339,
    parse_wall_time,
)

LOCAL_FORM_HELP = "DATE TIME ZONE, e.g. '2026-12-01 09:00 Asia/Tokyo'"
DAILY_FORM_HELP = "daily TIME ZONE [DAYS], e.g. 'daily 09:00 Asia/Tokyo mon,wed,fri'"
EVERY_FORM_HELP = "every SECONDS, e.g. 'every 3600'"
SNOOZE_HELP = "an RFC 3339 time, the local form, or 'after SECONDS'"
CALENDAR_FORM_HELP = (
    "calendar RULE TIME ZONE [START], e.g. 'calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris'"
)
OCCURRENCES_SHOWN: Final = 5
EVERY_NEEDS_OPTIONS: Final = (
    "'every SECONDS' is taken only with the managing options (SPEC 11): add --until, "
    "--max-runs, --max-lateness, --snooze or --resume"
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``resolve`` to the program's subcommands."""
    parser = commands.add_parser(
        "resolve",
        help="resolve `at`, `daily_at` and `calendar` inputs to UTC, or show the error a model "
        "would get",
        description="Resolve `at`, `daily_at` and `calendar` inputs exactly as schedule_create "
        "does. Each input is an RFC 3339 string with an offset, the local form "
        + LOCAL_FORM_HELP
        + ", "
        + DAILY_FORM_HELP
        + ", or "
        + CALENDAR_FORM_HELP
        + f" (of the last two, the next {OCCURRENCES_SHOWN} occurrences, with their offsets).",
        epilog="example: session-schedule resolve '2026-12-01T09:00:00+09:00' "
        "'2027-03-14 02:30 America/New_York' 'daily 02:30 America/New_York' "
        "'calendar FREQ=MONTHLY;BYDAY=-1FR 18:00 Europe/London'",
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT")
    parser.add_argument(
        "--after",
        metavar="TIME",
        type=_instant_option,
        help="list daily and calendar occurrences after this RFC 3339 time (default: now)",
    )
    manage = parser.add_argument_group(
        "managing in place (SPEC 11)",
        "Create each input at --after (default: now) as schedule_create would, with these "
        "fields, and show its deliveries (each decided at its time) until it ends, at most "
        f"{OCCURRENCES_SHOWN}, or the exact error a model would get. With them an input may also "
        f"be {EVERY_FORM_HELP}.",
    )
    manage.add_argument(
        "--until",
        metavar="INSTANT",
        help="ends.until: no delivery after this time (RFC 3339, or the local form)",
    )
    manage.add_argument(
        "--max-runs", metavar="N", type=int, help="ends.max_runs: the record ends with its N-th run"
    )
    manage.add_argument(
        "--max-lateness",
        metavar="SECONDS",
        type=int,
        help="max_lateness_seconds: a delivery decided later than this after its time is missed",
    )
    manage.add_argument(
        "--snooze",
        metavar="WHEN",
        help=f"snooze the next delivery ({SNOOZE_HELP}); decided at --after, or with --resume",
    )
    manage.add_argument(
        "--resume",
        metavar="INSTANT",
        type=_instant_option,
        help="pause the reminder at --after and resume it at this RFC 3339 time",
    )
    parser.set_defaults(handler=_resolve)


def _instant_option(text: str) -> Instant:
    """An option's RFC 3339 time, as an instant; a malformed one is a usage error (exit 2),
    with the message a tool would give."""
    try:
        instant = parse_rfc3339(text)
    except ScheduleError as error:
        raise argparse.ArgumentTypeError(error.message) from None
    if instant < MIN_INSTANT:
        # A decision time, not a target: it must be one a record can hold.
        raise argparse.ArgumentTypeError(
            f"{text!r} is before {format_instant(MIN_INSTANT)}, the earliest instant Schedule "
            "can represent; choose a later time."
        )
    return Instant(instant)


def _resolve(arguments: argparse.Namespace) -> int:
    options = _options(arguments)
    if arguments.after is not None:
        after = arguments.after
    elif options is not None or any(
        text.split()[:1] in (["daily"], ["calendar"]) for text in arguments.inputs
    ):
        # Only a daily or calendar input needs "now"; the clock's module imports asyncio, which
        # `at` inputs can start without.
        from session_schedule.runtime.clock import SystemClock  # noqa: PLC0415

        after = SystemClock().now()
    else:
        after = MIN_INSTANT  # only daily and calendar inputs read it, and there is none
    if options is not None:
        results = [managed(text, after=after, options=options) for text in arguments.inputs]
    else:
        results = [resolve(text, after=after) for text in arguments.inputs]
    for _, line in results:
        print(line)
    return EXIT_OK if all(ok for ok, _ in results) else EXIT_REJECTED


def at_argument(text: str) -> object:
    """The ``at`` value a command-line input stands for.

    Three space-separated words are the local form ``{date, time, time_zone}``; anything else is
    passed on as the RFC 3339 string form.
    """
    words = text.split()
    if len(words) == 3:
        return {"date": words[0], "time": words[1], "time_zone": words[2]}
    return text


def daily_argument(words: list[str]) -> dict[str, object]:
    """The ``daily_at`` value of ``daily TIME ZONE [DAYS]`` (``words`` without ``daily``).

    Missing words are missing keys, so the tool's own message names them.
    """
    selector: dict[str, object] = dict(zip(("time", "time_zone"), words, strict=False))
    if len(words) > 2:
        selector["weekdays"] = words[2].split(",")
    return selector


def resolve(text: str, *, after: Instant) -> tuple[bool, str]:
    """(ok, text) for one input: its canonical UTC target, the next occurrences after ``after``
    of a ``daily`` or ``calendar`` input, or the error a model would get."""
    words = text.split()
    if words[:1] == ["daily"]:
        return _daily(text, words[1:], after)
    if words[:1] == ["calendar"]:
        return _calendar(text, words[1:], after)
    if words[:1] == ["every"]:
        return False, f"{text}  ->  {EVERY_NEEDS_OPTIONS}"
    try:
        instant = parse_at(at_argument(text))
    except ScheduleError as error:
        return False, f"{text}  ->  {error.code}: {error.message}"
    line = f"{text}  ->  {describe_instant(instant)}"
    if instant < MIN_INSTANT:
        # In the past like any other past target, but before the range records can hold.
        line += f"  (before {format_instant(MIN_INSTANT)}: in the past, a model gets not_future)"
    return True, line


def _daily(text: str, words: list[str], after: Instant) -> tuple[bool, str]:
    if len(words) > 3:
        return False, f"{text}  ->  write it as {DAILY_FORM_HELP}"
    try:
        daily = parse_daily_at(daily_argument(words))
    except ScheduleError as error:
        return False, f"{text}  ->  {error.code}: {error.message}"
    zone = load_zone(daily.time_zone)
    rule = make_rule(daily.time_of_day, zone, daily.weekdays)
    lines = [f"{text}  ->  the next {OCCURRENCES_SHOWN} after {format_instant(after)}:"]
    found = first_after(rule, after)
    day = None if found is None else found[0]
    while day is not None and len(lines) <= OCCURRENCES_SHOWN:
        occurrence = occurrence_on(rule, day)
        if occurrence > MAX_INSTANT:
            break
        local, reading = _reading(Instant(occurrence), zone)
        line = f"  {reading}"
        year, month, date = civil_from_days(day)
        if not local.startswith(f"{year:04d}-{month:02d}-{date:02d}T{daily.local_time}"):
            line += f"  ({year:04d}-{month:02d}-{date:02d} has no {short_time(daily.local_time)}"
            line += ": the clocks jump)"
        lines.append(line)
        day = listed_from(rule, day + 1)
    return True, "\n".join(lines)


def calendar_argument(words: list[str]) -> dict[str, object]:
    """The ``calendar`` value of ``calendar RULE TIME ZONE [START]`` (``words`` without
    ``calendar``). Missing words are missing keys, so the tool's own message names them."""
    selector: dict[str, object] = dict(
        zip(("rule", "time", "time_zone", "start_date"), words, strict=False)
    )
    return selector


def _calendar(text: str, words: list[str], after: Instant) -> tuple[bool, str]:
    if len(words) > 4:
        return False, f"{text}  ->  write it as {CALENDAR_FORM_HELP}"
    try:
        found = parse_calendar(calendar_argument(words), after)
    except ScheduleError as error:
        return False, f"{text}  ->  {error.code}: {error.message}"
    zone = load_zone(found.time_zone)
    year, month, date = (int(part) for part in found.start_date.split("-"))
    schedule = make_schedule(
        parse_rule(found.rule),
        days_from_civil(year, month, date),
        parse_wall_time(found.local_time),
        zone,
    )
    heading = (
        f"{text}  ->  {found.rule} from {found.start_date}, the next {OCCURRENCES_SHOWN} after "
        f"{format_instant(after)}:"
    )
    lines = [heading]
    for day, occurrence in upcoming(schedule, after, OCCURRENCES_SHOWN):
        local, reading = _reading(occurrence, zone)
        line = f"  {reading}"
        year, month, date = civil_from_days(day)
        if not local.startswith(f"{year:04d}-{month:02d}-{date:02d}T{found.local_time}"):
            line += f"  ({year:04d}-{month:02d}-{date:02d} has no {short_time(found.local_time)}"
            line += ": the clocks jump)"
        lines.append(line)
    return True, "\n".join(lines)


@final
class Management(msgspec.Struct, frozen=True, kw_only=True):
    """The SPEC §11 options of a ``resolve`` run."""

    until: str | None = None
    max_runs: int | None = None
    max_lateness: int | None = None
    snooze: str | None = None
    resume: Instant | None = None


def _options(arguments: argparse.Namespace) -> Management | None:
    """The SPEC §11 options given, or ``None`` when there is none."""
    options = Management(
        until=arguments.until,
        max_runs=arguments.max_runs,
        max_lateness=arguments.max_lateness,
        snooze=arguments.snooze,
        resume=arguments.resume,
    )
    return None if options == Management() else options


def create_arguments(text: str, options: Management) -> dict[str, object]:
    """The ``schedule_create`` arguments ``text`` and ``options`` stand for.

    Missing words are missing keys, so the tool's own message names them.
    """
    words = text.split()
    arguments: dict[str, object] = {"prompt": text}
    if words[:1] == ["daily"]:
        arguments["daily_at"] = daily_argument(words[1:])
    elif words[:1] == ["calendar"]:
        arguments["calendar"] = calendar_argument(words[1:])
    elif words[:1] == ["every"]:
        arguments["every_seconds"] = _number(" ".join(words[1:]))
    else:
        arguments["at"] = at_argument(text)
    if options.until is not None or options.max_runs is not None:
        until = None if options.until is None else at_argument(options.until)
        arguments["ends"] = {"until": until, "max_runs": options.max_runs}
    if options.max_lateness is not None:
        arguments["max_lateness_seconds"] = options.max_lateness
    return arguments


def snooze_argument(text: str) -> dict[str, object]:
    """The ``snooze`` value of ``--snooze``: ``after SECONDS``, or a time as ``at`` takes it."""
    words = text.split()
    if words[:1] == ["after"]:
        return {"after_seconds": _number(" ".join(words[1:]))}
    return {"until": at_argument(text)}


def _number(text: str) -> object:
    """``text`` as the integer a model would send, or as the string it is when it is none."""
    return int(text) if text.isascii() and text.isdigit() else text


def managed(text: str, *, after: Instant, options: Management) -> tuple[bool, str]:
    """(ok, text) for one input with SPEC §11 options: its deliveries after ``after`` (each
    decided at its time) until it ends, at most :data:`OCCURRENCES_SHOWN`, or the error a
    model would get."""
    words = text.split()
    if words[:1] == ["daily"] and len(words) > 4:
        return False, f"{text}  ->  write it as {DAILY_FORM_HELP}"
    if words[:1] == ["calendar"] and len(words) > 5:
        return False, f"{text}  ->  write it as {CALENDAR_FORM_HELP}"
    state = ScheduleFold()
    decided = after
    try:
        create = decide_create(create_arguments(text, options), now=after, state=state)
        state.apply(create)
        schedule_id = create.schedule.id
        update: dict[str, object] = {"id": schedule_id}
        if options.resume is not None:
            if options.resume < after:
                return False, (
                    f"{text}  ->  --resume {format_instant(options.resume)} is before the pause "
                    f"at {format_instant(after)}; resume it later"
                )
            _apply(
                state, decide_update({"id": schedule_id, "paused": True}, now=after, state=state)
            )
            decided = options.resume
            update["paused"] = False
        if options.snooze is not None:
            update["snooze"] = snooze_argument(options.snooze)
        if len(update) > 1:
            _apply(state, decide_update(update, now=decided, state=state))
    except ScheduleError as error:
        return False, f"{text}  ->  {error.code}: {error.message}"
    heading = f"{text}  ->  deliveries after {format_instant(after)}"
    if options.resume is not None:
        heading += f", paused until {format_instant(options.resume)}"
    lines = [heading + ":"]
    last: Occurrence | None = None
    while len(lines) <= OCCURRENCES_SHOWN and (record := state.get(schedule_id)) is not None:
        decided = Instant(max(record_target(record), decided))
        for miss in plan_misses(state, decided):
            state.apply(miss)
            lines.append(f"  {_when(record, Instant(decided))}  missed (max_lateness_seconds)")
        delivery = plan_delivery(state, decided)
        if delivery is None:
            break
        [last] = delivery.occurrences
        lines.append("  " + _delivered(last, decided, options.max_lateness))
        for change in delivery.changes:
            state.apply(change)
    if last is not None and last.end is not None:
        if state.get(schedule_id) is None:
            lines.append(f"  ends: with the delivery above ({_reason(last.end)})")
        else:
            lines.append(f"  ends: {ends_text(last.end)}")
    return True, "\n".join(lines)


def _apply(state: ScheduleFold, decided: tuple[ScheduleId, tuple[ScheduleChange, ...]]) -> None:
    for change in decided[1]:
        state.apply(change)


def _reason(end: End) -> str:
    if end.runs_left == 0:
        return LAST_RUN
    if end.until is not None:
        return no_occurrence_left(end.until)
    return NO_LATER_TARGET


def _delivered(occurrence: Occurrence, decided: Instant, max_lateness: int | None) -> str:
    """One delivery of a ``resolve`` run: when, and what its frame would say of it."""
    record = occurrence.record
    line = _when(record, occurrence.due_at)
    notes = []
    if (
        isinstance(record, DailyScheduleRecord | CalendarScheduleRecord)
        and occurrence.snoozed_from is None
    ):
        local = format_local(occurrence.due_at, load_zone(record.time_zone))
        if local[11:23] != record.local_time:
            notes.append(f"the clocks jump past {short_time(record.local_time)}")
    if decided != occurrence.due_at:
        notes.append(f"delivered at {format_instant(decided)}")
    if occurrence.snoozed_from is not None:
        notes.append(f"snoozed from: {format_instant(occurrence.snoozed_from)}")
        notes.append(f"skipped occurrences: {occurrence.skipped}")
    if max_lateness is not None:
        deadline = Instant(min(decided + max_lateness * MS_PER_SECOND, MAX_INSTANT))
        notes.append(f"missed if not delivered by {format_instant(deadline)}")
    return line if not notes else f"{line}  ({'; '.join(notes)})"


def _when(record: ScheduleRecord, instant: Instant) -> str:
    """``instant`` in UTC, after its local reading for a record with a zone."""
    if isinstance(record, DailyScheduleRecord | CalendarScheduleRecord):
        return _reading(instant, load_zone(record.time_zone))[1]
    return format_instant(instant)


def _reading(instant: Instant, zone: zoneinfo.ZoneInfo) -> tuple[str, str]:
    """``instant``'s local time in ``zone``, and the text that shows it: the weekday of that
    local date (where the clocks skip a whole day, as Pacific/Apia's did, not the weekday of the
    day the occurrence belongs to), the local time and the instant in UTC."""
    local = format_local(instant, zone)
    year, month, date = (int(part) for part in local[:10].split("-"))
    weekday = WEEKDAYS[weekday_of(days_from_civil(year, month, date))]
    return local, f"{weekday} {local}  =  {format_instant(instant)}"
