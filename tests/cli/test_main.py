from __future__ import annotations

import subprocess
import sys

import pytest

from session_schedule.cli.main import main


def test_walkthrough_shows_every_stage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["walkthrough"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Virtual time starts at 2026-11-29T20:00:00.000Z.\n")
    assert "   -> sch_1 scheduled at 2026-11-29T20:01:30.000Z\n" in out
    assert "   -> frequency_too_high: every_seconds must be at least 300" in out
    assert "does not exist in America/New_York: the clocks skip from 02:00 to 03:00" in out
    assert '   {"operation":"delete","version":1,"id":"sch_3"}\n' in out
    assert "   skipped occurrences: 4\n" in out
    assert out.index("occurrence key: sch_2@") < out.index("occurrence key: sch_4@")
    assert out.endswith(
        '"scheduledAt":"2026-11-30T02:00:00.000Z","state":"scheduled",'
        '"deliveryMode":"session-local"}\n'
    )


def test_resolve_prints_targets_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "2026-12-01T09:00:00+09:00", "2026-12-01 09:00 Asia/Tokyo"]) == 0
    assert capsys.readouterr().out == (
        "2026-12-01T09:00:00+09:00  ->  2026-12-01T00:00:00.000Z\n"
        "2026-12-01 09:00 Asia/Tokyo  ->  2026-12-01T00:00:00.000Z\n"
    )
    assert main(["resolve", "tomorrow", "2026-12-01T09:00:00Z"]) == 1
    assert capsys.readouterr().out == (
        "tomorrow  ->  invalid_selector: 'tomorrow' is not an RFC 3339 date-time; write "
        "YYYY-MM-DDTHH:MM:SS, an optional fraction, then 'Z' or an offset, such as "
        "'2026-12-01T09:00:00+09:00'.\n"
        "2026-12-01T09:00:00Z  ->  2026-12-01T09:00:00.000Z\n"
    )


def test_usage_errors_exit_2_without_a_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "session_schedule", "resolve"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "the following arguments are required: AT" in result.stderr
