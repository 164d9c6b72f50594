"""The Anthropic Messages API: a reminder set through the model's tool call comes back, a
second later, as a new user turn on the same ``messages`` list, and the model's answer is
appended to it.

Runs offline: the asynchronous client talks to a scripted endpoint through
``httpx2.MockTransport``. ``python examples/anthropic_reminders.py``
"""

from __future__ import annotations

import asyncio
import json

import httpx2
from anthropic import AsyncAnthropic

from session_schedule import LiveSchedule, MemorySessionStore, ScheduleTools, SystemClock, TurnQueue
from session_schedule.integrations.anthropic import AnthropicConversation

FOLLOW_UP = "[session-schedule] Reminder follow-up"
CREATE = {
    "prompt": "Tell the user to stretch.",
    "after_seconds": 1,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


def scripted_endpoint(request: httpx2.Request) -> httpx2.Response:
    """``POST /v1/messages``: sets a reminder when asked; acts on it when it comes back."""
    last = json.loads(request.content)["messages"][-1]["content"]
    content: list[dict[str, object]]
    if isinstance(last, list) and last[0]["type"] == "tool_result":
        content = [{"type": "text", "text": "I will remind you in a second."}]
    elif last.startswith(FOLLOW_UP):
        content = [{"type": "text", "text": "Time to stretch!"}]
    else:
        content = [
            {"type": "tool_use", "id": "toolu_1", "name": "schedule_create", "input": CREATE}
        ]
    stop = "end_turn" if content[0]["type"] == "text" else "tool_use"
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted"}
    usage = {"input_tokens": 1, "output_tokens": 1}
    return httpx2.Response(
        200, json={**message, "content": content, "stop_reason": stop, "usage": usage}
    )


async def main() -> AnthropicConversation:
    transport = httpx2.MockTransport(scripted_endpoint)
    client = AsyncAnthropic(api_key="offline", http_client=httpx2.AsyncClient(transport=transport))
    session = await MemorySessionStore().create(now=SystemClock().now())
    turns = TurnQueue(session)
    schedule = LiveSchedule(session, turns)
    tools = ScheduleTools(schedule)
    conversation = AnthropicConversation(turns, client, tools, model="claude-sonnet-5")
    async with client, schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        answers = await asyncio.wait_for(conversation.wait_answers(2), timeout=30)
    for answer in answers:
        print("reminder" if answer.turn.reminder else "prompt", "->", answer.text)
    return conversation


if __name__ == "__main__":
    asyncio.run(main())
