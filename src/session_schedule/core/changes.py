"""The ``schedule/change`` event, versions 1 and 2 (SPEC §4, §10): wire shapes and the strict codec.

Version 2 exists for one change only: the create of a ``daily`` record. A version-1 create holds
an ``after``, ``at`` or ``every`` record and a version-2 create a ``daily`` one; deletes and
dispatches are version 1 (a ``daily`` dispatch carries ``acceptedAt``, as an Every dispatch does).

The codec is the durable format's gatekeeper. :func:`decode_change` accepts exactly what a create,
delete or dispatch decision writes: the shapes below — no unknown versions, no extra or missing
fields, no coercion (only JSON integers are integers), only canonical instants and well-formed
ids — in their one canonical byte form (so no repeated key, see
:mod:`session_schedule.core.canonical`), with a prompt that passes the prompt rule of
:mod:`session_schedule.core.prompts` and is stored trimmed. :func:`encode_change` writes that
canonical byte form. The promise: decoding raises nothing but a
``corrupt_schedule_log`` :class:`ScheduleError`, whatever the bytes; anything else is a bug.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, Literal, TypeAlias, final

import msgspec

from session_schedule.core.canonical import NESTED_TOO_DEEPLY, why_not_canonical_json
from session_schedule.core.catalog import CATALOG
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, format_instant, why_not_canonical
from session_schedule.core.prompts import describe_fault, is_trimmed, prompt_fault
from session_schedule.core.records import (
    WEEKDAYS,
    DailyScheduleRecord,
    IdField,
    InstantField,
    ScheduleRecord,
    record_kind,
)
from session_schedule.core.time_input import is_supported_zone

CHANGE_VERSION: Final = 1
DAILY_CREATE_VERSION: Final = 2
CHANGE_VERSIONS: Final = (CHANGE_VERSION, DAILY_CREATE_VERSION)
CHANGE_EVENT_TYPE: Final = "schedule/change"


class _Change(
    msgspec.Struct,
    frozen=True,
    forbid_unknown_fields=True,
    rename="camel",
    tag_field="operation",
):
    pass


@final
class ScheduleCreateChange(_Change, tag="create", frozen=True):
    """A new active record, stored whole (version 2 for a ``daily`` record, else version 1)."""

    version: Literal[1, 2]
    schedule: ScheduleRecord


@final
class ScheduleDeleteChange(_Change, tag="delete", frozen=True):
    """The terminal removal of an active record."""

    version: Literal[1]
    id: IdField


@final
class ScheduleDispatchChange(_Change, tag="dispatch", frozen=True):
    """A follow-up was synchronously queued for the record.

    A one-shot dispatch carries only the id and ends the record. An Every dispatch carries
    ``acceptedAt``, the wall-clock decision time that selected the latest due occurrence, and
    advances the record (or ends it when the next target would leave the representable range).
    """

    version: Literal[1]
    id: IdField
    accepted_at: InstantField | msgspec.UnsetType = msgspec.UNSET


ScheduleChange: TypeAlias = ScheduleCreateChange | ScheduleDeleteChange | ScheduleDispatchChange
SCHEDULE_CHANGE_ENTRY: Final = CATALOG.register(
    CHANGE_EVENT_TYPE,
    versions=CHANGE_VERSIONS,
    declaration=ScheduleChange,
    decode=lambda data, where: decode_change(data, where=where),
)


def create_change(record: ScheduleRecord) -> ScheduleCreateChange:
    version: Literal[1, 2] = (
        DAILY_CREATE_VERSION if isinstance(record, DailyScheduleRecord) else CHANGE_VERSION
    )
    return ScheduleCreateChange(version=version, schedule=record)


def delete_change(schedule_id: ScheduleId) -> ScheduleDeleteChange:
    return ScheduleDeleteChange(version=CHANGE_VERSION, id=schedule_id)


def dispatch_change(
    schedule_id: ScheduleId, accepted_at: Instant | None = None
) -> ScheduleDispatchChange:
    """A one-shot dispatch (no ``accepted_at``) or an Every dispatch decided at ``accepted_at``."""
    if accepted_at is None:
        return ScheduleDispatchChange(version=CHANGE_VERSION, id=schedule_id)
    return ScheduleDispatchChange(
        version=CHANGE_VERSION, id=schedule_id, accepted_at=format_instant(accepted_at)
    )


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final[msgspec.json.Decoder[ScheduleChange]] = msgspec.json.Decoder(ScheduleChange)


def encode_change(change: ScheduleChange) -> bytes:
    """The canonical JSON bytes of ``change`` (same change, same bytes)."""
    return _ENCODER.encode(change)


def corrupt(where: str, problem: str) -> ScheduleError:
    """The ``corrupt_schedule_log`` error for ``problem`` found in the event ``where`` names."""
    subject = f"{CHANGE_EVENT_TYPE} {where}" if where else CHANGE_EVENT_TYPE
    return ScheduleError("corrupt_schedule_log", f"{subject} is corrupt: {problem}")


def decode_change(data: bytes | str, *, where: str = "") -> ScheduleChange:
    """Strictly decode one ``schedule/change`` payload.

    ``where`` names the event in error messages (for example ``"at entry 17"``). Raises
    ``ScheduleError("corrupt_schedule_log", ...)`` — and nothing else — on any deviation.
    """
    try:
        change = _DECODER.decode(data)
    except msgspec.ValidationError as error:
        raise corrupt(where, _explain(str(error), lambda: msgspec.json.decode(data))) from None
    except msgspec.DecodeError as error:
        raise corrupt(where, f"malformed JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise corrupt(where, f"invalid UTF-8 in a string ({error.reason})") from None
    except RecursionError:
        raise corrupt(where, NESTED_TOO_DEEPLY) from None
    raw = data if isinstance(data, bytes) else data.encode()
    if _ENCODER.encode(change) != raw:
        raise corrupt(where, why_not_canonical_json(raw))
    return _checked(change, where)


def convert_change(value: object, *, where: str = "") -> ScheduleChange:
    """Strictly convert an already-parsed JSON value (dicts, lists, str, int …) to a change.

    The same rules and the same errors as :func:`decode_change`.
    """
    try:
        change: ScheduleChange = msgspec.convert(value, ScheduleChange, strict=True)
    except msgspec.ValidationError as error:
        raise corrupt(where, _explain(str(error), lambda: value)) from None
    except RecursionError:
        raise corrupt(where, NESTED_TOO_DEEPLY) from None
    return _checked(change, where)


def _checked(change: ScheduleChange, where: str) -> ScheduleChange:
    """``change``, once the rules no type states hold: a create's prompt is what a create stores,
    its version matches its kind, and a ``daily`` record names a supported zone and lists its
    weekdays distinct, in week order."""
    if not isinstance(change, ScheduleCreateChange):
        return change
    record = change.schedule
    prompt = record.prompt
    # A shortcut: a printable prompt holds no control character (nor newline or tab) and no lone
    # surrogate, so one that is also trimmed is valid. Anything else goes through the prompt rule.
    if not prompt.isprintable() or prompt.strip() != prompt:
        _check_prompt(prompt, where)
    daily = isinstance(record, DailyScheduleRecord)
    if daily != (change.version == DAILY_CREATE_VERSION):
        kind = "a `daily`" if daily else f"an `{record_kind(record)}`"
        expected = DAILY_CREATE_VERSION if daily else CHANGE_VERSION
        raise corrupt(
            where,
            f"{kind} schedule must be created with version {expected}, not {change.version} "
            "- at `$.version`",
        )
    if isinstance(record, DailyScheduleRecord):
        if not is_supported_zone(record.time_zone):
            raise corrupt(
                where,
                f"{record.time_zone!r} is not a supported time zone - at `$.schedule.timeZone`",
            )
        if list(record.weekdays) != sorted(set(record.weekdays), key=WEEKDAYS.index):
            raise corrupt(
                where,
                "weekdays must be distinct and in week order, Monday first "
                "- at `$.schedule.weekdays`",
            )
    return change


def _check_prompt(prompt: str, where: str) -> None:
    """A stored prompt is what a create writes: trimmed, and valid by the prompt rule."""
    if not is_trimmed(prompt):
        raise corrupt(
            where,
            "the prompt has leading or trailing whitespace; a create stores it trimmed - at "
            "`$.schedule.prompt`",
        )
    fault = prompt_fault(prompt, max_chars=None)
    if fault is not None:
        raise corrupt(where, f"{describe_fault(fault)} - at `$.schedule.prompt`")


_PATTERN_FAILURE: Final = re.compile(r"Expected `str` matching regex '.*' - at `(\$[^`]*)`")


def _explain(message: str, document: Callable[[], object]) -> str:
    """msgspec's message, with a failed id, instant or time pattern said in words."""
    failure = _PATTERN_FAILURE.fullmatch(message)
    if failure is None:
        return message[:1].lower() + message[1:]
    path = failure.group(1)
    try:
        value = document()
    except (msgspec.DecodeError, RecursionError):
        return message[:1].lower() + message[1:]
    for key in path.split(".")[1:]:
        value = value[key] if isinstance(value, dict) else None
    text = str(value)
    if path.endswith(("scheduledAt", "acceptedAt")):
        return f"{why_not_canonical(text)} - at `{path}`"
    if path.endswith(".time"):
        return f"expected a wall-clock time of the form HH:MM:SS.sss, got {text!r} - at `{path}`"
    return f"expected a schedule id like `sch_1`, got {text!r} - at `{path}`"
