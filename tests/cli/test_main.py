from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from session_schedule.cli.main import main
from tests.cli.test_operator import SESSION, make_session


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
    assert (
        '"scheduledAt":"2026-11-30T02:00:00.000Z","state":"scheduled",'
        '"deliveryMode":"session-local","runs":0,"lastRun":null}\n'
    ) in out


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
    # An every input without a SPEC §11 option: not "'every 3600' is not an RFC 3339 date-time".
    assert main(["resolve", "every 3600"]) == 1
    assert capsys.readouterr().out == (
        "every 3600  ->  'every SECONDS' is taken only with the managing options (SPEC 11): add "
        "--until, --max-runs, --max-lateness, --snooze or --resume\n"
    )


def test_resolve_refuses_a_malformed_time_option_as_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Exit 2 with the tool's message, not 6 (a storage failure) as before.
    for option in ("--after", "--resume"):
        with pytest.raises(SystemExit) as stopped:
            main(["resolve", option, "garbage", "every 3600"])
        assert stopped.value.code == 2
        assert capsys.readouterr().err.endswith(
            f"session-schedule resolve: error: argument {option}: 'garbage' is not an RFC 3339 "
            "date-time; write YYYY-MM-DDTHH:MM:SS, an optional fraction, then 'Z' or an offset, "
            "such as '2026-12-01T09:00:00+09:00'.\n"
        )


