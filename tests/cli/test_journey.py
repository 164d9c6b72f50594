"""The newcomer's first hour, scripted end to end on a fresh install (issue 22's measure).

A new virtual environment gets this checkout with ``pip install '.[cli,postgres,web]'``, through
the machine's package index as ``dev.py setup`` uses it; from then on only the installed
``session-schedule`` program runs, never the sources under test:

1. ``db init`` creates a fresh schema in the PostgreSQL test database;
2. ``chat --store postgresql://…`` (offline, driven through its stdin) creates one reminder of
   each kind — after, at, every, daily, calendar — and is closed before any is due;
3. ``host`` answers the two that come due while the chat is closed, with a scripted model;
4. the chat reopens the session with the command it printed when it closed: the answered
   follow-ups are marked as answered while the person was away, and one line counts them;
5. ``serve`` opens the same session: 401 without the token, 200 with it, and a reminder created
   and a prompt sent through the API are answered 200 and 202.

Under CI (``$CI`` set) it always runs: PostgreSQL must be reachable. Elsewhere it is skipped only
when PostgreSQL is unreachable, and says so. It takes about half a minute, most of it the install
and waiting for the two reminders to come due.
"""

from __future__ import annotations

import asyncio
import os
import re
import selectors
import shlex
import signal
import subprocess
import time
import venv
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeAlias

import httpx2
import psycopg
import pytest

from session_schedule.harness.transcript import messages_of
from session_schedule.session.location import opened_store, parse_store_url
from session_schedule.session.message import MessageEntry
from tests.cli.chat_endpoint import Answer, Reply, ScriptedEndpoint
from tests.postgres import CI_DEFAULT_DSN, DSN_VARIABLE, drop_schema, fresh_schema_name

ROOT: Final = Path(__file__).resolve().parents[2]
WAIT_SECONDS: Final = 60.0
"""Every wait is bounded by this (generous for a loaded machine)."""
AFTER_SECONDS: Final = 8
AT_SECONDS: Final = 12
"""The two reminders that come due: set this long after the chat starts, which has closed by
then."""
ANSWER: Final = "Done — I reminded you."
SESSION_LINE: Final = re.compile(r"session-schedule chat: new session (s_[0-9a-z]{12})")
RESUME_HINT: Final = re.compile(r"resume it with: (session-schedule .*)$", re.MULTILINE)
Popen: TypeAlias = "subprocess.Popen[str]"


def _dsn() -> str:
    """The PostgreSQL server: $SESSION_SCHEDULE_PG_DSN, else the local default. Skipped only
    when it is unreachable and neither the variable nor ``$CI`` is set."""
    dsn = os.environ.get(DSN_VARIABLE) or CI_DEFAULT_DSN
    try:
        with psycopg.connect(dsn, connect_timeout=10) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        cause = str(error).splitlines()[0] if str(error) else type(error).__name__
        reason = f"the journey needs PostgreSQL, and {dsn} is unreachable: {cause}"
        if os.environ.get(DSN_VARIABLE) or os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return dsn


