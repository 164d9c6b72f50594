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
    Duration,
    DurationProblem,
    Local,
    Say,
    SetQuota,
    Usage,
    parse_line,
    read_duration,
    spoken_duration,
)
from session_schedule.core.quiet import QuietHours

MISSING_PROMPT = "/create: the prompt is missing after the time"
UNREADABLE = (
    "{!r} is not a duration; write numbers with units, largest first, such as 90s, 10m, "
    "5 minutes, 2h30m or 1 day"
)
NO_FIXED_LENGTH = (
    "{!r} is not a duration: months and years have no fixed length; write weeks or days, such "
    "as 4w or 30d"
)
OUT_OF_ORDER = (
    "{!r} has its units out of order; write them largest first, such as 2h30m or 1 hour 30 minutes"
)
REPEATED_UNIT = (
    "{!r} gives a unit twice; write each unit once, largest first, such as 2h30m or 1 hour 30 "
    "minutes"
)


def create(**arguments: object) -> CallTool:
    return CallTool(name="schedule_create", arguments=arguments)


def daily(time: str, zone: str, *days: str) -> dict[str, object]:
    selector: dict[str, object] = {"time": time, "time_zone": zone}
    if days:
        selector["weekdays"] = list(days)
    return selector


def ambiguous(line: str, number: str, would: str) -> Usage:
    return Usage(
        message=f"{line} is ambiguous: {number!r} has no unit, so it would create {would}; "
        f"write {number}s, {number}m or {number}h (and quote a prompt that starts with a number)",
        usage=CREATE_USAGE,
    )


def day_or_prompt(word: str, would: str) -> Usage:
    return Usage(
        message=f"/create daily: {word!r} could be a day or the start of the prompt (as typed, "
        f"it would create {would}); write days as mon tue wed thu fri sat sun, or quote the "
        "prompt",
        usage=CREATE_USAGE,
    )


