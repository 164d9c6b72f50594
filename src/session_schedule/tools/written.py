"""JSON values as a model or a client wrote them, numbers included: a number that no Python
number holds as written (``1e400``, ``NaN``, thousands of digits) is kept as its text, so that a
tool can be given the arguments back as JSON text and answer exactly as ``ScheduleTools.call``
does for that text, instead of a reader failing on them (or, worse, the ``inf`` it made failing
the next request that has to carry it)."""

from __future__ import annotations

import json
import math
from typing import Final, final

import msgspec

MAX_NUMBER_DIGITS: Final = 1_000
"""The longest integer read as a Python ``int``; a longer one is a :class:`WrittenNumber`."""


@final
class WrittenNumber(msgspec.Struct, frozen=True):
    """A number no Python number holds as written — an integer of more than
    :data:`MAX_NUMBER_DIGITS` digits, a float out of range (``1e400``), ``NaN`` or
    ``Infinity`` — kept as its text."""

    text: str


def loads_as_written(text: str | bytes, *, constants: bool) -> object:
    """``text`` decoded by the standard library's reader (lone surrogate escapes read as the
    lone surrogates they are), each number no Python number holds as written a
    :class:`WrittenNumber`; ``NaN`` and ``Infinity``, which are not JSON, are read so too with
    ``constants`` and refused otherwise. Recursive: bound the depth before
    (:func:`~session_schedule.tools.nesting.json_depth`). Raises ``ValueError`` for what does not
    decode."""
    return json.loads(
        text,
        parse_int=_read_int,
        parse_float=_read_float,
        parse_constant=WrittenNumber if constants else refuse_constant,
    )


def _read_int(text: str) -> int | WrittenNumber:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
        return WrittenNumber(text)
    return int(text)


def _read_float(text: str) -> float | WrittenNumber:
    value = float(text)
    return value if math.isfinite(value) else WrittenNumber(text)


def refuse_constant(name: str) -> object:
    """A ``parse_constant`` for the standard library's reader that refuses ``NaN``,
    ``Infinity`` and ``-Infinity``, which are not JSON (``ValueError``)."""
    raise ValueError(f"{name} is not JSON")


def holds_written_number(value: object) -> bool:
    """Whether ``value`` (JSON values) holds a :class:`WrittenNumber`; iterative."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, WrittenNumber):
            return True
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def json_text(value: object) -> str:
    """``value`` (JSON values) as JSON text, each :class:`WrittenNumber` as written and each
    lone surrogate as its ``\\uXXXX`` escape (ASCII text, as the standard library writes it).
    Recursive: for values whose depth the caller bounded."""
    if isinstance(value, WrittenNumber):
        return value.text
    if isinstance(value, dict):
        members = (f"{json.dumps(key)}:{json_text(item)}" for key, item in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(json_text(item) for item in value) + "]"
    return json.dumps(value)
