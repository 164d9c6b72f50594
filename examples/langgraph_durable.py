"""LangChain and LangGraph, durable: the reminder lives in a JSONL session and the conversation
in LangGraph's SQLite checkpointer beside it, so a second run of the program delivers the
reminder to the same checkpointer thread.

The first run asks for a reminder and introduces the person; the second run (a restart) opens
the same session and thread, the reminder comes due, and the model, which has the earlier
messages again, answers by name. Needs ``langgraph-checkpoint-sqlite`` (in the ``langchain``
extra).

Runs offline: LangChain's ``GenericFakeChatModel`` plays the model, its answers chosen from the
conversation. ``python examples/langgraph_durable.py [DIRECTORY]``, twice.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from session_schedule import (
    Clock,
    JsonlSessionStore,
    LiveSchedule,
    ScheduleTools,
    SystemClock,
    TurnQueue,
)
from session_schedule.integrations.langchain import (
    LangGraphConversation,
    agent_graph,
    schedule_tools,
)

FOLLOW_UP = "[session-schedule] Reminder follow-up"
NAME = "My name is "
CREATE = {
    "prompt": "Tell the user to stretch.",
    "after_seconds": 1,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, able to take tools, answering from the conversation: it
    sets a reminder when asked, greets the person, and acts on the reminder by the name the
    conversation holds."""

    bound_tools: list[dict[str, object]] = []  # noqa: RUF012 (a pydantic field)

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[BaseTool], *, strict: bool | None = None, **kwargs: object
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        self.bound_tools = [convert_to_openai_tool(tool, strict=strict) for tool in tools]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: object,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=reply(messages))])


def reply(messages: list[BaseMessage]) -> AIMessage:
    said = [message.text for message in messages if isinstance(message, HumanMessage)]
    name = next((text[len(NAME) :].rstrip(".") for text in said if text.startswith(NAME)), "you")
    if isinstance(messages[-1], ToolMessage):
        return AIMessage("I will remind you in a second.")
    if said[-1].startswith(FOLLOW_UP):
        return AIMessage(f"Time to stretch, {name}!")
    if said[-1].startswith(NAME):
        return AIMessage(f"Nice to meet you, {name}.")
    call = {"name": "schedule_create", "args": CREATE, "id": "call_1", "type": "tool_call"}
    return AIMessage("", tool_calls=[call])


async def main(directory: Path, clock: Clock | None = None) -> LangGraphConversation:
    clock = clock or SystemClock()
    store = JsonlSessionStore(directory)
    earlier = await store.list()  # the session of a first run, if there was one
    if earlier:
        session = await store.open(earlier[0].id)
    else:
        session = await store.create(now=clock.now())
    # LangGraph's own history, in a SQLite file beside the reminders: the thread is the session.
    checkpoints = AsyncSqliteSaver.from_conn_string(str(directory / "checkpoints.sqlite"))
    async with session, checkpoints as checkpointer:
        turns = TurnQueue(session, clock=clock)  # a restart resumes any unfinished turn
        schedule = LiveSchedule(session, turns, clock=clock)
        tools = ScheduleTools(schedule)
        model = ScriptedChatModel(messages=iter(()))  # no script: it answers the conversation
        graph = agent_graph(model, schedule_tools(tools), checkpointer=checkpointer)
        conversation = LangGraphConversation(turns, graph, thread_id=session.id)
        async with schedule, turns:
            if earlier:  # a restart: wait for what is still to come
                _now, reminders = await schedule.active()
                expected = len(turns.pending) + len(reminders)
            else:
                conversation.submit("Remind me to stretch in a second.")
                conversation.submit("My name is Ada.")
                expected = 2
            answers = await asyncio.wait_for(conversation.wait_answers(expected), timeout=30)
    if not answers:
        print("nothing more is due: remove", directory, "to start again")
    for answer in answers:
        print("reminder" if answer.turn.reminder else "prompt", "->", answer.text)
    return conversation


if __name__ == "__main__":
    default = Path(tempfile.gettempdir()) / "session-schedule-langgraph-durable"
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
