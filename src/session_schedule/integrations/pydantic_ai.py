"""PydanticAI: the four tools as ``pydantic_ai.Tool`` objects (strict mode), and a conversation
that runs each queued turn as a new ``agent.run`` with the ``message_history`` kept.

Needs the ``pydantic-ai`` extra: ``pip install 'session-schedule[pydantic-ai]'``.
"""

from __future__ import annotations

from session_schedule.extras import require

require("pydantic-ai", purpose="session_schedule.integrations.pydantic_ai")

from collections.abc import Awaitable, Sequence
from typing import Final, Protocol

from pydantic_ai import Agent, Tool, ToolFailed
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from session_schedule.integrations.common import (
    Conversation,
    ToolSpec,
    queued_turn,
    store_messages,
    stored_messages,
    tool_specs,
    turn_metadata,
)
from session_schedule.runtime.turns import TurnQueue
from session_schedule.tools.handlers import ScheduleTools

__all__ = ["PydanticAIConversation", "schedule_tools"]


def schedule_tools(tools: ScheduleTools) -> list[Tool[None]]:
    """``schedule_create``, ``schedule_list``, ``schedule_update`` and ``schedule_delete`` as
    PydanticAI tools.

    Their schemas are the strict ones (every property required, optional ones nullable, no
    ``default``), and ``strict`` is on, so providers that support strict tool calls enforce them.
    The model's argument text reaches ``ScheduleTools`` unparsed (PydanticAI's own JSON reading
    is bypassed), so hostile arguments — nested 10,000 deep, a 5,000-digit number, a lone
    surrogate — get the tool's stable error like any other mistake, never an exception or a
    parser's message. A tool returns the result as JSON text with hidden characters escaped
    (``ScheduleTools.call_json``); a model's mistake is an ``{"ok": false, ...}`` result, which
    the tool raises as PydanticAI's ``ToolFailed`` with that same text: the tool return part is
    then ``outcome="failed"``, which PydanticAI sends through a provider's own error flag
    (Anthropic's ``is_error``, say) and wraps as ``{"error": "<the text>"}`` for a provider that
    has none. The run goes on, and no retry is counted.
    """
    built: list[Tool[None]] = []
    for spec in tool_specs(tools):
        tool: Tool[None] = Tool.from_schema(
            _function(tools, spec),
            name=spec.name,
            description=spec.description,
            json_schema=dict(spec.parameters),
        )
        tool.function_schema.validator = _RAW  # type: ignore[assignment]
        tool.strict = True
        built.append(tool)
    return built


_ARGUMENTS: Final = "_session_schedule_arguments"
"""The one keyword the tool functions take: the model's arguments as it sent them."""


class _RawArguments:
    """An arguments "validator" that validates nothing: it hands the model's arguments (JSON
    text, or what a provider already decoded) to the tool function as they came, for
    ``ScheduleTools`` to judge with its own bounded, strict reading. PydanticAI passes the
    arguments positionally."""

    def validate_json(self, text: str | bytes | bytearray, /, **_: object) -> dict[str, object]:
        return {_ARGUMENTS: text if isinstance(text, str) else bytes(text)}

    def validate_python(self, value: object, /, **_: object) -> dict[str, object]:
        if isinstance(value, dict) and list(value) == [_ARGUMENTS]:
            return {_ARGUMENTS: value[_ARGUMENTS]}  # already wrapped (validated, re-validated)
        return {_ARGUMENTS: value}


_RAW: Final = _RawArguments()


class _ToolFunction(Protocol):
    def __call__(self, **arguments: object) -> Awaitable[str]: ...


def _function(tools: ScheduleTools, spec: ToolSpec) -> _ToolFunction:
    async def call(**arguments: object) -> str:
        answer = await tools.call_text(spec.name, arguments.get(_ARGUMENTS))
        if answer.failed:
            raise ToolFailed(answer.text)
        return answer.text

    call.__name__ = spec.name
    return call


class PydanticAIConversation(Conversation):
    """A PydanticAI conversation fed by ``turns``: each turn — a host prompt or a reminder —
    is ``agent.run(text, message_history=...)`` and the run's messages become the history.

    ``history`` continues an earlier conversation (for instance one stored with
    ``ModelMessagesTypeAdapter``); :attr:`history` is the conversation so far. Each run's
    ``metadata`` (``ctx.metadata`` in a tool) is the turn's :func:`turn_metadata` (its
    occurrence keys), and the run adds the time context (the current time, ``time_zone``
    when given, and a re-run note: :meth:`~Conversation.model_context`) to the agent's instructions.

    ``durable=True`` keeps the conversation in the Session's log: each completed run's new
    messages (``ModelMessagesTypeAdapter`` JSON) are appended as a ``framework/messages`` entry
    of framework ``pydantic-ai``, and building the conversation reads them back, after
    ``history``.
    """

    framework = "pydantic-ai"

    def __init__(
        self,
        turns: TurnQueue,
        agent: Agent[None, str],
        *,
        history: Sequence[ModelMessage] = (),
        time_zone: str | None = None,
        durable: bool = False,
    ) -> None:
        super().__init__(turns, time_zone=time_zone)
        self._agent = agent
        self._history: list[ModelMessage] = list(history)
        self._durable = durable
        if durable:
            stored = stored_messages(turns, self.framework)
            self._history.extend(ModelMessagesTypeAdapter.validate_python(stored))

    @property
    def history(self) -> list[ModelMessage]:
        return list(self._history)

    async def run(self, text: str) -> str:
        turn = queued_turn(self._turns) if self._durable else self.current_turn
        metadata = None if turn is None else turn_metadata(turn)
        result = await self._agent.run(
            text,
            message_history=self._history,
            metadata=metadata,
            instructions=self.model_context(),
        )
        if self._durable:
            new = ModelMessagesTypeAdapter.dump_python(result.new_messages(), mode="json")
            store_messages(self._turns, self.framework, new)
        self._history = result.all_messages()
        return result.output
