"""The overlay's Host, Origin and token checks: every refusal is clear, JSON and logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from session_schedule.web.security import (
    ANY_HOST,
    LOOPBACK_HOSTS,
    SECURITY_HEADERS,
    AccessPolicy,
    RefusalLog,
    TokenFailures,
    access_policy,
    client_key,
    is_loopback,
    is_wildcard,
    token_cookie_name,
)
from tests.web.client import Overlay, open_overlay, send_raw

TOKEN = "s3cret-token-for-tests"  # noqa: S105
ORIGIN = "http://127.0.0.1:8765"
SECURITY_LOGGER = "session_schedule.web.security"


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == SECURITY_LOGGER and record.levelno == logging.WARNING
    ]


@pytest.fixture
async def overlay() -> AsyncIterator[Overlay]:
    async with open_overlay() as opened:
        yield opened


class Ticks:
    """A monotonic clock for the token-failure limiter, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture
async def guarded(ticks: Ticks) -> AsyncIterator[Overlay]:
    policy = access_policy("192.168.7.7", token=TOKEN, failures=TokenFailures(monotonic=ticks))
    async with open_overlay(policy=policy) as opened:
        yield opened


def refusal_line(kind: str, first: str, count: int = 1, peers: str = "127.0.0.1") -> str:
    plural = "" if count == 1 else "s"
    return (
        f"refused {count} request{plural} since the last report: {kind} "
        f"(first {first}; from {peers})"
    )


def failure_line(count: int, limited: int = 0, peers: str = "127.0.0.1") -> str:
    plural = "" if count == 1 else "s"
    return (
        f"refused {count} request{plural} without the right access token since the last report "
        f"(from {peers}; {limited} over the rate limit)"
    )


# -- Host: no DNS rebinding --------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"])
async def test_the_loopback_names_are_served(overlay: Overlay, host: str) -> None:
    response = await overlay.client.get("/api/sessions", headers={"host": host})
    assert response.status_code == 200


async def test_a_foreign_host_name_is_refused_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_overlay(base_url="http://rebound.example:8765") as overlay:
        response = await overlay.client.get("/api/sessions")
        page = await overlay.client.get("/")
    message = (
        "the host name 'rebound.example' is not served here; open the overlay through "
        "127.0.0.1 or localhost (or the address the server was started on)."
    )
    assert (response.status_code, response.json()) == (403, {"error": message})
    assert page.status_code == 403
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value
    # One line for both: the second is counted until the interval is over.
    assert refusals(caplog) == [
        refusal_line("the Host header names a host not served here", "GET /api/sessions")
    ]


async def test_refusals_before_the_token_check_are_logged_as_a_count_per_interval(
    caplog: pytest.LogCaptureFixture, ticks: Ticks
) -> None:
    log = RefusalLog(monotonic=ticks)
    policy = access_policy("127.0.0.1", refusals=log)
    async with open_overlay(policy=policy, base_url="http://rebound.example:8765") as overlay:
        for _ in range(500):
            status, _ = await send_raw(overlay.app, "GET", "/api/sessions", [], host=b"x.example")
            assert status == 403
        await send_raw(overlay.app, "GET", "/", [], scope_type="websocket")
        ticks.now += 60
        log.report("the Host header names a host not served here")
    host_kind = "the Host header names a host not served here"
    assert refusals(caplog) == [
        refusal_line(host_kind, "GET /api/sessions", peers="127.0.0.1"),
        refusal_line("websockets are not served", "WEBSOCKET /", peers="127.0.0.1"),
        refusal_line(host_kind, "GET /api/sessions", count=499, peers="127.0.0.1"),
    ]


@pytest.mark.parametrize(
    "host",
    [
        None,
        b"",
        b"127.0.0.1:abc",
        b"127.0.0.1:",
        b"[::1",
        b"[::1]x",
        b"a b:1",
        b"x@127.0.0.1",
        b"127.0.0.1:\xb2",  # a superscript two: a digit to str.isdigit, not to int()
    ],
)
async def test_a_missing_or_malformed_host_is_400(
    overlay: Overlay, caplog: pytest.LogCaptureFixture, host: bytes | None
) -> None:
    status, body = await send_raw(overlay.app, "GET", "/api/sessions", [], host=host)
    assert (status, body) == (400, {"error": "the request has no valid Host header."})
    assert refusals(caplog) == [
        refusal_line("the request has no valid Host header", "GET /api/sessions")
    ]


