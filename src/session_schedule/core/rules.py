"""Create, update and delete decisions: raw tool arguments in, changes to append (or an error)
out.

A decision is a pure function of the arguments a model sent, the folded state and the decision
time ``now``. The checks of ``schedule_create`` run in SPEC §8's order and the first failure is
reported: prompt → selector shape → rule value → zone/offset → parse → range → future, then
``max_lateness_seconds`` and ``ends`` (SPEC §11). ``schedule_update`` checks a prompt it
changes first (as §8 does), then for unknown arguments and the id, then each other field it
changes in the same order (selector, lateness, ends, paused, snooze), and decides the version-3
changes that carry it out. Integers follow JSON-Schema semantics (``300`` and ``300.0`` are
integers; ``true`` and ``"300"`` are not).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Final, Literal, assert_never, final

import msgspec

from session_schedule.core.arguments import (
    SELECTORS,
    CreateArguments,
    DeleteArguments,
    EndsArguments,
    SnoozeArguments,
    UpdateArguments,
    field_names,
)
from session_schedule.core.calendar import parse_calendar
from session_schedule.core.changes import (
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    create_change,
    delete_change,
    pause_change,
    resume_change,
    snooze_change,
    update_change,
)
from session_schedule.core.daily import first_after, make_rule
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold, next_occurrence, rule_of
from session_schedule.core.framing import DEFAULT_MAX_FRAME_CHARS
from session_schedule.core.ids import ScheduleId, parse_schedule_id
from session_schedule.core.instants import (
    MAX_INSTANT,
    MS_PER_SECOND,
    Instant,
    describe_instant,
    format_instant,
)
from session_schedule.core.prompts import prompt_fault, trim
from session_schedule.core.records import (
    MAX_SAFE_INTEGER,
    MIN_EVERY_SECONDS,
    RECURRING_RECORDS,
    AfterScheduleRecord,
    AtScheduleRecord,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    Ends,
    EveryScheduleRecord,
    RecordStatus,
    ScheduleRecord,
    is_recurring,
    record_ends,
    record_target,
)
from session_schedule.core.time_input import load_zone, parse_at, parse_daily_at
from session_schedule.core.visible import escape_unencodable

CREATE_KEYS: Final = frozenset(field_names(CreateArguments))
_SELECTOR_NAMES: Final = ", ".join(f"`{name}`" for name in SELECTORS)
UPDATE_KEYS: Final = frozenset(field_names(UpdateArguments))
DELETE_KEYS: Final = frozenset(field_names(DeleteArguments))
ENDS_KEYS: Final = frozenset(field_names(EndsArguments))
SNOOZE_KEYS: Final = frozenset(field_names(SnoozeArguments))

DEFAULT_MAX_PROMPT_CHARS: Final = 4_000
DEFAULT_MAX_ACTIVE: Final = 100
DEFAULT_MAX_CHAIN_DEPTH: Final = 3


@final
class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Guard rails a host may tune; the defaults are documented in docs/concepts/schedule.md."""

    max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS
    """Longest prompt accepted, in characters, after trimming."""
    max_active: int = DEFAULT_MAX_ACTIVE
    """Most reminders one Session may have active at once."""
    max_frame_chars: int = DEFAULT_MAX_FRAME_CHARS
    """A batch follow-up shows prompts in full while it stays within this many characters."""
    max_chain_depth: int = DEFAULT_MAX_CHAIN_DEPTH
    """How many reminder turns in a row may each create the next reminder: one created during a
    reminder turn is one deeper than the reminders that turn delivers (a person's are 0)."""


