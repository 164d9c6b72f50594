"""A turn that runs again — a retried attempt, or a turn a crash cut short — after its earlier
attempts changed the schedule: every model request of the new attempt carries, after the time
context, the note naming those changes (``Conversation.model_context``), in every adapter. A
first attempt, and one whose earlier attempts changed nothing, carry no note.

One scripted model plays every framework (:class:`Script`): asked something, it sets a reminder
with ``schedule_create`` — unless its context carries the note, and then it calls
``schedule_list`` as the note says; after a tool result it answers. So a retry without the note
would set the reminder twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import httpx2
import pytest
from agents import Agent, RunConfig
from anthropic import AsyncAnthropic
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from openai import AsyncOpenAI
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.core.rerun import RERUN_INTRO
from session_schedule.core.time_context import request_context
from session_schedule.integrations import langchain, openai_agents, pydantic_ai
from session_schedule.integrations.anthropic import AnthropicConversation
from session_schedule.integrations.common import Conversation
from session_schedule.integrations.openai import OpenAIConversation
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle, SessionStore
from session_schedule.testing.clock import FakeClock
from tests.integrations.examples import load

START = "2026-11-29T20:00:00.000Z"
CREATE = {
    "prompt": "stretch",
    "after_seconds": 3600,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}
NOTE = (
    "Note: this turn is running again after an interrupted attempt, which already changed the "
    "schedule:\n"
    '- created sch_1 ("stretch"; after (3600 seconds after it was set), due at '
    "2026-11-29T21:00:00.000Z)\n"
    "These changes are in effect: do not make them again (do not create those reminders again). "
    "Call schedule_list to see the reminders as they stand."
)

Step = Literal["create", "list", "fail", "hang", "answer"]


class Script:
    """The model of every adapter: what it does at each request, and the context (the text the
    adapter adds to each request: the time, and the note) each request carried."""

    def __init__(self, *, trouble: Literal["fail", "hang"] = "fail", at: int = 2) -> None:
        self.contexts: list[str] = []
        self._trouble: Step = trouble
        self._at = at

    def step(self, context: str, *, after_tool: bool) -> Step:
        self.contexts.append(context)
        if len(self.contexts) == self._at:
            return self._trouble
        if after_tool:
            return "answer"
        return "list" if RERUN_INTRO in context else "create"

    def call(self, step: Step) -> tuple[str, dict[str, object]]:
        return ("schedule_create", CREATE) if step == "create" else ("schedule_list", {})


class Transient(Exception):  # noqa: N818 - what a model library raises for a 503
    transient = True


async def _trouble(step: Step) -> None:
    if step == "fail":
        raise Transient("the model endpoint failed")
    if step == "hang":
        await asyncio.Event().wait()


Build = Callable[[TurnQueue, ScheduleTools, Script, bool], Conversation]


def _openai(turns: TurnQueue, tools: ScheduleTools, script: Script, durable: bool) -> Conversation:
    async def endpoint(request: httpx2.Request) -> httpx2.Response:
        messages = json.loads(request.content)["messages"]
        step = script.step(messages[0]["content"], after_tool=messages[-1]["role"] == "tool")
        if step == "fail":
            return httpx2.Response(503, json={"error": {"message": "busy", "type": "server"}})
        await _trouble(step)
        message: dict[str, object] = {"role": "assistant", "content": None}
        if step == "answer":
            message["content"] = "done"
        else:
            name, arguments = script.call(step)
            function = {"name": name, "arguments": json.dumps(arguments)}
            message["tool_calls"] = [{"id": "call_1", "type": "function", "function": function}]
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return httpx2.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [choice],
            },
        )

    client = AsyncOpenAI(
        api_key="offline",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)),
    )
    return OpenAIConversation(turns, client, tools, model="m", durable=durable)


def _anthropic(
    turns: TurnQueue, tools: ScheduleTools, script: Script, durable: bool
) -> Conversation:
    async def endpoint(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        last = body["messages"][-1]["content"]
        step = script.step(body["system"], after_tool=isinstance(last, list))
        if step == "fail":
            error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
            return httpx2.Response(529, json=error)
        await _trouble(step)
        if step == "answer":
            content: list[dict[str, object]] = [{"type": "text", "text": "done"}]
        else:
            name, arguments = script.call(step)
            content = [{"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments}]
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m"}
        usage = {"input_tokens": 1, "output_tokens": 1}
        return httpx2.Response(
            200, json={**message, "content": content, "stop_reason": "end_turn", "usage": usage}
        )

    client = AsyncAnthropic(
        api_key="offline",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)),
    )
    return AnthropicConversation(turns, client, tools, model="m", durable=durable)


def _pydantic_ai(
    turns: TurnQueue, tools: ScheduleTools, script: Script, durable: bool
) -> Conversation:
    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        step = script.step(info.instructions or "", after_tool=isinstance(last, ToolReturnPart))
        if step == "fail":
            raise ModelHTTPError(503, "m")
        await _trouble(step)
        if step == "answer":
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(*script.call(step))])

    agent = PydanticAgent(FunctionModel(model), tools=pydantic_ai.schedule_tools(tools))
    return pydantic_ai.PydanticAIConversation(turns, agent, durable=durable)


def _agents_sdk(
    turns: TurnQueue, tools: ScheduleTools, script: Script, durable: bool
) -> Conversation:
    example = load("openai_agents_reminders")

    class Model(example.ScriptedModel):  # type: ignore[misc, name-defined]
        async def get_response(
            self,
            system_instructions: str | None,
            input: Any,  # noqa: A002 - the interface's name
            *args: Any,
            **kw: Any,
        ) -> Any:
            last = input if isinstance(input, str) else input[-1]
            after_tool = isinstance(last, dict) and last.get("type") == "function_call_output"
            step = script.step(system_instructions or "", after_tool=after_tool)
            await _trouble(step)
            if step == "answer":
                return example._answer("done")
            name, arguments = script.call(step)
            call = example.ResponseFunctionToolCall(
                type="function_call", call_id="call_1", name=name, arguments=json.dumps(arguments)
            )
            return example.ModelResponse(output=[call], usage=example.Usage(), response_id=None)

    agent: Agent[None] = Agent(
        name="assistant", model=Model(), tools=openai_agents.schedule_tools(tools)
    )
    return openai_agents.AgentsConversation(
        turns, agent, run_config=RunConfig(tracing_disabled=True)
    )


def _langgraph(
    turns: TurnQueue, tools: ScheduleTools, script: Script, durable: bool
) -> Conversation:
    example = load("langgraph_reminders")

    class Model(example.ScriptedChatModel):  # type: ignore[misc, name-defined]
        async def _agenerate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> ChatResult:
            context = next(m.text for m in messages if isinstance(m, SystemMessage))
            step = script.step(context, after_tool=isinstance(messages[-1], ToolMessage))
            await _trouble(step)
            if step == "answer":
                reply = AIMessage("done")
            else:
                name, arguments = script.call(step)
                call = {"name": name, "args": arguments, "id": "call_1", "type": "tool_call"}
                reply = AIMessage("", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    graph = langchain.agent_graph(Model(messages=iter([])), langchain.schedule_tools(tools))
    return langchain.LangGraphConversation(turns, graph)


ADAPTERS: dict[str, Build] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "pydantic-ai": _pydantic_ai,
    "agents-sdk": _agents_sdk,
    "langgraph": _langgraph,
}
DURABLE = ["openai", "anthropic", "pydantic-ai"]


@contextlib.asynccontextmanager
async def _running(
    session: SessionHandle, clock: FakeClock, build: Build, script: Script, *, durable: bool
) -> AsyncIterator[tuple[TurnQueue, ScheduleTools, Conversation]]:
    turns = TurnQueue(session, clock=clock, random_fraction=lambda: 1.0)
    schedule = LiveSchedule(session, turns, clock=clock)
    tools = ScheduleTools(schedule)
    conversation = build(turns, tools, script, durable)
    async with schedule, turns:
        yield turns, tools, conversation


async def _prompts(tools: ScheduleTools) -> list[str]:
    listed = json.loads(await tools.call_json("schedule_list", {}))
    return [view["prompt"] for view in listed["schedules"]]


async def _retried_turn(
    name: str, script: Script, *, turns: int = 1
) -> tuple[Conversation, list[str]]:
    """``turns`` prompts, one of whose attempts fails at the script's trouble; the retry wait
    (2 s at most) passes in virtual time. Returns the conversation and the reminders' prompts."""
    clock = FakeClock(START)
    session = await MemorySessionStore().create(now=clock.now())
    async with _running(session, clock, ADAPTERS[name], script, durable=False) as running:
        queue, tools, conversation = running
        failed = asyncio.Event()
        queue.subscribe(lambda _failed: failed.set())
        for _ in range(turns):
            conversation.submit("Remind me to stretch in an hour.")
        await asyncio.wait_for(failed.wait(), 5)
        clock.advance(2)  # the first retry waits between 1 and 2 s
        await asyncio.wait_for(conversation.wait_answers(turns), 5)
        return conversation, await _prompts(tools)