# -- Origin and Sec-Fetch-Site: no cross-site requests -----------------------------------------


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "null", "http://localhost:8765", "https://127.0.0.1:8765"]
)
async def test_a_post_from_another_origin_is_refused_and_logged(
    overlay: Overlay, caplog: pytest.LogCaptureFixture, origin: str
) -> None:
    response = await overlay.client.post("/api/sessions", json={}, headers={"origin": origin})
    message = f"requests from the origin {origin!r} are refused; use the overlay's own page."
    assert (response.status_code, response.json()) == (403, {"error": message})
    assert refusals(caplog) == [
        refusal_line("the request came from another origin", "POST /api/sessions")
    ]
    assert (await overlay.client.get("/api/sessions")).json() == {"sessions": [], "unreadable": []}


async def test_a_post_from_the_page_itself_is_served(overlay: Overlay) -> None:
    response = await overlay.client.post(
        "/api/sessions",
        json={},
        headers={"origin": ORIGIN, "sec-fetch-site": "same-origin"},
    )
    assert response.status_code == 201


async def test_an_origin_the_policy_allows_is_served() -> None:
    policy = access_policy("127.0.0.1", origins=["http://Tools.Example:3000"])
    async with open_overlay(policy=policy) as overlay:
        allowed = await overlay.client.post(
            "/api/sessions", json={}, headers={"origin": "http://tools.example:3000"}
        )
        assert allowed.status_code == 201


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
async def test_api_requests_a_browser_marks_as_from_another_site_are_refused(
    overlay: Overlay, caplog: pytest.LogCaptureFixture, site: str
) -> None:
    response = await overlay.client.get("/api/sessions", headers={"sec-fetch-site": site})
    message = "requests from other sites are refused; use the overlay's own page."
    assert (response.status_code, response.json()) == (403, {"error": message})
    assert refusals(caplog) == [
        refusal_line("the browser marked an API request as from another site", "GET /api/sessions")
    ]
    # Following a link to the page itself is fine.
    page = await overlay.client.get("/", headers={"sec-fetch-site": site})
    assert page.status_code == 200


async def test_a_path_that_would_forge_a_log_line_is_logged_quoted(
    overlay: Overlay, caplog: pytest.LogCaptureFixture
) -> None:
    status, _ = await send_raw(overlay.app, "GET", "/x\nINFO forged", [], host=b"evil.example")
    assert status == 403
    assert "(first GET '/x\\nINFO forged'; from 127.0.0.1)" in refusals(caplog)[0]
    assert "\nINFO forged" not in caplog.text


async def test_websockets_are_refused_and_logged(
    overlay: Overlay, caplog: pytest.LogCaptureFixture
) -> None:
    code, _ = await send_raw(overlay.app, "GET", "/api/sessions", [], scope_type="websocket")
    assert code == 1008
    assert refusals(caplog) == [
        refusal_line("websockets are not served", "WEBSOCKET /api/sessions")
    ]


# -- the access token --------------------------------------------------------------------------


async def test_without_the_token_every_request_is_401_and_counted_in_one_line(
    guarded: Overlay, caplog: pytest.LogCaptureFixture, ticks: Ticks
) -> None:
    message = (
        "this server needs its access token; open the address it printed at start "
        "(…/?token=…) or send 'Authorization: Bearer <token>'."
    )
    for path in ("/", "/api/sessions", "/static/app.js"):
        response = await guarded.client.get(path)
        assert (response.status_code, response.json()) == (401, {"error": message})
        assert response.headers["www-authenticate"] == "Bearer"
    posted = await guarded.client.post("/api/sessions", json={})
    assert posted.status_code == 401
    # The first failure is logged at once; the next ones are counted until the interval is over.
    assert refusals(caplog) == [failure_line(1)]
    ticks.now += 60
    assert (await guarded.client.get("/api/sessions")).status_code == 401
    assert refusals(caplog) == [failure_line(1), failure_line(4)]


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": "Bearer wrong-token-value"},
        {"authorization": f"Basic {TOKEN}"},
        {"cookie": f"{token_cookie_name(8765)}=wrong"},
        {"cookie": f"{token_cookie_name(9999)}={TOKEN}"},  # another server's cookie
    ],
)
async def test_a_wrong_token_is_401(
    guarded: Overlay, caplog: pytest.LogCaptureFixture, headers: dict[str, str]
) -> None:
    response = await guarded.client.get("/api/sessions", headers=headers)
    assert response.status_code == 401
    assert refusals(caplog) == [failure_line(1)]
    assert TOKEN not in caplog.text


