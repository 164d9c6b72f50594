"""The LangChain/LangGraph adapter: strict tools that work from sync and async code, and
reminders as new runs on the same checkpointer thread."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from session_schedule import LiveSchedule, ScheduleTools, TurnQueue
from session_schedule.integrations.langchain import (
    MAX_HELD_DEPTH,
    STAND_IN_KEY,
    LangGraphConversation,
    agent_graph,
    schedule_tools,
)
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.clock import FakeClock
from tests.integrations.examples import FOLLOW_UP, load

CREATE = {
    "prompt": "stretch",
    "after_seconds": 90,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


@pytest.fixture
async def turns() -> TurnQueue:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    return TurnQueue(session, clock=clock)


@pytest.fixture
async def schedule(turns: TurnQueue) -> AsyncIterator[LiveSchedule]:
    live = LiveSchedule(turns.session, turns, clock=turns.clock)
    async with live:
        yield live


def _by_name(tools: list[BaseTool]) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in tools}


async def test_the_model_is_given_strict_tools_without_defaults(schedule: LiveSchedule) -> None:
    model = load("langgraph_reminders").scripted_model()
    agent_graph(model, schedule_tools(ScheduleTools(schedule)))
    names = [tool["function"]["name"] for tool in model.bound_tools]
    assert names == [
        "schedule_create",
        "schedule_list",
        "schedule_delete",
        "schedule_update",
    ]
    create = model.bound_tools[0]["function"]
    assert create["strict"] is True
    assert "default" not in json.dumps(create["parameters"])
    assert create["parameters"]["required"] == [
        "prompt",
        "after_seconds",
        "at",
        "every_seconds",
        "daily_at",
        "calendar",
        "ends",
        "max_lateness_seconds",
    ]


async def test_a_tool_runs_from_async_code_and_from_a_worker_thread(
    schedule: LiveSchedule,
) -> None:
    tools = _by_name(schedule_tools(ScheduleTools(schedule)))
    made = json.loads(await tools["schedule_create"].ainvoke(CREATE))
    assert made["schedule"]["scheduledAt"] == "2026-11-29T20:01:30.000Z"
    listed = json.loads(await asyncio.to_thread(tools["schedule_list"].invoke, {}))
    assert [view["id"] for view in listed["schedules"]] == ["sch_1"]
    deleted = await asyncio.to_thread(tools["schedule_delete"].invoke, {"id": "sch_1"})
    assert json.loads(deleted) == {"ok": True, "id": "sch_1", "deleted": True}


async def test_a_tool_answers_a_models_mistake_with_a_result(schedule: LiveSchedule) -> None:
    tools = _by_name(schedule_tools(ScheduleTools(schedule)))
    refused = json.loads(await tools["schedule_create"].ainvoke({**CREATE, "after_seconds": 0}))
    assert refused["ok"] is False
    assert refused["error"]["code"] == "invalid_rule"


EMPTY_PROMPT = (
    '{"ok":false,"error":{"code":"invalid_prompt","message":"`prompt` is empty; say what the '
    'reminder should prompt you to do."}}'
)


async def test_a_refused_tool_call_answers_a_tool_message_of_status_error(
    schedule: LiveSchedule,
) -> None:
    """It once answered ``status="success"`` with the ``{"ok": false}`` text; the content is the
    same text either way, from async and sync code, and a plain invocation gets the text."""
    create = _by_name(schedule_tools(ScheduleTools(schedule)))["schedule_create"]
    refused = {**CREATE, "prompt": ""}
    call = {"type": "tool_call", "id": "call_1", "name": "schedule_create", "args": refused}
    expected = ToolMessage(
        content=EMPTY_PROMPT, name="schedule_create", tool_call_id="call_1", status="error"
    )
    assert await create.ainvoke(call) == expected
    assert await asyncio.to_thread(create.invoke, call) == expected
    assert await create.ainvoke(refused) == EMPTY_PROMPT
    assert await asyncio.to_thread(create.invoke, refused) == EMPTY_PROMPT
    made = await create.ainvoke({**call, "args": CREATE})
    assert isinstance(made, ToolMessage)
    assert made.status == "success"
    assert json.loads(str(made.content))["ok"] is True


async def test_a_sync_call_on_the_loops_own_thread_is_refused(schedule: LiveSchedule) -> None:
    tools = _by_name(schedule_tools(ScheduleTools(schedule)))
    with pytest.raises(RuntimeError) as caught:
        tools["schedule_list"].invoke({})
    assert str(caught.value) == (
        "schedule_list was called synchronously on the thread of the event loop that runs the "
        "Schedule, which would wait on itself; call it asynchronously there "
        "(await tool.ainvoke(...)) or from another thread"
    )


async def test_tools_built_outside_the_loop_learn_it_from_the_first_async_call(
    schedule: LiveSchedule,
) -> None:
    tools = _by_name(
        await asyncio.to_thread(schedule_tools, ScheduleTools(schedule))  # no loop in that thread
    )
    with pytest.raises(RuntimeError) as caught:
        await asyncio.to_thread(tools["schedule_list"].invoke, {})
    assert "before the event loop that runs the Schedule was known" in str(caught.value)
    await tools["schedule_list"].ainvoke({})
    listed = json.loads(await asyncio.to_thread(tools["schedule_list"].invoke, {}))
    assert listed["schedules"] == []


async def test_the_example_delivers_the_reminder_into_the_same_thread() -> None:
    conversation = await load("langgraph_reminders").main()
    first, reminder = conversation.answers
    assert (first.turn.reminder, first.text) == (False, "I will remind you in a second.")
    assert (reminder.turn.reminder, reminder.text) == (True, "Time to stretch!")
    kinds: list[str] = []
    for message in await conversation.messages():
        if isinstance(message, HumanMessage):
            kinds.append("reminder" if message.text.startswith(FOLLOW_UP) else "prompt")
        elif isinstance(message, ToolMessage):
            kinds.append(f"result ok={json.loads(message.text)['ok']}")
        else:
            assert isinstance(message, AIMessage)
            kinds.extend(f"call {call['name']}" for call in message.tool_calls)
            if message.text:
                kinds.append(f"text {message.text}")
    assert kinds == [
        "prompt",
        "call schedule_create",
        "result ok=True",
        "text I will remind you in a second.",
        "reminder",
        "text Time to stretch!",
    ]


def _deep(levels: int) -> object:
    value: object = []
    for _ in range(levels):
        value = [value]
    return value


TOO_DEEP = (
    "the arguments nest arrays or objects more than 8 levels deep; send a flat JSON object such "
    'as {"prompt": "...", "after_seconds": 600}.'
)


@pytest.mark.parametrize(
    ("arguments", "code", "message"),
    [
        ({**CREATE, "prompt": _deep(10_000)}, "invalid_selector", TOO_DEEP),
        (
            {**CREATE, "after_seconds": 10**5_000},
            "invalid_rule",
            "after_seconds must be a positive whole number of seconds, got a number of 5,001 digits.",
        ),
    ],
)
async def test_hostile_arguments_get_the_tools_stable_error_not_an_exception(
    schedule: LiveSchedule, arguments: dict[str, object], code: str, message: str
) -> None:
    """LangChain prints every input for its callbacks: these once raised RecursionError and
    ValueError out of the tool, and out of the graph's tool node."""
    tools = _by_name(schedule_tools(ScheduleTools(schedule)))
    create = tools["schedule_create"]
    expected = {"ok": False, "error": {"code": code, "message": message}}
    assert json.loads(await create.ainvoke(arguments)) == expected
    assert json.loads(await asyncio.to_thread(create.invoke, arguments)) == expected
    call = {"type": "tool_call", "id": "call_9", "name": "schedule_create", "args": arguments}
    answered = await create.ainvoke(call)
    assert isinstance(answered, ToolMessage)
    assert (answered.tool_call_id, answered.name, answered.status) == (
        "call_9",
        "schedule_create",
        "error",
    )
    assert json.loads(str(answered.content)) == expected


