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
from tests.cli.test_operator import make_session
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


def test_history_of_an_id_the_session_never_had_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # sch_1 … sch_4 were created (sch_3 is due in 2030, sch_4 deleted before it was due); no
    # create made sch_5. A mistyped id is not "0 occurrences", which reads as "never fired".
    session = make_session(tmp_path)
    expected = (
        f"session-schedule: session {session} never had a reminder sch_5; check the reminder id\n"
    )
    for json_flag in ([], ["--json"]):
        assert main(["--data-dir", str(tmp_path), "history", session, "sch_5", *json_flag]) == 2
        assert capsys.readouterr() == ("", expected)


def test_history_of_a_reminder_without_an_occurrence_yet_is_zero_occurrences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = make_session(tmp_path)
    assert main(["--data-dir", str(tmp_path), "history", session, "sch_3"]) == 0
    assert capsys.readouterr() == (f"session {session}: 0 occurrences of sch_3\n", "")
    assert main(["--data-dir", str(tmp_path), "history", session, "sch_3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True,
        "session": session,
        "occurrences": [],
    }
    # A fork inherits the creates, not the reminders: its history of them is empty, not an error.
    assert main(["--data-dir", str(tmp_path), "fork", session]) == 0
    child = capsys.readouterr().out.strip()
    assert main(["--data-dir", str(tmp_path), "history", child, "sch_1"]) == 0
    assert capsys.readouterr() == (f"session {child}: 0 occurrences of sch_1\n", "")