async def test_the_token_as_a_bearer_header_is_accepted(guarded: Overlay) -> None:
    headers = {"authorization": f"Bearer {TOKEN}"}
    assert (await guarded.client.get("/api/sessions", headers=headers)).status_code == 200
    created = await guarded.client.post("/api/sessions", json={}, headers=headers)
    assert created.status_code == 201


async def test_the_token_in_the_address_is_traded_for_a_strict_cookie(
    guarded: Overlay, caplog: pytest.LogCaptureFixture
) -> None:
    response = await guarded.client.get(f"/?token={TOKEN}")
    assert response.status_code == 303
    assert response.headers["location"] == "/"
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value
    assert response.headers["cache-control"] == "no-store"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{token_cookie_name(8765)}={TOKEN};")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/" in cookie
    # The client keeps the cookie: the page and the API now work without a header.
    assert (await guarded.client.get("/")).status_code == 200
    assert (await guarded.client.post("/api/sessions", json={})).status_code == 201
    assert refusals(caplog) == []


async def test_a_wrong_token_in_the_address_is_401_and_not_logged(
    guarded: Overlay, caplog: pytest.LogCaptureFixture
) -> None:
    response = await guarded.client.get("/?token=guess")
    assert (response.status_code, response.json()) == (
        401,
        {"error": "the access token in the address is wrong."},
    )
    assert refusals(caplog) == [failure_line(1)]
    assert "guess" not in caplog.text


async def test_wrong_tokens_are_rate_limited_per_client_then_429_with_retry_after(
    guarded: Overlay, caplog: pytest.LogCaptureFixture, ticks: Ticks
) -> None:
    wrong = {"authorization": "Bearer wrong-token-value"}
    right = {"authorization": f"Bearer {TOKEN}"}
    for _ in range(10):
        assert (await guarded.client.get("/api/sessions", headers=wrong)).status_code == 401
    limited = await guarded.client.get("/api/sessions", headers=wrong)
    assert (limited.status_code, limited.json()) == (
        429,
        {
            "error": "too many wrong access tokens came from this address; "
            "wait 6 seconds, then use the address the server printed at start."
        },
    )
    assert limited.headers["retry-after"] == "6"
    for name, value in SECURITY_HEADERS.items():
        assert limited.headers[name] == value
    # The right token still gets in, at once, from the same address.
    assert (await guarded.client.get("/api/sessions", headers=right)).status_code == 200
    # Another loopback address is the same machine: no fresh budget for it.
    status, _ = await send_raw(
        guarded.app, "GET", "/api/sessions", [(b"authorization", b"Bearer x")], client="127.9.9.9"
    )
    assert status == 429
    ticks.now += 3
    assert (await guarded.client.get("/api/sessions", headers=wrong)).headers["retry-after"] == "3"
    ticks.now += 3
    assert (await guarded.client.get("/api/sessions", headers=wrong)).status_code == 401
    ticks.now += 60
    assert (await guarded.client.get("/api/sessions", headers=wrong)).status_code == 401
    assert refusals(caplog) == [
        failure_line(1),
        failure_line(14, limited=3, peers="127.0.0.1, 127.9.9.9"),
    ]


