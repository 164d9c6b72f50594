"""The tool-call rule of the transcript: where a fork may cut, and what ``check`` reports."""

from __future__ import annotations

import pytest

from session_schedule.core.changes import CHANGE_EVENT_TYPE, delete_change
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant
from session_schedule.harness.chat import live_chat
from session_schedule.harness.transcript import (
    INTERRUPTED_RESULT,
    ForkCutError,
    TranscriptCheck,
    check_fork_cut,
    cut_points,
    interruption_results,
    messages_of,
    transcript_check,
    transcript_problem,
)
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.message import (
    MESSAGE_ENTRY_TYPE,
    MessageEntry,
    ToolCall,
    assistant_message,
    tool_message,
    user_message,
)
from session_schedule.session.port import LogEntry
from session_schedule.testing.clock import FakeClock

AT = Instant(0)


def _log(*items: MessageEntry | str) -> list[LogEntry]:
    """Entries: a message, or ``"change"`` for a schedule change between them."""
    return [
        LogEntry(
            position=position, type=CHANGE_EVENT_TYPE, payload=delete_change(ScheduleId("sch_1"))
        )
        if item == "change"
        else LogEntry(position=position, type=MESSAGE_ENTRY_TYPE, payload=item)
        for position, item in enumerate(items)
    ]


def _calls(*ids: str) -> MessageEntry:
    calls = tuple(ToolCall(id=call_id, name="schedule_list", arguments="{}") for call_id in ids)
    return assistant_message("", at=AT, tool_calls=calls)


def _result(call_id: str) -> MessageEntry:
    return tool_message('{"ok":true}', at=AT, tool_call_id=call_id)


USER = user_message("hi", at=AT)
ANSWER = assistant_message("done", at=AT)
# 0 user, 1 two calls, 2 change, 3 result a, 4 change, 5 result b, 6 answer
LOG = _log(USER, _calls("a", "b"), "change", _result("a"), "change", _result("b"), ANSWER)


def test_a_fork_may_cut_only_where_every_call_is_answered() -> None:
    assert cut_points(LOG) == [0, 1, 6, 7]
    assert transcript_problem(LOG) is None
    for at in (0, 1, 6, 7, None):
        check_fork_cut("s_parent", LOG, at)
    check_fork_cut("s_parent", LOG, 99)  # beyond the entries: the store's to refuse


@pytest.mark.parametrize("at", [2, 3, 4, 5])
def test_a_cut_through_a_tool_call_names_the_nearest_valid_points(at: int) -> None:
    with pytest.raises(ForkCutError) as raised:
        check_fork_cut("s_parent", LOG, at)
    assert str(raised.value) == (
        f"cannot fork session s_parent at entry {at}: it would part the tool call a, b of entry "
        "1 from its results; fork at entry 1 or 6 instead"
    )


def test_with_the_results_still_missing_only_the_earlier_point_is_offered() -> None:
    log = _log(USER, _calls("a"), "change")
    with pytest.raises(ForkCutError, match=r"; fork at entry 1 instead$"):
        check_fork_cut("s_parent", log, None)


@pytest.mark.parametrize(
    ("log", "position", "message"),
    [
        (_log(USER, _calls("a"), "change"), 1, "entry 1 makes tool call a and the log ends before its result"),
        (_log(_calls("a", "b"), _result("b"), USER), 0, "entry 0 makes tool call a and entry 2 follows before its result"),
        (_log(USER, _result("x")), 1, "entry 1 is the result of tool call x, which no assistant turn before it left unanswered"),
        (_log(_calls("a"), _result("a"), _result("a")), 2, "entry 2 is the result of tool call a, which no assistant turn before it left unanswered"),
    ],
)  # fmt: skip
def test_check_locates_an_unanswered_call_or_a_stray_result(
    log: list[LogEntry], position: int, message: str
) -> None:
    problem = transcript_problem(log)
    assert problem is not None
    assert (problem.position, problem.message) == (position, message)


@pytest.mark.parametrize(
    ("log", "stray", "interrupted"),
    [
        (LOG, None, []),
        (_log(USER, _calls("a"), "change"), None, ["entry 1 makes tool call a and the log ends before its result"]),
        (_log(_calls("a", "b"), _result("b"), USER, _calls("c")), None, ["entry 0 makes tool call a and entry 2 follows before its result", "entry 3 makes tool call c and the log ends before its result"]),
        (_log(_calls("a"), USER, _result("x")), "entry 2 is the result of tool call x, which no assistant turn before it left unanswered", ["entry 0 makes tool call a and entry 1 follows before its result"]),
    ],
)  # fmt: skip
def test_check_tells_an_interrupted_call_from_a_stray_result(
    log: list[LogEntry], stray: str | None, interrupted: list[str]
) -> None:
    found = transcript_check(log)
    assert (None if found.stray is None else found.stray.message) == stray
    assert [problem.message for problem in found.interrupted] == interrupted


@pytest.mark.parametrize(
    ("log", "answered"),
    [
        (LOG, []),
        (_log(USER), []),
        (_log(), []),
        (_log(USER, _calls("a", "b"), "change"), ["a", "b"]),
        (_log(USER, _calls("a", "b"), "change", _result("b"), "change"), ["a"]),
        (_log(USER, _calls("a"), *(["change"] * 40)), ["a"]),  # beyond the first step read
    ],
)
def test_resuming_answers_the_calls_the_log_ends_with(
    log: list[LogEntry], answered: list[str]
) -> None:
    results = interruption_results(log, at=Instant(5))
    assert results == [
        tool_message(INTERRUPTED_RESULT, at=Instant(5), tool_call_id=call_id)
        for call_id in answered
    ]
    items = [e.payload if isinstance(e.payload, MessageEntry) else "change" for e in log]
    assert transcript_check(_log(*items, *results)).interrupted == ()


async def test_a_resumed_chat_records_the_interruption_in_the_log() -> None:
    store = MemorySessionStore()
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    async with await store.create(now=clock.now()) as session:
        for item in (USER, _calls("a")):
            session.append(MESSAGE_ENTRY_TYPE, item)
        await session.barrier()
    async with await store.open(session.id) as session:
        async with live_chat(session, model=None, clock=clock):
            pass
        assert messages_of(session.entries)[2:] == [
            tool_message(INTERRUPTED_RESULT, at=clock.now(), tool_call_id="a")
        ]
    snapshot = await store.read(session.id)
    assert transcript_check(snapshot.entries) == TranscriptCheck(stray=None, interrupted=())
