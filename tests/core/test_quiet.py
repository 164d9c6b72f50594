from __future__ import annotations

import pytest

from session_schedule.core.instants import parse_instant
from session_schedule.core.quiet import (
    QuietHours,
    deferred_since,
    describe,
    quiet_until,
    quiet_window,
)

NIGHT = quiet_window(QuietHours(start="22:00", end="07:00", time_zone="Europe/Paris"))


@pytest.mark.parametrize(
    ("now", "until"),
    [
        ("2026-11-29T20:59:59.999Z", None),  # 21:59:59.999 in Paris
        ("2026-11-29T21:00:00.000Z", "2026-11-30T06:00:00.000Z"),  # 22:00 opens the window
        ("2026-11-29T23:30:00.000Z", "2026-11-30T06:00:00.000Z"),  # past midnight
        ("2026-11-30T05:59:59.999Z", "2026-11-30T06:00:00.000Z"),
        ("2026-11-30T06:00:00.000Z", None),  # 07:00 closes it
        ("2026-07-01T20:30:00.000Z", "2026-07-02T05:00:00.000Z"),  # summer time: UTC+2
    ],
)
def test_an_instant_is_quiet_until_the_window_closes(now: str, until: str | None) -> None:
    found = quiet_until(NIGHT, parse_instant(now))
    assert found == (None if until is None else parse_instant(until))


def test_an_edge_the_clocks_skip_is_the_instant_they_jump() -> None:
    # 2026-03-29 in Paris: 02:00 CET becomes 03:00 CEST (01:00Z); 02:30 never shows.
    window = quiet_window(QuietHours(start="01:30", end="02:30", time_zone="Europe/Paris"))
    assert quiet_until(window, parse_instant("2026-03-29T00:45:00.000Z")) == parse_instant(
        "2026-03-29T01:00:00.000Z"
    )
    assert quiet_until(window, parse_instant("2026-03-29T01:00:00.000Z")) is None


def test_an_edge_the_clocks_repeat_is_its_earlier_instant() -> None:
    # 2026-10-25 in Paris: 03:00 CEST becomes 02:00 CET (01:00Z); 02:30 shows twice.
    window = quiet_window(QuietHours(start="00:00", end="02:30", time_zone="Europe/Paris"))
    assert quiet_until(window, parse_instant("2026-10-25T00:10:00.000Z")) == parse_instant(
        "2026-10-25T00:30:00.000Z"
    )
    assert quiet_until(window, parse_instant("2026-10-25T01:10:00.000Z")) is None


def test_a_window_within_one_day() -> None:
    window = quiet_window(QuietHours(start="12:00", end="13:30", time_zone="UTC"))
    assert quiet_until(window, parse_instant("2026-11-29T12:15:00.000Z")) == parse_instant(
        "2026-11-29T13:30:00.000Z"
    )
    assert quiet_until(window, parse_instant("2026-11-29T13:45:00.000Z")) is None
    assert quiet_until(window, parse_instant("2026-11-29T11:59:00.000Z")) is None
    assert describe(window.hours) == "12:00 to 13:30 UTC"


@pytest.mark.parametrize(
    ("hours", "message"),
    [
        (
            QuietHours(start="22:00", end="07:00", time_zone="Mars/Olympus"),
            "quiet hours: 'Mars/Olympus' is not a supported time zone; use 'UTC' or an IANA "
            "Area/Location name such as 'America/New_York' or 'Asia/Tokyo'.",
        ),
        (
            QuietHours(start="10pm", end="07:00", time_zone="UTC"),
            "quiet hours: `time` must have the form HH:MM, HH:MM:SS or HH:MM:SS.sss (24-hour, 1-3 "
            "fraction digits), such as '09:00', not '10pm'.",
        ),
        (
            QuietHours(start="07:00", end="07:00", time_zone="UTC"),
            "quiet hours: the window opens and closes at 07:00; leave it out",
        ),
    ],
)
def test_quiet_hours_that_cannot_be_a_window_are_refused(hours: QuietHours, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        quiet_window(hours)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("due", "decided", "since"),
    [
        # Due within the quiet hours, decided as they end: since it was due.
        ("2026-11-29T21:30:00.000Z", "2026-11-30T06:00:00.000Z", "2026-11-29T21:30:00.000Z"),
        # Due before them, still waiting when they began (a busy agent, no owner): since 22:00.
        ("2026-11-29T20:00:00.000Z", "2026-11-30T06:00:00.000Z", "2026-11-29T21:00:00.000Z"),
        # Decided later than their end (nobody opened the session): the same.
        ("2026-11-29T20:00:00.000Z", "2026-11-30T09:00:00.000Z", "2026-11-29T21:00:00.000Z"),
        # Waiting over several nights: the latest quiet hours it waited through.
        ("2026-11-20T20:00:00.000Z", "2026-11-30T06:00:00.000Z", "2026-11-29T21:00:00.000Z"),
        # Due and decided before they began, or after they ended: not deferred.
        ("2026-11-29T20:00:00.000Z", "2026-11-29T20:59:59.999Z", None),
        ("2026-11-30T06:00:00.000Z", "2026-11-30T06:00:01.000Z", None),
        # Decided within them (a clock step): they have not ended.
        ("2026-11-29T21:30:00.000Z", "2026-11-29T22:00:00.000Z", None),
        ("2026-11-29T21:30:00.000Z", "2026-11-29T21:30:00.000Z", None),
    ],
)
def test_a_deferral_began_at_the_later_of_the_due_time_and_the_quiet_hours_it_waited_through(
    due: str, decided: str, since: str | None
) -> None:
    found = deferred_since(NIGHT, parse_instant(due), parse_instant(decided))
    assert found == (None if since is None else parse_instant(since))
