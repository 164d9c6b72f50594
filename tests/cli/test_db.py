"""``session-schedule db init`` / ``db migrate``: idempotent, refusing newer schemas, lazy."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from session_schedule.cli import common
from session_schedule.cli.main import main
from session_schedule.session import SessionError, postgres_schema
from session_schedule.session.location import PostgresLocation, setup_command
from session_schedule.session.postgres import PostgresSessionStore
from session_schedule.session.postgres_schema import SCHEMA_VERSION
from tests.postgres import DSN_VARIABLE, drop_schema, execute, fresh_schema_name, server_dsn


@pytest.fixture
def dsn() -> str:
    return server_dsn()


@pytest.fixture
def schema(dsn: str) -> Iterator[str]:
    name = fresh_schema_name()
    yield name
    drop_schema(dsn, name)


TABLES = ["checkpoints", "entries", "leases", "next_targets", "schema_version", "sessions"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def tables(dsn: str, schema: str) -> list[str]:
    rows = execute(
        dsn,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
        schema,
    )
    return [str(row[0]) for row in rows]


def versions(dsn: str, schema: str) -> list[int]:
    rows = execute(dsn, f"SELECT version FROM {schema}.schema_version ORDER BY version")
    return [int(str(row[0])) for row in rows]


def database(dsn: str) -> str:
    return str(execute(dsn, "SELECT current_database()")[0][0])


def test_init_and_migrate_are_idempotent(
    dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = f"schema {schema} of PostgreSQL database {database(dsn)}"
    assert run(capsys, "db", "init", "--dsn", dsn, "--schema", schema) == (
        0,
        f"created {where} at version {SCHEMA_VERSION}\n",
        "",
    )
    assert tables(dsn, schema) == TABLES
    already = f"{where} is at version {SCHEMA_VERSION} already; nothing to do\n"
    for command in ("init", "migrate", "migrate"):
        assert run(capsys, "db", command, "--dsn", dsn, "--schema", schema) == (0, already, "")
    assert versions(dsn, schema) == list(range(1, SCHEMA_VERSION + 1))


def test_migrate_creates_a_missing_schema_and_reads_the_dsn_from_the_environment(
    dsn: str, schema: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESSION_SCHEDULE_PG_DSN", dsn)
    code, out, _ = run(capsys, "db", "migrate", "--schema", schema)
    assert (code, out) == (
        0,
        f"created schema {schema} of PostgreSQL database {database(dsn)} "
        f"at version {SCHEMA_VERSION}\n",
    )
    assert tables(dsn, schema) == TABLES


def _url(dsn: str, schema: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


@pytest.mark.parametrize("given", ["--store", "before", "variable", "--dsn", "dsn variable"])
def test_the_store_url_names_the_schema_as_for_every_command(
    dsn: str,
    schema: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    given: str,
) -> None:
    """``?schema=`` is the schema, not a parameter for the driver, whichever way the URL comes;
    ``--schema`` still wins over it."""
    monkeypatch.delenv("SESSION_SCHEDULE_PG_DSN", raising=False)
    monkeypatch.delenv("SESSION_SCHEDULE_STORE", raising=False)
    url = _url(dsn, schema)
    argv = {
        "--store": ["db", "init", "--store", url],
        "before": ["--store", url, "db", "init"],
        "variable": ["db", "init"],
        "--dsn": ["db", "init", "--dsn", url],
        "dsn variable": ["db", "init"],
    }[given]
    if given == "variable":
        monkeypatch.setenv("SESSION_SCHEDULE_STORE", url)
    if given == "dsn variable":
        monkeypatch.setenv("SESSION_SCHEDULE_PG_DSN", url)
    where = f"schema {schema} of PostgreSQL database {database(dsn)}"
    assert run(capsys, *argv) == (0, f"created {where} at version {SCHEMA_VERSION}\n", "")
    assert tables(dsn, schema) == TABLES
    other = f"{schema}_b"
    try:
        code, out, _ = run(capsys, *argv, "--schema", other)
        assert (code, out) == (
            0,
            f"created schema {other} of PostgreSQL database {database(dsn)} "
            f"at version {SCHEMA_VERSION}\n",
        )
    finally:
        drop_schema(dsn, other)


def test_the_command_a_missing_schema_names_creates_it_as_printed(
    dsn: str, schema: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint names the store's database and schema, so that pasted it creates that schema,
    not the default one, and needs no --dsn."""
    monkeypatch.delenv("SESSION_SCHEDULE_PG_DSN", raising=False)
    monkeypatch.delenv("SESSION_SCHEDULE_STORE", raising=False)
    url = _url(dsn, schema)
    code, out, err = run(capsys, "--store", url, "sessions")
    command = f"session-schedule --store {shlex.quote(url)} db init"
    assert (code, out, err) == (
        6,
        "",
        f"session-schedule: schema {schema} of PostgreSQL database {database(dsn)} holds no "
        f"session store; create it with `{command}`\n",
    )
    printed = shlex.split(err.split("`")[1])
    assert printed[0] == "session-schedule"
    assert run(capsys, *printed[1:])[0] == 0
    assert tables(dsn, schema) == TABLES
    assert run(capsys, "--store", url, "sessions") == (0, f"no sessions in {url}\n", "")


