"""A session opened from its checkpoint, with more history than the checkpoint's window: a
harness turn, the chat's history and the overlay's session view read only the end of its log.

``LazyEntries.loaded`` says whether the entries before the window were read."""

from __future__ import annotations

from pathlib import Path

import msgspec

from session_schedule.cli.chat import Display, Line, plain_text, show_history
from session_schedule.core.instants import Instant
from session_schedule.harness.agent import SYSTEM_PROMPT
from session_schedule.harness.chat import live_chat
from session_schedule.harness.model import ChatMessage, ModelReply
from session_schedule.harness.transcript import (
    OMITTED_NOTE,
    bounded_context,
    chat_messages,
    messages_of,
    recent_context,
)
from session_schedule.session.checkpoint import WINDOW
from session_schedule.session.handle import EntriesView, LazyEntries
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.message import (
    MESSAGE_ENTRY_TYPE,
    assistant_message,
    user_message,
)
from session_schedule.session.port import SessionHandle
from session_schedule.testing.clock import FakeClock
from session_schedule.web.live import LiveSession
from tests.harness.test_agent import ScriptedModel
from tests.web.client import open_overlay

START = Instant(1_796_000_000_000)
ROUNDS = 60
"""Prompt-and-answer rounds of history: 120 entries, about twice the checkpoint's window."""
BUDGET = 2_000
"""A request budget the last few rounds fill (each round is about 150 characters)."""


async def long_session(store: JsonlSessionStore) -> SessionId:
    """A closed session of :data:`ROUNDS` prompts and answers (its checkpoint written)."""
    clock = FakeClock(START)
    async with await store.create(now=clock.now()) as session:
        for n in range(ROUNDS):
            session.append(MESSAGE_ENTRY_TYPE, user_message(f"question {n}", at=clock.now()))
            session.append(MESSAGE_ENTRY_TYPE, assistant_message(f"answer {n}", at=clock.now()))
        await session.barrier()
        return session.id


def lazy(session: SessionHandle) -> LazyEntries:
    view = session.entries
    assert isinstance(view, EntriesView)
    entries = view._entries  # what the store opened the session with
    assert isinstance(entries, LazyEntries)
    return entries


async def test_reading_the_recent_end_of_a_long_session_leaves_its_history_unread(
    tmp_path: Path,
) -> None:
    store = JsonlSessionStore(tmp_path)
    session_id = await long_session(store)
    async with await store.open(session_id) as session:
        entries = lazy(session)
        assert (len(session.entries), entries.start, entries.loaded) == (
            2 * ROUNDS,
            120 - WINDOW,
            False,
        )
        assert WINDOW < 2 * ROUNDS
        system: ChatMessage = {"role": "system", "content": "s"}
        request = recent_context(system, session.entries, BUDGET)
        assert request[:2] == [system, {"role": "user", "content": OMITTED_NOTE}]
        assert request[-1] == {"role": "assistant", "content": f"answer {ROUNDS - 1}"}
        shown: list[Line] = []
        show_history(Display(shown.append, echo_person=True, offline=True), session, show="show it")
        assert plain_text(shown[0]) == (
            "--- the last 8 turns; the earlier ones, in the first 112 log entries, are not "
            "shown; see them with: show it ---"
        )
        assert plain_text(shown[-2]) == f"assistant> answer {ROUNDS - 1}"
        page = LiveSession(session, max_pending=10).page()
        # A page reads the last 64 entries at most: the 64 turns of entries 56 to 119.
        assert (len(page.turns), page.before, page.turns[-1].position) == (64, 56, 119)
        assert not entries.loaded
        # Reading the whole transcript is what loads the history: the request was the same.
        assert request == bounded_context(
            system, chat_messages(messages_of(session.entries)), BUDGET
        )
        assert entries.loaded


