"""The JSON nesting scan: what counts as nesting, in one linear pass."""

from __future__ import annotations

import json

import pytest

from session_schedule.tools.nesting import clip_depth, json_depth


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


@pytest.mark.parametrize(
    ("body", "clipped"),
    [
        (b'{"a": [1, [2, [3]]]}', b'{"a": [1, "X"]}'),
        (b'[[], [[]], "[[[["]', b'[[], ["X"], "[[[["]'),
        (b'{"a": {"b": {"c": 1}}, "d": "\\"{{"}', b'{"a": {"b": "X"}, "d": "\\"{{"}'),
        (b"[1, 2]", b"[1, 2]"),
    ],
)
def test_values_past_a_depth_are_clipped(body: bytes, clipped: bytes) -> None:
    assert clip_depth(body, 2, b'"X"') == clipped


def test_a_clipped_body_decodes_at_any_depth() -> None:
    body = b'{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b', "after": 1}'
    clipped = clip_depth(body, 4, b'"too deep"')
    assert json.loads(clipped) == {"input": [[["too deep"]]], "after": 1}