@pytest.fixture
def database() -> Iterator[tuple[str, str]]:
    """The server's DSN and a schema name nothing uses (dropped afterwards)."""
    dsn = _dsn()
    schema = fresh_schema_name()
    try:
        yield dsn, schema
    finally:
        drop_schema(dsn, schema)


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``session-schedule`` of a fresh virtual environment with ``[cli,postgres,web]``."""
    environment = tmp_path_factory.mktemp("journey") / "venv"
    venv.EnvBuilder(with_pip=True).create(environment)
    python = environment / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"{ROOT}[cli,postgres,web]"],
        capture_output=True,
        text=True,
        env=_environment(),
        check=False,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr
    where = subprocess.run(
        [str(python), "-c", "import session_schedule; print(session_schedule.__file__)"],
        capture_output=True,
        text=True,
        env=_environment(),
        check=True,
        cwd=environment,
    ).stdout
    assert where.startswith(str(environment)), where  # the install runs, not the sources
    return environment / "bin" / "session-schedule"


def _environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without what would run the sources or configure the program."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "SESSION_SCHEDULE_", "PYTHON", "VIRTUAL_ENV"))
    }
    return {**environment, "PYTHONIOENCODING": "utf-8", **(extra or {})}


def _run(
    argv: list[str], *, stdin: str = "", extra: dict[str, str] | None = None, cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        text=True,
        env=_environment(extra),
        cwd=cwd,
        check=False,
        timeout=WAIT_SECONDS,
    )


def _messages(url: str, session_id: str) -> list[MessageEntry]:
    async def read() -> list[MessageEntry]:
        async with opened_store(parse_store_url(url)) as store:
            return messages_of((await store.read(session_id)).entries)

    return asyncio.run(read())


def _model(body: dict[str, Any]) -> Reply:
    del body
    return Answer(ANSWER)


def _first_line(process: Popen) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(WAIT_SECONDS), f"nothing printed within {WAIT_SECONDS} s"
    return process.stdout.readline()


def _stop(process: Popen, sig: signal.Signals) -> tuple[int, str, str]:
    process.send_signal(sig)
    out, err = process.communicate(timeout=WAIT_SECONDS)
    return process.returncode, out, err


def _popen(argv: list[str], *, cwd: Path, extra: dict[str, str] | None = None) -> Popen:
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(extra),
        cwd=cwd,
    )


def _chat_creates_every_kind(program: Path, home: Path, url: str, cwd: Path) -> tuple[str, str]:
    """Step 2: the new session's id and the command the chat printed to resume it."""
    at = (datetime.now(UTC) + timedelta(seconds=AT_SECONDS)).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        f"/create in {AFTER_SECONDS}s check the oven",
        f"/create at {at} call mom",
        "/create every 10m stretch",
        "/create daily 09:00 Europe/Paris mon wed fri standup",
        "/create calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris pay the rent",
        "/quit",
    ]
    chat_argv = [str(program), "--data-dir", str(home), "chat", "--store", url]
    chat = _run(chat_argv, stdin="\n".join(lines) + "\n", cwd=cwd)
    assert (chat.returncode, chat.stderr) == (0, ""), chat
    found = SESSION_LINE.search(chat.stdout)
    assert found is not None, chat.stdout
    kinds = re.findall(r'"ok":true,"schedule":\{"kind":"(\w+)"', chat.stdout)
    assert kinds == ["after", "at", "every", "daily", "calendar"], chat.stdout
    assert "follow-up" not in chat.stdout  # closed before anything was due
    hint = RESUME_HINT.search(chat.stdout)
    assert hint is not None, chat.stdout
    return found.group(1), hint.group(1)


def _host_answers(program: Path, url: str, session_id: str, cwd: Path) -> None:
    """Step 3: the host answers what comes due while the chat is closed."""
    with ScriptedEndpoint(_model) as endpoint:
        model = ["--model", "scripted", "--base-url", endpoint.base_url]
        host = _popen(
            [str(program), "--store", url, "host", "--lead", "1", "--poll", "0.2", *model],
            cwd=cwd,
            extra={"OPENAI_API_KEY": "not-needed"},
        )
        try:
            first = _first_line(host)
            deadline = time.monotonic() + AT_SECONDS + WAIT_SECONDS
            while [m.content for m in _messages(url, session_id)].count(ANSWER) < 2:
                assert time.monotonic() < deadline, "the host did not answer both reminders"
                time.sleep(0.2)
        finally:
            code, out, err = _stop(host, signal.SIGTERM)
    assert (code, err) == (0, "")
    assert first.startswith(f"session-schedule host: keeping the sessions in {url} live ")
    assert "turns retried 0, turns failed 0" in out
    followups = [m for m in _messages(url, session_id) if m.origin == "followup"]
    assert [("check the oven" in m.content, "call mom" in m.content) for m in followups] == [
        (True, False),
        (False, True),
    ]


