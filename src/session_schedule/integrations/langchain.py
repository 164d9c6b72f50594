"""LangChain and LangGraph: the four tools as LangChain ``StructuredTool`` objects that work
from asynchronous and synchronous code alike, a ready tool-calling LangGraph graph, and a
conversation that runs each queued turn as a new run on one checkpointer thread.

Needs the ``langchain`` extra (``langchain-core`` and ``langgraph``):
``pip install 'session-schedule[langchain]'``.
"""

from __future__ import annotations

from session_schedule.extras import require

require("langchain", purpose="session_schedule.integrations.langchain")

import asyncio
import json
import uuid
from collections.abc import Awaitable, Sequence
from decimal import Decimal
from typing import Final, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from session_schedule.integrations.common import (
    MAX_MODEL_JSON_DEPTH,
    NESTED_TOO_DEEP,
    Conversation,
    SyncBridge,
    tool_specs,
    turn_metadata,
)
from session_schedule.runtime.turns import TurnQueue
from session_schedule.tools.handlers import MAX_ARGUMENT_DEPTH, ScheduleTools, ToolText

__all__ = [
    "STAND_IN_KEY",
    "LangGraphConversation",
    "MessagesGraph",
    "agent_graph",
    "schedule_tools",
]

MessagesGraph = CompiledStateGraph[MessagesState, None, MessagesState, MessagesState]
"""A compiled LangGraph graph over a list of messages, as :func:`agent_graph` builds."""


def schedule_tools(
    tools: ScheduleTools, *, loop: asyncio.AbstractEventLoop | None = None
) -> list[BaseTool]:
    """``schedule_create``, ``schedule_list`` and ``schedule_delete`` as LangChain tools.

    Their argument schemas are the strict ones (every property required, optional ones
    nullable, no ``default``), so ``model.bind_tools(tools, strict=True)`` can enforce them.
    ``await tool.ainvoke(...)`` runs on the Schedule's event loop; ``tool.invoke(...)`` works
    from synchronous code in any other thread — the call is routed onto that loop, which is the
    one running when the tools are built, or ``loop`` — and raises ``RuntimeError`` on the
    loop's own thread, where it would wait on itself. A tool returns the result as JSON text; a
    model's mistake is an ``{"ok": false, ...}`` result, never an exception. Invoked with a tool
    call, a tool answers a ``ToolMessage`` whose ``status`` is ``"error"`` for such a result
    (LangChain's way: the tool raises ``ToolException`` with the same JSON text, and its
    ``handle_tool_error`` makes that text the message's content).
    """
    bridge = SyncBridge(tools, loop=loop)
    built: list[BaseTool] = []
    for spec in tool_specs(tools):
        asynchronous, synchronous = _functions(bridge, spec.name)
        built.append(
            _ScheduleTool(
                bridge=bridge,
                name=spec.name,
                description=spec.description,
                args_schema=dict(spec.parameters),
                func=synchronous,
                coroutine=asynchronous,
                handle_tool_error=_error_text,
            )
        )
    return built


TIME_CONTEXT_KEY: Final = "session_schedule_time_context"
"""The key of a run's time context in its configuration's ``configurable`` (with the re-run note
of an attempt that runs a turn again: :meth:`Conversation.model_context`)."""


