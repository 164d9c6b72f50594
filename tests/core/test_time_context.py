from __future__ import annotations

import pytest

from session_schedule.core.time_context import time_context

ASK = (
    ". If the user gives a date or time without a zone or UTC offset, ask which time zone they "
    "mean before calling schedule_create; do not assume one."
)


def test_one_valid_zone_on_every_prompt_says_to_read_times_there() -> None:
    assert time_context(["Asia/Tokyo", "Asia/Tokyo"]) == (
        "Time context for this turn: the user's time zone is Asia/Tokyo, as reported with their "
        "messages. Read dates and times the user gives without a zone or UTC offset as "
        "Asia/Tokyo local time, "
        "and still state the zone explicitly when you call schedule_create (for example "
        '"time_zone": "Asia/Tokyo" in `at`). This applies to this turn only.'
    )


@pytest.mark.parametrize(
    ("zones", "reason"),
    [
        ([], "no time zone was reported with the user's messages"),
        ([None], "no time zone was reported with the user's messages"),
        (["", None], "no time zone was reported with the user's messages"),
        (
            ["Asia/Tokyo", "Europe/Paris"],
            "the user's messages in this turn came with different time zones "
            "(Asia/Tokyo, Europe/Paris)",
        ),
        (
            ["Asia/Tokyo", None],
            "only some of the user's messages in this turn reported a time zone (Asia/Tokyo)",
        ),
        (
            ["Mars/Olympus"],
            "the time zone reported with the user's messages is not recognised ('Mars/Olympus')",
        ),
        (
            ["Etc/GMT+5"],
            "the time zone reported with the user's messages is not recognised ('Etc/GMT+5')",
        ),
    ],
)
def test_mixed_missing_or_invalid_zones_say_to_ask(zones: list[str | None], reason: str) -> None:
    assert time_context(zones) == f"Time context for this turn: {reason}{ASK}"