def decide_create(
    arguments: Mapping[str, object],
    *,
    now: Instant,
    state: ScheduleFold,
    limits: Limits = Limits(),  # noqa: B008 - a frozen value, safe as a default
    chain_depth: int = 0,
) -> ScheduleCreateChange:
    """The create change for ``arguments`` decided at ``now``, under the next free id.

    A ``daily_at`` or ``calendar`` record's first target is its first occurrence after ``now``
    (SPEC §10, §12). ``chain_depth`` is the depth the new reminder would have (see
    :mod:`session_schedule.session.provenance`); past ``limits.max_chain_depth`` it is refused.
    Raises ``ScheduleError`` with ``invalid_prompt``, ``invalid_selector``, ``invalid_rule``,
    ``invalid_time_zone``, ``frequency_too_high``, ``time_out_of_range`` or ``not_future``.
    """
    prompt = check_prompt(arguments.get("prompt"), limits.max_prompt_chars)
    selector = _selector(arguments)
    record = _record(selector, arguments[selector], state.next_id(), prompt, now)
    record = _with_options(record, arguments, now=now, runs=0)
    if len(state) >= limits.max_active:
        raise ScheduleError(
            "invalid_rule",
            f"this session already has {len(state)} active reminders, the most it may have "
            f"(max_active = {limits.max_active}); delete one before creating another.",
        )
    check_chain_depth(chain_depth, limits)
    return create_change(record)


def check_chain_depth(
    chain_depth: int, limits: Limits, *, operation: Literal["create", "update"] = "create"
) -> None:
    """Refuse a create or update made ``chain_depth`` reminder turns deep, past
    ``limits.max_chain_depth`` (``invalid_rule``, telling the model to ask the user)."""
    if chain_depth <= limits.max_chain_depth:
        return
    if operation == "create":
        raise ScheduleError(
            "invalid_rule",
            f"a reminder set now would be {chain_depth} deep in a chain of reminders each set "
            "during the previous one's turn, deeper than this session allows (max_chain_depth "
            f"= {limits.max_chain_depth}); do not create it, ask the user whether they want one.",
        )
    raise ScheduleError(
        "invalid_rule",
        f"a reminder changed now would be {chain_depth} deep in a chain of reminders each set or "
        "changed during the previous one's turn, deeper than this session allows "
        f"(max_chain_depth = {limits.max_chain_depth}); leave it as it is, ask the user whether "
        "they want it changed.",
    )


def _record(
    selector: str, value: object, schedule_id: ScheduleId, prompt: str, now: Instant
) -> ScheduleRecord:
    """The record ``selector`` with ``value`` names, as if created at ``now``."""
    if selector == "after_seconds":
        seconds = _json_integer(value)
        if seconds is None or not 0 < seconds <= MAX_SAFE_INTEGER:
            raise ScheduleError(
                "invalid_rule",
                f"after_seconds must be a positive whole number of seconds, got {_show(value)}.",
            )
        target = _offset_target(now, seconds, "delay")
        return AfterScheduleRecord(
            id=schedule_id,
            prompt=prompt,
            after_seconds=seconds,
            scheduled_at=format_instant(target),
        )
    if selector == "every_seconds":
        seconds = _json_integer(value)
        if seconds is None or not -MAX_SAFE_INTEGER <= seconds <= MAX_SAFE_INTEGER:
            raise ScheduleError(
                "invalid_rule",
                f"every_seconds must be a whole number of seconds, got {_show(value)}.",
            )
        if seconds < MIN_EVERY_SECONDS:
            raise ScheduleError(
                "frequency_too_high",
                f"every_seconds must be at least {MIN_EVERY_SECONDS} (5 minutes), got {seconds}; "
                "choose a longer interval.",
            )
        target = _offset_target(now, seconds, "interval")
        return EveryScheduleRecord(
            id=schedule_id,
            prompt=prompt,
            every_seconds=seconds,
            scheduled_at=format_instant(target),
        )
    if selector == "daily_at":
        daily = parse_daily_at(value)
        rule = make_rule(daily.time_of_day, load_zone(daily.time_zone), daily.weekdays)
        found = first_after(rule, now)
        if found is None or found[1] > MAX_INSTANT:
            raise ScheduleError(
                "time_out_of_range",
                "`daily_at` has no occurrence before 9999-12-31T23:59:59.999Z, the latest time a "
                "reminder can have.",
            )
        return DailyScheduleRecord(
            id=schedule_id,
            prompt=prompt,
            local_time=daily.local_time,
            time_zone=daily.time_zone,
            weekdays=list(daily.weekdays),
            scheduled_at=format_instant(Instant(found[1])),
        )
    if selector == "calendar":
        calendar = parse_calendar(value, now)
        return CalendarScheduleRecord(
            id=schedule_id,
            prompt=prompt,
            rule=calendar.rule,
            local_time=calendar.local_time,
            time_zone=calendar.time_zone,
            start_date=calendar.start_date,
            scheduled_at=format_instant(calendar.first_target),
        )
    target = _future(parse_at(value), "at", now)
    return AtScheduleRecord(id=schedule_id, prompt=prompt, scheduled_at=format_instant(target))


