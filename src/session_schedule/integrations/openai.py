"""The OpenAI Chat Completions API: the four tools as strict function ``tools``, and a
conversation that runs each queued turn as new requests on one ``messages`` list, tool calls
included, with the asynchronous client.

Needs the ``openai`` extra: ``pip install 'session-schedule[openai]'``. (For the Responses API,
``ScheduleTools.openai(shape="responses")`` gives the same tools in its shape.)
"""

from __future__ import annotations

from session_schedule.extras import require

require("openai", purpose="session_schedule.integrations.openai")

from collections.abc import Sequence

from openai import AsyncOpenAI
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from session_schedule.integrations.common import (
    MAX_TOOL_ROUNDS,
    Reply,
    ToolLoopConversation,
    ToolResult,
    ToolUse,
    tool_specs,
)
from session_schedule.runtime.turns import TurnQueue
from session_schedule.tools.handlers import ScheduleTools

__all__ = ["OpenAIConversation", "schedule_tools"]


def schedule_tools(tools: ScheduleTools) -> list[ChatCompletionFunctionToolParam]:
    """``schedule_create``, ``schedule_list``, ``schedule_update`` and ``schedule_delete`` as
    Chat Completions function tools in strict mode (every property required, optional ones
    nullable, no ``default``)."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": dict(spec.parameters),
                "strict": True,
            },
        }
        for spec in tool_specs(tools)
    ]


class OpenAIConversation(ToolLoopConversation[ChatCompletionMessageParam]):
    """A Chat Completions conversation fed by ``turns``: each turn — a host prompt or a
    reminder — is a user message on the same ``messages`` list, then requests to ``client``
    until the model stops calling tools (each call runs through ``tools``; its result goes back
    as a ``tool`` message).

    ``messages`` continues an earlier conversation or starts it with a system message;
    :attr:`messages` is the conversation so far. A turn that fails (the API refuses a request,
    say) leaves no trace in it, so the next turn starts from a valid conversation. Each request
    has a system message of the time context (the current time, ``time_zone`` when given, and a
    re-run note: :meth:`~Conversation.model_context`) after the conversation's leading system
    messages; it is not kept in :attr:`messages`.

    ``durable=True`` keeps the conversation in the Session's log, as ``framework/messages``
    entries of framework ``openai``, and continues the one kept there (see
    :class:`~session_schedule.integrations.common.ToolLoopConversation`).
    """

    framework = "openai"

    def __init__(
        self,
        turns: TurnQueue,
        client: AsyncOpenAI,
        tools: ScheduleTools,
        *,
        model: str,
        messages: Sequence[ChatCompletionMessageParam] = (),
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

    def _user_message(self, text: str) -> ChatCompletionMessageParam:
        return {"role": "user", "content": text}

    async def _request(
        self, messages: list[ChatCompletionMessageParam]
    ) -> Reply[ChatCompletionMessageParam]:
        # The time context (and a re-run note, :meth:`model_context`) follows the leading system
        # messages, for this request only: it is not kept in ``messages``.
        context: ChatCompletionMessageParam = {"role": "system", "content": self.model_context()}
        lead = next(
            (index for index, message in enumerate(messages) if message["role"] != "system"),
            len(messages),
        )
        response = await self._client.chat.completions.create(
            model=self._model,
            messages=[*messages[:lead], context, *messages[lead:]],
            tools=self._tool_params,
        )
        message = response.choices[0].message
        calls: list[ChatCompletionMessageFunctionToolCallParam] = []
        for call in message.tool_calls or ():
            if call.type != "function":
                raise RuntimeError(f"the model called a {call.type} tool, which is not offered")
            calls.append(
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
            )
        answer: ChatCompletionAssistantMessageParam = {
            "role": "assistant",
            "content": message.content,
        }
        if calls:
            answer["tool_calls"] = calls
        return Reply(
            message=answer,
            tool_uses=tuple(
                ToolUse(
                    id=call["id"],
                    name=call["function"]["name"],
                    arguments=call["function"]["arguments"],
                )
                for call in calls
            ),
            text=message.content or "",
        )

    def _result_messages(self, results: Sequence[ToolResult]) -> list[ChatCompletionMessageParam]:
        return [
            {"role": "tool", "tool_call_id": result.use.id, "content": result.content}
            for result in results
        ]
