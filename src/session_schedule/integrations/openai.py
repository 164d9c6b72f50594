"""The OpenAI Chat Completions API: the three tools as strict function ``tools``, and a
conversation that runs each queued turn as new requests on one ``messages`` list, tool calls
included, with the asynchronous client.

Needs the ``openai`` extra: ``pip install 'session-schedule[openai]'``. (For the Responses API,
``ScheduleTools.openai(shape="responses")`` gives the same tools in its shape.)
"""

from __future__ import annotations

from session_schedule.extras import require

require("openai", purpose="session_schedule.integrations.openai")

from collections.abc import Sequence
from typing import Final

from openai import AsyncOpenAI
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from session_schedule.integrations.common import Conversation, tool_specs
from session_schedule.runtime.turns import TurnQueue
from session_schedule.tools.handlers import ScheduleTools

__all__ = ["OpenAIConversation", "schedule_tools"]

MAX_TOOL_ROUNDS: Final = 16
"""The most model requests one turn makes before it gives up (each answers tool calls)."""


def schedule_tools(tools: ScheduleTools) -> list[ChatCompletionFunctionToolParam]:
    """``schedule_create``, ``schedule_list`` and ``schedule_delete`` as Chat Completions
    function tools in strict mode (every property required, optional ones nullable, no
    ``default``)."""
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


class OpenAIConversation(Conversation):
    """A Chat Completions conversation fed by ``turns``: each turn — a host prompt or a
    reminder — is a user message on the same ``messages`` list, then requests to ``client``
    until the model stops calling tools (each call runs through ``tools``; its result goes back
    as a ``tool`` message).

    ``messages`` continues an earlier conversation or starts it with a system message;
    :attr:`messages` is the conversation so far. A turn that fails (the API refuses a request,
    say) leaves no trace in it, so the next turn starts from a valid conversation.
    """

    def __init__(
        self,
        turns: TurnQueue,
        client: AsyncOpenAI,
        tools: ScheduleTools,
        *,
        model: str,
        messages: Sequence[ChatCompletionMessageParam] = (),
        max_tool_rounds: int = MAX_TOOL_ROUNDS,
    ) -> None:
        super().__init__(turns)
        self._client = client
        self._tools = tools
        self._tool_params = schedule_tools(tools)
        self._model = model
        self._messages: list[ChatCompletionMessageParam] = list(messages)
        self._max_tool_rounds = max_tool_rounds

    @property
    def messages(self) -> list[ChatCompletionMessageParam]:
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
            response = await self._client.chat.completions.create(
                model=self._model, messages=self._messages, tools=self._tool_params
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
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                )
            answer: ChatCompletionAssistantMessageParam = {
                "role": "assistant",
                "content": message.content,
            }
            if calls:
                answer["tool_calls"] = calls
            self._messages.append(answer)
            if not calls:
                return message.content or ""
            for call_param in calls:
                function = call_param["function"]
                result = await self._tools.call_json(function["name"], function["arguments"])
                self._messages.append(
                    {"role": "tool", "tool_call_id": call_param["id"], "content": result}
                )
        raise RuntimeError(
            f"the model was still calling tools after {self._max_tool_rounds} requests"
        )
