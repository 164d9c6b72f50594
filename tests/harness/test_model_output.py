"""Whatever a model replies, the reference harness stores it in a form the strict log accepts:
the turn completes and the log stays readable by ``session-schedule check``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from session_schedule.cli.main import main
from session_schedule.harness.agent import storable_text
from session_schedule.harness.chat import live_chat
from session_schedule.harness.model import ModelReply
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.message import ToolCall
from session_schedule.testing.clock import FakeClock
from tests.harness.test_agent import START, ScriptedModel

DEEP = "[" * 5000 + "]" * 5000
LONE = "\ud83d"
HALF = (
    '{"ok":false,"error":{"code":"invalid_prompt","message":"`prompt` contains the lone '
    "surrogate U+D83D at index 1, half of a character that cannot be encoded; send the whole "
    'character or remove it."}}'
)
NESTED = (
    '{"ok":false,"error":{"code":"invalid_selector","message":"the arguments nest arrays or '
    'objects more than 8 levels deep; send a flat JSON object such as {\\"prompt\\": '
    '\\"...\\", \\"after_seconds\\": 600}."}}'
)


def test_storable_text_replaces_lone_surrogates_and_joins_pairs() -> None:
    assert storable_text("ok \U0001f600") == "ok \U0001f600"
    assert storable_text(f"a{LONE}b") == "a\ufffdb"
    assert storable_text("\ud83d\ude00" + LONE) == "\U0001f600\ufffd"


@pytest.mark.parametrize(
    ("arguments", "stored", "result"),
    [
        (
            f'{{"prompt": "x{LONE}", "after_seconds": 60}}',
            '{"prompt": "x\ufffd", "after_seconds": 60}',
            HALF,
        ),
        (
            '{"prompt": "x\\ud83d", "after_seconds": 60}',
            '"{\\"prompt\\": \\"x\\\\ud83d\\", \\"after_seconds\\": 60}"',
            HALF,
        ),
        (DEEP, '"' + DEEP + '"', NESTED),
    ],
    ids=["lone-surrogate", "escaped-lone-surrogate", "nested-5000-deep"],
)
def test_a_reply_the_log_could_not_hold_is_stored_readably(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: str, stored: str, result: str
) -> None:
    session_id, expected, turns = asyncio.run(_chat(tmp_path, arguments))
    assert expected == result
    assert [(role, content) for role, content, _ in turns] == [
        ("user", "remind me"),
        ("assistant", "on it \ufffd"),
        ("tool", expected),
        ("assistant", "done"),
    ]
    assert turns[1][2] == stored
    capsys.readouterr()
    assert main(["--data-dir", str(tmp_path), "check", session_id]) == 0
    assert capsys.readouterr().out == (
        f"session {session_id} is sound: 6 entries (4 messages, 0 schedule changes), "
        "0 active reminders\n"
    )


async def _chat(data: Path, arguments: str) -> tuple[str, str, list[tuple[str, str, str]]]:
    store = JsonlSessionStore(data)
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    call = ToolCall(id="call_1", name="schedule_create", arguments=arguments)
    model = ScriptedModel(
        replies=[
            ModelReply(content=f"on it {LONE}", tool_calls=(call,)),
            ModelReply(content="done"),
        ]
    )
    async with live_chat(session, model=model, clock=clock) as live:
        live.agent.submit("remind me")
        await live.agent.wait_idle()
        expected = await live.tools.call_json("schedule_create", arguments)
        turns: list[tuple[str, str, str]] = [
            (
                turn.role,
                turn.content,
                turn.tool_calls[0].arguments if turn.tool_calls else "",
            )
            for turn in live.agent.transcript
        ]
        # The model read its own call back as stored, and the result ScheduleTools gave.
        assert model.seen[1][-1] == {"role": "tool", "tool_call_id": "call_1", "content": expected}
    await session.close()
    reopened = await JsonlSessionStore(data).open(session.id)
    await reopened.close()
    return str(session.id), expected, turns


def test_a_call_without_an_id_or_a_name_is_stored_under_placeholders(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[tuple[str, str]], str, object]:
        store = JsonlSessionStore(tmp_path)
        clock = FakeClock(START)
        session = await store.create(now=clock.now())
        call = ToolCall(id="", name="", arguments="{}")
        model = ScriptedModel(
            replies=[ModelReply(content="", tool_calls=(call,)), ModelReply(content="ok")]
        )
        async with live_chat(session, model=model, clock=clock) as live:
            live.agent.submit("hi")
            await live.agent.wait_idle()
            expected = await live.tools.call_json("", "{}")
            stored = live.agent.transcript[1].tool_calls
            answer = live.agent.transcript[2]
        await session.close()
        assert not isinstance(stored, msgspec.UnsetType)
        assert answer.content == expected
        return [(c.id, c.name) for c in stored], str(answer.tool_call_id), expected

    calls, answered, expected = asyncio.run(scenario())
    assert (calls, answered) == ([("call_1", "unnamed")], "call_1")
    assert expected == (
        '{"ok":false,"error":{"code":"invalid_selector","message":"there is no tool \'\'; '
        'the schedule tools are schedule_create, schedule_list, schedule_delete, schedule_update."}}'
    )
