"""A front end asking for a session the host holds (Rule 6), on the stores that take hand-over
requests: the host closes it once idle, never while a turn runs, does not reopen it while the
front end has it, and takes it back after. In virtual time (the requests' ages are real)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import psycopg
import pytest

from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.host import HostSettings, ScheduleHost
from session_schedule.runtime.opening import RETRY_SECONDS, open_when_free
from session_schedule.session.handover import HandoverStore
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.port import SessionHandle, SessionStore
from session_schedule.session.postgres import PostgresSessionStore
from session_schedule.session.sqlite import SqliteSessionStore
from session_schedule.testing.clock import FakeClock
from session_schedule.testing.session_contract import CHANGE, at_create
from tests.host.test_scheduler import Agents
from tests.postgres import migrated_schema, server_dsn
from tests.virtual_time import run_for

START = "2026-11-29T20:00:00.000Z"
SETTINGS = HostSettings(lead_seconds=30, poll_seconds=10, busy_retry_seconds=5)
WAITING = (
    "session {id} is open in another process — asked it to hand the session over (a host does "
    "within 2 s once its reminder is answered); {lease}waiting up to 60 s (Ctrl-C gives up)"
)

Stores = Callable[[], SessionStore]
"""Another store object over the same sessions, as another process opens (the host's and the
front end's are two)."""


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    kind: str = request.param
    if kind == "jsonl":
        yield lambda: JsonlSessionStore(tmp_path / "sessions")
    elif kind == "sqlite":
        yield lambda: SqliteSessionStore(tmp_path / "sessions.db")
    else:
        dsn = server_dsn()
        with migrated_schema(dsn) as schema:
            yield lambda: PostgresSessionStore(dsn, schema=schema)


@asynccontextmanager
async def _two(stores: Stores) -> AsyncIterator[tuple[SessionStore, SessionStore]]:
    """The host's store and the front end's."""
    async with AsyncExitStack() as stack:
        pair = (stores(), stores())
        for store in pair:
            if isinstance(store, PostgresSessionStore):
                await stack.enter_async_context(store)
        yield pair


async def _session_with(store: SessionStore, clock: FakeClock, *seconds: int) -> SessionId:
    async with await store.create(now=clock.now()) as handle:
        for number, after in enumerate(seconds, start=1):
            handle.append(CHANGE, at_create(number, Instant(clock.now() + after * MS_PER_SECOND)))
        await handle.barrier()
    return handle.id


async def _dispatched(store: SessionStore, session_id: SessionId) -> list[str]:
    return [
        entry.payload.id
        for entry in (await store.read(session_id)).entries
        if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
    ]


async def _front_end_sleeping(
    clock: FakeClock, host: ScheduleHost, opening: asyncio.Task[SessionHandle]
) -> None:
    """Until the opening front end sleeps on ``clock`` beside the host's timer (its request is
    written on a thread), or has the session."""
    await host.settled()
    while clock.sleepers < 2 and not opening.done():
        await asyncio.sleep(0.001)


async def _until_opened(
    clock: FakeClock, host: ScheduleHost, opening: asyncio.Task[SessionHandle]
) -> None:
    while True:
        await _front_end_sleeping(clock, host, opening)
        if opening.done():
            return
        await run_for(host, clock, RETRY_SECONDS)


@asynccontextmanager
async def _front_end(
    store: SessionStore, clock: FakeClock, host: ScheduleHost, session_id: SessionId
) -> AsyncIterator[tuple[SessionHandle, list[str], float]]:
    """Open ``session_id`` as a front end does, letting the host run meanwhile; yields the handle,
    the lines said and the virtual seconds it took."""
    notes: list[str] = []
    began = clock.monotonic()
    opening = asyncio.create_task(open_when_free(store, session_id, clock=clock, note=notes.append))
    await _until_opened(clock, host, opening)
    handle = await opening
    try:
        yield handle, notes, clock.monotonic() - began
    finally:
        await handle.close()


async def test_the_host_hands_an_idle_session_over_and_takes_it_back(stores: Stores) -> None:
    async with _two(stores) as (store, front):
        await _hand_over_and_back(store, front)


async def _hand_over_and_back(store: SessionStore, front: SessionStore) -> None:
    clock = FakeClock(START)
    # A PostgreSQL session is held by a lease, which lapses if its holder is gone.
    lease = (
        "if the process holding it is gone, its lease lapses within 15 s; "
        if isinstance(store, PostgresSessionStore)
        else ""
    )
    assert isinstance(store, HandoverStore)
    agents = Agents()
    session_id = await _session_with(store, clock, 120)
    async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 95)
        assert host.open_sessions == {session_id}
        async with _front_end(front, clock, host, session_id) as (handle, notes, took):
            assert handle.id == session_id
            assert notes == [WAITING.format(id=session_id, lease=lease)]
            assert took <= 2
            assert host.open_sessions == frozenset()
            assert host.stats.handed_over == 1
            await run_for(host, clock, 15)  # the host tries again and is refused meanwhile
            assert host.open_sessions == frozenset()
        await run_for(host, clock, SETTINGS.busy_retry_seconds + 1)
        assert host.open_sessions == {session_id}  # taken back
        await run_for(host, clock, 20)  # past the target
    assert await _dispatched(store, session_id) == ["sch_1"]
    assert len(agents.followups(session_id)) == 1


