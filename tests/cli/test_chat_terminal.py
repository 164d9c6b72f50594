"""``session-schedule chat`` on a real terminal (a pseudo-terminal driven by pexpect).

The follow-up turn must appear while the person sits at the prompt — even halfway through typing
a line, which must survive intact — and Ctrl-D and Ctrl-C must leave cleanly so the session can
be resumed. One reminder on the real clock (1 s).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect

from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleCreateChange,
    ScheduleDispatchChange,
)
from session_schedule.harness.transcript import messages_of
from session_schedule.session.jsonl import JsonlSessionStore
from tests.cli.chat_process import TIMEOUT, child_environment


@contextmanager
def terminal(data_dir: Path, *arguments: str) -> Iterator[pexpect.spawn[str]]:
    child = pexpect.spawn(
        sys.executable,
        ["-W", "error", "-m", "session_schedule", "--data-dir", str(data_dir), "chat", *arguments],
        # pexpect answers no cursor-position requests; tell prompt_toolkit not to ask.
        env=child_environment({"TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"}),
        dimensions=(40, 200),
        timeout=TIMEOUT,
        encoding="utf-8",
    )
    try:
        yield child
    finally:
        child.close(force=True)


def test_a_followup_appears_at_the_prompt_and_the_session_resumes(tmp_path: Path) -> None:
    with terminal(tmp_path) as chat:
        chat.expect(r"new session (s_[0-9a-z]{12})")
        assert isinstance(chat.match, re.Match)
        session_id = chat.match.group(1)
        chat.expect_exact("you> ")
        chat.sendline("/create after 1s stretch")
        # Start a line before the reminder is due; the follow-up prints above it.
        chat.send("half-typed")
        chat.expect_exact("[session-schedule] Reminder follow-up")
        chat.expect_exact("occurrence key: sch_1@")
        chat.expect_exact('prompt: "stretch"')
        chat.sendline(" line")
        chat.sendcontrol("d")
        chat.expect_exact(f"resume it with: session-schedule --data-dir {tmp_path} chat")
        chat.expect(pexpect.EOF)
        chat.close()
        assert (chat.exitstatus, chat.signalstatus) == (0, None)

    snapshot = asyncio.run(JsonlSessionStore(tmp_path).read(session_id))
    transcript = messages_of(snapshot.entries)
    assert [(turn.role, turn.origin) for turn in transcript] == [
        ("assistant", "model"),
        ("tool", "tool"),
        ("user", "followup"),
        ("user", "person"),
    ]
    assert transcript[3].content == "half-typed line"
    changes = [entry.payload for entry in snapshot.entries if entry.type == CHANGE_EVENT_TYPE]
    assert [type(change) for change in changes] == [ScheduleCreateChange, ScheduleDispatchChange]

    with terminal(tmp_path, session_id) as chat:
        chat.expect_exact(f"resumed session {session_id} ({len(snapshot.entries)} log entries)")
        chat.expect_exact("half-typed line")
        chat.expect_exact("you> ")
        chat.sendline("/list")
        chat.expect_exact('"schedules":[],"next_cursor":null,"total":0}')
        chat.expect_exact("you> ")
        chat.sendcontrol("c")
        chat.expect(pexpect.EOF)
        chat.close()
        assert (chat.exitstatus, chat.signalstatus) == (0, None)
