"""A follow-up handed to a take is never lost between the hand-over and the host.

The owner records the dispatch at the hand-over; the host has the text only once the take's
answer has been written to the stdout pipe. These tests cut that path everywhere: a take
cancelled at every await point from the request to the written answer (in virtual time, through
the server's own handler, its outgoing stream and the SDK's stdio transport writing to the
server's stdout wire), an answer whose write is pending or fails, and a server killed with
SIGKILL at random moments of its take loop and restarted on the same data directory. Every
reminder that came due must reach the host — at least once, with its occurrence key.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import anyio
import pytest
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import WriteStream
from mcp.shared.message import SessionMessage

from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.mcp import agent as mcp_agent
from session_schedule.mcp.agent import MAX_OUTBOX_BYTES, OutboxCorruptError, PullAgent
from session_schedule.mcp.server import OUTBOX_SUFFIX, TAKE_TOOL, ScheduleMcpServer
from session_schedule.mcp.stdout import StdoutWire
from session_schedule.runtime.clock import SystemClock
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.port import SessionHandle
from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"


@dataclass
class Peer:
    """What the server reads of its client's session: only the protocol version."""

    protocol_version: str = "2026-07-28"


class Silence:
    """The stdin of an in-process transport: a host that sends nothing until it hangs up."""

    def __init__(self) -> None:
        self._ended = asyncio.Event()

    def __aiter__(self) -> Silence:
        return self

    async def __anext__(self) -> str:
        await self._ended.wait()
        raise StopAsyncIteration

    def end(self) -> None:
        self._ended.set()


@dataclass
class Host:
    """The far end of the stdout pipe: what has been written to it is what the host receives."""

    lines: list[dict[str, object]] = field(default_factory=list)
    failures: int = 0
    """How many writes fail (a broken pipe) before writes succeed again."""
    held: bool = False
    """Whether writes wait (a full pipe) until :meth:`release`."""
    waiting: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once a write waits because writes are held."""
    released: asyncio.Event = field(default_factory=asyncio.Event)

    async def write(self, data: bytes) -> None:
        await asyncio.sleep(0)  # the bytes are on their way
        if self.held:
            self.waiting.set()
            await self.released.wait()
        if self.failures:
            self.failures -= 1
            raise BrokenPipeError("the host closed its end")
        self.lines.append(json.loads(data))

    def release(self) -> None:
        self.held = False
        self.released.set()

    def followups(self) -> list[str]:
        texts = []
        for line in self.lines:
            result = cast("dict[str, dict[str, object]]", line["result"])
            followup = result["structuredContent"]["followup"]
            if followup is not None:
                texts.append(cast("str", followup))
        return texts


@dataclass
class World:
    clock: FakeClock
    session: SessionHandle
    agent: PullAgent
    schedule: LiveSchedule
    server: ScheduleMcpServer
    host: Host
    outbox: Path
    outgoing: WriteStream[SessionMessage] | None = None
    requests: int = 0

    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        """The SDK's stdio transport, its stdin silent and its stdout written to the host
        through the server's :class:`StdoutWire`."""
        stdin = Silence()
        wire = StdoutWire(self.host.write)
        async with stdio_server(
            stdin=cast("anyio.AsyncFile[str]", stdin), stdout=cast("anyio.AsyncFile[str]", wire)
        ) as (read_stream, write_stream):
            self.outgoing = self.server.outgoing(write_stream, wire)
            try:
                yield
            finally:
                self.outgoing = None
                stdin.end()
                read_stream.close()
                write_stream.close()

    async def run_for(self, seconds: float) -> None:
        await self.schedule.settled()
        self.clock.advance(seconds)
        await self.schedule.settled()

    async def take(self) -> None:
        """One take, answered through the server's outgoing stream as the SDK answers it."""
        assert self.outgoing is not None, "not connected"
        self.requests += 1
        request_id = self.requests
        context = ServerRequestContext[None, object](
            session=cast("ServerSession", Peer()),
            lifespan_context=None,
            protocol_version="2026-07-28",
            method="tools/call",
            request_id=request_id,
        )
        result = await self.server._call_tool(  # the entry point the SDK calls
            context, types.CallToolRequestParams(name=TAKE_TOOL, arguments={})
        )
        response = types.JSONRPCResponse(
            jsonrpc="2.0",
            id=request_id,
            result=result.model_dump(by_alias=True, exclude_none=True),
        )
        await self.outgoing.send(SessionMessage(response))

    async def take_in_time(self) -> None:
        """A take that is not cancelled: the clock moves on if the owner has nothing to hand."""
        task = asyncio.create_task(self.take())
        try:
            for _ in range(200):
                await asyncio.sleep(0)
                if task.done():
                    break
            await self.schedule.settled()
            while not task.done():
                self.clock.advance(1)
                await asyncio.sleep(0)
            await task
        finally:
            task.cancel()  # when the transport fails under it

    def dispatches(self) -> list[ScheduleDispatchChange]:
        return [
            entry.payload
            for entry in self.session.entries
            if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
        ]

    def outboxed(self) -> list[str]:
        """The follow-ups the outbox file holds."""
        if not self.outbox.exists():
            return []
        return cast("list[str]", json.loads(self.outbox.read_text()))


