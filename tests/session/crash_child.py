"""The child process of the crash tests (run as a script; the suite imports only `store_for`).

Usage: ``crash_child.py BACKEND LOCATION SESSION_ID SEED`` with BACKEND ``jsonl`` (LOCATION: the
data directory), ``sqlite`` (LOCATION: the database file) or ``postgres`` (LOCATION: the schema,
in the database at ``$SESSION_SCHEDULE_PG_DSN``; a lease of ``POSTGRES_LEASE_SECONDS``, so that
the parent can take the session over soon after the kill). It opens the session, prints
``ready <entries>``, then appends and barriers in a loop — batches of 1 to 10 entries, mostly
small, sometimes large enough that a kill can land in the middle of the write — and after every
barrier prints the last acknowledged position, flushed, until it is killed. Entry ``n`` carries
the content ``"<n>:"`` followed by filler, so the parent can check positions and order.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path

from session_schedule.core.instants import parse_instant
from session_schedule.session import (
    JsonlSessionStore,
    SessionStore,
    SqliteSessionStore,
    user_message,
)

NOW = parse_instant("2026-05-01T09:00:00.000Z")
SIZES = (16,) * 44 + (4_000,) * 5 + (600_000,)
BATCHES = (1, 1, 1, 1, 2, 3, 10)
POSTGRES_LEASE_SECONDS = 0.6


async def run(store: SessionStore, session_id: str, rng: random.Random) -> None:
    handle = await store.open(session_id)
    position = len(handle.entries)
    print(f"ready {position}", flush=True)
    while True:
        for _ in range(rng.choice(BATCHES)):
            content = f"{position}:" + "x" * rng.choice(SIZES)
            handle.append("message", user_message(content, at=NOW))
            position += 1
        await handle.barrier()
        print(position - 1, flush=True)


def store_for(backend: str, location: str) -> SessionStore:
    if backend == "jsonl":
        return JsonlSessionStore(Path(location))
    if backend == "sqlite":
        return SqliteSessionStore(Path(location))
    # Imported here: the other backends run without the postgres extra.
    from session_schedule.session.postgres import PostgresSessionStore  # noqa: PLC0415

    dsn = os.environ["SESSION_SCHEDULE_PG_DSN"]
    return PostgresSessionStore(dsn, schema=location, lease_seconds=POSTGRES_LEASE_SECONDS)


def main(argv: list[str]) -> None:
    backend, location, session_id, seed = argv
    store = store_for(backend, location)
    asyncio.run(run(store, session_id, random.Random(int(seed))))  # noqa: S311 - test data


if __name__ == "__main__":
    main(sys.argv[1:])
