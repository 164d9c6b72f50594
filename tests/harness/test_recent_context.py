"""The request built from the end of the log is the request built from the whole transcript,
and reading it touches only the end of the log."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from session_schedule.core.changes import CHANGE_EVENT_TYPE, delete_change
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant
from session_schedule.harness.model import ChatMessage
from session_schedule.harness.transcript import (
    OMITTED_NOTE,
    bounded_context,
    chat_messages,
    check_fork_cut,
    cut_points,
    messages_of,
    recent_context,
    recent_turns,
)
from session_schedule.session.message import (
    MESSAGE_ENTRY_TYPE,
    MessageEntry,
    ToolCall,
    assistant_message,
    tool_message,
    user_message,
)
from session_schedule.session.port import LogEntry

AT = Instant(0)
SYSTEM: ChatMessage = {"role": "system", "content": "be brief"}
CHANGE = delete_change(ScheduleId("sch_1"))

# One piece of a transcript: a message, or ``None`` for a schedule change between messages.
Item = MessageEntry | None

texts = st.text(alphabet="ab \n\u00e9", max_size=120)
call_ids = st.sampled_from(["c1", "c2", "c3", "c4", "c5"])


@st.composite
def call_rounds(draw: st.DrawFn) -> list[Item]:
    """An assistant turn with tool calls, then results for some or all of them (any order),
    with schedule changes between them; now and then a result for a call nobody made."""
    ids = draw(st.lists(call_ids, min_size=1, max_size=3, unique=True))
    calls = tuple(ToolCall(id=i, name="schedule_list", arguments="{}") for i in ids)
    items: list[Item] = [assistant_message(draw(texts), at=AT, tool_calls=calls)]
    answered = draw(st.permutations(ids))[: draw(st.integers(0, len(ids)))]
    if draw(st.integers(0, 9)) == 0:
        answered = [*answered, draw(call_ids)]
    for call_id in answered:
        if draw(st.booleans()):
            items.append(None)
        items.append(tool_message(draw(texts), at=AT, tool_call_id=call_id))
    return items


@st.composite
def pieces(draw: st.DrawFn) -> list[Item]:
    kind = draw(st.sampled_from(["person", "pasted", "followup", "answer", "calls", "change"]))
    if kind == "person":
        return [user_message(draw(texts), at=AT)]
    if kind == "pasted":
        return [user_message("[session-schedule] " + draw(texts), at=AT)]
    if kind == "followup":
        return [user_message(draw(texts), at=AT, origin="followup")]
    if kind == "answer":
        return [assistant_message(draw(texts), at=AT)]
    if kind == "calls":
        return draw(call_rounds())
    return [None]


@st.composite
def transcripts(draw: st.DrawFn, max_pieces: int = 40) -> list[Item]:
    return [item for piece in draw(st.lists(pieces(), max_size=max_pieces)) for item in piece]


def log(items: Sequence[Item]) -> list[LogEntry]:
    return [
        LogEntry(position=position, type=CHANGE_EVENT_TYPE, payload=CHANGE)
        if item is None
        else LogEntry(position=position, type=MESSAGE_ENTRY_TYPE, payload=item)
        for position, item in enumerate(items)
    ]


def whole(entries: Sequence[LogEntry], max_chars: int) -> list[ChatMessage]:
    return bounded_context(SYSTEM, chat_messages(messages_of(entries)), max_chars)


@given(transcripts(), st.integers(0, 4000), st.integers(1, 9))
@example(  # a call whose results straddle the first step's boundary, and a result left out
    [
        user_message("x" * 50, at=AT),
        assistant_message(
            "",
            at=AT,
            tool_calls=(
                ToolCall(id="c1", name="schedule_list", arguments="{}"),
                ToolCall(id="c2", name="schedule_list", arguments="{}"),
            ),
        ),
        tool_message("r1", at=AT, tool_call_id="c1"),
        None,
        tool_message("r2", at=AT, tool_call_id="c2"),
        user_message("now", at=AT),
    ],
    250,
    2,
)
def test_the_request_from_the_end_is_the_request_from_the_whole_transcript(
    items: list[Item], max_chars: int, first_step: int
) -> None:
    entries = log(items)
    assert recent_context(SYSTEM, entries, max_chars, first_step=first_step) == whole(
        entries, max_chars
    )


@given(transcripts(max_pieces=25), transcripts(max_pieces=10), st.data())
def test_a_fork_cut_where_the_rule_allows_gets_the_same_request_either_way(
    parent: list[Item], added: list[Item], data: st.DataObject
) -> None:
    cut = data.draw(st.sampled_from(cut_points(log(parent))))
    check_fork_cut("s_parent", log(parent), cut)
    entries = log([*parent[:cut], *added])
    max_chars = data.draw(st.integers(0, 3000))
    first_step = data.draw(st.integers(1, 9))
    assert recent_context(SYSTEM, entries, max_chars, first_step=first_step) == whole(
        entries, max_chars
    )


class Recording(Sequence[LogEntry]):
    """Entries that may be read only by ``len`` and slices; remembers the earliest read."""

    def __init__(self, entries: list[LogEntry]) -> None:
        self._entries = entries
        self.earliest = len(entries)

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> LogEntry: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[LogEntry]: ...

    def __getitem__(self, index: int | slice) -> LogEntry | Sequence[LogEntry]:
        assert isinstance(index, slice), f"entry {index} was read by index"
        start, _stop, step = index.indices(len(self._entries))
        assert step == 1
        self.earliest = min(self.earliest, start)
        return tuple(self._entries[index])

    def __iter__(self) -> Iterator[LogEntry]:
        raise AssertionError("the entries were iterated")


def long_log() -> list[LogEntry]:
    items: list[Item] = []
    for n in range(5000):
        call = ToolCall(id=f"c{n}", name="schedule_list", arguments="{}")
        items += [
            user_message(f"prompt {n}", at=AT),
            assistant_message("", at=AT, tool_calls=(call,)),
            None,
            tool_message('{"ok":true}', at=AT, tool_call_id=call.id),
            assistant_message(f"answer {n}", at=AT),
        ]
    return log(items)


def test_a_request_reads_only_the_end_of_a_long_log() -> None:
    entries = long_log()
    recording = Recording(entries)
    request = recent_context(SYSTEM, recording, 1000)
    assert request == whole(entries, 1000)
    assert request[1] == {"role": "user", "content": OMITTED_NOTE}
    sent = len(request) - 2
    # The request's messages come from about its last ``sent`` entries; the steps double, so
    # at most about twice as many more are read.
    assert len(entries) - recording.earliest <= 2 * (sent + 16) + 16


def test_the_last_turns_are_read_from_the_end() -> None:
    entries = long_log()
    recording = Recording(entries)
    before, shown = recent_turns(recording, 8)
    # Each round is a prompt, a call, a change, its result and an answer: four turns of five.
    assert [entry.position for entry in shown] == [
        24990,
        24991,
        24993,
        24994,
        24995,
        24996,
        24998,
        24999,
    ]
    assert before == 24990
    assert recording.earliest == len(entries) - 16


def test_a_short_log_has_all_its_turns() -> None:
    entries = log([user_message("hi", at=AT), None, assistant_message("hello", at=AT)])
    assert recent_turns(entries, 8) == (0, [entries[0], entries[2]])
    assert recent_turns(entries, 2) == (0, [entries[0], entries[2]])
    assert recent_turns(entries, 1) == (2, [entries[2]])
    assert recent_turns([], 8) == (0, [])
    assert recent_turns(entries, 8, end=2) == (0, [entries[0]])
    assert recent_turns(entries, 8, end=99) == (0, [entries[0], entries[2]])


def test_a_page_of_turns_reads_at_most_max_entries() -> None:
    entries = long_log()
    recording = Recording(entries)
    # Up to entry 1000 (a prompt), 20 entries at most: the 16 turns of entries 980 to 999.
    earlier, shown = recent_turns(recording, 100, end=1000, max_entries=20)
    assert (earlier, len(shown), shown[0].position, shown[-1].position) == (980, 16, 980, 999)
    assert recording.earliest == 980
    assert recent_turns(recording, 3, end=1000, max_entries=20)[0] == 996
    # Entry 998 is a result; entry 997, a change, holds no turn: then two entries are read.
    assert recent_turns(recording, 8, end=999, max_entries=1) == (998, [entries[998]])
    assert recent_turns(recording, 8, end=998, max_entries=1) == (996, [entries[996]])
    assert recent_turns(log([None, None, None]), 8, max_entries=1) == (0, [])


def test_steps_and_counts_must_be_positive() -> None:
    with pytest.raises(ValueError) as raised:
        recent_context(SYSTEM, [], 100, first_step=0)
    assert str(raised.value) == "first_step must be positive, not 0"
    with pytest.raises(ValueError) as raised:
        recent_turns([], 0)
    assert str(raised.value) == "count must be positive, not 0"
    with pytest.raises(ValueError) as raised:
        recent_turns([], 1, max_entries=0)
    assert str(raised.value) == "max_entries must be positive, not 0"