@pytest.fixture(autouse=True)
def _outbox_writes_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, the outbox is written on the loop, one pass each: a step of the loop is then
    the same moment in every run (a worker thread's write takes a number of passes that varies).
    The servers run as processes below write it on their worker threads."""

    async def on_the_loop(
        write: Callable[[Path, list[str]], None], path: Path, texts: list[str]
    ) -> None:
        write(path, texts)
        await asyncio.sleep(0)

    monkeypatch.setattr(mcp_agent, "_off_loop", on_the_loop)


@contextlib.asynccontextmanager
async def _world(directory: Path) -> AsyncIterator[World]:
    """A new session in ``directory``, served live with its outbox there (not yet connected)."""
    clock = FakeClock(START)
    session = await JsonlSessionStore(directory).create(now=clock.now())
    outbox = directory / f"{session.id}{OUTBOX_SUFFIX}"
    agent = PullAgent(clock=clock, outbox=outbox)
    schedule = LiveSchedule(session, agent, clock=clock)
    await schedule.start()
    server = ScheduleMcpServer(schedule, agent, session=session.id)
    try:
        yield World(clock, session, agent, schedule, server, Host(), outbox)
    finally:
        await schedule.close()
        await session.close()


async def _every_step_of_a_cancelled_take(world: World, step: int) -> tuple[bool, bool]:
    """Cancel a take after ``step`` passes of the event loop; say whether it was cancelled, and
    whether the dispatch had been recorded by then."""
    task = asyncio.create_task(world.take())
    for _ in range(step):
        await asyncio.sleep(0)
    cancelled = task.cancel()
    with pytest.raises(asyncio.CancelledError) if cancelled else contextlib.nullcontext():
        await task
    return cancelled, bool(world.dispatches())


async def test_a_take_cancelled_at_any_await_point_loses_nothing(tmp_path: Path) -> None:
    requeued = 0
    writing = 0
    step = 0
    while True:
        async with _world(tmp_path / f"step-{step}") as world, world.connected():
            await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
            await world.run_for(120)

            cancelled, dispatched = await _every_step_of_a_cancelled_take(world, step)
            if cancelled and dispatched:
                # Cancelled after the hand-over: the window under test. The follow-up is either
                # offered again, or its answer was sent and its write decides: until written,
                # it stays undelivered, in the outbox.
                assert world.agent.undelivered != () or world.host.followups() != [], step
                assert world.outboxed() == list(world.agent.undelivered), step
                if world.agent.unclaimed == 1:
                    requeued += 1
                else:
                    writing += 1
            for _ in range(3):
                await world.take_in_time()
            seen = world.host.followups()
            assert len(seen) == 1, (step, seen)
            assert 'prompt: "stretch"' in seen[0].splitlines()
            assert [dispatch.id for dispatch in world.dispatches()] == ["sch_1"]
            assert world.agent.undelivered == ()
            assert not world.outbox.exists()
        if not cancelled:
            break
        step += 1
    assert requeued > 0, "no cancellation fell between the hand-over and the sending"
    assert writing > 0, "no cancellation fell while the answer was being written"


async def test_the_follow_up_leaves_the_outbox_once_its_answer_is_written_and_acknowledged(
    tmp_path: Path,
) -> None:
    async with _world(tmp_path) as world, world.connected():
        await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
        await world.run_for(120)
        world.host.held = True
        task = asyncio.create_task(world.take())
        await world.host.waiting.wait()
        # The transport's writer has the answer and is writing it: not gone out yet.
        (text,) = world.agent.undelivered
        assert 'prompt: "stretch"' in text.splitlines()
        assert world.outboxed() == [text]
        assert [dispatch.id for dispatch in world.dispatches()] == ["sch_1"]
        assert world.host.lines == []
        assert not task.done()
        world.host.release()
        await task
        assert world.host.followups() == [text]
        # Written, not yet acknowledged: the host may have cancelled the take and dropped it.
        assert list(world.agent.undelivered) == [text]
        assert world.outboxed() == [text]
        await world.take_in_time()  # the host's next take acknowledges the one before
        assert world.host.followups() == [text]
        assert not world.agent.undelivered
        assert not world.outbox.exists()


async def test_an_answer_whose_write_fails_stays_in_the_outbox_and_is_offered_again(
    tmp_path: Path,
) -> None:
    async with _world(tmp_path) as world:
        await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
        await world.run_for(120)
        world.host.failures = 1
        with pytest.RaisesGroup(
            pytest.RaisesExc(BrokenPipeError, match=r"^the host closed its end$")
        ):
            async with world.connected():
                await world.take_in_time()
        await world.schedule.settled()
        (text,) = world.agent.undelivered
        assert world.agent.unclaimed == 1
        assert world.outboxed() == [text]
        assert world.host.lines == []
        assert [dispatch.id for dispatch in world.dispatches()] == ["sch_1"]

        async with world.connected():
            await world.take_in_time()
        assert world.host.followups() == [text]
        assert list(world.agent.undelivered) == [text]
        await world.server.acknowledge()  # the host hung up: it kept what it received
        assert [dispatch.id for dispatch in world.dispatches()] == ["sch_1"]
        assert not world.agent.undelivered
        assert not world.outbox.exists()


async def test_a_restart_offers_what_was_handed_over_and_not_sent(tmp_path: Path) -> None:
    clock = FakeClock(START)
    store = JsonlSessionStore(tmp_path)
    session = await store.create(now=clock.now())
    outbox = tmp_path / f"{session.id}{OUTBOX_SUFFIX}"
    agent = PullAgent(clock=clock, outbox=outbox)
    schedule = LiveSchedule(session, agent, clock=clock)
    await schedule.start()
    await schedule.create({"prompt": "stretch", "after_seconds": 60})
    await schedule.settled()
    clock.advance(120)
    await schedule.settled()
    text = await agent.take(timeout=10)  # handed over; the process "dies" before it goes out
    assert text is not None
    await schedule.close()
    await session.close()
    assert json.loads(outbox.read_text()) == [text]

    reopened = await store.open(session.id)
    again = PullAgent(clock=clock, outbox=outbox)
    assert again.undelivered == (text,)
    async with LiveSchedule(reopened, again, clock=clock):
        assert await again.take(timeout=10) == text
        await again.delivered(text)
    await reopened.close()
    assert not outbox.exists()


def test_a_corrupt_outbox_is_reported(tmp_path: Path) -> None:
    outbox = tmp_path / f"s_x{OUTBOX_SUFFIX}"
    outbox.write_text('["a", 1]')
    with pytest.raises(OutboxCorruptError) as raised:
        PullAgent(clock=FakeClock(START), outbox=outbox)
    assert str(raised.value) == (
        f"the outbox of undelivered follow-ups {outbox} is corrupt (Expected `str`, got `int` - "
        "at `$[1]`); move it away to start without it, and any follow-up it held will not be "
        "offered again"
    )


def test_an_outbox_that_is_a_link_a_fifo_a_device_or_too_large_is_refused_unread(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "elsewhere"
    secret.write_text('["not the outbox"]')
    link = tmp_path / f"s_link{OUTBOX_SUFFIX}"
    link.symlink_to(secret)
    fifo = tmp_path / f"s_fifo{OUTBOX_SUFFIX}"
    os.mkfifo(fifo)  # opening it for reading would block without O_NONBLOCK
    zero = tmp_path / f"s_zero{OUTBOX_SUFFIX}"
    zero.symlink_to("/dev/zero")
    expected = {
        link: "it is a symbolic link, not a regular file",
        fifo: "it is a named pipe (FIFO), not a regular file",
        zero: "it is a symbolic link, not a regular file",
        Path("/dev/zero"): "it is a character device, not a regular file",
    }
    for path, reason in expected.items():
        with pytest.raises(OutboxCorruptError) as raised:
            PullAgent(clock=FakeClock(START), outbox=path)
        assert str(raised.value) == (
            f"the outbox of undelivered follow-ups {path} cannot be read ({reason}); move it "
            "away to start without it, and any follow-up it held will not be offered again"
        )
    large = tmp_path / f"s_large{OUTBOX_SUFFIX}"
    with large.open("wb") as file:
        file.truncate(MAX_OUTBOX_BYTES + 1)  # sparse: no disk used
    with pytest.raises(OutboxCorruptError, match=r"more than 67108864\)"):
        PullAgent(clock=FakeClock(START), outbox=large)


async def test_the_outbox_is_written_0600_whatever_the_umask_and_never_through_a_link(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START)
    session = await JsonlSessionStore(tmp_path).create(now=clock.now())
    outbox = tmp_path / f"{session.id}{OUTBOX_SUFFIX}"
    # A link planted where the old code wrote its temporary file.
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (tmp_path / f"{outbox.name}.partial").symlink_to(victim)
    agent = PullAgent(clock=clock, outbox=outbox)
    schedule = LiveSchedule(session, agent, clock=clock)
    await schedule.start()
    old_umask = os.umask(0)
    try:
        await schedule.create({"prompt": "stretch", "after_seconds": 60})
        await schedule.settled()
        clock.advance(120)
        await schedule.settled()
        text = await agent.take(timeout=10)
    finally:
        os.umask(old_umask)
        await schedule.close()
        await session.close()
    assert json.loads(outbox.read_text()) == [text]
    assert outbox.stat().st_mode & 0o777 == 0o600
    assert victim.read_text() == "untouched"
    assert not [path for path in tmp_path.iterdir() if path.name.endswith(".tmp")]


# -- a server killed at random moments -------------------------------------------------------


class Connection:
    """A minimal MCP client over the server's stdin/stdout, to kill the server at any moment."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 0

    async def request(self, method: str, params: dict[str, object]) -> dict[str, object]:
        self.next_id += 1
        await self._write(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        )
        assert self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                raise ConnectionError("the server closed its stdout")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return cast("dict[str, object]", message)

    async def _write(self, message: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def initialize(self) -> None:
        await self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "crash-test", "version": "1"},
            },
        )
        await self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def take_or_cancel(self, *, after: float) -> dict[str, object] | None:
        """A take that is cancelled unless answered within ``after`` seconds: then its answer,
        should it still arrive, is dropped (as the protocol says) and ``None`` returned."""
        self.next_id += 1
        request_id = self.next_id
        params = {"name": TAKE_TOOL, "arguments": {}}
        await self._write(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        )
        assert self.process.stdout is not None
        try:
            line = await asyncio.wait_for(self._answer(request_id), timeout=after)
        except TimeoutError:
            await self._write(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": request_id, "reason": "the user moved on"},
                }
            )
            return None
        result = cast("dict[str, object]", line["result"])
        return cast("dict[str, object]", result["structuredContent"])

    async def _answer(self, request_id: int) -> dict[str, object]:
        """The answer to ``request_id``; earlier answers (to cancelled takes) are dropped."""
        assert self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                raise ConnectionError("the server closed its stdout")
            message = json.loads(line)
            if message.get("id") == request_id:
                return cast("dict[str, object]", message)

    async def call(self, name: str, arguments: dict[str, object]) -> dict[str, object]:
        answer = await self.request("tools/call", {"name": name, "arguments": arguments})
        result = cast("dict[str, object]", answer["result"])
        return cast("dict[str, object]", result["structuredContent"])


