"""Operator commands: look into sessions without disturbing them, fork them, print the catalogs.

- ``sessions``, ``show``, ``list``, ``timeline`` and ``check`` only *read*: they take a snapshot
  with ``store.read`` — no ownership, no lock, no byte changed, a torn last line ignored rather
  than cut — so they work while a chat has the session open.
- ``fork`` creates a new session (the parent is not modified) and prints only its id.
- ``catalog`` and ``tools`` print the persistence catalog and the tool definitions as JSON.

Tables and text go through :mod:`session_schedule.cli.render`: styled with rich on a terminal
(when the ``cli`` extra is installed), plain and 120 columns wide elsewhere. The text inside them
— prompts, turns, tool arguments — is untrusted: it is never read as markup, and terminal control
characters are made visible.
JSON goes to stdout with ``print``. "Now" is read from the module's ``clock``.
Storage errors are left to escape: ``main`` turns them into one line on stderr and the documented
exit code (3 for a missing session, 5 for a corrupt log).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import zoneinfo
from collections.abc import Awaitable, Callable
from typing import Final, Literal, TypeVar, assert_never, final

import msgspec

from session_schedule.cli.common import (
    EXIT_CORRUPT,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    Handler,
    exit_code_for,
    fail,
    read_session,
    store_location,
)
from session_schedule.cli.history import overdue_lines
from session_schedule.cli.render import WIDTH, Cell, Group, Table, Text, output
from session_schedule.core.calendar import calendar_rule_text
from session_schedule.core.catalog import CATALOG
from session_schedule.core.changes import (
    CHANGE_CLASSES,
    CHANGE_EVENT_TYPE,
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
    ScheduleMissChange,
    SchedulePauseChange,
    ScheduleResumeChange,
    ScheduleSnoozeChange,
    ScheduleUpdateChange,
)
from session_schedule.core.due import next_wakeup
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.framing import daily_rule_text
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import MAX_INSTANT, MS_PER_SECOND, Instant, format_instant
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    ScheduleRecord,
    make_view,
)
from session_schedule.core.standing import standing
from session_schedule.core.time_input import format_local, load_zone, parse_rfc3339
from session_schedule.core.timeline import build_timeline
from session_schedule.core.visible import frame_escape, reveal
from session_schedule.harness.transcript import check_fork_cut, transcript_check
from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.runtime.live import with_runs

# The session package registers every durable type it writes (``message`` among them) in the
# persistence catalog when it is imported; ``catalog`` relies on that.
from session_schedule.session import (
    MESSAGE_ENTRY_TYPE,
    LogEntry,
    MessageEntry,
    SessionCorrupt,
    SessionHeader,
    SessionId,
    SessionNotFound,
    SessionSnapshot,
)
from session_schedule.session.history import OccurrenceLog
from session_schedule.session.location import opened_store, store_url
from session_schedule.session.port import SessionStore, schedule_changes
from session_schedule.tools.adapters import anthropic_tools, mcp_tools, openai_tools
from session_schedule.tools.catalog import tool_definitions
from session_schedule.tools.results import ListResult

_T = TypeVar("_T")

clock: Clock = SystemClock()
"""Where "now" comes from (a module attribute, so tests can put a fake clock here)."""

TABLE_WIDTH: Final = WIDTH
"""The width of tables written to anything that is not a terminal (pipes, files, tests)."""
DEFAULT_LIMIT: Final = 100
DEFAULT_UNTIL: Final = "24h"

ToolFormat = Literal["openai", "openai-responses", "anthropic", "anthropic-strict", "mcp"]
TOOL_FORMATS: Final[tuple[ToolFormat, ...]] = (
    "openai",
    "openai-responses",
    "anthropic",
    "anthropic-strict",
    "mcp",
)

_SESSION_HELP: Final = "a session id, such as s_7k2m4q9x3v5b (see `session-schedule sessions`)"
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
# C0 controls other than tab and newline, DEL and C1 controls: a terminal would act on them.
_JSON: Final = msgspec.json.Encoder()


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the operator commands to the program's subcommands."""
    parser = _command(
        commands,
        "sessions",
        _sessions,
        help="list the sessions in the store",
        description="The sessions in the store (--store), oldest first: when each was created, "
        "its parent and the entry it was forked at (for a fork), how many entries it has, how "
        "many reminders are active and the earliest target. A session whose log is damaged is "
        "listed with its problem.",
        example="session-schedule sessions --json",
    )
    _json_flag(parser)

    parser = _command(
        commands,
        "show",
        _show,
        help="show a session's transcript and schedule events",
        description="Every entry of a session in order: each turn with its time, role and origin "
        "(follow-up turns queued by Schedule are marked), and a one-line summary of each "
        "schedule change. A fork's inherited entries are marked. Exits 5 when a schedule change "
        "breaks the fold's rules, after showing the entries.",
        example="session-schedule show s_7k2m4q9x3v5b",
    )
    _session_argument(parser)

    parser = _command(
        commands,
        "list",
        _list,
        help="list a session's active reminders as the model sees them",
        description="The active reminders of a session, soonest first, each with its state "
        "(scheduled, or overdue) and delivery mode — what schedule_list would tell the model "
        "now. With --json, exactly the schedule_list result.",
        example="session-schedule list s_7k2m4q9x3v5b --json",
    )
    _session_argument(parser)
    _json_flag(parser)

    parser = _command(
        commands,
        "timeline",
        _timeline,
        help="show a session's upcoming reminder occurrences",
        description="The occurrences the session's active reminders will have from now until "
        "--until, recurring reminders expanded, in the time zone you choose. Overdue reminders "
        "come first: they are delivered once, the next time the session is open live.",
        example="session-schedule timeline s_7k2m4q9x3v5b --until 7d --zone Asia/Tokyo",
    )
    _session_argument(parser)
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
        help=f"show at most N occurrences (default: {DEFAULT_LIMIT})",
    )
    _json_flag(parser)

    parser = _command(
        commands,
        "check",
        _check,
        help="validate a session's whole log strictly",
        description="Read and strictly decode every entry of a session, fold its schedule "
        "changes and check that every tool result in the transcript answers a call. Prints a "
        "one-line summary when the session is sound, with a warning for each tool call a stop "
        "or crash left without its result. Exit codes: 0 sound; 1 sound, but with --overdue "
        "some reminder is later than that; 3 no such session; 5 corrupt (the message names the "
        "entry and the field, or the stray tool result).",
        example="session-schedule check s_7k2m4q9x3v5b",
    )
    _session_argument(parser)
    parser.add_argument(
        "--overdue",
        type=_overdue_seconds,
        metavar="SECONDS",
        help="a monitoring probe: also exit 1, naming them, when active reminders are more than "
        "SECONDS overdue (a sound log whose reminders nobody delivers)",
    )

    parser = _command(
        commands,
        "fork",
        _fork,
        help="fork a session and print the new session's id",
        description="Create a new session that keeps the session's history — all of it, or its "
        "first N entries — but none of its active reminders. Only the new id is printed, so a "
        "script can capture it. The parent may be open elsewhere; it is not modified. A cut "
        "between a tool call and its results is refused, naming the nearest entries to cut at.",
        example="child=$(session-schedule fork s_7k2m4q9x3v5b --at 12)",
    )
    _session_argument(parser)
    parser.add_argument(
        "--at",
        type=_non_negative,
        metavar="N",
        help="copy only the first N entries (default: every entry)",
    )

    _command(
        commands,
        "catalog",
        _catalog,
        help="print the persistence catalog as JSON",
        description="Every durable entry type this version writes — its name, version, "
        "declaring type, source location and JSON Schema — as JSON.",
        example="session-schedule catalog",
    )

    parser = _command(
        commands,
        "tools",
        _tools,
        help="print the schedule tool definitions as JSON",
        description="The definitions of schedule_create, schedule_list and schedule_delete, "
        "with the default limits, in the format a model API or protocol expects: OpenAI "
        "strict function tools for Chat Completions (openai) or the Responses API "
        "(openai-responses), Anthropic tools (anthropic; anthropic-strict adds strict: true and "
        "drops the keywords strict mode rejects) or MCP tools.",
        example="session-schedule tools --format anthropic",
    )
    parser.add_argument(
        "--format",
        choices=TOOL_FORMATS,
        default="openai",
        help="the tool format (default: openai)",
    )