def _future(target: int, name: str, now: Instant) -> Instant:
    """``target``, the instant the argument ``name`` names (parsed, so not past the upper end of
    the range), when it is after ``now``; else ``not_future`` (SPEC §8 "Targets"). A target
    before the range is in the past like any other and is named in the extended year form."""
    if target <= now:
        raise ScheduleError(
            "not_future",
            f"`{name}` names {describe_instant(target)}, which is not after the current time "
            f"{format_instant(now)}; choose a time in the future.",
        )
    return Instant(target)


def _with_options(
    record: ScheduleRecord,
    arguments: Mapping[str, object],
    *,
    now: Instant,
    runs: int,
    update: bool = False,
) -> ScheduleRecord:
    """``record`` with the ``max_lateness_seconds`` and ``ends`` that ``arguments`` give (each
    unchanged when absent or null); ``runs``: the runs the record has made; ``update``: whether
    ``arguments`` are an update's (where null leaves a field as it is)."""
    lateness = arguments.get("max_lateness_seconds")
    if lateness is not None:
        seconds = _json_integer(lateness)
        if seconds is None or not 0 < seconds <= MAX_SAFE_INTEGER:
            raise ScheduleError(
                "invalid_rule",
                f"max_lateness_seconds must be a positive whole number of seconds, got "
                f"{_show(lateness)}; give one, or null to leave the reminder's limit as it is."
                if update
                else "max_lateness_seconds must be a positive whole number of seconds, or null "
                f"to deliver however late, got {_show(lateness)}.",
            )
        record = msgspec.structs.replace(record, max_lateness_seconds=seconds)
    value = arguments.get("ends")
    if value is None:
        return record
    ends = _ends(value, now=now, runs=runs)
    if not isinstance(record, RECURRING_RECORDS):
        if ends is None:
            return record
        raise ScheduleError(
            "invalid_rule",
            "`ends` applies only to a recurring reminder (every_seconds, daily_at or calendar); "
            "leave it "
            "null for a one-time reminder.",
        )
    if ends is not None and ends.until is not None and ends.until <= record.scheduled_at:
        raise ScheduleError(
            "invalid_rule",
            f"`ends.until` {ends.until} is not after the reminder's first target "
            f"{record.scheduled_at}; choose a later end or leave it null.",
        )
    return msgspec.structs.replace(record, ends=msgspec.UNSET if ends is None else ends)


def _ends(value: object, *, now: Instant, runs: int) -> Ends | None:
    """The ``ends`` an argument names; ``None`` when it sets neither ``until`` nor ``max_runs``
    (no end)."""
    if not isinstance(value, dict):
        raise ScheduleError(
            "invalid_selector",
            f"`ends` must be an object {{until, max_runs}} or null, not {_show(value)}.",
        )
    unknown = sorted(set(value) - ENDS_KEYS, key=str)
    if unknown:
        raise ScheduleError(
            "invalid_selector",
            f"unknown member {_names(unknown)} of `ends`; it takes `until` and `max_runs`.",
        )
    until: str | None = None
    if value.get("until") is not None:
        instant = _named_instant(value["until"], "ends.until")
        if instant <= now:
            # Not after the current time, so not after the first target either: SPEC §11's
            # code for an end that cannot hold (an `at` or a snooze in the past is not_future).
            raise ScheduleError(
                "invalid_rule",
                f"`ends.until` {describe_instant(instant)} is not after the current time "
                f"{format_instant(now)}, so not after the reminder's first target; choose a later "
                "end or leave it null.",
            )
        until = format_instant(Instant(instant))
    max_runs: int | None = None
    if value.get("max_runs") is not None:
        max_runs = _json_integer(value["max_runs"])
        if max_runs is None or not 0 < max_runs <= MAX_SAFE_INTEGER:
            raise ScheduleError(
                "invalid_rule",
                "`ends.max_runs` must be a positive whole number of deliveries, got "
                f"{_show(value['max_runs'])}.",
            )
        if max_runs <= runs:
            raise ScheduleError(
                "invalid_rule",
                f"`ends.max_runs` is {max_runs}, but the reminder has already been delivered "
                f"{runs} times; give a larger number or leave it null.",
            )
    if until is None and max_runs is None:
        return None
    return Ends(until=until, max_runs=max_runs)


