"""The overlay's Host, Origin and token checks: every refusal is clear, JSON and logged."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from session_schedule.web.security import (
    ANY_HOST,
    LOOPBACK_HOSTS,
    SECURITY_HEADERS,
    AccessPolicy,
    access_policy,
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


@pytest.fixture
async def guarded() -> AsyncIterator[Overlay]:
    async with open_overlay(policy=access_policy("192.168.7.7", token=TOKEN)) as opened:
        yield opened


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
    assert refusals(caplog) == [
        f"refused GET /api/sessions from 127.0.0.1:123: {message}",
        f"refused GET / from 127.0.0.1:123: {message}",
    ]


@pytest.mark.parametrize(
    "host",
    [None, b"", b"127.0.0.1:abc", b"127.0.0.1:", b"[::1", b"[::1]x", b"a b:1", b"x@127.0.0.1"],
)
async def test_a_missing_or_malformed_host_is_400(
    overlay: Overlay, caplog: pytest.LogCaptureFixture, host: bytes | None
) -> None:
    status, body = await send_raw(overlay.app, "GET", "/api/sessions", [], host=host)
    assert (status, body) == (400, {"error": "the request has no valid Host header."})
    assert refusals(caplog) == [
        "refused GET /api/sessions from 127.0.0.1:50000: the request has no valid Host header."
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
    assert refusals(caplog) == [f"refused POST /api/sessions from 127.0.0.1:123: {message}"]
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
    assert refusals(caplog) == [f"refused GET /api/sessions from 127.0.0.1:123: {message}"]
    # Following a link to the page itself is fine.
    page = await overlay.client.get("/", headers={"sec-fetch-site": site})
    assert page.status_code == 200


async def test_a_path_that_would_forge_a_log_line_is_logged_quoted(
    overlay: Overlay, caplog: pytest.LogCaptureFixture
) -> None:
    status, _ = await send_raw(overlay.app, "GET", "/x\nINFO forged", [], host=b"evil.example")
    assert status == 403
    assert refusals(caplog)[0].startswith("refused GET '/x\\nINFO forged' from 127.0.0.1:50000")
    assert "\nINFO forged" not in caplog.text


async def test_websockets_are_refused_and_logged(
    overlay: Overlay, caplog: pytest.LogCaptureFixture
) -> None:
    code, _ = await send_raw(overlay.app, "GET", "/api/sessions", [], scope_type="websocket")
    assert code == 1008
    assert refusals(caplog) == [
        "refused WEBSOCKET /api/sessions from 127.0.0.1:50000: websockets are not served"
    ]


# -- the access token --------------------------------------------------------------------------


async def test_without_the_token_every_request_is_401(
    guarded: Overlay, caplog: pytest.LogCaptureFixture
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
    assert len(refusals(caplog)) == 4


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
    assert len(refusals(caplog)) == 1
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
    assert refusals(caplog) == [
        "refused GET / from 127.0.0.1:123: the access token in the address is wrong."
    ]
    assert "guess" not in caplog.text


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
