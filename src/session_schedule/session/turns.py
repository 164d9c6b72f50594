"""The ``turn/queued`` and ``turn/finished`` entries: the durable queue of conversation turns.

A turn is queued in the Session's log the moment it is accepted, before anything else records
that it was accepted — a reminder's follow-up is appended before its ``schedule/dispatch`` change,
on the same handle, so the barrier that makes the dispatch durable covers the follow-up too (a
crash keeps a prefix of the appends, never a gap). When the turn has run, a ``turn/finished``
entry names it by the position of its ``turn/queued`` entry. A queued turn with no finished entry
after it is pending: a restarted host runs it again, in order.

``turn/queued`` (version 1) records where the turn came from: ``origin`` ``schedule`` is a
reminder delivered by Schedule, with the ``occurrences`` (``id@scheduledAt`` keys) its frame
names; ``host`` is a prompt the host submitted. A zone reported with a prompt is not stored (it
is guidance for one turn, never a Session default): a prompt run again after a restart has none.
``turn/finished`` says whether the turn ``completed`` or ``failed``. Version 2 adds how many
``attempts`` it took (a turn retried after a transient failure) and, for a failed turn, its
``failure``: the error class, the HTTP status if any, and the message cut to a bound. A turn
answered at the first attempt is still written as version 1, byte for byte as before.

The decoders are strict: unknown, missing or duplicate keys, a non-canonical instant, an
occurrence key of the wrong form, occurrences on a host turn or none on a reminder, a negative
position all make the entry corrupt (``ValueError`` naming the problem; the
session codec locates it).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Annotated, Final, Literal, TypeAlias, TypeVar, final

import msgspec

from session_schedule.core.canonical import decode_canonical_lines
from session_schedule.core.catalog import CATALOG, BatchInstantField, strict_twin
from session_schedule.core.instants import (
    Instant,
    all_canonical,
    format_instant,
    parse_instant,
)
from session_schedule.core.records import InstantField

TURN_QUEUED_TYPE: Final = "turn/queued"
TURN_FINISHED_TYPE: Final = "turn/finished"
TURN_VERSION: Final = 1
TURN_FINISHED_RETRIED_VERSION: Final = 2
MAX_FAILURE_MESSAGE_CHARS: Final = 300
MAX_FAILURE_ERROR_CHARS: Final = 100

T = TypeVar("T")
TurnOrigin = Literal["schedule", "host"]
TurnOutcome = Literal["completed", "failed"]

OCCURRENCE_KEY_PATTERN: Final = (
    r"^sch_[1-9][0-9]{0,15}@[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z\Z"
)
_OCCURRENCE_KEY: Final = re.compile(OCCURRENCE_KEY_PATTERN.removeprefix("^").removesuffix("\\Z"))

OccurrenceKeyField: TypeAlias = Annotated[str, msgspec.Meta(pattern=OCCURRENCE_KEY_PATTERN)]
BatchOccurrenceKeyField: TypeAlias = Annotated[
    str, msgspec.Meta(extra_json_schema={"type": "string", "pattern": OCCURRENCE_KEY_PATTERN})
]
"""An :data:`OccurrenceKeyField` whose pattern the batch decoder checks (the same JSON schema;
see :mod:`session_schedule.core.catalog`)."""


@final
class TurnQueued(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    rename="camel",
    omit_defaults=True,
    gc=False,
):
    """A turn accepted into the Session's turn queue."""

    version: Literal[1]
    origin: TurnOrigin
    text: str
    """The turn's text, exactly as the host's ``run_turn`` receives it."""
    at: BatchInstantField
    """When it was queued, canonical UTC (an ``InstantField``)."""
    occurrences: tuple[BatchOccurrenceKeyField, ...] = ()
    """A reminder's occurrence keys, in frame order (absent on a host turn)."""


TURN_QUEUED_ENTRY: Final = CATALOG.register(
    TURN_QUEUED_TYPE,
    versions=(TURN_VERSION,),
    declaration=TurnQueued,
    decode=lambda data, _where: decode_turn_queued(data),
    decode_many=lambda payloads: decoded_turns_queued(payloads),  # noqa: PLW0108 - defined below
)


@final
class TurnFailure(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    rename="camel",
    omit_defaults=True,
    gc=False,
):
    """Why a turn failed: a bounded cause, never the whole error."""

    error: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_FAILURE_ERROR_CHARS)]
    """The error's class name (the SDK's, when the harness wrapped one)."""
    status: Annotated[int, msgspec.Meta(ge=100, le=599)] | None = None
    """The HTTP status the endpoint answered with, if it answered."""
    message: Annotated[str, msgspec.Meta(max_length=MAX_FAILURE_MESSAGE_CHARS)]


@final
class TurnFinished(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    rename="camel",
    omit_defaults=True,
    gc=False,
):
    """The turn queued at entry ``turn`` has run."""

    version: Literal[1, 2]
    turn: Annotated[int, msgspec.Meta(ge=0)]
    """The position of its ``turn/queued`` entry."""
    outcome: TurnOutcome
    at: BatchInstantField
    """Canonical UTC (an ``InstantField``)."""
    attempts: Annotated[int, msgspec.Meta(ge=1)] = 1
    """How many times it ran (version 2; 1 is not written)."""
    failure: TurnFailure | None = None
    """Why it failed (version 2, a failed turn only; absent when nothing is known)."""


