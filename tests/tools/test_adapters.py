"""Each adapter's output is checked against its format's rules."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import jsonschema
import mcp.types
import msgspec
import pytest

from session_schedule.tools.adapters import anthropic_tools, mcp_tools, openai_tools
from session_schedule.tools.catalog import ERROR_SCHEMA, tool_definitions
from session_schedule.tools.schemas import Schema

# Keywords OpenAI's strict mode accepts (its structured-outputs documentation).
OPENAI_STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "description", "enum", "anyOf",
    "items", "pattern", "format", "minimum", "maximum", "minLength", "maxLength", "const",
}  # fmt: skip


def _walk_schemas(schema: Schema) -> list[Schema]:
    found = [schema]
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            for child in value.values():
                found.extend(_walk_schemas(cast("Schema", child)))
        elif key == "anyOf" and isinstance(value, list):
            for child in value:
                found.extend(_walk_schemas(cast("Schema", child)))
        elif key == "items" and isinstance(value, dict):
            found.extend(_walk_schemas(cast("Schema", value)))
    return found


@pytest.mark.parametrize("shape", ["chat", "responses"])
def test_openai_tools_follow_strict_mode_rules(shape: str) -> None:
    tools = openai_tools(tool_definitions(), shape="chat" if shape == "chat" else "responses")
    assert len(tools) == 4
    for tool in tools:
        assert tool["type"] == "function"
        function = cast("dict[str, object]", tool["function"] if shape == "chat" else tool)
        assert function["strict"] is True
        assert isinstance(function["name"], str)
        assert len(function["name"]) <= 64
        parameters = cast("Schema", function["parameters"])
        jsonschema.Draft202012Validator.check_schema(parameters)
        assert parameters["type"] == "object"
        assert not {"anyOf", "oneOf", "allOf"} & set(parameters)
        for node in _walk_schemas(parameters):
            assert set(node) <= OPENAI_STRICT_KEYWORDS, set(node) - OPENAI_STRICT_KEYWORDS
            if node.get("type") == "object":
                assert node["additionalProperties"] is False
                assert node["required"] == list(cast("dict[str, object]", node["properties"]))


NO_OPTIONS: dict[str, object] = {"ends": None, "max_lateness_seconds": None}


def test_openai_strict_schema_accepts_what_a_strict_model_sends() -> None:
    create = openai_tools(tool_definitions())[0]
    parameters = cast("Schema", cast("dict[str, object]", create["function"])["parameters"])
    validator = jsonschema.Draft202012Validator(parameters)
    validator.validate(
        {
            "prompt": "p",
            "after_seconds": None,
            "at": None,
            "every_seconds": 600,
            "daily_at": None,
            "calendar": None,
            **NO_OPTIONS,
        }
    )
    validator.validate(
        {
            "prompt": "p",
            "after_seconds": None,
            "at": {"date": "2026-12-01", "time": "09:00", "time_zone": "Asia/Tokyo"},
            "every_seconds": None,
            "daily_at": None,
            "calendar": None,
            **NO_OPTIONS,
        }
    )
    daily = {"time": "09:00", "time_zone": "Asia/Tokyo", "weekdays": ["mon", "fri"]}
    for weekdays in (["mon", "fri"], None):
        validator.validate(
            {
                "prompt": "p",
                "after_seconds": None,
                "at": None,
                "every_seconds": None,
                "daily_at": {**daily, "weekdays": weekdays},
                "calendar": None,
                **NO_OPTIONS,
            }
        )
    calendar = {"rule": "FREQ=MONTHLY;BYDAY=1MO", "time": "09:00", "time_zone": "Europe/Paris"}
    for start_date in ("2026-12-01", None):
        validator.validate(
            {
                "prompt": "p",
                "after_seconds": None,
                "at": None,
                "every_seconds": None,
                "daily_at": None,
                "calendar": {**calendar, "start_date": start_date},
                **NO_OPTIONS,
            }
        )
    assert not validator.is_valid({"prompt": "p"})
    # Strict mode has no optional keys: `weekdays` must be sent, as null for every day.
    assert not validator.is_valid(
        {
            "prompt": "p",
            "after_seconds": None,
            "at": None,
            "every_seconds": None,
            "daily_at": {"time": "09:00", "time_zone": "UTC"},
            "calendar": None,
            **NO_OPTIONS,
        }
    )
    # ... nor `start_date`, sent as null for today.
    assert not validator.is_valid(
        {
            "prompt": "p",
            "after_seconds": None,
            "at": None,
            "every_seconds": None,
            "daily_at": None,
            "calendar": calendar,
            **NO_OPTIONS,
        }
    )


# Keywords Anthropic's strict tool use accepts (its structured-outputs JSON Schema subset, less
# ``default``, which these definitions never send in strict mode).
ANTHROPIC_STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "description", "enum", "anyOf",
    "items", "pattern", "format", "const",
}  # fmt: skip
SNAPSHOTS = Path(__file__).parent / "snapshots"


def _keywords(node: object) -> set[str]:
    """Every key of every schema inside ``node`` (property names excluded)."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= _keywords(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            found.add(key)
            if key == "properties" and isinstance(value, dict):
                for child in value.values():
                    found |= _keywords(child)
            else:
                found |= _keywords(value)
    return found