async def _start(data_dir: Path, session_id: str, errlog: Path) -> Connection:
    with errlog.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "session_schedule",
            "--data-dir",
            str(data_dir),
            "mcp",
            session_id,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
    connection = Connection(process)
    await connection.initialize()
    return connection


async def test_a_server_killed_at_random_moments_delivers_every_due_reminder(
    tmp_path: Path,
) -> None:
    session = await JsonlSessionStore(tmp_path).create(now=SystemClock().now())
    await session.close()
    errlog = tmp_path / "server-stderr.txt"
    count = 5  # within the follow-up budget of one server's minute
    first = await _start(tmp_path, session.id, errlog)
    for index in range(count):
        created = await first.call("schedule_create", {"prompt": f"r{index}", "after_seconds": 1})
        assert created["ok"] is True
    first.process.kill()
    await first.process.wait()
    await asyncio.sleep(1.5)  # every reminder comes due

    chooser = random.Random(20261129)  # noqa: S311 - moments to kill at, not secrets
    seen: list[str] = []
    kills = 0
    for _ in range(40):
        connection = await _start(tmp_path, session.id, errlog)
        moment = chooser.uniform(0.0, 0.4)

        async def take_all(connection: Connection = connection) -> None:
            while True:
                taken = await connection.call(TAKE_TOOL, {})
                seen.extend(cast("list[str]", taken["occurrenceKeys"]))
                if taken["followup"] is None and not taken["more"]:
                    return

        task = asyncio.create_task(take_all())
        done, _ = await asyncio.wait({task}, timeout=moment)
        if not done:
            os.kill(connection.process.pid, signal.SIGKILL)
            kills += 1
            # The answers already in the pipe are still read, and the take loop fails on its
            # next request, unless the last answer was among them: then it has taken all.
            with contextlib.suppress(ConnectionError):
                await task
            await connection.process.wait()
            continue
        await task
        assert connection.process.stdin is not None
        connection.process.stdin.close()
        assert await connection.process.wait() == 0
        break
    else:
        pytest.fail("the server was killed in every round")

    assert kills > 0
    assert {key.split("@")[0] for key in seen} == {f"sch_{n}" for n in range(1, count + 1)}
    snapshot = await JsonlSessionStore(tmp_path).read(session.id)
    dispatched = [
        entry.payload.id
        for entry in snapshot.entries
        if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
    ]
    assert sorted(dispatched) == sorted(f"sch_{n}" for n in range(1, count + 1))
    assert not (tmp_path / f"{session.id}{OUTBOX_SUFFIX}").exists()
    assert "Traceback" not in errlog.read_text()