PHRASINGS = [
    # Durations, in every form people type them.
    ("/create in 5m call mom", create(prompt="call mom", after_seconds=300)),
    ("/create in 5 minutes call mom", create(prompt="call mom", after_seconds=300)),
    ("/create after 5 minutes call mom", create(prompt="call mom", after_seconds=300)),
    ("/create in 5 min call mom", create(prompt="call mom", after_seconds=300)),
    ("/create in 5 mins call mom", create(prompt="call mom", after_seconds=300)),
    ("/create in 1 minute call mom", create(prompt="call mom", after_seconds=60)),
    ("/create in 5 m call mom", create(prompt="call mom", after_seconds=300)),
    ("/create in 90 seconds tea", create(prompt="tea", after_seconds=90)),
    ("/create in 90 secs tea", create(prompt="tea", after_seconds=90)),
    ("/create in 2h30m stretch", create(prompt="stretch", after_seconds=9_000)),
    ("/create in 2h 30m stretch", create(prompt="stretch", after_seconds=9_000)),
    ("/create in 2 hours 30 minutes stretch", create(prompt="stretch", after_seconds=9_000)),
    ("/create in 2 hours and 30 minutes stretch", create(prompt="stretch", after_seconds=9_000)),
    ("/create in 1 hr water", create(prompt="water", after_seconds=3_600)),
    ("/create in 3 hrs water", create(prompt="water", after_seconds=10_800)),
    ("/create in an hour water", create(prompt="water", after_seconds=3_600)),
    ("/create in a minute water", create(prompt="water", after_seconds=60)),
    ("/create in 1 day renew", create(prompt="renew", after_seconds=86_400)),
    ("/create in 2 days renew", create(prompt="renew", after_seconds=172_800)),
    ("/create in 1 week renew", create(prompt="renew", after_seconds=604_800)),
    ("/create in 1w2d renew", create(prompt="renew", after_seconds=777_600)),
    ("/create IN 5 Minutes call mom", create(prompt="call mom", after_seconds=300)),
    ("/create every 5 minutes stand up", create(prompt="stand up", every_seconds=300)),
    ("/create every 1 hour drink", create(prompt="drink", every_seconds=3_600)),
    ("/create every 2h30m drink", create(prompt="drink", every_seconds=9_000)),
    ("/create every 1 day log", create(prompt="log", every_seconds=86_400)),
    # The prompt is what follows the duration, "and" included when no duration follows it.
    ("/create in 10m and then lunch", create(prompt="and then lunch", after_seconds=600)),
    ("/create in 10m minutes matter", create(prompt="minutes matter", after_seconds=600)),
    ('/create in 10m "3 calls to make"', create(prompt="3 calls to make", after_seconds=600)),
    ('/create in 10m say "hi"', create(prompt='say "hi"', after_seconds=600)),
    # Weekdays with commas, spaces, or both.
    (
        "/create daily 09:00 Asia/Tokyo mon wed fri standup",
        create(prompt="standup", daily_at=daily("09:00", "Asia/Tokyo", "mon", "wed", "fri")),
    ),
    (
        "/create daily 09:00 Asia/Tokyo mon,wed,fri standup",
        create(prompt="standup", daily_at=daily("09:00", "Asia/Tokyo", "mon", "wed", "fri")),
    ),
    (
        "/create daily 09:00 Asia/Tokyo mon, wed, fri standup",
        create(prompt="standup", daily_at=daily("09:00", "Asia/Tokyo", "mon", "wed", "fri")),
    ),
    (
        "/create daily 09:00 UTC sat , sun long run",
        create(prompt="long run", daily_at=daily("09:00", "UTC", "sat", "sun")),
    ),
    (
        "/create daily 09:00 UTC mon,tue wed plan",
        create(prompt="plan", daily_at=daily("09:00", "UTC", "mon", "tue", "wed")),
    ),
    ("/create daily 18:30 UTC wrap up", create(prompt="wrap up", daily_at=daily("18:30", "UTC"))),
    (
        '/create daily 18:30 UTC "mon is laundry day"',
        create(prompt="mon is laundry day", daily_at=daily("18:30", "UTC")),
    ),
    # Ambiguous lines are refused, showing what they would have created.
    (
        "/create after 5 call mom",
        ambiguous(
            "/create after 5 call mom",
            "5",
            "a reminder once after 5 seconds with the prompt 'call mom'",
        ),
    ),
    (
        "/create in 5 call mom",
        ambiguous(
            "/create in 5 call mom",
            "5",
            "a reminder once after 5 seconds with the prompt 'call mom'",
        ),
    ),
    (
        "/create every 600 stand up",
        ambiguous(
            "/create every 600 stand up",
            "600",
            "a reminder every 10 minutes with the prompt 'stand up'",
        ),
    ),
    (
        "/create in 2h 30 call",
        ambiguous(
            "/create in 2h 30 call",
            "30",
            "a reminder once after 2 hours 30 seconds with the prompt 'call'",
        ),
    ),
    (
        "/create in 10m 3 calls",
        ambiguous(
            "/create in 10m 3 calls",
            "3",
            "a reminder once after 10 minutes 3 seconds with the prompt 'calls'",
        ),
    ),
    ("/create in 5", ambiguous("/create in 5", "5", "a reminder once after 5 seconds")),
    (
        "/create daily 07:00 Europe/Paris sunday walk",
        day_or_prompt(
            "sunday",
            "a reminder every day at 07:00 Europe/Paris with the prompt 'sunday walk'",
        ),
    ),
    (
        "/create daily 07:00 UTC mon tuesday plan",
        day_or_prompt("tuesday", "a reminder on mon at 07:00 UTC with the prompt 'tuesday plan'"),
    ),
    (
        "/create daily 07:00 UTC weekdays standup",
        day_or_prompt(
            "weekdays", "a reminder every day at 07:00 UTC with the prompt 'weekdays standup'"
        ),
    ),
    (
        "/create daily 09:00 UTC mon-fri standup",
        day_or_prompt(
            "mon-fri", "a reminder every day at 09:00 UTC with the prompt 'mon-fri standup'"
        ),
    ),
    # Months are refused because they have no fixed length, and the message says so.
    ("/create in 1 month x", Usage(message=NO_FIXED_LENGTH.format("1 month"), usage=CREATE_USAGE)),
    ("/create in 2y x", Usage(message=NO_FIXED_LENGTH.format("2y"), usage=CREATE_USAGE)),
    ("/create in 5 minutes", Usage(message=MISSING_PROMPT, usage=CREATE_USAGE)),
    ("/create in soon x", Usage(message=UNREADABLE.format("soon"), usage=CREATE_USAGE)),
    ("/create in 1.5h x", Usage(message=UNREADABLE.format("1.5h"), usage=CREATE_USAGE)),
    # What is wrong is the order of the units, not the second one.
    ("/create in 30m 2h x", Usage(message=OUT_OF_ORDER.format("30m 2h"), usage=CREATE_USAGE)),
    ("/create in 5m 5m x", Usage(message=REPEATED_UNIT.format("5m 5m"), usage=CREATE_USAGE)),
]


