"""ScheduleHost and a failing store: an error while polling, opening or stepping one session is
logged and retried for that session; it never stops the timer."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from session_schedule.core.instants import Instant
from session_schedule.host import HostSettings, ScheduleHost, scheduler
from session_schedule.session.ids import SessionId
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import DueSession, SessionHandle
from session_schedule.testing.clock import FakeClock
from tests.host.test_scheduler import START, Agents, dispatched, session_with
from tests.virtual_time import run_for

SETTINGS = HostSettings(lead_seconds=30, poll_seconds=10, failed_retry_seconds=20)

ERRORS: dict[str, Callable[[], Exception]] = {
    "locked": lambda: sqlite3.OperationalError("database is locked"),
    "emfile": lambda: OSError(errno.EMFILE, "Too many open files"),
    "eio": lambda: OSError(errno.EIO, "Input/output error"),
}
LOGGED = {
    "locked": "OperationalError: database is locked",
    "emfile": "OSError: [Errno 24] Too many open files",
    "eio": "OSError: [Errno 5] Input/output error",
}


def failing(count: int, error: Callable[[], Exception]) -> Callable[[], None]:
    """A check that raises ``error()`` the first ``count`` times it is called."""
    left = [count]

    def check() -> None:
        if left[0] > 0:
            left[0] -= 1
            raise error()

    return check


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "session_schedule.host.scheduler"
    ]


@pytest.mark.parametrize("kind", sorted(ERRORS))
def test_a_failing_index_read_is_retried_at_the_next_poll(
    kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        store, clock, agents = MemorySessionStore(), FakeClock(START), Agents()
        session_id = await session_with(store, clock, 5)
        check = failing(3, ERRORS[kind])
        real_due = store.due_sessions

        async def due_sessions(before: Instant, *, limit: int) -> tuple[DueSession, ...]:
            check()
            return await real_due(before, limit=limit)

        monkeypatch.setattr(store, "due_sessions", due_sessions)
        async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
            await run_for(host, clock, 25)
            assert agents.followups(session_id) == []
            assert host.failure is None
            await run_for(host, clock, 10)  # the fourth poll reads the index
            assert len(agents.followups(session_id)) == 1
            assert await dispatched(store, session_id) == ["sch_1"]
            assert host.failure is None
            assert host.stats.polls >= 1
        assert (
            messages(caplog)[:3]
            == [f"the next-target index could not be read; trying again in 10 s: {LOGGED[kind]}"]
            * 3
        )

    asyncio.run(scenario())


@pytest.mark.parametrize("kind", ["eio", "locked"])
def test_a_session_that_fails_to_open_is_retried_and_others_are_delivered(
    kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        store, clock, agents = MemorySessionStore(), FakeClock(START), Agents()
        troubled = await session_with(store, clock, 5)
        fine = await session_with(store, clock, 5)
        check = failing(2, ERRORS[kind])
        real_open = store.open

        async def open_session(session_id: str) -> SessionHandle:
            if session_id == troubled:
                check()
            return await real_open(session_id)

        monkeypatch.setattr(store, "open", open_session)
        async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
            await run_for(host, clock, 10)
            assert len(agents.followups(fine)) == 1
            assert agents.followups(troubled) == []
            assert host.stats.failed == 1
            assert host._opening == set()
            await run_for(host, clock, 20)  # the first retry fails again
            assert agents.followups(troubled) == []
            assert host.stats.failed == 2
            await run_for(host, clock, 20)
            assert len(agents.followups(troubled)) == 1
            assert await dispatched(store, troubled) == ["sch_1"]
            assert host.open_sessions == frozenset()
            assert host.failure is None
        assert (
            messages(caplog)
            == [f"session {troubled} could not be opened; trying again in 20 s: {LOGGED[kind]}"] * 2
        )

    asyncio.run(scenario())


@pytest.mark.parametrize("kind", sorted(ERRORS))
def test_a_session_whose_pass_fails_is_closed_and_opened_again(
    kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        store, clock, agents = MemorySessionStore(), FakeClock(START), Agents()
        session_id = await session_with(store, clock, 5)
        check = failing(1, ERRORS[kind])
        host = ScheduleHost(store, agents, clock=clock, settings=SETTINGS)
        real_open_slot = host._open

        async def open_and_break(opened: SessionId) -> None:
            await real_open_slot(opened)
            slot = host._slots.get(opened)
            if slot is not None:
                real_step = slot.schedule.step

                async def step() -> Instant | None:
                    check()
                    return await real_step()

                monkeypatch.setattr(slot.schedule, "step", step)

        monkeypatch.setattr(host, "_open", open_and_break)
        async with host:
            await run_for(host, clock, 10)
            assert agents.followups(session_id) == []
            assert host.open_sessions == frozenset()
            assert host.stats.failed == 1
            await run_for(host, clock, 20)
            assert len(agents.followups(session_id)) == 1
            assert await dispatched(store, session_id) == ["sch_1"]
            assert host.failure is None
        assert messages(caplog) == [
            f"the schedule of session {session_id} stopped; it is closed and opened again from "
            f"storage in 20 s: {LOGGED[kind]}"
        ]

    caplog.set_level(logging.ERROR)
    asyncio.run(scenario())


def test_out_of_descriptors_the_host_cycles_due_sessions_through_the_ones_it_has(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    limit = 3

    async def scenario() -> None:
        store, clock, agents = MemorySessionStore(), FakeClock(START), Agents()
        due = [await session_with(store, clock, 5) for _ in range(8)]
        handles: list[SessionHandle] = []
        real_open = store.open

        async def open_session(session_id: str) -> SessionHandle:
            # Each open session holds a descriptor; the process has ``limit`` of them.
            if sum(not handle.closed for handle in handles) >= limit:
                raise OSError(errno.EMFILE, "Too many open files")
            handle = await real_open(session_id)
            handles.append(handle)
            return handle

        monkeypatch.setattr(store, "open", open_session)
        async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
            await run_for(host, clock, 10)
            # Each queued session is opened as soon as a delivered one closes (Rule 8), and the
            # one refused is tried again after 5 s, well before the 20 s a failed open waits.
            delivered = [session_id for session_id in due if agents.followups(session_id)]
            assert delivered == due
            await run_for(host, clock, 15)
            assert all(len(agents.followups(session_id)) == 1 for session_id in due)
            assert host.stats.failed == 0
            assert host.stats.out_of_descriptors >= 1
            assert host.open_sessions == frozenset()
            assert host.failure is None
        warnings = [
            message for message in messages(caplog) if message.startswith("the process has no")
        ]
        assert warnings[0] == (
            "the process has no file descriptor left with 3 sessions open; no more are opened "
            "until the next poll (raise the limit, ulimit -n, or lower max_open): "
            "OSError: [Errno 24] Too many open files"
        )
        assert len(warnings) <= 3  # once per poll at most

    asyncio.run(scenario())


def cannot_open() -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("unable to open database file")
    error.sqlite_errorname = "SQLITE_CANTOPEN"
    return error


def caused_by(cause: BaseException) -> Exception:
    error = RuntimeError("wrapped")
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("error", "headroom", "short"),
    [
        (OSError(errno.EMFILE, "Too many open files"), True, True),
        (OSError(errno.ENFILE, "Too many open files in system"), True, True),
        (caused_by(OSError(errno.EMFILE, "Too many open files")), True, True),
        (OSError(errno.EIO, "Input/output error"), False, False),
        (cannot_open(), False, True),
        (caused_by(cannot_open()), False, True),
        (cannot_open(), True, False),
        (sqlite3.OperationalError("database is locked"), False, False),
    ],
)
def test_what_counts_as_out_of_descriptors(
    error: Exception, headroom: bool, short: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler, "_descriptors_left", lambda count: headroom)
    assert scheduler._out_of_descriptors(error) is short


def open_descriptors() -> list[int]:
    listed = [int(entry.name) for entry in Path("/proc/self/fd").iterdir()]
    return sorted(fd for fd in listed if is_open(fd))  # not the listing's own descriptor


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_descriptor_headroom_is_probed_and_given_back() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = open_descriptors()
    assert scheduler._descriptors_left(4)
    # A limit under which only three more descriptors can be open (the lowest free numbers).
    taken, free, number = set(before), 0, 0
    while free < 3:
        free += number not in taken
        number += 1
    resource.setrlimit(resource.RLIMIT_NOFILE, (number, hard))
    try:
        assert not scheduler._descriptors_left(4)
        assert scheduler._descriptors_left(3)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert open_descriptors() == before
