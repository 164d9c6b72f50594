"""The overlay in real Chromium: Debian's ``chromium`` driven headless by Playwright for Python,
against a real uvicorn server on 127.0.0.1 in a background thread and a scripted model.

The browser is Debian's (``/usr/bin/chromium``, installed by ``.ci/run``): Playwright's own
browser download does not work here. Set ``SESSION_SCHEDULE_SCREENSHOT=docs/web-overlay.png`` to
save the screenshot of a page with a delivered reminder.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from session_schedule.core.instants import Instant
from session_schedule.core.quiet import QuietHours
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, user_message
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.web.app import OverlayApp, create_app
from session_schedule.web.live import HANDOVER_LINE, LiveLimits
from session_schedule.web.security import AccessPolicy, access_policy
from session_schedule.web.server import OverlayServer, bind
from tests.web.scripted import MIXED_CONTEXT, TOKYO_CONTEXT, RuleModel

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 15_000
SCREENSHOT = os.environ.get("SESSION_SCHEDULE_SCREENSHOT")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed at /usr/bin/chromium "
    "(.ci/run installs it: apt-get install -y chromium)",
)

expect.set_options(timeout=WAIT_MS)


@dataclass
class Running:
    url: str
    app: OverlayApp
    model: RuleModel | None


@contextmanager
def serving(
    data: Path,
    model: RuleModel | None,
    policy: AccessPolicy | None = None,
    live_limits: LiveLimits | None = None,
    port: int = 0,
) -> Iterator[Running]:
    """The overlay on 127.0.0.1 (``port``, or an ephemeral one), served by uvicorn in a
    thread."""
    app = create_app(
        JsonlSessionStore(data),
        model=(lambda: model) if model else None,
        policy=policy,
        live_limits=live_limits,
    )
    sock = bind("127.0.0.1", port)
    server = OverlayServer(app, log_config=False)
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[sock])), name="overlay server"
    )
    thread.start()
    try:
        deadline = time.monotonic() + WAIT_MS / 1000
        while not server.started:
            assert thread.is_alive(), "the server thread died while starting"
            assert time.monotonic() < deadline, "the server did not start within 15 s"
            time.sleep(0.02)
        yield Running(f"http://127.0.0.1:{sock.getsockname()[1]}/", app, model)
    finally:
        server.should_exit = True
        thread.join(WAIT_MS / 1000)
        sock.close()
        assert not thread.is_alive(), "the server thread did not stop within 15 s"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=FLAGS, timeout=WAIT_MS
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def rule_model() -> RuleModel:
    return RuleModel()


@pytest.fixture
def server(tmp_path: Path, rule_model: RuleModel) -> Iterator[Running]:
    with serving(tmp_path / "data", rule_model) as running:
        yield running


@pytest.fixture
def offline_server(tmp_path: Path) -> Iterator[Running]:
    with serving(tmp_path / "data", None) as running:
        yield running


@pytest.fixture
def open_page(browser: Browser) -> Iterator[Callable[[str, str], Page]]:
    """Opens ``url`` in a new browser context whose time zone is ``zone``; closes them all."""
    contexts = []

    def opener(url: str, zone: str) -> Page:
        context = browser.new_context(
            timezone_id=zone, locale="en-GB", viewport={"width": 1280, "height": 820}
        )
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        page = context.new_page()
        page.goto(url)
        expect(page.locator("#status")).to_have_text("live")
        return page

    yield opener
    for context in contexts:
        context.close()


def send(page: Page, text: str) -> dict[str, object]:
    """Type ``text`` and press Enter; the JSON body the page posted."""
    with page.expect_request(lambda request: request.url.endswith("/prompts")) as sent:
        page.fill("#prompt", text)
        page.press("#prompt", "Enter")
    body = sent.value.post_data_json
    assert isinstance(body, dict)
    return body


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_MS / 1000
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def session_of(page: Page) -> str:
    return str(page.evaluate("location.hash")).removeprefix("#")


def test_a_prompt_carries_the_browser_zone_and_the_model_is_told_to_read_times_there(
    server: Running,
    rule_model: RuleModel,
    open_page: Callable[[str, str], Page],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="session_schedule.web")
    page = open_page(server.url, "Asia/Tokyo")
    expect(page.locator("#zone")).to_have_text("Time zone: Asia/Tokyo")
    assert send(page, "call Ana at 9 tomorrow") == {
        "text": "call Ana at 9 tomorrow",
        "zone": "Asia/Tokyo",
    }
    expect(page.locator(".turn.model .content")).to_have_text("Noted: call Ana at 9 tomorrow")
    assert f"prompt for session {session_of(page)} (browser zone Asia/Tokyo)" in caplog.text
    assert len(rule_model.systems) == 1
    assert TOKYO_CONTEXT in rule_model.systems[0]


def test_two_prompts_from_two_zones_in_one_turn_make_the_model_ask(
    server: Running, rule_model: RuleModel, open_page: Callable[[str, str], Page]
) -> None:
    tokyo = open_page(server.url, "Asia/Tokyo")
    paris = open_page(f"{server.url}#{session_of(tokyo)}", "Europe/Paris")
    rule_model.gate.clear()
    send(tokyo, "first")
    wait_for(lambda: len(rule_model.systems) == 1, "the first turn to reach the model")
    assert send(tokyo, "second")["zone"] == "Asia/Tokyo"
    assert send(paris, "third")["zone"] == "Europe/Paris"
    # Queued behind the running turn: each page shows what it sent as pending.
    expect(tokyo.locator(".pending")).to_have_text(["second"])
    expect(paris.locator(".pending")).to_have_text(["third"])
    rule_model.gate.set()
    # Both pages show every turn, live.
    for page in (tokyo, paris):
        expect(page.locator(".turn.person .content")).to_have_text(["first", "second", "third"])
        expect(page.locator(".turn.model .content")).to_have_text(["Noted: first", "Noted: third"])
        expect(page.locator(".pending")).to_have_count(0)
    assert len(rule_model.systems) == 2
    assert TOKYO_CONTEXT in rule_model.systems[0]
    assert MIXED_CONTEXT in rule_model.systems[1]
    assert TOKYO_CONTEXT not in rule_model.systems[1]


def test_a_reminder_comes_back_into_the_transcript_live_and_survives_a_reload(
    server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(server.url, "Asia/Tokyo")
    send(page, "remind me every 900 seconds to drink a glass of water")
    expect(page.locator(".schedule")).to_have_count(1)
    expect(page.locator(".schedule .countdown")).to_have_text(re.compile(r"in 1[45]:\d\d"))
    expect(page.locator(".timeline .mark")).not_to_have_count(0)
    send(page, "remind me in 1 second to stretch your legs")
    followup = page.locator(".turn.followup")
    expect(followup).to_have_count(1)
    expect(followup.locator(".who")).to_have_text("Reminder · follow-up turn")
    expect(followup.locator(".content")).to_contain_text('prompt: "stretch your legs"')
    expect(page.locator(".turn").last).to_contain_text("Time to stretch your legs!")
    expect(page.locator(".schedule")).to_have_count(1)  # only the recurring one is left
    if SCREENSHOT:
        page.locator(".turn").last.scroll_into_view_if_needed()
        page.screenshot(path=SCREENSHOT)
    texts = page.locator(".turn").all_inner_texts()
    assert len(texts) == 10  # two prompts, each with a call, a result and a reply; two more
    page.reload()
    expect(page.locator("#status")).to_have_text("live")
    expect(page.locator(".turn")).to_have_count(len(texts))
    assert page.locator(".turn").all_inner_texts() == texts
    expect(page.locator(".turn.followup")).to_have_count(1)


def stored_session(data: Path, turns: int) -> str:
    """A closed session of ``turns`` person prompts, in the store at ``data``."""

    async def create() -> str:
        clock = FakeClock(Instant(1_796_000_000_000))
        async with await JsonlSessionStore(data).create(now=clock.now()) as session:
            for n in range(turns):
                session.append(MESSAGE_ENTRY_TYPE, user_message(f"prompt {n}", at=clock.now()))
            await session.barrier()
            return session.id

    # In a thread of its own: Playwright's sync API runs an event loop in this one.
    created: list[str] = []
    thread = threading.Thread(target=lambda: created.append(asyncio.run(create())))
    thread.start()
    thread.join()
    return created[0]


def quiet_session(data: Path) -> str:
    """A closed session whose two reminders came due an hour ago and, its quiet hours holding
    them back until two hours from now, were never decided: sch_1 every 300 s, missed when more
    than 60 s late; sch_2 every 600 s, delivered however late."""

    async def create() -> str:
        now = time.time_ns() // 1_000_000
        clock = FakeClock(Instant(now - 3_600_000))
        store = JsonlSessionStore(data)
        async with (
            await store.create(now=clock.now()) as session,
            LiveSchedule(session, FakeAgent(), clock=clock) as schedule,
        ):
            await schedule.create(
                {"prompt": "stretch", "every_seconds": 300, "max_lateness_seconds": 60}
            )
            await schedule.create({"prompt": "drink", "every_seconds": 600})
            start, end = (
                time.strftime("%H:%M", time.gmtime(now / 1000 + hours * 3600)) for hours in (-2, 2)
            )
            await schedule.set_quota(
                "quiet_hours", QuietHours(start=start, end=end, time_zone="UTC")
            )
            await session.barrier()
            return session.id

    # In a thread of its own: Playwright's sync API runs an event loop in this one.
    created: list[str] = []
    thread = threading.Thread(target=lambda: created.append(asyncio.run(create())))
    thread.start()
    thread.join()
    return created[0]


def test_the_timeline_marks_the_misses_and_skips_the_session_will_record(
    offline_server: Running, tmp_path: Path, open_page: Callable[[str, str], Page]
) -> None:
    session = quiet_session(tmp_path / "data")
    page = open_page(f"{offline_server.url}#{session}", "Europe/Paris")
    expect(page.locator(".schedule")).to_have_count(2)
    # As `session-schedule timeline` lists them: sch_1's oldest due occurrence is the miss
    # recorded once quiet hours end; sch_2 is delivered once, its five earlier occurrences
    # skipped.
    late = page.locator("#timeline-late li")
    expect(late).to_have_count(4)
    expect(late.nth(0)).to_have_text(re.compile(r"^sch_1 .+ missed$"))
    expect(late.nth(1)).to_have_text(re.compile(r"^sch_2 .+ overdue \(5 skipped\)$"))
    expect(late.nth(2)).to_have_text(re.compile(r"^Overdue reminders are delivered once"))
    expect(late.nth(3)).to_have_text(re.compile(r"^Missed reminders are later than"))
    expect(page.locator(".timeline .mark.missed")).to_have_count(1)
    expect(page.locator(".timeline .mark.overdue")).to_have_count(1)
    expect(page.locator(".timeline .mark.missed")).to_have_attribute(
        "title", re.compile(r"^sch_1 · .+ · missed$")
    )


def test_a_long_session_shows_its_newest_page_and_earlier_pages_on_demand(
    offline_server: Running, tmp_path: Path, open_page: Callable[[str, str], Page]
) -> None:
    session = stored_session(tmp_path / "data", 150)
    page = open_page(f"{offline_server.url}#{session}", "Europe/Paris")
    # A page is the turns of the last 64 entries at most.
    turns = page.locator(".turn.person .content")
    expect(turns).to_have_count(64)
    expect(turns.first).to_have_text("prompt 86")
    expect(turns.last).to_have_text("prompt 149")
    earlier = page.locator("#show-earlier")
    expect(earlier).to_be_visible()
    with page.expect_request(lambda request: request.url.endswith("/turns?before=86")):
        earlier.click()
    expect(turns).to_have_count(128)
    expect(turns.first).to_have_text("prompt 22")
    expect(earlier).to_be_visible()
    earlier.click()
    expect(turns).to_have_count(150)
    expect(earlier).to_be_hidden()
    assert turns.all_inner_texts() == [f"prompt {n}" for n in range(150)]
    # Live turns still join at the bottom.
    send(page, "and one more")
    expect(turns).to_have_count(151)
    expect(turns.last).to_have_text("and one more")
    # Queued as entry 150, recorded as entry 151.
    expect(page.locator(".turn").last).to_have_attribute("data-position", "151")
    positions = [
        int(p)
        for p in page.locator(".turn").evaluate_all(
            "items => items.map(item => item.dataset.position)"
        )
    ]
    assert positions == sorted(set(positions))


def test_markup_in_prompts_and_reminders_is_shown_as_text(
    server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(server.url, "Asia/Tokyo")
    attack = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script><b>bold</b>'
    send(page, f"remind me in 1 second to {attack}")
    followup = page.locator(".turn.followup .content")
    expect(followup).to_have_count(1)
    expect(followup).to_contain_text(
        'prompt: "<img src=x onerror=\\"window.__xss=1\\"><script>window.__xss=2</script>'
    )
    expect(page.locator(".turn.person .content")).to_have_text(f"remind me in 1 second to {attack}")
    assert page.locator("#transcript img, #transcript script, #transcript b").count() == 0
    assert page.evaluate("window.__xss") is None


def test_hidden_characters_are_shown_and_emoji_stay_emoji(
    offline_server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(offline_server.url, "Europe/Paris")
    form = page.locator("#create-form")
    form.locator("input[name=prompt]").fill("buy milk\u200b\U000e0041\u202e 👩🏽\u200d💻")
    form.locator("input[name=seconds]").fill("3600")
    form.locator("button[type=submit]").click()
    shown = "buy milk\\u200b\\U000e0041\\u202e 👩🏽\u200d💻"
    expect(page.locator(".schedule-prompt")).to_have_text(shown)
    expect(page.locator(".tool-args")).to_contain_text(shown)
    expect(page.locator(".tool-result pre")).to_contain_text(shown)


def test_offline_the_person_calls_the_tools_from_the_page(
    offline_server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(offline_server.url, "America/New_York")
    expect(page.locator("#mode")).to_have_text("Offline: you call the tools")
    form = page.locator("#create-form")
    expect(form.locator("input[name=time_zone]")).to_have_value("America/New_York")
    form.locator("input[name=prompt]").fill("the tea is ready")
    form.locator("input[name=seconds]").fill("1")
    form.locator("button[type=submit]").click()
    expect(page.locator(".turn.tool")).to_have_count(1)
    expect(page.locator(".turn.model .who")).to_have_text("You · tool call")
    followup = page.locator(".turn.followup .content")
    expect(followup).to_contain_text('prompt: "the tea is ready"')
    page.locator("#list-button").click()
    expect(page.locator(".turn.tool")).to_have_count(2)
    expect(page.locator(".turn.tool").last).to_contain_text('"schedules": []')


def test_offline_a_daily_reminder_is_created_from_the_form(
    offline_server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(offline_server.url, "Asia/Tokyo")
    form = page.locator("#create-form")
    form.locator("select[name=rule]").select_option("daily_at")
    expect(form.locator("fieldset.weekdays")).to_be_visible()
    expect(form.locator("input[name=date]")).to_be_hidden()
    form.locator("input[name=prompt]").fill("standup")
    form.locator("input[name=time]").fill("09:00")
    for day in ("mon", "wed", "fri"):
        form.locator(f"input[name=weekdays][value={day}]").check()
    form.locator("button[type=submit]").click()
    expect(page.locator(".turn.tool")).to_have_count(1)
    expect(page.locator(".turn.model").last).to_contain_text(
        '"daily_at":{"time":"09:00","time_zone":"Asia/Tokyo","weekdays":["mon","wed","fri"]}'
    )
    expect(page.locator(".schedule-rule")).to_have_text("daily 09:00 Asia/Tokyo, mon wed fri")


def test_a_rules_time_of_day_shows_its_seconds_when_they_are_not_zero(
    offline_server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(offline_server.url, "Asia/Tokyo")
    form = page.locator("#create-form")
    form.locator("select[name=rule]").select_option("daily_at")
    form.locator("input[name=prompt]").fill("standup")
    form.locator("input[name=time]").fill("09:00:30")
    form.locator("input[name=weekdays][value=mon]").check()
    form.locator("button[type=submit]").click()
    expect(page.locator(".turn.tool")).to_have_count(1)
    expect(page.locator(".schedule-rule")).to_have_text("daily 09:00:30 Asia/Tokyo, mon")


def test_sessions_are_created_forked_and_switched_from_the_page(
    server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(server.url, "Asia/Tokyo")
    first = session_of(page)
    send(page, "hello")
    expect(page.locator(".turn")).to_have_count(2)
    page.click("#fork-session")
    wait_for(lambda: session_of(page) != first, "the fork to open")
    fork = session_of(page)
    expect(page.locator(".turn .content")).to_have_text(["hello", "Noted: hello"])
    page.click("#new-session")
    wait_for(lambda: session_of(page) not in {first, fork}, "the new session to open")
    new = session_of(page)
    expect(page.locator(".turn")).to_have_count(0)
    expect(page.locator("#session-select option")).to_have_count(3)
    page.select_option("#session-select", first)
    wait_for(lambda: session_of(page) == first, "the first session to open again")
    expect(page.locator(".turn")).to_have_count(2)
    page.locator(".fork-here").first.click()  # a fork before the first prompt: empty
    wait_for(lambda: session_of(page) not in {first, fork, new}, "the second fork")
    expect(page.locator(".turn")).to_have_count(0)


def test_a_token_server_works_in_the_browser_once_the_token_address_is_opened(
    tmp_path: Path, rule_model: RuleModel, browser: Browser
) -> None:
    token = "a-token-for-the-browser-test"  # noqa: S105
    with serving(tmp_path / "data", rule_model, access_policy("127.0.0.1", token=token)) as server:
        stranger = browser.new_context()
        try:
            response = stranger.new_page().goto(server.url)
            assert response is not None
            assert response.status == 401
        finally:
            stranger.close()
        context = browser.new_context(timezone_id="Asia/Tokyo")
        try:
            page = context.new_page()
            page.goto(f"{server.url}?token={token}")
            assert page.url.startswith(server.url)
            assert "token" not in page.url  # traded for a cookie, gone from the address bar
            expect(page.locator("#status")).to_have_text("live")  # the event stream is allowed
            send(page, "hello")
            expect(page.locator(".turn.model .content")).to_have_text("Noted: hello")
        finally:
            context.close()


@contextmanager
def hostile_site() -> Iterator[str]:
    """Another origin on loopback (another port), serving a blank page: its origin."""

    class Blank(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<!doctype html><title>elsewhere</title>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Blank)
    thread = threading.Thread(target=site.serve_forever, name="hostile site")
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}"
    finally:
        site.shutdown()
        site.server_close()
        thread.join(WAIT_MS / 1000)


def test_a_page_of_another_origin_cannot_post_to_the_overlay(
    server: Running,
    browser: Browser,
    open_page: Callable[[str, str], Page],
    caplog: pytest.LogCaptureFixture,
) -> None:
    own = open_page(server.url, "Asia/Tokyo")
    with hostile_site() as origin:
        context = browser.new_context()
        try:
            hostile = context.new_page()
            hostile.goto(f"{origin}/")
            outcome = hostile.evaluate(
                """async (target) => {
                    const results = [];
                    for (const init of [
                        {method: "POST", headers: {"Content-Type": "application/json"},
                         body: "{}"},
                        {method: "POST", mode: "no-cors", body: "{}"},
                    ]) {
                        try {
                            const response = await fetch(target, init);
                            results.push(response.type);
                        } catch (error) {
                            results.push("blocked");
                        }
                    }
                    return results;
                }""",
                f"{server.url}api/sessions",
            )
        finally:
            context.close()
    # The JSON post dies at its refused preflight; the simple one reaches the server and is
    # refused, and the browser keeps the answer from the page.
    assert outcome[0] == "blocked"
    assert outcome[1] in {"blocked", "opaque"}
    found = [r.getMessage() for r in caplog.records if r.name == "session_schedule.web.security"]
    # Both refusals are counted in one line per interval; the first one is named.
    assert any(
        "the request came from another origin (first OPTIONS /api/sessions;" in m for m in found
    )
    listed = own.evaluate("fetch('/api/sessions').then((r) => r.json())")
    assert len(listed["sessions"]) == 1  # only the page's own session: nothing was created


# -- what the person sees when things go wrong, and small mercies ------------------------------

CORRUPT = "s_dddddddddddd"
UNKNOWN = "s_aaaaaaaaaaaa"


def open_failed_page(browser: Browser, url: str) -> Page:
    """A page whose address names a session that does not open (its status never says live)."""
    context = browser.new_context(timezone_id="Asia/Tokyo", locale="en-GB")
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(url)
    return page


def test_a_session_that_fails_to_open_leaves_one_banner_a_clear_status_and_no_usable_form(
    tmp_path: Path, browser: Browser
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / f"{CORRUPT}.jsonl").write_bytes(b"not a header\n")
    with serving(data, None) as server:
        page = open_failed_page(browser, f"{server.url}#{CORRUPT}")
        try:
            expect(page.locator("#status")).to_have_text("not open")
            notices = page.locator(".notice")
            expect(notices).to_have_count(1)
            expect(notices).to_contain_text(f"session {CORRUPT} is corrupt")
            for control in ("#prompt", "#composer button", "#fork-session", "#tools button"):
                expect(page.locator(control).first).to_be_disabled()
            # Failing again, or failing otherwise, never stacks the same banner twice.
            for target in (UNKNOWN, CORRUPT, UNKNOWN, CORRUPT):
                page.evaluate("(id) => { location.hash = id; }", target)
                expect(page.locator("#status")).to_have_text("not open")
            expect(notices).to_have_count(2)
            expect(notices.last).to_contain_text(f"session {CORRUPT} is corrupt")
            expect(notices.first).to_have_text(
                f"session {UNKNOWN} does not exist; check the session id."
            )
            # A new session is still one click away, and then the forms work again.
            page.click("#new-session")
            expect(page.locator("#status")).to_have_text("live")
            expect(page.locator("#prompt")).to_be_enabled()
        finally:
            page.context.close()


def test_an_address_that_is_not_a_session_id_is_refused_before_any_request(
    offline_server: Running, browser: Browser, open_page: Callable[[str, str], Page]
) -> None:
    victim_page = open_page(offline_server.url, "Asia/Tokyo")
    victim = session_of(victim_page)
    page = open_failed_page(browser, f"{offline_server.url}#{victim}/prompts?")
    try:
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        expect(page.locator("#status")).to_have_text("not open")
        expect(page.locator(".notice")).to_have_text(
            f'"{victim}/prompts?" is not a session id (s_ and 12 lower-case letters or digits).'
        )
        expect(page.locator("#prompt")).to_be_disabled()
        page.evaluate("(id) => { location.hash = id; }", f"{victim}%2F..%2Ftools%2Fx")
        expect(page.locator(".notice")).to_have_count(2)
        assert not [url for url in requested if "/api/sessions/" in url]
    finally:
        page.context.close()
    assert victim_page.locator(".turn").count() == 0


def test_switching_by_address_moves_the_picker_and_drops_the_draft(
    server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(server.url, "Asia/Tokyo")
    first = session_of(page)
    page.click("#new-session")
    wait_for(lambda: session_of(page) != first, "the new session to open")
    second = session_of(page)
    expect(page.locator("#status")).to_have_text("live")
    page.fill("#prompt", "a draft for the second session")
    page.evaluate("(id) => { location.hash = id; }", first)
    expect(page.locator("#session-select")).to_have_value(first)
    expect(page.locator("#status")).to_have_text("live")
    expect(page.locator("#prompt")).to_have_value("")
    page.evaluate("(id) => { location.hash = id; }", UNKNOWN)
    expect(page.locator("#status")).to_have_text("not open")
    expect(page.locator("#session-select")).not_to_have_value(first)
    expect(page.locator("#session-select")).not_to_have_value(second)


def test_a_fork_says_it_is_a_fork_without_the_reminders(
    server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(server.url, "Asia/Tokyo")
    first = session_of(page)
    expect(page.locator("#session-note")).to_be_hidden()
    send(page, "remind me every 900 seconds to drink water")
    expect(page.locator(".schedule")).to_have_count(1)
    expect(page.locator(".turn")).to_have_count(4)  # prompt, call, result, reply
    page.click("#fork-session")
    wait_for(lambda: session_of(page) != first, "the fork to open")
    # The queued turn, its four messages, the create and the finished mark: 7 entries.
    expect(page.locator("#session-note")).to_have_text(
        f"A fork of {first}: it has that session's first 7 log entries (the history shown) and "
        "none of its reminders; reminders set there stay there."
    )
    expect(page.locator(".schedules .empty")).to_have_text("No active reminders.")
    page.click("#new-session")
    wait_for(lambda: page.locator("#session-note").is_hidden(), "the note to go")


def test_offline_a_message_gets_feedback_and_a_tool_form_clears_after_it_worked(
    offline_server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(offline_server.url, "Asia/Tokyo")
    send(page, "hello?")
    expect(page.locator(".notice.info")).to_have_text(
        "Sent. Offline mode: no model answers it; call the tools below."
    )
    expect(page.locator(".turn.person .content")).to_have_text("hello?")
    form = page.locator("#create-form")
    form.locator("input[name=prompt]").fill("stretch")
    form.locator("input[name=seconds]").fill("600")
    form.locator("button[type=submit]").click()
    expect(page.locator(".turn.tool")).to_have_count(1)
    expect(form.locator("input[name=prompt]")).to_have_value("")
    expect(form.locator("input[name=seconds]")).to_have_value("60")
    expect(form.locator("input[name=time_zone]")).to_have_value("Asia/Tokyo")
    form.locator("button[type=submit]").click()  # the emptied form is not sent again
    expect(page.locator(".schedule")).to_have_count(1)
    assert page.locator(".turn.tool").count() == 1


def test_every_time_shown_says_its_zone(
    offline_server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(offline_server.url, "Asia/Tokyo")
    form = page.locator("#create-form")
    form.locator("input[name=prompt]").fill("tea")
    form.locator("input[name=seconds]").fill("600")
    form.locator("button[type=submit]").click()
    expect(page.locator(".schedule")).to_have_count(1)
    zoned = re.compile(r"\d\d:\d\d:\d\d GMT\+9$")
    expect(page.locator(".turn .when").first).to_have_text(zoned)
    expect(page.locator(".schedule-when time")).to_have_text(zoned)
    expect(page.locator("#session-select option").first).to_contain_text("GMT+9")


def test_offline_a_reminder_card_pauses_resumes_and_snoozes_through_schedule_update(
    offline_server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(offline_server.url, "Europe/Paris")
    form = page.locator("#create-form")
    form.locator("select[name=rule]").select_option("every_seconds")
    form.locator("input[name=prompt]").fill("stretch")
    form.locator("input[name=seconds]").fill("3600")
    form.locator("button[type=submit]").click()
    card = page.locator(".schedule")
    expect(card.locator(".schedule-state")).to_have_text("scheduled")
    card.get_by_role("button", name="Pause").click()
    expect(card.locator(".schedule-state")).to_have_text("paused")
    expect(page.locator(".turn.model .tool-name").last).to_have_text("schedule_update")
    expect(page.locator(".turn.model .tool-args").last).to_have_text('{"id":"sch_1","paused":true}')
    card.get_by_role("button", name="Resume").click()
    expect(card.locator(".schedule-state")).to_have_text("scheduled")
    card.get_by_role("button", name="+10 min").click()
    expect(card.locator(".schedule-note").first).to_contain_text("snoozed until ")
    card.get_by_role("button", name="Tomorrow 09:00").click()
    expect(page.locator(".turn.model .tool-args").last).to_contain_text(
        '"time":"09:00","time_zone":"Europe/Paris"'
    )
    expect(page.locator(".turn.tool")).to_have_count(5)


def test_offline_a_calendar_reminder_is_created_from_the_form(
    offline_server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(offline_server.url, "Europe/Paris")
    form = page.locator("#create-form")
    form.locator("select[name=rule]").select_option("calendar")
    expect(form.locator("select[name=pattern]")).to_be_visible()
    expect(form.locator("fieldset.weekdays")).to_be_hidden()
    expect(form.locator("fieldset.bydays")).to_be_hidden()
    # The common cases write the rule as the fields change.
    rule = form.locator("input[name=rrule]")
    expect(rule).to_have_value("FREQ=MONTHLY;BYMONTHDAY=1")
    form.locator("select[name=pattern]").select_option("nth")
    form.locator("select[name=ordinal]").select_option("-1")
    form.locator("select[name=weekday]").select_option("FR")
    expect(rule).to_have_value("FREQ=MONTHLY;BYDAY=-1FR")
    form.locator("select[name=pattern]").select_option("weekly")
    for day in ("MO", "TH"):
        form.locator(f"input[name=bydays][value={day}]").check()
    expect(rule).to_have_value("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH")
    form.locator("select[name=pattern]").select_option("yearly")
    form.locator("input[name=month]").fill("4")
    expect(rule).to_have_value("FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=1")
    form.locator("select[name=pattern]").select_option("lastday")
    expect(rule).to_have_value("FREQ=MONTHLY;BYMONTHDAY=-1")
    form.locator("input[name=prompt]").fill("pay rent")
    form.locator("input[name=time]").fill("09:00")
    form.locator("button[type=submit]").click()
    expect(page.locator(".turn.tool")).to_have_count(1)
    expect(page.locator(".turn.model").last).to_contain_text(
        '"calendar":{"rule":"FREQ=MONTHLY;BYMONTHDAY=-1","time":"09:00",'
        '"time_zone":"Europe/Paris","start_date":null}'
    )
    expect(page.locator(".schedule-rule")).to_have_text(
        "calendar FREQ=MONTHLY;BYMONTHDAY=-1 at 09:00 Europe/Paris"
    )


def _hold(
    data: Path,
    held: list[str],
    ready: threading.Event,
    release: threading.Event,
    session: str | None = None,
) -> None:
    """Keeps ``session`` (or a new session) open in ``data`` until ``release``, as a host
    answering a reminder does (a store of its own: to the server, another process)."""

    async def main() -> None:
        store = JsonlSessionStore(data)
        opened = (
            store.create(now=FakeClock("2026-11-29T20:00:00.000Z").now())
            if session is None
            else store.open(SessionId(session))
        )
        async with await opened as handle:
            held.append(handle.id)
            ready.set()
            while not release.is_set():
                await asyncio.sleep(0.05)

    asyncio.run(main())


def test_a_session_being_handed_over_shows_one_line_and_opens_by_itself(
    tmp_path: Path, browser: Browser
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    held: list[str] = []
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(data, held, ready, release), name="holder")
    holder.start()
    try:
        assert ready.wait(WAIT_MS / 1000)
        session = held[0]
        with serving(data, None, live_limits=LiveLimits(busy_wait_seconds=1)) as server:
            page = open_failed_page(browser, f"{server.url}#{session}")
            try:
                expect(page.locator("#status")).to_have_text(HANDOVER_LINE)
                # Still held after the server's wait: 409 with Retry-After, and the page tries
                # again, the line still shown and no banner.
                with page.expect_response(
                    lambda r: r.url.endswith(f"/api/sessions/{session}") and r.status == 409
                ):
                    pass
                expect(page.locator("#status")).to_have_text(HANDOVER_LINE)
                expect(page.locator(".notice")).to_have_count(0)
                release.set()  # handed over
                expect(page.locator("#status")).to_have_text("live")
                expect(page.locator("#prompt")).to_be_enabled()
            finally:
                page.context.close()
    finally:
        release.set()
        holder.join()


def test_a_page_whose_stream_comes_back_to_a_session_being_handed_over_shows_the_line(
    tmp_path: Path, open_page: Callable[[str, str], Page]
) -> None:
    """The server stops while a page is open; a host takes the session meanwhile; the server
    starts again on the same address. The page's stream, coming back, waits for the hand-over:
    the status shows the server's line about it (not a bare "retrying"), then "live"."""
    data = tmp_path / "data"
    data.mkdir()
    with serving(data, None) as first:
        page = open_page(first.url, "Europe/Paris")
        session = session_of(page)
        port = int(first.url.rstrip("/").rsplit(":", 1)[1])
        # Stopped once the opening's requests are answered: one cut off would show a notice.
        expect(page.locator(f"body[data-opened='{session}']")).to_have_count(1)
    expect(page.locator("#status")).not_to_have_text("live")
    held: list[str] = []
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(
        target=_hold, args=(data, held, ready, release, session), name="holder"
    )
    holder.start()
    try:
        assert ready.wait(WAIT_MS / 1000)
        limits = LiveLimits(busy_wait_seconds=1)
        with serving(data, None, live_limits=limits, port=port):
            expect(page.locator("#status")).to_have_text(HANDOVER_LINE)
            expect(page.locator(".notice")).to_have_count(0)
            release.set()  # handed over
            expect(page.locator("#status")).to_have_text("live")
            expect(page.locator("#prompt")).to_be_enabled()
            assert session_of(page) == session
    finally:
        release.set()
        holder.join()


