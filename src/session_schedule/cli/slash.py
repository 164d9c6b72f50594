"""Slash commands: what a person types at the chat prompt, turned into the tools' real arguments.

In offline mode the person drives the Schedule tools directly; with a model they may too. This
module only *reads* a line — it runs nothing and never raises: every line becomes one of

- :class:`Say` — a plain message for the conversation (``//…`` sends a line that starts with ``/``);
- :class:`CallTool` — a tool name and the exact JSON arguments to send it;
- :class:`Local` — ``/help``, ``/quotas`` or ``/quit``, handled by the chat itself;
- :class:`SetQuota` — one of the session's quotas, as the person set it (``/turns-per-day``,
  ``/quiet-hours``, ``/active-reminders``);
- :class:`Usage` — a line that could not be read, with a message and the usage to show.

Only the *shape* is checked here. Values the tool judges — ``after 0s``, ``every 1m`` (below the
5-minute floor), ``at 2026-12-01T09:00:00`` (no offset), an unknown zone, ``Mon`` for a weekday —
are sent as typed so the person sees the tool's real error, exactly as a model would. After
``daily TIME ZONE``, the words made only of day names and commas (``mon wed fri``,
``mon,wed,fri``) are the weekdays; the next word starts the prompt. After
``calendar RULE TIME ZONE``, a word of the form ``YYYY-MM-DD`` is the start date; anything else
starts the prompt.

What could be read two ways is refused, with a message that shows what the line would have
created: a number without a unit (``in 5 call mom``), a day written out (``daily 09:00 UTC
sunday walk``). A prompt in double quotes is taken as it is, so ``in 10m "3 calls"`` works.
:func:`read_duration` is the one reading of a duration, for every command that takes one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, assert_never, final

from session_schedule.core.prompts import trim
from session_schedule.core.quiet import QuietHours, parse_quiet_hours

_COMMANDS_COLUMN: Final = 32
"""Where a command's description starts; a longer command puts it on the next line."""
_COMMANDS_TABLE: Final = (
    ("/create in 5 minutes <prompt>", "once, after a delay: 90s, 10m, 2h30m, 1 day"),
    ("/create after 90s <prompt>", "the same as in"),
    ("/create every 10m <prompt>", "repeatedly, at a fixed rate (at least 5 minutes)"),
    ("/create at 2026-12-01T09:00:00+09:00 <prompt>", "once, at an RFC 3339 time with an offset"),
    ("/create at 2026-12-01 09:00 Asia/Tokyo <prompt>", "once, at a local time in a zone (or UTC)"),
    ("/create daily 09:00 Asia/Tokyo <prompt>", "every day, at a local time in a zone"),
    ("/create daily 09:00 UTC mon wed fri <prompt>", "on the days listed only (spaces or commas)"),
    (
        "/create calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris <prompt>",
        "on the dates of a calendar rule (an RRULE)",
    ),
    (
        "/create calendar FREQ=WEEKLY;INTERVAL=2 09:00 UTC 2026-12-04 <prompt>",
        "counted from a start date",
    ),
    ("/list", "the active reminders"),
    ("/update sch_1 every 20m [<prompt>]", "a new rule (any /create form), and prompt"),
    ("/update sch_1 prompt <prompt>", "a new prompt; the time does not move"),
    ("/pause sch_1", "stop deliveries until resumed"),
    ("/resume sch_1", "deliver again (from the next occurrence)"),
    ("/snooze sch_1 10m", "make the next delivery 10 minutes from now"),
    ("/snooze sch_1 2026-12-01T09:00:00+09:00", "or at a time (RFC 3339, with an offset)"),
    ("/snooze sch_1 2026-12-01 09:00 Asia/Tokyo", "or at a local time in a zone"),
    ("/delete sch_1", "delete a reminder"),
    ("/quotas", "this session's quotas, and who set each"),
    ("/turns-per-day 20|off|default", "at most 20 reminder turns in any 24 hours"),
    ("/quiet-hours 22:00-07:00 Europe/Paris", "reminders due then wait until they end"),
    ("/quiet-hours off|default", "none, or the program's setting"),
    ("/active-reminders 10|default", "at most 10 reminders active at once"),
    ("/help", "this help"),
    ("/quit", "leave (Ctrl-D too); the session can be resumed"),
)
"""Every command /help lists, by an example of it, and what it does."""


