"""Serving the overlay with uvicorn: bounded under hostile load, and a stop that never waits on
an open page.

uvicorn stops by closing its listeners and then waiting for every connection to finish its
response — which an event stream never does by itself. :class:`OverlayServer` ends the overlay's
event streams first (the pages reconnect when the server is back), then shuts down as usual; the
app's lifespan then closes the live Sessions.

Left to itself, uvicorn keeps a connection that never sends a request forever and accepts
connections until the process runs out of descriptors — and then logs every failed ``accept``.
:class:`Limits` bounds that:

- **Connections.** At most ``max_connections`` open at once (and never more than half the
  process's descriptor limit). Open pages' event streams, which hold their connection, have their
  own limit in the app (``LiveLimits.max_streams``), lowered here to half the connection limit if
  it is higher: the other half is left to requests, so open pages never shut them out. A
  connection past the limit makes room by closing the one that has been idle (no request under
  way) the longest; when none is idle, the new one is closed at once.
- **Request heads.** A connection must deliver a complete request head within ``head_seconds``
  of opening or of its previous response, else it is closed: idle and slow-loris sockets do not
  pile up. A request's body has its own deadline in the app (408).
- **Logs.** What an attacker can repeat at will — connections closed to make room, refused ones,
  failed ``accept`` calls (``EMFILE``), malformed requests, upgrade requests, WebSocket
  handshakes not valid — is logged as a count, at most once per ``log_seconds`` for each kind.
  uvicorn's own lines for the WebSocket handshakes the app refused are dropped: the app counts
  each in its refusal log (``websockets are not served``). An error always logs.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, final

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from session_schedule.web.app import OverlayApp
from session_schedule.web.security import SECURITY_HEADERS

logger = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_SECONDS: Final = 5
"""A backstop: requests still running this long after a stop begins are cancelled."""
ACCEPT_OUT_OF_RESOURCES: Final = "socket.accept() out of system resource"
"""What asyncio reports when ``accept`` fails for want of descriptors or memory."""
_UVICORN_REPEATS: Final = frozenset(
    {
        "Invalid HTTP request received.",
        "Exceeded concurrency limit.",
        "Unsupported upgrade request.",
    }
)
"""uvicorn's per-request warnings, counted instead of logged."""
_WEBSOCKET_REFUSED: Final = frozenset({'%s - "WebSocket %s" 403', '%s - "WebSocket %s" %d'})
"""uvicorn's line for a WebSocket handshake the app refused (every protocol it has writes it).
The security middleware refuses every WebSocket and counts it in its own refusal log, so these
are dropped, not counted twice."""
_HANDSHAKE_REJECTED: Final = "connection rejected (%d %s)"
"""What the ``websockets`` library writes (through uvicorn's logger) for each handshake it
answers with an error: the app's refusal (403), or one it rejects itself as not valid."""
_NO_WEBSOCKET_LIBRARY: Final = "No supported WebSocket library detected."
"""The start of uvicorn's advice, after each upgrade request, to install a WebSocket library:
beside the point, as the overlay serves no WebSockets."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one overlay server accepts at once, and how long it waits."""

    max_connections: int = 200
    """Open connections at most (event streams included)."""
    head_seconds: float = 10.0
    """How long a connection may take to send a complete request head."""
    keep_alive_seconds: int = 5
    """How long an idle kept-alive connection is kept after a response."""
    backlog: int = 128
    """Connections the kernel queues before the server accepts them."""
    log_seconds: float = 60.0
    """Repeated events of one kind are logged at most once per this many seconds."""

    def connections(self) -> int:
        """:attr:`max_connections`, but never more than half the descriptor limit."""
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return self.max_connections
        return max(1, min(self.max_connections, soft // 2))


@final
class IntervalLog:
    """Counts events by kind and logs each kind at most once per ``interval`` seconds, with the
    count since its last line (the first event of a kind is logged at once)."""

    def __init__(
        self,
        interval: float,
        *,
        target: logging.Logger = logger,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = interval
        self._logger = target
        self._monotonic = monotonic
        self._counts: Counter[str] = Counter()
        self._logged_at: dict[str, float] = {}
        self._flushes: dict[str, asyncio.TimerHandle] = {}

    def count(self, what: str) -> None:
        """One more ``what`` (a sentence naming the event, without a final full stop)."""
        self._counts[what] += 1
        self.report(what)

    def report(self, what: str) -> None:
        """Log ``what``'s count if its interval is over, else make sure it is logged when it is."""
        count = self._counts[what]
        if not count:
            return
        now = self._monotonic()
        logged_at = self._logged_at.get(what)
        if logged_at is not None and now - logged_at < self._interval:
            self._report_later(what, logged_at + self._interval - now)
            return
        times = "once" if count == 1 else f"{count} times"
        self._logger.warning("%s (%s since the last report)", what, times)
        del self._counts[what]
        self._logged_at[what] = now

    def flush(self) -> None:
        """Log every count not logged yet, whatever is left of its interval: what a server that
        stops would otherwise take with it."""
        for handle in self._flushes.values():
            handle.cancel()
        self._flushes.clear()
        for what in list(self._counts):
            self._logged_at.pop(what, None)
            self.report(what)

    def _report_later(self, what: str, delay: float) -> None:
        if what in self._flushes:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to wait in: the next event reports

        def flush() -> None:
            del self._flushes[what]
            self.report(what)

        self._flushes[what] = loop.call_later(delay, flush)


@final
class _RepeatFilter(logging.Filter):
    """Passes uvicorn's per-request lines that a client can repeat at will on to an
    :class:`IntervalLog` instead of the log, and drops its lines for the WebSocket handshakes the
    app refused (the app counts those). An error always logs."""

    def __init__(self, log: IntervalLog) -> None:
        super().__init__()
        self._log = log

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        if record.msg in _WEBSOCKET_REFUSED:
            return False
        if record.msg == _HANDSHAKE_REJECTED and isinstance(record.args, tuple):
            status, *reason = record.args
            if status != 403:  # a 403 is the app's refusal, which it counts
                said = " ".join(str(part) for part in (status, *reason))
                self._log.count(
                    f"uvicorn: rejected WebSocket handshakes that are not valid ({said})"
                )
            return False
        message = record.getMessage()
        if message.startswith(_NO_WEBSOCKET_LIBRARY):
            return False
        if message not in _UVICORN_REPEATS:
            return True
        self._log.count(f"uvicorn: {message.rstrip('.')}")
        return False


def _guarded_protocol(limits: Limits, log: IntervalLog) -> type[H11Protocol]:
    """uvicorn's h11 protocol, with the connection limit and the request-head deadline."""
    max_connections = limits.connections()

    class GuardedProtocol(H11Protocol):
        _idle_since: float
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._await_head()
            if len(self.connections) > max_connections:
                self._make_room()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self._busy():
                self._cancel_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._await_head()

        def send_400_response(self, msg: str) -> None:
            del msg  # uvicorn's text; the page gets the JSON shape of every refusal
            body = b'{"error": "the request is not valid HTTP/1.1."}'
            headers = [
                (b"content-type", b"application/json"),
                (b"connection", b"close"),
                *((name.encode(), value.encode()) for name, value in SECURITY_HEADERS.items()),
            ]
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                output = self.conn.send(event)
                if output:
                    self.transport.write(output)
            self.transport.close()

        def _busy(self) -> bool:
            """Whether a request is under way (its head arrived, its response is not done)."""
            return self.cycle is not None and not self.cycle.response_complete

        def _await_head(self) -> None:
            self._cancel_head_timer()
            self._idle_since = self.loop.time()
            self._head_timer = self.loop.call_later(limits.head_seconds, self._head_late)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            if not self._busy() and not self.transport.is_closing():
                log.count("closed connections that sent no complete request in time")
                self.transport.close()

        def _make_room(self) -> None:
            idle = [
                other
                for other in self.connections
                if isinstance(other, GuardedProtocol)
                and other is not self
                and not other._busy()
                and not other.transport.is_closing()
            ]
            if idle:
                oldest = min(idle, key=lambda other: other._idle_since)
                log.count(
                    f"closed the longest idle connection to make room ({max_connections} open)"
                )
                oldest.transport.close()
                oldest.connections.discard(oldest)
                return
            log.count(f"refused connections: {max_connections} are open and busy")
            self.transport.close()
            self.connections.discard(self)

    return GuardedProtocol


@final
class OverlayServer(uvicorn.Server):
    """A uvicorn server for an :class:`OverlayApp` (one process, no reload, no proxy headers),
    within :class:`Limits`."""

    def __init__(
        self, app: OverlayApp, *, log_config: bool = True, limits: Limits | None = None
    ) -> None:
        limits = limits or Limits()
        self._log = IntervalLog(limits.log_seconds)
        config = uvicorn.Config(
            app,
            http=_guarded_protocol(limits, self._log),
            lifespan="on",
            access_log=False,  # the first request of a token URL carries the token
            proxy_headers=False,
            server_header=False,
            # A backstop behind the connection limit: at most one request is under way on a
            # connection (pipelined ones wait), so this only bounds the extraordinary.
            limit_concurrency=limits.connections() + 1,
            backlog=limits.backlog,
            timeout_keep_alive=limits.keep_alive_seconds,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            log_config=uvicorn.config.LOGGING_CONFIG if log_config else None,
        )
        super().__init__(config)
        self._app = app
        app.streams.limit = min(app.streams.limit, max(1, limits.connections() // 2))
        self._filter = _RepeatFilter(self._log)
        self._fallback: Callable[[asyncio.AbstractEventLoop, dict[str, object]], object] | None = (
            None
        )

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        logging.getLogger("uvicorn.error").addFilter(self._filter)
        loop = asyncio.get_running_loop()
        fallback = self._fallback = loop.get_exception_handler()

        def on_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
            if context.get("message") == ACCEPT_OUT_OF_RESOURCES:
                error = context.get("exception")
                cause = f" ({error.strerror})" if isinstance(error, OSError) else ""
                self._log.count(f"could not accept connections{cause}")
            elif fallback is not None:
                fallback(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(on_loop_error)
        await super().startup(sockets)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._app.sessions.close_streams()
        try:
            await super().shutdown(sockets)
        finally:
            logging.getLogger("uvicorn.error").removeFilter(self._filter)
            asyncio.get_running_loop().set_exception_handler(self._fallback)
            # The counts still waiting for their interval to end are logged now, not lost.
            self._log.flush()
            self._app.policy.failures.flush()
            self._app.policy.refusals.flush()


def bind(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (IPv4 preferred for a name) and listening, with
    ``backlog`` connections queued at most; raises ``OSError``.

    Binding here, before uvicorn starts, gives a clear error for a port in use and the real port
    when ``port`` is 0. Listening here too means the address can be printed at once: a client
    that connects before uvicorn has started waits in the queue instead of being refused.
    """
    infos = socket.getaddrinfo(
        host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, kind, protocol, _, address = infos[0]
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock
