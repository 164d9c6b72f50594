"""JSON Schema generated from the project's own types, in a dialect every consumer accepts."""

from __future__ import annotations

from typing import cast

import msgspec

_PYTHON_END = "\\Z"


def json_schema(declaration: object) -> dict[str, object]:
    """The JSON Schema of ``declaration``, as msgspec generates it, with portable patterns.

    The types anchor their patterns with Python's ``\\Z`` (``$`` would let a trailing newline
    through ``re.search``); ECMA-262 regular expressions, which JSON Schema validators use, have
    no ``\\Z`` and their ``$`` already means the very end, so it is rewritten to ``$``.
    """
    return cast("dict[str, object]", _portable(msgspec.json.schema(declaration)))


def _portable(node: object) -> object:
    if isinstance(node, dict):
        return {
            key: (
                value.removesuffix(_PYTHON_END) + "$"
                if key == "pattern" and isinstance(value, str) and value.endswith(_PYTHON_END)
                else _portable(value)
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_portable(item) for item in node]
    return node
