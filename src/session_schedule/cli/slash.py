"""Slash commands: what a person types at the chat prompt, turned into the tools' real arguments.

In offline mode the person drives the Schedule tools directly; with a model they may too. This
module only *reads* a line — it runs nothing and never raises: every line becomes one of

- :class:`Say` — a plain message for the conversation (``//…`` sends a line that starts with ``/``);
- :class:`CallTool` — a tool name and the exact JSON arguments to send it;
- :class:`Local` — ``/help`` or ``/quit``, handled by the chat itself;
- :class:`Usage` — a line that could not be read, with a message and the usage to show.

``/update``, ``/pause``, ``/resume`` and ``/snooze`` call ``schedule_update`` (SPEC §11);
``/update`` reads a new rule exactly as ``/create`` does (the prompt after it optional), and
``/snooze`` a duration exactly as ``/create after`` does.

Only the *shape* is checked here. Values the tool judges — ``after 0s``, ``every 1m`` (below the
5-minute floor), ``at 2026-12-01T09:00:00`` (no offset), an unknown zone, ``Mon`` for a weekday —
are sent as typed so the person sees the tool's real error, exactly as a model would. After
``daily TIME ZONE``, a word made only of day names and commas (``mon,wed,fri``) is the weekdays;
after ``calendar RULE TIME ZONE``, a word of the form ``YYYY-MM-DD`` is the start date; anything
else starts the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, final

HELP: Final = """\
commands:
  /create after 90s <prompt>                        once, after a delay: 90, 90s, 10m, 2h, 1d, 1h30m
  /create every 10m <prompt>                        repeatedly, at a fixed rate (at least 5 minutes)
  /create at 2026-12-01T09:00:00+09:00 <prompt>     once, at an RFC 3339 time with an offset
  /create at 2026-12-01 09:00 Asia/Tokyo <prompt>   once, at a local time in a zone (or UTC)
  /create daily 09:00 Asia/Tokyo <prompt>           every day, at a local time in a zone
  /create daily 09:00 UTC mon,wed,fri <prompt>      on the days listed only
  /create calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris <prompt>
                                                    on the dates of a calendar rule (an RRULE)
  /create calendar FREQ=WEEKLY;INTERVAL=2 09:00 UTC 2026-12-04 <prompt>
                                                    counted from a start date
  /list                                             the active reminders
  /update sch_1 every 20m [<prompt>]                a new rule (any /create form), and prompt
  /update sch_1 prompt <prompt>                     a new prompt; the time does not move
  /pause sch_1                                      stop deliveries until resumed
  /resume sch_1                                     deliver again (from the next occurrence)
  /snooze sch_1 10m                                 postpone the next delivery: a duration,
  /snooze sch_1 2026-12-01T09:00:00+09:00           or an RFC 3339 time with an offset
  /delete sch_1                                     delete a reminder
  /help                                             this help
  /quit                                             leave (Ctrl-D too); the session can be resumed
Any other line is a message; start it with // to send a line that begins with /."""

CREATE_USAGE: Final = (
    "/create after 90s|every 10m|at 2026-12-01T09:00:00+09:00|at 2026-12-01 09:00 Asia/Tokyo"
    "|daily 09:00 Asia/Tokyo [mon,wed,fri]|calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris "
    "[2026-12-01] <prompt>"
)
LIST_USAGE: Final = "/list"
DELETE_USAGE: Final = "/delete <id>, such as /delete sch_1"
UPDATE_USAGE: Final = (
    "/update <id> after 90s|every 10m|at 2026-12-01T09:00:00+09:00|at 2026-12-01 09:00 "
    "Asia/Tokyo|daily 09:00 Asia/Tokyo [mon,wed,fri]|calendar FREQ=MONTHLY;BYDAY=1MO 09:00 "
    "Europe/Paris [2026-12-01] [<prompt>], or /update <id> prompt <prompt>"
)
PAUSE_USAGE: Final = "/pause <id>, such as /pause sch_1"
RESUME_USAGE: Final = "/resume <id>, such as /resume sch_1"
SNOOZE_USAGE: Final = "/snooze <id> 10m|1h30m|2026-12-01T09:00:00+09:00"
COMMANDS_USAGE: Final = (
    "/create, /list, /update <id>, /pause <id>, /resume <id>, /snooze <id> 10m, /delete <id>, "
    "/help, /quit"
)

