"""The OpenAI Chat Completions API, durable: the reminder and the conversation both live in a
JSONL session, so a second run of the program delivers the reminder to the same conversation.

The first run asks for a reminder and introduces the person; the second run (a restart) opens
the same session, the reminder comes due, and the model, which has the earlier messages again,
answers by name. The conversation is kept in the session's log, as ``framework/messages``
entries (``durable=True``), beside the reminders, with the same barrier.

Runs offline: the asynchronous client talks to a scripted endpoint through
``httpx2.MockTransport``. ``python examples/openai_durable.py [DIRECTORY]``, twice.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import httpx2
from openai import AsyncOpenAI

from session_schedule import (
    Clock,
    JsonlSessionStore,
    LiveSchedule,
    ScheduleTools,
    SystemClock,
    TurnQueue,
)
from session_schedule.integrations.openai import OpenAIConversation

FOLLOW_UP = "[session-schedule] Reminder follow-up"
NAME = "My name is "
CREATE = {
    "prompt": "Tell the user to stretch.",
    "after_seconds": 1,
    "at": None,
    "every_seconds": None,
    "daily_at": None,
}


def scripted_endpoint(request: httpx2.Request) -> httpx2.Response:
    """``POST /v1/chat/completions``: sets a reminder when asked, greets the person, and acts on
    the reminder by the name the conversation holds."""
    messages = json.loads(request.content)["messages"]
    last = messages[-1]
    said = [m["content"] for m in messages if m["role"] == "user"]
    name = next((text[len(NAME) :].rstrip(".") for text in said if text.startswith(NAME)), "you")
    message: dict[str, object] = {"role": "assistant", "content": None}
    if last["role"] == "tool":
        message["content"] = "I will remind you in a second."
    elif last["content"].startswith(FOLLOW_UP):
        message["content"] = f"Time to stretch, {name}!"
    elif last["content"].startswith(NAME):
        message["content"] = f"Nice to meet you, {name}."
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


async def main(directory: Path, clock: Clock | None = None) -> OpenAIConversation:
    clock = clock or SystemClock()
    transport = httpx2.MockTransport(scripted_endpoint)
    client = AsyncOpenAI(api_key="offline", http_client=httpx2.AsyncClient(transport=transport))
    store = JsonlSessionStore(directory)
    earlier = await store.list()  # the session of a first run, if there was one
    if earlier:
        session = await store.open(earlier[0].id)
    else:
        session = await store.create(now=clock.now())
    async with session:
        turns = TurnQueue(session, clock=clock)  # a restart resumes any unfinished turn
        schedule = LiveSchedule(session, turns, clock=clock)
        tools = ScheduleTools(schedule)
        conversation = OpenAIConversation(turns, client, tools, model="gpt-4.1-mini", durable=True)
        async with client, schedule, turns:
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
    default = Path(tempfile.gettempdir()) / "session-schedule-openai-durable"
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