class _ScheduleTool(StructuredTool):  # type: ignore[explicit-any]  # its base declares Any
    """A schedule tool that answers arguments LangChain's own machinery cannot take — nested
    past the interpreter's recursion limit, or an integer too long to print (LangChain prints
    every input for its callbacks) — with the tool's stable error, as every other mistake is
    answered, instead of an exception: such a call goes straight to the tool. So do the
    stand-in arguments :func:`agent_graph` puts in place of arguments its checkpointer cannot
    hold (:data:`STAND_IN_KEY`): the tool is called with the arguments they stand for."""

    bridge: SyncBridge

    async def ainvoke(
        self,
        input: str | dict[str, object] | ToolCall,  # noqa: A002 - LangChain's own name
        config: RunnableConfig | None = None,
        **kwargs: object,
    ) -> object:
        hostile = _stand_in(input) or _hostile(input)
        if hostile is None:
            return await super().ainvoke(input, config, **kwargs)
        arguments, call_id = hostile
        return self._answer(await self.bridge.call_text(self.name, arguments), call_id)

    def invoke(
        self,
        input: str | dict[str, object] | ToolCall,  # noqa: A002 - LangChain's own name
        config: RunnableConfig | None = None,
        **kwargs: object,
    ) -> object:
        hostile = _stand_in(input) or _hostile(input)
        if hostile is None:
            return super().invoke(input, config, **kwargs)
        arguments, call_id = hostile
        return self._answer(self.bridge.call_text_sync(self.name, arguments), call_id)

    def _answer(self, answer: ToolText, call_id: str | None) -> str | ToolMessage:
        if call_id is None:
            return answer.text
        status = "error" if answer.failed else "success"
        return ToolMessage(content=answer.text, name=self.name, tool_call_id=call_id, status=status)


def _error_text(error: ToolException) -> str:
    """The content of the ``ToolMessage`` of a tool call a schedule tool refused: the result's
    JSON text, which the tool raised :class:`ToolException` with."""
    return str(error.args[0])


MAX_SAFE_BITS: Final = 10_000
"""An integer of more bits (about 3,000 digits) is too long for LangChain to print."""


def _call_id(call: object) -> str | None:
    call_id = call.get("id") if isinstance(call, dict) and call.get("type") == "tool_call" else None
    return call_id if isinstance(call_id, str) else None