TURN_FINISHED_ENTRY: Final = CATALOG.register(
    TURN_FINISHED_TYPE,
    versions=(TURN_VERSION, TURN_FINISHED_RETRIED_VERSION),
    declaration=TurnFinished,
    decode=lambda data, _where: decode_turn_finished(data),
    decode_many=lambda payloads: decoded_turns_finished(payloads),  # noqa: PLW0108 - defined below
)

_QUEUED: Final = msgspec.json.Decoder(TurnQueued)
_FINISHED: Final = msgspec.json.Decoder(TurnFinished)
# The twins that decode a payload with a doubt, field patterns included: the errors of a bad one.
_STRICT_QUEUED: Final = msgspec.json.Decoder(
    strict_twin(TurnQueued, {"at": InstantField, "occurrences": tuple[OccurrenceKeyField, ...]})
)
_STRICT_FINISHED: Final = msgspec.json.Decoder(strict_twin(TurnFinished, {"at": InstantField}))
_ENCODER: Final = msgspec.json.Encoder()
_AT: Final = attrgetter("at")
_ORIGIN: Final = attrgetter("origin")
_OCCURRENCES: Final = attrgetter("occurrences")
_QUEUED_SHAPES: Final = frozenset({("schedule", True), ("host", False)})
"""A turn's origin and whether it names occurrences, as :func:`check_turn_queued` allows."""
_FINISHED_SHAPE: Final = attrgetter("version", "attempts", "failure", "outcome")
_PLAIN_FINISHED: Final = frozenset({(1, 1, None, "completed"), (1, 1, None, "failed")})
_ID_FORM: Final = "sch_[1-9][0-9]{0,15}"
_IDS: Final = re.compile(f"(?:{_ID_FORM}\n)*{_ID_FORM}")
"""The ids of occurrence keys joined by newlines (a key is the id, "@" and the instant)."""
_FIRST: Final = itemgetter(0)
_THIRD: Final = itemgetter(2)


def decode_turn_queued(data: bytes) -> TurnQueued:
    """Strictly decode one ``turn/queued`` payload; raises ``ValueError`` saying what is wrong."""
    try:
        queued = _QUEUED.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    else:
        # Canonical bytes name each key once; a value that keeps every rule is the answer.
        if (
            _ENCODER.encode(queued) == data
            and all(_OCCURRENCE_KEY.fullmatch(key) for key in queued.occurrences)
            and _holds(check_turn_queued, queued)
        ):
            return queued
    queued = _decode_slowly(_STRICT_QUEUED, _QUEUED, data)
    check_turn_queued(queued)
    return queued


def decoded_turns_queued(payloads: Sequence[bytes]) -> list[TurnQueued] | None:
    """What :func:`decode_turn_queued` returns for each of ``payloads`` when each is in its
    canonical form (so it repeats no key), decoded as one buffer; ``None`` at the first doubt
    (never raises for bad bytes): the catalog's batch decoder of ``turn/queued``."""
    queued = decode_canonical_lines(_QUEUED, _ENCODER, payloads)
    if queued is None or not all_canonical(list(map(_AT, queued))):
        return None
    keys = list(itertools.chain.from_iterable(map(_OCCURRENCES, queued)))
    if keys:
        # Each key is an id, "@" and an instant, neither of which holds an "@": split at its
        # last one (a key without one has an empty id), the ids are matched joined by newlines
        # and the instants checked together.
        parts = list(map(str.rpartition, keys, repeat("@")))
        ids = "\n".join(map(_FIRST, parts))
        if (
            ids.count("\n") != len(keys) - 1
            or _IDS.fullmatch(ids) is None
            or not all_canonical(list(map(_THIRD, parts)))
        ):
            return None
    shapes = set(zip(map(_ORIGIN, queued), map(bool, map(_OCCURRENCES, queued)), strict=True))
    return queued if shapes <= _QUEUED_SHAPES else None


def decoded_turns_finished(payloads: Sequence[bytes]) -> list[TurnFinished] | None:
    """:func:`decoded_turns_queued` for ``turn/finished``."""
    finished = decode_canonical_lines(_FINISHED, _ENCODER, payloads)
    if finished is None or not all_canonical(list(map(_AT, finished))):
        return None
    for shape in set(map(_FINISHED_SHAPE, finished)) - _PLAIN_FINISHED:
        if _finished_fault(*shape) is not None:
            return None
    return finished


def decode_turn_finished(data: bytes) -> TurnFinished:
    """Strictly decode one ``turn/finished`` payload; raises ``ValueError`` saying what is
    wrong."""
    try:
        finished = _FINISHED.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    else:
        if _ENCODER.encode(finished) == data and _holds(_check_finished, finished):
            return finished
    finished = _decode_slowly(_STRICT_FINISHED, _FINISHED, data)
    _check_finished(finished)
    return finished