async def test_a_turn_in_flight_finishes_before_the_session_is_handed_over(
    stores: Stores,
) -> None:
    async with _two(stores) as (store, front):
        await _turn_then_hand_over(store, front)


async def _turn_then_hand_over(store: SessionStore, front: SessionStore) -> None:
    clock = FakeClock(START)
    agents = Agents()
    session_id = await _session_with(store, clock, 120, 125)
    async with ScheduleHost(store, agents, clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 95)
        (agent,) = agents.made[session_id]
        agent.start_turn()  # a turn runs: the session is not closed under it
        notes: list[str] = []
        opening = asyncio.create_task(
            open_when_free(front, session_id, clock=clock, note=notes.append)
        )
        for _ in range(6):
            await _front_end_sleeping(clock, host, opening)
            await run_for(host, clock, RETRY_SECONDS)
        assert not opening.done()
        assert host.open_sessions == {session_id}
        agent.finish_turn()
        await _until_opened(clock, host, opening)
        handle = await opening
        assert host.open_sessions == frozenset()
        await handle.close()
    assert agent.followups == []


async def test_a_host_whose_hand_over_requests_fail_for_a_while_logs_once_and_hands_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a failure the host did not expect from reading the requests (a PostgreSQL
    connection ended) was logged with a traceback at every check, twice a second, and the
    session was never handed over. Now it is logged once, the requests are read again at every
    check, and the session goes to the front end once they can be read."""
    store, front = (
        JsonlSessionStore(tmp_path / "sessions"),
        JsonlSessionStore(tmp_path / "sessions"),
    )
    clock = FakeClock(START)
    session_id = await _session_with(store, clock, 120)
    read = store.handover_requests
    failures = 0

    async def failing(session_ids: frozenset[SessionId]) -> frozenset[SessionId]:
        nonlocal failures
        if failures:
            failures -= 1
            raise ConnectionResetError("the server closed the connection")
        return await read(session_ids)

    monkeypatch.setattr(store, "handover_requests", failing)
    async with ScheduleHost(store, Agents(), clock=clock, settings=SETTINGS) as host:
        await run_for(host, clock, 95)
        assert host.open_sessions == {session_id}
        failures = 6  # from now on, while the host holds the session
        with caplog.at_level("INFO", logger="session_schedule.host"):
            async with _front_end(front, clock, host, session_id) as (handle, _, took):
                assert handle.id == session_id
                assert took <= 6 * SETTINGS.handover_check_seconds + 2
    assert failures == 0
    said = [
        record.getMessage()
        for record in caplog.records
        if "hand-over requests" in record.getMessage()
    ]
    assert said == [
        f"hand-over requests could not be read; trying again every "
        f"{SETTINGS.handover_check_seconds} s: ConnectionResetError: the server closed the "
        "connection",
        "hand-over requests can be read again",
    ]


async def test_a_postgresql_listener_whose_connection_ends_is_replaced() -> None:
    """Regression: once the connection listening for hand-over requests was ended (a server
    restart, an administrator), every later read failed on it, and no session was handed over
    again."""
    dsn = server_dsn()
    with migrated_schema(dsn) as schema:
        async with (
            PostgresSessionStore(dsn, schema=schema) as host,
            PostgresSessionStore(dsn, schema=schema) as front,
        ):
            wanted = SessionId("s_handover0001")
            assert await host.handover_requests({wanted}) == frozenset()
            listener = host._listener
            assert listener is not None
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
                await admin.execute("SELECT pg_terminate_backend(%s)", (listener.info.backend_pid,))
            with pytest.raises(psycopg.OperationalError):
                await _until_it_fails(host, wanted)
            assert host._listener is None
            assert await host.handover_requests({wanted}) == frozenset()  # listening again
            await front.request_handover(wanted)
            for _ in range(100):
                if await host.handover_requests({wanted}) == {wanted}:
                    break
                await asyncio.sleep(0.01)
            assert await host.handover_requests({wanted}) == {wanted}


async def _until_it_fails(store: PostgresSessionStore, wanted: SessionId) -> None:
    """Read the requests until the client sees its ended connection fail (raises that)."""
    for _ in range(100):
        await store.handover_requests({wanted})
        await asyncio.sleep(0.01)