def test_a_newer_schema_is_refused_and_left_alone(
    dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "db", "init", "--dsn", dsn, "--schema", schema)[0] == 0
    newer = SCHEMA_VERSION + 1
    execute(dsn, f"INSERT INTO {schema}.schema_version (version) VALUES (%s)", newer)
    for command in ("init", "migrate"):
        assert run(capsys, "db", command, "--dsn", dsn, "--schema", schema) == (
            6,
            "",
            f"session-schedule: schema {schema} of PostgreSQL database {database(dsn)} is at "
            f"version {newer}, newer than this program's {SCHEMA_VERSION}; upgrade the program\n",
        )
    assert versions(dsn, schema) == [*range(1, SCHEMA_VERSION + 1), newer]
    assert tables(dsn, schema) == TABLES


def test_bad_invocations(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SESSION_SCHEDULE_PG_DSN", raising=False)
    monkeypatch.delenv("SESSION_SCHEDULE_STORE", raising=False)
    assert run(capsys, "db", "init") == (
        2,
        "",
        "session-schedule: db init needs the PostgreSQL store: --store postgresql://… (or "
        "$SESSION_SCHEDULE_STORE), or --dsn (or $SESSION_SCHEDULE_PG_DSN)\n",
    )
    assert run(capsys, "--store", "sqlite:s.db", "db", "migrate") == (
        2,
        "",
        f"session-schedule: db migrate sets up a PostgreSQL store, and --store names "
        f"sqlite:{Path.cwd() / 's.db'}; give a postgresql://… URL\n",
    )
    assert run(capsys, "db", "init", "--store", "postgresql:///x", "--dsn", "postgresql:///x") == (
        2,
        "",
        "session-schedule: db init takes --dsn or --store, not both\n",
    )
    for url in ("--dsn", "--store"):
        assert run(capsys, "db", "init", url, "postgresql:///x?schema=1abc") == (
            2,
            "",
            "session-schedule: '1abc' cannot name a schema: use 1 to 63 lower-case letters, "
            "digits or underscores, not starting with a digit\n",
        )
    assert run(capsys, "db", "migrate", "--dsn", "postgresql:///x", "--schema", "Bad") == (
        2,
        "",
        "session-schedule: 'Bad' cannot name a schema: use 1 to 63 lower-case letters, digits "
        "or underscores, not starting with a digit\n",
    )
    # A port nothing listens on (the server under test, if any, is elsewhere).
    code, out, err = run(
        capsys, "db", "init", "--dsn", "postgresql://nobody:secret@127.0.0.1:1/x?connect_timeout=5"
    )
    assert (code, out) == (6, "")
    assert err.startswith("session-schedule: the database could not be used: connection failed")
    assert "secret" not in err
    assert err.count("\n") == 1


def test_the_program_starts_without_importing_psycopg() -> None:
    script = (
        "import sys\n"
        "from session_schedule.cli.main import build_parser\n"
        "build_parser()\n"
        "print(sorted(name for name in sys.modules if name.startswith('psycopg')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout == "[]\n"


def test_the_commands_default_to_the_stores_schema() -> None:
    assert common.DEFAULT_SCHEMA == postgres_schema.DEFAULT_SCHEMA
    assert common.DSN_VARIABLE == DSN_VARIABLE


def test_a_version_1_schema_gets_the_checkpoints_table(
    dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "db", "init", "--dsn", dsn, "--schema", schema)[0] == 0
    execute(dsn, f"DROP TABLE {schema}.checkpoints")
    execute(dsn, f"DELETE FROM {schema}.schema_version WHERE version = 2")
    where = f"schema {schema} of PostgreSQL database {database(dsn)}"
    assert run(capsys, "db", "migrate", "--dsn", dsn, "--schema", schema) == (
        0,
        f"upgraded {where} from version 1 to 2\n",
        "",
    )
    assert tables(dsn, schema) == TABLES
    assert versions(dsn, schema) == [1, 2]


def test_an_older_schema_is_upgraded_by_migrate_only(
    dsn: str, schema: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(capsys, "db", "init", "--dsn", dsn, "--schema", schema)[0] == 0
    # This program, one version later: one more step.
    newer = SCHEMA_VERSION + 1
    monkeypatch.setattr(postgres_schema, "SCHEMA_VERSION", newer)
    monkeypatch.setattr(
        postgres_schema,
        "_STEPS",
        (*postgres_schema._STEPS, ("CREATE TABLE {s}.notes (body text)",)),
    )
    where = f"schema {schema} of PostgreSQL database {database(dsn)}"
    with pytest.raises(SessionError) as refused:
        asyncio.run(PostgresSessionStore(dsn, schema=schema).list())
    upgrade = setup_command(PostgresLocation(dsn=dsn, schema=schema), "migrate")
    assert refused.value.message == (
        f"{where} is at version {SCHEMA_VERSION}, but this program uses version {newer}; "
        f"upgrade it with `{upgrade}`"
    )
    assert run(capsys, "db", "init", "--dsn", dsn, "--schema", schema) == (
        0,
        f"{where} is at version {SCHEMA_VERSION}; this program uses {newer}: upgrade it with "
        f"`{upgrade}`\n",
        "",
    )
    assert "notes" not in tables(dsn, schema)
    assert run(capsys, "db", "migrate", "--dsn", dsn, "--schema", schema) == (
        0,
        f"upgraded {where} from version {SCHEMA_VERSION} to {newer}\n",
        "",
    )
    assert "notes" in tables(dsn, schema)
    assert versions(dsn, schema) == list(range(1, newer + 1))
    assert run(capsys, "db", "migrate", "--dsn", dsn, "--schema", schema) == (
        0,
        f"{where} is at version {newer} already; nothing to do\n",
        "",
    )


@pytest.fixture
def other_role(dsn: str) -> Iterator[str]:
    """A role that is not the one the program connects as."""
    role = fresh_schema_name().replace("test_", "role_")
    execute(dsn, f"CREATE ROLE {role} NOLOGIN")
    yield role
    execute(dsn, f"DROP OWNED BY {role} CASCADE")
    execute(dsn, f"DROP ROLE {role}")


def test_a_schema_another_role_owns_is_refused_and_left_alone(
    dsn: str, schema: str, other_role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    execute(dsn, f"CREATE SCHEMA {schema} AUTHORIZATION {other_role}")
    role = str(execute(dsn, "SELECT current_user")[0][0])
    for command in ("init", "migrate"):
        assert run(capsys, "db", command, "--dsn", dsn, "--schema", schema) == (
            6,
            "",
            f"session-schedule: schema {schema} of PostgreSQL database {database(dsn)} is owned "
            f"by the role {other_role}, not by {role}, the role this program connects as; the "
            f"owner could drop or replace the store's tables. Use a schema {role} owns "
            f"(--schema), or connect as {other_role}\n",
        )
    assert tables(dsn, schema) == []


def test_look_alike_tables_another_role_owns_are_refused_by_name(
    dsn: str, schema: str, other_role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tables set up in advance, owned by another role: it could read every entry, or a trigger
    on them copy each one out."""
    assert run(capsys, "db", "init", "--dsn", dsn, "--schema", schema)[0] == 0
    execute(dsn, f"ALTER TABLE {schema}.entries OWNER TO {other_role}")
    role = str(execute(dsn, "SELECT current_user")[0][0])
    code, out, err = run(capsys, "db", "migrate", "--dsn", dsn, "--schema", schema)
    assert (code, out) == (6, "")
    assert err == (
        f"session-schedule: schema {schema} of PostgreSQL database {database(dsn)} holds entries "
        f"(owned by {other_role}), entries_pkey (owned by {other_role}), not owned by {role}, "
        "the role this program connects as; another role's table can be dropped or read by it. "
        "Move them out of the schema, or use another schema (--schema)\n"
    )


def test_a_trigger_on_the_stores_tables_is_refused_by_name(
    dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "db", "init", "--dsn", dsn, "--schema", schema)[0] == 0
    execute(
        dsn,
        f"CREATE FUNCTION {schema}.copy_out() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RETURN NEW; END $$",
    )
    execute(
        dsn,
        f"CREATE TRIGGER copy_out AFTER INSERT ON {schema}.entries "
        f"FOR EACH ROW EXECUTE FUNCTION {schema}.copy_out()",
    )
    assert run(capsys, "db", "init", "--dsn", dsn, "--schema", schema) == (
        6,
        "",
        f"session-schedule: schema {schema} of PostgreSQL database {database(dsn)} has triggers "
        "the store does not make (entries.copy_out); a trigger can copy entries elsewhere. "
        "Drop them, or use another schema (--schema)\n",
    )
