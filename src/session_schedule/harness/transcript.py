"""A Session's ``message`` entries as the chat messages a model reads."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from session_schedule.harness.model import ChatMessage
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, MessageEntry
from session_schedule.session.port import LogEntry


def messages_of(entries: Iterable[LogEntry]) -> list[MessageEntry]:
    """The transcript turns among ``entries``, in order (a fork's inherited turns included)."""
    return [
        entry.payload
        for entry in entries
        if entry.type == MESSAGE_ENTRY_TYPE and isinstance(entry.payload, MessageEntry)
    ]


def chat_messages(turns: Iterable[MessageEntry]) -> list[ChatMessage]:
    """The turns in the OpenAI Chat Completions message format."""
    messages: list[ChatMessage] = []
    for turn in turns:
        if turn.role == "assistant":
            message: ChatMessage = {"role": "assistant", "content": turn.content or None}
            if not isinstance(turn.tool_calls, msgspec.UnsetType) and turn.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in turn.tool_calls
                ]
            messages.append(message)
        elif turn.role == "tool":
            messages.append(
                {"role": "tool", "tool_call_id": turn.tool_call_id, "content": turn.content}
            )
        else:
            messages.append({"role": "user", "content": turn.content})
    return messages
