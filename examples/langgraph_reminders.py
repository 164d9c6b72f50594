"""LangChain and LangGraph: a reminder set through the model's tool call comes back, a second
later, as a new run on the same checkpointer thread, and the model's answer is stored in it.

Runs offline: LangChain's ``GenericFakeChatModel`` plays the model, scripted message by message.
``python examples/langgraph_reminders.py``
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from session_schedule import LiveSchedule, MemorySessionStore, ScheduleTools, SystemClock, TurnQueue
from session_schedule.integrations.langchain import (
    LangGraphConversation,
    agent_graph,
    schedule_tools,
)

CREATE = {
    "prompt": "Tell the user to stretch.",
    "after_seconds": 1,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, able to take tools: it answers with the scripted messages in
    turn, and keeps the tools it was given as it would send them to a provider."""

    bound_tools: list[dict[str, object]] = []  # noqa: RUF012 (a pydantic field)

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[BaseTool], *, strict: bool | None = None, **kwargs: object
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        self.bound_tools = [convert_to_openai_tool(tool, strict=strict) for tool in tools]
        return self


def scripted_model() -> ScriptedChatModel:
    """Sets a reminder when asked; acts on it when it comes back."""
    call = {"name": "schedule_create", "args": CREATE, "id": "call_1", "type": "tool_call"}
    return ScriptedChatModel(
        messages=iter(
            [
                AIMessage("", tool_calls=[call]),
                AIMessage("I will remind you in a second."),
                AIMessage("Time to stretch!"),
            ]
        )
    )


async def main() -> LangGraphConversation:
    session = await MemorySessionStore().create(now=SystemClock().now())
    turns = TurnQueue(session)
    schedule = LiveSchedule(session, turns)
    tools = ScheduleTools(schedule)
    graph = agent_graph(scripted_model(), schedule_tools(tools))  # an InMemorySaver checkpointer
    conversation = LangGraphConversation(turns, graph)  # binds its run_turn to the queue
    async with schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        answers = await asyncio.wait_for(conversation.wait_answers(2), timeout=30)
    for answer in answers:
        print("reminder" if answer.turn.reminder else "prompt", "->", answer.text)
    return conversation


if __name__ == "__main__":
    asyncio.run(main())