def _commands_table() -> str:
    """The table of commands, no line wider than 80 columns."""
    lines: list[str] = []
    for command, does in _COMMANDS_TABLE:
        shown = f"  {command}"
        if len(shown) + 2 <= _COMMANDS_COLUMN:
            lines.append(shown.ljust(_COMMANDS_COLUMN) + does)
        else:
            lines.extend([shown, " " * _COMMANDS_COLUMN + does])
    return "\n".join(lines)


HELP: Final = f"""\
commands:
{_commands_table()}
A duration is numbers with units, largest first: 90s, 5m, 5 minutes, 2h30m,
1 hour 30 minutes. Put the prompt in double quotes when it starts with a number
or a day name: in 10m "3 calls". Any other line is a message; start it with //
to send a line that begins with /."""

CREATE_USAGE: Final = (
    "/create in 5m|after 90s|every 10m|at 2026-12-01T09:00:00+09:00|at 2026-12-01 09:00 "
    "Asia/Tokyo|daily 09:00 Asia/Tokyo [mon wed fri]|calendar FREQ=MONTHLY;BYDAY=1MO 09:00 "
    "Europe/Paris [2026-12-01] <prompt>"
)
LIST_USAGE: Final = "/list"
DELETE_USAGE: Final = "/delete <id>, such as /delete sch_1"
UPDATE_USAGE: Final = (
    "/update <id> in 5m|after 90s|every 10m|at 2026-12-01T09:00:00+09:00|at 2026-12-01 09:00 "
    "Asia/Tokyo|daily 09:00 Asia/Tokyo [mon wed fri]|calendar FREQ=MONTHLY;BYDAY=1MO 09:00 "
    "Europe/Paris [2026-12-01] [<prompt>], or /update <id> prompt <prompt>"
)
PAUSE_USAGE: Final = "/pause <id>, such as /pause sch_1"
RESUME_USAGE: Final = "/resume <id>, such as /resume sch_1"
SNOOZE_USAGE: Final = (
    "/snooze <id> 10m|1h 30m|2026-12-01T09:00:00+09:00|2026-12-01 09:00 Asia/Tokyo"
)
SNOOZE_FORMS: Final = (
    "a duration such as 10m, 90s, 1h 30m or 2 days, or a time such as "
    "2026-12-01T09:00:00+09:00 or 2026-12-01 09:00 Asia/Tokyo"
)
"""What ``/snooze`` reads after the reminder id, as its messages say it."""
TURNS_PER_DAY_USAGE: Final = "/turns-per-day N|off|default, such as /turns-per-day 20"
QUIET_HOURS_USAGE: Final = (
    "/quiet-hours START-END ZONE|off|default, such as /quiet-hours 22:00-07:00 Europe/Paris"
)
ACTIVE_REMINDERS_USAGE: Final = "/active-reminders N|default, such as /active-reminders 10"
QUOTAS_USAGE: Final = "/quotas"
COMMANDS_USAGE: Final = (
    "/create, /list, /update <id>, /pause <id>, /resume <id>, /snooze <id> 10m, /delete <id>, "
    "/quotas, /turns-per-day N, /quiet-hours START-END ZONE, /active-reminders N, /help, /quit"
)

