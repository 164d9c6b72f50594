"""``list`` and ``show`` name the reminder turn a reminder was set or last changed during, as the
model's own views do (``setDuring``), for a session built through the reminder turn path."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path

import msgspec
import pytest

from session_schedule.cli import reading
from session_schedule.cli.main import main
from session_schedule.harness.chat import live_chat
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.testing.clock import FakeClock
from tests.harness.test_chains import OnceModel, SnoozingModel

START = "2026-11-29T20:00:00.000Z"


async def _created_during_a_reminder_turn(data: Path) -> tuple[str, dict[str, object], str]:
    """sch_1, a one-shot a person asked for, whose turn created the hourly sch_2: the session,
    what ``schedule_list`` told the model at the end, and that time."""
    clock = FakeClock(START)
    async with await JsonlSessionStore(data).create(now=clock.now()) as session:
        async with live_chat(session, model=OnceModel(), clock=clock) as live:
            live.agent.submit("check in a minute, and then every hour")
            await live.agent.wait_idle()
            clock.advance(60)
            await live.schedule.settled()
            await live.agent.wait_idle()
            listed = await live.tools.call("schedule_list", {})
        await session.barrier()
        return str(session.id), json.loads(msgspec.json.encode(listed)), clock.now_text()


async def _snoozed_during_a_reminder_turn(data: Path) -> tuple[str, dict[str, object], str]:
    """sch_1, every five minutes, set by a person, then snoozed from its own turns twice."""
    clock = FakeClock(START)
    async with await JsonlSessionStore(data).create(now=clock.now()) as session:
        async with live_chat(session, model=SnoozingModel(), clock=clock) as live:
            live.agent.submit("tick every five minutes")
            await live.agent.wait_idle()
            for seconds in (300, 1):
                clock.advance(seconds)
                await live.schedule.settled()
                await live.agent.wait_idle()
            listed = await live.tools.call("schedule_list", {})
        await session.barrier()
        return str(session.id), json.loads(msgspec.json.encode(listed)), clock.now_text()


def _cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, now: str, *argv: str
) -> str:
    monkeypatch.setattr(reading, "clock", FakeClock(now))
    assert main(list(argv)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


@pytest.mark.parametrize(
    ("build", "set_during"),
    [
        # sch_2, created during sch_1's turn.
        (_created_during_a_reminder_turn, [("sch_2", "reminder sch_1@2026-11-29T20:01:00.000Z")]),
        # sch_1, snoozed during its own turns: the latest names the occurrence it delivered (a
        # snoozed delivery is its occurrence T, 20:10, delivered at 20:05:01).
        (_snoozed_during_a_reminder_turn, [("sch_1", "reminder sch_1@2026-11-29T20:10:00.000Z")]),
    ],
    ids=["created", "snoozed"],
)
def test_list_json_is_what_schedule_list_told_the_model_set_during_included(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    build: Callable[[Path], Coroutine[None, None, tuple[str, dict[str, object], str]]],
    set_during: list[tuple[str, str]],
) -> None:
    session, listed, now = asyncio.run(build(tmp_path))
    out = _cli(capsys, monkeypatch, now, "--data-dir", str(tmp_path), "list", session, "--json")
    shown = json.loads(out)
    assert shown["schedules"] == listed["schedules"]
    assert [(view["id"], view.get("setDuring")) for view in shown["schedules"]] == set_during


def test_list_shows_the_reminder_turn_under_the_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, _, now = asyncio.run(_created_during_a_reminder_turn(tmp_path))
    out = _cli(capsys, monkeypatch, now, "--data-dir", str(tmp_path), "list", session)
    assert out == (
        f"session {session} at 2026-11-29T20:01:00.000Z: 1 active reminder\n"
        "id      rule       target (UTC)               state       delivery        prompt\n"
        + "─"
        * 120
        + "\n"
        "sch_2   every 1h   2026-11-29T21:01:00.000Z   scheduled   session-local   check hourly\n"
        "                                                                          set during "
        "reminder\n"
        "                                                                          "
        "sch_1@2026-11-29T20:01:00.000Z\n"
    )


def test_show_says_which_reminder_turn_a_create_or_a_snooze_was_made_during(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    created = tmp_path / "created"
    session, _, now = asyncio.run(_created_during_a_reminder_turn(created))
    out = _cli(capsys, monkeypatch, now, "--data-dir", str(created), "show", session)
    changes = ["".join(line.split()[1:]) for line in _change_lines(out)]
    assert changes == [
        'schedule/changecreatesch_1after1m,target2026-11-29T20:01:00.000Z:"check"',
        "schedule/changedispatchsch_1(after1m);one-shotdelivered,ended",
        'schedule/changecreatesch_2every1h,target2026-11-29T21:01:00.000Z:"checkhourly";'
        "setduringremindersch_1@2026-11-29T20:01:00.000Z",
    ]
    snoozed = tmp_path / "snoozed"
    session, _, now = asyncio.run(_snoozed_during_a_reminder_turn(snoozed))
    out = _cli(capsys, monkeypatch, now, "--data-dir", str(snoozed), "show", session)
    lines = [line for line in _change_lines(out) if "create" in line or "snooze" in line]
    assert ["".join(line.split()[1:]) for line in lines] == [
        'schedule/changecreatesch_1every5m,target2026-11-29T20:05:00.000Z:"tick"',
        "schedule/changesnoozesch_1(every5m)until2026-11-29T20:05:01.000Z;"
        "setduringremindersch_1@2026-11-29T20:05:00.000Z",
        "schedule/changesnoozesch_1(every5m)until2026-11-29T20:05:02.000Z;"
        "setduringremindersch_1@2026-11-29T20:10:00.000Z",
    ]


def _change_lines(out: str) -> list[str]:
    """Each schedule change's line of ``show``, its wrapped continuation joined on."""
    entries: list[str] = []
    for line in out.splitlines():
        if line[:1].isdigit():
            entries.append(line)
        elif entries and line.startswith(" "):
            entries[-1] += " " + line.strip()
    return [entry for entry in entries if "schedule/change" in entry]
