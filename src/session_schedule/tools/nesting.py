"""How deep a JSON text nests, found in one linear pass — before a decoder that recurses (or
a backtracking expression) is let near text a client or a model sent."""

from __future__ import annotations

import re
from typing import Final

_SPECIAL: Final = re.compile(rb'[\\"\[\]{}]')
"""What the nesting scan looks at: backslashes, quotes and brackets (nothing else matters)."""
_BACKSLASH: Final = ord("\\")
_QUOTE: Final = ord('"')
_OPENING: Final = frozenset(b"[{")


def json_depth(body: bytes) -> int:
    """How deep arrays and objects nest in ``body`` (brackets inside strings do not count).

    One pass over the backslashes, quotes and brackets, in order: time linear in the body's
    size whatever it holds (an unterminated string, escaped quotes by the thousand), so a body
    cannot stall the server. ``body`` need not be valid JSON: the decoder judges that after.
    """
    depth = deepest = 0
    in_string = False
    escaped = -1  # the position a backslash inside a string escapes
    for match in _SPECIAL.finditer(body):
        at = match.start()
        if at == escaped:
            continue
        char = body[at]
        if in_string:
            if char == _BACKSLASH:
                escaped = at + 1
            elif char == _QUOTE:
                in_string = False
        elif char == _QUOTE:
            in_string = True
        elif char in _OPENING:
            depth += 1
            deepest = max(deepest, depth)
        elif char != _BACKSLASH:
            depth -= 1
    return deepest


def clip_depth(body: bytes, max_depth: int, marker: bytes) -> bytes:
    """``body`` with every array or object that opens more than ``max_depth`` deep replaced by
    ``marker`` (a JSON value, such as a string saying what was there), in one linear pass: JSON
    that any decoder can then read without recursing deeper. Text with nothing that deep is
    returned as it is."""
    if json_depth(body) <= max_depth:
        return body
    out = bytearray()
    depth = 0
    in_string = False
    escaped = -1
    copied_from = 0  # the first byte not yet copied; -1 inside a clipped value
    clipped_at = 0  # the depth of the value being clipped
    for match in _SPECIAL.finditer(body):
        at = match.start()
        if at == escaped:
            continue
        char = body[at]
        if in_string:
            if char == _BACKSLASH:
                escaped = at + 1
            elif char == _QUOTE:
                in_string = False
        elif char == _QUOTE:
            in_string = True
        elif char in _OPENING:
            depth += 1
            if depth > max_depth and copied_from >= 0:
                out += body[copied_from:at]
                out += marker
                copied_from = -1
                clipped_at = depth
        elif char != _BACKSLASH:
            if copied_from < 0 and depth == clipped_at:
                copied_from = at + 1
            depth -= 1
    if copied_from >= 0:
        out += body[copied_from:]
    return bytes(out)
