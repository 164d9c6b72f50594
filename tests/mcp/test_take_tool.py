"""The MCP-only tool is frozen by a snapshot, like the catalog; its results match its schema.

Regenerate after a deliberate change with ``SESSION_SCHEDULE_UPDATE_SNAPSHOTS=1``.
"""

from __future__ import annotations

import os
from pathlib import Path

import jsonschema
import mcp.types
import msgspec

from session_schedule.mcp.server import TakeResult, take_tool

SNAPSHOT = Path(__file__).parent / "snapshots" / "take-tool.json"


def test_the_take_tool_matches_the_snapshot() -> None:
    rendered = msgspec.json.format(msgspec.json.encode(take_tool()), indent=2) + b"\n"
    if os.environ.get("SESSION_SCHEDULE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_bytes(rendered)
    assert rendered == SNAPSHOT.read_bytes()


def test_the_take_tool_is_a_valid_mcp_tool_whose_results_match_its_output_schema() -> None:
    tool = mcp.types.Tool.model_validate(take_tool())
    assert tool.output_schema is not None
    jsonschema.Draft202012Validator.check_schema(tool.input_schema)
    validator = jsonschema.Draft202012Validator(tool.output_schema)
    for result in [
        TakeResult(ok=True, followup=None, occurrence_keys=[], more=False),
        TakeResult(ok=True, followup="frame", occurrence_keys=["sch_1@x"], more=True),
    ]:
        validator.validate(msgspec.to_builtins(result))
    assert not validator.is_valid({"ok": False, "error": {"code": "x", "message": "y"}})
