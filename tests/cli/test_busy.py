"""The chat opening a session another process holds: one line saying what is happening, then
the session as soon as it is let go — or, past the wait, the busy error (exit 4) as before. In
virtual time."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from session_schedule.cli.common import EXIT_STORAGE, exit_code_for
from session_schedule.runtime.opening import RETRY_SECONDS as BUSY_RETRY_SECONDS
from session_schedule.runtime.opening import open_when_free
from session_schedule.session.errors import SessionBusy
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"


async def _until_sleeping(clock: FakeClock, task: asyncio.Task[object]) -> None:
    """Until ``task`` sleeps on ``clock`` (or has finished)."""
    while clock.sleepers == 0 and not task.done():
        await asyncio.sleep(0)


async def test_a_held_session_is_opened_once_its_holder_lets_go() -> None:
    clock = FakeClock(START)
    store = MemorySessionStore()
    holder = await store.create(now=clock.now())
    notes: list[str] = []
    opening = asyncio.create_task(
        open_when_free(store, holder.id, clock=clock, wait_seconds=60, note=notes.append)
    )
    for _ in range(4):  # two seconds of retries while the holder keeps it
        await _until_sleeping(clock, opening)
        clock.advance(BUSY_RETRY_SECONDS)
    assert not opening.done()
    await holder.close()
    await _until_sleeping(clock, opening)
    clock.advance(BUSY_RETRY_SECONDS)
    opened = await opening
    assert opened.id == holder.id
    assert notes == [
        f"session {holder.id} is open in another process — a host delivering a reminder lets it "
        "go once the reminder is answered; waiting up to 60 s (Ctrl-C gives up)"
    ]
    await opened.close()


async def test_a_session_still_held_after_the_wait_is_busy() -> None:
    clock = FakeClock(START)
    store = MemorySessionStore()
    holder = await store.create(now=clock.now())
    notes: list[str] = []
    opening = asyncio.create_task(
        open_when_free(store, holder.id, clock=clock, wait_seconds=2, note=notes.append)
    )
    while not opening.done():
        await _until_sleeping(clock, opening)
        clock.advance(BUSY_RETRY_SECONDS)
    with pytest.raises(SessionBusy):
        await opening
    assert len(notes) == 1
    await holder.close()


async def test_a_free_session_opens_without_a_word() -> None:
    clock = FakeClock(START)
    store = MemorySessionStore()
    created = await store.create(now=clock.now())
    await created.close()
    notes: list[str] = []
    opened = await open_when_free(store, created.id, clock=clock, note=notes.append)
    assert (opened.id, notes) == (created.id, [])
    await opened.close()


@pytest.mark.parametrize("kind", ["fifo", "link"])
async def test_a_hand_over_request_file_that_is_not_a_regular_file_is_one_storage_error(
    tmp_path: Path, kind: str
) -> None:
    """The request beside a held session's file is refused as what it is — one line, exit 6 —
    not followed through a link, not waited on as a FIFO."""
    clock = FakeClock(START)
    store = JsonlSessionStore(tmp_path)
    holder = await store.create(now=clock.now())
    request = tmp_path / f"{holder.id}.handover"
    if kind == "fifo":
        os.mkfifo(request)
        found = "a named pipe (FIFO)"
    else:
        request.symlink_to(tmp_path / "elsewhere")
        found = "a symbolic link"
    with pytest.raises(OSError) as raised:
        await open_when_free(store, holder.id, clock=clock, wait_seconds=2, note=print)
    assert exit_code_for(raised.value) == EXIT_STORAGE
    assert str(raised.value) == (
        f"[Errno {raised.value.errno}] it is {found}, not a regular file: '{request}'"
    )
    assert not (tmp_path / "elsewhere").exists()
    await holder.close()
