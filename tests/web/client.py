"""An in-process client for the overlay's tests: the app with its lifespan, an HTTP client,
raw ASGI requests with exactly the headers given, and a reader of Server-Sent Events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import msgspec
from starlette.types import Message, Scope

from session_schedule.session.ids import SessionId
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionStore
from session_schedule.testing.clock import FakeClock
from session_schedule.web.app import DEFAULT_NEW_SESSIONS, OverlayApp, create_app
from session_schedule.web.limits import Rate
from session_schedule.web.live import LiveLimits
from session_schedule.web.security import AccessPolicy
from tests.web.scripted import QueueModel

START = "2026-11-29T20:00:00.000Z"
BASE = "http://127.0.0.1:8765"
HOST = b"127.0.0.1:8765"


@dataclass
class Overlay:
    app: OverlayApp
    client: httpx2.AsyncClient
    clock: FakeClock

    async def new_session(self) -> str:
        response = await self.client.post("/api/sessions", json={})
        assert response.status_code == 201
        session_id: str = response.json()["session"]["id"]
        return session_id

    async def settle(self, session_id: str) -> None:
        """Wait until the session's agent is idle and its Schedule is parked (15 s at most)."""
        live = await self.app.sessions.get(SessionId(session_id))
        async with asyncio.timeout(15):
            for _ in range(3):
                await live.chat.agent.wait_idle()
                await live.chat.schedule.settled()

    async def turns(self, session_id: str) -> list[dict[str, Any]]:
        response = await self.client.get(f"/api/sessions/{session_id}")
        assert response.status_code == 200
        turns: list[dict[str, Any]] = response.json()["turns"]
        return turns

    async def messages(self, session_id: str) -> list[dict[str, Any]]:
        return [turn["message"] for turn in await self.turns(session_id)]


@asynccontextmanager
async def open_overlay(
    store: SessionStore | None = None,
    *,
    model: QueueModel | None = None,
    policy: AccessPolicy | None = None,
    clock: FakeClock | None = None,
    base_url: str = BASE,
    heartbeat_seconds: float = 15.0,
    body_seconds: float = 10.0,
    live_limits: LiveLimits | None = None,
    new_sessions: Rate = DEFAULT_NEW_SESSIONS,
    monotonic: Callable[[], float] = time.monotonic,
) -> AsyncIterator[Overlay]:
    clock = clock or FakeClock(START)
    factory: Callable[[], QueueModel] | None = (lambda: model) if model is not None else None
    app = create_app(
        store or MemorySessionStore(),
        model=factory,
        clock=clock,
        policy=policy,
        heartbeat_seconds=heartbeat_seconds,
        body_seconds=body_seconds,
        live_limits=live_limits,
        new_sessions=new_sessions,
        monotonic=monotonic,
    )
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=base_url) as client:
            yield Overlay(app, client, clock)


@dataclass
class Event:
    event: str
    id: str | None
    data: bytes


class SseStream:
    """Runs one streaming request against the app and parses the Server-Sent Events it sends
    (the in-process HTTP client buffers whole responses, so it cannot read a stream)."""

    def __init__(
        self, app: OverlayApp, path: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        target, _, query = path.partition("?")
        self._scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": target,
            "raw_path": target.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(b"host", HOST), *(headers or [])],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8765),
        }
        self._app = app
        self._disconnect = asyncio.Event()
        self._requested = False
        self._buffer = b""
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> SseStream:
        self._task = asyncio.create_task(self._app(self._scope, self._receive, self._send))
        async with asyncio.timeout(15):
            while self.status is None:
                await asyncio.sleep(0)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self._disconnect.set()
        assert self._task is not None
        async with asyncio.timeout(15):
            await self._task

    async def _receive(self) -> Message:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._disconnect.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            self._chunks.put_nowait(message.get("body", b""))
            if not message.get("more_body", False):
                self._chunks.put_nowait(None)

    async def body(self) -> bytes:
        """The whole body of a response that ends (a refusal)."""
        parts = []
        async with asyncio.timeout(15):
            while (chunk := await self._chunks.get()) is not None:
                parts.append(chunk)
        return b"".join(parts)

    async def next_event(self) -> Event:
        """The next event (comments and the retry field are skipped); fails after 15 s."""
        async with asyncio.timeout(15):
            while True:
                while b"\n\n" not in self._buffer:
                    chunk = await self._chunks.get()
                    if chunk is None:
                        raise EOFError("the stream ended")
                    self._buffer += chunk
                block, self._buffer = self._buffer.split(b"\n\n", 1)
                fields: dict[str, bytes] = {}
                for line in block.split(b"\n"):
                    name, _, value = line.partition(b": ")
                    fields[name.decode()] = value
                if "event" in fields:
                    raw_id = fields.get("id")
                    return Event(
                        event=fields["event"].decode(),
                        id=raw_id.decode() if raw_id is not None else None,
                        data=fields["data"],
                    )

    async def next_raw(self) -> bytes:
        """The next block as sent (comments included)."""
        async with asyncio.timeout(15):
            while b"\n\n" not in self._buffer:
                chunk = await self._chunks.get()
                if chunk is None:
                    raise EOFError("the stream ended")
                self._buffer += chunk
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            return block


async def send_raw(
    app: OverlayApp,
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    *,
    host: bytes | None = HOST,
    scope_type: str = "http",
    more_body: bool = False,
    client: str = "127.0.0.1",
) -> tuple[int, dict[str, Any] | None]:
    """One request straight through ASGI with exactly ``headers``, plus ``host`` unless it is
    ``None``, from the address ``client``: the status (or a websocket close code) and the
    decoded JSON body (``None`` for an empty or HTML one). With ``more_body``, the client sends
    ``body`` and then nothing more (a stalled upload)."""
    sent: list[Message] = []
    done = False
    path, _, query = path.partition("?")

    async def receive() -> Message:
        nonlocal done
        if done:
            await asyncio.sleep(3600)
        done = True
        if scope_type == "websocket":
            return {"type": "websocket.connect"}
        return {"type": "http.request", "body": body, "more_body": more_body}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": scope_type,
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http" if scope_type == "http" else "ws",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [*([(b"host", host)] if host is not None else []), *headers],
        "client": (client, 50000),
        "server": ("127.0.0.1", 8765),
    }
    if scope_type == "websocket":
        del scope["method"]  # websocket scopes have none
    async with asyncio.timeout(15):
        await app(scope, receive, send)
    if scope_type == "websocket":
        return int(sent[0]["code"]), None
    status = int(sent[0]["status"])
    payload = b"".join(m.get("body", b"") for m in sent[1:])
    json_body = payload and payload[:1] == b"{"
    return status, msgspec.json.decode(payload) if json_body else None
