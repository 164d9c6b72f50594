"""The tool catalog is frozen by a snapshot: schemas and model-facing wording alike.

Regenerate after a deliberate change with ``SESSION_SCHEDULE_UPDATE_SNAPSHOTS=1``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

from session_schedule.core.calendar import parse_rule
from session_schedule.core.rules import Limits
from session_schedule.tools import catalog
from session_schedule.tools.catalog import ERROR_SCHEMA, tool_definitions

SNAPSHOT = Path(__file__).parent / "snapshots" / "tools.json"


def _render() -> bytes:
    document = {"tools": list(tool_definitions()), "error": ERROR_SCHEMA}
    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"


def test_catalog_matches_the_snapshot() -> None:
    rendered = _render()
    if os.environ.get("SESSION_SCHEDULE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_bytes(rendered)
    assert rendered == SNAPSHOT.read_bytes()


def test_argument_schemas_are_flat_objects_without_combinators_or_references() -> None:
    for tool in tool_definitions():
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert not {"oneOf", "anyOf", "allOf", "$ref", "$defs"} & set(schema)
        assert "$ref" not in msgspec.json.encode(schema).decode()


def test_descriptions_follow_the_configured_limits() -> None:
    create = tool_definitions(Limits(max_prompt_chars=500))[0]
    properties = create.input_schema["properties"]
    assert isinstance(properties, dict)
    assert "(1 to 500 characters; newlines and tabs allowed)" in properties["prompt"]["description"]


def test_descriptions_tell_the_model_what_it_must_know() -> None:
    create, listing, delete, update = tool_definitions()
    for phrase in (
        "same conversation",
        "follow-up turn",
        "at least 300 seconds",
        "UTC offset",
        "IANA time_zone",
        "ask before creating",
        "never interrupts a turn",
    ):
        assert phrase in create.description
    properties = create.input_schema["properties"]
    assert isinstance(properties, dict)
    # A model picks daily_at for a time of day and every_seconds for an interval.
    for phrase in ("'every day at 9:00'", "'every weekday at 18:30'", "'every 20 minutes'"):
        assert phrase in create.description
    assert "for every weekday at 9:00 in Tokyo" in properties["daily_at"]["description"]
    # ... and calendar for monthly, yearly and every-other-week dates, with rule examples.
    for phrase in ("'the first Monday of every month'", "'every other Friday'", "'every 1 April'"):
        assert phrase in create.description
    calendar = properties["calendar"]["description"]
    for rule in (
        "FREQ=MONTHLY;BYDAY=1MO",
        "'FREQ=WEEKLY;INTERVAL=2;BYDAY=FR'",
        "'FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=1'",
    ):
        assert rule in calendar
    # The tool's own description says three of them too, next to their phrasings, and every
    # rule a model reads is one the tool accepts.
    assert re.findall(r"FREQ=[A-Z0-9=;,-]+", create.description) == [
        "FREQ=MONTHLY;BYDAY=1MO",
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=FR",
        "FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=1",
    ]
    for rule in re.findall(r"FREQ=[A-Z0-9=;,-]*[A-Z0-9]", create.description + calendar):
        parse_rule(rule)
    assert "For every day or chosen weekdays use daily_at" in calendar
    assert "1200 for every 20 minutes" in properties["every_seconds"]["description"]
    assert "use daily_at instead" in properties["every_seconds"]["description"]
    assert "use every_seconds instead" in properties["daily_at"]["description"]
    assert "overdue" in listing.description
    assert "deleted: false" in delete.description
    # Moving, changing, postponing or pausing goes through schedule_update, not delete + create.
    assert "use schedule_update instead of deleting and re-creating it" in delete.description
    for phrase in ("move, change, postpone (snooze), pause or resume", "instead of deleting"):
        assert phrase in update.description
    update_properties = update.input_schema["properties"]
    assert isinstance(update_properties, dict)
    assert set(update_properties) == {
        "id", "prompt", "after_seconds", "at", "every_seconds", "daily_at", "calendar", "paused",
        "snooze",
        "ends", "max_lateness_seconds",
    }  # fmt: skip
    for name, schema in update_properties.items():
        description = schema["description"]
        assert description.endswith("."), name
        assert description.count(". ") <= 3, name
        if name != "id":
            assert "Null" in description, name


def test_every_text_a_model_reads_sends_managing_a_reminder_to_schedule_update() -> None:
    from session_schedule.harness.agent import SYSTEM_PROMPT  # noqa: PLC0415 - a higher layer
    from session_schedule.mcp.server import _INSTRUCTIONS  # noqa: PLC0415

    create, _listing, delete, update = tool_definitions()
    steer = "move, change, postpone, pause or snooze a reminder that already exists, call "
    assert steer + "schedule_update instead: do not create a second one" in create.description
    assert "use schedule_update instead of deleting and re-creating it" in delete.description
    assert "instead of deleting and re-creating it" in update.description
    assert "postpone, pause, resume or snooze a reminder, call schedule_update" in SYSTEM_PROMPT
    assert "never delete and re-create one" in SYSTEM_PROMPT
    assert "with schedule_update (never by deleting and re-creating them)" in _INSTRUCTIONS
    for text in (create.description, SYSTEM_PROMPT, _INSTRUCTIONS):
        assert "three tools" not in text


def test_each_call_gets_schemas_of_its_own_generated_once_per_limits() -> None:
    first, again = tool_definitions(), tool_definitions()
    assert first == again == catalog._generate(Limits())
    properties = first[0].input_schema["properties"]
    assert isinstance(properties, dict)
    properties["prompt"] = {"description": "changed by one caller"}
    assert again[0].input_schema["properties"] != properties  # the other copy is untouched
    assert tool_definitions() == catalog._generate(Limits())  # and so is every later one
    catalog._generated.cache_clear()
    tool_definitions(Limits(max_prompt_chars=500))
    tool_definitions(Limits(max_prompt_chars=500))
    tool_definitions()
    assert catalog._generated.cache_info().misses == 2  # once for each limits
