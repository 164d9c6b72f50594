"""``history`` names the reminder turn that created a reminder."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from session_schedule.cli.main import main
from session_schedule.harness.chat import live_chat
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.testing.clock import FakeClock
from tests.harness.test_chains import OnceModel


async def _session(data: Path) -> str:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    async with await JsonlSessionStore(data).create(now=clock.now()) as session:
        async with live_chat(session, model=OnceModel(), clock=clock) as live:
            live.agent.submit("check in a minute, and then every hour")
            await live.agent.wait_idle()
            for seconds in (60, 3600):
                clock.advance(seconds)
                await live.schedule.settled()
                await live.agent.wait_idle()
        await session.barrier()
        return str(session.id)


def test_history_shows_which_reminder_turn_set_a_reminder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = asyncio.run(_session(tmp_path))
    assert main(["--data-dir", str(tmp_path), "history", session, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["occurrences"]
    assert [(row["id"], row.get("setDuring")) for row in rows] == [
        ("sch_1", None),
        ("sch_2", "reminder sch_1@2026-11-29T20:01:00.000Z"),
    ]
    assert main(["--data-dir", str(tmp_path), "history", session, "sch_2"]) == 0
    table = capsys.readouterr().out
    # The detail column wraps at the plain width (120 columns).
    assert "".join(table.split()).endswith("setduringremindersch_1@2026-11-29T20:01:00.000Z")