# -- a host that cancels its takes -----------------------------------------------------------


async def test_a_take_cancelled_after_its_answer_went_out_is_offered_again(tmp_path: Path) -> None:
    async with _world(tmp_path) as world, world.connected():
        await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
        await world.run_for(120)
        await world.take_in_time()
        (text,) = world.host.followups()
        # The host cancelled take 1 before its answer arrived, and dropped the answer.
        await world.server.cancelled(1)
        assert world.agent.unclaimed == 1
        assert world.outboxed() == [text]
        await world.take_in_time()
        assert world.host.followups() == [text, text]  # a repeat, same occurrence key
        await world.take_in_time()
        assert world.host.followups() == [text, text]
        assert world.agent.undelivered == ()
        assert not world.outbox.exists()
        # A cancel read only after the next take acknowledged it still offers it again.
        await world.server.cancelled(2)
        assert world.outboxed() == [text]
        await world.take_in_time()
        assert world.host.followups() == [text, text, text]
        await world.server.cancelled(999)  # names no take: nothing happens
        await world.server.acknowledge()
        assert not world.outbox.exists()
        assert [dispatch.id for dispatch in world.dispatches()] == ["sch_1"]


async def test_a_take_cancelled_while_its_answer_is_written_is_offered_again(
    tmp_path: Path,
) -> None:
    async with _world(tmp_path) as world, world.connected():
        await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
        await world.run_for(120)
        world.host.held = True
        task = asyncio.create_task(world.take())
        await world.host.waiting.wait()
        await world.server.cancelled(1)
        world.host.release()
        await task
        (text,) = world.host.followups()
        assert world.agent.unclaimed == 1
        await world.take_in_time()
        await world.take_in_time()
        assert world.host.followups() == [text, text]
        assert not world.outbox.exists()