_MAX_INT64: Final = 2**63 - 1
"""The largest integer the JSON encoder writes; larger durations are refused here."""
_MAX_DURATION_LENGTH: Final = 40
_DURATION: Final = re.compile(
    r"(?:(?P<d>[0-9]+)d)?(?:(?P<h>[0-9]+)h)?(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?",
    re.ASCII | re.IGNORECASE,
)
_UNIT_SECONDS: Final = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DATE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_CLOCK_TIME: Final = re.compile(r"[0-9]{1,2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?", re.ASCII)
_DAY_NAME: Final = r"(?:mon|tue|wed|thu|fri|sat|sun)"
_WEEKDAY_LIST: Final = re.compile(rf"{_DAY_NAME}(?:,{_DAY_NAME})*,?", re.ASCII | re.IGNORECASE)
"""A word of day names and commas, read as the weekdays (as typed: the tool judges them)."""


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

    command: Literal["help", "quit"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """A line that could not be read: what is wrong, and how to write it."""

    message: str
    usage: str


Command: TypeAlias = Say | CallTool | Local | Usage


def parse_line(line: str) -> Command:
    """What ``line`` asks for. Never raises."""
    text = line.strip()
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
        case "/help" | "/?":
            return Local(command="help")
        case "/quit" | "/exit":
            return Local(command="quit")
        case _:
            return Usage(message=f"there is no command {name}", usage=COMMANDS_USAGE)


def _update(text: str) -> Command:
    schedule_id, rest = _split(text)
    if not schedule_id or not rest:
        return Usage(message="/update needs a reminder id and what to change", usage=UPDATE_USAGE)
    word, prompt = _split(rest)
    if word.lower() == "prompt":
        if not prompt:
            return Usage(message="/update prompt: the new prompt is missing", usage=UPDATE_USAGE)
        return CallTool(name="schedule_update", arguments={"id": schedule_id, "prompt": prompt})
    created = _create(rest, optional_prompt=True)
    if not isinstance(created, CallTool):
        message = "/update: give a rule or a prompt"
        if isinstance(created, Usage):
            message = created.message.replace("/create", "/update", 1).replace(
                "after, every, at, daily or calendar", "after, every, at, daily, calendar or prompt"
            )
        return Usage(message=message, usage=UPDATE_USAGE)
    return CallTool(name="schedule_update", arguments={"id": schedule_id, **created.arguments})


def _snooze(text: str) -> Command:
    schedule_id, rest = _split(text)
    when, extra = _split(rest)
    if not schedule_id or not when or extra:
        return Usage(
            message="/snooze takes a reminder id and a duration or a time", usage=SNOOZE_USAGE
        )
    if len(when) > _MAX_DURATION_LENGTH:
        return Usage(message="that duration is too long", usage=SNOOZE_USAGE)
    seconds = parse_duration(when)
    if seconds is not None:
        if seconds > _MAX_INT64:
            return Usage(message="that duration is too long", usage=SNOOZE_USAGE)
        snooze: dict[str, object] = {"after_seconds": seconds}
    elif _DATE.match(when):
        snooze = {"until": when}
    else:
        return Usage(
            message=f"{when!r} is neither a duration (such as 10m or 1h30m) nor an RFC 3339 "
            "time (such as 2026-12-01T09:00:00+09:00)",
            usage=SNOOZE_USAGE,
        )
    return CallTool(name="schedule_update", arguments={"id": schedule_id, "snooze": snooze})


def _create(text: str, *, optional_prompt: bool = False) -> Command:
    when, rest = _split(text)
    match when.lower():
        case "after" | "in":
            return _delayed("after_seconds", when, rest, optional_prompt=optional_prompt)
        case "every":
            return _delayed("every_seconds", when, rest, optional_prompt=optional_prompt)
        case "at":
            return _at(rest, optional_prompt=optional_prompt)
        case "daily":
            return _daily(rest, optional_prompt=optional_prompt)
        case "calendar":
            return _calendar(rest, optional_prompt=optional_prompt)
        case "":
            return Usage(message="/create needs a time and a prompt", usage=CREATE_USAGE)
        case _:
            return Usage(
                message=f"/create {when}: start with after, every, at, daily or calendar",
                usage=CREATE_USAGE,
            )


def _delayed(key: str, word: str, text: str, *, optional_prompt: bool) -> Command:
    duration, prompt = _split(text)
    if not duration:
        return Usage(message=f"/create {word}: give a duration, such as 90s", usage=CREATE_USAGE)
    if len(duration) > _MAX_DURATION_LENGTH:
        return Usage(message="that duration is too long", usage=CREATE_USAGE)
    seconds = parse_duration(duration)
    if seconds is None:
        return Usage(
            message=f"{duration!r} is not a duration; write a number of seconds, or numbers with "
            "d, h, m and s, such as 90, 90s, 10m, 2h or 1h30m",
            usage=CREATE_USAGE,
        )
    if seconds > _MAX_INT64:
        return Usage(message="that duration is too long", usage=CREATE_USAGE)
    return _with_prompt({key: seconds}, prompt, optional=optional_prompt)


def _at(text: str, *, optional_prompt: bool) -> Command:
    first, rest = _split(text)
    if not first:
        return Usage(message="/create at: give a time", usage=CREATE_USAGE)
    if _DATE.fullmatch(first):
        clock, rest = _split(rest)
        zone, prompt = _split(rest)
        if not clock or not zone:
            return Usage(
                message=f"/create at {first}: give the time and the time zone too, "
                f"such as {first} 09:00 Asia/Tokyo (or UTC)",
                usage=CREATE_USAGE,
            )
        local = {"date": first, "time": clock, "time_zone": zone}
        return _with_prompt({"at": local}, prompt, optional=optional_prompt)
    if _CLOCK_TIME.fullmatch(first):
        return Usage(
            message=f"/create at {first}: give the date and the time zone too, "
            f"such as 2026-12-01 {first} Asia/Tokyo",
            usage=CREATE_USAGE,
        )
    return _with_prompt({"at": first}, rest, optional=optional_prompt)


def _daily(text: str, *, optional_prompt: bool) -> Command:
    clock, rest = _split(text)
    zone, rest = _split(rest)
    if not clock or not zone:
        return Usage(
            message="/create daily: give the time and the time zone, such as "
            "daily 09:00 Asia/Tokyo (or UTC), then optionally days such as mon,wed,fri",
            usage=CREATE_USAGE,
        )
    selector: dict[str, object] = {"time": clock, "time_zone": zone}
    days, prompt = _split(rest)
    if _WEEKDAY_LIST.fullmatch(days):
        selector["weekdays"] = days.rstrip(",").split(",")
    else:
        prompt = rest
    return _with_prompt({"daily_at": selector}, prompt, optional=optional_prompt)


def _calendar(text: str, *, optional_prompt: bool) -> Command:
    rule, rest = _split(text)
    clock, rest = _split(rest)
    zone, rest = _split(rest)
    if not rule or not clock or not zone:
        return Usage(
            message="/create calendar: give the rule, the time and the time zone, such as "
            "calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris (or UTC), then optionally the "
            "start date, such as 2026-12-01",
            usage=CREATE_USAGE,
        )
    selector: dict[str, object] = {"rule": rule, "time": clock, "time_zone": zone}
    start, prompt = _split(rest)
    if _DATE.fullmatch(start):
        selector["start_date"] = start
    else:
        prompt = rest
    return _with_prompt({"calendar": selector}, prompt, optional=optional_prompt)


def _with_prompt(selector: dict[str, object], prompt: str, *, optional: bool) -> Command:
    if not prompt:
        if optional:
            return CallTool(name="schedule_create", arguments=selector)
        return Usage(message="/create: the prompt is missing after the time", usage=CREATE_USAGE)
    return CallTool(name="schedule_create", arguments={"prompt": prompt, **selector})


def parse_duration(text: str) -> int | None:
    """Seconds in ``text`` — ``90``, ``90s``, ``10m``, ``2h``, ``1d``, ``1h30m`` — or ``None``.

    Any number is accepted, zero included: whether a delay is allowed is the tool's decision.
    Text longer than 40 characters is ``None``.
    """
    if len(text) > _MAX_DURATION_LENGTH:
        return None
    if text.isascii() and text.isdigit():
        return int(text)
    found = _DURATION.fullmatch(text)
    if found is None or not any(found.groupdict().values()):
        return None
    return sum(
        int(amount) * _UNIT_SECONDS[unit]
        for unit, amount in found.groupdict().items()
        if amount is not None
    )


def _split(text: str) -> tuple[str, str]:
    """The first word of ``text`` and the rest, its inner spacing kept."""
    parts = text.strip().split(maxsplit=1)
    if not parts:
        return "", ""
    return parts[0], parts[1].strip() if len(parts) > 1 else ""
