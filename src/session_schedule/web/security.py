"""Who may talk to the overlay: the Host, Origin and token checks, and the headers every answer
carries.

The threats, and what answers each:

- **DNS rebinding.** A page on ``attacker.example``, whose name is made to resolve to
  ``127.0.0.1``, sends requests with ``Host: attacker.example``. Only the names the server is
  bound under are accepted in ``Host`` (the loopback names, plus the bind address).
- **Cross-site requests.** A browser sends ``Origin`` with every cross-origin request and every
  ``POST``, and ``Sec-Fetch-Site`` with every request. An ``Origin`` other than the server's own
  (or one explicitly allowed) is refused, and so is an API request a browser marks
  ``same-site`` or ``cross-site``. Request bodies must be ``application/json``, which a form on
  another site cannot send without a preflight (checked where bodies are read).
- **Other machines.** Bound to anything but loopback, the server wants its access token with
  every request: ``Authorization: Bearer <token>``, or the cookie (``HttpOnly``,
  ``SameSite=Strict``) the page receives by opening ``/?token=<token>`` once. A wildcard bind
  accepts any ``Host``: the token is what protects it.
- **Script injection.** The page sets untrusted text with ``textContent`` only; the
  ``Content-Security-Policy`` below forbids inline script besides.

Every refusal is logged on this module's logger with the method, path and reason, and answered
with a JSON error (400 malformed, 401 token, 403 refused).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, final
from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.requests import cookie_parser
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from session_schedule.web.problems import loggable, problem_response, shorten

logger = logging.getLogger(__name__)

ANY_HOST: Final = "*"
"""In :attr:`AccessPolicy.hosts`: any ``Host`` is accepted (only with a token)."""
LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})
TOKEN_QUERY: Final = "token"  # noqa: S105 - the name of a query parameter

SECURITY_HEADERS: Final = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class AccessPolicy:
    """What the security middleware accepts."""

    hosts: frozenset[str]
    """Host names or addresses (lower-case, no port, IPv6 without brackets) accepted in ``Host``;
    :data:`ANY_HOST` accepts any."""
    origins: frozenset[str] = field(default_factory=frozenset)
    """Origins accepted besides the server's own (``scheme://host:port``, lower-case)."""
    token: str | None = None
    """The access token every request must carry, or ``None`` for none."""


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """Whether ``host`` binds every address of the machine (``0.0.0.0``, ``::``)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def access_policy(
    bind_host: str, *, token: str | None = None, origins: Iterable[str] = ()
) -> AccessPolicy:
    """The policy of a server bound to ``bind_host``.

    Raises ``ValueError`` when ``bind_host`` is not a loopback address and ``token`` is ``None``.
    """
    name = bind_host.strip("[]").lower()
    if token is None and not is_loopback(name):
        raise ValueError(f"binding {bind_host} (not a loopback address) needs an access token")
    hosts = {ANY_HOST} if is_wildcard(name) else {*LOOPBACK_HOSTS, name}
    return AccessPolicy(
        hosts=frozenset(hosts),
        origins=frozenset(origin.lower() for origin in origins),
        token=token,
    )


def token_cookie_name(port: int) -> str:
    """The cookie that carries the token for the server on ``port`` (cookies ignore ports)."""
    return f"session-schedule-token-{port}"


@final
class SecurityMiddleware:
    """Checks every request against an :class:`AccessPolicy` before the app sees it."""

    def __init__(self, app: ASGIApp, *, policy: AccessPolicy) -> None:
        self._app = app
        self._policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            _log_refusal(scope, "websockets are not served")
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        refusal = self._check(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
                headers.setdefault("cache-control", "no-store")
            await send(message)

        try:
            await self._app(scope, receive, sending)
        except Exception:
            logger.exception("%s %s failed", scope["method"], loggable(shorten(scope["path"])))
            if started:
                raise  # too late for an answer: the server drops the connection
            # Answered here, inside the middleware, so the answer carries the headers too.
            await problem_response(
                500, "the server failed to answer; the cause is in its log.", SECURITY_HEADERS
            )(scope, receive, send)

    def _check(self, scope: Scope) -> Response | None:
        """The answer refusing the request, or ``None`` to let it through."""
        headers = _headers(scope)
        method: str = scope["method"]
        path: str = scope["path"]
        host_header = headers.get("host", "")
        parsed = _split_host(host_header)
        if parsed is None:
            return _refuse(scope, 400, "the request has no valid Host header.")
        name, port = parsed
        if ANY_HOST not in self._policy.hosts and name not in self._policy.hosts:
            return _refuse(
                scope,
                403,
                f"the host name {shorten(name)!r} is not served here; open the overlay through "
                "127.0.0.1 or localhost (or the address the server was started on).",
            )
        origin = headers.get("origin")
        if origin is not None:
            own = f"{scope.get('scheme', 'http')}://{host_header.strip().lower()}"
            if origin.lower() != own and origin.lower() not in self._policy.origins:
                return _refuse(
                    scope,
                    403,
                    f"requests from the origin {shorten(origin)!r} are refused; "
                    "use the overlay's own page.",
                )
        fetch_site = headers.get("sec-fetch-site")
        if path.startswith("/api/") and fetch_site in {"cross-site", "same-site"}:
            return _refuse(
                scope, 403, "requests from other sites are refused; use the overlay's own page."
            )
        token = self._policy.token
        if token is None:
            return None
        cookie = token_cookie_name(port)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if method == "GET" and path == "/" and TOKEN_QUERY in query:
            if not _same(query[TOKEN_QUERY][0], token):
                return _refuse(scope, 401, "the access token in the address is wrong.")
            # Trade the token in the address for a cookie, and drop it from the address bar.
            redirect = RedirectResponse("/", status_code=303)
            redirect.set_cookie(cookie, token, httponly=True, samesite="strict", path="/")
            return redirect
        given = _bearer(headers.get("authorization")) or cookie_parser(
            headers.get("cookie", "")
        ).get(cookie)
        if given is None:
            return _refuse(
                scope,
                401,
                "this server needs its access token; open the address it printed at start "
                "(…/?token=…) or send 'Authorization: Bearer <token>'.",
                {"www-authenticate": "Bearer"},
            )
        if not _same(given, token):
            return _refuse(scope, 401, "the access token is wrong.", {"www-authenticate": "Bearer"})
        return None


def _headers(scope: Scope) -> dict[str, str]:
    """The request headers by lower-case name; a repeated header keeps its first value."""
    found: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        found.setdefault(raw_name.decode("latin-1").lower(), raw_value.decode("latin-1"))
    return found


def _split_host(value: str) -> tuple[str, int] | None:
    """``(name, port)`` of a ``Host`` header (port 80 when absent), or ``None`` if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
    else:
        name, separator, port_text = value.partition(":")
        rest = separator + port_text
    if not name or any(character in name for character in "/\\@ ?#"):
        return None
    if not rest:
        return name, 80
    if not rest.startswith(":") or not rest[1:].isdigit() or len(rest) > 6:
        return None
    return name, int(rest[1:])


def _bearer(value: str | None) -> str | None:
    if value is None or value[:7].lower() != "bearer ":
        return None
    return value[7:].strip() or None


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _refuse(
    scope: Scope, status: int, message: str, headers: dict[str, str] | None = None
) -> Response:
    _log_refusal(scope, message)
    return problem_response(status, message, {**SECURITY_HEADERS, **(headers or {})})


def _log_refusal(scope: Scope, reason: str) -> None:
    client = scope.get("client")
    peer = f"{client[0]}:{client[1]}" if client else "unknown peer"
    method = scope.get("method", "WEBSOCKET")
    logger.warning(
        "refused %s %s from %s: %s", method, loggable(shorten(scope["path"])), peer, reason
    )