_MAX_INT64: Final = 2**63 - 1
"""The largest integer the JSON encoder writes; larger durations are refused here."""
_MAX_NUMBER_LENGTH: Final = 40
"""Longer numbers are refused before they are converted (``int`` of a huge string is slow)."""
_UNITS: Final[Mapping[str, int]] = {
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), 604_800),
    **dict.fromkeys(("d", "day", "days"), 86_400),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
}
"""Each unit word a duration may use, lower-case, and its length in seconds."""
_NO_FIXED_LENGTH: Final = frozenset({"mo", "month", "months", "y", "yr", "year", "years"})
"""Units a fixed number of seconds cannot stand for."""
_UNIT_NAMES: Final[Mapping[int, str]] = {
    604_800: "week",
    86_400: "day",
    3_600: "hour",
    60: "minute",
    1: "second",
}
_GLUED: Final = re.compile(r"(?:[0-9]+[a-z]+)+", re.ASCII)
"""A word of numbers with their units attached: ``90s``, ``2h30m``."""
_GLUED_PART: Final = re.compile(r"([0-9]+)([a-z]+)", re.ASCII)
_NUMBER: Final = re.compile(r"[0-9]+", re.ASCII)
_DATE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_CLOCK_TIME: Final = re.compile(r"[0-9]{1,2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?", re.ASCII)
_DAY_NAME: Final = r"(?:mon|tue|wed|thu|fri|sat|sun)"
_DAYS_WORD: Final = re.compile(rf",*{_DAY_NAME}(?:,+{_DAY_NAME})*,*|,+", re.ASCII | re.IGNORECASE)
"""A word of day names and commas, read as (some of) the weekdays, as typed: the tool judges
them (``Sun`` is not one of its names)."""
_DAY_NAMES: Final = re.compile(_DAY_NAME, re.ASCII | re.IGNORECASE)
_DAY_LIKE: Final = re.compile(
    rf"(?:mon|tues?|wednes|thurs?|fri|satur|sun)days?|weekdays?|weekends?|{_DAY_NAME}-{_DAY_NAME}",
    re.ASCII | re.IGNORECASE,
)
"""A word that reads as days but is not a day name the tool takes (``sunday``, ``weekdays``,
``mon-fri``): after the zone, it could be days or the start of the prompt."""
_WORD: Final = re.compile(r"\S+")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Say:
    """A line for the conversation, as typed."""

    text: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class CallTool:
    """A direct call of a Schedule tool with the arguments a model would send."""

    name: Literal["schedule_create", "schedule_list", "schedule_delete", "schedule_update"]
    arguments: Mapping[str, object]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Local:
    """A command the chat handles itself."""

    command: Literal["help", "quit", "quotas"]


QuotaValue: TypeAlias = int | QuietHours | Literal["default"] | None
"""A quota as typed: the quota, ``None`` for ``off``, or ``"default"`` for the program's."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SetQuota:
    """One of the session's quotas, as the person set it."""

    name: Literal["turns_per_day", "quiet_hours", "max_active"]
    value: QuotaValue


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """A line that could not be read: what is wrong, and how to write it."""

    message: str
    usage: str


Command: TypeAlias = Say | CallTool | Local | SetQuota | Usage


def parse_line(line: str) -> Command:
    """What ``line`` asks for. Never raises."""
    # Unicode white space only (``str.strip`` also drops U+001C to U+001F, control characters
    # the tool refuses in a prompt, which it must see to say so).
    text = trim(line)
    if text.startswith("//"):
        return Say(text=text[1:])
    if not text.startswith("/"):
        return Say(text=text)
    name, rest = _split(text)
    match name:
        case "/create":
            return _create(rest)
        case "/list":
            if rest:
                return Usage(message="/list takes no arguments", usage=LIST_USAGE)
            return CallTool(name="schedule_list", arguments={})
        case "/delete":
            schedule_id, extra = _split(rest)
            if not schedule_id or extra:
                return Usage(message="/delete takes one reminder id", usage=DELETE_USAGE)
            return CallTool(name="schedule_delete", arguments={"id": schedule_id})
        case "/update":
            return _update(rest)
        case "/pause" | "/resume":
            schedule_id, extra = _split(rest)
            usage = PAUSE_USAGE if name == "/pause" else RESUME_USAGE
            if not schedule_id or extra:
                return Usage(message=f"{name} takes one reminder id", usage=usage)
            return CallTool(
                name="schedule_update", arguments={"id": schedule_id, "paused": name == "/pause"}
            )
        case "/snooze":
            return _snooze(rest)
        case "/quotas":
            if rest:
                return Usage(message="/quotas takes no arguments", usage=QUOTAS_USAGE)
            return Local(command="quotas")
        case "/turns-per-day" | "/active-reminders":
            return _count_quota(name, rest)
        case "/quiet-hours":
            return _quiet_hours(rest)
        case "/help" | "/?":
            return Local(command="help")
        case "/quit" | "/exit":
            return Local(command="quit")
        case _:
            return Usage(message=f"there is no command {name}", usage=COMMANDS_USAGE)


def _count_quota(name: str, rest: str) -> SetQuota | Usage:
    """``/turns-per-day N|off|default`` or ``/active-reminders N|default``."""
    turns = name == "/turns-per-day"
    usage = TURNS_PER_DAY_USAGE if turns else ACTIVE_REMINDERS_USAGE
    quota: Literal["turns_per_day", "max_active"] = "turns_per_day" if turns else "max_active"
    word = rest.strip().lower()
    if word == "default":
        return SetQuota(name=quota, value="default")
    if word == "off" and turns:
        return SetQuota(name=quota, value=None)
    if not _NUMBER.fullmatch(word) or len(word) > _MAX_NUMBER_LENGTH:
        what = "a number, off or default" if turns else "a number or default"
        return Usage(message=f"{name} takes {what}", usage=usage)
    return SetQuota(name=quota, value=int(word))


