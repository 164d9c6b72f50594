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
- ``tools``    — the three tools: schemas, descriptions, ``ScheduleTools.call`` and adapters for
                 OpenAI, Anthropic and MCP.
- ``integrations`` — framework adapters (PydanticAI, the OpenAI Agents SDK, LangChain/LangGraph,
                 Anthropic, OpenAI), each behind its extra (``extras`` reports a missing one).
- ``mcp``      — the MCP server: a pull-based Agent port, and the stdio server over the
                 optional MCP SDK (imported only by ``mcp.server``).
- ``cli``      — the ``session-schedule`` program.
- ``testing``  — fakes for tests in virtual time, and the storage contract suite.

Imports flow one way: cli → tools → runtime → session → core; ``integrations`` stand above
``tools`` and nothing imports them; ``testing`` may use anything and nothing uses it. The names
below are the public API.
"""

from session_schedule.core.errors import ErrorCode as ErrorCode
from session_schedule.core.errors import ScheduleError as ScheduleError
from session_schedule.core.instants import Instant as Instant
from session_schedule.core.instants import format_instant as format_instant
from session_schedule.core.instants import parse_instant as parse_instant
from session_schedule.core.rules import Limits as Limits
from session_schedule.core.time_context import time_context as time_context
from session_schedule.runtime.agent import Agent as Agent
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