def test_resolve_shows_an_instant_before_year_0001_as_past(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Only the upper end of the range is time_out_of_range: earlier is simply in the past.
    inputs = [
        "0000-12-31T23:00:00-02:00",
        "0001-01-01T00:00:00+00:01",
        "0001-01-01 00:00 Asia/Tokyo",
    ]
    assert main(["resolve", *inputs]) == 0
    assert capsys.readouterr().out == (
        "0000-12-31T23:00:00-02:00  ->  0001-01-01T01:00:00.000Z\n"
        "0001-01-01T00:00:00+00:01  ->  0000-12-31T23:59:00.000Z  (before "
        "0001-01-01T00:00:00.000Z: in the past, a model gets not_future)\n"
        "0001-01-01 00:00 Asia/Tokyo  ->  0000-12-31T14:41:01.000Z  (before "
        "0001-01-01T00:00:00.000Z: in the past, a model gets not_future)\n"
    )
    # A decision time before the range is a usage error: no record can hold it.
    for option in ("--after", "--resume"):
        with pytest.raises(SystemExit) as stopped:
            main(["resolve", option, "0001-01-01T00:00:00+00:01", "every 3600"])
        assert stopped.value.code == 2
        assert capsys.readouterr().err.endswith(
            f"session-schedule resolve: error: argument {option}: '0001-01-01T00:00:00+00:01' is "
            "before 0001-01-01T00:00:00.000Z, the earliest instant Schedule can represent; "
            "choose a later time.\n"
        )


def test_resolve_lists_the_next_daily_occurrences(capsys: pytest.CaptureFixture[str]) -> None:
    arguments = ["resolve", "--after", "2027-03-12T12:00:00Z", "daily 02:30 America/New_York"]
    assert main(arguments) == 0
    assert capsys.readouterr().out == (
        "daily 02:30 America/New_York  ->  the next 5 after 2027-03-12T12:00:00.000Z:\n"
        "  sat 2027-03-13T02:30:00.000-05:00  =  2027-03-13T07:30:00.000Z\n"
        "  sun 2027-03-14T03:00:00.000-04:00  =  2027-03-14T07:00:00.000Z"
        "  (2027-03-14 has no 02:30: the clocks jump)\n"
        "  mon 2027-03-15T02:30:00.000-04:00  =  2027-03-15T06:30:00.000Z\n"
        "  tue 2027-03-16T02:30:00.000-04:00  =  2027-03-16T06:30:00.000Z\n"
        "  wed 2027-03-17T02:30:00.000-04:00  =  2027-03-17T06:30:00.000Z\n"
    )
    arguments = ["resolve", "--after", "2011-12-20T00:00:00Z", "daily 12:00 Pacific/Apia fri"]
    assert main([*arguments, "daily 09:00 Asia/Tokyo mon,Wed", "daily 9:00 UTC mon extra"]) == 1
    assert capsys.readouterr().out == (
        "daily 12:00 Pacific/Apia fri  ->  the next 5 after 2011-12-20T00:00:00.000Z:\n"
        "  fri 2011-12-23T12:00:00.000-10:00  =  2011-12-23T22:00:00.000Z\n"
        # Friday 2011-12-30's occurrence, where the gap that skipped the whole day ends: on
        # Saturday's date, and shown with Saturday's weekday.
        "  sat 2011-12-31T00:00:00.000+14:00  =  2011-12-30T10:00:00.000Z"
        "  (2011-12-30 has no 12:00: the clocks jump)\n"
        "  fri 2012-01-06T12:00:00.000+14:00  =  2012-01-05T22:00:00.000Z\n"
        "  fri 2012-01-13T12:00:00.000+14:00  =  2012-01-12T22:00:00.000Z\n"
        "  fri 2012-01-20T12:00:00.000+14:00  =  2012-01-19T22:00:00.000Z\n"
        "daily 09:00 Asia/Tokyo mon,Wed  ->  invalid_rule: `weekdays` contains 'Wed', which is "
        "not a day name; use 'mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'.\n"
        "daily 9:00 UTC mon extra  ->  write it as daily TIME ZONE [DAYS], e.g. "
        "'daily 09:00 Asia/Tokyo mon,wed,fri'\n"
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
    assert "the following arguments are required: INPUT" in result.stderr


def test_a_session_id_in_place_of_the_command_resumes_its_chat(tmp_path: Path) -> None:
    make_session(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "session_schedule", "--data-dir", str(tmp_path), SESSION],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"session {SESSION} closed; resume it with: " in result.stdout


def test_a_word_that_is_neither_a_command_nor_a_session_id_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "session_schedule", "lsit"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 2
    assert "invalid choice: 'lsit'" in result.stderr


def test_resolve_lists_the_next_calendar_occurrences(capsys: pytest.CaptureFixture[str]) -> None:
    arguments = [
        "resolve",
        "--after",
        "2027-01-01T00:00:00Z",
        "calendar FREQ=MONTHLY;BYDAY=2SU 02:30 America/New_York",
        "calendar FREQ=WEEKLY;INTERVAL=2 09:00 Europe/Paris 2026-12-04",
    ]
    assert main(arguments) == 0
    assert capsys.readouterr().out == (
        "calendar FREQ=MONTHLY;BYDAY=2SU 02:30 America/New_York  ->  FREQ=MONTHLY;BYDAY=2SU from "
        "2026-12-31, the next 5 after 2027-01-01T00:00:00.000Z:\n"
        "  sun 2027-01-10T02:30:00.000-05:00  =  2027-01-10T07:30:00.000Z\n"
        "  sun 2027-02-14T02:30:00.000-05:00  =  2027-02-14T07:30:00.000Z\n"
        "  sun 2027-03-14T03:00:00.000-04:00  =  2027-03-14T07:00:00.000Z"
        "  (2027-03-14 has no 02:30: the clocks jump)\n"
        "  sun 2027-04-11T02:30:00.000-04:00  =  2027-04-11T06:30:00.000Z\n"
        "  sun 2027-05-09T02:30:00.000-04:00  =  2027-05-09T06:30:00.000Z\n"
        "calendar FREQ=WEEKLY;INTERVAL=2 09:00 Europe/Paris 2026-12-04  ->  FREQ=WEEKLY;INTERVAL=2 "
        "from 2026-12-04, the next 5 after 2027-01-01T00:00:00.000Z:\n"
        "  fri 2027-01-01T09:00:00.000+01:00  =  2027-01-01T08:00:00.000Z\n"
        "  fri 2027-01-15T09:00:00.000+01:00  =  2027-01-15T08:00:00.000Z\n"
        "  fri 2027-01-29T09:00:00.000+01:00  =  2027-01-29T08:00:00.000Z\n"
        "  fri 2027-02-12T09:00:00.000+01:00  =  2027-02-12T08:00:00.000Z\n"
        "  fri 2027-02-26T09:00:00.000+01:00  =  2027-02-26T08:00:00.000Z\n"
    )
    arguments = [
        "resolve",
        "--after",
        "2027-01-01T00:00:00Z",
        "calendar FREQ=MONTHLY;BYHOUR=3 02:30 UTC",
    ]
    extra = [
        "calendar FREQ=DAILY 09:00 UTC 2027-01-01 extra",
        "calendar FREQ=DAILY;X-FOO=1 09:00 UTC",
    ]
    assert main([*arguments, *extra]) == 1
    assert capsys.readouterr().out == (
        "calendar FREQ=MONTHLY;BYHOUR=3 02:30 UTC  ->  invalid_rule: BYHOUR is not supported; the "
        "time of day comes from `time`, so remove BYHOUR.\n"
        "calendar FREQ=DAILY 09:00 UTC 2027-01-01 extra  ->  write it as calendar RULE TIME ZONE "
        "[START], e.g. 'calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris'\n"
        "calendar FREQ=DAILY;X-FOO=1 09:00 UTC  ->  invalid_rule: X-FOO is not a supported rule "
        "part; use FREQ, INTERVAL, BYMONTH, BYMONTHDAY, BYDAY, BYSETPOS, COUNT or UNTIL.\n"
    )


def _resolved(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str]:
    code = main(["resolve", "--after", "2026-12-01T00:00:00Z", *arguments])
    return code, capsys.readouterr().out


def test_resolve_shows_where_a_bounded_input_ends(capsys: pytest.CaptureFixture[str]) -> None:
    assert _resolved(capsys, "--max-runs", "3", "daily 09:00 Asia/Tokyo") == (
        0,
        "daily 09:00 Asia/Tokyo  ->  deliveries after 2026-12-01T00:00:00.000Z:\n"
        "  wed 2026-12-02T09:00:00.000+09:00  =  2026-12-02T00:00:00.000Z\n"
        "  thu 2026-12-03T09:00:00.000+09:00  =  2026-12-03T00:00:00.000Z\n"
        "  fri 2026-12-04T09:00:00.000+09:00  =  2026-12-04T00:00:00.000Z\n"
        "  ends: with the delivery above (its last run under ends.max_runs)\n",
    )
    assert _resolved(capsys, "--until", "2026-12-03 09:00 Asia/Tokyo", "every 43200") == (
        0,
        "every 43200  ->  deliveries after 2026-12-01T00:00:00.000Z:\n"
        "  2026-12-01T12:00:00.000Z\n"
        "  2026-12-02T00:00:00.000Z\n"
        "  2026-12-02T12:00:00.000Z\n"
        "  2026-12-03T00:00:00.000Z\n"
        "  ends: with the delivery above (no occurrence left up to ends.until "
        "2026-12-03T00:00:00.000Z)\n",
    )
    assert _resolved(
        capsys, "--max-runs", "9", "--until", "2027-01-01T00:00:00Z", "every 3600"
    ) == (
        0,
        "every 3600  ->  deliveries after 2026-12-01T00:00:00.000Z:\n"
        "  2026-12-01T01:00:00.000Z\n"
        "  2026-12-01T02:00:00.000Z\n"
        "  2026-12-01T03:00:00.000Z\n"
        "  2026-12-01T04:00:00.000Z\n"
        "  2026-12-01T05:00:00.000Z\n"
        "  ends: after 4 more runs; no delivery after 2027-01-01T00:00:00.000Z\n",
    )


def test_resolve_shows_the_error_a_model_would_get(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _resolved(
        capsys,
        "--until",
        "2026-12-01T12:00:00Z",
        "daily 09:00 Asia/Tokyo",
        "2026-12-01T09:00:00Z",
        "every 60",
    )
    assert (code, out) == (
        1,
        "daily 09:00 Asia/Tokyo  ->  invalid_rule: `ends.until` 2026-12-01T12:00:00.000Z is not "
        "after the reminder's first target 2026-12-02T00:00:00.000Z; choose a later end or "
        "leave it null.\n"
        "2026-12-01T09:00:00Z  ->  invalid_rule: `ends` applies only to a recurring reminder "
        "(every_seconds, daily_at or calendar); leave it null for a one-time reminder.\n"
        "every 60  ->  frequency_too_high: every_seconds must be at least 300 (5 minutes), got "
        "60; choose a longer interval.\n",
    )
    assert _resolved(capsys, "--snooze", "after soon", "every 3600") == (
        1,
        "every 3600  ->  invalid_rule: `snooze.after_seconds` must be a positive whole number of "
        'seconds, got "soon".\n',
    )
    assert _resolved(
        capsys, "--resume", "2026-12-01T05:20:00Z", "--until", "2026-12-01T04:00:00Z", "every 3600"
    ) == (
        1,
        "every 3600  ->  invalid_rule: sch_1 has no occurrence left before its end, so it cannot "
        "be resumed; change its end (ends) or delete it.\n",
    )


def test_resolve_shows_a_snoozed_delivery_and_the_lateness_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _resolved(
        capsys, "--snooze", "after 9000", "--max-lateness", "600", "--max-runs", "3", "every 3600"
    ) == (
        0,
        "every 3600  ->  deliveries after 2026-12-01T00:00:00.000Z:\n"
        "  2026-12-01T02:30:00.000Z  (snoozed from: 2026-12-01T01:00:00.000Z; skipped "
        "occurrences: 1; missed if not delivered by 2026-12-01T02:40:00.000Z)\n"
        "  2026-12-01T03:00:00.000Z  (missed if not delivered by 2026-12-01T03:10:00.000Z)\n"
        "  2026-12-01T04:00:00.000Z  (missed if not delivered by 2026-12-01T04:10:00.000Z)\n"
        "  ends: with the delivery above (its last run under ends.max_runs)\n",
    )
    assert _resolved(
        capsys, "--snooze", "2026-12-01 09:00 Europe/Paris", "2026-12-01T06:00:00Z"
    ) == (
        0,
        "2026-12-01T06:00:00Z  ->  deliveries after 2026-12-01T00:00:00.000Z:\n"
        "  2026-12-01T08:00:00.000Z  (snoozed from: 2026-12-01T06:00:00.000Z; skipped "
        "occurrences: 0)\n",
    )


def test_resolve_shows_where_a_paused_reminder_continues(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _resolved(
        capsys, "--resume", "2026-12-01T05:20:00Z", "--max-runs", "2", "every 3600"
    ) == (
        0,
        "every 3600  ->  deliveries after 2026-12-01T00:00:00.000Z, paused until "
        "2026-12-01T05:20:00.000Z:\n"
        "  2026-12-01T06:00:00.000Z\n"
        "  2026-12-01T07:00:00.000Z\n"
        "  ends: with the delivery above (its last run under ends.max_runs)\n",
    )
    assert _resolved(
        capsys, "--resume", "2026-12-01T05:20:00Z", "--max-lateness", "60", "2026-12-01T03:00:00Z"
    ) == (
        0,
        "2026-12-01T03:00:00Z  ->  deliveries after 2026-12-01T00:00:00.000Z, paused until "
        "2026-12-01T05:20:00.000Z:\n"
        "  2026-12-01T03:00:00.000Z  (delivered at 2026-12-01T05:20:00.000Z; missed if not "
        "delivered by 2026-12-01T05:21:00.000Z)\n",
    )
    assert _resolved(
        capsys,
        "--resume",
        "2027-03-13T08:00:00Z",
        "--max-runs",
        "1",
        "--after",
        "2027-03-12T12:00:00Z",
        "daily 02:30 America/New_York",
    ) == (
        0,
        "daily 02:30 America/New_York  ->  deliveries after 2027-03-12T12:00:00.000Z, paused "
        "until 2027-03-13T08:00:00.000Z:\n"
        "  sun 2027-03-14T03:00:00.000-04:00  =  2027-03-14T07:00:00.000Z  (the clocks jump "
        "past 02:30)\n"
        "  ends: with the delivery above (its last run under ends.max_runs)\n",
    )
