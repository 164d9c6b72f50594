"""The program's help is frozen by a snapshot: every command, its options and its example.

Regenerate after a deliberate change with ``SESSION_SCHEDULE_UPDATE_SNAPSHOTS=1``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from session_schedule.cli.main import build_parser, main

SNAPSHOT = Path(__file__).parent / "snapshots" / "help.txt"


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_help_matches_the_snapshot(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    subcommands = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    commands = sorted(subcommands.choices)
    sections = [f"$ session-schedule --help\n{_help([], capsys)}"]
    for command in commands:
        text = _help([command], capsys)
        assert "example:" in text, command
        sections.append(f"$ session-schedule {command} --help\n{text}")
    rendered = "\n".join(sections)
    if os.environ.get("SESSION_SCHEDULE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(rendered)
    assert rendered == SNAPSHOT.read_text()
