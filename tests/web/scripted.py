"""Scripted models for the overlay's tests: they record the system message of every turn."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from dataclasses import dataclass, field

from session_schedule.core.framing import FRAME_TITLE
from session_schedule.core.time_context import time_context
from session_schedule.harness.model import ChatMessage, ModelError, ModelReply
from session_schedule.session.message import ToolCall

TOKYO_CONTEXT = time_context(["Asia/Tokyo"])
"""What the model must be told for a turn whose one prompt came from Tokyo."""
MIXED_CONTEXT = time_context(["Asia/Tokyo", "Europe/Paris"])
"""… for a turn with prompts from Tokyo and Paris: ask."""


def system_of(messages: list[ChatMessage]) -> str:
    first = messages[0]
    assert first["role"] == "system"
    return str(first["content"])


@dataclass
class QueueModel:
    """Answers with the queued replies, in order; ``gate`` holds every answer until it is set."""

    replies: list[ModelReply | ModelError] = field(default_factory=list)
    seen: list[list[ChatMessage]] = field(default_factory=list)
    gate: asyncio.Event | None = None

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def systems(self) -> list[str]:
        return [system_of(messages) for messages in self.seen]

    async def respond(
        self, messages: list[ChatMessage], tools: list[dict[str, object]]
    ) -> ModelReply:
        self.seen.append(messages)
        if self.gate is not None:
            await self.gate.wait()
        reply = self.replies.pop(0) if self.replies else ModelReply(content="ok")
        if isinstance(reply, ModelError):
            raise reply
        return reply


_PROMPT = re.compile(r'^prompt: "(.*)"$', re.MULTILINE)
_REMIND = re.compile(r"remind me (in|every) (\d+) seconds? to (.+)", re.DOTALL)


@dataclass
class RuleModel:
    """A model for a real server in another thread, answering by rule:

    - ``remind me in N seconds to TEXT`` / ``remind me every N seconds to TEXT`` →
      ``schedule_create``;
    - a tool result → ``Done — I will remind you.``; a follow-up → ``Time to <the prompt>!``;
    - anything else → ``Noted: <the last prompt>``.

    ``systems`` holds the system message of every call (the time context is in it). While
    ``gate`` is clear, answers wait for it (at most 15 s).
    """

    systems: list[str] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    calls: int = 0

    def __post_init__(self) -> None:
        self.gate.set()

    @property
    def name(self) -> str:
        return "scripted-model"

    async def respond(
        self, messages: list[ChatMessage], tools: list[dict[str, object]]
    ) -> ModelReply:
        self.systems.append(system_of(messages))
        if not self.gate.is_set():
            await asyncio.to_thread(self.gate.wait, 15)
        last = messages[-1]
        content = str(last.get("content") or "")
        if last["role"] == "tool":
            return ModelReply(content="Done — I will remind you.")
        if content.startswith(FRAME_TITLE):
            prompt = _PROMPT.search(content)
            return ModelReply(content=f"Time to {prompt[1] if prompt else 'act'}!")
        match = _REMIND.fullmatch(content)
        if match is None:
            return ModelReply(content=f"Noted: {content}")
        self.calls += 1
        key = "after_seconds" if match[1] == "in" else "every_seconds"
        arguments = json.dumps({"prompt": match[3], key: int(match[2])})
        call = ToolCall(id=f"call_{self.calls}", name="schedule_create", arguments=arguments)
        return ModelReply(content="", tool_calls=(call,))
