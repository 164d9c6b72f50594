"""The overlay's server under hostile load, on real loopback sockets: idle and slow sockets,
slow bodies, malformed requests, failed accepts — bounded loops, and a log that stays small."""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import msgspec
import pytest
from uvicorn.protocols.websockets import auto as websockets_auto

from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.web.app import create_app
from session_schedule.web.security import SECURITY_HEADERS
from session_schedule.web.server import (
    ACCEPT_OUT_OF_RESOURCES,
    IntervalLog,
    Limits,
    OverlayServer,
    bind,
)

WAIT_SECONDS = 15.0
SERVER_LOGGER = "session_schedule.web.server"


@dataclass
class Served:
    port: int
    loop: asyncio.AbstractEventLoop

    def get(self, path: str) -> httpx2.Response:
        with httpx2.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=WAIT_SECONDS) as c:
            return c.get(path)


@contextmanager
def serving(data: Path, limits: Limits, *, body_seconds: float = 10.0) -> Iterator[Served]:
    """The overlay on 127.0.0.1 (an ephemeral port, offline), served by uvicorn in a thread."""
    app = create_app(JsonlSessionStore(data), model=None, body_seconds=body_seconds)
    sock = bind("127.0.0.1", 0)
    server = OverlayServer(app, log_config=False, limits=limits)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=lambda: loop.run_until_complete(server.serve(sockets=[sock])), name="overlay"
    )
    thread.start()
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while not server.started:
            assert thread.is_alive(), "the server thread died while starting"
            assert time.monotonic() < deadline, "the server did not start within 15 s"
            time.sleep(0.02)
        yield Served(sock.getsockname()[1], loop)
    finally:
        server.should_exit = True
        thread.join(WAIT_SECONDS)
        loop.close()
        sock.close()
        assert not thread.is_alive(), "the server thread did not stop within 15 s"


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\0" * 8)
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (within 15 s); what it sent first is ignored."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of the one response the server sends before it closes."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(": ")
        headers[name.lower()] = value
    return int(status_line.split()[1]), headers, body


def server_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == SERVER_LOGGER]


def test_many_idle_sockets_leave_room_for_a_real_request_and_a_small_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    limits = Limits(max_connections=40, head_seconds=30)
    with serving(tmp_path, limits) as served, ExitStack() as stack:
        idle = [stack.enter_context(connect(served.port)) for _ in range(300)]
        response = served.get("/api/info")
        assert response.status_code == 200
        assert response.json()["mode"] == "offline"
        assert served.get("/api/sessions").status_code == 200
        # The server holds 40 connections at most: all but the newest idle ones were closed.
        for sock in idle:
            sock.setblocking(False)
        still_open = 0
        for sock in idle:
            try:
                sock.recv(1)
            except BlockingIOError:
                still_open += 1
            except ConnectionError:
                pass
        assert still_open < 40
    # The first at once, the rest counted: logged as the server stops.
    first, rest = server_lines(caplog)
    assert first == (
        "closed the longest idle connection to make room (40 open) (once since the last report)"
    )
    assert re.fullmatch(
        r"closed the longest idle connection to make room \(40 open\) \(2\d\d times since the "
        r"last report\)",
        rest,
    )
    assert len(caplog.text) < 4000


def test_open_pages_cannot_take_every_connection(tmp_path: Path) -> None:
    """Event streams hold their connection: they have their own limit, half the connections,
    so a request still gets in however many pages are open."""
    limits = Limits(max_connections=20, head_seconds=30)
    with serving(tmp_path, limits) as served, ExitStack() as stack:
        with httpx2.Client(base_url=f"http://127.0.0.1:{served.port}") as client:
            session = client.post("/api/sessions", json={}).json()["session"]["id"]
        statuses: list[int] = []
        for _ in range(30):
            sock = stack.enter_context(connect(served.port))
            sock.sendall(
                f"GET /api/sessions/{session}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
            )
            first = b""
            while b"\r\n" not in first:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                first += chunk
            statuses.append(int(first.split()[1]) if first else 0)
        assert statuses.count(200) == 10
        assert statuses.count(503) == 20
        # Every page is open, and a request is still served.
        response = served.get("/api/info")
        assert response.status_code == 200


