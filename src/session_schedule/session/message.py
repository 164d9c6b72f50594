"""The ``message`` entry: one turn of the conversation transcript, version 1.

A message records who spoke (``role``), what was said (``content``), when (``at``, canonical UTC)
and where the turn came from (``origin``): a ``user`` turn is typed by a ``person`` or queued by
Schedule as a ``followup`` — the two must stay distinguishable in the transcript — an
``assistant`` turn comes from the ``model`` and a ``tool`` turn from a ``tool``. An assistant turn
may carry OpenAI-style ``toolCalls`` (their ``arguments`` are JSON text); a tool turn names the
call it answers in ``toolCallId``. Absent optional fields are omitted on the wire.

The decoder is strict: unknown or missing fields, a non-canonical instant, a role/origin pair
other than those above, tool calls outside an assistant turn, a tool turn without its call id or
arguments that are not JSON all make the entry corrupt (``ValueError`` naming the problem; the
session codec locates it).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Annotated, Final, Literal, TypeAlias, final

import msgspec

from session_schedule.core.canonical import (
    NESTED_TOO_DEEPLY,
    decode_canonical_lines,
    why_not_canonical_json,
)
from session_schedule.core.catalog import CATALOG, BatchInstantField, strict_twin
from session_schedule.core.instants import (
    Instant,
    all_canonical,
    canonical_instant,
    format_instant,
    parse_instant,
)
from session_schedule.core.records import InstantField

MESSAGE_ENTRY_TYPE: Final = "message"
MESSAGE_VERSION: Final = 1

Role = Literal["user", "assistant", "tool"]
Origin = Literal["person", "followup", "model", "tool"]
UserOrigin = Literal["person", "followup"]

NonEmpty: TypeAlias = Annotated[str, msgspec.Meta(min_length=1)]


@final
class ToolCall(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A function call requested by the model, OpenAI style."""

    id: NonEmpty
    name: NonEmpty
    arguments: str
    """The arguments as JSON text, exactly as the model produced them."""


@final
class MessageEntry(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel", gc=False
):
    """One transcript turn."""

    role: Role
    content: str
    at: BatchInstantField
    """Canonical UTC (an ``InstantField``, checked as the decoders say)."""
    origin: Origin
    tool_calls: tuple[ToolCall, ...] | msgspec.UnsetType = msgspec.UNSET
    """Calls requested by an assistant turn (absent otherwise)."""
    tool_call_id: NonEmpty | msgspec.UnsetType = msgspec.UNSET
    """The call a tool turn answers (present exactly on tool turns)."""


MESSAGE_ENTRY: Final = CATALOG.register(
    MESSAGE_ENTRY_TYPE,
    versions=(MESSAGE_VERSION,),
    declaration=MessageEntry,
    decode=lambda data, _where: decode_message(data),
    decode_many=lambda payloads: decoded_messages(payloads),  # noqa: PLW0108 - defined below
)

_ORIGINS: Final[dict[Role, frozenset[Origin]]] = {
    "user": frozenset({"person", "followup"}),
    "assistant": frozenset({"model"}),
    "tool": frozenset({"tool"}),
}
_DECODER: Final = msgspec.json.Decoder(MessageEntry)
_STRICT: Final = msgspec.json.Decoder(strict_twin(MessageEntry, {"at": InstantField}))
"""Decodes a payload :data:`_DECODER`'s value has a doubt about: the errors of a bad one."""
_ENCODER: Final = msgspec.json.Encoder()
_AT: Final = attrgetter("at")
_SHAPE: Final = attrgetter("role", "origin", "tool_calls", "tool_call_id")
_PLAIN_SHAPES: Final = frozenset(
    {
        ("user", "person", msgspec.UNSET, msgspec.UNSET),
        ("user", "followup", msgspec.UNSET, msgspec.UNSET),
        ("assistant", "model", msgspec.UNSET, msgspec.UNSET),
    }
)
"""The role, origin, tool calls and call id of the turns that need no more checks."""


def decode_message(data: bytes) -> MessageEntry:
    """Strictly decode one ``message`` payload in its canonical byte form (so no repeated key);
    raises ``ValueError`` saying what is wrong."""
    try:
        message = _DECODER.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    else:
        if (
            _ENCODER.encode(message) == data
            and canonical_instant(message.at) is not None
            and _shape_fault(*_SHAPE(message)) is None
        ):
            return message
    return _decode_message_slowly(data)