HUGE = (
    "after_seconds must be a positive whole number of seconds, got 1000000000000000000000000000000."
)


@pytest.mark.parametrize("checkpointer", ["memory", "sqlite"])
@pytest.mark.parametrize(
    ("arguments", "code", "message"),
    [
        ({**CREATE, "after_seconds": 10**30}, "invalid_rule", HUGE),
        (
            {**CREATE, "after_seconds": 10**5_000},
            "invalid_rule",
            "after_seconds must be a positive whole number of seconds, got a number of 5,001 digits.",
        ),
        ({**CREATE, "prompt": _deep(300)}, "invalid_selector", TOO_DEEP),
        ({**CREATE, "prompt": _deep(10_000)}, "invalid_selector", TOO_DEEP),
    ],
)
async def test_a_graph_run_answers_arguments_its_checkpointer_cannot_hold(
    schedule: LiveSchedule,
    turns: TurnQueue,
    checkpointer: str,
    arguments: dict[str, object],
    code: str,
    message: str,
) -> None:
    """The model's reply is checkpointed before its tool calls run: these arguments once failed
    the whole run in the checkpoint serializer (msgpack holds no integer past 64 bits, no
    nesting about 250 deep). The call keeps its id with stand-in arguments, and the tool answers
    as it does for the arguments the model sent; the conversation goes on."""
    call = {"type": "tool_call", "id": "call_9", "name": "schedule_create", "args": arguments}
    model = load("langgraph_reminders").ScriptedChatModel(
        messages=iter(
            [AIMessage("", tool_calls=[call]), AIMessage("Could not."), AIMessage("Hello again.")]
        )
    )
    async with AsyncExitStack() as stack:
        saver: BaseCheckpointSaver[str] = (
            InMemorySaver()
            if checkpointer == "memory"
            else await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(":memory:"))
        )
        graph = agent_graph(model, schedule_tools(ScheduleTools(schedule)), checkpointer=saver)
        conversation = LangGraphConversation(turns, graph)
        assert await conversation.run("Remind me.") == "Could not."
        assert await conversation.run("Hi.") == "Hello again."
        messages = await conversation.messages()
    assert [type(message).__name__ for message in messages] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
        "AIMessage",
    ]
    held, answer = messages[1], messages[2]
    assert isinstance(held, AIMessage)
    assert isinstance(answer, ToolMessage)
    [held_call] = held.tool_calls
    assert (held_call["id"], held_call["name"]) == ("call_9", "schedule_create")
    assert list(held_call["args"]) == [STAND_IN_KEY]
    assert (answer.tool_call_id, answer.name) == ("call_9", "schedule_create")
    expected = {"ok": False, "error": {"code": code, "message": message}}
    assert json.loads(answer.text) == expected
    # The tool answers the stand-in as it answers the arguments the model sent.
    create = _by_name(schedule_tools(ScheduleTools(schedule)))["schedule_create"]
    direct = await create.ainvoke(call)
    assert isinstance(direct, ToolMessage)
    assert json.loads(direct.text) == expected


