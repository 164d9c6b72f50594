"""JSON Schemas for tool arguments and results, generated from the types the code uses.

Tool-calling formats want one flat object per tool: ``type: object``, ``additionalProperties:
false``, no top-level ``oneOf``/``anyOf``/``allOf`` and no references to resolve. msgspec
generates ``$ref``/``$defs`` schemas; :func:`inline_schema` resolves them in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from session_schedule.core.schema import json_schema

Schema = dict[str, object]

# Keywords that only make sense beside ``$defs``: msgspec's titles, and OpenAPI's
# ``discriminator``, whose mapping points into the ``$defs`` that inlining removes.
_DROPPED: dict[str, type] = {"title": str, "discriminator": dict}


def inline_schema(declaration: object, *, descriptions: Mapping[str, str] | None = None) -> Schema:
    """The schema of ``declaration`` with every reference inlined and titles dropped.

    ``descriptions`` sets the description of top-level properties (tool-facing wording that
    depends on configuration, such as limits).
    """
    generated = json_schema(declaration)
    definitions = cast("dict[str, Schema]", generated.pop("$defs", {}))
    schema = cast("Schema", _resolve(generated, definitions))
    # The top-level description is the type's docstring, written for developers; a tool's
    # description is the model-facing one.
    schema.pop("description", None)
    if descriptions:
        properties = cast("dict[str, Schema]", schema["properties"])
        for name, text in descriptions.items():
            properties[name] = {"description": text, **properties[name]}
    return schema


def _resolve(node: object, definitions: dict[str, Schema]) -> object:
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str):
            target = definitions[reference.removeprefix("#/$defs/")]
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return _resolve(merged, definitions)
        return {
            key: _resolve(value, definitions)
            for key, value in node.items()
            if key not in _DROPPED or not isinstance(value, _DROPPED[key])
        }
    if isinstance(node, list):
        return [_resolve(item, definitions) for item in node]
    return node
