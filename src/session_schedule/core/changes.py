"""The ``schedule/change`` event, version 1 (SPEC §4): wire shapes and the strict codec.

The codec is the durable format's gatekeeper. :func:`decode_change` accepts exactly the shapes
below — no unknown versions, no extra or missing fields, no coercion (only JSON integers are
integers), only canonical instants and well-formed ids — and :func:`encode_change` writes the one
canonical byte form of a change. The promise: decoding raises nothing but a
``corrupt_schedule_log`` :class:`ScheduleError`, whatever the bytes; anything else is a bug.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias, final

import msgspec

from session_schedule.core.catalog import CATALOG
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import ScheduleId, parse_schedule_id
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.records import IdField, InstantField, ScheduleRecord

CHANGE_VERSION: Final = 1
CHANGE_EVENT_TYPE: Final = "schedule/change"


class _Change(
    msgspec.Struct,
    frozen=True,
    forbid_unknown_fields=True,
    rename="camel",
    tag_field="operation",
):
    version: Literal[1]


@final
class ScheduleCreateChange(_Change, tag="create"):
    """A new active record, stored whole."""

    schedule: ScheduleRecord


@final
class ScheduleDeleteChange(_Change, tag="delete"):
    """The terminal removal of an active record."""

    id: IdField


@final
class ScheduleDispatchChange(_Change, tag="dispatch"):
    """A follow-up was synchronously queued for the record.

    A one-shot dispatch carries only the id and ends the record. An Every dispatch carries
    ``acceptedAt``, the wall-clock decision time that selected the latest due occurrence, and
    advances the record (or ends it when the next target would leave the representable range).
    """

    id: IdField
    accepted_at: InstantField | msgspec.UnsetType = msgspec.UNSET


ScheduleChange: TypeAlias = ScheduleCreateChange | ScheduleDeleteChange | ScheduleDispatchChange
SCHEDULE_CHANGE_ENTRY: Final = CATALOG.register(
    CHANGE_EVENT_TYPE,
    version=CHANGE_VERSION,
    declaration=ScheduleChange,
    decode=lambda data, where: decode_change(data, where=where),
)


def create_change(record: ScheduleRecord) -> ScheduleCreateChange:
    return ScheduleCreateChange(version=CHANGE_VERSION, schedule=record)


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
_DECODER: Final = msgspec.json.Decoder(ScheduleChange)


def encode_change(change: ScheduleChange) -> bytes:
    """The canonical JSON bytes of ``change`` (same change, same bytes)."""
    return _ENCODER.encode(change)


def corrupt(where: str, problem: str) -> ScheduleError:
    """The ``corrupt_schedule_log`` error for ``problem`` found in the event ``where`` names."""
    return ScheduleError("corrupt_schedule_log", f"{CHANGE_EVENT_TYPE} {where} is corrupt: {problem}")


def decode_change(data: bytes | str, *, where: str = "event") -> ScheduleChange:
    """Strictly decode one ``schedule/change`` payload.

    ``where`` names the event in error messages (for example ``"at entry 17"``). Raises
    ``ScheduleError("corrupt_schedule_log", ...)`` — and nothing else — on any deviation.
    """
    try:
        change = _DECODER.decode(data)
    except msgspec.ValidationError as error:
        raise corrupt(where, _sentence(str(error))) from None
    except msgspec.DecodeError as error:
        raise corrupt(where, f"malformed JSON ({error})") from None
    _check_forms(change, where)
    return change


def convert_change(value: object, *, where: str = "event") -> ScheduleChange:
    """Strictly convert an already-parsed JSON value (dicts, lists, str, int …) to a change.

    The same rules and the same errors as :func:`decode_change`.
    """
    try:
        change = msgspec.convert(value, ScheduleChange, strict=True)
    except msgspec.ValidationError as error:
        raise corrupt(where, _sentence(str(error))) from None
    _check_forms(change, where)
    return change


def _sentence(msgspec_message: str) -> str:
    return msgspec_message[:1].lower() + msgspec_message[1:]


def _check_forms(change: ScheduleChange, where: str) -> None:
    """The exact id and instant forms, which the struct types only describe."""
    match change:
        case ScheduleCreateChange(schedule=record):
            _check_id(record.id, "$.schedule.id", where)
            _check_instant(record.scheduled_at, "$.schedule.scheduledAt", where)
        case ScheduleDeleteChange(id=schedule_id):
            _check_id(schedule_id, "$.id", where)
        case ScheduleDispatchChange(id=schedule_id, accepted_at=accepted_at):
            _check_id(schedule_id, "$.id", where)
            if not isinstance(accepted_at, msgspec.UnsetType):
                _check_instant(accepted_at, "$.acceptedAt", where)


def _check_id(text: str, path: str, where: str) -> None:
    if parse_schedule_id(text) is None:
        raise corrupt(where, f"expected a schedule id like `sch_1`, got {text!r} - at `{path}`")


def _check_instant(text: str, path: str, where: str) -> None:
    try:
        parse_instant(text)
    except ValueError as error:
        raise corrupt(where, f"{error} - at `{path}`") from None
