"""Store URLs: each form read into its location, written back for hints, opened as its store."""

from __future__ import annotations

from pathlib import Path

import pytest

from session_schedule.session import JsonlSessionStore, SqliteSessionStore
from session_schedule.session.location import (
    JsonlLocation,
    PostgresLocation,
    SqliteLocation,
    StoreLocation,
    open_store,
    parse_store_url,
    store_url,
)


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