@pytest.mark.parametrize(
    ("name", "tools"),
    [
        ("anthropic-strict", anthropic_tools(tool_definitions(), strict=True)),
        ("openai-responses", openai_tools(tool_definitions(), shape="responses")),
    ],
)
def test_provider_variants_match_their_snapshots(name: str, tools: list[dict[str, object]]) -> None:
    rendered = msgspec.json.format(msgspec.json.encode(tools), indent=2) + b"\n"
    snapshot = SNAPSHOTS / f"{name}.json"
    if os.environ.get("SESSION_SCHEDULE_UPDATE_SNAPSHOTS") == "1":
        snapshot.write_bytes(rendered)
    assert rendered == snapshot.read_bytes()


def test_anthropic_strict_tools_have_no_default_and_only_supported_keywords() -> None:
    tools = anthropic_tools(tool_definitions(), strict=True)
    assert [tool["name"] for tool in tools] == [
        "schedule_create",
        "schedule_list",
        "schedule_delete",
        "schedule_update",
    ]
    plain = anthropic_tools(tool_definitions())
    assert "default" in _keywords([tool["input_schema"] for tool in plain])
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema", "strict"}
        assert tool["strict"] is True
        schema = cast("Schema", tool["input_schema"])
        jsonschema.Draft202012Validator.check_schema(schema)
        assert "default" not in _keywords(schema)
        assert _keywords(schema) <= ANTHROPIC_STRICT_KEYWORDS | {"$schema"}, _keywords(schema)
        for node in _walk_schemas(schema):
            if node.get("type") == "object":
                assert node["additionalProperties"] is False


def test_anthropic_strict_schema_accepts_what_the_plain_one_accepts() -> None:
    strict = cast("Schema", anthropic_tools(tool_definitions(), strict=True)[0]["input_schema"])
    validator = jsonschema.Draft202012Validator(strict)
    validator.validate({"prompt": "p", "every_seconds": 600})
    validator.validate({"prompt": "p", "after_seconds": None, "at": "2026-12-01T09:00:00Z"})
    assert not validator.is_valid({"after_seconds": 60})
    assert not validator.is_valid({"prompt": "p", "extra": 1})


def test_the_openai_responses_shape_is_flat() -> None:
    chat = openai_tools(tool_definitions())
    responses = openai_tools(tool_definitions(), shape="responses")
    for flat, nested in zip(responses, chat, strict=True):
        assert flat == {"type": "function", **cast("dict[str, object]", nested["function"])}
        assert list(flat) == ["type", "name", "description", "parameters", "strict"]


def test_anthropic_tools_have_object_input_schemas() -> None:
    for tool in anthropic_tools(tool_definitions()):
        assert set(tool) == {"name", "description", "input_schema"}
        schema = cast("Schema", tool["input_schema"])
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"


def test_mcp_tools_validate_as_mcp_tool_definitions() -> None:
    for tool in mcp_tools(tool_definitions()):
        parsed = mcp.types.Tool.model_validate(tool)
        assert parsed.input_schema["type"] == "object"
        assert parsed.output_schema is not None
        assert parsed.output_schema["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(parsed.input_schema)
        jsonschema.Draft202012Validator.check_schema(parsed.output_schema)
    jsonschema.Draft202012Validator.check_schema(ERROR_SCHEMA)


def test_result_schemas_accept_real_results() -> None:
    create = tool_definitions()[0]
    jsonschema.validate(
        {
            "ok": True,
            "schedule": {
                "kind": "daily",
                "id": "sch_7",
                "prompt": "standup",
                "time": "09:00:00.000",
                "timeZone": "Asia/Tokyo",
                "weekdays": ["mon", "tue", "wed", "thu", "fri"],
                "scheduledAt": "2026-12-01T00:00:00.000Z",
                "state": "scheduled",
                "deliveryMode": "session-local",
                "runs": 0,
                "lastRun": None,
            },
        },
        create.output_schema,
    )
    jsonschema.validate(
        {
            "ok": True,
            "schedule": {
                "kind": "every",
                "id": "sch_1",
                "prompt": "p",
                "everySeconds": 600,
                "scheduledAt": "2026-02-28T23:59:59.999Z",
                "state": "scheduled",
                "deliveryMode": "session-local",
                "runs": 0,
                "lastRun": None,
            },
        },
        create.output_schema,
    )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {
                "ok": True,
                "schedule": {
                    "kind": "at",
                    "id": "sch_1",
                    "prompt": "p",
                    "scheduledAt": "2026-02-29T00:00:00.000Z",
                    "state": "scheduled",
                    "deliveryMode": "session-local",
                    "runs": 0,
                    "lastRun": None,
                },
            },
            create.output_schema,
        )
