"""Crash tests: a child appends and barriers in a loop; SIGKILL at random moments; reopen.

After every kill, reopening must show every entry a barrier acknowledged, in order, and — for
JSONL — nothing after a torn line (a torn tail is cut, and the file ends with a complete line).
The child keeps appending to the same session across kills, so every recovery is also the
starting point of the next run; a fresh session is started every ``ROUNDS_PER_SESSION`` kills
to keep reopening cheap.

30 kills per backend by default; 300 with ``SESSION_SCHEDULE_FULL=1``. Each test prints its
counts (``pytest -rP`` shows them).
"""

from __future__ import annotations

import asyncio
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
    SessionId,
    SessionStore,
    SqliteSessionStore,
)
from session_schedule.testing.session_contract import NOW

KILLS = 300 if os.environ.get("SESSION_SCHEDULE_FULL") == "1" else 30
ROUNDS_PER_SESSION = 10
CHILD = Path(__file__).with_name("crash_child.py")
Backend = Literal["jsonl", "sqlite"]


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


def location_of(backend: Backend, root: Path) -> Path:
    return root / "data" if backend == "jsonl" else root / "sessions.db"


def store_for(backend: Backend, root: Path) -> SessionStore:
    location = location_of(backend, root)
    return JsonlSessionStore(location) if backend == "jsonl" else SqliteSessionStore(location)


def kill_child(backend: Backend, root: Path, session_id: str, rng: random.Random) -> Run:
    """Run the child until a random moment after it is ready, then SIGKILL it."""
    argv = [sys.executable, str(CHILD), backend, str(location_of(backend, root)), session_id]
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


async def check_recovery(
    backend: Backend, root: Path, session_id: SessionId, run: Run, tally: Tally
) -> None:
    store = store_for(backend, root)
    if isinstance(store, JsonlSessionStore):
        tally.torn_tails += not store.path_of(session_id).read_bytes().endswith(b"\n")
    async with await store.open(session_id) as handle:
        entries = list(handle.entries)
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


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_every_acknowledged_entry_survives_sigkill(backend: Backend, tmp_path: Path) -> None:
    rng = random.Random(f"crash-{backend}-{KILLS}")  # noqa: S311 - reproducible kill times
    tally = Tally()
    session_id = SessionId("")
    started = time.perf_counter()
    for round_number in range(KILLS):
        if round_number % ROUNDS_PER_SESSION == 0:
            session_id = asyncio.run(_new_session(store_for(backend, tmp_path)))
        run = kill_child(backend, tmp_path, session_id, rng)
        asyncio.run(check_recovery(backend, tmp_path, session_id, run, tally))
    elapsed = time.perf_counter() - started
    print(f"crash test {backend}: {tally} in {elapsed:.1f} s")
    assert tally.kills == KILLS


async def _new_session(store: SessionStore) -> SessionId:
    async with await store.create(now=NOW) as handle:
        return handle.id
