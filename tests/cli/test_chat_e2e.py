"""``session-schedule chat`` end to end: the real ``openai`` client in a child process, talking to
a scripted OpenAI-compatible server on loopback, with a reminder on the real clock (1 s)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleCreateChange,
    ScheduleDispatchChange,
)
from session_schedule.core.due import Delivery, Occurrence
from session_schedule.core.framing import frame
from session_schedule.core.instants import instant_of_canonical
from session_schedule.core.records import AfterScheduleRecord, record_target
from session_schedule.harness.transcript import OMITTED_NOTE, chat_messages, messages_of
from session_schedule.session.history import occurrence_history
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.message import MessageEntry
from session_schedule.session.port import SessionSnapshot
from session_schedule.tools.adapters import openai_tools
from session_schedule.tools.catalog import tool_definitions
from tests.cli.chat_endpoint import Answer, CallTool, Fail, Reply, ScriptedEndpoint
from tests.cli.chat_process import ChatProcess

CREATE_ARGUMENTS = '{"prompt": "Tell the user to stretch.", "after_seconds": 1}'


def read(data_dir: Path, session_id: str) -> SessionSnapshot:
    return asyncio.run(JsonlSessionStore(data_dir).read(session_id))


def test_a_reminder_set_by_the_model_reaches_it_as_a_framed_followup_turn(tmp_path: Path) -> None:
    script: list[Reply] = [
        CallTool("call_1", "schedule_create", CREATE_ARGUMENTS),
        Answer("I'll remind you."),
        Answer("Time to stretch!"),
    ]
    with (
        ScriptedEndpoint(script) as endpoint,
        ChatProcess(
            tmp_path,
            "--model",
            "scripted",
            "--base-url",
            endpoint.base_url,
            environment={"OPENAI_API_KEY": "test"},
        ) as chat,
    ):
        session_id = chat.session_id()
        chat.expect(f"model: scripted at {endpoint.base_url}")
        chat.send("remind me in a second to stretch")
        chat.expect("assistant> I'll remind you.\n")
        chat.expect("assistant> Time to stretch!\n")
        finished = chat.finish()
    assert (finished.returncode, finished.stderr) == (0, "")
    assert f"tool call> schedule_create {CREATE_ARGUMENTS}\n" in finished.stdout
    assert "time zone: not declared; the model asks which zone you mean" in finished.stdout

    first, second, third = (request.body for request in endpoint.requests)
    assert len(endpoint.requests) == 3
    assert endpoint.requests[0].headers["authorization"] == "Bearer test"
    # The tools are the strict OpenAI function tools.
    assert first["model"] == "scripted"
    assert first["tools"] == openai_tools(tool_definitions())
    assert [tool["function"]["name"] for tool in first["tools"]] == [
        "schedule_create",
        "schedule_list",
        "schedule_delete",
        "schedule_update",
    ]
    for tool in first["tools"]:
        assert tool["type"] == "function"
        assert tool["function"]["strict"] is True
        assert tool["function"]["parameters"]["additionalProperties"] is False
    assert first["messages"][0]["role"] == "system"
    assert "no time zone was reported" in first["messages"][0]["content"]
    assert first["messages"][1:] == [
        {"role": "user", "content": "remind me in a second to stretch"}
    ]
    assert second["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "schedule_create", "arguments": CREATE_ARGUMENTS},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": second["messages"][3]["content"]},
    ]
    assert second["messages"][3]["content"].startswith('{"ok":true,"schedule":{"kind":"after"')

    # The log: the create, the dispatch, and the transcript turns in order.
    snapshot = read(tmp_path, session_id)
    changes = [entry.payload for entry in snapshot.entries if entry.type == CHANGE_EVENT_TYPE]
    assert len(changes) == 2
    created, dispatched = changes
    assert isinstance(created, ScheduleCreateChange)
    assert isinstance(dispatched, ScheduleDispatchChange)
    record = created.schedule
    assert isinstance(record, AfterScheduleRecord)
    assert (record.id, record.prompt, record.after_seconds) == (
        "sch_1",
        "Tell the user to stretch.",
        1,
    )
    assert dispatched.id == "sch_1"
    transcript = messages_of(snapshot.entries)
    assert [(turn.role, turn.origin) for turn in transcript] == [
        ("user", "person"),
        ("assistant", "model"),
        ("tool", "tool"),
        ("assistant", "model"),
        ("user", "followup"),
        ("assistant", "model"),
    ]
    assert [turn.content for turn in transcript[3:6:2]] == ["I'll remind you.", "Time to stretch!"]

    # The follow-up reached the model last, after the whole transcript, exactly as framed.
    followup = transcript[4].content
    assert third["messages"][1:] == chat_messages(transcript[:5])
    assert third["messages"][-1] == {"role": "user", "content": followup}
    lines = followup.split("\n")
    decided_at = lines[3].removeprefix("decided at: ")
    assert lines == [
        "[session-schedule] Reminder follow-up",
        "A reminder you scheduled earlier in this conversation is due. Act on its prompt now; "
        "it will not be delivered again. "
        "A prompt's words about when or how often are context, not a request to create "
        "another reminder.",
        "All times are UTC.",
        f"decided at: {decided_at}",
        "",
        "reminder 1 of 1: sch_1",
        "kind: after (1 second after it was set)",
        f"due at: {record.scheduled_at}",
        f"occurrence key: sch_1@{record.scheduled_at}",
        'prompt: "Tell the user to stretch."',
    ]
    assert instant_of_canonical(decided_at) >= record_target(record)
    rebuilt = Delivery(
        kind="one-shot",
        decided_at=instant_of_canonical(decided_at),
        occurrences=(Occurrence(record=record, due_at=record_target(record), skipped=0),),
        changes=(dispatched,),
    )
    assert frame(rebuilt) == followup
    assert f"follow-up>\n{followup}\n" in finished.stdout


def test_an_endpoint_error_is_shown_and_the_session_goes_on(tmp_path: Path) -> None:
    script: list[Reply] = [Fail(500, "the model is overloaded"), Answer("back")]
    with (
        ScriptedEndpoint(script) as endpoint,
        ChatProcess(
            tmp_path,
            "--model",
            "scripted",
            "--base-url",
            endpoint.base_url,
            "--time-zone",
            "Asia/Tokyo",
            environment={"OPENAI_API_KEY": "test"},
        ) as chat,
    ):
        session_id = chat.session_id()
        chat.expect("time zone: Asia/Tokyo (from --time-zone)\n")
        chat.send("hello")
        chat.expect("error> the model endpoint failed: ")
        chat.expect("the model is overloaded")
        chat.send("again")
        chat.expect("assistant> back\n")
        finished = chat.finish()
    assert (finished.returncode, finished.stderr) == (0, "")
    assert len(endpoint.requests) == 2
    retried = endpoint.requests[1].body
    assert (
        "the user's time zone is Asia/Tokyo, as reported with their messages"
        in retried["messages"][0]["content"]
    )
    assert retried["messages"][1:] == [
        {"role": "user", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
    transcript = messages_of(read(tmp_path, session_id).entries)
    assert [turn.content for turn in transcript] == ["hello", "again", "back"]


def test_a_model_on_an_endpoint_without_a_key_gets_a_placeholder(tmp_path: Path) -> None:
    with (
        ScriptedEndpoint([Answer("hi")]) as endpoint,
        ChatProcess(
            tmp_path,
            environment={"SESSION_SCHEDULE_MODEL": "local", "OPENAI_BASE_URL": endpoint.base_url},
        ) as chat,
    ):
        chat.expect(f"model: local at {endpoint.base_url}")
        chat.send("hello")
        chat.expect("assistant> hi\n")
        finished = chat.finish()
    assert (finished.returncode, finished.stderr) == (0, "")
    assert endpoint.requests[0].headers["authorization"] == "Bearer not-needed"
    assert endpoint.requests[0].body["model"] == "local"


def test_max_context_chars_bounds_what_the_endpoint_receives(tmp_path: Path) -> None:
    long = "a" * 600
    script: list[Reply] = [Answer(long), Answer(long), Answer("short")]
    with (
        ScriptedEndpoint(script) as endpoint,
        ChatProcess(
            tmp_path,
            "--model",
            "scripted",
            "--base-url",
            endpoint.base_url,
            "--time-zone",
            "Asia/Tokyo",
            "--max-context-chars",
            "2000",
            environment={"OPENAI_API_KEY": "test"},
        ) as chat,
    ):
        for prompt, reply in (("first", long), ("second", long), ("third", "short")):
            chat.send(prompt)
            chat.expect(f"assistant> {reply}\n")
        finished = chat.finish()
    assert (finished.returncode, finished.stderr) == (0, "")
    second, third = (request.body["messages"] for request in endpoint.requests[1:])
    assert second[1:] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": long},
        {"role": "user", "content": "second"},
    ]
    assert third[1:] == [
        {"role": "user", "content": OMITTED_NOTE},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": long},
        {"role": "user", "content": "third"},
    ]


def test_a_reminder_due_while_the_endpoint_is_down_is_answered_once_it_is_back(
    tmp_path: Path,
) -> None:
    """The issue's reproduction in the chat: the model's port is closed when the reminder comes
    due; the turn is retried, and answered once an endpoint listens on that port."""
    with socket.socket() as probe:  # a free port, closed again: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ChatProcess(
        tmp_path,
        "--model",
        "scripted",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        environment={"OPENAI_API_KEY": "test"},
    ) as chat:
        session_id = chat.session_id()
        chat.send("/create after 1s stretch")
        chat.expect("error> the model endpoint failed: Connection error")
        chat.expect("; trying again in ")
        chat.expect("(attempt 2 of 10)\n")
        with ScriptedEndpoint([Answer("time to stretch")], port=port) as endpoint:
            chat.expect("assistant> time to stretch\n", timeout=60)
            assert len(endpoint.requests) == 1
        finished = chat.finish()
    assert finished.returncode == 0, finished.stderr
    snapshot = asyncio.run(JsonlSessionStore(tmp_path).read(SessionId(session_id)))
    [run] = occurrence_history(snapshot.entries)
    assert run.outcome == "delivered"
    assert run.attempts is not None
    assert run.attempts >= 2
    followups = [
        e.payload
        for e in snapshot.entries
        if isinstance(e.payload, MessageEntry) and e.payload.origin == "followup"
    ]
    assert len(followups) == 1
