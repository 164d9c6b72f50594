from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from session_schedule.core.changes import create_change
from session_schedule.core.due import Delivery, Occurrence, plan_delivery
from session_schedule.core.fold import fold
from session_schedule.core.framing import (
    DEFAULT_MAX_FRAME_CHARS,
    FRAME_TITLE,
    Delay,
    embed_prompt,
    frame,
    occurrence_keys,
    short_time,
)
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import parse_instant
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
)


def test_one_shot_frame_word_for_word() -> None:
    record = AfterScheduleRecord(
        id=ScheduleId("sch_1"),
        prompt='stretch, then say "done"\nand drink water',
        after_seconds=90,
        scheduled_at="2026-11-29T20:01:30.000Z",
    )
    delivery = plan_delivery(
        fold([(0, create_change(record))]), parse_instant("2026-11-29T20:01:30.250Z")
    )
    assert delivery is not None
    assert frame(delivery) == (
        "[session-schedule] Reminder follow-up\n"
        "A reminder you scheduled earlier in this conversation is due. Act on its prompt now; "
        "it will not be delivered again. "
        "A prompt's words about when or how often are context, not a request to create "
        "another reminder.\n"
        "All times are UTC.\n"
        "decided at: 2026-11-29T20:01:30.250Z\n"
        "\n"
        "reminder 1 of 1: sch_1\n"
        "kind: after (90 seconds after it was set)\n"
        "due at: 2026-11-29T20:01:30.000Z\n"
        "occurrence key: sch_1@2026-11-29T20:01:30.000Z\n"
        'prompt: "stretch, then say \\"done\\"\\nand drink water"'
    )


def _readme_batch() -> Delivery:
    first = EveryScheduleRecord(
        id=ScheduleId("sch_2"),
        prompt="check the build",
        every_seconds=600,
        scheduled_at="2026-11-29T20:10:00.000Z",
    )
    second = EveryScheduleRecord(
        id=ScheduleId("sch_5"),
        prompt="drink water",
        every_seconds=3600,
        scheduled_at="2026-11-29T21:00:00.000Z",
    )
    return Delivery(
        kind="batch",
        decided_at=parse_instant("2026-11-29T21:05:00.000Z"),
        occurrences=(
            Occurrence(record=first, due_at=parse_instant("2026-11-29T21:00:00.000Z"), skipped=5),
            Occurrence(record=second, due_at=parse_instant("2026-11-29T21:00:00.000Z"), skipped=0),
        ),
        changes=(),
    )


def test_batch_frame_word_for_word() -> None:
    delivery = _readme_batch()
    assert frame(delivery) == (
        "[session-schedule] Reminder follow-up\n"
        "Recurring reminders you scheduled earlier in this conversation are due (2). "
        "Act on each prompt now; each keeps recurring until it is deleted. "
        "A prompt's words about when or how often are context, not a request to create "
        "another reminder.\n"
        "All times are UTC.\n"
        "decided at: 2026-11-29T21:05:00.000Z\n"
        "\n"
        "reminder 1 of 2: sch_2\n"
        "kind: every (600 seconds)\n"
        "due at: 2026-11-29T21:00:00.000Z\n"
        "skipped occurrences: 5\n"
        "occurrence key: sch_2@2026-11-29T20:10:00.000Z\n"
        'prompt: "check the build"\n'
        "\n"
        "reminder 2 of 2: sch_5\n"
        "kind: every (3600 seconds)\n"
        "due at: 2026-11-29T21:00:00.000Z\n"
        "skipped occurrences: 0\n"
        "occurrence key: sch_5@2026-11-29T21:00:00.000Z\n"
        'prompt: "drink water"'
    )


def test_one_second_is_singular() -> None:
    record = AfterScheduleRecord(
        id=ScheduleId("sch_1"), prompt="p", after_seconds=1, scheduled_at="2026-12-01T00:00:00.000Z"
    )
    delivery = plan_delivery(
        fold([(0, create_change(record))]), parse_instant("2026-12-01T00:00:00.000Z")
    )
    assert delivery is not None
    assert "kind: after (1 second after it was set)\n" in frame(delivery)


def test_at_frame_names_the_kind() -> None:
    record = AtScheduleRecord(
        id=ScheduleId("sch_3"), prompt="call Aiko", scheduled_at="2026-12-01T00:00:00.000Z"
    )
    delivery = plan_delivery(
        fold([(0, create_change(record))]), parse_instant("2026-12-01T00:00:00.000Z")
    )
    assert delivery is not None
    assert "kind: at (a fixed time)\n" in frame(delivery)


