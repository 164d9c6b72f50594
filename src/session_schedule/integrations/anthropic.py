"""The Anthropic Messages API: the four tools as strict ``ToolParam`` definitions, and a
conversation that runs each queued turn as new requests on one ``messages`` list, tool calls
included, with the asynchronous client.

Needs the ``anthropic`` extra: ``pip install 'session-schedule[anthropic]'``.
"""

from __future__ import annotations

from session_schedule.extras import require

require("anthropic", purpose="session_schedule.integrations.anthropic")

from collections.abc import Sequence
from typing import cast

from anthropic import AsyncAnthropic
from anthropic.types import ContentBlockParam, MessageParam, ToolParam, ToolResultBlockParam

from session_schedule.integrations.common import (
    MAX_TOOL_ROUNDS,
    Reply,
    ToolLoopConversation,
    ToolResult,
    ToolUse,
    model_json,
    tool_arguments,
    tool_specs,
)
from session_schedule.runtime.turns import TurnQueue
from session_schedule.tools.handlers import ScheduleTools

__all__ = ["AnthropicConversation", "schedule_tools"]


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


class AnthropicConversation(ToolLoopConversation[MessageParam]):
    """A Messages API conversation fed by ``turns``: each turn — a host prompt or a reminder —
    is a user message on the same ``messages`` list, then requests to ``client`` until the model
    stops calling tools (each call runs through ``tools``; its result goes back as a
    ``tool_result``, with ``is_error: true`` when it is an ``{"ok": false, ...}`` error).

    ``messages`` continues an earlier conversation; :attr:`messages` is the conversation so far.
    A turn that fails (the API refuses a request, say) leaves no trace in it, so the next turn
    starts from a valid conversation. Each request's ``system`` is ``system`` followed by the
    time context (the current time, ``time_zone`` when given, and a re-run note:
    :meth:`~Conversation.model_context`).

    ``durable=True`` keeps the conversation in the Session's log, as ``framework/messages``
    entries of framework ``anthropic``, and continues the one kept there (see
    :class:`~session_schedule.integrations.common.ToolLoopConversation`).
    """

    framework = "anthropic"

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
        time_zone: str | None = None,
        durable: bool = False,
    ) -> None:
        super().__init__(
            turns,
            tools,
            messages=messages,
            max_tool_rounds=max_tool_rounds,
            time_zone=time_zone,
            durable=durable,
        )
        self._client = client
        self._tool_params = schedule_tools(tools)
        self._model = model
        self._max_tokens = max_tokens
        self._system = system

    def _user_message(self, text: str) -> MessageParam:
        return {"role": "user", "content": text}

    async def _request(self, messages: list[MessageParam]) -> Reply[MessageParam]:
        raw = await self._client.messages.with_raw_response.create(
            model=self._model,
            max_tokens=self._max_tokens,
            messages=messages,
            tools=self._tool_params,
            system=self._request_system(),
        )
        # Read here, not by the SDK: a tool_use input nested thousands deep or holding a
        # 5,000-digit number makes its JSON reader raise, and one holding 1e400 or NaN makes
        # the next request fail to encode — each from the model's output, which must get the
        # tool's stable error instead (see :func:`model_json` and :func:`tool_arguments`; the
        # conversation keeps the :func:`sendable` copy of the message).
        content = _blocks(model_json(raw.http_response.content))
        return Reply(
            message={"role": "assistant", "content": cast("list[ContentBlockParam]", content)},
            tool_uses=tuple(
                ToolUse(
                    id=str(block.get("id")),
                    name=str(block.get("name")),
                    arguments=tool_arguments(block.get("input")),
                )
                for block in content
                if block.get("type") == "tool_use"
            ),
            text="".join(
                str(block.get("text", "")) for block in content if block.get("type") == "text"
            ),
        )

    def _request_system(self) -> str:
        """``system``, then the time context and any re-run note (:meth:`model_context`)."""
        context = self.model_context()
        return context if self._system is None else f"{self._system}\n\n{context}"

    def _result_messages(self, results: Sequence[ToolResult]) -> list[MessageParam]:
        blocks: list[ToolResultBlockParam] = []
        for result in results:
            block: ToolResultBlockParam = {
                "type": "tool_result",
                "tool_use_id": result.use.id,
                "content": result.content,
            }
            if result.failed:
                # The Messages API's flag for a tool call that failed; the text is the same.
                block["is_error"] = True
            blocks.append(block)
        return [{"role": "user", "content": blocks}]


def _blocks(response: object) -> list[dict[str, object]]:
    """The content blocks of a Messages API response, as they are sent back (``null`` fields
    left out)."""
    content = response.get("content") if isinstance(response, dict) else None
    if not isinstance(content, list):
        return []
    return [
        {key: value for key, value in block.items() if value is not None}
        for block in content
        if isinstance(block, dict)
    ]
