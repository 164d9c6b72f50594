"""The transcript as a model reads it: calls a crash left unanswered are answered as interrupted."""

from __future__ import annotations

from session_schedule.core.instants import parse_instant
from session_schedule.harness.transcript import INTERRUPTED_RESULT, chat_messages
from session_schedule.session.message import (
    ToolCall,
    assistant_message,
    tool_message,
    user_message,
)

AT = parse_instant("2026-11-29T20:00:00.000Z")
CALL = ToolCall(id="call_1", name="schedule_list", arguments="{}")
OTHER = ToolCall(id="call_2", name="schedule_list", arguments="{}")


def test_a_call_whose_result_never_reached_the_log_is_answered_as_interrupted() -> None:
    turns = [
        user_message("list them", at=AT),
        assistant_message("", at=AT, tool_calls=(CALL, OTHER)),
        tool_message('{"ok":true}', at=AT, tool_call_id="call_1"),
        user_message("[session-schedule] Reminder follow-up\n…", at=AT, origin="followup"),
    ]
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in chat_messages(turns)[2:]] == [
        ("tool", "call_1", '{"ok":true}'),
        ("tool", "call_2", INTERRUPTED_RESULT),
        ("user", None, "[session-schedule] Reminder follow-up\n…"),
    ]


def test_a_transcript_that_ends_in_an_unanswered_call_is_completed() -> None:
    turns = [assistant_message("", at=AT, tool_calls=(CALL,))]
    assert chat_messages(turns)[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": INTERRUPTED_RESULT,
    }


def test_answered_calls_are_left_as_they_are() -> None:
    turns = [
        assistant_message("", at=AT, tool_calls=(CALL,)),
        tool_message("r", at=AT, tool_call_id="call_1"),
        assistant_message("done", at=AT),
    ]
    assert [m["role"] for m in chat_messages(turns)] == ["assistant", "tool", "assistant"]