def test_idle_and_slow_loris_heads_are_closed_after_the_head_deadline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serving(tmp_path, Limits(head_seconds=0.3)) as served:
        with connect(served.port) as idle, connect(served.port) as slow:
            slow.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            started = time.monotonic()
            assert closed_by_server(idle)
            assert closed_by_server(slow)
            assert time.monotonic() - started < 5
        # A connection that is kept alive gets the same deadline for its next request.
        with connect(served.port) as kept:
            kept.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert kept.recv(65536).startswith(b"HTTP/1.1 200 ")
            kept.sendall(b"GET /api/info HTTP/1.1\r\n")
            assert closed_by_server(kept)
    assert server_lines(caplog) == [
        "closed connections that sent no complete request in time (once since the last report)",
        "closed connections that sent no complete request in time (2 times since the last report)",
    ]


def test_a_slow_body_gets_408_with_the_security_headers(tmp_path: Path) -> None:
    with serving(tmp_path, Limits(), body_seconds=0.3) as served:
        session = msgspec.json.decode(
            httpx2.post(f"http://127.0.0.1:{served.port}/api/sessions", json={}).content
        )["session"]["id"]
        with connect(served.port) as sock:
            sock.sendall(
                f"POST /api/sessions/{session}/prompts HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                '{"text": '.encode()
            )
            started = time.monotonic()
            status, headers, body = answer(sock)
            assert time.monotonic() - started < 3  # closed right after the answer
    assert headers["connection"] == "close"
    assert (status, msgspec.json.decode(body)) == (
        408,
        {"error": "the body did not arrive within 0.3 seconds; send it all at once."},
    )
    for name, value in SECURITY_HEADERS.items():
        assert headers[name] == value


def test_a_request_that_is_not_http_gets_a_json_400_with_the_security_headers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serving(tmp_path, Limits()) as served:
        for _ in range(50):
            with connect(served.port) as sock:
                sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                status, headers, body = answer(sock)
                assert (status, msgspec.json.decode(body)) == (
                    400,
                    {"error": "the request is not valid HTTP/1.1."},
                )
                for name, value in SECURITY_HEADERS.items():
                    assert headers[name] == value
    assert server_lines(caplog) == [
        "uvicorn: Invalid HTTP request received (once since the last report)",
        "uvicorn: Invalid HTTP request received (49 times since the last report)",
    ]
    assert "Invalid HTTP request received" not in "".join(
        r.getMessage() for r in caplog.records if r.name == "uvicorn.error"
    )


def test_failed_accepts_are_logged_once_per_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serving(tmp_path, Limits(log_seconds=0.2)) as served:
        error = OSError(errno.EMFILE, "Too many open files")
        context = {"message": ACCEPT_OUT_OF_RESOURCES, "exception": error}
        for _ in range(1000):
            served.loop.call_soon_threadsafe(served.loop.call_exception_handler, context)
        deadline = time.monotonic() + WAIT_SECONDS
        while len(server_lines(caplog)) < 2:
            assert time.monotonic() < deadline, "the count was not reported"
            time.sleep(0.05)
        assert served.get("/api/info").status_code == 200
    assert server_lines(caplog) == [
        "could not accept connections (Too many open files) (once since the last report)",
        "could not accept connections (Too many open files) (999 times since the last report)",
    ]
    assert "Traceback" not in caplog.text


