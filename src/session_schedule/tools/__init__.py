"""The tool catalog: schemas, descriptions, the ``call`` entry point and format adapters."""

from session_schedule.tools.adapters import anthropic_tools as anthropic_tools
from session_schedule.tools.adapters import mcp_tools as mcp_tools
from session_schedule.tools.adapters import openai_tools as openai_tools
from session_schedule.tools.catalog import TOOL_NAMES as TOOL_NAMES
from session_schedule.tools.catalog import ToolDefinition as ToolDefinition
from session_schedule.tools.catalog import tool_definitions as tool_definitions
from session_schedule.tools.handlers import ScheduleTools as ScheduleTools
