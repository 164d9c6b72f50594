"""Crash tests: a child appends and barriers in a loop; SIGKILL at random moments; reopen.

After every kill, reopening must show every entry a barrier acknowledged, in order, and — for
JSONL — nothing after a torn line (a torn tail is cut, and the file ends with a complete line).
On PostgreSQL the killed child's lease is still live when it dies: reopening is refused as busy
until the lease runs out on the database's clock, then succeeds with the next epoch.
The child keeps appending to the same session across kills, so every recovery is also the
starting point of the next run; a fresh session is started every ``ROUNDS_PER_SESSION`` kills
to keep reopening cheap.

30 kills per backend by default; 300 with ``SESSION_SCHEDULE_FULL=1``. Each test prints its
counts (``pytest -rP`` shows them).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from session_schedule.session import (
    JsonlSessionStore,
    MessageEntry,
    SessionBusy,
    SessionHandle,
    SessionId,
    SessionStore,
)
from session_schedule.session.postgres import PostgresSessionStore
from session_schedule.testing.session_contract import NOW
from tests.postgres import migrated_schema, server_dsn
from tests.session import crash_child

KILLS = 300 if os.environ.get("SESSION_SCHEDULE_FULL") == "1" else 30
ROUNDS_PER_SESSION = 10
CHILD = Path(__file__).with_name("crash_child.py")
Backend = Literal["jsonl", "sqlite", "postgres"]
TAKEOVER_TIMEOUT_SECONDS = 10 * crash_child.POSTGRES_LEASE_SECONDS


@dataclass
class Tally:
    kills: int = 0
    barriers: int = 0
    """Barriers the children saw acknowledged before they were killed."""
    entries: int = 0
    """Entries those barriers covered (appended during the killed runs)."""
    unacknowledged_survivors: int = 0
    """Entries found on reopening that no barrier had acknowledged (allowed, never required)."""
    torn_tails: int = 0
    """Kills that left a torn last line (JSONL), each cut on reopening."""
    early_kills: int = 0
    """Kills that landed before the run's first barrier returned."""


@dataclass(frozen=True)
class Run:
    start: int
    """Entries in the session when the child opened it."""
    acknowledged: list[int]
    """The last position covered by each acknowledged barrier, in order."""


@dataclass(frozen=True)
class Place:
    backend: Backend
    location: str
    """The data directory, the database file or the PostgreSQL schema."""


def store_for(place: Place) -> SessionStore:
    return crash_child.store_for(place.backend, place.location)


def kill_child(place: Place, session_id: str, rng: random.Random) -> Run:
    """Run the child until a random moment after it is ready, then SIGKILL it."""
    argv = [sys.executable, str(CHILD), place.backend, place.location, session_id]
    child = subprocess.Popen(
        [*argv, str(rng.getrandbits(32))], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        ready = child.stdout.readline()
        assert ready.startswith(b"ready "), ready
        time.sleep(rng.uniform(0.0, 0.12))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate()
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == -signal.SIGKILL, err
    complete = [int(line) for line in out.split(b"\n")[:-1] if line]
    assert complete == sorted(complete)
    return Run(start=int(ready.split()[1]), acknowledged=complete)


async def check_recovery(place: Place, session_id: SessionId, run: Run, tally: Tally) -> None:
    store = store_for(place)
    if isinstance(store, JsonlSessionStore):
        tally.torn_tails += not store.path_of(session_id).read_bytes().endswith(b"\n")
    try:
        async with await _take_over(store, session_id) as handle:
            entries = list(handle.entries)
    finally:
        if isinstance(store, PostgresSessionStore):
            await store.close()
    for position, entry in enumerate(entries):
        assert entry.position == position
        assert isinstance(entry.payload, MessageEntry)
        assert entry.payload.content.startswith(f"{position}:"), position
    needed = run.acknowledged[-1] + 1 if run.acknowledged else run.start
    assert len(entries) >= needed, f"lost acknowledged entries: {len(entries)} < {needed}"
    if isinstance(store, JsonlSessionStore):
        assert store.path_of(session_id).read_bytes().endswith(b"\n")
    tally.kills += 1
    tally.barriers += len(run.acknowledged)
    tally.entries += needed - run.start
    tally.unacknowledged_survivors += len(entries) - needed
    tally.early_kills += not run.acknowledged


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgres"])
def test_every_acknowledged_entry_survives_sigkill(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with contextlib.ExitStack() as cleanup:
        if backend == "postgres":
            dsn = server_dsn()
            monkeypatch.setenv("SESSION_SCHEDULE_PG_DSN", dsn)
            place = Place(backend, cleanup.enter_context(migrated_schema(dsn)))
        else:
            location = tmp_path / ("data" if backend == "jsonl" else "sessions.db")
            place = Place(backend, str(location))
        _crash_loop(place)


def _crash_loop(place: Place) -> None:
    rng = random.Random(f"crash-{place.backend}-{KILLS}")  # noqa: S311 - reproducible kill times
    tally = Tally()
    session_id = SessionId("")
    started = time.perf_counter()
    for round_number in range(KILLS):
        if round_number % ROUNDS_PER_SESSION == 0:
            session_id = asyncio.run(_new_session(place))
        run = kill_child(place, session_id, rng)
        asyncio.run(check_recovery(place, session_id, run, tally))
    elapsed = time.perf_counter() - started
    print(f"crash test {place.backend}: {tally} in {elapsed:.1f} s")
    assert tally.kills == KILLS


async def _new_session(place: Place) -> SessionId:
    store = store_for(place)
    try:
        async with await store.create(now=NOW) as handle:
            return handle.id
    finally:
        if isinstance(store, PostgresSessionStore):
            await store.close()


async def _take_over(store: SessionStore, session_id: SessionId) -> SessionHandle:
    """Open the session; a killed PostgreSQL owner's lease must run out first."""
    if not isinstance(store, PostgresSessionStore):
        return await store.open(session_id)
    deadline = time.monotonic() + TAKEOVER_TIMEOUT_SECONDS
    while True:
        try:
            return await store.open(session_id)
        except SessionBusy:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