async def test_arguments_a_checkpointer_holds_are_kept_as_the_model_sent_them(
    schedule: LiveSchedule, turns: TurnQueue
) -> None:
    arguments = {**CREATE, "after_seconds": 2**64 - 1, "prompt": _deep(MAX_HELD_DEPTH - 2)}
    call = {"type": "tool_call", "id": "call_9", "name": "schedule_create", "args": arguments}
    model = load("langgraph_reminders").ScriptedChatModel(
        messages=iter([AIMessage("", tool_calls=[call]), AIMessage("Could not.")])
    )
    graph = agent_graph(model, schedule_tools(ScheduleTools(schedule)))
    conversation = LangGraphConversation(turns, graph)
    assert await conversation.run("Remind me.") == "Could not."
    held = (await conversation.messages())[1]
    assert isinstance(held, AIMessage)
    assert held.tool_calls[0]["args"] == arguments


async def test_a_tool_use_block_of_the_call_holds_the_stand_in_too(
    schedule: LiveSchedule, turns: TurnQueue
) -> None:
    arguments = {**CREATE, "after_seconds": 10**30}
    call = {"type": "tool_call", "id": "toolu_1", "name": "schedule_create", "args": arguments}
    block = {"type": "tool_use", "id": "toolu_1", "name": "schedule_create", "input": arguments}
    model = load("langgraph_reminders").ScriptedChatModel(
        messages=iter([AIMessage([block], tool_calls=[call]), AIMessage("Could not.")])
    )
    graph = agent_graph(model, schedule_tools(ScheduleTools(schedule)))
    conversation = LangGraphConversation(turns, graph)
    assert await conversation.run("Remind me.") == "Could not."
    held, answer = (await conversation.messages())[1:3]
    assert isinstance(held, AIMessage)
    stand_in = {STAND_IN_KEY: json.dumps(arguments, separators=(",", ":"))}
    assert held.tool_calls[0]["args"] == stand_in
    assert held.content == [{**block, "input": stand_in}]
    assert json.loads(answer.text)["error"]["message"] == HUGE
