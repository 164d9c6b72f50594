from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from session_schedule.core.changes import (
    ScheduleCreateChange,
    create_change,
    delete_change,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import parse_instant
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    EveryScheduleRecord,
)
from session_schedule.core.rules import Limits, decide_create, decide_delete
from tests.core.strategies import json_values

NOW = parse_instant("2026-11-29T20:00:00.000Z")


def create(arguments: Mapping[str, object], **limits: int) -> ScheduleCreateChange:
    return decide_create(arguments, now=NOW, state=ScheduleFold(), limits=Limits(**limits))


def test_after_targets_now_plus_the_delay() -> None:
    assert create({"prompt": "  stretch \n", "after_seconds": 90}) == create_change(
        AfterScheduleRecord(
            id=ScheduleId("sch_1"),
            prompt="stretch",
            after_seconds=90,
            scheduled_at="2026-11-29T20:01:30.000Z",
        )
    )


def test_every_is_anchored_at_the_decision_time() -> None:
    assert create({"prompt": "check", "every_seconds": 300.0, "at": None}) == create_change(
        EveryScheduleRecord(
            id=ScheduleId("sch_1"),
            prompt="check",
            every_seconds=300,
            scheduled_at="2026-11-29T20:05:00.000Z",
        )
    )


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        ("2026-12-01T09:00:00+09:00", "2026-12-01T00:00:00.000Z"),
        (
            {"date": "2026-12-01", "time": "09:00", "time_zone": "Asia/Tokyo"},
            "2026-12-01T00:00:00.000Z",
        ),
        (
            {"date": "2027-11-07", "time": "01:30", "time_zone": "America/New_York"},
            "2027-11-07T05:30:00.000Z",
        ),
        ("2026-11-29T20:00:00.001Z", "2026-11-29T20:00:00.001Z"),
    ],
)
def test_at_stores_the_canonical_utc_target(at: object, expected: str) -> None:
    assert create({"prompt": "p", "at": at}) == create_change(
        AtScheduleRecord(id=ScheduleId("sch_1"), prompt="p", scheduled_at=expected)
    )


def test_new_ids_follow_the_largest_id_in_the_stream() -> None:
    state = fold(
        [
            (0, create({"prompt": "p", "after_seconds": 5})),
            (1, delete_change(ScheduleId("sch_1"))),
        ]
    )
    change = decide_create({"prompt": "q", "after_seconds": 5}, now=NOW, state=state)
    assert change.schedule.id == "sch_2"


def _error(arguments: Mapping[str, object], **limits: int) -> tuple[str, str]:
    with pytest.raises(ScheduleError) as caught:
        create(arguments, **limits)
    return caught.value.code, caught.value.message


TOKYO = {"date": "2026-12-01", "time": "09:00", "time_zone": "Asia/Tokyo"}


