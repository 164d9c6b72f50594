"""The ``framework/messages`` entry: a framework's own conversation history, kept in the log.

A framework adapter that keeps its conversation in the Session (``durable=True``) appends, when a
turn has run, one ``framework/messages`` entry (version 1) with the messages that turn added, in
the framework's own serialised form: the Anthropic Messages API's ``MessageParam`` objects, the
Chat Completions API's message objects, PydanticAI's ``ModelMessagesTypeAdapter`` JSON. The entry
names the ``framework`` that wrote it, the ``turn`` it answers (the position of its
``turn/queued`` entry) and when it was written (``at``). It is appended on the same handle right
before the turn's ``turn/finished`` entry, so the barrier that makes the turn finished makes its
messages durable too. A session that never uses it holds no such entry: its log is unchanged.

:func:`framework_history` reads the conversation back: the messages of every turn that finished
``completed``, in log order. A turn that was running when the process died has no
``turn/finished`` entry and runs again after the restart: its earlier entry, if one reached the
disk, is left out, and the entry of the run that finished is the turn's (the last one naming it).

The decoder is strict: unknown, missing or repeated keys, a non-canonical instant or encoding, a
framework name outside ``[a-z][a-z0-9-]*``, a negative turn, no message or a message that is not
a JSON object all make the entry corrupt (``ValueError`` naming the problem; the session codec
locates it). An entry that names a position holding no ``turn/queued`` entry, or one after it,
is reported as corruption by :func:`framework_history`, never skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Final, Literal, TypeAlias, final

import msgspec

from session_schedule.core.canonical import NESTED_TOO_DEEPLY, why_not_canonical_json
from session_schedule.core.catalog import CATALOG
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.records import InstantField
from session_schedule.session.errors import SessionCorrupt
from session_schedule.session.port import LogEntry
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    TurnFinished,
)

FRAMEWORK_MESSAGES_TYPE: Final = "framework/messages"
FRAMEWORK_MESSAGES_VERSION: Final = 1
FRAMEWORK_NAME_PATTERN: Final = r"^[a-z][a-z0-9-]{0,31}\Z"

FrameworkName: TypeAlias = Annotated[str, msgspec.Meta(pattern=FRAMEWORK_NAME_PATTERN)]
JsonValue: TypeAlias = Annotated[
    object, msgspec.Meta(extra_json_schema={"description": "any JSON value"})
]
Message: TypeAlias = dict[str, JsonValue]
"""One message in the framework's serialised form: a JSON object."""


@final
class FrameworkMessages(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """The messages one turn added to a framework's conversation."""

    version: Literal[1]
    framework: FrameworkName
    """The adapter that wrote it: ``anthropic``, ``openai`` or ``pydantic-ai``."""
    turn: Annotated[int, msgspec.Meta(ge=0)]
    """The position of the turn's ``turn/queued`` entry."""
    at: InstantField
    """When the turn's messages were recorded, canonical UTC."""
    messages: Annotated[tuple[Message, ...], msgspec.Meta(min_length=1)]
    """The messages the turn added, in order, as the framework serialises them."""


FRAMEWORK_MESSAGES_ENTRY: Final = CATALOG.register(
    FRAMEWORK_MESSAGES_TYPE,
    versions=(FRAMEWORK_MESSAGES_VERSION,),
    declaration=FrameworkMessages,
    decode=lambda data, _where: decode_framework_messages(data),
)

_DECODER: Final = msgspec.json.Decoder(FrameworkMessages)
_ENCODER: Final = msgspec.json.Encoder()


def decode_framework_messages(data: bytes) -> FrameworkMessages:
    """Strictly decode one ``framework/messages`` payload in its canonical byte form (so no
    repeated key); raises ``ValueError`` saying what is wrong."""
    try:
        entry = _DECODER.decode(data)
    except msgspec.ValidationError as error:
        raise ValueError(str(error)[:1].lower() + str(error)[1:]) from None
    except msgspec.DecodeError as error:
        raise ValueError(f"malformed JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"invalid UTF-8 ({error})") from None
    except RecursionError:
        raise ValueError(NESTED_TOO_DEEPLY) from None
    try:
        canonical = _ENCODER.encode(entry)
    except RecursionError:
        raise ValueError(NESTED_TOO_DEEPLY) from None
    if canonical != data:
        raise ValueError(why_not_canonical_json(data))
    try:
        parse_instant(entry.at)
    except ValueError as error:
        raise ValueError(f"{error} - at `$.at`") from None
    return entry


def framework_messages(
    framework: str, *, turn: int, at: Instant, messages: Sequence[Mapping[str, object]]
) -> FrameworkMessages:
    """A ``framework/messages`` payload; ``ValueError`` for one the decoder would refuse (the
    append checks the rest: the messages must encode as canonical JSON)."""
    entry = FrameworkMessages(
        version=FRAMEWORK_MESSAGES_VERSION,
        framework=framework,
        turn=turn,
        at=format_instant(at),
        messages=tuple(dict(message) for message in messages),
    )
    return decode_framework_messages(_ENCODER.encode(entry))


def framework_history(
    session_id: str, entries: Sequence[LogEntry], framework: str
) -> list[Message]:
    """The conversation ``framework`` kept in ``entries`` (a session's log): the messages of
    every turn that finished ``completed``, in log order, each turn's from the last entry that
    names it.

    Raises :class:`SessionCorrupt` for an entry that names a position holding no
    ``turn/queued`` entry, or one after it.
    """
    queued: set[int] = set()
    completed: set[int] = set()
    latest: dict[int, FrameworkMessages] = {}
    for entry in entries:
        payload = entry.payload
        if entry.type == TURN_QUEUED_TYPE:
            queued.add(entry.position)
        elif entry.type == TURN_FINISHED_TYPE and isinstance(payload, TurnFinished):
            if payload.outcome == "completed":
                completed.add(payload.turn)
        elif entry.type == FRAMEWORK_MESSAGES_TYPE and isinstance(payload, FrameworkMessages):
            if payload.turn not in queued:
                raise SessionCorrupt(
                    session_id,
                    f"session {session_id} is corrupt at entry {entry.position}: it holds the "
                    f"messages of entry {payload.turn}, which is not a turn queued before it; "
                    "the storage was left untouched for inspection",
                )
            if payload.framework == framework:
                # A dict keeps the first insertion's place: drop it so the last entry's counts.
                latest.pop(payload.turn, None)
                latest[payload.turn] = payload
    history: list[Message] = []
    for turn, payload in latest.items():
        if turn in completed:
            history.extend(payload.messages)
    return history
