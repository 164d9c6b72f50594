"""``session-schedule timeline SESSION``: the occurrences a session's reminders will have.

From now until ``--until`` (a duration or an instant), recurring reminders expanded, in the time
zone chosen with ``--zone``, at most ``--limit`` of them (the next of each reminder first).
Overdue reminders come first: they are delivered once, the next time the session is open live —
or, later than their ``max_lateness_seconds``, recorded as missed then (SPEC §11), each listed as a
``missed`` row before its next target, as the owner's own planning decides it.
"""

from __future__ import annotations

import argparse
import re
import zoneinfo
from typing import Final, final

import msgspec

from session_schedule.cli import reading
from session_schedule.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    add_command,
    add_json_flag,
    add_session_argument,
    fail,
)
from session_schedule.cli.reading import fold_snapshot, read_snapshot
from session_schedule.cli.render import Table, Text, output, print_json, untrusted
from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import MAX_INSTANT, MS_PER_SECOND, Instant, format_instant
from session_schedule.core.time_input import format_local, load_zone, parse_rfc3339
from session_schedule.core.timeline import build_timeline, record_misses

DEFAULT_LIMIT: Final = 100
MAX_LIMIT: Final = 1_000_000
"""The most occurrences ``--limit`` may ask for (a larger number is a usage error)."""
DEFAULT_UNTIL: Final = "24h"

_DURATION: Final = re.compile(r"([0-9]{1,12})([smhdw])", re.ASCII)
_INSTANT_LIKE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt]", re.ASCII)
_LOCAL_DATE_TIME: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?", re.ASCII
)
_UNIT_MS: Final = {
    "s": MS_PER_SECOND,
    "m": 60 * MS_PER_SECOND,
    "h": 3_600 * MS_PER_SECOND,
    "d": 86_400 * MS_PER_SECOND,
    "w": 604_800 * MS_PER_SECOND,
}


DESCRIPTION: Final = (
    "The occurrences the session's active reminders will have from now until "
    "--until, recurring reminders expanded, in the time zone you choose. Overdue reminders "
    "come first: they are delivered once, the next time the session is open live, or, when "
    "later than their max_lateness_seconds, recorded as missed instead (nothing delivered)."
)
EXAMPLE: Final = "session-schedule timeline s_7k2m4q9x3v5b --until 7d --zone Asia/Tokyo"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``timeline`` to the program's subcommands."""
    parser = add_command(commands, "timeline", run, description=DESCRIPTION, example=EXAMPLE)
    add_session_argument(parser)
    parser.add_argument(
        "--until",
        type=_until,
        default=DEFAULT_UNTIL,
        metavar="WHEN",
        help="the end of the window: a duration from now such as 90m, 36h or 7d (units s, m, h, "
        "d, w), or an RFC 3339 instant with an offset (default: 24h)",
    )
    parser.add_argument(
        "--zone",
        type=_zone,
        default="UTC",
        metavar="ZONE",
        help="show times in this zone: UTC or an IANA name such as Europe/Paris (default: UTC)",
    )
    parser.add_argument(
        "--limit",
        type=_positive,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"show at most N occurrences, up to {MAX_LIMIT:,} (default: {DEFAULT_LIMIT})",
    )
    add_json_flag(parser)


@final
class Until(msgspec.Struct, frozen=True, kw_only=True):
    """The end of a timeline window: a duration from now, or an absolute instant."""

    text: str
    """As the user wrote it."""
    milliseconds: int
    """The duration, or the instant (which may precede year 0001: a time in the past)."""
    relative: bool
    """Whether ``milliseconds`` is a duration from now."""

    def resolve(self, now: Instant) -> int:
        """The window's end as seen at ``now`` (a duration reaching past year 9999 stops there;
        an instant before year 0001 stays before it)."""
        if not self.relative:
            return self.milliseconds
        return min(now + self.milliseconds, MAX_INSTANT)