def _quiet_hours(rest: str) -> SetQuota | Usage:
    """``/quiet-hours START-END ZONE|off|default``."""
    word = rest.strip()
    if word.lower() in {"off", "default"}:
        return SetQuota(name="quiet_hours", value=None if word.lower() == "off" else "default")
    try:
        return SetQuota(name="quiet_hours", value=parse_quiet_hours(word))
    except ValueError as error:
        return Usage(message=str(error), usage=QUIET_HOURS_USAGE)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Duration:
    """A duration read from the start of a line, and what follows it."""

    seconds: int
    rest: str
    """The text after the duration, its inner spacing kept (empty when nothing follows)."""


DurationProblemKind: TypeAlias = Literal[
    "missing",
    "unreadable",
    "no_fixed_length",
    "out_of_order",
    "repeated_unit",
    "bare_number",
    "too_long",
]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class DurationProblem:
    """Why the start of a line is not a duration."""

    kind: DurationProblemKind
    word: str
    """The word at fault (empty when ``kind`` is ``missing``); for ``out_of_order`` and
    ``repeated_unit``, the duration up to the part at fault (``30m 2h``)."""
    seconds: int
    """For ``bare_number``: the seconds read before the number, plus the number as seconds —
    what a reading of the number as seconds would give."""
    rest: str
    """For ``bare_number``: the text after the number."""

    @property
    def message(self) -> str:
        """One sentence saying what is wrong and how to write a duration."""
        match self.kind:
            case "missing":
                return "give a duration, such as 90s, 10m or 5 minutes"
            case "unreadable":
                return (
                    f"{self.word!r} is not a duration; write numbers with units, largest first, "
                    "such as 90s, 10m, 5 minutes, 2h30m or 1 day"
                )
            case "no_fixed_length":
                return (
                    f"{self.word!r} is not a duration: months and years have no fixed length; "
                    "write weeks or days, such as 4w or 30d"
                )
            case "out_of_order":
                return (
                    f"{self.word!r} has its units out of order; write them largest first, such "
                    "as 2h30m or 1 hour 30 minutes"
                )
            case "repeated_unit":
                return (
                    f"{self.word!r} gives a unit twice; write each unit once, largest first, "
                    "such as 2h30m or 1 hour 30 minutes"
                )
            case "bare_number":
                return (
                    f"{self.word!r} has no unit; write {self.word}s, {self.word}m or "
                    f"{self.word}h, or quote a prompt that starts with a number"
                )
            case "too_long":
                return "that duration is too long"
            case _:
                assert_never(self.kind)