async def test_a_stranger_sending_no_token_or_wrong_ones_cannot_lock_the_owner_out(
    guarded: Overlay,
) -> None:
    right = {"authorization": f"Bearer {TOKEN}"}
    owner = await guarded.client.get(f"/?token={TOKEN}")
    assert owner.status_code == 303
    for attempt in range(300):
        # Every loopback address, and no token or a wrong one: the owner's requests still pass.
        client = f"127.{attempt % 7}.{attempt % 5}.{attempt % 251 + 1}"
        headers = [] if attempt % 2 else [(b"authorization", b"Bearer guess")]
        status, _ = await send_raw(guarded.app, "GET", "/api/sessions", headers, client=client)
        assert status in {401, 429}
        assert (await guarded.client.get("/api/sessions", headers=right)).status_code == 200
        assert (await guarded.client.get("/")).status_code == 200  # the cookie


async def test_requests_without_a_token_spend_no_guesses(guarded: Overlay) -> None:
    """A tab with a stale cookie keeps its own budget whatever token-less requests come."""
    for _ in range(100):
        status, _ = await send_raw(guarded.app, "GET", "/api/sessions", [])
        assert status == 401
    stale = {"cookie": f"{token_cookie_name(8765)}=stale-token-of-the-last-start"}
    assert (await guarded.client.get("/api/sessions", headers=stale)).status_code == 401


async def test_one_clients_guesses_do_not_spend_anothers_budget(guarded: Overlay) -> None:
    guess = [(b"authorization", b"Bearer guess")]
    for _ in range(10):
        assert (await send_raw(guarded.app, "GET", "/", guess, client="10.0.0.1"))[0] == 401
    assert (await send_raw(guarded.app, "GET", "/", guess, client="10.0.0.1"))[0] == 429
    assert (await send_raw(guarded.app, "GET", "/", guess, client="10.0.0.2"))[0] == 401
    # An IPv6 host is its /64: rotating the interface identifier buys nothing.
    for suffix in range(10):
        client = f"2001:db8:1:2::{suffix + 1:x}"
        assert (await send_raw(guarded.app, "GET", "/", guess, client=client))[0] == 401
    assert (await send_raw(guarded.app, "GET", "/", guess, client="2001:db8:1:2::ff"))[0] == 429
    assert (await send_raw(guarded.app, "GET", "/", guess, client="2001:db8:1:3::1"))[0] == 401


