"""Slash commands: each line read into the tool's real arguments, or a usage error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from session_schedule.cli.slash import (
    COMMANDS_USAGE,
    CREATE_USAGE,
    DELETE_USAGE,
    LIST_USAGE,
    PAUSE_USAGE,
    RESUME_USAGE,
    SNOOZE_USAGE,
    UPDATE_USAGE,
    CallTool,
    Command,
    Local,
    Say,
    Usage,
    parse_duration,
    parse_line,
)


def create(**arguments: object) -> CallTool:
    return CallTool(name="schedule_create", arguments=arguments)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/create after 90s stretch", create(prompt="stretch", after_seconds=90)),
        ("/create after 1s stretch", create(prompt="stretch", after_seconds=1)),
        ("/create after 90 stretch", create(prompt="stretch", after_seconds=90)),
        ("/create after 10m stretch", create(prompt="stretch", after_seconds=600)),
        ("/create after 2h stretch", create(prompt="stretch", after_seconds=7_200)),
        ("/create after 1d stretch", create(prompt="stretch", after_seconds=86_400)),
        ("/create after 1h30m stretch", create(prompt="stretch", after_seconds=5_400)),
        ("/create after 1D2H3M4S x", create(prompt="x", after_seconds=93_784)),
        ("/create in 5m tea", create(prompt="tea", after_seconds=300)),
        # Values are the tool's to judge: the person sees its real error.
        ("/create after 0s x", create(prompt="x", after_seconds=0)),
        ("/create every 10m stand up", create(prompt="stand up", every_seconds=600)),
        ("/create every 600s x", create(prompt="x", every_seconds=600)),
        ("/create every 1h x", create(prompt="x", every_seconds=3_600)),
        ("/create every 1m x", create(prompt="x", every_seconds=60)),
        (
            "/create at 2026-12-01T09:00:00+09:00 call Bob",
            create(prompt="call Bob", at="2026-12-01T09:00:00+09:00"),
        ),
        ("/create at 2026-12-01T09:00:00 x", create(prompt="x", at="2026-12-01T09:00:00")),
        ("/create at tomorrow x", create(prompt="x", at="tomorrow")),
        (
            "/create at 2026-12-01 09:00 Asia/Tokyo call Bob",
            create(
                prompt="call Bob",
                at={"date": "2026-12-01", "time": "09:00", "time_zone": "Asia/Tokyo"},
            ),
        ),
        (
            "/create at 2026-12-01 09:00:30.5 UTC x",
            create(prompt="x", at={"date": "2026-12-01", "time": "09:00:30.5", "time_zone": "UTC"}),
        ),
        (
            "/create at 2026-12-01 9:00 EST x",
            create(prompt="x", at={"date": "2026-12-01", "time": "9:00", "time_zone": "EST"}),
        ),
        (
            "/create daily 09:00 Asia/Tokyo mon,wed,fri standup notes",
            create(
                prompt="standup notes",
                daily_at={
                    "time": "09:00",
                    "time_zone": "Asia/Tokyo",
                    "weekdays": ["mon", "wed", "fri"],
                },
            ),
        ),
        (
            "/create daily 7:30 UTC water the plants",
            create(prompt="water the plants", daily_at={"time": "7:30", "time_zone": "UTC"}),
        ),
        # Day names are sent as typed, for the tool to judge ('Sun' is not one of its names).
        (
            "/create daily 07:00 Europe/Paris Sun salutation",
            create(
                prompt="salutation",
                daily_at={"time": "07:00", "time_zone": "Europe/Paris", "weekdays": ["Sun"]},
            ),
        ),
        (
            "/create daily 07:00 Europe/Paris sunday walk",
            create(prompt="sunday walk", daily_at={"time": "07:00", "time_zone": "Europe/Paris"}),
        ),
        (
            "/create calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris team lunch",
            create(
                prompt="team lunch",
                calendar={
                    "rule": "FREQ=MONTHLY;BYDAY=1MO",
                    "time": "09:00",
                    "time_zone": "Europe/Paris",
                },
            ),
        ),
        (
            "/create calendar FREQ=WEEKLY;INTERVAL=2 9:00 UTC 2026-12-04 2026 review",
            create(
                prompt="2026 review",
                calendar={
                    "rule": "FREQ=WEEKLY;INTERVAL=2",
                    "time": "9:00",
                    "time_zone": "UTC",
                    "start_date": "2026-12-04",
                },
            ),
        ),
        # A rule is sent as typed, for the tool to judge.
        (
            "/create calendar freq=monthly 09:00 UTC x",
            create(
                prompt="x", calendar={"rule": "freq=monthly", "time": "09:00", "time_zone": "UTC"}
            ),
        ),
        # The prompt is kept as typed: inner spacing, quotes and markup-like text included.
        (
            '  /create after 90s   say  "hi"  [bold]now[/bold]  ',
            create(prompt='say  "hi"  [bold]now[/bold]', after_seconds=90),
        ),
        ("/list", CallTool(name="schedule_list", arguments={})),
        ("/list   ", CallTool(name="schedule_list", arguments={})),
        ("/delete sch_1", CallTool(name="schedule_delete", arguments={"id": "sch_1"})),
        ("/delete whatever", CallTool(name="schedule_delete", arguments={"id": "whatever"})),
        ("/help", Local(command="help")),
        ("/?", Local(command="help")),
        ("/quit", Local(command="quit")),
        ("/exit", Local(command="quit")),
        ("hello there", Say(text="hello there")),
        ("  hello  ", Say(text="hello")),
        ("", Say(text="")),
        ("//create is a word", Say(text="/create is a word")),
        ("after 90s", Say(text="after 90s")),
    ],
)
def test_lines_are_read_into_commands(line: str, expected: Command) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/create", Usage(message="/create needs a time and a prompt", usage=CREATE_USAGE)),
        (
            "/create soon stretch",
            Usage(
                message="/create soon: start with after, every, at, daily or calendar",
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create after",
            Usage(message="/create after: give a duration, such as 90s", usage=CREATE_USAGE),
        ),
        (
            "/create after 90s",
            Usage(message="/create: the prompt is missing after the time", usage=CREATE_USAGE),
        ),
        (
            "/create after soon stretch",
            Usage(
                message="'soon' is not a duration; write a number of seconds, or numbers with d, "
                "h, m and s, such as 90, 90s, 10m, 2h or 1h30m",
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create every 1.5h x",
            Usage(
                message="'1.5h' is not a duration; write a number of seconds, or numbers with d, "
                "h, m and s, such as 90, 90s, 10m, 2h or 1h30m",
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create after 30m1h x",
            Usage(
                message="'30m1h' is not a duration; write a number of seconds, or numbers with "
                "d, h, m and s, such as 90, 90s, 10m, 2h or 1h30m",
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create after 99999999999999999999s x",
            Usage(message="that duration is too long", usage=CREATE_USAGE),
        ),
        (
            "/create after " + "9" * 41 + " x",
            Usage(message="that duration is too long", usage=CREATE_USAGE),
        ),
        ("/create at", Usage(message="/create at: give a time", usage=CREATE_USAGE)),
        (
            "/create daily 09:00",
            Usage(
                message="/create daily: give the time and the time zone, such as daily 09:00 "
                "Asia/Tokyo (or UTC), then optionally days such as mon,wed,fri",
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create daily 09:00 UTC mon,fri",
            Usage(message="/create: the prompt is missing after the time", usage=CREATE_USAGE),
        ),
        (
            "/create calendar FREQ=MONTHLY 09:00",
            Usage(
                message="/create calendar: give the rule, the time and the time zone, such as "
                "calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris (or UTC), then optionally the "
                "start date, such as 2026-12-01",
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create calendar FREQ=MONTHLY 09:00 UTC 2026-12-01",
            Usage(message="/create: the prompt is missing after the time", usage=CREATE_USAGE),
        ),
        (
            "/create at 2026-12-01 09:00",
            Usage(
                message="/create at 2026-12-01: give the time and the time zone too, such as "
                "2026-12-01 09:00 Asia/Tokyo (or UTC)",
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create at 2026-12-01 09:00 Asia/Tokyo",
            Usage(message="/create: the prompt is missing after the time", usage=CREATE_USAGE),
        ),
        (
            "/create at 09:00 Asia/Tokyo x",
            Usage(
                message="/create at 09:00: give the date and the time zone too, such as "
                "2026-12-01 09:00 Asia/Tokyo",
                usage=CREATE_USAGE,
            ),
        ),
        ("/list all", Usage(message="/list takes no arguments", usage=LIST_USAGE)),
        ("/delete", Usage(message="/delete takes one reminder id", usage=DELETE_USAGE)),
        ("/delete sch_1 sch_2", Usage(message="/delete takes one reminder id", usage=DELETE_USAGE)),
        ("/remind me", Usage(message="there is no command /remind", usage=COMMANDS_USAGE)),
        ("/", Usage(message="there is no command /", usage=COMMANDS_USAGE)),
    ],
)
def test_unreadable_lines_give_a_message_and_the_usage(line: str, expected: Usage) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0),
        ("90", 90),
        ("90s", 90),
        ("10m", 600),
        ("2h", 7_200),
        ("1d", 86_400),
        ("1d1s", 86_401),
        ("01m", 60),
        ("", None),
        ("s", None),
        ("-5", None),
        ("+5", None),
        ("5 m", None),
        ("5w", None),
        ("٣", None),
        ("²", None),
        ("1" * 41, None),
    ],
)
def test_durations(text: str, seconds: int | None) -> None:
    assert parse_duration(text) == seconds


@given(
    st.sampled_from(
        ["", "/", "/create ", "/create after ", "/create every ", "/create at ", "/delete "]
    ),
    st.text(),
)
def test_any_line_is_read_without_raising(start: str, rest: str) -> None:
    command = parse_line(start + rest)
    assert isinstance(command, Say | CallTool | Local | Usage)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/update sch_1 every 20m", CallTool(name="schedule_update", arguments={"id": "sch_1", "every_seconds": 1200})),
        ("/update sch_1 calendar FREQ=MONTHLY;BYDAY=1MO 09:00 UTC", CallTool(name="schedule_update", arguments={"id": "sch_1", "calendar": {"rule": "FREQ=MONTHLY;BYDAY=1MO", "time": "09:00", "time_zone": "UTC"}})),
        ("/update sch_1 in 1h30m tea", CallTool(name="schedule_update", arguments={"id": "sch_1", "prompt": "tea", "after_seconds": 5400})),
        ("/update sch_1 at 2026-12-01 09:00 Asia/Tokyo", CallTool(name="schedule_update", arguments={"id": "sch_1", "at": {"date": "2026-12-01", "time": "09:00", "time_zone": "Asia/Tokyo"}})),
        ("/update sch_1 daily 09:00 UTC mon,fri", CallTool(name="schedule_update", arguments={"id": "sch_1", "daily_at": {"time": "09:00", "time_zone": "UTC", "weekdays": ["mon", "fri"]}})),
        ("/update sch_1 prompt  water the plants ", CallTool(name="schedule_update", arguments={"id": "sch_1", "prompt": "water the plants"})),
        ("/update sch_1", Usage(message="/update needs a reminder id and what to change", usage=UPDATE_USAGE)),
        ("/update sch_1 prompt", Usage(message="/update prompt: the new prompt is missing", usage=UPDATE_USAGE)),
        ("/update sch_1 weekly x", Usage(message="/update weekly: start with after, every, at, daily, calendar or prompt", usage=UPDATE_USAGE)),
        ("/update sch_1 every", Usage(message="/update every: give a duration, such as 90s", usage=UPDATE_USAGE)),
        ("/pause sch_1", CallTool(name="schedule_update", arguments={"id": "sch_1", "paused": True})),
        ("/resume sch_1", CallTool(name="schedule_update", arguments={"id": "sch_1", "paused": False})),
        ("/pause", Usage(message="/pause takes one reminder id", usage=PAUSE_USAGE)),
        ("/resume sch_1 now", Usage(message="/resume takes one reminder id", usage=RESUME_USAGE)),
        ("/snooze sch_1 10m", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"after_seconds": 600}})),
        ("/snooze sch_1 90", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"after_seconds": 90}})),
        ("/snooze sch_1 2026-12-01T09:00:00+09:00", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"until": "2026-12-01T09:00:00+09:00"}})),
        ("/snooze sch_1 2026-12-01T09:00:00", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"until": "2026-12-01T09:00:00"}})),
        ("/snooze sch_1", Usage(message="/snooze takes a reminder id and a duration or a time", usage=SNOOZE_USAGE)),
        ("/snooze sch_1 10m please", Usage(message="/snooze takes a reminder id and a duration or a time", usage=SNOOZE_USAGE)),
        ("/snooze sch_1 soon", Usage(message="'soon' is neither a duration (such as 10m or 1h30m) nor an RFC 3339 time (such as 2026-12-01T09:00:00+09:00)", usage=SNOOZE_USAGE)),
    ],
)  # fmt: skip
def test_update_pause_resume_and_snooze_lines(line: str, expected: object) -> None:
    assert parse_line(line) == expected
