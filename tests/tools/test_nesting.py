"""The JSON nesting scan: what counts as nesting, in one linear pass."""

from __future__ import annotations

import pytest

from session_schedule.tools.nesting import json_depth


@pytest.mark.parametrize(
    ("body", "depth"),
    [
        (b"", 0),
        (b'"text"', 0),
        (b"[]", 1),
        (b'{"a": [[], {"b": [1]}]}', 4),
        (b'["[[{", "]]]"]', 1),  # brackets in strings are text
        (b'["\\"[[", "x"]', 1),  # an escaped quote does not end the string
        (b'["\\\\", [[]]]', 3),  # an escaped backslash does not escape the quote after it
        (b'["\\\\\\"[", []]', 2),  # ... and one after it does
        (b'"[[[', 0),  # an unterminated string hides what follows
        (b'"' + b'\\"' * 30_000, 0),
        (b"[" * 40 + b"]" * 40, 40),
        (b"]]][", 0),  # not JSON: the decoder refuses it after
    ],
)
def test_the_depth_of_a_body(body: bytes, depth: int) -> None:
    assert json_depth(body) == depth