def _chat_reopens(program: Path, home: Path, hint: str, session_id: str, cwd: Path) -> None:
    """Step 4: the chat reopens the session with the command it printed when it closed."""
    resume = shlex.split(hint)
    assert resume[0] == "session-schedule"
    argv = [str(program), "--data-dir", str(home), *resume[1:]]
    reopened = _run(argv, stdin="/quit\n", cwd=cwd)
    assert (reopened.returncode, reopened.stderr) == (0, ""), reopened
    assert f"session-schedule chat: resumed session {session_id} (" in reopened.stdout
    assert reopened.stdout.count("follow-up while you were away>") == 2
    assert reopened.stdout.count(f"assistant> {ANSWER}") == 2
    assert "note> 2 reminders were answered since your last message\n" in reopened.stdout


def _page(program: Path, home: Path, url: str, session_id: str, cwd: Path) -> None:
    """Step 5: the page on the same session."""
    serve = _popen(
        [str(program), "--data-dir", str(home), "--store", url, "serve", "--port", "0"], cwd=cwd
    )
    try:
        line = _first_line(serve)
        prefix = "session-schedule: the web overlay is at "
        assert line.startswith(prefix), line
        address, _, token = line.removeprefix(prefix).strip().partition("?token=")
        with httpx2.Client(base_url=address, timeout=WAIT_SECONDS) as client:
            # Asked the moment the address is printed: the server listens already.
            assert client.get(f"/api/sessions/{session_id}").status_code == 401
            client.headers["authorization"] = f"Bearer {token}"
            assert client.get("/api/info").json()["mode"] == "offline"
            detail = client.get(f"/api/sessions/{session_id}")
            assert detail.status_code == 200
            contents = [turn["message"]["content"] for turn in detail.json()["turns"]]
            assert contents.count(ANSWER) == 2
            created = client.post(
                f"/api/sessions/{session_id}/tools/schedule_create",
                json={"prompt": "water the plants", "after_seconds": 3600},
            )
            assert created.status_code == 200, created.text
            assert created.json()["schedule"]["id"] == "sch_6"
            prompt = client.post(
                f"/api/sessions/{session_id}/prompts", json={"text": "thanks", "zone": "UTC"}
            )
            assert (prompt.status_code, prompt.json()) == (202, {"queued": True})
            listed = client.get(f"/api/sessions/{session_id}/schedules").json()
            kinds = sorted(s["kind"] for s in listed["schedules"])
            assert kinds == ["after", "calendar", "daily", "every"]
    finally:
        code, _out, err = _stop(serve, signal.SIGINT)
    assert code == 0, err
    assert "Traceback" not in err


def test_a_newcomers_first_hour_on_postgresql(
    database: tuple[str, str], program: Path, tmp_path: Path
) -> None:
    # ``database`` first: without PostgreSQL the test is skipped before anything is installed.
    dsn, schema = database
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    home = tmp_path / "data"  # the data directory: where serve keeps its token
    started = time.monotonic()
    init = _run([str(program), "db", "init", "--dsn", dsn, "--schema", schema], cwd=tmp_path)
    assert (init.returncode, init.stderr) == (0, ""), init
    assert init.stdout.startswith(f"created schema {schema} of PostgreSQL database ")
    session_id, hint = _chat_creates_every_kind(program, home, url, tmp_path)
    _host_answers(program, url, session_id, tmp_path)
    _chat_reopens(program, home, hint, session_id, tmp_path)
    _page(program, home, url, session_id, tmp_path)
    # The log the whole journey wrote decodes strictly.
    check = _run([str(program), "--store", url, "check", session_id], cwd=tmp_path)
    assert check.returncode == 0, check
    print(f"\nthe journey took {time.monotonic() - started:.1f} s after the install")