def _named_instant(value: object, name: str) -> int:
    """The instant ``value`` names, read as an ``at`` value is (:func:`parse_at`: possibly
    before the range, never after it); errors name ``name``."""
    try:
        return parse_at(value)
    except ScheduleError as error:
        message = error.message
        if message.startswith("`at` "):
            message = f"`{name}` " + message.removeprefix("`at` ")
        raise ScheduleError(error.code, message) from None


def decide_update(
    arguments: Mapping[str, object],
    *,
    now: Instant,
    state: ScheduleFold,
    limits: Limits = Limits(),  # noqa: B008 - a frozen value, safe as a default
) -> tuple[ScheduleId, tuple[ScheduleChange, ...]]:
    """The id ``arguments`` name and the changes that carry out the update at ``now`` (SPEC
    §11), in the order they are appended: ``update``, ``resume``, ``snooze``, ``pause``.

    Raises ``ScheduleError`` (the create codes, for the field that fails first) when the
    arguments are malformed, name no active reminder, or change nothing.
    """
    # SPEC §11: the checks run in §8's order, which checks the prompt first.
    given_prompt = arguments.get("prompt")
    prompt = None if given_prompt is None else check_prompt(given_prompt, limits.max_prompt_chars)
    unknown = [] if UPDATE_KEYS.issuperset(arguments) else sorted(set(arguments) - UPDATE_KEYS)
    if unknown:
        raise ScheduleError(
            "invalid_selector",
            f"unknown argument {_names(unknown)}; schedule_update takes `id` and the fields to "
            f"change: `prompt`, one of {_SELECTOR_NAMES}, "
            "`paused`, `snooze`, `ends`, `max_lateness_seconds`.",
        )
    schedule_id = _active_id(arguments.get("id"), state)
    current = state.get(schedule_id)
    if current is None:  # checked by _active_id; kept for the type
        raise ScheduleError("invalid_selector", _not_active(schedule_id))
    status = state.status(schedule_id)
    occurrence = state.occurrence_of(schedule_id)
    # The record as an update writes it: at its next occurrence, not at a snooze instant.
    stored = msgspec.structs.replace(current, scheduled_at=format_instant(occurrence))
    record = stored
    if prompt is not None:
        record = msgspec.structs.replace(record, prompt=prompt)
    given = [key for key in SELECTORS if arguments.get(key) is not None]
    if len(given) > 1:
        raise ScheduleError(
            "invalid_selector",
            f"give at most one of {_SELECTOR_NAMES} to change the rule (found {_names(given)}).",
        )
    if given:
        replaced = _record(given[0], arguments[given[0]], schedule_id, record.prompt, now)
        # The new rule keeps the lateness, and a recurring one the end, unless changed below.
        replaced = msgspec.structs.replace(
            replaced, max_lateness_seconds=record.max_lateness_seconds
        )
        ends = record_ends(record)
        if ends is not None and is_recurring(replaced):
            replaced = msgspec.structs.replace(replaced, ends=ends)
        record = replaced
    record = _with_options(record, arguments, now=now, runs=status.runs, update=True)
    # Whether the rule changes: the fold keeps a snooze across an update that leaves the rule as
    # it was (the same selector given again included), and only a new rule clears it.
    new_rule = rule_of(record, record.scheduled_at) != rule_of(stored, stored.scheduled_at)
    if arguments.get("ends") is None:
        _check_ends_hold(record, moved=new_rule)
    elif status.snoozed_from is not None and not new_rule:
        _check_snooze_within(record, current.scheduled_at)
    changes: list[ScheduleChange] = []
    if record != stored:
        changes.append(update_change(record))
    paused = arguments.get("paused")
    if paused is not None and not isinstance(paused, bool):
        raise ScheduleError(
            "invalid_selector",
            f"`paused` must be true (pause), false (resume) or null, got {_show(paused)}.",
        )
    resume = paused is False and status.paused
    if resume:
        _check_resumable(record, now)
        changes.append(resume_change(schedule_id, now))
    snooze = arguments.get("snooze")
    if snooze is not None:
        _check_snoozable(schedule_id, paused=status.paused and not resume, pausing=paused is True)
        changes.extend(_snooze(snooze, record, now, current, status, new_rule=new_rule))
    if paused is True and not status.paused:
        changes.append(pause_change(schedule_id))
    if not changes:
        raise _no_change(
            schedule_id,
            snoozed_until=current.scheduled_at if status.snoozed_from is not None else None,
            target=stored.scheduled_at,
            rule_given=bool(given),
        )
    return schedule_id, tuple(changes)