def read_duration(text: str) -> Duration | DurationProblem:
    """The duration at the start of ``text``, and the text after it. Never raises.

    A duration is one or more numbers, each with its unit — attached (``90s``, ``2h30m``) or as
    the next word (``5 minutes``, ``1 hour 30 minutes``, ``an hour``) — largest unit first, each
    unit once; ``and`` may join two parts. Units: ``w``/``week``, ``d``/``day``, ``h``/``hr``/
    ``hour``, ``m``/``min``/``minute``, ``s``/``sec``/``second`` (plurals too, any case). Zero is
    read (whether a delay is allowed is the tool's decision). A number without a unit is
    ambiguous and refused (``bare_number``), also right after a duration: ``2h 30`` could be
    ``2h30m``.
    """
    words = [(found.group(), found.end()) for found in _WORD.finditer(text)]
    seconds = 0
    smallest: int | None = None
    position = 0
    end = 0

    def add(number: str, unit: str) -> DurationProblemKind | None:
        """Add ``number`` of ``unit``; ``None`` when it can be, else why not."""
        nonlocal seconds, smallest
        if unit.lower() in _NO_FIXED_LENGTH:
            return "no_fixed_length"
        size = _UNITS.get(unit.lower())
        if size is None:
            return "unreadable"
        if smallest is not None and size >= smallest:
            return "repeated_unit" if size == smallest else "out_of_order"
        seconds += int(number) * size
        smallest = size
        return None

    def refused(kind: DurationProblemKind, word: str, word_end: int) -> DurationProblem:
        """The problem ``kind`` with ``word``: for a unit in the wrong place, the duration up to
        its end (``30m 2h``), so that the message shows the order it is in."""
        if kind in {"out_of_order", "repeated_unit"}:
            word = text[:word_end].strip()
        return DurationProblem(kind=kind, word=word, seconds=0, rest="")

    while position < len(words):
        word, word_end = words[position]
        following = words[position + 1][0] if position + 1 < len(words) else ""
        if any(len(number) > _MAX_NUMBER_LENGTH for number in _NUMBER.findall(word)):
            return DurationProblem(kind="too_long", word=word, seconds=0, rest="")
        lowered = word.lower()
        if _GLUED.fullmatch(lowered):
            for number, unit in _GLUED_PART.findall(lowered):
                if (problem := add(number, unit)) is not None:
                    return refused(problem, word, word_end)
            position, end = position + 1, word_end
            continue
        if _NUMBER.fullmatch(word) or (lowered in {"a", "an"} and smallest is None):
            number = "1" if lowered in {"a", "an"} else word
            if following.lower() in _UNITS or following.lower() in _NO_FIXED_LENGTH:
                following_end = words[position + 1][1]
                if (problem := add(number, following)) is not None:
                    return refused(problem, f"{word} {following}", following_end)
                position, end = position + 2, following_end
                continue
            if lowered in {"a", "an"}:
                break
            return DurationProblem(
                kind="bare_number",
                word=word,
                seconds=seconds + int(word),
                rest=text[word_end:].strip(),
            )
        if lowered == "and" and smallest is not None and _starts_a_part(words[position + 1 :]):
            position += 1
            continue
        break
    if smallest is None:
        first = words[0][0] if words else ""
        kind: DurationProblemKind = "unreadable" if first else "missing"
        return DurationProblem(kind=kind, word=first, seconds=0, rest="")
    if seconds > _MAX_INT64:
        return DurationProblem(kind="too_long", word=text[:end].strip(), seconds=0, rest="")
    return Duration(seconds=seconds, rest=trim(text[end:]))


def _starts_a_part(words: list[tuple[str, int]]) -> bool:
    """Whether ``words`` start with a number and its unit."""
    if not words:
        return False
    first = words[0][0].lower()
    if _GLUED.fullmatch(first):
        return True
    return bool(_NUMBER.fullmatch(first)) and len(words) > 1 and words[1][0].lower() in _UNITS


def spoken_duration(seconds: int) -> str:
    """``seconds`` in words, largest unit first: ``1 hour 30 minutes``, ``5 seconds``."""
    if seconds == 0:
        return "0 seconds"
    parts: list[str] = []
    for size, name in _UNIT_NAMES.items():
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {name}" + ("" if count == 1 else "s"))
    return " ".join(parts)


def _update(text: str) -> Command:
    schedule_id, rest = _split(text)
    if not schedule_id or not rest:
        return Usage(message="/update needs a reminder id and what to change", usage=UPDATE_USAGE)
    word, prompt = _split(rest)
    if word.lower() == "prompt":
        prompt = _unquoted(prompt)
        if not prompt:
            return Usage(
                message=f"/update {schedule_id} prompt: the new prompt is missing",
                usage=UPDATE_USAGE,
            )
        return CallTool(name="schedule_update", arguments={"id": schedule_id, "prompt": prompt})
    created = _create(rest, making=_Making(updating=schedule_id))
    if isinstance(created, Usage):
        return Usage(message=created.message, usage=UPDATE_USAGE)
    if not isinstance(created, CallTool):
        return Usage(message="/update: give a rule or a prompt", usage=UPDATE_USAGE)
    return CallTool(name="schedule_update", arguments={"id": schedule_id, **created.arguments})


def _snooze(text: str) -> Command:
    schedule_id, rest = _split(text)
    if not schedule_id or not rest:
        return Usage(message=f"/snooze takes a reminder id and {SNOOZE_FORMS}", usage=SNOOZE_USAGE)
    snooze: dict[str, object]
    if _DATE.match(rest):
        when, extra = _split(rest)
        if _DATE.fullmatch(when):
            # The local form, read as /create at reads it: DATE TIME ZONE.
            return _snooze_local(schedule_id, when, extra)
        if extra:
            return _snooze_extra(when, extra)
        snooze = {"until": when}
    else:
        read = read_duration(rest)
        if not isinstance(read, Duration):
            return Usage(message=_snooze_problem(read), usage=SNOOZE_USAGE)
        if read.rest:
            return _snooze_extra(rest[: len(rest) - len(read.rest)].strip(), read.rest)
        snooze = {"after_seconds": read.seconds}
    return CallTool(name="schedule_update", arguments={"id": schedule_id, "snooze": snooze})