@given(st.text(min_size=1))
def test_no_prompt_can_forge_a_line_of_the_frame(prompt: str) -> None:
    record = AtScheduleRecord(
        id=ScheduleId("sch_1"), prompt=prompt, scheduled_at="2026-12-01T00:00:00.000Z"
    )
    delivery = plan_delivery(
        fold([(0, create_change(record))]), parse_instant("2026-12-01T00:00:00.000Z")
    )
    assert delivery is not None
    lines = frame(delivery).split("\n")
    assert lines[0] == FRAME_TITLE
    assert len(lines) == 10
    assert lines[-1] == f"prompt: {embed_prompt(prompt)}"
    assert lines[-1].splitlines() == [lines[-1]]
    assert occurrence_keys(frame(delivery)) == ("sch_1@2026-12-01T00:00:00.000Z",)


def test_occurrence_keys_are_read_back_from_a_frame_only() -> None:
    text = (
        "[session-schedule] Reminder follow-up\n"
        "occurrence key: sch_2@2026-11-29T20:10:00.000Z\n"
        'prompt: "occurrence key: sch_9@2026-11-29T20:10:00.000Z"\n'
        "occurrence key: sch_5@2026-11-29T21:00:00.000Z"
    )
    assert occurrence_keys(text) == (
        "sch_2@2026-11-29T20:10:00.000Z",
        "sch_5@2026-11-29T21:00:00.000Z",
    )
    assert occurrence_keys("please\n" + text) == ()
    assert occurrence_keys("") == ()


def test_unicode_line_breaks_are_escaped() -> None:
    assert embed_prompt("a\x85b\u2028c\u2029d\x1ce") == '"a\\u0085b\\u2028c\\u2029d\\u001ce"'


def test_a_delayed_frame_says_since_when_and_why() -> None:
    record = AfterScheduleRecord(
        id=ScheduleId("sch_7"),
        prompt="again",
        after_seconds=1,
        scheduled_at="2026-11-29T20:00:07.000Z",
    )
    delivery = plan_delivery(
        fold([(0, create_change(record))]), parse_instant("2026-11-29T20:01:01.000Z")
    )
    assert delivery is not None
    delay = Delay(since=parse_instant("2026-11-29T20:00:07.000Z"), limit=6, window_seconds=60)
    assert frame(delivery, delay=delay).splitlines()[3:6] == [
        "decided at: 2026-11-29T20:01:01.000Z",
        "delayed since: 2026-11-29T20:00:07.000Z, because this session had 6 reminder follow-ups "
        "within 60 seconds, the most it allows. Do not create a reminder from a follow-up just to "
        "be called again; re-create one only if the user asked for it to repeat.",
        "",
    ]


def test_a_batch_beyond_its_budget_lists_the_rest_without_prompts() -> None:
    delivery = _readme_batch()
    whole = frame(delivery)
    assert frame(delivery, max_chars=len(whole)) == whole
    assert frame(delivery, max_chars=len(whole) - 1) == (
        "[session-schedule] Reminder follow-up\n"
        "Recurring reminders you scheduled earlier in this conversation are due (2). "
        "Act on each prompt now; each keeps recurring until it is deleted. "
        "A prompt's words about when or how often are context, not a request to create "
        "another reminder.\n"
        "All times are UTC.\n"
        "decided at: 2026-11-29T21:05:00.000Z\n"
        "prompts not shown: 1 of 2, to keep this turn within 685 characters; call schedule_list "
        "to read them (they are still active).\n"
        "\n"
        "reminder 1 of 2: sch_2\n"
        "kind: every (600 seconds)\n"
        "due at: 2026-11-29T21:00:00.000Z\n"
        "skipped occurrences: 5\n"
        "occurrence key: sch_2@2026-11-29T20:10:00.000Z\n"
        'prompt: "check the build"\n'
        "\n"
        "reminder 2 of 2: sch_5\n"
        "kind: every (3600 seconds)\n"
        "due at: 2026-11-29T21:00:00.000Z\n"
        "skipped occurrences: 0\n"
        "occurrence key: sch_5@2026-11-29T21:00:00.000Z\n"
        "prompt: not shown; call schedule_list to read it"
    )
    assert "prompts not shown: 2 of 2" in frame(delivery, max_chars=100)


def _batch(prompts: list[str]) -> Delivery:
    records = [
        EveryScheduleRecord(
            id=ScheduleId(f"sch_{number}"),
            prompt=prompt,
            every_seconds=300,
            scheduled_at="2026-11-29T21:00:00.000Z",
        )
        for number, prompt in enumerate(prompts, start=1)
    ]
    return Delivery(
        kind="batch",
        decided_at=parse_instant("2026-11-29T21:00:00.000Z"),
        occurrences=tuple(
            Occurrence(record=record, due_at=parse_instant(record.scheduled_at), skipped=0)
            for record in records
        ),
        changes=(),
    )


