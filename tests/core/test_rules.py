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
from session_schedule.core.prompts import WHITE_SPACE
from session_schedule.core.records import (
    WEEKDAYS,
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
)
from session_schedule.core.rules import Limits, check_prompt, decide_create, decide_delete
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
        # U+001C to U+001F are control characters, not white space (though str.isspace says so):
        # refused at either end as inside, never trimmed away
        ({"prompt": "\x1fcall mum\x1e", "after_seconds": 60}, "invalid_prompt", "`prompt` contains the control character U+001F at index 0; only newline and tab are allowed."),
        ({"prompt": "call mum\x1c", "after_seconds": 60}, "invalid_prompt", "`prompt` contains the control character U+001C at index 8; only newline and tab are allowed."),
        ({"prompt": "\x1c", "after_seconds": 5}, "invalid_prompt", "`prompt` contains the control character U+001C at index 0; only newline and tab are allowed."),
        ({"prompt": " \x1d ", "after_seconds": 5}, "invalid_prompt", "`prompt` contains the control character U+001D at index 0; only newline and tab are allowed."),
        # white space that is also a control character: trimmed at the ends, refused inside
        ({"prompt": "a\x85b", "after_seconds": 5}, "invalid_prompt", "`prompt` contains the control character U+0085 at index 1; only newline and tab are allowed."),
        ({"prompt": "\x0ba\x0cb\r", "after_seconds": 5}, "invalid_prompt", "`prompt` contains the control character U+000C at index 1; only newline and tab are allowed."),
        # the prompt is checked first, even when the selector is also wrong
        ({"prompt": "", "bogus": 1}, "invalid_prompt", "`prompt` is empty; say what the reminder should prompt you to do."),
        # selector shape
        ({"prompt": "p"}, "invalid_selector", "give exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar` (found none)."),
        ({"prompt": "p", "at": None, "after_seconds": None}, "invalid_selector", "give exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar` (found none)."),
        ({"prompt": "p", "after_seconds": 5, "every_seconds": 300}, "invalid_selector", "give exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar` (found `after_seconds`, `every_seconds`)."),
        ({"prompt": "p", "after_seconds": 5, "cron": "* * * * *"}, "invalid_selector", "unknown argument `cron`; schedule_create takes `prompt`, exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar`, and optionally `ends` and `max_lateness_seconds`."),
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
        ({"prompt": "p", "every_seconds": 2**52}, "time_out_of_range", "4503599627370496 seconds from now is past 9999-12-31T23:59:59.999Z, the latest time a reminder can have; choose a shorter interval."),
        # future
        ({"prompt": "p", "at": "2026-11-29T20:00:00Z"}, "not_future", "`at` names 2026-11-29T20:00:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
        ({"prompt": "p", "at": "2026-11-29T20:00:00.0009Z"}, "not_future", "`at` names 2026-11-29T20:00:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
        # only the upper end of the range is time_out_of_range; an instant before 0001 is past
        ({"prompt": "p", "at": "0001-01-01T00:00:00+00:01"}, "not_future", "`at` names 0000-12-31T23:59:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
        ({"prompt": "p", "at": {"date": "0001-01-01", "time": "00:00", "time_zone": "Asia/Tokyo"}}, "not_future", "`at` names 0000-12-31T14:41:01.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
        ({"prompt": "p", "at": "0000-12-31T23:00:00-02:00"}, "not_future", "`at` names 0001-01-01T01:00:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
        ({"prompt": "p", "at": "0000-02-29T12:00:00Z"}, "not_future", "`at` names 0000-02-29T12:00:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
        ({"prompt": "p", "at": "0000-01-01T00:00:00+23:59"}, "not_future", "`at` names -0001-12-31T00:01:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
        ({"prompt": "p", "at": {"date": "0000-12-31", "time": "23:00", "time_zone": "America/New_York"}}, "not_future", "`at` names 0001-01-01T03:56:02.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future."),
        ({"prompt": "p", "every_seconds": 600, "ends": {"until": "0001-01-01T00:30:00+01:00", "max_runs": None}}, "invalid_rule", "`ends.until` 0000-12-31T23:30:00.000Z is not after the current time 2026-11-29T20:00:00.000Z, so not after the reminder's first target; choose a later end or leave it null."),
        ({"prompt": "p", "every_seconds": 600, "ends": {"until": "2020-01-01T00:00:00Z", "max_runs": None}}, "invalid_rule", "`ends.until` 2020-01-01T00:00:00.000Z is not after the current time 2026-11-29T20:00:00.000Z, so not after the reminder's first target; choose a later end or leave it null."),
        # a year-0000 date that does not exist is still an impossible date
        ({"prompt": "p", "at": "0000-02-30T00:00:00Z"}, "invalid_selector", "'0000-02-30T00:00:00Z' contains an impossible date; use a year from 0000 to 9999, a month from 01 to 12 and a day that exists in that month."),
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


# Unicode's White_Space property as PropList.txt lists it.
PROPLIST_WHITE_SPACE = [
    *range(0x0009, 0x000D + 1),
    *(0x0020, 0x0085, 0x00A0, 0x1680),
    *range(0x2000, 0x200A + 1),
    *(0x2028, 0x2029, 0x202F, 0x205F, 0x3000),
]


def test_the_prompt_rule_trims_exactly_unicodes_white_space() -> None:
    assert sorted(map(ord, WHITE_SPACE)) == PROPLIST_WHITE_SPACE
    for character in WHITE_SPACE:
        assert create({"prompt": f"{character}p{character}", "after_seconds": 5}) == create(
            {"prompt": "p", "after_seconds": 5}
        )


# Text rich in what the trim must tell apart: white space (some of it also control characters),
# U+001C to U+001F (which str.isspace calls space) and other control characters.
_EDGY_TEXT = st.text(
    st.sampled_from([*WHITE_SPACE, "\x1c", "\x1d", "\x1e", "\x1f", "\x00", "\x7f"])
    | st.characters(codec="utf-8"),
    max_size=8,
)


@given(_EDGY_TEXT)
def test_a_prompt_loses_only_white_space_at_its_ends(text: str) -> None:
    start, end = 0, len(text)
    while start < end and ord(text[start]) in PROPLIST_WHITE_SPACE:
        start += 1
    while end > start and ord(text[end - 1]) in PROPLIST_WHITE_SPACE:
        end -= 1
    trimmed = text[start:end]
    try:
        stored = check_prompt(text, 4000)
    except ScheduleError as error:
        assert error.code == "invalid_prompt"
        assert not trimmed or any(
            (ord(character) < 0x20 and character not in "\n\t") or 0x7F <= ord(character) <= 0x9F
            for character in trimmed
        )
    else:
        assert stored == trimmed


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


@pytest.mark.parametrize(("depth", "refused"), [(0, False), (3, False), (4, True)])
def test_a_create_past_the_chain_depth_is_refused(depth: int, refused: bool) -> None:
    arguments = {"prompt": "p", "after_seconds": 5}
    if not refused:
        change = decide_create(arguments, now=NOW, state=fold([]), chain_depth=depth)
        assert change.schedule.id == "sch_1"
        return
    with pytest.raises(ScheduleError) as caught:
        decide_create(arguments, now=NOW, state=fold([]), chain_depth=depth)
    assert (caught.value.code, caught.value.message) == (
        "invalid_rule",
        "a reminder set now would be 4 deep in a chain of reminders each set during the previous "
        "one's turn, deeper than this session allows (max_chain_depth = 3); do not create it, ask "
        "the user whether they want one.",
    )


def test_the_chain_depth_is_checked_after_the_arguments() -> None:
    with pytest.raises(ScheduleError) as caught:
        decide_create({"prompt": " "}, now=NOW, state=fold([]), chain_depth=9)
    assert caught.value.code == "invalid_prompt"


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


daily_values = st.fixed_dictionaries(
    {},
    optional={
        "time": st.sampled_from(["09:00", "23:59:59.999", "24:00", "9", 9]),
        "time_zone": st.sampled_from(["UTC", "Pacific/Apia", "JST", None]),
        "weekdays": st.none() | st.lists(st.sampled_from([*WEEKDAYS, "x", 1]), max_size=8),
        "x": st.none(),
    },
)


@given(
    st.dictionaries(
        st.sampled_from(["prompt", "after_seconds", "at", "every_seconds", "daily_at", "x"]),
        json_values | daily_values,
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


# -- daily_at ----------------------------------------------------------------------------------

WEEKDAYS_ONLY = ["mon", "tue", "wed", "thu", "fri"]


@pytest.mark.parametrize(
    ("daily_at", "local_time", "weekdays", "expected"),
    [
        # Sunday 2026-11-29 20:00Z is Monday 05:00 in Tokyo.
        ({"time": "09:00", "time_zone": "Asia/Tokyo", "weekdays": WEEKDAYS_ONLY}, "09:00:00.000", ("mon", "tue", "wed", "thu", "fri"), "2026-11-30T00:00:00.000Z"),
        ({"time": "05:00", "time_zone": "Asia/Tokyo", "weekdays": None}, "05:00:00.000", WEEKDAYS, "2026-11-30T20:00:00.000Z"),
        ({"time": "20:00:00.001", "time_zone": "UTC"}, "20:00:00.001", WEEKDAYS, "2026-11-29T20:00:00.001Z"),
        ({"time": "07:30:15.5", "time_zone": "Europe/Paris", "weekdays": ["sun", "mon"]}, "07:30:15.500", ("mon", "sun"), "2026-11-30T06:30:15.500Z"),
    ],
)  # fmt: skip
def test_daily_at_stores_the_canonical_rule_and_its_first_occurrence(
    daily_at: object, local_time: str, weekdays: tuple[str, ...], expected: str
) -> None:
    change = create({"prompt": "standup", "daily_at": daily_at, "at": None})
    assert change.version == 2
    assert change == create_change(
        DailyScheduleRecord(
            id=ScheduleId("sch_1"),
            prompt="standup",
            local_time=local_time,
            time_zone=dict(daily_at)["time_zone"] if isinstance(daily_at, dict) else "",
            weekdays=list(weekdays),  # type: ignore[arg-type]
            scheduled_at=expected,
        )
    )


@pytest.mark.parametrize(
    ("daily_at", "code", "message"),
    [
        # selector shape
        ("09:00 Asia/Tokyo", "invalid_selector", '`daily_at` must be an object with the keys `time` and `time_zone`, and optionally `weekdays`, such as {"time": "09:00", "time_zone": "Asia/Tokyo", "weekdays": ["mon", "fri"]}, not a value of type str.'),
        ({"time": "09:00"}, "invalid_selector", "the `daily_at` object must have the keys `time` and `time_zone`, and may have `weekdays`; add `time_zone`."),
        ({"time": "09:00", "time_zone": "UTC", "date": "2026-12-01", "every": 2}, "invalid_selector", "the `daily_at` object must have the keys `time` and `time_zone`, and may have `weekdays`; remove 'date' and 'every'."),
        ({"time": 9, "time_zone": "UTC"}, "invalid_selector", "`time` must be a string, such as '09:00', not a number."),
        ({"time": "09:00", "time_zone": None}, "invalid_selector", "`time_zone` must be a string, such as 'Asia/Tokyo', not null."),
        # rule value, checked before the zone and the time
        ({"time": "25:00", "time_zone": "JST", "weekdays": []}, "invalid_rule", "`weekdays` is empty; list at least one day, or pass null for every day."),
        ({"time": "09:00", "time_zone": "UTC", "weekdays": "mon"}, "invalid_rule", '`weekdays` must be an array of day names, such as ["mon", "wed", "fri"], or null for every day, not a value of type str.'),
        ({"time": "09:00", "time_zone": "UTC", "weekdays": ["mon", "Tue"]}, "invalid_rule", "`weekdays` contains 'Tue', which is not a day name; use 'mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'."),
        ({"time": "09:00", "time_zone": "UTC", "weekdays": [1]}, "invalid_rule", "`weekdays` contains a number, which is not a day name; use 'mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'."),
        ({"time": "09:00", "time_zone": "UTC", "weekdays": ["fri", "mon", "fri"]}, "invalid_rule", "`weekdays` lists 'fri' twice; list each day once."),
        # zone, then the time
        ({"time": "25:00", "time_zone": "JST"}, "invalid_time_zone", "'JST' is not a supported time zone; use 'UTC' or an IANA Area/Location name such as 'America/New_York' or 'Asia/Tokyo'."),
        ({"time": "09:00", "time_zone": "asia/tokyo"}, "invalid_time_zone", "'asia/tokyo' is not a supported time zone (names are case-sensitive); use 'Asia/Tokyo'."),
        ({"time": "9am", "time_zone": "Asia/Tokyo"}, "invalid_selector", "`time` must have the form HH:MM, HH:MM:SS or HH:MM:SS.sss (24-hour, 1-3 fraction digits), such as '09:00', not '9am'."),
        ({"time": "24:00", "time_zone": "Asia/Tokyo"}, "invalid_selector", "`time` '24:00' is an impossible time of day; use hours 00-23, minutes 00-59 and seconds 00-59 (there is no 24:00 and no leap second)."),
    ],
)  # fmt: skip
def test_daily_at_reports_the_first_failing_check(
    daily_at: object, code: str, message: str
) -> None:
    assert _error({"prompt": "p", "daily_at": daily_at}) == (code, message)


def test_daily_at_counts_as_a_selector() -> None:
    assert _error(
        {"prompt": "p", "every_seconds": 1200, "daily_at": {"time": "09:00", "time_zone": "UTC"}}
    ) == (
        "invalid_selector",
        "give exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar` "
        "(found `every_seconds`, `daily_at`).",
    )


def test_daily_at_in_a_gap_is_accepted_and_fires_when_the_clocks_jump() -> None:
    # `at` rejects 2027-03-14 02:30 in New York; a daily rule fires at 03:00 EDT that day.
    now = parse_instant("2027-03-13T08:00:00.000Z")
    change = decide_create(
        {"prompt": "p", "daily_at": {"time": "02:30", "time_zone": "America/New_York"}},
        now=now,
        state=ScheduleFold(),
    )
    assert change.schedule.scheduled_at == "2027-03-14T07:00:00.000Z"


def test_daily_at_with_no_occurrence_left_is_out_of_range() -> None:
    with pytest.raises(ScheduleError) as caught:
        decide_create(
            {"prompt": "p", "daily_at": {"time": "23:00", "time_zone": "America/New_York"}},
            now=parse_instant("9999-12-31T04:00:00.000Z"),
            state=ScheduleFold(),
        )
    assert (caught.value.code, caught.value.message) == (
        "time_out_of_range",
        "`daily_at` has no occurrence before 9999-12-31T23:59:59.999Z, the latest time a "
        "reminder can have.",
    )