def _check_snoozable(schedule_id: ScheduleId, *, paused: bool, pausing: bool) -> None:
    """Refuse a snooze of a reminder that stays ``paused``, or that the same call is
    ``pausing``."""
    if paused:
        raise ScheduleError(
            "invalid_selector",
            f"{schedule_id} is paused and a paused reminder cannot be snoozed; resume it "
            "(paused: false) to snooze it, or leave snooze null.",
        )
    if pausing:
        raise ScheduleError(
            "invalid_selector",
            f"{schedule_id} cannot be paused and snoozed in one call, since a paused reminder "
            "is never due; give `paused: true` to pause it or `snooze` to move its next "
            "delivery, and null for the other.",
        )


def _no_change(
    schedule_id: ScheduleId, *, snoozed_until: str | None, target: str, rule_given: bool
) -> ScheduleError:
    """The refusal of an update that changes nothing about ``schedule_id``, whose occurrence
    is ``target`` (``snoozed_until``: its snooze instant, when snoozed)."""
    if snoozed_until is not None and rule_given:
        # The rule given again is no new rule (its target, after now, is the occurrence the
        # snooze moved), and the fold keeps the snooze across it.
        return ScheduleError(
            "invalid_selector",
            f"this update changes nothing about {schedule_id}, which is snoozed until "
            f"{snoozed_until}: giving its rule again keeps the snooze; to move its delivery, "
            f"snooze it until another time, such as its own target {target}.",
        )
    return ScheduleError(
        "invalid_selector",
        f"this update changes nothing about {schedule_id}; give a new value for at least one "
        "field, or null for the fields to leave as they are.",
    )


def _active_id(value: object, state: ScheduleFold) -> ScheduleId:
    if not isinstance(value, str):
        raise ScheduleError(
            "invalid_selector",
            f"`id` must be the id string of a reminder (such as 'sch_1'), got {_show(value)}.",
        )
    schedule_id = parse_schedule_id(value)
    if schedule_id is None or schedule_id not in state:
        raise ScheduleError("invalid_selector", _not_active(value))
    return schedule_id


def _not_active(name: str) -> str:
    return (
        f"no active reminder has the id {name!r}; call schedule_list to see the active ones, "
        "or schedule_create to set a new one."
    )


def _check_ends_hold(record: ScheduleRecord, *, moved: bool) -> None:
    """An end the update keeps still lies after the record's target: strictly after a new
    first target (``moved``), at or after an unchanged one."""
    ends = record_ends(record)
    if (
        ends is not None
        and ends.until is not None
        and (ends.until <= record.scheduled_at if moved else ends.until < record.scheduled_at)
    ):
        raise ScheduleError(
            "invalid_rule",
            f"the reminder's end `ends.until` {ends.until} is before its next target "
            f"{record.scheduled_at}; change its end too.",
        )


def _check_snooze_within(record: ScheduleRecord, snoozed_until: str) -> None:
    """A snooze the update keeps does not pass the record's new end."""
    ends = record_ends(record)
    if ends is not None and ends.until is not None and snoozed_until > ends.until:
        raise ScheduleError(
            "invalid_rule",
            f"the reminder is snoozed until {snoozed_until}, after the new end `ends.until` "
            f"{ends.until}; choose a later end, or snooze it to an earlier time first.",
        )