def test_the_phrasing_table_is_large() -> None:
    assert len(PHRASINGS) >= 40


@pytest.mark.parametrize(("line", "expected"), PHRASINGS)
def test_create_reads_what_people_type(line: str, expected: Command) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/create after 90s stretch", create(prompt="stretch", after_seconds=90)),
        ("/create after 1s stretch", create(prompt="stretch", after_seconds=1)),
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
            '/create daily 07:00 Europe/Paris "sunday walk"',
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
        # A quoted prompt that starts with a date is the prompt, not the start date.
        (
            '/create calendar FREQ=DAILY 09:00 UTC "2026-12-04 review"',
            create(
                prompt="2026-12-04 review",
                calendar={"rule": "FREQ=DAILY", "time": "09:00", "time_zone": "UTC"},
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
                message="/create soon: start with in, after, every, at, daily or calendar",
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create after",
            Usage(
                message="/create after: give a duration, such as 90s, 10m or 5 minutes",
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create after 90s",
            Usage(message="/create: the prompt is missing after the time", usage=CREATE_USAGE),
        ),
        (
            "/create after soon stretch",
            Usage(
                message=UNREADABLE.format("soon"),
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create every 1.5h x",
            Usage(
                message=UNREADABLE.format("1.5h"),
                usage=CREATE_USAGE,
            ),
        ),
        (
            "/create after 30m1h x",
            Usage(
                message=OUT_OF_ORDER.format("30m1h"),
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
                "Asia/Tokyo (or UTC), then optionally days such as mon wed fri",
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
    ("text", "expected"),
    [
        ("90s", Duration(seconds=90, rest="")),
        ("10m snooze", Duration(seconds=600, rest="snooze")),
        ("2 hours  30 minutes  x  y", Duration(seconds=9_000, rest="x  y")),
        ("1w", Duration(seconds=604_800, rest="")),
        ("01m", Duration(seconds=60, rest="")),
        ("0s", Duration(seconds=0, rest="")),
        ("1d1s", Duration(seconds=86_401, rest="")),
        ("an hour", Duration(seconds=3_600, rest="")),
        ("a bit", DurationProblem(kind="unreadable", word="a", seconds=0, rest="")),
        ("", DurationProblem(kind="missing", word="", seconds=0, rest="")),
        ("   ", DurationProblem(kind="missing", word="", seconds=0, rest="")),
        ("90", DurationProblem(kind="bare_number", word="90", seconds=90, rest="")),
        ("1h 5 x", DurationProblem(kind="bare_number", word="5", seconds=3_605, rest="x")),
        ("s", DurationProblem(kind="unreadable", word="s", seconds=0, rest="")),
        ("-5m", DurationProblem(kind="unreadable", word="-5m", seconds=0, rest="")),
        ("+5m", DurationProblem(kind="unreadable", word="+5m", seconds=0, rest="")),
        ("5m 5m", DurationProblem(kind="repeated_unit", word="5m 5m", seconds=0, rest="")),
        ("5 s 1 h", DurationProblem(kind="out_of_order", word="5 s 1 h", seconds=0, rest="")),
        ("1h 2h", DurationProblem(kind="repeated_unit", word="1h 2h", seconds=0, rest="")),
        ("2 months", DurationProblem(kind="no_fixed_length", word="2 months", seconds=0, rest="")),
        ("1h1mo", DurationProblem(kind="no_fixed_length", word="1h1mo", seconds=0, rest="")),
        ("٣s", DurationProblem(kind="unreadable", word="٣s", seconds=0, rest="")),
        ("²", DurationProblem(kind="unreadable", word="²", seconds=0, rest="")),
        ("1" * 41 + "s", DurationProblem(kind="too_long", word="1" * 41 + "s", seconds=0, rest="")),
        (
            "99999999999999999999s",
            DurationProblem(kind="too_long", word="99999999999999999999s", seconds=0, rest=""),
        ),
    ],
)
def test_read_duration(text: str, expected: Duration | DurationProblem) -> None:
    assert read_duration(text) == expected


@pytest.mark.parametrize(
    ("problem", "message"),
    [
        (
            DurationProblem(kind="missing", word="", seconds=0, rest=""),
            "give a duration, such as 90s, 10m or 5 minutes",
        ),
        (DurationProblem(kind="unreadable", word="x", seconds=0, rest=""), UNREADABLE.format("x")),
        (
            DurationProblem(kind="no_fixed_length", word="1 month", seconds=0, rest=""),
            "'1 month' is not a duration: months and years have no fixed length; write weeks or "
            "days, such as 4w or 30d",
        ),
        (
            DurationProblem(kind="out_of_order", word="30m 2h", seconds=0, rest=""),
            "'30m 2h' has its units out of order; write them largest first, such as 2h30m or "
            "1 hour 30 minutes",
        ),
        (
            DurationProblem(kind="repeated_unit", word="5m 5m", seconds=0, rest=""),
            "'5m 5m' gives a unit twice; write each unit once, largest first, such as 2h30m or "
            "1 hour 30 minutes",
        ),
        (
            DurationProblem(kind="bare_number", word="5", seconds=5, rest=""),
            "'5' has no unit; write 5s, 5m or 5h, or quote a prompt that starts with a number",
        ),
        (
            DurationProblem(kind="too_long", word="9" * 50, seconds=0, rest=""),
            "that duration is too long",
        ),
    ],
)
def test_a_duration_problem_says_how_to_write_one(problem: DurationProblem, message: str) -> None:
    assert problem.message == message


@pytest.mark.parametrize(
    ("seconds", "spoken"),
    [
        (0, "0 seconds"),
        (1, "1 second"),
        (90, "1 minute 30 seconds"),
        (9_000, "2 hours 30 minutes"),
        (694_861, "1 week 1 day 1 hour 1 minute 1 second"),
    ],
)
def test_spoken_duration(seconds: int, spoken: str) -> None:
    assert spoken_duration(seconds) == spoken


@given(st.text())
def test_read_duration_never_raises_and_keeps_the_rest(text: str) -> None:
    read = read_duration(text)
    if isinstance(read, Duration):
        assert read.seconds >= 0
        assert text.strip().endswith(read.rest)


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
        ("/update sch_1 calendar FREQ=YEARLY 09:00 UTC 2027-04-01 \"taxes\"", CallTool(name="schedule_update", arguments={"id": "sch_1", "prompt": "taxes", "calendar": {"rule": "FREQ=YEARLY", "time": "09:00", "time_zone": "UTC", "start_date": "2027-04-01"}})),
        ("/update sch_1 calendar FREQ=MONTHLY;BYDAY=1MO 09:00 UTC", CallTool(name="schedule_update", arguments={"id": "sch_1", "calendar": {"rule": "FREQ=MONTHLY;BYDAY=1MO", "time": "09:00", "time_zone": "UTC"}})),
        ("/update sch_1 in 1h30m tea", CallTool(name="schedule_update", arguments={"id": "sch_1", "prompt": "tea", "after_seconds": 5400})),
        ("/update sch_1 at 2026-12-01 09:00 Asia/Tokyo", CallTool(name="schedule_update", arguments={"id": "sch_1", "at": {"date": "2026-12-01", "time": "09:00", "time_zone": "Asia/Tokyo"}})),
        ("/update sch_1 daily 09:00 UTC mon,fri", CallTool(name="schedule_update", arguments={"id": "sch_1", "daily_at": {"time": "09:00", "time_zone": "UTC", "weekdays": ["mon", "fri"]}})),
        ("/update sch_1 prompt  water the plants ", CallTool(name="schedule_update", arguments={"id": "sch_1", "prompt": "water the plants"})),
        ("/update sch_1", Usage(message="/update needs a reminder id and what to change", usage=UPDATE_USAGE)),
        ("/update sch_1 prompt", Usage(message="/update sch_1 prompt: the new prompt is missing", usage=UPDATE_USAGE)),
        ("/update sch_1 sunday", Usage(message="/update sch_1 sunday: start with in, after, every, at, daily, calendar or prompt", usage=UPDATE_USAGE)),
        ("/update sch_1 weekly x", Usage(message="/update sch_1 weekly: start with in, after, every, at, daily, calendar or prompt", usage=UPDATE_USAGE)),
        ("/update sch_1 every", Usage(message="/update sch_1 every: give a duration, such as 90s, 10m or 5 minutes", usage=UPDATE_USAGE)),
        ("/pause sch_1", CallTool(name="schedule_update", arguments={"id": "sch_1", "paused": True})),
        ("/resume sch_1", CallTool(name="schedule_update", arguments={"id": "sch_1", "paused": False})),
        ("/pause", Usage(message="/pause takes one reminder id", usage=PAUSE_USAGE)),
        ("/resume sch_1 now", Usage(message="/resume takes one reminder id", usage=RESUME_USAGE)),
        ("/snooze sch_1 10m", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"after_seconds": 600}})),
        ("/snooze sch_1 5 minutes", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"after_seconds": 300}})),
        ("/snooze sch_1 2026-12-01T09:00:00+09:00", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"until": "2026-12-01T09:00:00+09:00"}})),
        ("/snooze sch_1 2026-12-01T09:00:00", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"until": "2026-12-01T09:00:00"}})),
        # The local form, read as /create at reads it.
        ("/snooze sch_1 2027-12-01 09:00 Asia/Tokyo", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"until": {"date": "2027-12-01", "time": "09:00", "time_zone": "Asia/Tokyo"}}})),
        ("/snooze sch_1 2027-12-01 09:00 UTC", CallTool(name="schedule_update", arguments={"id": "sch_1", "snooze": {"until": {"date": "2027-12-01", "time": "09:00", "time_zone": "UTC"}}})),
    ],
)  # fmt: skip
def test_update_pause_resume_and_snooze_lines(line: str, expected: object) -> None:
    assert parse_line(line) == expected


