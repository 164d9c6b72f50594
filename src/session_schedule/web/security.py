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
- **Guessing the token.** The right token always gets in: it is compared first, whatever other
  requests came before it. Wrong tokens — guesses — are counted per client in a token bucket
  (:class:`TokenFailures`): past the burst, that client's wrong tokens get 429 with
  ``Retry-After``. A client is an address, except that every loopback address (all of
  ``127.0.0.0/8``, ``::1``) is one client — one machine, so rotating source addresses does not
  multiply the guess rate — and an IPv6 client is its ``/64``. A request with no token at all
  guesses nothing: it gets 401 and spends no budget, so it cannot spend a stale tab's budget
  either. Failures are logged in aggregate — one line per interval with a count — so a flood of
  guesses cannot flood the log.
- **Browsers.** A page load refused for its token (a stale cookie after the server rotated its
  token, say) gets a short HTML page saying what to do, not raw JSON; API requests get JSON.
- **Script injection.** The page sets untrusted text with ``textContent`` only; the
  ``Content-Security-Policy`` below forbids inline script besides.

Every refusal is answered with a JSON error (400 malformed, 401 token, 403 refused, 429 too many
wrong tokens) — or, for a browser loading a page and refused for its token, the HTML page — and
logged on this module's logger in aggregate: refusals of one kind (a foreign ``Host``, say) as
one line per interval with their count and a few client addresses, token failures likewise, so
requests an attacker can repeat at will cannot fill the log.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import ipaddress
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, final
from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.requests import cookie_parser
from starlette.responses import HTMLResponse, RedirectResponse, Response
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

REFUSAL_PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>session-schedule: access token needed</title>
</head><body><h1>This overlay needs its access token</h1><p>{text}</p>
<p>The address with the token is printed by <code>session-schedule serve</code> when it starts,
and kept across restarts unless it was started with <code>--new-token</code>.</p></body></html>
"""
"""The page a browser gets when it loads a page without the right token."""

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
    """Requests without the right access token: a token bucket of wrong tokens per client, and
    the log of every failure — one line per ``interval`` seconds at most, with the count since
    the line before.

    Each client (see :func:`client_key`) may send ``burst`` wrong tokens at once, and then one
    per ``refill_seconds``; a request with no token is logged but spends nothing. At most
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
        tokens = self._tokens(client_key(peer), self._monotonic())
        return None if tokens >= 1 else (1 - tokens) * self._refill

    def failed(self, peer: str, *, limited: bool = False, guess: bool = True) -> None:
        """Count a request from ``peer`` refused for its token: a wrong token (``guess``, which
        spends from its client's bucket), none at all (``guess=False``), or a wrong token over
        the rate limit (``limited``, which spends nothing more)."""
        now = self._monotonic()
        if guess and not limited:
            key = client_key(peer)
            if len(self._buckets) >= self._max_addresses and key not in self._buckets:
                self._forget_full(now)
            self._buckets[key] = (self._tokens(key, now) - 1, now)
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

    def flush(self) -> None:
        """Log the count not logged yet, whatever is left of the interval (a server that
        stops)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._logged_at = None
        self.report()

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

    def _tokens(self, key: str, now: float) -> float:
        found = self._buckets.get(key)
        if found is None:
            return float(self._burst)
        tokens, at = found
        return min(float(self._burst), tokens + (now - at) / self._refill)

    def _forget_full(self, now: float) -> None:
        full = [key for key in self._buckets if self._tokens(key, now) >= self._burst]
        for key in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[key]


@final
class RefusalLog:
    """Refusals before the token check (a foreign ``Host``, a cross-site request, a websocket),
    logged by kind: the first of a kind at once, then at most one line per ``interval`` seconds
    for each kind, with the count since the line before, the first request's method and path
    and up to :data:`MAX_LOGGED_PEERS` client addresses. ``monotonic`` is the clock (seconds)."""

    def __init__(
        self,
        *,
        interval: float = DEFAULT_FAILURE_LOG_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = interval
        self._monotonic = monotonic
        self._pending: dict[str, _Refusals] = {}
        self._logged_at: dict[str, float] = {}
        self._flushes: dict[str, asyncio.TimerHandle] = {}

    def refused(self, kind: str, peer: str, request: str) -> None:
        """Count one refusal of ``kind`` (a sentence without a final full stop) from ``peer``;
        ``request`` is its method and path, already safe for the log."""
        pending = self._pending.get(kind)
        if pending is None:
            pending = self._pending[kind] = _Refusals(request)
        pending.count += 1
        if len(pending.peers) < MAX_LOGGED_PEERS:
            pending.peers[peer] = None
        self.report(kind)

    def report(self, kind: str) -> None:
        """Log ``kind``'s count if its interval is over, else make sure it is logged when it is."""
        pending = self._pending.get(kind)
        if pending is None:
            return
        now = self._monotonic()
        logged_at = self._logged_at.get(kind)
        if logged_at is not None and now - logged_at < self._interval:
            self._report_later(kind, logged_at + self._interval - now)
            return
        more = ", …" if len(pending.peers) >= MAX_LOGGED_PEERS else ""
        logger.warning(
            "refused %d request%s since the last report: %s (first %s; from %s%s)",
            pending.count,
            "" if pending.count == 1 else "s",
            kind,
            pending.first,
            ", ".join(pending.peers),
            more,
        )
        del self._pending[kind]
        self._logged_at[kind] = now

    def flush(self) -> None:
        """Log every kind's count not logged yet, whatever is left of its interval (a server
        that stops)."""
        for handle in self._flushes.values():
            handle.cancel()
        self._flushes.clear()
        for kind in list(self._pending):
            self._logged_at.pop(kind, None)
            self.report(kind)

    def _report_later(self, kind: str, delay: float) -> None:
        if kind in self._flushes:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to wait in: the next refusal reports

        def flush() -> None:
            del self._flushes[kind]
            self.report(kind)

        self._flushes[kind] = loop.call_later(delay, flush)


