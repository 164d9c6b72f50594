"""session-schedule: durable, session-local reminders for LLM agents.

General layout
--------------
- ``core``     — pure: instants, time input, records, the ``schedule/change`` codec, the fold,
                 create/delete decisions, delivery planning, framing, visible text, time
                 context, the persistence catalog. No clock, no I/O, no asyncio.
- ``session``  — the Session event log: the port, and the memory, JSONL and SQLite backends.
- ``runtime``  — the asyncio shell: the clock, the Agent port, the agent-scoped queue, the
                 live Schedule with its delivery owner and its operator events, and the turn
                 queue that implements the Agent port over a host's ``run_turn``.
- ``tools``    — the four tools: schemas, descriptions, ``ScheduleTools.call`` and adapters for
                 OpenAI, Anthropic and MCP.
- ``integrations`` — framework adapters (PydanticAI, the OpenAI Agents SDK, LangChain/LangGraph,
                 Anthropic, OpenAI), each behind its extra (``extras`` reports a missing one).
- ``harness``  — the reference agent harness: a chat agent over the Session log, the model
                 client.
- ``web``      — the web overlay (the ``web`` extra): a chat on a live Session in the browser.
- ``mcp``      — the MCP server: a pull-based Agent port, and the stdio server over the
                 optional MCP SDK (the ``mcp`` extra, imported only by ``mcp.server``).
- ``cli``      — the ``session-schedule`` program (the ``cli`` extra for the terminal).
- ``testing``  — fakes for tests in virtual time, and the storage contract suite.
- ``extras``   — the optional dependencies: which extra brings each, and the one gate
                 (``require``) every optional import passes.

Imports flow one way: cli → mcp → web → harness → integrations → tools → runtime → session →
extras → core; nothing imports ``integrations``; ``testing`` may use anything and nothing uses
it. The names below are the public API. They are loaded on first use, so
``import session_schedule`` (and the ``session-schedule`` program's start) costs only what is
actually used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from session_schedule.extras import lazy_exports

if TYPE_CHECKING:
    from session_schedule.core.errors import ErrorCode as ErrorCode
    from session_schedule.core.errors import ScheduleError as ScheduleError
    from session_schedule.core.instants import Instant as Instant
    from session_schedule.core.instants import format_instant as format_instant
    from session_schedule.core.instants import parse_instant as parse_instant
    from session_schedule.core.quiet import QuietHours as QuietHours
    from session_schedule.core.rules import Limits as Limits
    from session_schedule.core.time_context import time_context as time_context
    from session_schedule.runtime.agent import Agent as Agent
    from session_schedule.runtime.agent import AgentClosed as AgentClosed
    from session_schedule.runtime.agent import FollowUp as FollowUp
    from session_schedule.runtime.clock import Clock as Clock
    from session_schedule.runtime.clock import SystemClock as SystemClock
    from session_schedule.runtime.events import ScheduleEvent as ScheduleEvent
    from session_schedule.runtime.events import ScheduleEvents as ScheduleEvents
    from session_schedule.runtime.live import LiveSchedule as LiveSchedule
    from session_schedule.runtime.live import Settings as Settings
    from session_schedule.runtime.queue import AgentQueue as AgentQueue
    from session_schedule.runtime.turns import RunTurn as RunTurn
    from session_schedule.runtime.turns import Turn as Turn
    from session_schedule.runtime.turns import TurnQueue as TurnQueue
    from session_schedule.session import JsonlSessionStore as JsonlSessionStore
    from session_schedule.session import MemorySessionStore as MemorySessionStore
    from session_schedule.session import PersistenceUncertain as PersistenceUncertain
    from session_schedule.session import SessionHandle as SessionHandle
    from session_schedule.session import SessionStore as SessionStore
    from session_schedule.session import SqliteSessionStore as SqliteSessionStore
    from session_schedule.tools.catalog import ToolDefinition as ToolDefinition
    from session_schedule.tools.catalog import tool_definitions as tool_definitions
    from session_schedule.tools.handlers import ScheduleTools as ScheduleTools

__version__ = "0.1.0"

_EXPORTS: Final = {
    "ErrorCode": "session_schedule.core.errors",
    "ScheduleError": "session_schedule.core.errors",
    "Instant": "session_schedule.core.instants",
    "format_instant": "session_schedule.core.instants",
    "parse_instant": "session_schedule.core.instants",
    "QuietHours": "session_schedule.core.quiet",
    "Limits": "session_schedule.core.rules",
    "time_context": "session_schedule.core.time_context",
    "Agent": "session_schedule.runtime.agent",
    "AgentClosed": "session_schedule.runtime.agent",
    "FollowUp": "session_schedule.runtime.agent",
    "Clock": "session_schedule.runtime.clock",
    "SystemClock": "session_schedule.runtime.clock",
    "ScheduleEvent": "session_schedule.runtime.events",
    "ScheduleEvents": "session_schedule.runtime.events",
    "LiveSchedule": "session_schedule.runtime.live",
    "Settings": "session_schedule.runtime.live",
    "AgentQueue": "session_schedule.runtime.queue",
    "RunTurn": "session_schedule.runtime.turns",
    "Turn": "session_schedule.runtime.turns",
    "TurnQueue": "session_schedule.runtime.turns",
    "JsonlSessionStore": "session_schedule.session",
    "MemorySessionStore": "session_schedule.session",
    "PersistenceUncertain": "session_schedule.session",
    "SessionHandle": "session_schedule.session",
    "SessionStore": "session_schedule.session",
    "SqliteSessionStore": "session_schedule.session",
    "ToolDefinition": "session_schedule.tools.catalog",
    "tool_definitions": "session_schedule.tools.catalog",
    "ScheduleTools": "session_schedule.tools.handlers",
}
"""Each public name and the module that defines it."""

__all__ = [
    "Agent",
    "AgentClosed",
    "AgentQueue",
    "Clock",
    "ErrorCode",
    "FollowUp",
    "Instant",
    "JsonlSessionStore",
    "Limits",
    "LiveSchedule",
    "MemorySessionStore",
    "PersistenceUncertain",
    "QuietHours",
    "RunTurn",
    "ScheduleError",
    "ScheduleEvent",
    "ScheduleEvents",
    "ScheduleTools",
    "SessionHandle",
    "SessionStore",
    "Settings",
    "SqliteSessionStore",
    "SystemClock",
    "ToolDefinition",
    "Turn",
    "TurnQueue",
    "format_instant",
    "parse_instant",
    "time_context",
    "tool_definitions",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