@pytest.mark.parametrize(
    ("arguments", "code", "message"),
    [
        # prompt
        ({"after_seconds": 5}, "invalid_prompt", "`prompt` must be a string with the reminder's content, got nothing."),
        ({"prompt": 7, "after_seconds": 5}, "invalid_prompt", "`prompt` must be a string with the reminder's content, got 7."),
        ({"prompt": " \n\t\u3000", "after_seconds": 5}, "invalid_prompt", "`prompt` is empty; say what the reminder should prompt you to do."),
        ({"prompt": "a\rb", "after_seconds": 5}, "invalid_prompt", "`prompt` contains the control character U+000D at index 1; only newline and tab are allowed."),
        ({"prompt": "a\x00", "after_seconds": 5}, "invalid_prompt", "`prompt` contains the control character U+0000 at index 1; only newline and tab are allowed."),
        # the prompt is checked first, even when the selector is also wrong
        ({"prompt": "", "bogus": 1}, "invalid_prompt", "`prompt` is empty; say what the reminder should prompt you to do."),
        # selector shape
        ({"prompt": "p"}, "invalid_selector", "give exactly one of `after_seconds`, `at`, `every_seconds` (found none)."),
        ({"prompt": "p", "at": None, "after_seconds": None}, "invalid_selector", "give exactly one of `after_seconds`, `at`, `every_seconds` (found none)."),
        ({"prompt": "p", "after_seconds": 5, "every_seconds": 300}, "invalid_selector", "give exactly one of `after_seconds`, `at`, `every_seconds` (found `after_seconds`, `every_seconds`)."),
        ({"prompt": "p", "after_seconds": 5, "cron": "* * * * *"}, "invalid_selector", "unknown argument `cron`; schedule_create takes `prompt` and exactly one of `after_seconds`, `at`, `every_seconds`."),
        # rule values
        ({"prompt": "p", "after_seconds": 0}, "invalid_rule", "after_seconds must be a positive whole number of seconds, got 0."),
        ({"prompt": "p", "after_seconds": -5}, "invalid_rule", "after_seconds must be a positive whole number of seconds, got -5."),
        ({"prompt": "p", "after_seconds": 1.5}, "invalid_rule", "after_seconds must be a positive whole number of seconds, got 1.5."),
        ({"prompt": "p", "after_seconds": True}, "invalid_rule", "after_seconds must be a positive whole number of seconds, got true."),
        ({"prompt": "p", "after_seconds": "90"}, "invalid_rule", 'after_seconds must be a positive whole number of seconds, got "90".'),
        ({"prompt": "p", "after_seconds": 2**53}, "invalid_rule", "after_seconds must be a positive whole number of seconds, got 9007199254740992."),
        ({"prompt": "p", "every_seconds": 2**53}, "invalid_rule", "every_seconds must be a whole number of seconds, got 9007199254740992."),
        ({"prompt": "p", "every_seconds": "600"}, "invalid_rule", 'every_seconds must be a whole number of seconds, got "600".'),
        ({"prompt": "p", "every_seconds": 299}, "frequency_too_high", "every_seconds must be at least 300 (5 minutes), got 299; choose a longer interval."),
        ({"prompt": "p", "every_seconds": -300}, "frequency_too_high", "every_seconds must be at least 300 (5 minutes), got -300; choose a longer interval."),
        # zone / offset, parse
        ({"prompt": "p", "at": 1764446400}, "invalid_selector", "`at` must be an RFC 3339 string with a UTC offset, such as '2026-12-01T09:00:00+09:00', or an object with the keys `date`, `time` and `time_zone`, not a number."),
        ({"prompt": "p", "at": "2026-12-01T09:00:00"}, "invalid_selector", "'2026-12-01T09:00:00' has no UTC offset; add one such as 'Z' or '+09:00', or pass {date, time, time_zone}."),
        ({"prompt": "p", "at": "2026-12-01T09:00:00+24:00"}, "invalid_time_zone", "'2026-12-01T09:00:00+24:00' has the UTC offset '+24:00', which does not exist; use an offset from '-23:59' to '+23:59'."),
        ({"prompt": "p", "at": {**TOKYO, "time_zone": "JST"}}, "invalid_time_zone", "'JST' is not a supported time zone; use 'UTC' or an IANA Area/Location name such as 'America/New_York' or 'Asia/Tokyo'."),
        ({"prompt": "p", "at": {"date": "2026-03-08", "time": "02:30", "time_zone": "America/New_York"}}, "invalid_selector", "2026-03-08 02:30 does not exist in America/New_York: the clocks skip from 02:00 to 03:00 (a gap in local time); choose a time outside the gap."),
        # range
        ({"prompt": "p", "at": "9999-12-31T23:30:00-05:00"}, "time_out_of_range", "'9999-12-31T23:30:00-05:00' is after 9999-12-31T23:59:59.999Z, the latest instant Schedule can represent; choose an earlier time."),
        ({"prompt": "p", "after_seconds": 2**53 - 1}, "time_out_of_range", "9007199254740991 seconds from now is past 9999-12-31T23:59:59.999Z, the latest time a reminder can have; choose a shorter delay."),
        ({"prompt": "p", "every_seconds": 2**52}, "time_out_of_range", "4503599627370496 seconds from now is past 9999-12-31T23:59:59.999Z, the latest time a reminder can have; choose a shorter delay."),
        # future
        ({"prompt": "p", "at": "2026-11-29T20:00:00Z"}, "not_future", "`at` names 2026-11-29T20:00:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
        ({"prompt": "p", "at": "2026-11-29T20:00:00.0009Z"}, "not_future", "`at` names 2026-11-29T20:00:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
    ],
)  # fmt: skip
def test_create_reports_the_first_failing_check(
    arguments: Mapping[str, object], code: str, message: str
) -> None:
    assert _error(arguments) == (code, message)


def test_prompt_length_limit_counts_characters_after_trimming() -> None:
    assert create({"prompt": "  " + "x" * 10 + "  ", "after_seconds": 5}, max_prompt_chars=10)
    assert _error({"prompt": "x" * 11, "after_seconds": 5}, max_prompt_chars=10) == (
        "invalid_prompt",
        "`prompt` has 11 characters, more than the 10 allowed; shorten it.",
    )


def test_active_reminder_cap_names_the_cap() -> None:
    state = fold(
        (n, create({"prompt": "p", "after_seconds": 5}).__class__(version=1, schedule=record))
        for n, record in enumerate(
            AfterScheduleRecord(
                id=ScheduleId(f"sch_{n + 1}"),
                prompt="p",
                after_seconds=5,
                scheduled_at="2026-11-29T20:00:05.000Z",
            )
            for n in range(2)
        )
    )
    with pytest.raises(ScheduleError) as caught:
        decide_create(
            {"prompt": "p", "after_seconds": 5}, now=NOW, state=state, limits=Limits(max_active=2)
        )
    assert (caught.value.code, caught.value.message) == (
        "invalid_rule",
        "this session already has 2 active reminders, the most it may have (max_active = 2); "
        "delete one before creating another.",
    )


def test_delete_of_an_active_id_gives_a_delete_change() -> None:
    state = fold([(0, create({"prompt": "p", "after_seconds": 5}))])
    assert decide_delete({"id": "sch_1"}, state=state) == delete_change(ScheduleId("sch_1"))


@pytest.mark.parametrize("schedule_id", ["sch_2", "sch_01", "nonsense", ""])
def test_delete_of_anything_else_is_not_an_error(schedule_id: str) -> None:
    state = fold([(0, create({"prompt": "p", "after_seconds": 5}))])
    assert decide_delete({"id": schedule_id}, state=state) is None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "`id` must be the id string of a reminder (such as 'sch_1'), got nothing."),
        ({"id": 1}, "`id` must be the id string of a reminder (such as 'sch_1'), got 1."),
        (
            {"id": "sch_1", "force": True},
            "unknown argument `force`; schedule_delete takes only `id`.",
        ),
    ],
)
def test_delete_rejects_malformed_arguments(arguments: Mapping[str, object], message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        decide_delete(arguments, state=ScheduleFold())
    assert (caught.value.code, caught.value.message) == ("invalid_selector", message)


def test_long_values_are_shortened_in_messages() -> None:
    code, message = _error({"prompt": "p", "after_seconds": [1] * 100})
    assert (code, message) == (
        "invalid_rule",
        "after_seconds must be a positive whole number of seconds, "
        "got [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,….",
    )


@given(
    st.dictionaries(
        st.sampled_from(["prompt", "after_seconds", "at", "every_seconds", "x"]), json_values
    )
)
def test_create_raises_nothing_but_schedule_errors(arguments: dict[str, object]) -> None:
    try:
        change = decide_create(arguments, now=NOW, state=ScheduleFold())
    except ScheduleError as error:
        assert error.code != "corrupt_schedule_log"
    else:
        assert parse_instant(change.schedule.scheduled_at) > NOW


@given(st.dictionaries(st.text(max_size=5), json_values))
def test_delete_raises_nothing_but_invalid_selector(arguments: dict[str, object]) -> None:
    try:
        decide_delete(arguments, state=ScheduleFold())
    except ScheduleError as error:
        assert error.code == "invalid_selector"


def test_values_json_cannot_encode_are_named_by_type() -> None:
    assert _error({"prompt": "p", "after_seconds": object()}) == (
        "invalid_rule",
        "after_seconds must be a positive whole number of seconds, got object.",
    )