SNOOZE_FORMS_TEXT = (
    "a duration such as 10m, 90s, 1h 30m or 2 days, or a time such as "
    "2026-12-01T09:00:00+09:00 or 2026-12-01 09:00 Asia/Tokyo"
)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # /snooze takes no prompt: its messages say what it reads, never to quote a prompt.
        ("/snooze sch_1 90", f"/snooze: '90' has no unit; write 90s, 90m or 90h (/snooze takes {SNOOZE_FORMS_TEXT})"),
        ("/snooze sch_1 2h 30", f"/snooze: '30' has no unit; write 30s, 30m or 30h (/snooze takes {SNOOZE_FORMS_TEXT})"),
        ("/snooze sch_1", f"/snooze takes a reminder id and {SNOOZE_FORMS_TEXT}"),
        ("/snooze sch_1 10m please", f"/snooze: 'please' follows '10m'; /snooze takes no prompt, only {SNOOZE_FORMS_TEXT}"),
        ("/snooze sch_1 1 hour 30 minutes more", f"/snooze: 'more' follows '1 hour 30 minutes'; /snooze takes no prompt, only {SNOOZE_FORMS_TEXT}"),
        ("/snooze sch_1 2026-12-01T09:00:00Z please", f"/snooze: 'please' follows '2026-12-01T09:00:00Z'; /snooze takes no prompt, only {SNOOZE_FORMS_TEXT}"),
        ("/snooze sch_1 2027-12-01 09:00 Asia/Tokyo please", f"/snooze: 'please' follows '2027-12-01 09:00 Asia/Tokyo'; /snooze takes no prompt, only {SNOOZE_FORMS_TEXT}"),
        ("/snooze sch_1 2027-12-01", "/snooze sch_1 2027-12-01: give the time and the time zone too, such as 2027-12-01 09:00 Asia/Tokyo (or UTC), or an RFC 3339 time such as 2027-12-01T09:00:00+09:00"),
        ("/snooze sch_1 2027-12-01 09:00", "/snooze sch_1 2027-12-01: give the time and the time zone too, such as 2027-12-01 09:00 Asia/Tokyo (or UTC), or an RFC 3339 time such as 2027-12-01T09:00:00+09:00"),
        ("/snooze sch_1 soon", f"/snooze: 'soon' is not a duration or a time; give {SNOOZE_FORMS_TEXT}"),
        ("/snooze sch_1 2 months", "/snooze: '2 months' is not a duration: months and years have no fixed length; write weeks or days, such as 4w or 30d"),
        ("/snooze sch_1 30m 2h", "/snooze: '30m 2h' has its units out of order; write them largest first, such as 2h30m or 1 hour 30 minutes"),
    ],
)  # fmt: skip
def test_snooze_says_what_it_reads(line: str, message: str) -> None:
    assert parse_line(line) == Usage(message=message, usage=SNOOZE_USAGE)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # An update changes the reminder it names: its messages never say it would create one.
        ("/update sch_1 every 10 x", "/update sch_1 every 10 x is ambiguous: '10' has no unit, so it would change sch_1 into a reminder every 10 seconds with the prompt 'x'; write 10s, 10m or 10h (and quote a prompt that starts with a number)"),
        ("/update sch_1 in 5", "/update sch_1 in 5 is ambiguous: '5' has no unit, so it would change sch_1 into a reminder once after 5 seconds, keeping its prompt; write 5s, 5m or 5h (and quote a prompt that starts with a number)"),
        ("/update sch_1 daily 09:00 UTC sunday walk", "/update sch_1 daily: 'sunday' could be a day or the start of the prompt (as typed, it would change sch_1 into a reminder every day at 09:00 UTC with the prompt 'sunday walk'); write days as mon tue wed thu fri sat sun, or quote the prompt"),
        ("/update sch_1 at", "/update sch_1 at: give a time"),
        ("/update sch_1 at 09:00", "/update sch_1 at 09:00: give the date and the time zone too, such as 2026-12-01 09:00 Asia/Tokyo"),
        ("/update sch_1 daily", "/update sch_1 daily: give the time and the time zone, such as daily 09:00 Asia/Tokyo (or UTC), then optionally days such as mon wed fri"),
        ("/update sch_1 calendar", "/update sch_1 calendar: give the rule, the time and the time zone, such as calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris (or UTC), then optionally the start date, such as 2026-12-01"),
    ],
)  # fmt: skip
def test_update_messages_say_it_changes_the_reminder(line: str, message: str) -> None:
    assert parse_line(line) == Usage(message=message, usage=UPDATE_USAGE)


