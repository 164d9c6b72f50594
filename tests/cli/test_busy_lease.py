"""The chat opening a PostgreSQL session whose holder's lease is what keeps it: a process that
was killed keeps its lease until it lapses, so the chat says when that is and what works then
(there is no process to close). Against the test server (``tests/postgres.py``: never skipped
under CI)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import session_schedule
from session_schedule.cli.main import main
from session_schedule.session.postgres import PostgresSessionStore
from session_schedule.testing.clock import FakeClock
from tests.postgres import execute, migrated_schema, server_dsn

START = "2026-11-29T20:00:00.000Z"
LEASE_SECONDS = 30


def _busy(session_id: str, seconds: int) -> str:
    return (
        f"session-schedule: session {session_id} is held by another process whose lease lapses "
        f"within {seconds} s if that process is gone; try again after that (or with a "
        f"--busy-wait longer than {seconds} s), or close the session where it is open\n"
    )


@pytest.fixture
def place() -> Iterator[tuple[str, str]]:
    dsn = server_dsn()
    with migrated_schema(dsn) as schema:
        yield dsn, schema


def _url(dsn: str, schema: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


def _session(dsn: str, schema: str) -> str:
    async def create() -> str:
        store = PostgresSessionStore(dsn, schema=schema)
        try:
            handle = await store.create(now=FakeClock(START).now())
            await handle.close()
            return handle.id
        finally:
            await store.close()

    return asyncio.run(create())


def _left_by_a_killed_process(dsn: str, schema: str, session_id: str, seconds: float) -> None:
    """The lease row a holder killed just now leaves: taken, live for ``seconds`` more, and
    nobody to renew or release it."""
    execute(
        dsn,
        f"UPDATE {schema}.leases SET epoch = epoch + 1, holder = 'elsewhere pid 1',"
        " expires_at = now() + make_interval(secs => %s) WHERE session_id = %s",
        seconds,
        session_id,
    )


def test_a_session_a_killed_process_leased_says_when_the_lease_lapses(
    place: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    dsn, schema = place
    session_id = _session(dsn, schema)
    _left_by_a_killed_process(dsn, schema, session_id, LEASE_SECONDS)
    code = main(["--store", _url(dsn, schema), "chat", session_id, "--busy-wait", "0"])
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err) == (4, "", _busy(session_id, LEASE_SECONDS))


def test_the_waiting_line_names_the_lease_too(
    place: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    dsn, schema = place
    session_id = _session(dsn, schema)
    _left_by_a_killed_process(dsn, schema, session_id, LEASE_SECONDS)
    code = main(["--store", _url(dsn, schema), "chat", session_id, "--busy-wait", "0.5"])
    captured = capsys.readouterr()
    assert (code, captured.out) == (4, "")
    assert captured.err == (
        f"session-schedule chat: session {session_id} is open in another process — asked it to "
        "hand the session over (a host does within 2 s once its reminder is answered); if the "
        f"process holding it is gone, its lease lapses within {LEASE_SECONDS} s; waiting up to "
        "0.5 s (Ctrl-C gives up)\n" + _busy(session_id, LEASE_SECONDS)
    )


def _chat(url: str, *arguments: str, stdin: int | None = None) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    source = str(Path(session_schedule.__file__).resolve().parents[1])
    environment["PYTHONPATH"] = os.pathsep.join(
        [source, *filter(None, [environment.get("PYTHONPATH")])]
    )
    return subprocess.Popen(
        [sys.executable, "-m", "session_schedule", "--store", url, "chat", *arguments],
        stdin=subprocess.PIPE if stdin is None else stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def test_a_chat_killed_on_postgresql_keeps_the_session_until_its_lease_lapses(
    place: tuple[str, str],
) -> None:
    """The whole story: a chat SIGKILLed, the next one refused with the lease's words, and one
    waiting longer than the lease opens the session."""
    dsn, schema = place
    url = _url(dsn, schema)
    session_id = _session(dsn, schema)
    killed = _chat(url, session_id)
    assert killed.stdout is not None
    assert "resumed session" in killed.stdout.readline()
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=30)
    refused = _chat(url, session_id, "--busy-wait", "0")
    out, err = refused.communicate("", timeout=60)
    assert (refused.returncode, out) == (4, "")
    found = re.fullmatch(r"session-schedule: session s_[a-z0-9]{12} is held by another process whose lease lapses within ([0-9]+) s.*\n", err)  # fmt: skip
    assert found is not None, err
    seconds = int(found.group(1))
    assert 1 <= seconds <= 15  # the chat's lease: PostgresSessionStore's default of 15 s
    assert err == _busy(session_id, seconds)
    started = time.monotonic()
    waited = _chat(url, session_id, "--busy-wait", str(seconds + 5))
    out, err = waited.communicate("/quit\n", timeout=60)
    assert waited.returncode == 0, err
    assert f"resumed session {session_id}" in out
    assert time.monotonic() - started < seconds + 5
