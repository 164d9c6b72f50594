"""The tool catalog in the formats model APIs and protocols expect.

- OpenAI function tools in strict mode (Chat Completions and Responses shapes): every object
  lists all its properties as required (optional ones are nullable) and forbids others; keywords
  strict mode does not support (``default``) are removed.
- Anthropic tools: ``name``, ``description``, ``input_schema``; in the strict variant also
  ``strict: true`` (grammar-constrained tool inputs), with the keywords strict mode does not
  support (``default``, numeric and length bounds) removed from every schema node.
- MCP tool definitions: ``name``, ``description``, ``inputSchema``, ``outputSchema`` and
  behaviour hints (``annotations``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, cast

from session_schedule.tools.catalog import ToolDefinition, ToolName
from session_schedule.tools.schemas import Schema

OpenAIShape = Literal["chat", "responses"]

_UNSUPPORTED_IN_STRICT = frozenset({"default"})
_UNSUPPORTED_IN_ANTHROPIC_STRICT = frozenset(
    {
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
    }
)


def openai_tools(
    definitions: Iterable[ToolDefinition], *, shape: OpenAIShape = "chat"
) -> list[dict[str, object]]:
    """Function tools for the OpenAI Chat Completions (``chat``) or Responses API, strict mode."""
    tools: list[dict[str, object]] = []
    for definition in definitions:
        function: dict[str, object] = {
            "name": definition.name,
            "description": definition.description,
            "parameters": strict_schema(definition.input_schema),
            "strict": True,
        }
        tools.append(
            {"type": "function", "function": function}
            if shape == "chat"
            else {"type": "function", **function}
        )
    return tools


def anthropic_tools(
    definitions: Iterable[ToolDefinition], *, strict: bool = False
) -> list[dict[str, object]]:
    """Tools for the Anthropic Messages API; ``strict`` gives the ``strict: true`` variant."""
    if not strict:
        return [
            {
                "name": definition.name,
                "description": definition.description,
                "input_schema": definition.input_schema,
            }
            for definition in definitions
        ]
    return [
        {
            "name": definition.name,
            "description": definition.description,
            "input_schema": cast(
                "Schema", _without(definition.input_schema, _UNSUPPORTED_IN_ANTHROPIC_STRICT)
            ),
            "strict": True,
        }
        for definition in definitions
    ]


_MCP_HINTS: dict[ToolName, dict[str, object]] = {
    "schedule_create": {
        "title": "Create a reminder",
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    },
    "schedule_list": {"title": "List reminders", "readOnlyHint": True, "openWorldHint": False},
    "schedule_update": {
        "title": "Change a reminder",
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    },
    "schedule_delete": {
        "title": "Delete a reminder",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    },
}


def mcp_tools(definitions: Iterable[ToolDefinition]) -> list[dict[str, object]]:
    """Tool definitions for an MCP server's ``tools/list`` result."""
    return [
        {
            "name": definition.name,
            "description": definition.description,
            "inputSchema": definition.input_schema,
            "outputSchema": definition.output_schema,
            "annotations": _MCP_HINTS[definition.name],
        }
        for definition in definitions
    ]


def strict_schema(schema: Schema) -> Schema:
    """``schema`` under OpenAI strict-mode rules: all properties required, none extra."""
    return cast("Schema", _strict(schema))


def _strict(node: object) -> object:
    converted = _without(node, _UNSUPPORTED_IN_STRICT)
    if isinstance(converted, dict):
        for schema in _object_schemas(converted):
            schema["required"] = list(cast("dict[str, object]", schema["properties"]))
            schema["additionalProperties"] = False
    return converted


def _without(node: object, keywords: frozenset[str]) -> object:
    """A copy of schema ``node`` with ``keywords`` removed from every schema inside it."""
    if isinstance(node, list):
        return [_without(item, keywords) for item in node]
    if not isinstance(node, dict):
        return node
    converted: dict[str, object] = {}
    for key, value in node.items():
        if key in keywords:
            continue
        if key == "properties" and isinstance(value, dict):
            # A mapping of property names to schemas, not a schema: convert the schemas only.
            converted[key] = {name: _without(schema, keywords) for name, schema in value.items()}
        else:
            converted[key] = _without(value, keywords)
    return converted


def _object_schemas(node: object) -> list[dict[str, object]]:
    """Every object schema with ``properties`` inside ``node`` (itself included)."""
    found: list[dict[str, object]] = []
    if isinstance(node, list):
        for item in node:
            found.extend(_object_schemas(item))
    elif isinstance(node, dict):
        if node.get("type") == "object" and isinstance(node.get("properties"), dict):
            found.append(node)
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for schema in value.values():
                    found.extend(_object_schemas(schema))
            else:
                found.extend(_object_schemas(value))
    return found