@pytest.mark.parametrize(
    ("line", "message", "usage"),
    [
        ("/create every 10 x", "/create every 10 x is ambiguous: '10' has no unit, so it would create a reminder every 10 seconds with the prompt 'x'; write 10s, 10m or 10h (and quote a prompt that starts with a number)", CREATE_USAGE),
        ("/create daily 09:00 UTC sunday walk", "/create daily: 'sunday' could be a day or the start of the prompt (as typed, it would create a reminder every day at 09:00 UTC with the prompt 'sunday walk'); write days as mon tue wed thu fri sat sun, or quote the prompt", CREATE_USAGE),
        ("/pause sch_1 now", "/pause takes one reminder id", PAUSE_USAGE),
        ("/resume", "/resume takes one reminder id", RESUME_USAGE),
        ("/delete sch_1 sch_2", "/delete takes one reminder id", DELETE_USAGE),
    ],
)  # fmt: skip
def test_each_command_speaks_of_itself(line: str, message: str, usage: str) -> None:
    assert parse_line(line) == Usage(message=message, usage=usage)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/quotas", Local(command="quotas")),
        ("/turns-per-day 20", SetQuota(name="turns_per_day", value=20)),
        ("/turns-per-day OFF", SetQuota(name="turns_per_day", value=None)),
        ("/turns-per-day default", SetQuota(name="turns_per_day", value="default")),
        ("/active-reminders 10", SetQuota(name="max_active", value=10)),
        ("/active-reminders default", SetQuota(name="max_active", value="default")),
        (
            "/quiet-hours 22:00-07:00 Europe/Paris",
            SetQuota(
                name="quiet_hours",
                value=QuietHours(start="22:00", end="07:00", time_zone="Europe/Paris"),
            ),
        ),
        ("/quiet-hours off", SetQuota(name="quiet_hours", value=None)),
        ("/quiet-hours default", SetQuota(name="quiet_hours", value="default")),
        (
            "/quotas now",
            Usage(message="/quotas takes no arguments", usage="/quotas"),
        ),
        (
            "/turns-per-day many",
            Usage(
                message="/turns-per-day takes a number, off or default",
                usage="/turns-per-day N|off|default, such as /turns-per-day 20",
            ),
        ),
        (
            "/active-reminders off",
            Usage(
                message="/active-reminders takes a number or default",
                usage="/active-reminders N|default, such as /active-reminders 10",
            ),
        ),
        (
            "/quiet-hours 22:00 Europe/Paris",
            Usage(
                message="not START-END ZONE, such as '22:00-07:00 Europe/Paris': "
                "'22:00 Europe/Paris'",
                usage="/quiet-hours START-END ZONE|off|default, such as /quiet-hours "
                "22:00-07:00 Europe/Paris",
            ),
        ),
        (
            "/quiet-hours 22:00-22:00 UTC",
            Usage(
                message="quiet hours: the window opens and closes at 22:00; leave it out",
                usage="/quiet-hours START-END ZONE|off|default, such as /quiet-hours "
                "22:00-07:00 Europe/Paris",
            ),
        ),
    ],
)
def test_quota_commands_are_read(line: str, expected: Command) -> None:
    assert parse_line(line) == expected


def test_a_prompt_keeps_the_control_characters_the_tool_refuses() -> None:
    """Only Unicode white space is trimmed: U+001C to U+001F reach the tool, which refuses a
    prompt holding them, rather than vanishing from the ends of the line."""
    assert parse_line("/create in 10m call mum\x1f") == CallTool(
        name="schedule_create", arguments={"prompt": "call mum\x1f", "after_seconds": 600}
    )
    assert parse_line("/update sch_1 prompt call mum\x1c") == CallTool(
        name="schedule_update", arguments={"id": "sch_1", "prompt": "call mum\x1c"}
    )