# -- sessions --------------------------------------------------------------------------------


@final
class SessionSummary(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One row of ``sessions``; the JSON form uses the header's camelCase names."""

    id: str
    created_at: str | None
    """``None`` when even the header could not be read (see ``problem``)."""
    parent_id: str | None
    seed_length: int | None
    entries: int | None
    """``None`` when the log could not be read (see ``problem``)."""
    active_reminders: int | None
    next_target: str | None
    """The earliest active target, canonical UTC; ``None`` when nothing is active."""
    problem: str | None
    """Why the log could not be read or folded, or ``None`` when it is sound."""


async def summarize(store: SessionStore) -> list[SessionSummary]:
    """A summary of every session in ``store``, by creation instant, then id."""
    summaries: list[SessionSummary] = []
    headers, unreadable = await store.scan()
    for header in headers:
        entries = active = next_target = problem = None
        try:
            snapshot = await store.read(header.id)
            state = fold_snapshot(snapshot)
        except SessionNotFound:
            continue  # deleted since it was listed
        except (SessionCorrupt, ScheduleError) as error:
            problem = str(error)
        else:
            entries, active = len(snapshot.entries), len(state)
            wakeup = next_wakeup(state)
            next_target = None if wakeup is None else format_instant(wakeup)
        summaries.append(
            SessionSummary(
                id=header.id,
                created_at=header.created_at,
                parent_id=header.parent_id,
                seed_length=header.seed_length,
                entries=entries,
                active_reminders=active,
                next_target=next_target,
                problem=problem,
            )
        )
    summaries.extend(
        SessionSummary(
            id=problem.session_id,
            created_at=None,
            parent_id=None,
            seed_length=None,
            entries=None,
            active_reminders=None,
            next_target=None,
            problem=str(problem),
        )
        for problem in unreadable
    )
    return summaries


def _sessions(arguments: argparse.Namespace) -> int:
    location = store_location(arguments)
    summaries = _with_store(arguments, summarize)
    if arguments.json:
        _print_json(summaries)
        return EXIT_OK
    with output() as console:
        if not summaries:
            console.print(Text(f"no sessions in {store_url(location)}"))
            return EXIT_OK
        now = format_instant(clock.now())
        table = Table("id", "created (UTC)", "parent", "entries", "active", "next target")
        for summary in summaries:
            parent = (
                Text("—", style="dim")
                if summary.parent_id is None
                else Text(f"{summary.parent_id} at {summary.seed_length}")
            )
            if summary.problem is not None:
                entries, active, target = Text("?"), Text("corrupt", style="bold red"), Text("")
            else:
                entries, active = Text(str(summary.entries)), Text(str(summary.active_reminders))
                target = _target_text(summary.next_target, now)
            created = Text(summary.created_at or "?")
            table.add_row(Text(summary.id), created, parent, entries, active, target)
        console.print(table)
        for summary in summaries:
            if summary.problem is not None:
                console.print(_untrusted(summary.problem, style="red"))
        return EXIT_OK


def _target_text(target: str | None, now: str) -> Text:
    if target is None:
        return Text("—", style="dim")
    if target <= now:
        return Text.assemble(target, (" (overdue)", "bold yellow"))
    return Text(target)


# -- show ------------------------------------------------------------------------------------


def _show(arguments: argparse.Namespace) -> int:
    snapshot = _read(arguments)
    header = snapshot.header
    replay = _Replay(snapshot.header)
    table = Table("#", "time (UTC)", "entry")
    for entry in snapshot.entries:
        time, body = replay.describe(entry)
        inherited = entry.position < header.seed_length
        table.add_row(Text(str(entry.position), style="dim" if inherited else ""), time, body)
    with output() as console:
        console.print(
            Text.assemble(
                "session ",
                (header.id, "bold"),
                f", created {header.created_at}, {len(snapshot.entries)} entries",
            )
        )
        if header.parent_id is not None:
            console.print(
                Text(
                    f"forked from {header.parent_id}: entries before {header.seed_length} are "
                    "inherited history; none of the parent's reminders are active here",
                    style="dim",
                )
            )
        console.print(table if snapshot.entries else Text("no entries", style="dim"))
        if replay.problem is None:
            count = len(replay.state)
            console.print(
                Text(f"{count} active reminder{'' if count == 1 else 's'} after the last entry")
            )
    if replay.problem is not None:
        return fail(str(replay.problem), exit_code_for(replay.problem))
    return EXIT_OK


@final
class _Replay:
    """Describes a session's entries in order, folding its schedule changes along the way.

    The fold says what each change did (an Every dispatch's next target, for instance). The
    first change the fold rejects is kept in ``problem`` and marked; later changes are still
    described, but no longer folded.
    """

    def __init__(self, header: SessionHeader) -> None:
        self.state = ScheduleFold(session=header.id)
        self.problem: ScheduleError | None = None
        self._seed_length = header.seed_length
        # Every record ever created, inherited ones included, to name a change's kind.
        self._records: dict[ScheduleId, ScheduleRecord] = {}

    def describe(self, entry: LogEntry) -> tuple[Text, Cell]:
        """The entry's time (blank when it has none) and what it says or did."""
        prefix = Text("inherited · ", style="dim italic")
        if entry.position >= self._seed_length:
            prefix = Text()
        payload = entry.payload
        if entry.type == MESSAGE_ENTRY_TYPE and isinstance(payload, MessageEntry):
            return Text(payload.at), _message_body(payload, prefix)
        if entry.type == CHANGE_EVENT_TYPE and isinstance(payload, CHANGE_CLASSES):
            time = ""
            if isinstance(payload, ScheduleDispatchChange) and isinstance(payload.accepted_at, str):
                time = payload.accepted_at
            return Text(time), self._change(entry.position, payload, prefix)
        text = _untrusted(f"{entry.type} {_JSON.encode(payload).decode()}")
        return Text(), Text.assemble(prefix, text)

    def _change(self, position: int, change: ScheduleChange, prefix: Text) -> Cell:
        line = _change_line(change, self._records.get(_change_id(change)), prefix)
        if isinstance(change, ScheduleCreateChange):
            self._records[change.schedule.id] = change.schedule
        if self.problem is not None:
            return line
        try:
            if position < self._seed_length:
                self.state.note_inherited(change)
                return line
            self.state.apply(change, position=position)
        except ScheduleError as error:
            self.problem = error
            return Group(line, _untrusted(f"✗ rejected: {error.message}", style="bold red"))
        if isinstance(change, ScheduleDispatchChange):
            following = self.state.get(change.id)
            if not isinstance(change.accepted_at, str):
                line.append("; one-shot delivered, ended")
            elif following is None:
                line.append("; ended (no later target fits in year 9999)")
            else:
                line.append(f"; next target {following.scheduled_at}")
        return line


def _change_id(change: ScheduleChange) -> ScheduleId:
    if isinstance(change, ScheduleCreateChange):
        return change.schedule.id
    return change.id


def _message_body(message: MessageEntry, prefix: Text) -> Cell:
    match message.role, message.origin:
        case "user", "followup":
            label = Text.assemble(
                ("user", "bold"), " · ", ("FOLLOW-UP", "bold magenta"), " queued by Schedule"
            )
        case "tool", _:
            label = Text.assemble(("tool", "bold"), " · result of ")
            label.append_text(_untrusted(str(message.tool_call_id)))
        case role, origin:
            label = Text.assemble((role, "bold"), f" · {origin}")
    parts: list[Cell] = [Text.assemble(prefix, label)]
    if message.content:
        parts.append(_untrusted(message.content))
    if not isinstance(message.tool_calls, msgspec.UnsetType):
        for call in message.tool_calls:
            line = Text("→ call ", style="cyan")
            line.append_text(_untrusted(f"{call.name}({call.arguments})  [{call.id}]"))
            parts.append(line)
    return Group(*parts)


def _change_line(change: ScheduleChange, record: ScheduleRecord | None, prefix: Text) -> Text:
    """What ``change`` says, on one line; ``record`` is the record it names, when known."""
    line = Text.assemble(prefix, ("schedule/change ", "dim"))
    match change:
        case ScheduleCreateChange(schedule=created):
            line.append("create ", style="bold green")
            line.append(f"{created.id} {_rule(created)}, target {created.scheduled_at}: ")
            line.append_text(_untrusted(_quote(created.prompt)))
        case ScheduleDeleteChange():
            line.append("delete ", style="bold red")
            line.append(f"{change.id}{_kind_suffix(record)}")
        case ScheduleDispatchChange():
            line.append("dispatch ", style="bold blue")
            line.append(f"{change.id}{_kind_suffix(record)}")
            if isinstance(change.accepted_at, str):
                line.append(f", acceptedAt {change.accepted_at}")
        case ScheduleUpdateChange(schedule=updated):
            line.append("update ", style="bold yellow")
            line.append(f"{updated.id} {_rule(updated)}, target {updated.scheduled_at}: ")
            line.append_text(_untrusted(_quote(updated.prompt)))
        case SchedulePauseChange():
            line.append("pause ", style="bold yellow")
            line.append(f"{change.id}{_kind_suffix(record)}")
        case ScheduleResumeChange():
            line.append("resume ", style="bold yellow")
            line.append(f"{change.id}{_kind_suffix(record)}, acceptedAt {change.accepted_at}")
        case ScheduleSnoozeChange():
            line.append("snooze ", style="bold yellow")
            line.append(f"{change.id}{_kind_suffix(record)} until {change.until}")
        case ScheduleMissChange():
            line.append("miss ", style="bold magenta")
            line.append(
                f"{change.id}{_kind_suffix(record)}, occurrence {change.scheduled_at}, "
                f"acceptedAt {change.accepted_at}"
            )
        case _:
            assert_never(change)
    return line


def _kind_suffix(record: ScheduleRecord | None) -> str:
    return "" if record is None else f" ({_rule(record)})"


def _quote(text: str) -> str:
    return _JSON.encode(text).decode()


# -- list ------------------------------------------------------------------------------------


def _list(arguments: argparse.Namespace) -> int:
    snapshot = _read(arguments)
    state = fold_snapshot(snapshot)
    now = clock.now()
    history = OccurrenceLog(
        seed_length=snapshot.header.seed_length, session=snapshot.header.id, keep=False
    )
    history.feed(snapshot.entries)
    views = [
        with_runs(make_view(record, now, state.status(record.id)), history)
        for record in state.ordered()
    ]
    # Every reminder, on one page: the operator reads the whole list.
    result = ListResult(
        ok=True, now=format_instant(now), schedules=views, next_cursor=None, total=len(views)
    )
    if arguments.json:
        _print_json(result)
        return EXIT_OK
    with output() as console:
        count = len(result.schedules)
        console.print(
            Text(
                f"session {snapshot.header.id} at {result.now}: "
                f"{count} active reminder{'' if count == 1 else 's'}"
            )
        )
        if not result.schedules:
            return EXIT_OK
        table = Table(
            "id", "rule", "target (UTC)", "state", "delivery", "prompt", wrapping=("rule", "state")
        )
        for view in result.schedules:
            shown: Cell = Text(view.state, style="bold yellow" if view.state == "overdue" else "")
            if words := standing(view):  # a SPEC 11 reminder's standing, under its state
                shown = Group(shown, Text(words, style="dim"))
            table.add_row(
                Text(view.id),
                Text(_rule(view)),
                Text(view.scheduled_at),
                shown,
                Text(view.delivery_mode),
                _untrusted(view.prompt),
            )
        console.print(table)
        return EXIT_OK


# -- timeline --------------------------------------------------------------------------------


@final
class Until(msgspec.Struct, frozen=True, kw_only=True):
    """The end of a timeline window: a duration from now, or an absolute instant."""

    text: str
    """As the user wrote it."""
    milliseconds: int
    """The duration, or the instant."""
    relative: bool
    """Whether ``milliseconds`` is a duration from now."""

    def resolve(self, now: Instant) -> Instant:
        """The window's end as seen at ``now`` (a duration reaching past year 9999 stops there)."""
        if not self.relative:
            return Instant(self.milliseconds)
        return Instant(min(now + self.milliseconds, MAX_INSTANT))


def _timeline(arguments: argparse.Namespace) -> int:
    now = clock.now()
    until_argument: Until = arguments.until
    zone: zoneinfo.ZoneInfo = arguments.zone
    until = until_argument.resolve(now)
    if until <= now:
        return fail(
            f"--until {until_argument.text} is not after now ({format_instant(now)}); "
            "give a later instant or a duration such as 36h",
            EXIT_USAGE,
        )
    snapshot = _read(arguments)
    folded = fold_snapshot(snapshot)
    timeline = build_timeline(
        folded.ordered(),
        now=now,
        until=until,
        zone=zone,
        limit=arguments.limit,
        statuses=folded.statuses(),
    )
    if arguments.json:
        _print_json(timeline)
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
            if occurrence.state == "overdue":
                state.stylize("bold yellow")
                if occurrence.skipped:
                    state.append(f" (skips {occurrence.skipped} missed)")
            table.add_row(
                Text(occurrence.local),
                Text(occurrence.id),
                Text(occurrence.kind),
                state,
                _untrusted(occurrence.prompt),
            )
        console.print(table)
        if any(occurrence.state == "overdue" for occurrence in timeline.occurrences):
            console.print(
                Text(
                    "overdue reminders are delivered once, the next time the session is open live "
                    "(a recurring one with its latest due occurrence only)",
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


# -- check -----------------------------------------------------------------------------------


def _check(arguments: argparse.Namespace) -> int:
    inspection = _with_store(arguments, lambda store: _inspect(store, arguments.session))
    snapshot = inspection.snapshot
    state = fold_snapshot(snapshot)
    header, entries = snapshot
    transcript = transcript_check(entries)
    if transcript.stray is not None:
        return fail(
            f"session {header.id} has a transcript no strict model endpoint accepts: "
            f"{transcript.stray.message}",
            EXIT_CORRUPT,
        )
    derived = inspection.derived
    if derived:
        return fail(
            f"session {header.id} has derived files that contradict its log: " + "; ".join(derived),
            EXIT_CORRUPT,
        )
    messages = sum(1 for entry in entries if entry.type == MESSAGE_ENTRY_TYPE)
    changes = sum(1 for entry in entries if entry.type == CHANGE_EVENT_TYPE)
    parts = [
        (
            f"session {header.id} is sound: {len(entries)} entries "
            f"({messages} messages, {changes} schedule changes), "
            f"{len(state)} active reminder{'' if len(state) == 1 else 's'}"
        )
    ]
    if header.parent_id is not None:
        parts.append(f"forked from {header.parent_id} at entry {header.seed_length}")
    if inspection.torn_lines:
        lines = inspection.torn_lines
        parts.append(
            f"the file ends in {inspection.torn_bytes} bytes ({lines} line"
            f"{'' if lines == 1 else 's'}) written after the last barrier that do not verify "
            "(a torn tail: appends a crash cut short or lost), which are ignored and will be cut "
            "when the session is next opened"
        )
    elif inspection.torn_bytes:
        parts.append(
            "the file ends in an incomplete line (an append cut short), which is ignored and "
            "will be cut when the session is next opened"
        )
    parts.extend(
        f"warning: {interruption.message} (a call interrupted by a stop or a crash; the model "
        "is told it was interrupted, and resuming the session records that)"
        for interruption in transcript.interrupted
    )
    print("; ".join(parts))
    if arguments.overdue is not None:
        late = overdue_lines(state, clock.now(), arguments.overdue)
        for line in late:
            print(line)
        if late:
            return EXIT_REJECTED
    return EXIT_OK


@final
class _Inspection(msgspec.Struct, frozen=True, kw_only=True):
    """What ``check`` reports on: the snapshot, and a file store's torn tail."""

    snapshot: SessionSnapshot
    torn_bytes: int = 0
    torn_lines: int = 0
    derived: tuple[str, ...] = ()
    """What the store's derived files (checkpoints) say that the log contradicts."""


async def _inspect(store: SessionStore, session_id: str) -> _Inspection:
    """The session as storage holds it; a store that keeps a file per session (JSONL) also says
    what a torn tail holds and whether its derived files agree with the log."""
    inspect = getattr(store, "inspect", None)
    if inspect is None:
        return _Inspection(snapshot=await store.read(session_id))
    found = await inspect(session_id)
    problems = getattr(store, "derived_problems", None)
    derived = () if problems is None else tuple(await problems(found.snapshot.header.id))
    return _Inspection(
        snapshot=found.snapshot,
        torn_bytes=found.torn_bytes,
        torn_lines=found.torn_lines,
        derived=derived,
    )


def _overdue_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


# -- fork ------------------------------------------------------------------------------------


async def fork_session(store: SessionStore, parent: str, at: int | None, now: Instant) -> SessionId:
    """Fork ``parent`` (its first ``at`` entries, or all) and return the new id, closed again.

    Raises ``ValueError`` — a ``ForkCutError`` when the cut would part a tool call from its
    results, or when ``at`` is beyond the parent's entries.
    """
    check_fork_cut(parent, (await store.read(parent)).entries, at)
    async with await store.fork(parent, at=at, now=now) as handle:
        return handle.id


def _fork(arguments: argparse.Namespace) -> int:
    try:
        child = _with_store(
            arguments,
            lambda store: fork_session(store, arguments.session, arguments.at, clock.now()),
        )
    except ValueError as error:  # --at beyond the parent's entries, or through a tool call
        return fail(str(error), EXIT_USAGE)
    print(child)
    return EXIT_OK


# -- catalog and tools -----------------------------------------------------------------------


def _catalog(_arguments: argparse.Namespace) -> int:
    print(msgspec.json.format(CATALOG.to_json(), indent=2).decode())
    return EXIT_OK


def _tools(arguments: argparse.Namespace) -> int:
    definitions = tool_definitions()
    tool_format: ToolFormat = arguments.format
    match tool_format:
        case "openai":
            tools = openai_tools(definitions)
        case "openai-responses":
            tools = openai_tools(definitions, shape="responses")
        case "anthropic":
            tools = anthropic_tools(definitions)
        case "anthropic-strict":
            tools = anthropic_tools(definitions, strict=True)
        case "mcp":
            tools = mcp_tools(definitions)
        case _:
            assert_never(tool_format)
    _print_json(tools)
    return EXIT_OK


# -- shared ----------------------------------------------------------------------------------


def fold_snapshot(snapshot: SessionSnapshot) -> ScheduleFold:
    """The schedule state of a snapshot: its changes folded as the live owner folds them.

    Raises ``ScheduleError("corrupt_schedule_log")`` naming the first change that breaks a rule.
    """
    header, entries = snapshot
    return fold(schedule_changes(entries), seed_length=header.seed_length, session=header.id)


def _read(arguments: argparse.Namespace) -> SessionSnapshot:
    return read_session(arguments, arguments.session)


def _with_store(arguments: argparse.Namespace, work: Callable[[SessionStore], Awaitable[_T]]) -> _T:
    """What ``work`` returns on the command's store (``--store``), closed afterwards."""
    location = store_location(arguments)

    async def run() -> _T:
        async with opened_store(location) as store:
            return await work(store)

    return asyncio.run(run())


def _rule(record: ScheduleRecord) -> str:
    match record:
        case AfterScheduleRecord():
            return f"after {_seconds(record.after_seconds)}"
        case AtScheduleRecord():
            return "at"
        case EveryScheduleRecord():
            return f"every {_seconds(record.every_seconds)}"
        case DailyScheduleRecord():
            return f"daily {daily_rule_text(record)}"
        case CalendarScheduleRecord():
            return f"calendar {calendar_rule_text(record)}"
        case _:
            assert_never(record)


def _seconds(seconds: int) -> str:
    """``90s``, ``15m``, ``2h``, ``7d``: the largest unit that divides evenly."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _untrusted(text: str, *, style: str = "") -> Text:
    """``text`` exactly as written, never read as markup, with control and other hidden
    characters made visible (:func:`~session_schedule.core.visible.reveal`)."""
    return Text(reveal(text), style=style)


def _print_json(value: object) -> None:
    """``value`` as indented JSON, hidden characters in its strings written as JSON escapes (the
    same data, but a person reading it sees them)."""
    print(frame_escape(msgspec.json.format(_JSON.encode(value), indent=2).decode()))


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: Handler,
    *,
    help: str,  # noqa: A002 - argparse's name
    description: str,
    example: str,
) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        name,
        help=help,
        description=description,
        epilog=f"example: {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    return parser


def _session_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help=_SESSION_HELP)


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


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
    return int(text)


def _non_negative(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number (0 or more), got {text!r}")
    return int(text)
