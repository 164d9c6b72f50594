"""The tool catalog: schemas, descriptions, the ``call`` entry point and format adapters.

The names below are loaded on first use: the definitions and adapters alone do not import the
live Schedule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from session_schedule.extras import lazy_exports

if TYPE_CHECKING:
    from session_schedule.tools.adapters import anthropic_tools as anthropic_tools
    from session_schedule.tools.adapters import mcp_tools as mcp_tools
    from session_schedule.tools.adapters import openai_tools as openai_tools
    from session_schedule.tools.catalog import TOOL_NAMES as TOOL_NAMES
    from session_schedule.tools.catalog import ToolDefinition as ToolDefinition
    from session_schedule.tools.catalog import tool_definitions as tool_definitions
    from session_schedule.tools.handlers import ScheduleTools as ScheduleTools

_EXPORTS: Final = {
    "anthropic_tools": "session_schedule.tools.adapters",
    "mcp_tools": "session_schedule.tools.adapters",
    "openai_tools": "session_schedule.tools.adapters",
    "TOOL_NAMES": "session_schedule.tools.catalog",
    "ToolDefinition": "session_schedule.tools.catalog",
    "tool_definitions": "session_schedule.tools.catalog",
    "ScheduleTools": "session_schedule.tools.handlers",
}
"""Each public name and the module that defines it."""

__all__ = [
    "TOOL_NAMES",
    "ScheduleTools",
    "ToolDefinition",
    "anthropic_tools",
    "mcp_tools",
    "openai_tools",
    "tool_definitions",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
