"""One store option for every command: the same session, kept in JSONL, SQLite or PostgreSQL,
reads the same through every operator command, and the chat's hints name the store they used."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import shlex
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from session_schedule.cli import reading
from session_schedule.cli.main import main
from session_schedule.host import HostStats
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session import SessionId, user_message
from session_schedule.session.location import (
    PostgresLocation,
    SqliteLocation,
    opened_store,
    parse_store_url,
)
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"
NOW = "2026-11-29T23:30:00.000Z"
SESSION = SessionId("s_store0000001")
STORES = ["jsonl", "sqlite", "postgresql"]


async def _build(url: str) -> None:
    """A session with a transcript, a dispatched one-shot, an overdue hourly and a future one."""
    clock = FakeClock(START)
    agent = FakeAgent()
    async with (
        opened_store(parse_store_url(url)) as store,
        await store.create(now=clock.now(), session_id=SESSION) as session,
        LiveSchedule(session, agent, clock=clock) as schedule,
    ):
        session.append("message", user_message("remind me", at=clock.now()))
        await schedule.create({"prompt": "stretch", "after_seconds": 90})
        await schedule.create({"prompt": "hourly check", "every_seconds": 3600})
        await schedule.create({"prompt": "new year", "at": "2030-01-01T09:00:00+09:00"})
        await schedule.settled()
        clock.advance(90)
        await schedule.settled()
        await session.barrier()
    assert len(agent.followups) == 1


@pytest.fixture(autouse=True)
def fixed_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "clock", FakeClock(NOW))
    monkeypatch.delenv("SESSION_SCHEDULE_STORE", raising=False)


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a store of each kind, holding the session."""
    kind: str = request.param
    if kind == "postgresql":
        from tests.postgres import migrated_schema, server_dsn  # noqa: PLC0415 - needs psycopg

        dsn = server_dsn()
        with migrated_schema(dsn) as schema:
            joined = "&" if "?" in dsn else "?"
            found = f"{dsn}{joined}schema={schema}"
            asyncio.run(_build(found))
            yield found
        return
    found = f"jsonl:{tmp_path / 'sessions'}" if kind == "jsonl" else f"sqlite:{tmp_path / 's.db'}"
    asyncio.run(_build(found))
    yield found


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _reference(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What the command prints for the same session in a JSONL store."""
    reference = f"jsonl:{tmp_path / 'reference'}"
    if not (tmp_path / "reference").exists():
        asyncio.run(_build(reference))
    code, out, _ = _run(capsys, "--store", reference, *argv)
    assert code == 0
    return out


@pytest.mark.parametrize(
    "argv",
    [
        ["list", SESSION, "--json"],
        ["list", SESSION],
        ["timeline", SESSION, "--json"],
        ["timeline", SESSION, "--until", "7d"],
        ["history", SESSION, "--json"],
        ["show", SESSION],
        ["check", SESSION],
    ],
    ids=" ".join,
)
def test_every_operator_command_reads_every_store_alike(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    expected = _reference(tmp_path, capsys, *argv)
    code, out, err = _run(capsys, *argv[:1], "--store", url, *argv[1:])
    assert (code, err) == (0, "")
    assert out == expected


def _edit_row(url: str, position: int, old: str, new: str) -> None:
    """Replace ``old`` with ``new`` in the stored row ``position`` of the session, by hand."""
    location = parse_store_url(url)
    if isinstance(location, SqliteLocation):
        with contextlib.closing(sqlite3.connect(location.path)) as connection, connection:
            connection.execute(
                "UPDATE entries SET data = replace(data, ?, ?) WHERE position = ?",
                (old, new, position),
            )
        return
    assert isinstance(location, PostgresLocation)
    from tests.postgres import execute  # noqa: PLC0415 - needs psycopg

    execute(
        location.dsn,
        f"UPDATE {location.schema}.entries SET data = convert_to(replace("
        "convert_from(data, 'UTF8'), %s, %s), 'UTF8') WHERE position = %s",
        old,
        new,
        position,
    )


@pytest.mark.parametrize("url", ["sqlite", "postgresql"], indirect=True)
def test_check_finds_a_row_edited_by_hand_under_the_checkpoint(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows carry no checksum and an open from the checkpoint does not fold the rows it
    covers: a reminder's prompt edited there once passed as sound while the live schedule
    still delivered the checkpoint's."""
    _edit_row(url, 2, "hourly check", "hourly chore")
    code, out, _ = _run(capsys, "--store", url, "list", SESSION)
    assert (code, "hourly chore" in out) == (0, True)
    code, out, err = _run(capsys, "--store", url, "check", SESSION)
    delete = (
        "DELETE FROM checkpoints"
        if url.startswith("sqlite:")
        else f'DELETE FROM "{url.rpartition("schema=")[2]}".checkpoints'
    )
    assert (code, out) == (5, "")
    assert err == (
        f"session-schedule: session {SESSION} has derived data that contradicts its log: its "
        "checkpoint (its row in the checkpoints table) is bound to its log but does not say "
        "what the log says (its active reminders are not the log's); delete the checkpoint "
        f"({delete} WHERE session_id = '{SESSION}'; it is rebuilt from the log)\n"
    )


def test_sessions_lists_the_sessions_of_any_store(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "sessions", "--store", url, "--json")
    assert code == 0
    (summary,) = json.loads(out)
    assert summary["id"] == SESSION
    assert summary["activeReminders"] == 2
    assert summary["problem"] is None


def test_fork_forks_in_any_store(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--store", url, "fork", SESSION, "--at", "1")
    assert code == 0
    child = out.strip()
    code, out, _ = _run(capsys, "--store", url, "check", child)
    assert code == 0
    assert out.startswith(f"session {child} is sound: 1 entry")


def test_the_store_variable_names_the_store_when_no_option_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:{tmp_path / 's.db'}"
    asyncio.run(_build(url))
    monkeypatch.setenv("SESSION_SCHEDULE_STORE", url)
    code, out, _ = _run(capsys, "--data-dir", str(tmp_path / "empty"), "sessions", "--json")
    assert code == 0
    assert [summary["id"] for summary in json.loads(out)] == [SESSION]
    # The option wins over the variable.
    code, out, _ = _run(capsys, "sessions", "--store", f"jsonl:{tmp_path / 'empty'}")
    assert (code, out) == (0, f"no sessions in jsonl:{tmp_path / 'empty'}\n")


@pytest.mark.parametrize(
    "argv", [["sessions"], ["list", SESSION], ["chat"], ["host"], ["mcp"]], ids=" ".join
)
def test_a_store_that_is_not_a_url_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = _run(capsys, *argv, "--store", "mysql://db/app")
    assert (code, out) == (2, "")
    assert err == (
        "session-schedule: 'mysql://db/app' is not a store URL; write jsonl:DIR, sqlite:PATH or "
        "postgresql://…, such as sqlite:sessions.db\n"
    )


_COMMANDS_OF_A_SESSION = [
    ["sessions"],
    ["list", SESSION],
    ["show", SESSION],
    ["history", SESSION],
    ["check", SESSION],
    ["timeline", SESSION],
    ["fork", SESSION],
    ["chat"],
    ["host"],
]


@pytest.mark.parametrize("argv", _COMMANDS_OF_A_SESSION, ids=" ".join)
@pytest.mark.parametrize("given", ["option", "variable"])
def test_a_url_schema_that_cannot_name_a_schema_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    given: str,
) -> None:
    """Not a traceback (exit 1) when the store first connects: one line, exit 2, every command
    alike, with the rule a name must follow. No server is needed: nothing connects."""
    url = "postgresql://app@127.0.0.1:1/app?schema=Bad"
    if given == "option":
        code, out, err = _run(capsys, *argv, "--store", url)
    else:
        monkeypatch.setenv("SESSION_SCHEDULE_STORE", url)
        code, out, err = _run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == (
        "session-schedule: 'Bad' cannot name a schema: use 1 to 63 lower-case letters, digits or "
        "underscores, not starting with a digit\n"
    )


def test_a_sqlite_chat_names_its_store_in_every_hint_and_resumes_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SESSION_SCHEDULE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:{tmp_path / 's.db'}"
    monkeypatch.setattr("sys.stdin", io.StringIO("/create in 1 hour drink water\n"))
    code, out, _ = _run(capsys, "chat", "--store", url)
    assert code == 0
    assert f"store: {url}\n" in out
    found = re.search(r"resume it with: (session-schedule --store \S+ chat (s_\w+))\n", out)
    assert found is not None, out
    assert found.group(1) == f"session-schedule --store {url} chat {found.group(2)}"
    # The hint works: the session is resumed from the SQLite store, its reminder listed.
    monkeypatch.setattr("sys.stdin", io.StringIO("/list\n"))
    code, out, _ = _run(capsys, "--store", url, "chat", found.group(2))
    assert code == 0
    assert f"resumed session {found.group(2)}" in out
    assert '"prompt":"drink water"' in out
    code, out, _ = _run(capsys, "--store", url, "sessions", "--json")
    assert [summary["id"] for summary in json.loads(out)] == [found.group(2)]


@pytest.mark.parametrize(
    ("options", "banner"),
    [
        (["--store", "sqlite:my sessions.db"], "sqlite:{here}/my sessions.db"),
        (["--store", "jsonl:sessions"], "jsonl:{here}/sessions"),
        (["--data-dir", "data dir"], "jsonl:{here}/data dir"),
        (["--data-dir", "data", "--store", "sqlite"], "sqlite:{here}/data/sessions.db"),
    ],
    ids=["sqlite-file", "jsonl-directory", "data-dir", "data-dir-sqlite"],
)
def test_a_hint_naming_a_relative_store_works_from_another_directory(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    options: list[str],
    banner: str,
) -> None:
    for name in ("SESSION_SCHEDULE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SESSION_SCHEDULE_STORE", raising=False)
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setattr("sys.stdin", io.StringIO("/create in 1 hour drink water\n"))
    code, out, _ = _run(capsys, *options, "chat")
    assert code == 0
    assert f"store: {banner.format(here=here)}\n" in out
    found = re.search(r"resume it with: (session-schedule .+ chat (s_\w+))\n", out)
    assert found is not None, out
    hint = shlex.split(found.group(1))
    # The hint, run as printed from another directory, resumes the session from the same store.
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr("sys.stdin", io.StringIO("/list\n"))
    code, out, err = _run(capsys, *hint[1:])
    assert (code, err) == (0, "")
    assert f"resumed session {found.group(2)}" in out
    assert '"prompt":"drink water"' in out
    assert list(elsewhere.iterdir()) == []


def test_the_old_chat_store_words_still_name_the_data_directorys_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SESSION_SCHEDULE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, out, _ = _run(capsys, "--data-dir", str(tmp_path), "chat", "--store", "sqlite")
    assert code == 0
    assert f"store: sqlite:{tmp_path / 'sessions.db'}\n" in out
    assert f"--store sqlite:{tmp_path / 'sessions.db'} chat s_" in out
    assert (tmp_path / "sessions.db").exists()


class _ServesNothing:
    """Stands in for the overlay's server: returns at once (a start that should have been
    refused ends, rather than serving until stopped)."""

    def __init__(self, app: object, *, limits: object) -> None:
        del app, limits

    async def serve(self, sockets: list[socket.socket]) -> None:
        del sockets


class _StopsAtOnce:
    """Stands in for the host's scheduler: stops at once, having served nothing."""

    def __init__(self, store: object, agents: object, *, settings: object) -> None:
        del store, agents, settings
        self.stats = HostStats()
        self.failure: BaseException | None = None

    async def __aenter__(self) -> _StopsAtOnce:
        return self

    async def __aexit__(self, *exception: object) -> None:
        return None

    async def wait_stopped(self) -> None:
        return None


@pytest.fixture
def serving_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """``host`` and ``serve`` start, if they start, and stop at once."""
    monkeypatch.setattr("session_schedule.web.server.OverlayServer", _ServesNothing)
    monkeypatch.setattr("session_schedule.cli.host.ScheduleHost", _StopsAtOnce)
    for name in ("SESSION_SCHEDULE_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


SERVING: Final = [["host"], ["serve", "--port", "0"]]
"""The commands that serve a store until stopped."""


@pytest.mark.usefixtures("serving_nothing")
@pytest.mark.parametrize(
    "argv",
    [["check", SESSION], ["show", SESSION], ["list", SESSION], ["sessions"], *SERVING],
    ids=" ".join,
)
def test_a_damaged_sqlite_database_is_exit_5_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    path = tmp_path / "s.db"
    asyncio.run(_build(f"sqlite:{path}"))
    with path.open("r+b") as file:
        file.truncate(8192)
    data_dir = tmp_path / "data"
    code, out, err = _run(capsys, "--data-dir", str(data_dir), *argv, "--store", f"sqlite:{path}")
    concerning = f"session {SESSION} cannot be read: " if SESSION in argv else ""
    assert (code, out) == (5, "")
    assert err == (
        f"session-schedule: {concerning}the SQLite database {path} is damaged (database disk "
        "image is malformed); it was left untouched for inspection — recover what it holds "
        f"with `sqlite3 {path} .recover`, or restore it from a backup\n"
    )
    assert not data_dir.exists()  # no token kept for a store that was refused


@pytest.mark.parametrize("argv", [["check", SESSION], ["sessions"]], ids=" ".join)
def test_a_directory_named_as_a_sqlite_database_is_exit_6(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    path = tmp_path / "s.db"
    path.mkdir()
    code, out, err = _run(capsys, *argv, "--store", f"sqlite:{path}")
    concerning = f"session {SESSION} is out of reach: " if len(argv) > 1 else ""
    assert (code, out) == (6, "")
    assert err == (
        f"session-schedule: {concerning}the SQLite database {path} cannot be used (it is a "
        "directory, not a database file); check the file, its directory and the disk, then try "
        "again\n"
    )


@pytest.mark.usefixtures("serving_nothing")
@pytest.mark.parametrize(
    "argv", [["sessions"], ["check", SESSION], ["list", SESSION], *SERVING], ids=" ".join
)
def test_a_file_named_as_a_jsonl_store_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """``host`` and ``serve`` too: before they say they started, not serving nothing."""
    path = tmp_path / "notes.txt"
    path.write_text("not a directory\n")
    data_dir = tmp_path / "data"
    code, out, err = _run(capsys, "--data-dir", str(data_dir), *argv, "--store", f"jsonl:{path}")
    assert (code, out) == (6, "")
    assert err == f"session-schedule: [Errno 20] it is not a directory: '{path}'\n"
    assert not data_dir.exists()  # no token kept for a store that was refused


@pytest.mark.usefixtures("serving_nothing")
@pytest.mark.parametrize("argv", [["sessions"], *SERVING], ids=" ".join)
def test_a_postgresql_schema_that_does_not_exist_is_refused_with_the_command_that_creates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """``host`` and ``serve`` too: at start, not with a 409 and a traceback on every request."""
    from tests.postgres import execute, fresh_schema_name, server_dsn  # noqa: PLC0415

    dsn = server_dsn()
    schema = fresh_schema_name()  # never created
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    data_dir = tmp_path / "data"
    code, out, err = _run(capsys, "--data-dir", str(data_dir), *argv, "--store", url)
    database = execute(dsn, "SELECT current_database()")[0][0]
    assert (code, out) == (6, "")
    assert err == (
        f"session-schedule: schema {schema} of PostgreSQL database {database} holds no session "
        f"store; create it with `session-schedule --store {shlex.quote(url)} db init`\n"
    )
    assert not data_dir.exists()
    assert execute(
        dsn, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", schema
    ) == [(0,)]
