"""Store URLs: each form read into its location, written back for hints, opened as its store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from session_schedule.session import JsonlSessionStore, SqliteSessionStore
from session_schedule.session.location import (
    JsonlLocation,
    PostgresLocation,
    SqliteLocation,
    StoreLocation,
    check_store,
    open_store,
    opened_store,
    parse_dsn,
    parse_store_url,
    setup_command,
    store_url,
)
from session_schedule.session.private import NotPrivateFile


@pytest.mark.parametrize(
    ("text", "location"),
    [
        ("jsonl:/data/sessions", JsonlLocation(directory=Path("/data/sessions"))),
        ("jsonl:relative/dir", JsonlLocation(directory=Path("relative/dir"))),
        ("JSONL:/data", JsonlLocation(directory=Path("/data"))),
        ("sqlite:/data/sessions.db", SqliteLocation(path=Path("/data/sessions.db"))),
        ("sqlite:sessions.db", SqliteLocation(path=Path("sessions.db"))),
        ("sqlite:~/s.db", SqliteLocation(path=Path.home() / "s.db")),
        (
            "postgresql://app@db.internal/app",
            PostgresLocation(dsn="postgresql://app@db.internal/app"),
        ),
        (
            "postgres://app@db/app?sslmode=require",
            PostgresLocation(dsn="postgres://app@db/app?sslmode=require"),
        ),
    ],
)
def test_a_store_url_names_its_location(text: str, location: StoreLocation) -> None:
    assert parse_store_url(text) == location


NOT_A_URL = (
    "{!r} is not a store URL; write jsonl:DIR, sqlite:PATH or postgresql://…, such as "
    "sqlite:sessions.db"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", NOT_A_URL.format("")),
        ("sessions.db", NOT_A_URL.format("sessions.db")),
        ("mysql://db/app", NOT_A_URL.format("mysql://db/app")),
        ("postgresql:app", NOT_A_URL.format("postgresql:app")),
        (
            "jsonl:",
            "the store URL 'jsonl:' names no directory; write jsonl:DIR, such as jsonl:~/sessions",
        ),
        (
            "sqlite:",
            "the store URL 'sqlite:' names no file; write sqlite:PATH, such as sqlite:~/sessions.db",
        ),
    ],
)
def test_anything_else_is_refused_with_the_forms(text: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_store_url(text)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("location", "url"),
    [
        (JsonlLocation(directory=Path("/d")), "jsonl:/d"),
        (SqliteLocation(path=Path("/d/s.db")), "sqlite:/d/s.db"),
        (PostgresLocation(dsn="postgresql://app@db/app"), "postgresql://app@db/app"),
        (
            PostgresLocation(dsn="postgresql://app:secret@db:5432/app"),
            "postgresql://app:***@db:5432/app",
        ),
        (
            PostgresLocation(dsn="host=db user=app password=secret"),
            "postgresql:host=db user=app password=***",
        ),
    ],
)
def test_a_location_is_written_back_without_its_password(location: StoreLocation, url: str) -> None:
    assert store_url(location) == url


def test_a_relative_location_is_written_back_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert store_url(parse_store_url("jsonl:sessions")) == f"jsonl:{tmp_path / 'sessions'}"
    assert store_url(parse_store_url("sqlite:s.db")) == f"sqlite:{tmp_path / 's.db'}"


def test_a_written_url_reads_back_as_the_same_location() -> None:
    for location in (
        JsonlLocation(directory=Path("/d")),
        SqliteLocation(path=Path("/d/s.db")),
        PostgresLocation(dsn="postgresql://app@db/app"),
    ):
        assert parse_store_url(store_url(location)) == location


def test_open_store_makes_the_backend_of_the_location(tmp_path: Path) -> None:
    jsonl = open_store(JsonlLocation(directory=tmp_path / "j"))
    assert isinstance(jsonl, JsonlSessionStore)
    assert jsonl.data_dir == tmp_path / "j"
    sqlite = open_store(SqliteLocation(path=tmp_path / "s.db"))
    assert isinstance(sqlite, SqliteSessionStore)
    assert sqlite.path == tmp_path / "s.db"
    assert list(tmp_path.iterdir()) == []  # nothing is created before it is used


def test_a_postgresql_url_may_name_the_schema_of_its_tables() -> None:
    location = parse_store_url("postgresql://app@db/app?sslmode=require&schema=reminders")
    assert location == PostgresLocation(
        dsn="postgresql://app@db/app?sslmode=require", schema="reminders"
    )
    assert store_url(location) == "postgresql://app@db/app?sslmode=require&schema=reminders"
    assert parse_store_url(store_url(location)) == location
    with pytest.raises(ValueError, match="must name one schema"):
        parse_store_url("postgresql://app@db/app?schema=a&schema=b")


@pytest.mark.parametrize("schema", ["Bad", "1abc", "a-b", "x" * 64])
def test_a_url_schema_that_cannot_name_a_schema_is_refused_as_it_is_read(schema: str) -> None:
    """The schema is checked with the URL, not when the store first connects: every command
    refuses it as a usage error."""
    for read in (parse_store_url, parse_dsn):
        with pytest.raises(ValueError) as refused:
            read(f"postgresql://app@db/app?schema={schema}")
        assert str(refused.value) == (
            f"{schema!r} cannot name a schema: use 1 to 63 lower-case letters, digits or "
            "underscores, not starting with a digit"
        )


def test_a_dsn_is_a_url_with_its_schema_or_a_keyword_string() -> None:
    assert parse_dsn("postgresql://app@db/app?schema=reminders&sslmode=require") == (
        PostgresLocation(dsn="postgresql://app@db/app?sslmode=require", schema="reminders")
    )
    assert parse_dsn("host=db dbname=app") == PostgresLocation(dsn="host=db dbname=app")


def test_the_setup_command_names_the_store_and_hides_the_password() -> None:
    url = parse_store_url("postgresql://app:secret@db/app?schema=reminders")
    assert isinstance(url, PostgresLocation)
    assert setup_command(url, "init") == (
        "session-schedule --store 'postgresql://app:***@db/app?schema=reminders' db init"
    )
    keywords = PostgresLocation(dsn="host=db password=secret", schema="reminders")
    assert setup_command(keywords, "migrate") == (
        "session-schedule db migrate --dsn 'host=db password=***' --schema reminders"
    )
    assert setup_command(PostgresLocation(dsn="postgresql://app@db/app"), "init") == (
        "session-schedule --store postgresql://app@db/app db init"
    )


def _check(location: StoreLocation) -> None:
    async def check() -> None:
        async with opened_store(location) as store:
            await check_store(store)

    asyncio.run(check())


def test_check_store_refuses_a_file_named_as_a_jsonl_store(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a directory\n")
    with pytest.raises(NotPrivateFile) as raised:
        _check(JsonlLocation(directory=path))
    assert str(raised.value) == f"[Errno 20] it is not a directory: '{path}'"


def test_check_store_passes_a_store_not_created_yet_and_creates_nothing(tmp_path: Path) -> None:
    _check(JsonlLocation(directory=tmp_path / "none" / "sessions"))
    _check(SqliteLocation(path=tmp_path / "none" / "sessions.db"))
    assert list(tmp_path.iterdir()) == []
