"""The program's help is frozen by a snapshot: every command, its options and its example.

Regenerate after a deliberate change with ``SESSION_SCHEDULE_UPDATE_SNAPSHOTS=1``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from session_schedule.cli.main import build_parser, main, register_all
from session_schedule.cli.slash import HELP

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
    sections = [f"$ session-schedule --help\n{_help([], capsys)}"]
    parser = build_parser()
    register_all(parser)  # the program registers a command's arguments only when it runs it
    for command in _commands(parser):
        text = _help(command, capsys)
        assert "example:" in text, command
        sections.append(f"$ session-schedule {' '.join(command)} --help\n{text}")
    rendered = "\n".join(sections)
    if os.environ.get("SESSION_SCHEDULE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(rendered)
    assert rendered == SNAPSHOT.read_text()


def _commands(parser: argparse.ArgumentParser) -> list[list[str]]:
    """Every command under ``parser``, nested ones (``db init``) after their parent, by name."""
    found: list[list[str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name in sorted(action.choices):
                found.append([name])
                found.extend([name, *nested] for nested in _commands(action.choices[name]))
    return found


def test_every_help_fits_an_80_column_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 80 columns no line of any help is wider than the terminal: prose is filled, usage is
    wrapped, tables and examples are written to fit (an example continues with ``\\``), and
    no line breaks at a hyphen."""
    monkeypatch.setenv("COLUMNS", "80")
    parser = build_parser()
    register_all(parser)
    too_wide = [
        (" ".join(command), line)
        for command in [[], *_commands(parser)]
        for line in _help(command, capsys).splitlines()
        if len(line) > 80 or line.endswith("-")
    ]
    assert too_wide == []


def test_the_chat_help_fits_an_80_column_terminal() -> None:
    """What the chat's ``/help`` prints (the same table as ``chat --help``)."""
    assert [line for line in HELP.splitlines() if len(line) > 80] == []
