"""The managing-reminders guide (docs/guides/managing-reminders.md) says what the code does.

Its Python block runs as written; its tool calls, replayed in order, get exactly the results it
shows; and its frame of a snoozed delivery is the frame the library writes, word for word.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from session_schedule.core.changes import decode_change, encode_change
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.tools.handlers import ScheduleTools

GUIDE = Path(__file__).parents[1] / "docs" / "guides" / "managing-reminders.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    return [body for tag, body in BLOCK.findall(GUIDE.read_text()) if tag == language]


def test_the_python_blocks_run_as_written() -> None:
    programs = blocks("python")
    assert len(programs) == 3
    for program in programs:
        exec(compile(program, str(GUIDE), "exec"), {"__name__": "__guide__"})  # noqa: S102


def test_the_tool_calls_get_the_results_shown_and_the_frame_is_word_for_word() -> None:
    documents = [json.loads(body) for body in blocks("json") if '"operation"' not in body]
    calls = list(zip(documents[::2], documents[1::2], strict=True))

    async def replay() -> str:
        clock = FakeClock("2026-12-01T09:00:00.000Z")
        session = await MemorySessionStore().create(now=clock.now())
        agent = FakeAgent()
        async with LiveSchedule(session, agent, clock=clock) as schedule:
            tools = ScheduleTools(schedule)
            for number, (arguments, result) in enumerate(calls):
                if "paused" in arguments and arguments["paused"] is False:
                    clock.set("2026-12-01T14:20:00.000Z")
                name = "schedule_update" if "id" in arguments else "schedule_create"
                assert await tools.call(name, arguments) == result, number
                if "snooze" in arguments:
                    clock.set("2026-12-01T10:30:00.000Z")
                    await schedule.settled()
        return agent.followups[0]

    frame = asyncio.run(replay())
    texts = [body for body in blocks("text") if body.startswith("[session-schedule]")]
    assert texts == [frame + "\n"]


def test_the_log_lines_shown_are_canonical_version_3_changes() -> None:
    [log] = [body for body in blocks("json") if body.startswith('{"operation"')]
    for line in log.splitlines():
        change = decode_change(line.encode())
        assert change.version == 3
        assert encode_change(change) == line.encode()
