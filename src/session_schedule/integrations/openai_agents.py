"""The OpenAI Agents SDK: the four tools as strict ``agents.FunctionTool`` objects, and a
conversation that runs each queued turn as a new ``Runner.run`` on the same ``Session``.

Needs the ``openai-agents`` extra: ``pip install 'session-schedule[openai-agents]'``.
"""

from __future__ import annotations

from session_schedule.extras import require

require("openai-agents", purpose="session_schedule.integrations.openai_agents")

import dataclasses
import inspect
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
    """``schedule_create``, ``schedule_list``, ``schedule_update`` and ``schedule_delete`` as
    Agents SDK function tools with ``strict_json_schema`` on (every property required, optional
    ones nullable, no ``default``). A tool returns the result as JSON text; a model's mistake in
    the arguments the tool receives is an ``{"ok": false, ...}`` result, never an exception (the
    SDK itself fails the run for a tool name the agent does not have, or arguments nested
    hundreds of levels deep, before any tool sees them)."""
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
    Each run is of a copy of ``agent`` whose instructions end with the time context (the current
    time, ``time_zone`` when given, and a re-run note: :meth:`~Conversation.model_context`).
    """

    def __init__(
        self,
        turns: TurnQueue,
        agent: Agent[None],
        *,
        session: Session | None = None,
        run_config: RunConfig | None = None,
        time_zone: str | None = None,
    ) -> None:
        super().__init__(turns, time_zone=time_zone)
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
        agent = self._agent.clone(
            instructions=_with_context(self._agent.instructions, self.model_context())
        )
        result = await Runner.run(agent, text, session=self._session, run_config=run_config)
        return str(result.final_output)


_Instructions = str | Callable[[RunContextWrapper[None], Agent[None]], str | Awaitable[str]] | None


def _with_context(instructions: _Instructions, context: str) -> _Instructions:
    """``instructions`` followed by ``context``; a function of instructions is wrapped."""
    if instructions is None:
        return context
    if isinstance(instructions, str):
        return f"{instructions}\n\n{context}"
    dynamic = instructions

    async def combined(run: RunContextWrapper[None], agent: Agent[None]) -> str:
        given = dynamic(run, agent)
        text = await given if inspect.isawaitable(given) else given
        return f"{text}\n\n{context}"

    return combined