FIRST = request_context(FakeClock(START).now())
RETRY = request_context(FakeClock("2026-11-29T20:00:02.000Z").now())


@pytest.mark.parametrize("name", list(ADAPTERS))
async def test_a_retried_attempt_is_told_what_the_failed_one_created(name: str) -> None:
    script = Script(trouble="fail", at=2)  # the request after the create's result fails
    conversation, prompts = await _retried_turn(name, script)
    # The first attempt's requests carry no note — not even the one after its own create;
    # both of the retry's do, read once as it started (the model's schedule_list call then
    # changes nothing it names).
    assert script.contexts == [FIRST, FIRST, f"{RETRY}\n\n{NOTE}", f"{RETRY}\n\n{NOTE}"]
    assert prompts == ["stretch"]  # told, the model did not create it again
    assert [answer.text for answer in conversation.answers] == ["done"]
    assert conversation.rerun_note is None  # between turns


@pytest.mark.parametrize("name", list(ADAPTERS))
async def test_a_retried_attempt_after_one_that_changed_nothing_gets_no_note(name: str) -> None:
    # The first turn sets a reminder and completes; the second turn's first request fails
    # before it did anything: its retry is not told about the first turn's reminder.
    script = Script(trouble="fail", at=3)
    _conversation, prompts = await _retried_turn(name, script, turns=2)
    assert script.contexts == [FIRST, FIRST, FIRST, RETRY, RETRY]
    assert prompts == ["stretch", "stretch"]


