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
- **Other programs and users.** Loopback is not a trust boundary: any local program, any user of
  a shared machine and any page that gets a request past the checks above can reach it. With a
  token (what ``serve`` does on every address unless told ``--no-token`` on loopback) every
  request carries it: ``Authorization: Bearer <token>``, or the cookie the page receives by
  opening ``/?token=<token>`` once. The cookie is ``HttpOnly``, ``SameSite=Strict``, ``Path=/``
  and named after the port (cookies are shared by every port of a host, so two servers must not
  overwrite each other's). A wildcard bind accepts any ``Host``: the token is what protects it.
- **Guessing the token.** Missing or wrong tokens are counted per client address in a token
  bucket (:class:`TokenFailures`): past the burst, that address gets 429 with ``Retry-After``
  and its token is not even compared. Failures are logged in aggregate — one line per interval
  with a count — so a flood of guesses cannot flood the log.
- **Script injection.** The page sets untrusted text with ``textContent`` only; the
  ``Content-Security-Policy`` below forbids inline script besides.

Every refusal is answered with a JSON error (400 malformed, 401 token, 403 refused, 429 too many
token failures) and logged on this module's logger: each with the method, path and reason, token
failures as a count per interval.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import math
import time
from collections.abc import Callable, Iterable
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
DEFAULT_TOKEN_BURST: Final = 10
"""Token failures an address may have at once …"""
DEFAULT_TOKEN_REFILL_SECONDS: Final = 6.0
"""… and then one per this many seconds (10 a minute)."""
DEFAULT_FAILURE_LOG_SECONDS: Final = 60.0
"""Token failures are logged at most once per this many seconds, as a count."""
MAX_LOGGED_PEERS: Final = 5

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
class TokenFailures:
    """Requests without the right access token: a token bucket per client address, and their
    log — one line per ``interval`` seconds at most, with the count since the line before.

    Each address may fail ``burst`` times at once, and then once per ``refill_seconds``. At most
    ``max_addresses`` buckets are kept (the fullest are forgotten first: they owe nothing).
    ``monotonic`` is the clock (seconds; tests pass their own).
    """

    def __init__(
        self,
        *,
        burst: int = DEFAULT_TOKEN_BURST,
        refill_seconds: float = DEFAULT_TOKEN_REFILL_SECONDS,
        interval: float = DEFAULT_FAILURE_LOG_SECONDS,
        max_addresses: int = 10_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = burst
        self._refill = refill_seconds
        self._interval = interval
        self._max_addresses = max_addresses
        self._monotonic = monotonic
        self._buckets: dict[str, tuple[float, float]] = {}
        self._count = 0
        self._limited = 0
        self._peers: dict[str, None] = {}
        self._logged_at: float | None = None
        self._flush: asyncio.TimerHandle | None = None

    def retry_after(self, peer: str) -> float | None:
        """``None`` when ``peer`` may try a token now, else the seconds until it may."""
        tokens = self._tokens(peer, self._monotonic())
        return None if tokens >= 1 else (1 - tokens) * self._refill

    def failed(self, peer: str, *, limited: bool = False) -> None:
        """Count a request from ``peer`` refused for its token (``limited``: refused by the
        rate limit, before its token was looked at)."""
        now = self._monotonic()
        if not limited:
            if len(self._buckets) >= self._max_addresses and peer not in self._buckets:
                self._forget_full(now)
            self._buckets[peer] = (self._tokens(peer, now) - 1, now)
        self._count += 1
        self._limited += limited
        if len(self._peers) < MAX_LOGGED_PEERS:
            self._peers[peer] = None
        self.report(now)

    def report(self, now: float | None = None) -> None:
        """Log the count since the last line, once ``interval`` has passed since it (the first
        failure is logged at once); otherwise make sure a later report is due."""
        now = self._monotonic() if now is None else now
        if not self._count:
            return
        if self._logged_at is not None and now - self._logged_at < self._interval:
            self._report_later(self._logged_at + self._interval - now)
            return
        peers = ", ".join(self._peers) + (", …" if len(self._peers) >= MAX_LOGGED_PEERS else "")
        plural = "" if self._count == 1 else "s"
        logger.warning(
            "refused %d request%s without the right access token since the last report "
            "(from %s; %d over the rate limit)",
            self._count,
            plural,
            peers,
            self._limited,
        )
        self._count = self._limited = 0
        self._peers.clear()
        self._logged_at = now

    def _report_later(self, delay: float) -> None:
        if self._flush is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to wait in: the next failure reports

        def flush() -> None:
            self._flush = None
            self.report()

        self._flush = loop.call_later(delay, flush)

    def _tokens(self, peer: str, now: float) -> float:
        found = self._buckets.get(peer)
        if found is None:
            return float(self._burst)
        tokens, at = found
        return min(float(self._burst), tokens + (now - at) / self._refill)

    def _forget_full(self, now: float) -> None:
        full = [peer for peer in self._buckets if self._tokens(peer, now) >= self._burst]
        for peer in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[peer]


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
    failures: TokenFailures = field(default_factory=TokenFailures, compare=False)
    """The rate limit and the aggregate log of token failures."""


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
    bind_host: str,
    *,
    token: str | None = None,
    origins: Iterable[str] = (),
    failures: TokenFailures | None = None,
) -> AccessPolicy:
    """The policy of a server bound to ``bind_host``; ``token=None`` is the explicit opt-out
    (``serve --no-token``), for loopback only.

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
        failures=failures or TokenFailures(),
    )


def token_cookie_name(port: int) -> str:
    """The cookie that carries the token for the server on ``port`` (cookies ignore ports)."""
    return f"session_schedule_token_{port}"


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

        refusal = self._check(scope)
        if refusal is not None:  # a refusal, or the redirect that trades a token for a cookie
            await refusal(scope, receive, sending)
            return
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
        failures = self._policy.failures
        peer = _peer(scope)
        wait = failures.retry_after(peer)
        if wait is not None:
            failures.failed(peer, limited=True)
            seconds = str(math.ceil(wait))
            return problem_response(
                429,
                "too many requests without the right access token came from this address; "
                f"wait {seconds} seconds, then use the address the server printed at start.",
                {**SECURITY_HEADERS, "retry-after": seconds},
            )
        cookie = token_cookie_name(port)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if method == "GET" and path == "/" and TOKEN_QUERY in query:
            if not _same(query[TOKEN_QUERY][0], token):
                failures.failed(peer)
                return problem_response(
                    401, "the access token in the address is wrong.", SECURITY_HEADERS
                )
            # Trade the token in the address for a cookie, and drop it from the address bar.
            redirect = RedirectResponse("/", status_code=303)
            redirect.set_cookie(cookie, token, httponly=True, samesite="strict", path="/")
            return redirect
        given = _bearer(headers.get("authorization")) or cookie_parser(
            headers.get("cookie", "")
        ).get(cookie)
        if given is not None and _same(given, token):
            return None
        failures.failed(peer)
        message = (
            "the access token is wrong."
            if given is not None
            else "this server needs its access token; open the address it printed at start "
            "(…/?token=…) or send 'Authorization: Bearer <token>'."
        )
        return problem_response(401, message, {**SECURITY_HEADERS, "www-authenticate": "Bearer"})


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


def _peer(scope: Scope) -> str:
    """The client's address (without its port: one machine, one bucket)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _log_refusal(scope: Scope, reason: str) -> None:
    client = scope.get("client")
    peer = f"{client[0]}:{client[1]}" if client else "unknown peer"
    method = scope.get("method", "WEBSOCKET")
    logger.warning(
        "refused %s %s from %s: %s", method, loggable(shorten(scope["path"])), peer, reason
    )