def _snooze_local(schedule_id: str, date: str, text: str) -> Command:
    """``/snooze <id> DATE TIME ZONE``: until that local time, the tool resolving it as it
    resolves ``at`` (a gap and an overlap are the tool's to judge)."""
    clock, rest = _split(text)
    zone, extra = _split(rest)
    if not clock or not zone:
        return Usage(
            message=f"/snooze {schedule_id} {date}: give the time and the time zone too, such as "
            f"{date} 09:00 Asia/Tokyo (or UTC), or an RFC 3339 time such as {date}T09:00:00+09:00",
            usage=SNOOZE_USAGE,
        )
    if extra:
        return _snooze_extra(f"{date} {clock} {zone}", extra)
    until = {"date": date, "time": clock, "time_zone": zone}
    return CallTool(
        name="schedule_update", arguments={"id": schedule_id, "snooze": {"until": until}}
    )


def _snooze_problem(problem: DurationProblem) -> str:
    """Why ``/snooze`` cannot read its duration, in the words of a command that takes no
    prompt."""
    match problem.kind:
        case "bare_number":
            number = problem.word
            return (
                f"/snooze: {number!r} has no unit; write {number}s, {number}m or {number}h "
                f"(/snooze takes {SNOOZE_FORMS})"
            )
        case "missing" | "unreadable":
            return f"/snooze: {problem.word!r} is not a duration or a time; give {SNOOZE_FORMS}"
        case "no_fixed_length" | "out_of_order" | "repeated_unit" | "too_long":
            return f"/snooze: {problem.message}"
        case _:
            assert_never(problem.kind)


def _snooze_extra(when: str, extra: str) -> Usage:
    """``/snooze`` with words after its duration or time: it takes no prompt."""
    return Usage(
        message=f"/snooze: {extra!r} follows {when!r}; /snooze takes no prompt, only "
        f"{SNOOZE_FORMS}",
        usage=SNOOZE_USAGE,
    )


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class _Making:
    """Whose words a rule's messages are in: ``/create`` making a reminder, or ``/update``
    changing the reminder ``updating`` (whose prompt is then optional)."""

    updating: str | None = None

    @property
    def line(self) -> str:
        """The start of the line as typed, up to the rule."""
        return "/create" if self.updating is None else f"/update {self.updating}"

    def would(self, what: str, prompt: str) -> str:
        """What the line would do, read as typed: ``what`` is the rule (``every 10 seconds``)."""
        if self.updating is None:
            made = f"create a reminder {what}"
            return f"{made} with the prompt {prompt!r}" if prompt else made
        changed = f"change {self.updating} into a reminder {what}"
        return (
            f"{changed} with the prompt {prompt!r}" if prompt else f"{changed}, keeping its prompt"
        )


_CREATING: Final = _Making()


def _create(text: str, *, making: _Making = _CREATING) -> Command:
    when, rest = _split(text)
    match when.lower():
        case "after" | "in":
            return _delayed("after_seconds", when, rest, making=making)
        case "every":
            return _delayed("every_seconds", when, rest, making=making)
        case "at":
            return _at(rest, making=making)
        case "daily":
            return _daily(rest, making=making)
        case "calendar":
            return _calendar(rest, making=making)
        case "":
            return Usage(message="/create needs a time and a prompt", usage=CREATE_USAGE)
        case _:
            forms = "in, after, every, at, daily or calendar"
            if making.updating is not None:
                forms = "in, after, every, at, daily, calendar or prompt"
            return Usage(message=f"{making.line} {when}: start with {forms}", usage=CREATE_USAGE)


def _delayed(
    key: Literal["after_seconds", "every_seconds"],
    word: str,
    text: str,
    *,
    making: _Making,
) -> Command:
    read = read_duration(text)
    if isinstance(read, Duration):
        return _with_prompt({key: read.seconds}, read.rest, making=making)
    if read.kind == "missing":
        return Usage(message=f"{making.line} {word}: {read.message}", usage=CREATE_USAGE)
    if read.kind != "bare_number":
        return Usage(message=read.message, usage=CREATE_USAGE)
    # Show what the line would have done had the number been taken as seconds.
    kind = "once after" if key == "after_seconds" else "every"
    would = making.would(f"{kind} {spoken_duration(read.seconds)}", _unquoted(read.rest))
    number = read.word
    return Usage(
        message=f"{making.line} {word} {text.strip()} is ambiguous: {number!r} has no unit, so "
        f"it would {would}; write {number}s, {number}m or {number}h (and quote a prompt that "
        "starts with a number)",
        usage=CREATE_USAGE,
    )