def _check_resumable(record: ScheduleRecord, now: Instant) -> None:
    """A recurring record resumed at ``now`` has an occurrence left before its end."""
    if not isinstance(record, RECURRING_RECORDS):
        return
    following = next_occurrence(record, record_target(record), now)
    if following is None or following > MAX_INSTANT:
        # The rule itself is spent (a calendar rule's COUNT or UNTIL, or the end of the range):
        # no `ends` would give it another occurrence.
        raise ScheduleError(
            "invalid_rule",
            f"{record.id}'s rule has no occurrence left after now, so it cannot be resumed; "
            "give it a new rule or delete it.",
        )
    ends = record_ends(record)
    if (
        ends is not None
        and ends.until is not None
        and format_instant(Instant(following)) > ends.until
    ):
        raise ScheduleError(
            "invalid_rule",
            f"{record.id} has no occurrence left before its end, so it cannot be resumed; "
            "change its end (ends) or delete it.",
        )


def _snooze(
    value: object,
    record: ScheduleRecord,
    now: Instant,
    current: ScheduleRecord,
    status: RecordStatus,
    *,
    new_rule: bool,
) -> tuple[ScheduleChange, ...]:
    """The snooze change ``value`` asks of ``record`` (``current`` and ``status`` as they stand),
    or none when it is snoozed to that very instant already (the same call repeated) and no new
    rule clears that snooze."""
    until = _snooze_until(value, record, now)
    repeated = status.snoozed_from is not None and format_instant(until) == current.scheduled_at
    if repeated and not new_rule:
        return ()
    return (snooze_change(record.id, until),)


def _snooze_until(value: object, record: ScheduleRecord, now: Instant) -> Instant:
    """The snooze instant ``value`` names: after ``now``, not after ``record``'s end."""
    until = _snooze_instant(value, now)
    ends = record_ends(record)
    if ends is not None and ends.until is not None and format_instant(until) > ends.until:
        raise ScheduleError(
            "invalid_rule",
            f"the snooze until {format_instant(until)} is after the reminder's end "
            f"`ends.until` {ends.until}; snooze it to an earlier time or change its end.",
        )
    return until


def _snooze_instant(value: object, now: Instant) -> Instant:
    if not isinstance(value, dict):
        raise ScheduleError(
            "invalid_selector",
            f"`snooze` must be an object {{until}} or {{after_seconds}}, not {_show(value)}.",
        )
    unknown = sorted(set(value) - SNOOZE_KEYS, key=str)
    if unknown:
        raise ScheduleError(
            "invalid_selector",
            f"unknown member {_names(unknown)} of `snooze`; it takes `until` or `after_seconds`.",
        )
    given = [key for key in ("until", "after_seconds") if value.get(key) is not None]
    if len(given) != 1:
        raise ScheduleError(
            "invalid_selector",
            "`snooze` takes exactly one of `until` and `after_seconds` "
            f"(found {'none' if not given else _names(given)}).",
        )
    if given[0] == "after_seconds":
        seconds = _json_integer(value["after_seconds"])
        if seconds is None or not 0 < seconds <= MAX_SAFE_INTEGER:
            raise ScheduleError(
                "invalid_rule",
                "`snooze.after_seconds` must be a positive whole number of seconds, got "
                f"{_show(value['after_seconds'])}.",
            )
        return _offset_target(now, seconds, "delay")
    return _future(_named_instant(value["until"], "snooze.until"), "snooze.until", now)


def decide_delete(
    arguments: Mapping[str, object], *, state: ScheduleFold
) -> ScheduleDeleteChange | None:
    """The delete change for ``arguments``, or ``None`` when the id names no active reminder.

    Raises ``ScheduleError("invalid_selector")`` when the arguments are not ``{"id": <string>}``.
    """
    unknown = sorted(set(arguments) - DELETE_KEYS)
    if unknown:
        raise ScheduleError(
            "invalid_selector",
            f"unknown argument {_names(unknown)}; schedule_delete takes only `id`.",
        )
    value = arguments.get("id")
    if not isinstance(value, str):
        raise ScheduleError(
            "invalid_selector",
            f"`id` must be the id string of a reminder (such as 'sch_1'), got {_show(value)}.",
        )
    schedule_id: ScheduleId | None = parse_schedule_id(value)
    if schedule_id is None or schedule_id not in state:
        return None
    return delete_change(schedule_id)


