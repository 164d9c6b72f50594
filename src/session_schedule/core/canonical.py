"""Canonical JSON: the one byte form the durable log holds, and why other bytes are not it.

Every payload and envelope is written by msgspec: fields in declaration order, each once, no
whitespace, one escape for each character that needs one. A strict reader decodes, encodes the
value again and compares the bytes: they are equal exactly when the input is the canonical form.
One comparison so rejects what the decoder alone lets through — above all a **repeated key**
(msgspec, like most JSON parsers, lets the last one win, so
``{"operation":"delete","version":1,"id":"sch_9","id":"sch_1"}`` would delete ``sch_1``) — and
also whitespace, another key order and other escapes: forms no writer of the log produces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final, TypeVar

import msgspec

_T = TypeVar("_T")

NESTED_TOO_DEEPLY: Final = "the JSON is nested too deeply"
"""What a reader says of bytes nested deeper than its parser goes (they are never written)."""
_NOT_CANONICAL: Final = (
    "the bytes are not the canonical encoding of their value (whitespace, key order or escapes "
    "differ from what a writer produces)"
)


class _Pairs(list[tuple[str, object]]):
    """A JSON object as its key-value pairs, in order, repeats kept."""


def why_not_canonical_json(data: bytes) -> str:
    """Why ``data`` — JSON that decodes, but not to its canonical bytes — was refused.

    Names the first repeated key and where it is (msgspec's path notation) when there is one.
    """
    try:
        document = json.loads(data, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return _NOT_CANONICAL
    repeated = _first_repeat(document, "$")
    return repeated if repeated is not None else _NOT_CANONICAL


def _first_repeat(value: object, path: str) -> str | None:
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, _ in value:
            if key in seen:
                return f"the key `{key}` appears more than once - at `{path}`"
            seen.add(key)
        children = [(f"{path}.{key}", item) for key, item in value]
    elif isinstance(value, list):
        children = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
    else:
        return None
    for child_path, child in children:
        found = _first_repeat(child, child_path)
        if found is not None:
            return found
    return None


def decode_canonical_lines(
    decoder: msgspec.json.Decoder[_T], encoder: msgspec.json.Encoder, payloads: Sequence[bytes]
) -> list[_T] | None:
    """The values of ``payloads`` decoded as one newline-joined buffer, when each payload is the
    canonical encoding of its value; ``None`` otherwise (whatever the bytes: it never raises).

    Canonical bytes hold no raw newline, so when the values encode back to exactly the joined
    buffer, each payload is one value's canonical bytes: what decoding it alone and comparing
    its bytes accepts, and nothing else.
    """
    joined = b"\n".join(payloads)
    try:
        values = decoder.decode_lines(joined)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    if len(values) != len(payloads) or encoder.encode_lines(values) != joined + b"\n":
        return None
    return values