def _at(text: str, *, making: _Making) -> Command:
    first, rest = _split(text)
    if not first:
        return Usage(message=f"{making.line} at: give a time", usage=CREATE_USAGE)
    if _DATE.fullmatch(first):
        clock, rest = _split(rest)
        zone, prompt = _split(rest)
        if not clock or not zone:
            return Usage(
                message=f"{making.line} at {first}: give the time and the time zone too, "
                f"such as {first} 09:00 Asia/Tokyo (or UTC)",
                usage=CREATE_USAGE,
            )
        local = {"date": first, "time": clock, "time_zone": zone}
        return _with_prompt({"at": local}, prompt, making=making)
    if _CLOCK_TIME.fullmatch(first):
        return Usage(
            message=f"{making.line} at {first}: give the date and the time zone too, "
            f"such as 2026-12-01 {first} Asia/Tokyo",
            usage=CREATE_USAGE,
        )
    return _with_prompt({"at": first}, rest, making=making)


def _daily(text: str, *, making: _Making) -> Command:
    clock, rest = _split(text)
    zone, rest = _split(rest)
    if not clock or not zone:
        return Usage(
            message=f"{making.line} daily: give the time and the time zone, such as "
            "daily 09:00 Asia/Tokyo (or UTC), then optionally days such as mon wed fri",
            usage=CREATE_USAGE,
        )
    selector: dict[str, object] = {"time": clock, "time_zone": zone}
    days: list[str] = []
    prompt = rest
    while True:
        word, after = _split(prompt)
        if not _DAYS_WORD.fullmatch(word):
            break
        days.extend(_DAY_NAMES.findall(word))
        prompt = after
    if days:
        selector["weekdays"] = days
    if _DAY_LIKE.fullmatch(_split(prompt)[0].rstrip(",")):
        every = f"on {', '.join(days)}" if days else "every day"
        would = making.would(f"{every} at {clock} {zone}", _unquoted(prompt))
        return Usage(
            message=f"{making.line} daily: {_split(prompt)[0]!r} could be a day or the start "
            f"of the prompt (as typed, it would {would}); write days as mon tue wed thu fri sat "
            "sun, or quote the prompt",
            usage=CREATE_USAGE,
        )
    return _with_prompt({"daily_at": selector}, prompt, making=making)


def _calendar(text: str, *, making: _Making) -> Command:
    rule, rest = _split(text)
    clock, rest = _split(rest)
    zone, rest = _split(rest)
    if not rule or not clock or not zone:
        return Usage(
            message=f"{making.line} calendar: give the rule, the time and the time zone, "
            "such as calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris (or UTC), then "
            "optionally the start date, such as 2026-12-01",
            usage=CREATE_USAGE,
        )
    selector: dict[str, object] = {"rule": rule, "time": clock, "time_zone": zone}
    start, prompt = _split(rest)
    if _DATE.fullmatch(start):
        selector["start_date"] = start
    else:
        prompt = rest
    return _with_prompt({"calendar": selector}, prompt, making=making)


def _with_prompt(selector: dict[str, object], prompt: str, *, making: _Making) -> Command:
    prompt = _unquoted(prompt)
    if not prompt and making.updating is not None:
        return CallTool(name="schedule_create", arguments=selector)
    if not prompt:
        return Usage(message="/create: the prompt is missing after the time", usage=CREATE_USAGE)
    return CallTool(name="schedule_create", arguments={"prompt": prompt, **selector})


def _unquoted(prompt: str) -> str:
    """``prompt`` without the double quotes around all of it, if it has them."""
    if len(prompt) >= 2 and prompt[0] == prompt[-1] == '"':
        return trim(prompt[1:-1])
    return prompt


def _split(text: str) -> tuple[str, str]:
    """The first word of ``text`` and the rest, its inner spacing kept."""
    parts = trim(text).split(maxsplit=1)
    if not parts:
        return "", ""
    return parts[0], trim(parts[1]) if len(parts) > 1 else ""