def test_the_person_sets_the_session_s_quotas_in_the_side_panel(
    offline_server: Running, open_page: Callable[[str, str], Page]
) -> None:
    page = open_page(offline_server.url, "Europe/Paris")
    quotas = page.locator("#quotas li")
    expect(quotas).to_have_text(
        [
            "Reminder turns per day: no limit (the program's setting)",
            "Quiet hours: none (the program's setting)",
            "Active reminders: at most 100 (the program's setting; the program allows 100)",
        ]
    )
    form = page.locator("#quotas-form")
    form.locator("input[name=turnsPerDay]").fill("20")
    form.locator("input[name=quietHours]").fill("22:00-07:00 Europe/Paris")
    form.locator("button[type=submit]").click()
    expect(quotas).to_have_text(
        [
            "Reminder turns per day: 20 (set for this session)",
            "Quiet hours: 22:00 to 07:00 Europe/Paris (set for this session)",
            "Active reminders: at most 100 (the program's setting; the program allows 100)",
        ]
    )
    form.locator("input[name=maxActive]").fill("1000")
    form.locator("button[type=submit]").click()
    expect(page.locator("#notices")).to_contain_text(
        "active reminders must be a whole number from 1 to 100"
    )
    # Reloaded, the page shows what the session keeps.
    page.reload()
    expect(quotas.first).to_have_text("Reminder turns per day: 20 (set for this session)")
