"""The OpenAI Agents SDK: the three tools as strict ``agents.FunctionTool`` objects, and a
conversation that runs each queued turn as a new ``Runner.run`` on the same ``Session``.

Needs the ``openai-agents`` extra: ``pip install 'session-schedule[openai-agents]'``.
"""

from __future__ import annotations

from session_schedule.extras import require

require("openai-agents", purpose="session_schedule.integrations.openai_agents")

import dataclasses
import uuid
import weakref
from collections.abc import Awaitable, Callable

from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    RunContextWrapper,
    Runner,
    SQLiteSession,
    Tool,
)
from agents.memory import Session

from session_schedule.integrations.common import Conversation, tool_specs, turn_metadata
from session_schedule.runtime.turns import TurnQueue
from session_schedule.tools.handlers import ScheduleTools

__all__ = ["AgentsConversation", "schedule_tools"]


def schedule_tools(tools: ScheduleTools) -> list[Tool]:
    """``schedule_create``, ``schedule_list`` and ``schedule_delete`` as Agents SDK function
    tools with ``strict_json_schema`` on (every property required, optional ones nullable, no
    ``default``). A tool returns the result as JSON text; a model's mistake is an
    ``{"ok": false, ...}`` result, never an exception."""
    return [
        FunctionTool(
            name=spec.name,
            description=spec.description,
            params_json_schema=dict(spec.parameters),
            on_invoke_tool=_invoke(tools, spec.name),
            strict_json_schema=True,
        )
        for spec in tool_specs(tools)
    ]


def _invoke(
    tools: ScheduleTools, name: str
) -> Callable[[RunContextWrapper[object], str], Awaitable[str]]:
    async def invoke(_context: RunContextWrapper[object], arguments: str) -> str:
        return await tools.call_json(name, arguments)

    return invoke


class AgentsConversation(Conversation):
    """An Agents SDK conversation fed by ``turns``: each turn — a host prompt or a reminder —
    is ``Runner.run(agent, text, session=session)``, so the ``Session`` keeps the history.

    ``session`` defaults to an in-memory ``SQLiteSession``; pass a file-backed one (or any
    ``Session``) to keep the conversation across restarts. ``run_config`` is passed to every run,
    its ``trace_metadata`` completed with the turn's :func:`turn_metadata` (its occurrence keys).
    """

    def __init__(
        self,
        turns: TurnQueue,
        agent: Agent[None],
        *,
        session: Session | None = None,
        run_config: RunConfig | None = None,
    ) -> None:
        super().__init__(turns)
        self._agent = agent
        if session is None:
            owned = SQLiteSession(f"session-schedule-{uuid.uuid4()}")
            # The default session's database connection closes with the conversation (Python
            # 3.13 warns about a connection left to the garbage collector).
            weakref.finalize(self, owned.close)
            session = owned
        self._session: Session = session
        self._run_config = run_config

    @property
    def session(self) -> Session:
        return self._session

    async def run(self, text: str) -> str:
        run_config = self._run_config
        turn = self.current_turn
        if turn is not None:
            # The SDK's run metadata: recorded with the run's trace.
            base = run_config or RunConfig()
            run_config = dataclasses.replace(
                base, trace_metadata={**(base.trace_metadata or {}), **turn_metadata(turn)}
            )
        result = await Runner.run(self._agent, text, session=self._session, run_config=run_config)
        return str(result.final_output)