def _decode_message_slowly(data: bytes) -> MessageEntry:
    """:func:`decode_message` of a payload with a doubt, step by step: its twin with the
    instant's pattern first, so the error is the one for its first bad field."""
    try:
        _STRICT.decode(data)
    except msgspec.ValidationError as error:
        raise ValueError(str(error)[:1].lower() + str(error)[1:]) from None
    except msgspec.DecodeError as error:
        raise ValueError(f"malformed JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"invalid UTF-8 ({error})") from None
    except RecursionError:
        raise ValueError(NESTED_TOO_DEEPLY) from None
    message = _DECODER.decode(data)  # what the twin decodes, the declaration decodes
    if _ENCODER.encode(message) != data:
        raise ValueError(why_not_canonical_json(data))
    check_message(message)
    return message


def decoded_messages(payloads: Sequence[bytes]) -> list[MessageEntry] | None:
    """What :func:`decode_message` returns for each of ``payloads``, decoded and compared as one
    buffer, or ``None`` at the first doubt (never raises for bad bytes): the catalog's batch
    decoder of ``message``."""
    messages = decode_canonical_lines(_DECODER, _ENCODER, payloads)
    if messages is None or not all_canonical(list(map(_AT, messages))):
        return None
    # Every turn's role, origin, tool calls and call id at once: most turns share a few shapes.
    for shape in set(map(_SHAPE, messages)) - _PLAIN_SHAPES:
        if _shape_fault(*shape) is not None:
            return None
    return messages


def check_message(message: MessageEntry) -> None:
    """The rules the struct types only describe; raises ``ValueError`` naming the first broken."""
    try:
        parse_instant(message.at)
    except ValueError as error:
        raise ValueError(f"{error} - at `$.at`") from None
    fault = _shape_fault(*_SHAPE(message))
    if fault is not None:
        raise ValueError(fault)


def _shape_fault(
    role: Role,
    origin: Origin,
    tool_calls: tuple[ToolCall, ...] | msgspec.UnsetType,
    tool_call_id: str | msgspec.UnsetType,
) -> str | None:
    """The first rule :func:`check_message` checks after the instant that a turn of this role,
    origin, tool calls and call id breaks, or ``None``."""
    if origin not in _ORIGINS[role]:
        return f"a {role} turn cannot have origin {origin!r}"
    if role != "assistant" and not isinstance(tool_calls, msgspec.UnsetType):
        return "only an assistant turn may carry `toolCalls`"
    if (role == "tool") == isinstance(tool_call_id, msgspec.UnsetType):
        return "a tool turn, and only a tool turn, carries `toolCallId`"
    if not isinstance(tool_calls, msgspec.UnsetType):
        for index, call in enumerate(tool_calls):
            try:
                msgspec.json.decode(call.arguments)
            except (msgspec.DecodeError, UnicodeDecodeError):
                return (
                    f"tool call arguments are not JSON text - at `$.toolCalls[{index}].arguments`"
                )
            except RecursionError:
                return (
                    "tool call arguments are nested too deeply - at "
                    f"`$.toolCalls[{index}].arguments`"
                )
    return None


def user_message(content: str, *, at: Instant, origin: UserOrigin = "person") -> MessageEntry:
    """A user turn; ``origin="followup"`` marks one queued by Schedule."""
    return MessageEntry(role="user", content=content, at=format_instant(at), origin=origin)


def assistant_message(
    content: str, *, at: Instant, tool_calls: tuple[ToolCall, ...] = ()
) -> MessageEntry:
    """A model turn, with the tool calls it requested (if any)."""
    if not tool_calls:
        return MessageEntry(
            role="assistant", content=content, at=format_instant(at), origin="model"
        )
    return MessageEntry(
        role="assistant",
        content=content,
        at=format_instant(at),
        origin="model",
        tool_calls=tool_calls,
    )


def tool_message(content: str, *, at: Instant, tool_call_id: str) -> MessageEntry:
    """The result of the tool call ``tool_call_id``."""
    return MessageEntry(
        role="tool",
        content=content,
        at=format_instant(at),
        origin="tool",
        tool_call_id=tool_call_id,
    )