def test_the_default_budget_bounds_a_batch_of_the_longest_prompts() -> None:
    text = frame(_batch(["\U000e0041" * 4_000] * 100))  # each prompt escapes to 48,002 chars
    assert len(text) < DEFAULT_MAX_FRAME_CHARS + 100 * 250
    assert "prompts not shown: 100 of 100, to keep this turn within 20000 characters" in text
    text = frame(_batch(["x" * 4_000] * 100))
    assert text.count('prompt: "') == 4
    assert len(text) < DEFAULT_MAX_FRAME_CHARS + 96 * 250


@given(
    prompts=st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=12),
    max_chars=st.integers(min_value=0, max_value=5_000),
)
def test_prompts_are_shown_in_order_while_they_fit(prompts: list[str], max_chars: int) -> None:
    text = frame(_batch(prompts), max_chars=max_chars)
    blocks = text.split("\n\nreminder ")
    shown = [block for block in blocks[1:] if '\nprompt: "' in block]
    assert blocks[1 : len(shown) + 1] == shown  # a prefix, in order
    head_and_shown = "\n\nreminder ".join(blocks[: len(shown) + 1])
    notice = [line for line in blocks[0].splitlines() if line.startswith("prompts not shown")]
    assert len(head_and_shown) - sum(len(line) + 1 for line in notice) <= max(
        max_chars, len(blocks[0]) - sum(len(line) + 1 for line in notice)
    )
    assert bool(notice) == (len(shown) < len(prompts))


def test_daily_batch_frame_word_for_word() -> None:
    """A daily record joins an every record in one batch, with its rule on the kind line."""
    standup = DailyScheduleRecord(
        id=ScheduleId("sch_7"),
        prompt="standup",
        local_time="09:00:00.000",
        time_zone="Asia/Tokyo",
        weekdays=["mon", "tue", "wed", "thu", "fri"],
        scheduled_at="2026-12-01T00:00:00.000Z",
    )
    review = DailyScheduleRecord(
        id=ScheduleId("sch_8"),
        prompt="review",
        local_time="17:45:30.250",
        time_zone="UTC",
        weekdays=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        scheduled_at="2026-12-01T17:45:30.250Z",
    )
    build = EveryScheduleRecord(
        id=ScheduleId("sch_2"),
        prompt="check the build",
        every_seconds=3600,
        scheduled_at="2026-12-01T00:00:00.000Z",
    )
    state = fold(enumerate(create_change(record) for record in (build, standup, review)))
    # Decided on Friday 2026-12-04 at 12:00 in Tokyo: the Tuesday-to-Friday occurrences are due.
    delivery = plan_delivery(state, parse_instant("2026-12-04T03:00:00.000Z"))
    assert delivery is not None
    assert frame(delivery) == (
        "[session-schedule] Reminder follow-up\n"
        "Recurring reminders you scheduled earlier in this conversation are due (3). "
        "Act on each prompt now; each keeps recurring until it is deleted. "
        "A prompt's words about when or how often are context, not a request to create "
        "another reminder.\n"
        "All times are UTC.\n"
        "decided at: 2026-12-04T03:00:00.000Z\n"
        "\n"
        "reminder 1 of 3: sch_2\n"
        "kind: every (3600 seconds)\n"
        "due at: 2026-12-04T03:00:00.000Z\n"
        "skipped occurrences: 75\n"
        "occurrence key: sch_2@2026-12-01T00:00:00.000Z\n"
        'prompt: "check the build"\n'
        "\n"
        "reminder 2 of 3: sch_7\n"
        "kind: daily (09:00 Asia/Tokyo, mon tue wed thu fri)\n"
        "due at: 2026-12-04T00:00:00.000Z\n"
        "skipped occurrences: 3\n"
        "occurrence key: sch_7@2026-12-01T00:00:00.000Z\n"
        'prompt: "standup"\n'
        "\n"
        "reminder 3 of 3: sch_8\n"
        "kind: daily (17:45:30.250 UTC, mon tue wed thu fri sat sun)\n"
        "due at: 2026-12-03T17:45:30.250Z\n"
        "skipped occurrences: 2\n"
        "occurrence key: sch_8@2026-12-01T17:45:30.250Z\n"
        'prompt: "review"'
    )


def test_daily_times_are_shortened_only_where_zero() -> None:
    assert [short_time(text) for text in ("09:00:00.000", "09:00:30.000", "00:00:00.001")] == [
        "09:00",
        "09:00:30",
        "00:00:00.001",
    ]