def check_prompt(value: object, max_chars: int) -> str:
    """The trimmed prompt, or ``invalid_prompt`` saying what is wrong with it."""
    if not isinstance(value, str):
        raise ScheduleError(
            "invalid_prompt",
            f"`prompt` must be a string with the reminder's content, got {_show(value)}.",
        )
    prompt = trim(value)
    fault = prompt_fault(prompt, max_chars=max_chars)
    if fault is None:
        return prompt
    match fault.kind:
        case "empty":
            message = "`prompt` is empty; say what the reminder should prompt you to do."
        case "too_long":
            message = (
                f"`prompt` has {fault.at} characters, more than the {max_chars} allowed; "
                "shorten it."
            )
        case "surrogate":
            message = (
                f"`prompt` contains the lone surrogate U+{ord(fault.character):04X} at index "
                f"{fault.at}, half of a character that cannot be encoded; send the whole "
                "character or remove it."
            )
        case "control":
            message = (
                f"`prompt` contains the control character U+{ord(fault.character):04X} at index "
                f"{fault.at}; only newline and tab are allowed."
            )
        case _:
            assert_never(fault.kind)
    raise ScheduleError("invalid_prompt", message)


def _selector(arguments: Mapping[str, object]) -> str:
    unknown = [] if CREATE_KEYS.issuperset(arguments) else sorted(set(arguments) - CREATE_KEYS)
    if unknown:
        raise ScheduleError(
            "invalid_selector",
            f"unknown argument {_names(unknown)}; schedule_create takes `prompt`, exactly one "
            f"of {_SELECTOR_NAMES}, and optionally `ends` and `max_lateness_seconds`.",
        )
    given = [key for key in SELECTORS if arguments.get(key) is not None]
    if len(given) != 1:
        found = "none" if not given else _names(given)
        raise ScheduleError(
            "invalid_selector",
            f"give exactly one of {_SELECTOR_NAMES} (found {found}).",
        )
    return given[0]


def _json_integer(value: object) -> int | None:
    """``value`` as an integer under JSON-Schema semantics, or ``None`` when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _offset_target(now: Instant, seconds: int, what: str) -> Instant:
    """``seconds`` after ``now`` (``what``: the delay or the interval, for the message)."""
    target = now + seconds * MS_PER_SECOND
    if target > MAX_INSTANT:
        raise ScheduleError(
            "time_out_of_range",
            f"{seconds} seconds from now is past 9999-12-31T23:59:59.999Z, the latest time a "
            f"reminder can have; choose a shorter {what}.",
        )
    return Instant(target)


def _names(keys: Sequence[object]) -> str:
    """Keys named in a message: a Python caller's dict may have keys that are not strings."""
    return ", ".join(f"`{escape_unencodable(str(key))}`" for key in keys)


def _digits(value: int) -> int:
    """How many decimal digits ``value`` has (without writing it out)."""
    magnitude = abs(value)
    estimate: int = int(magnitude.bit_length() * math.log10(2))
    power: int = 10**estimate
    return max(1, estimate + (1 if magnitude >= power else 0))


def _show(value: object) -> str:
    """A short, JSON-flavoured rendering of an argument for an error message."""
    if value is None:
        return "nothing"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, str) and escape_unencodable(value) != value:
        text = json.dumps(value)  # ASCII-only, so a lone surrogate reads as its escape
        return text if len(text) <= 40 else text[:39] + "…"
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, ValueError, RecursionError, msgspec.EncodeError):
        # Not JSON-encodable as it stands: a foreign type, a lone surrogate or a non-finite
        # number inside a container, or nesting too deep to walk.
        # A whole number longer than Python writes out (4,300 digits) is shown by its length.
        text = (
            "an object"
            if isinstance(value, dict)
            else "an array"
            if isinstance(value, list)
            else f"a number of {_digits(value):,} digits"
            if isinstance(value, int) and not isinstance(value, bool)
            else type(value).__name__
        )
    return text if len(text) <= 40 else text[:39] + "…"