@pytest.mark.parametrize("answered", [True, False])
async def test_a_take_cancelled_before_its_answer_is_sent_is_offered_again(
    tmp_path: Path, *, answered: bool
) -> None:
    """The cancel is read after the take's handler returned: the SDK may still send the answer
    (it had started) or not (it read the cancel in time)."""
    async with _world(tmp_path) as world, world.connected():
        await world.schedule.create({"prompt": "stretch", "after_seconds": 60})
        await world.run_for(120)
        assert world.outgoing is not None
        context = ServerRequestContext[None, object](
            session=cast("ServerSession", Peer()),
            lifespan_context=None,
            protocol_version="2026-07-28",
            method="tools/call",
            request_id=100,
        )
        task = asyncio.create_task(
            world.server._call_tool(context, types.CallToolRequestParams(name=TAKE_TOOL))
        )
        await world.schedule.settled()
        result = await task
        await world.server.cancelled(100)
        if answered:
            response = types.JSONRPCResponse(
                jsonrpc="2.0", id=100, result=result.model_dump(by_alias=True, exclude_none=True)
            )
            await world.outgoing.send(SessionMessage(response))
        assert world.agent.unclaimed == 1
        (text,) = world.agent.undelivered
        await world.take_in_time()
        await world.take_in_time()
        assert world.host.followups()[-1:] == [text]
        assert world.host.followups() == [text] * (2 if answered else 1)
        assert not world.agent.undelivered
        assert not world.outbox.exists()


