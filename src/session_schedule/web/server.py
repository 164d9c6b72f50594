"""Serving the overlay with uvicorn, so that a stop never waits on an open page.

uvicorn stops by closing its listeners and then waiting for every connection to finish its
response — which an event stream never does by itself. :class:`OverlayServer` ends the overlay's
event streams first (the pages reconnect when the server is back), then shuts down as usual; the
app's lifespan then closes the live Sessions.
"""

from __future__ import annotations

import socket
from typing import Final, final

import uvicorn

from session_schedule.web.app import OverlayApp

GRACEFUL_SHUTDOWN_SECONDS: Final = 5
"""A backstop: requests still running this long after a stop begins are cancelled."""


@final
class OverlayServer(uvicorn.Server):
    """A uvicorn server for an :class:`OverlayApp` (one process, no reload, no proxy headers)."""

    def __init__(self, app: OverlayApp, *, log_config: bool = True) -> None:
        config = uvicorn.Config(
            app,
            lifespan="on",
            access_log=False,  # the first request of a token URL carries the token
            proxy_headers=False,
            server_header=False,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            log_config=uvicorn.config.LOGGING_CONFIG if log_config else None,
        )
        super().__init__(config)
        self._app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._app.sessions.close_streams()
        await super().shutdown(sockets)


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (IPv4 preferred for a name); raises ``OSError``.

    Binding here, before uvicorn starts, gives a clear error for a port in use and the real port
    when ``port`` is 0.
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
    except BaseException:
        sock.close()
        raise
    return sock