@dataclass(slots=True)
class _Refusals:
    first: str
    count: int = 0
    peers: dict[str, None] = field(default_factory=dict)


def client_key(peer: str) -> str:
    """The client a token-failure bucket belongs to: every loopback address is one client (one
    machine: rotating across ``127.0.0.0/8`` buys no guesses), an IPv6 address is its ``/64``
    (what one host is given), an IPv4-mapped address is its IPv4 address, any other is itself."""
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return peer
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "loopback"
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


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
    refusals: RefusalLog = field(default_factory=RefusalLog, compare=False)
    """The aggregate log of the refusals before the token check."""


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
    refusals: RefusalLog | None = None,
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
        refusals=refusals or RefusalLog(),
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
            self._refused(scope, "websockets are not served")
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
            self._refused(scope, "the request has no valid Host header")
            return problem_response(400, "the request has no valid Host header.", SECURITY_HEADERS)
        name, port = parsed
        if ANY_HOST not in self._policy.hosts and name not in self._policy.hosts:
            self._refused(scope, "the Host header names a host not served here")
            return problem_response(
                403,
                f"the host name {shorten(name)!r} is not served here; open the overlay through "
                "127.0.0.1 or localhost (or the address the server was started on).",
                SECURITY_HEADERS,
            )
        origin = headers.get("origin")
        if origin is not None:
            own = f"{scope.get('scheme', 'http')}://{host_header.strip().lower()}"
            if origin.lower() != own and origin.lower() not in self._policy.origins:
                self._refused(scope, "the request came from another origin")
                return problem_response(
                    403,
                    f"requests from the origin {shorten(origin)!r} are refused; "
                    "use the overlay's own page.",
                    SECURITY_HEADERS,
                )
        fetch_site = headers.get("sec-fetch-site")
        if path.startswith("/api/") and fetch_site in {"cross-site", "same-site"}:
            self._refused(scope, "the browser marked an API request as from another site")
            return problem_response(
                403,
                "requests from other sites are refused; use the overlay's own page.",
                SECURITY_HEADERS,
            )
        token = self._policy.token
        if token is None:
            return None
        cookie = token_cookie_name(port)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        traded = method == "GET" and path == "/" and TOKEN_QUERY in query
        given = (
            query[TOKEN_QUERY][0]
            if traded
            else _bearer(headers.get("authorization"))
            or cookie_parser(headers.get("cookie", "")).get(cookie)
        )
        # The right token always gets in, whatever wrong ones came before it.
        if given is not None and _same(given, token):
            if not traded:
                return None
            # Trade the token in the address for a cookie, and drop it from the address bar.
            redirect = RedirectResponse("/", status_code=303)
            redirect.set_cookie(cookie, token, httponly=True, samesite="strict", path="/")
            return redirect
        failures = self._policy.failures
        peer = _peer(scope)
        page = _wants_page(method, path, headers)
        if given is None:
            failures.failed(peer, guess=False)
            message = (
                "this server needs its access token; open the address it printed at start "
                "(…/?token=…) or send 'Authorization: Bearer <token>'."
            )
            return _token_refusal(401, message, {"www-authenticate": "Bearer"}, page=page)
        wait = failures.retry_after(peer)
        if wait is not None:
            failures.failed(peer, limited=True)
            seconds = str(math.ceil(wait))
            message = (
                "too many wrong access tokens came from this address; "
                f"wait {seconds} seconds, then use the address the server printed at start."
            )
            return _token_refusal(429, message, {"retry-after": seconds}, page=page)
        failures.failed(peer)
        if traded:
            return _token_refusal(401, "the access token in the address is wrong.", {}, page=page)
        message = (
            "the access token is wrong (the server may have restarted with a new one); open the "
            "address it printed at start (…/?token=…)."
        )
        return _token_refusal(401, message, {"www-authenticate": "Bearer"}, page=page)

    def _refused(self, scope: Scope, kind: str) -> None:
        request = f"{scope.get('method', 'WEBSOCKET')} {loggable(shorten(scope['path']))}"
        self._policy.refusals.refused(kind, _peer(scope), request)


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
    port = rest[1:]
    if not rest.startswith(":") or not (port.isascii() and port.isdigit()) or len(rest) > 6:
        return None
    return name, int(port)


def _bearer(value: str | None) -> str | None:
    if value is None or value[:7].lower() != "bearer ":
        return None
    return value[7:].strip() or None


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _peer(scope: Scope) -> str:
    """The client's address (without its port: one machine, one bucket)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _wants_page(method: str, path: str, headers: Mapping[str, str]) -> bool:
    """Whether the request is a browser loading a page (which is answered in HTML)."""
    if method != "GET" or path.startswith(("/api/", "/static/")):
        return False
    mode = headers.get("sec-fetch-mode")
    if mode is not None:
        return mode == "navigate"
    return "text/html" in headers.get("accept", "")


def _token_refusal(
    status: int,
    message: str,
    headers: Mapping[str, str],
    *,
    page: bool,
) -> Response:
    """A refusal for the token: JSON, or for a browser loading a page, a page saying the same."""
    merged = {**SECURITY_HEADERS, **headers}
    if not page:
        return problem_response(status, message, merged)
    text = html.escape(message[:1].upper() + message[1:])
    body = REFUSAL_PAGE.format(text=text)
    return HTMLResponse(body, status_code=status, headers=merged)