@pytest.mark.parametrize(
    ("peer", "key"),
    [
        ("127.0.0.1", "loopback"),
        ("127.200.3.4", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.5", "loopback"),
        ("::ffff:10.1.2.3", "10.1.2.3"),
        ("10.1.2.3", "10.1.2.3"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("unknown", "unknown"),
    ],
)
def test_token_failures_are_counted_per_client(peer: str, key: str) -> None:
    assert client_key(peer) == key


async def test_a_browser_loading_the_page_with_a_stale_token_gets_a_page_saying_what_to_do(
    guarded: Overlay,
) -> None:
    browser = {
        "cookie": f"{token_cookie_name(8765)}=stale-token-of-the-last-start",
        "accept": "text/html,application/xhtml+xml,*/*;q=0.8",
        "sec-fetch-mode": "navigate",
    }
    response = await guarded.client.get("/", headers=browser)
    assert response.status_code == 401
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert (
        "<p>The access token is wrong (the server may have restarted with a new one); open the "
        "address it printed at start (…/?token=…).</p>" in response.text
    )
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value
    # No cookie at all, and a wrong token in the address: pages too.
    bare = await guarded.client.get("/", headers={"accept": "text/html"})
    assert bare.headers["content-type"] == "text/html; charset=utf-8"
    assert "This server needs its access token" in bare.text
    wrong = await guarded.client.get("/?token=guess", headers={"sec-fetch-mode": "navigate"})
    assert "<p>The access token in the address is wrong.</p>" in wrong.text
    # The page's own API calls get JSON, which the page shows.
    api = await guarded.client.get("/api/sessions", headers=browser)
    assert api.headers["content-type"] == "application/json"


async def test_a_flood_of_wrong_tokens_from_many_addresses_logs_one_line_per_interval(
    caplog: pytest.LogCaptureFixture, ticks: Ticks
) -> None:
    failures = TokenFailures(monotonic=ticks, max_addresses=100)
    policy = access_policy("192.168.7.7", token=TOKEN, failures=failures)
    async with open_overlay(policy=policy) as overlay:
        for attempt in range(1000):
            scope_client = f"10.0.{attempt // 250}.{attempt % 250}"
            failures.failed(scope_client)
        status, _ = await send_raw(overlay.app, "GET", "/", [])
        assert status == 401
        ticks.now += 60
        failures.report()
    assert refusals(caplog) == [
        failure_line(1, peers="10.0.0.0"),
        failure_line(1000, peers="10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5, …"),
    ]


async def test_the_failure_count_is_reported_when_the_interval_ends_even_if_all_is_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = TokenFailures(interval=0.05)
    failures.failed("10.1.1.1")
    failures.failed("10.1.1.1")
    assert refusals(caplog) == [failure_line(1, peers="10.1.1.1")]
    async with asyncio.timeout(15):
        while len(refusals(caplog)) < 2:
            await asyncio.sleep(0.01)
    assert refusals(caplog)[1] == failure_line(1, peers="10.1.1.1")


async def test_flushing_the_refusal_logs_reports_what_waits_and_nothing_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = TokenFailures(interval=0.05)
    log = RefusalLog(interval=0.05)
    for _ in range(3):
        failures.failed("10.1.1.1")
        log.refused("the Host header names a host not served here", "10.1.1.1", "GET /")
    failures.flush()
    log.flush()
    failures.flush()
    log.flush()
    await asyncio.sleep(0.2)  # the reports the intervals had planned were cancelled
    kind = "the Host header names a host not served here"
    assert refusals(caplog) == [
        failure_line(1, peers="10.1.1.1"),
        refusal_line(kind, "GET /", peers="10.1.1.1"),
        failure_line(2, peers="10.1.1.1"),
        refusal_line(kind, "GET /", count=2, peers="10.1.1.1"),
    ]


def test_the_token_cookie_is_named_after_the_port() -> None:
    assert token_cookie_name(8765) == "session_schedule_token_8765"


async def test_a_token_server_still_checks_the_host() -> None:
    policy = access_policy("192.168.7.7", token=TOKEN)
    async with open_overlay(policy=policy, base_url="http://rebound.example:8765") as overlay:
        response = await overlay.client.get(
            "/api/sessions", headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert response.status_code == 403
    async with open_overlay(policy=policy, base_url="http://192.168.7.7:8765") as overlay:
        response = await overlay.client.get(
            "/api/sessions", headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert response.status_code == 200


async def test_a_wildcard_server_takes_any_host_but_only_with_the_token() -> None:
    policy = access_policy("0.0.0.0", token=TOKEN)  # noqa: S104 - the point of the test
    assert policy.hosts == frozenset({ANY_HOST})
    async with open_overlay(policy=policy, base_url="http://my-laptop.lan:8765") as overlay:
        assert (await overlay.client.get("/api/sessions")).status_code == 401
        response = await overlay.client.get(
            "/api/sessions", headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert response.status_code == 200


# -- the policy --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback", "wildcard"),
    [
        ("127.0.0.1", True, False),
        ("127.0.0.2", True, False),
        ("localhost", True, False),
        ("::1", True, False),
        ("[::1]", True, False),
        ("0.0.0.0", False, True),  # noqa: S104
        ("::", False, True),
        ("192.168.7.7", False, False),
        ("my-laptop.lan", False, False),
    ],
)
def test_loopback_and_wildcard_addresses(host: str, loopback: bool, wildcard: bool) -> None:
    assert (is_loopback(host), is_wildcard(host)) == (loopback, wildcard)


def test_only_loopback_goes_without_a_token() -> None:
    assert access_policy("127.0.0.1") == AccessPolicy(hosts=LOOPBACK_HOSTS)
    with pytest.raises(ValueError, match=r"binding 0\.0\.0\.0 \(not a loopback address\)"):
        access_policy("0.0.0.0")  # noqa: S104
    with pytest.raises(ValueError, match="needs an access token"):
        access_policy("192.168.7.7")
    assert access_policy("192.168.7.7", token=TOKEN).hosts == LOOPBACK_HOSTS | {"192.168.7.7"}
    assert access_policy("[::1]").hosts == LOOPBACK_HOSTS
