"""The reference model client against a scripted OpenAI-compatible endpoint."""

from __future__ import annotations

from openai import AsyncOpenAI

from session_schedule.harness.model import ModelReply, OpenAIChatModel
from session_schedule.session.message import ToolCall
from session_schedule.tools.adapters import openai_tools
from session_schedule.tools.catalog import tool_definitions
from tests.cli.chat_endpoint import Answer, CallTool, ScriptedEndpoint


async def test_requests_carry_the_tools_and_tool_choice_auto() -> None:
    tools = openai_tools(tool_definitions())
    messages: list[dict[str, object]] = [{"role": "user", "content": "remind me"}]
    with ScriptedEndpoint(
        [CallTool("call_1", "schedule_list", "{}"), Answer("nothing is set")]
    ) as endpoint:
        async with AsyncOpenAI(api_key="test", base_url=endpoint.base_url) as client:
            model = OpenAIChatModel(client, "scripted")
            first = await model.respond(messages, tools)
            second = await model.respond(messages, tools)
        recorded = [request.body for request in endpoint.requests]
    assert first == ModelReply(
        content="", tool_calls=(ToolCall(id="call_1", name="schedule_list", arguments="{}"),)
    )
    assert second == ModelReply(content="nothing is set")
    assert len(recorded) == 2
    for body in recorded:
        assert body["tool_choice"] == "auto"
        assert body["tools"] == tools
        assert body["messages"] == messages
        assert body["model"] == "scripted"
