"""``session-schedule catalog`` and ``tools``: what this version defines, printed as JSON.

``catalog`` prints the persistence catalog: every durable entry type this version writes, with
its versions, declaration and JSON Schema. ``tools`` prints the definitions of the schedule
tools in the format a model API or protocol expects (``--format``).
"""

from __future__ import annotations

import argparse
from typing import Final, Literal, assert_never

import msgspec

from session_schedule.cli.common import EXIT_OK, add_command
from session_schedule.cli.render import print_json
from session_schedule.session.entry_types import complete_catalog
from session_schedule.tools.adapters import anthropic_tools, mcp_tools, openai_tools
from session_schedule.tools.catalog import tool_definitions

ToolFormat = Literal["openai", "openai-responses", "anthropic", "anthropic-strict", "mcp"]
TOOL_FORMATS: Final[tuple[ToolFormat, ...]] = (
    "openai",
    "openai-responses",
    "anthropic",
    "anthropic-strict",
    "mcp",
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``catalog`` and ``tools`` to the program's subcommands."""
    add_command(
        commands,
        "catalog",
        _catalog,
        description="Every durable entry type this version writes — its name, version, "
        "declaring type, source location and JSON Schema — as JSON.",
        example="session-schedule catalog",
    )

    parser = add_command(
        commands,
        "tools",
        _tools,
        description="The definitions of schedule_create, schedule_list, schedule_update and "
        "schedule_delete, "
        "with the default limits, in the format a model API or protocol expects: OpenAI "
        "strict function tools for Chat Completions (openai) or the Responses API "
        "(openai-responses), Anthropic tools (anthropic; anthropic-strict adds strict: true and "
        "drops the keywords strict mode rejects) or MCP tools.",
        example="session-schedule tools --format anthropic",
    )
    parser.add_argument(
        "--format",
        choices=TOOL_FORMATS,
        default="openai",
        help="the tool format (default: openai)",
    )


def _catalog(_arguments: argparse.Namespace) -> int:
    print(msgspec.json.format(complete_catalog().to_json(), indent=2).decode())
    return EXIT_OK


def _tools(arguments: argparse.Namespace) -> int:
    definitions = tool_definitions()
    tool_format: ToolFormat = arguments.format
    match tool_format:
        case "openai":
            tools = openai_tools(definitions)
        case "openai-responses":
            tools = openai_tools(definitions, shape="responses")
        case "anthropic":
            tools = anthropic_tools(definitions)
        case "anthropic-strict":
            tools = anthropic_tools(definitions, strict=True)
        case "mcp":
            tools = mcp_tools(definitions)
        case _:
            assert_never(tool_format)
    print_json(tools)
    return EXIT_OK
