"""A reminder is never silently lost to a failing model endpoint: the host, the reference
harness and the real OpenAI SDK (over a mock transport) in virtual time.

- the issue's reproduction: the endpoint is down (connection refused) when the reminder comes
  due; the host retries, and the reminder is answered once it comes back, with its attempts;
- an endpoint that fails half of its calls at random (HTTP 503 or a dropped connection) for a
  simulated half hour: no reminder is lost, every turn completes.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
from openai import AsyncOpenAI

from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.harness.model import OpenAIChatModel
from session_schedule.host import HostSettings, ScheduleHost, reference_agents
from session_schedule.runtime.live import Settings
from session_schedule.session.history import occurrence_history
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, MessageEntry
from session_schedule.testing.clock import FakeClock
from session_schedule.testing.session_contract import CHANGE, at_create
from tests.virtual_time import run_for

START = "2026-11-29T20:00:00.000Z"


class Endpoint:
    """An OpenAI-compatible endpoint behind a mock transport: down, up, or failing at random."""

    def __init__(self, *, failure_rate: float = 0.0, seed: int = 19) -> None:
        self.down = False
        self.failure_rate = failure_rate
        self.random = random.Random(seed)  # noqa: S311 - a reproducible test, not a secret
        self.calls = 0
        self.failures = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        if self.down:
            self.failures += 1
            raise httpx2.ConnectError("[Errno 111] Connection refused", request=request)
        if self.random.random() < self.failure_rate:
            self.failures += 1
            if self.random.random() < 0.5:
                raise httpx2.RemoteProtocolError(
                    "the server closed the connection", request=request
                )
            return httpx2.Response(503, json={"error": {"message": "overloaded"}})
        return httpx2.Response(
            200,
            json={
                "id": f"chatcmpl-{self.calls}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "scripted",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "done"},
                        "finish_reason": "stop",
                    }
                ],
            },
        )


@asynccontextmanager
async def hosted(
    data: Path, clock: FakeClock, endpoint: Endpoint, settings: HostSettings
) -> AsyncIterator[ScheduleHost]:
    client = AsyncOpenAI(
        api_key="test",
        base_url="http://127.0.0.1:9/v1",
        max_retries=0,  # the turn queue's policy is the only one measured here
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint.handle)),
    )
    async with client:
        model = OpenAIChatModel(client, "scripted")
        host = ScheduleHost(
            JsonlSessionStore(data), reference_agents(model), clock=clock, settings=settings
        )
        async with host:
            yield host


async def session_with(data: Path, clock: FakeClock, *targets: tuple[int, int]) -> SessionId:
    """A session with ``(number, seconds from now)`` one-shots."""
    async with await JsonlSessionStore(data).create(now=clock.now()) as handle:
        for number, seconds in targets:
            handle.append(CHANGE, at_create(number, Instant(clock.now() + seconds * MS_PER_SECOND)))
        await handle.barrier()
    return handle.id


async def test_the_reproduction_delivers_once_the_endpoint_comes_back(tmp_path: Path) -> None:
    clock = FakeClock(START)
    endpoint = Endpoint()
    endpoint.down = True  # a closed port: every call is refused
    session_id = await session_with(tmp_path, clock, (1, 32))
    settings = HostSettings(schedule=Settings())
    async with hosted(tmp_path, clock, endpoint, settings) as host:
        await run_for(host, clock, 60)
        refused = endpoint.calls
        assert refused >= 3  # due at +32 s, tried at once, then after about 1-2 s and 2-4 s
        assert host.stats.turn_retries == refused
        assert host.stats.turns_failed == 0
        endpoint.down = False  # the endpoint is back
        await run_for(host, clock, 120)
        assert endpoint.calls == refused + 1
        assert host.stats.turns_failed == 0
    _, entries = await JsonlSessionStore(tmp_path).read(session_id)
    [run] = occurrence_history(entries)
    assert (run.outcome, run.attempts, run.failure) == ("delivered", refused + 1, None)
    messages = [e.payload for e in entries if e.type == MESSAGE_ENTRY_TYPE]
    assert all(isinstance(message, MessageEntry) for message in messages)
    # The reminder's frame is in the transcript once, answered once.
    assert [(m.role, m.origin) for m in messages if isinstance(m, MessageEntry)] == [
        ("user", "followup"),
        ("assistant", "model"),
    ]
    print(f"\nreproduction: answered after {refused + 1} attempts ({refused} refused)")


async def test_a_host_against_an_endpoint_failing_half_its_calls_loses_nothing(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START)
    endpoint = Endpoint(failure_rate=0.5)
    sessions = [
        await session_with(tmp_path, clock, *((n, 60 * n + 7 * s) for n in range(1, 6)))
        for s in range(1, 9)
    ]
    async with hosted(tmp_path, clock, endpoint, HostSettings()) as host:
        await run_for(host, clock, 1800)  # a simulated half hour
        assert host.stats.turns_failed == 0
        retries = host.stats.turn_retries
    dispatched = 0
    for session_id in sessions:
        _, entries = await JsonlSessionStore(tmp_path).read(session_id)
        dispatched += sum(
            1
            for e in entries
            if e.type == CHANGE_EVENT_TYPE and isinstance(e.payload, ScheduleDispatchChange)
        )
        runs = occurrence_history(entries)
        assert [run.outcome for run in runs] == ["delivered"] * 5, session_id
    assert dispatched == 40
    assert endpoint.failures == retries
    summary = {
        "reminders": dispatched,
        "lost": 0,
        "calls": endpoint.calls,
        "failed calls": endpoint.failures,
    }
    print(f"\n50 % failing endpoint: {json.dumps(summary)}")