async def _crashed_and_reopened(
    store: SessionStore, name: str, *, at: int
) -> tuple[Script, list[str]]:
    """A durable conversation whose turn hangs at request ``at`` and is cut short (the queue
    closes, as a crash leaves it: unfinished); then the session is reopened and the turn runs
    again. Returns the second run's script and the reminders' prompts."""
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    build = ADAPTERS[name]
    first = Script(trouble="hang", at=at)
    async with _running(session, clock, build, first, durable=True) as (turns, _tools, _cut):
        await turns.submit_durably("Remind me to stretch in an hour.")
        while len(first.contexts) < at:
            await asyncio.sleep(0)
    await session.close()

    clock.advance(60)
    session = await store.open(session.id)
    again = Script(at=0)
    async with _running(session, clock, build, again, durable=True) as (
        _turns,
        tools,
        conversation,
    ):
        (answer,) = await asyncio.wait_for(conversation.wait_answers(1), 5)
        prompts = await _prompts(tools)
    await session.close()
    assert answer.turn.restored
    return again, prompts


LATER = request_context(FakeClock("2026-11-29T20:01:00.000Z").now())


@pytest.mark.parametrize("name", DURABLE)
async def test_a_turn_cut_by_a_crash_is_told_what_it_created_when_it_runs_again(name: str) -> None:
    again, prompts = await _crashed_and_reopened(MemorySessionStore(), name, at=2)
    assert again.contexts == [f"{LATER}\n\n{NOTE}", f"{LATER}\n\n{NOTE}"]
    assert prompts == ["stretch"]


@pytest.mark.parametrize("name", DURABLE)
async def test_a_turn_cut_by_a_crash_before_any_change_gets_no_note(name: str) -> None:
    again, prompts = await _crashed_and_reopened(MemorySessionStore(), name, at=1)
    assert again.contexts == [LATER, LATER]
    assert prompts == ["stretch"]