async def test_a_restart_drops_an_outbox_text_whose_dispatch_was_never_recorded(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START)
    store = JsonlSessionStore(tmp_path)
    session = await store.create(now=clock.now())
    outbox = tmp_path / f"{session.id}{OUTBOX_SUFFIX}"
    async with LiveSchedule(session, PullAgent(clock=clock), clock=clock) as schedule:
        await schedule.create({"prompt": "stretch", "after_seconds": 60})
        clock.advance(120)
        await schedule.settled()
        delivery = await schedule.pending()
        assert delivery is not None
        # Killed after the outbox write and before the dispatch was durable.
        outbox.write_text(json.dumps([schedule.frame(delivery)]))
    await session.close()

    reopened = await store.open(session.id)
    agent = PullAgent(clock=clock, outbox=outbox)
    async with LiveSchedule(reopened, agent, clock=clock) as schedule:
        server = ScheduleMcpServer(schedule, agent, session=session.id)
        await server.drop_redelivered()
        assert agent.undelivered == ()
        assert not outbox.exists()
        task = asyncio.create_task(agent.take(timeout=10))
        await schedule.settled()
        text = await task
        assert text is not None
        assert "occurrence key: sch_1@2026-11-29T20:01:00.000Z" in text.splitlines()
        assert agent.unclaimed == 0
    await reopened.close()


async def test_a_host_that_cancels_takes_at_random_loses_no_reminder(tmp_path: Path) -> None:
    """Takes cancelled at random moments, their late answers dropped as the protocol says, and
    the server killed now and then: every reminder still reaches the host."""
    session = await JsonlSessionStore(tmp_path).create(now=SystemClock().now())
    await session.close()
    errlog = tmp_path / "server-stderr.txt"
    count = 5  # within the follow-up budget of one server's minute
    first = await _start(tmp_path, session.id, errlog)
    for index in range(count):
        created = await first.call("schedule_create", {"prompt": f"r{index}", "after_seconds": 1})
        assert created["ok"] is True
    await asyncio.sleep(1.5)  # every reminder comes due while this server runs

    chooser = random.Random(20261201)  # noqa: S311 - moments to cancel at, not secrets
    seen: set[str] = set()
    cancels = 0
    connection = first
    for round_ in range(60):
        if round_ % 10 == 9:
            os.kill(connection.process.pid, signal.SIGKILL)
            await connection.process.wait()
            connection = await _start(tmp_path, session.id, errlog)
        # The first rounds give up at once, so some takes are cancelled however fast the
        # server answers; the rest give up at random moments around its answer.
        after = 0.0 if round_ < 3 else chooser.uniform(0.0, 0.05)
        kept = await connection.take_or_cancel(after=after)
        if kept is None:
            cancels += 1
            continue
        seen.update(cast("list[str]", kept["occurrenceKeys"]))
        if len(seen) == count:
            break
    assert {key.split("@")[0] for key in seen} == {f"sch_{n}" for n in range(1, count + 1)}
    assert cancels > 0
    assert connection.process.stdin is not None
    connection.process.stdin.close()
    assert await connection.process.wait() == 0
    assert "Traceback" not in errlog.read_text()