def run(arguments: argparse.Namespace) -> int:
    now = reading.clock.now()
    until_argument: Until = arguments.until
    zone: zoneinfo.ZoneInfo = arguments.zone
    end = until_argument.resolve(now)
    if end <= now:
        return fail(
            f"--until {until_argument.text} is not after now ({format_instant(now)}); "
            "give a later instant or a duration such as 36h",
            EXIT_USAGE,
        )
    until = Instant(end)
    snapshot = read_snapshot(arguments)
    folded = fold_snapshot(snapshot)
    missed = record_misses(folded, now)  # as the owner would, were the session open now
    timeline = build_timeline(
        folded.ordered(),
        now=now,
        until=until,
        zone=zone,
        limit=arguments.limit,
        statuses=folded.statuses(),
        missed=missed,
    )
    if arguments.json:
        print_json(timeline)
        return EXIT_OK
    with output() as console:
        console.print(
            Text(
                f"session {snapshot.header.id}: from {format_local(now, zone)} (now) "
                f"until {format_local(until, zone)}"
            )
        )
        if not timeline.occurrences:
            console.print(Text("no reminders in this window", style="dim"))
            return EXIT_OK
        table = Table(
            f"time ({timeline.zone})", "id", "kind", "state", "prompt", wrapping=("state",)
        )
        for occurrence in timeline.occurrences:
            state = Text(occurrence.state)
            if occurrence.state == "missed":
                state.stylize("red")
            elif occurrence.state == "overdue":
                state.stylize("bold yellow")
                if occurrence.skipped:
                    state.append(f" ({occurrence.skipped} skipped)")
            table.add_row(
                Text(occurrence.local),
                Text(occurrence.id),
                Text(occurrence.kind),
                state,
                untrusted(occurrence.prompt),
            )
        console.print(table)
        if any(occurrence.state == "overdue" for occurrence in timeline.occurrences):
            console.print(
                Text(
                    "overdue reminders are delivered once, the next time the session is open live "
                    "(a recurring one with its latest due occurrence only, the earlier ones "
                    "skipped)",
                    style="dim",
                )
            )
        if any(occurrence.state == "missed" for occurrence in timeline.occurrences):
            console.print(
                Text(
                    "missed reminders are later than their max_lateness_seconds: the next time "
                    "the session is open live a miss is recorded for them and nothing is "
                    "delivered; a recurring one goes on with its next target",
                    style="dim",
                )
            )
        if timeline.truncated:
            console.print(
                Text(
                    f"showing {len(timeline.occurrences)} of {timeline.total} occurrences, "
                    "the next of each reminder first; raise --limit or bring --until closer",
                    style="yellow",
                )
            )
        return EXIT_OK


def _until(text: str) -> Until:
    duration = _DURATION.fullmatch(text)
    if duration is not None:
        milliseconds = int(duration.group(1)) * _UNIT_MS[duration.group(2)]
        if milliseconds == 0:
            raise argparse.ArgumentTypeError(f"{text!r} is an empty window; give a positive one")
        return Until(text=text, milliseconds=milliseconds, relative=True)
    try:
        return Until(text=text, milliseconds=parse_rfc3339(text), relative=False)
    except ScheduleError as error:
        if _LOCAL_DATE_TIME.fullmatch(text):
            problem = f"{text!r} has no UTC offset; add one, such as Z or +09:00"
        elif _INSTANT_LIKE.match(text):
            problem = error.message  # a malformed offset, an impossible date, out of range
        else:
            problem = (
                f"{text!r} is neither a duration such as 90m, 36h or 7d (units s, m, h, d, w) "
                "nor an RFC 3339 instant such as 2026-12-01T09:00:00+09:00"
            )
        raise argparse.ArgumentTypeError(problem) from None


def _zone(text: str) -> zoneinfo.ZoneInfo:
    try:
        return load_zone(text)
    except ScheduleError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def _positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    if int(text) > MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_LIMIT:,}, got {text!r}")
    return int(text)
