"""Create and delete decisions: raw tool arguments in, a change to append (or an error) out.

A decision is a pure function of the arguments a model sent, the folded state and the decision
time ``now``. The checks of ``schedule_create`` run in SPEC §8's order and the first failure is
reported: prompt → selector shape → rule value → zone/offset → parse → range → future. Integers
follow JSON-Schema semantics (``300`` and ``300.0`` are integers; ``true`` and ``"300"`` are not).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Final, assert_never, final

import msgspec

from session_schedule.core.arguments import (
    SELECTORS,
    CreateArguments,
    DeleteArguments,
    field_names,
)
from session_schedule.core.changes import (
    ScheduleCreateChange,
    ScheduleDeleteChange,
    create_change,
    delete_change,
)
from session_schedule.core.daily import first_after, make_rule
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.framing import DEFAULT_MAX_FRAME_CHARS
from session_schedule.core.ids import ScheduleId, parse_schedule_id
from session_schedule.core.instants import (
    MAX_INSTANT,
    MS_PER_SECOND,
    Instant,
    format_instant,
)
from session_schedule.core.prompts import prompt_fault
from session_schedule.core.records import (
    MAX_SAFE_INTEGER,
    MIN_EVERY_SECONDS,
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    ScheduleRecord,
)
from session_schedule.core.time_input import load_zone, parse_at, parse_daily_at
from session_schedule.core.visible import escape_unencodable

CREATE_KEYS: Final = frozenset(field_names(CreateArguments))
DELETE_KEYS: Final = frozenset(field_names(DeleteArguments))

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

    A ``daily_at`` record's first target is its first occurrence after ``now`` (SPEC §10).
    ``chain_depth`` is the depth the new reminder would have (see
    :mod:`session_schedule.session.provenance`); past ``limits.max_chain_depth`` it is refused.
    Raises ``ScheduleError`` with ``invalid_prompt``, ``invalid_selector``, ``invalid_rule``,
    ``invalid_time_zone``, ``frequency_too_high``, ``time_out_of_range`` or ``not_future``.
    """
    prompt = check_prompt(arguments.get("prompt"), limits.max_prompt_chars)
    selector = _selector(arguments)
    value = arguments[selector]
    schedule_id = state.next_id()
    record: ScheduleRecord
    if selector == "after_seconds":
        seconds = _json_integer(value)
        if seconds is None or not 0 < seconds <= MAX_SAFE_INTEGER:
            raise ScheduleError(
                "invalid_rule",
                f"after_seconds must be a positive whole number of seconds, got {_show(value)}.",
            )
        target = _offset_target(now, seconds)
        record = AfterScheduleRecord(
            id=schedule_id,
            prompt=prompt,
            after_seconds=seconds,
            scheduled_at=format_instant(target),
        )
    elif selector == "every_seconds":
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
        target = _offset_target(now, seconds)
        record = EveryScheduleRecord(
            id=schedule_id,
            prompt=prompt,
            every_seconds=seconds,
            scheduled_at=format_instant(target),
        )
    elif selector == "daily_at":
        daily = parse_daily_at(value)
        rule = make_rule(daily.time_of_day, load_zone(daily.time_zone), daily.weekdays)
        found = first_after(rule, now)
        if found is None or found[1] > MAX_INSTANT:
            raise ScheduleError(
                "time_out_of_range",
                "`daily_at` has no occurrence before 9999-12-31T23:59:59.999Z, the latest time a "
                "reminder can have.",
            )
        record = DailyScheduleRecord(
            id=schedule_id,
            prompt=prompt,
            local_time=daily.local_time,
            time_zone=daily.time_zone,
            weekdays=list(daily.weekdays),
            scheduled_at=format_instant(Instant(found[1])),
        )
    else:
        target = parse_at(value)
        if target <= now:
            raise ScheduleError(
                "not_future",
                f"`at` names {format_instant(target)}, which is not after the current time "
                f"{format_instant(now)}; choose a time in the future.",
            )
        record = AtScheduleRecord(
            id=schedule_id, prompt=prompt, scheduled_at=format_instant(target)
        )
    if len(state) >= limits.max_active:
        raise ScheduleError(
            "invalid_rule",
            f"this session already has {len(state)} active reminders, the most it may have "
            f"(max_active = {limits.max_active}); delete one before creating another.",
        )
    if chain_depth > limits.max_chain_depth:
        raise ScheduleError(
            "invalid_rule",
            f"a reminder set now would be {chain_depth} deep in a chain of reminders each set "
            "during the previous one's turn, deeper than this session allows (max_chain_depth "
            f"= {limits.max_chain_depth}); do not create it, ask the user whether they want one.",
        )
    return create_change(record)


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
    prompt = value.strip()
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
            f"unknown argument {_names(unknown)}; schedule_create takes `prompt` and exactly one "
            "of `after_seconds`, `at`, `every_seconds`, `daily_at`.",
        )
    given = [key for key in SELECTORS if arguments.get(key) is not None]
    if len(given) != 1:
        found = "none" if not given else _names(given)
        raise ScheduleError(
            "invalid_selector",
            f"give exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at` "
            f"(found {found}).",
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


def _offset_target(now: Instant, seconds: int) -> Instant:
    target = now + seconds * MS_PER_SECOND
    if target > MAX_INSTANT:
        raise ScheduleError(
            "time_out_of_range",
            f"{seconds} seconds from now is past 9999-12-31T23:59:59.999Z, the latest time a "
            "reminder can have; choose a shorter delay.",
        )
    return Instant(target)


def _names(keys: list[str]) -> str:
    return ", ".join(f"`{escape_unencodable(key)}`" for key in keys)


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
        text = (
            "an object"
            if isinstance(value, dict)
            else "an array"
            if isinstance(value, list)
            else type(value).__name__
        )
    return text if len(text) <= 40 else text[:39] + "…"