class _Collect(logging.Handler):
    """The messages logged to the logger it is added to."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def collected(name: str) -> Iterator[tuple[logging.Logger, list[str]]]:
    """The logger ``name`` and the messages logged to it within the block."""
    target = logging.getLogger(name)
    target.addHandler(handler := _Collect())
    try:
        yield target, handler.lines
    finally:
        target.removeHandler(handler)


def test_an_interval_log_reports_counts_per_kind() -> None:
    now = [0.0]
    with collected("tests.web.interval") as (target, lines):
        log = IntervalLog(60, target=target, monotonic=lambda: now[0])
        for _ in range(5):
            log.count("a")
        log.count("b")
        now[0] = 59.9
        log.count("a")
        now[0] = 60
        log.count("a")
        log.report("b")
    assert lines == [
        "a (once since the last report)",
        "b (once since the last report)",
        "a (6 times since the last report)",
    ]


def test_the_connection_limit_stays_below_half_the_descriptor_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import resource  # noqa: PLC0415 - only this test looks at it

    monkeypatch.setattr(resource, "getrlimit", lambda _kind: (256, 4096))
    assert Limits(max_connections=200).connections() == 128
    assert Limits(max_connections=100).connections() == 100


WEBSOCKET_HEADERS = (
    "Connection: Upgrade, close\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
)


def _sent(port: int, head: str, times: int) -> set[int]:
    """The statuses of ``times`` requests with ``head`` (a request line and headers, a
    ``Connection`` header that closes it among them), each on its own connection."""
    statuses: set[int] = set()
    for _ in range(times):
        with connect(port) as sock:
            sock.sendall(f"{head}Host: 127.0.0.1\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
            statuses.add(int(data.split()[1]))
    return statuses


def uvicorn_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("uvicorn")]


def test_refused_websocket_handshakes_are_counted_not_logged_one_line_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with serving(tmp_path, Limits()) as served:
        started = len(uvicorn_lines(caplog))
        # The app refuses every WebSocket (403) and counts it in its refusal log.
        assert _sent(served.port, f"GET /ws HTTP/1.1\r\n{WEBSOCKET_HEADERS}", 100) == {403}
        # A handshake the WebSocket library rejects itself: no key, the wrong version.
        invalid = "GET /ws HTTP/1.1\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n"
        assert _sent(served.port, invalid, 50) == {400}
        # An upgrade to something else is answered as a plain request; uvicorn's warning about
        # it is counted.
        h2c = "GET /api/info HTTP/1.1\r\nConnection: Upgrade, close\r\nUpgrade: h2c\r\n"
        assert _sent(served.port, h2c, 50) == {200}
        during = uvicorn_lines(caplog)[started:]
    assert during == []
    rejected = "uvicorn: rejected WebSocket handshakes that are not valid (400 Bad Request)"
    # The first of each kind at once, the rest as the server stops (in the order of the kinds).
    assert server_lines(caplog) == [
        f"{rejected} (once since the last report)",
        "uvicorn: Unsupported upgrade request (once since the last report)",
        f"{rejected} (49 times since the last report)",
        "uvicorn: Unsupported upgrade request (49 times since the last report)",
    ]
    assert [
        r.getMessage() for r in caplog.records if r.name == "session_schedule.web.security"
    ] == [
        "refused 1 request since the last report: websockets are not served (first WEBSOCKET "
        "/ws; from 127.0.0.1)",
        "refused 99 requests since the last report: websockets are not served (first WEBSOCKET "
        "/ws; from 127.0.0.1)",
    ]


def test_without_a_websocket_library_upgrade_requests_are_counted_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The web extra brings no WebSocket library: uvicorn then answers an upgrade as a plain
    request and warns twice for each — once counted, the advice to install one dropped."""
    monkeypatch.setattr(websockets_auto, "AutoWebSocketsProtocol", None)
    caplog.set_level(logging.INFO)
    with serving(tmp_path, Limits()) as served:
        started = len(uvicorn_lines(caplog))
        assert _sent(served.port, f"GET /api/info HTTP/1.1\r\n{WEBSOCKET_HEADERS}", 100) == {200}
        during = uvicorn_lines(caplog)[started:]
    assert during == []
    assert server_lines(caplog) == [
        "uvicorn: Unsupported upgrade request (once since the last report)",
        "uvicorn: Unsupported upgrade request (99 times since the last report)",
    ]


def test_uvicorn_errors_still_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with serving(tmp_path, Limits()):
        uvicorn_error = logging.getLogger("uvicorn.error")
        uvicorn_error.error("Exception in ASGI application\n")
        uvicorn_error.error('%s - "WebSocket %s" %d', "127.0.0.1:1", "/ws", 500)
        uvicorn_error.warning("something uvicorn has not said before")
    assert [
        r.getMessage() for r in caplog.records if r.name == "uvicorn.error" and r.levelno > 20
    ] == [
        "Exception in ASGI application\n",
        '127.0.0.1:1 - "WebSocket /ws" 500',
        "something uvicorn has not said before",
    ]


async def test_flushing_an_interval_log_reports_what_waits_and_nothing_twice() -> None:
    with collected("tests.web.interval.flush") as (target, lines):
        log = IntervalLog(0.05, target=target)
        for _ in range(3):
            log.count("a")  # the first at once, two waiting for the interval to end
        log.count("b")
        log.flush()
        log.flush()  # nothing waits any more
        await asyncio.sleep(0.2)  # the report the interval had planned was cancelled
    assert lines == [
        "a (once since the last report)",
        "b (once since the last report)",
        "a (2 times since the last report)",
    ]
