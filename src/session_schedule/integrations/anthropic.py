"""The Anthropic Messages API: the three tools as strict ``ToolParam`` definitions, and a
conversation that runs each queued turn as new requests on one ``messages`` list, tool calls
included, with the asynchronous client.

Needs the ``anthropic`` extra: ``pip install 'session-schedule[anthropic]'``.
"""

from __future__ import annotations

from session_schedule.extras import require

require("anthropic", purpose="session_schedule.integrations.anthropic")

from collections.abc import Sequence
from typing import Final, cast

from anthropic import AsyncAnthropic, omit
from anthropic.types import ContentBlockParam, MessageParam, ToolParam, ToolResultBlockParam

from session_schedule.integrations.common import Conversation, tool_specs
from session_schedule.runtime.turns import TurnQueue
from session_schedule.tools.handlers import ScheduleTools

__all__ = ["AnthropicConversation", "schedule_tools"]

MAX_TOOL_ROUNDS: Final = 16
"""The most model requests one turn makes before it gives up (each answers tool calls)."""


def schedule_tools(tools: ScheduleTools) -> list[ToolParam]:
    """``schedule_create``, ``schedule_list`` and ``schedule_delete`` as Messages API tools with
    ``strict`` on and strict schemas (every property required, optional ones nullable, no
    ``default``)."""
    return [
        {
            "name": spec.name,
            "description": spec.description,
            "input_schema": cast("dict[str, object]", dict(spec.parameters)),
            "strict": True,
        }
        for spec in tool_specs(tools)
    ]


class AnthropicConversation(Conversation):
    """A Messages API conversation fed by ``turns``: each turn — a host prompt or a reminder —
    is a user message on the same ``messages`` list, then requests to ``client`` until the model
    stops calling tools (each call runs through ``tools``; its result goes back as a
    ``tool_result``).

    ``messages`` continues an earlier conversation; :attr:`messages` is the conversation so far.
    A turn that fails (the API refuses a request, say) leaves no trace in it, so the next turn
    starts from a valid conversation.
    """

    def __init__(
        self,
        turns: TurnQueue,
        client: AsyncAnthropic,
        tools: ScheduleTools,
        *,
        model: str,
        max_tokens: int = 1024,
        system: str | None = None,
        messages: Sequence[MessageParam] = (),
        max_tool_rounds: int = MAX_TOOL_ROUNDS,
    ) -> None:
        super().__init__(turns)
        self._client = client
        self._tools = tools
        self._tool_params = schedule_tools(tools)
        self._model = model
        self._max_tokens = max_tokens
        self._system = system
        self._messages: list[MessageParam] = list(messages)
        self._max_tool_rounds = max_tool_rounds

    @property
    def messages(self) -> list[MessageParam]:
        return list(self._messages)

    async def run(self, text: str) -> str:
        start = len(self._messages)
        try:
            return await self._run(text)
        except BaseException:
            del self._messages[start:]
            raise

    async def _run(self, text: str) -> str:
        self._messages.append({"role": "user", "content": text})
        for _ in range(self._max_tool_rounds):
            response = await self._client.messages.create(
                model=self._model,
                max_tokens=self._max_tokens,
                messages=self._messages,
                tools=self._tool_params,
                system=omit if self._system is None else self._system,
            )
            self._messages.append(
                {
                    "role": "assistant",
                    "content": [
                        cast("ContentBlockParam", block.model_dump(mode="json", exclude_none=True))
                        for block in response.content
                    ],
                }
            )
            results: list[ToolResultBlockParam] = [
                {
                    "type": "tool_result",
                    "tool_use_id": block.id,
                    "content": await self._tools.call_json(block.name, block.input),
                }
                for block in response.content
                if block.type == "tool_use"
            ]
            if not results:
                return "".join(block.text for block in response.content if block.type == "text")
            self._messages.append({"role": "user", "content": results})
        raise RuntimeError(
            f"the model was still calling tools after {self._max_tool_rounds} requests"
        )