def _hostile(call: object) -> tuple[object, str | None] | None:
    """``(arguments, tool call id)`` of an invocation LangChain could not handle, else
    ``None``."""
    is_call = isinstance(call, dict) and call.get("type") == "tool_call"
    arguments = call.get("args") if is_call and isinstance(call, dict) else call
    pending: list[tuple[object, int]] = [(arguments, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > MAX_SAFE_BITS:
                break
        elif isinstance(value, dict | list | tuple):
            if depth > MAX_ARGUMENT_DEPTH:
                break
            children = value.values() if isinstance(value, dict) else value
            pending.extend((child, depth + 1) for child in children)
    else:
        return None
    return arguments, _call_id(call)


STAND_IN_KEY: Final = "session_schedule_arguments"
"""The one key of the arguments :func:`agent_graph` puts in place of a tool call's arguments
that its checkpointer cannot hold: their value is those arguments as JSON text."""

MAX_HELD_DEPTH: Final = MAX_MODEL_JSON_DEPTH
"""The deepest nesting of arrays and objects kept in a tool call's arguments in a graph's state.
LangGraph's checkpoint serializer (msgpack) refuses a message whose values nest about 250 levels
deep; any nesting past :data:`~session_schedule.tools.handlers.MAX_ARGUMENT_DEPTH` gets the
tool's ``too deep`` error either way."""

_HELD_INTEGERS: Final = range(-(2**63), 2**64)
"""The integers msgpack encodes (a signed or an unsigned 64-bit integer)."""


def _holdable(arguments: object) -> bool:
    """Whether a checkpointer can hold ``arguments``: every integer in msgpack's range, nothing
    nested deeper than :data:`MAX_HELD_DEPTH`. Iterative."""
    pending: list[tuple[object, int]] = [(arguments, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, int) and not isinstance(value, bool):
            if value not in _HELD_INTEGERS:
                return False
        elif isinstance(value, dict | list | tuple):
            if depth > MAX_HELD_DEPTH:
                return False
            children = value.values() if isinstance(value, dict) else value
            pending.extend((child, depth + 1) for child in children)
    return True


def _json_text(value: object, depth: int = 1) -> str:
    """``value`` as JSON text, every integer written out in full (however long: Python's own
    writer stops at 4,300 digits), lone surrogates escaped, and arrays and objects deeper than
    :data:`MAX_HELD_DEPTH` replaced by a string saying so. Recursive, ``depth`` being bounded."""
    if isinstance(value, dict | list | tuple) and depth > MAX_HELD_DEPTH:
        return json.dumps(NESTED_TOO_DEEP)
    if isinstance(value, dict):
        members = (
            f"{json.dumps(str(key))}:{_json_text(item, depth + 1)}" for key, item in value.items()
        )
        return "{" + ",".join(members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_json_text(item, depth + 1) for item in value) + "]"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(Decimal(value))
    try:
        return json.dumps(value)
    except TypeError:  # no JSON value: no model's JSON makes one
        return json.dumps(repr(value))


def _read_integer(text: str) -> int:
    return int(Decimal(text))  # exact, however long: int(text) stops at 4,300 digits


def _stand_in(call: object) -> tuple[object, str | None] | None:
    """``(arguments, tool call id)`` of an invocation with stand-in arguments (see
    :data:`STAND_IN_KEY`): the arguments they stand for, else ``None``. Text that does not
    decode is given to the tool as it is, which answers it with its own error."""
    is_call = isinstance(call, dict) and call.get("type") == "tool_call"
    arguments = call.get("args") if is_call and isinstance(call, dict) else call
    if not (isinstance(arguments, dict) and len(arguments) == 1):
        return None
    text = arguments.get(STAND_IN_KEY)
    if not isinstance(text, str):
        return None
    try:
        decoded: object = json.loads(text, parse_int=_read_integer)
    except (ValueError, RecursionError, ArithmeticError):
        decoded = text
    return decoded, _call_id(call)


def _held(message: BaseMessage) -> BaseMessage:
    """The model's ``message`` as a checkpointer can hold it: each tool call's arguments that it
    cannot (see :func:`_holdable`) replaced by stand-in arguments (:data:`STAND_IN_KEY`), in the
    call and in a content block of the same id (a ``tool_use`` block's ``input``), the call's id
    kept, so that the tool answers the arguments it was sent and the result pairs with the call.
    """
    if not isinstance(message, AIMessage):
        return message
    if all(_holdable(call["args"]) for call in message.tool_calls):
        return message
    calls: list[ToolCall] = []
    stand_ins: dict[str, dict[str, str]] = {}
    for call in message.tool_calls:
        if _holdable(call["args"]):
            calls.append(call)
            continue
        stand_in = {STAND_IN_KEY: _json_text(call["args"])}
        calls.append(ToolCall(name=call["name"], args=stand_in, id=call["id"], type="tool_call"))
        if call["id"] is not None:
            stand_ins[call["id"]] = stand_in
    content = message.content
    if isinstance(content, list):
        content = [_held_block(block, stand_ins) for block in content]
    return message.model_copy(update={"tool_calls": calls, "content": content})


def _held_block(
    block: str | dict[str, object], stand_ins: dict[str, dict[str, str]]
) -> str | dict[str, object]:
    if not isinstance(block, dict):
        return block
    block_id = block.get("id")
    if not isinstance(block_id, str) or block_id not in stand_ins:
        return block
    held = dict(block)
    for key in ("input", "args"):
        if key in held:
            held[key] = stand_ins[block_id]
    return held


class _AsyncFunction(Protocol):
    def __call__(self, **arguments: object) -> Awaitable[str]: ...


class _SyncFunction(Protocol):
    def __call__(self, **arguments: object) -> str: ...


def _functions(bridge: SyncBridge, name: str) -> tuple[_AsyncFunction, _SyncFunction]:
    async def call(**arguments: object) -> str:
        return _content(await bridge.call_text(name, arguments))

    def call_sync(**arguments: object) -> str:
        return _content(bridge.call_text_sync(name, arguments))

    return call, call_sync


def _content(answer: ToolText) -> str:
    """The tool's return value: the result's JSON text; raised as :class:`ToolException` when it
    is an error, which the tool's ``handle_tool_error`` turns back into the same text — in a
    ``ToolMessage`` of ``status="error"`` when the tool was invoked with a tool call."""
    if answer.failed:
        raise ToolException(answer.text)
    return answer.text


def agent_graph(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    checkpointer: BaseCheckpointSaver[str] | None = None,
    strict: bool = True,
) -> MessagesGraph:
    """A tool-calling graph: the model answers or calls tools, the tools run, the model sees
    their results, until it answers. ``model.bind_tools(tools, strict=strict)`` gives the model
    the tools; ``checkpointer`` (an ``InMemorySaver`` by default) keeps each thread's messages.

    A tool call whose arguments the checkpointer cannot hold — an integer outside msgpack's
    64 bits, nesting deeper than :data:`MAX_HELD_DEPTH` — is kept with stand-in arguments, the
    original ones as JSON text under :data:`STAND_IN_KEY`: a schedule tool answers them as it
    answers the original arguments (with its stable error), where the graph's checkpoint would
    otherwise have failed. A tool of your own gets the stand-in arguments as they are.
    """
    bound = model.bind_tools(tools, strict=strict)

    async def call_model(
        state: MessagesState, config: RunnableConfig
    ) -> dict[str, list[BaseMessage]]:
        # The run's time context goes first, for this request only: the state does not keep it.
        context = config.get("configurable", {}).get(TIME_CONTEXT_KEY)
        messages = state["messages"]
        if isinstance(context, str):
            messages = [SystemMessage(context), *messages]
        return {"messages": [_held(await bound.ainvoke(messages))]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=checkpointer or InMemorySaver())


class LangGraphConversation(Conversation):
    """A LangGraph conversation fed by ``turns``: each turn — a host prompt or a reminder — is
    ``graph.ainvoke({"messages": [HumanMessage(text)]})`` on one checkpointer thread, so the
    checkpointer keeps the history.

    ``graph`` is compiled with a checkpointer (:func:`agent_graph` builds one); ``thread_id``
    names the thread (a new one by default; pass an earlier one to continue it). Each run's
    ``config["metadata"]`` holds the turn's :func:`turn_metadata` (its occurrence keys), and its
    ``configurable`` the time context (the current time, ``time_zone`` when given, and a re-run
    note: :meth:`~Conversation.model_context`) under :data:`TIME_CONTEXT_KEY`: :func:`agent_graph`
    puts it before the messages of every model request; a graph of your own reads it there.
    """

    def __init__(
        self,
        turns: TurnQueue,
        graph: MessagesGraph,
        *,
        thread_id: str | None = None,
        time_zone: str | None = None,
    ) -> None:
        super().__init__(turns, time_zone=time_zone)
        self._graph = graph
        self._thread_id = thread_id or f"session-schedule-{uuid.uuid4()}"

    @property
    def thread_id(self) -> str:
        return self._thread_id

    @property
    def config(self) -> RunnableConfig:
        """The run configuration naming this conversation's thread."""
        return {"configurable": {"thread_id": self._thread_id}}

    def _run_config(self) -> RunnableConfig:
        """:attr:`config`, with the time context of this run and any re-run note
        (:meth:`model_context`, read by :func:`agent_graph`)."""
        return {
            "configurable": {"thread_id": self._thread_id, TIME_CONTEXT_KEY: self.model_context()}
        }

    async def messages(self) -> list[BaseMessage]:
        """The thread's messages so far, as the checkpointer keeps them."""
        snapshot = await self._graph.aget_state(self.config)
        values: object = snapshot.values
        messages: object = values.get("messages", []) if isinstance(values, dict) else []
        if not isinstance(messages, list):
            raise TypeError(f"the thread's state has no list of messages: {messages!r}")
        return [message for message in messages if isinstance(message, BaseMessage)]

    async def run(self, text: str) -> str:
        config = self._run_config()
        turn = self.current_turn
        if turn is not None:
            # LangChain's run metadata: tools read it from their injected config, and tracers
            # record it with the run.
            config["metadata"] = turn_metadata(turn)
        state = await self._graph.ainvoke({"messages": [HumanMessage(text)]}, config)
        last = state["messages"][-1]
        if not isinstance(last, AIMessage):
            raise TypeError(f"the graph's run ended with a {type(last).__name__}, not the model")
        return last.text