async def long_fork(store: JsonlSessionStore) -> SessionId:
    """A fork of a :func:`long_session` with all its history, closed (its checkpoint
    written): the history is the fork's own log, inherited."""
    parent = await long_session(store)
    async with await store.fork(parent, at=None, now=START) as fork:
        fork.append(MESSAGE_ENTRY_TYPE, user_message("forked here", at=START))
        fork.append(MESSAGE_ENTRY_TYPE, assistant_message("noted", at=START))
        await fork.barrier()
        return fork.id


async def test_a_harness_turn_chat_history_and_the_overlay_leave_the_history_unread(
    tmp_path: Path,
) -> None:
    # A fork: the inherited entries are history too, and nothing but the code under test reads
    # them (the turn queue looks for pending turns from the fork point on).
    store = JsonlSessionStore(tmp_path)
    session_id = await long_fork(store)
    clock = FakeClock(START)
    model = ScriptedModel(replies=[ModelReply(content="the last answer")])
    async with await store.open(session_id) as session:
        entries = lazy(session)
        shown: list[Line] = []
        show_history(Display(shown.append, echo_person=True, offline=False), session, show=None)
        assert plain_text(shown[0]) == (
            "--- the last 8 turns; the earlier ones, in the first 114 log entries, are not "
            "shown ---"
        )
        async with live_chat(session, model=model, clock=clock, max_context_chars=BUDGET) as live:
            await live.agent.submit_durably("one more question")
            await live.agent.wait_idle()
        assert not entries.loaded
    (request,) = model.seen
    assert str(request[0]["content"]).startswith(SYSTEM_PROMPT)
    assert request[1] == {"role": "user", "content": OMITTED_NOTE}
    assert request[-1] == {"role": "user", "content": "one more question"}
    whole = messages_of((await store.read(session_id)).entries)
    assert request == bounded_context(request[0], chat_messages(whole[:-1]), BUDGET)

    async with open_overlay(store) as overlay:
        response = await overlay.client.get(f"/api/sessions/{session_id}")
        assert response.status_code == 200
        detail = msgspec.json.decode(response.content)
        assert [turn["message"]["content"] for turn in detail["turns"][-2:]] == [
            "one more question",
            "the last answer",
        ]
        assert len(detail["turns"]) == 64 - 2  # the last turn was queued and finished too
        live_session = overlay.app.sessions.live_session(session_id)
        assert live_session is not None
        assert not lazy(live_session.session).loaded


async def test_a_harness_turn_on_a_reopened_session_leaves_its_own_history_unread(
    tmp_path: Path,
) -> None:
    # Not a fork: the turn queue resumes its pending turns from the checkpoint, so starting it
    # reads nothing before the window either.
    store = JsonlSessionStore(tmp_path)
    session_id = await long_session(store)
    model = ScriptedModel(replies=[ModelReply(content="the last answer")])
    async with await store.open(session_id) as session:
        entries = lazy(session)
        async with live_chat(
            session, model=model, clock=FakeClock(START), max_context_chars=BUDGET
        ) as live:
            await live.agent.submit_durably("one more question")
            await live.agent.wait_idle()
        assert not entries.loaded
    (request,) = model.seen
    assert request[-1] == {"role": "user", "content": "one more question"}
    whole = messages_of((await store.read(session_id)).entries)
    assert request == bounded_context(request[0], chat_messages(whole[:-1]), BUDGET)


async def test_creating_and_delivering_a_reminder_leave_the_history_unread(
    tmp_path: Path,
) -> None:
    # Which turn created a reminder is read from the checkpoint on, not from the first entry.
    from session_schedule.runtime.live import LiveSchedule  # noqa: PLC0415
    from session_schedule.testing.agent import FakeAgent  # noqa: PLC0415

    store = JsonlSessionStore(tmp_path)
    session_id = await long_session(store)
    clock = FakeClock(START)
    async with await store.open(session_id) as session:
        entries = lazy(session)
        agent = FakeAgent()
        async with LiveSchedule(session, agent, clock=clock) as schedule:
            view = await schedule.create({"prompt": "stretch", "after_seconds": 60})
            for _ in range(2):
                clock.advance(30)
                await schedule.settled()
            assert len(agent.followups) == 1
        assert view.id == "sch_1"
        assert not entries.loaded
