"""The OpenAI Chat Completions API: a reminder set through the model's tool call comes back, a
second later, as a new user turn on the same ``messages`` list, and the model's answer is
appended to it.

Runs offline: the asynchronous client talks to a scripted endpoint through
``httpx2.MockTransport``. ``python examples/openai_reminders.py``
"""

from __future__ import annotations

import asyncio
import json

import httpx2
from openai import AsyncOpenAI

from session_schedule import LiveSchedule, MemorySessionStore, ScheduleTools, SystemClock, TurnQueue
from session_schedule.integrations.openai import OpenAIConversation

FOLLOW_UP = "[session-schedule] Reminder follow-up"
CREATE = {
    "prompt": "Tell the user to stretch.",
    "after_seconds": 1,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


def scripted_endpoint(request: httpx2.Request) -> httpx2.Response:
    """``POST /v1/chat/completions``: sets a reminder when asked; acts on it when it comes back."""
    last = json.loads(request.content)["messages"][-1]
    message: dict[str, object] = {"role": "assistant", "content": None}
    if last["role"] == "tool":
        message["content"] = "I will remind you in a second."
    elif last["content"].startswith(FOLLOW_UP):
        message["content"] = "Time to stretch!"
    else:
        function = {"name": "schedule_create", "arguments": json.dumps(CREATE)}
        message["tool_calls"] = [{"id": "call_1", "type": "function", "function": function}]
    finish = "tool_calls" if "tool_calls" in message else "stop"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
    }
    return httpx2.Response(200, json={**completion, "choices": [choice]})


async def main() -> OpenAIConversation:
    transport = httpx2.MockTransport(scripted_endpoint)
    client = AsyncOpenAI(api_key="offline", http_client=httpx2.AsyncClient(transport=transport))
    session = await MemorySessionStore().create(now=SystemClock().now())
    turns = TurnQueue(session)
    schedule = LiveSchedule(session, turns)
    tools = ScheduleTools(schedule)
    conversation = OpenAIConversation(turns, client, tools, model="gpt-4.1-mini")
    async with client, schedule, turns:
        conversation.submit("Remind me to stretch in a second.")
        answers = await asyncio.wait_for(conversation.wait_answers(2), timeout=30)
    for answer in answers:
        print("reminder" if answer.turn.reminder else "prompt", "->", answer.text)
    return conversation


if __name__ == "__main__":
    asyncio.run(main())