def _check_finished(finished: TurnFinished) -> None:
    _check_instant(finished.at)
    _check_turn_finished(finished)


def _check_turn_finished(finished: TurnFinished) -> None:
    fault = _finished_fault(*_FINISHED_SHAPE(finished))
    if fault is not None:
        raise ValueError(fault)


def _finished_fault(
    version: int, attempts: int, failure: TurnFailure | None, outcome: TurnOutcome
) -> str | None:
    """The first rule of a finished turn's version, attempts, failure and outcome it breaks."""
    if version == TURN_VERSION:
        if attempts != 1:
            return "version 1 does not record attempts - at `$.attempts`"
        if failure is not None:
            return "version 1 does not record a failure - at `$.failure`"
    elif attempts == 1 and failure is None:
        return "version 2 records attempts or a failure - at `$.version`"
    if failure is not None and outcome != "failed":
        return "only a failed turn records a failure - at `$.failure`"
    return None


def check_turn_queued(queued: TurnQueued) -> None:
    """The rules the struct types only describe; raises ``ValueError`` naming the first broken."""
    _check_instant(queued.at)
    for index, key in enumerate(queued.occurrences):
        try:
            parse_instant(key.partition("@")[2])
        except ValueError as error:
            raise ValueError(f"{error} - at `$.occurrences[{index}]`") from None
    if queued.origin == "schedule":
        if not queued.occurrences:
            raise ValueError("a schedule turn names its occurrences - at `$.occurrences`")
    elif queued.occurrences:
        raise ValueError("only a schedule turn names occurrences - at `$.occurrences`")


def turn_queued(
    text: str,
    *,
    at: Instant,
    origin: TurnOrigin,
    occurrences: tuple[str, ...] = (),
) -> TurnQueued:
    """A ``turn/queued`` payload; ``ValueError`` for a combination the decoder would refuse."""
    for key in occurrences:
        if _OCCURRENCE_KEY.fullmatch(key) is None:
            raise ValueError(f"{key!r} is not an occurrence key like `sch_1@<canonical instant>`")
    queued = TurnQueued(
        version=TURN_VERSION,
        origin=origin,
        text=text,
        at=format_instant(at),
        occurrences=occurrences,
    )
    check_turn_queued(queued)
    return queued


def turn_finished(
    turn: int,
    *,
    at: Instant,
    outcome: TurnOutcome,
    attempts: int = 1,
    failure: TurnFailure | None = None,
) -> TurnFinished:
    """A ``turn/finished`` payload: version 1 unless it took more than one attempt or records
    a failure. ``ValueError`` for a combination the decoder would refuse."""
    if attempts < 1:
        raise ValueError(f"a turn runs at least once, not {attempts} times")
    retried = attempts != 1 or failure is not None
    finished = TurnFinished(
        version=TURN_FINISHED_RETRIED_VERSION if retried else TURN_VERSION,
        turn=turn,
        outcome=outcome,
        at=format_instant(at),
        attempts=attempts,
        failure=failure,
    )
    _check_turn_finished(finished)
    return finished


def turn_failure(error: str, *, message: str, status: int | None = None) -> TurnFailure:
    """A bounded :class:`TurnFailure`: the class name and message are cut to their bounds, and
    a status outside 100-599 is left out."""
    return TurnFailure(
        error=_cut(error or "Exception", MAX_FAILURE_ERROR_CHARS),
        status=status if status is not None and 100 <= status <= 599 else None,
        message=_cut(message, MAX_FAILURE_MESSAGE_CHARS),
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _holds(check: Callable[[T], None], value: T) -> bool:
    """Whether ``value`` keeps the rules ``check`` raises ``ValueError`` for."""
    try:
        check(value)
    except ValueError:
        return False
    return True


def _decode_slowly(
    strict: msgspec.json.Decoder[msgspec.Struct], decoder: msgspec.json.Decoder[T], data: bytes
) -> T:
    """The value of a payload with a doubt, decoded with its type's twin first (field patterns
    included), so a bad one raises the error of its first bad field."""
    _decode(strict, data)
    return decoder.decode(data)  # what the twin decodes, the declaration decodes


def _decode(decoder: msgspec.json.Decoder[T], data: bytes) -> T:
    try:
        value = decoder.decode(data)
    except msgspec.ValidationError as error:
        raise ValueError(str(error)[:1].lower() + str(error)[1:]) from None
    except msgspec.DecodeError as error:
        raise ValueError(f"malformed JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"invalid UTF-8 ({error})") from None
    # msgspec keeps the last of repeated keys; a repeated key is damage, not a choice. Bytes
    # that are the value's own encoding name each key once: only other bytes need the search.
    if _ENCODER.encode(value) != data:
        json.loads(data, object_pairs_hook=_refuse_repeated_keys)
    return value


def _check_instant(text: str) -> None:
    try:
        parse_instant(text)
    except ValueError as error:
        raise ValueError(f"{error} - at `$.at`") from None


def _refuse_repeated_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen
