"""Hand-overs between a host process and front-end processes, with SIGKILL of either side at
random moments: every reminder is delivered, at most one repeat per kill, and the log still
decodes strictly. Each store takes a few seconds (a bounded number of kills)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.session.location import open_store, parse_store_url
from session_schedule.session.port import SessionStore
from session_schedule.testing.session_contract import CHANGE, at_create
from tests.postgres import migrated_schema, server_dsn

REMINDERS = 6
KILLS = 4
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind: str = request.param
    if kind == "jsonl":
        yield f"jsonl:{tmp_path / 'sessions'}"
    elif kind == "sqlite":
        yield f"sqlite:{tmp_path / 'sessions.db'}"
    else:
        dsn = server_dsn()
        with migrated_schema(dsn) as schema:
            yield f"{dsn}?schema={schema}"


def _child(*arguments: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.host.handover_child", *arguments],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


async def _seed(store: SessionStore) -> str:
    now = Instant(round(time.time() * MS_PER_SECOND))
    async with await store.create(now=now) as handle:
        for number in range(1, REMINDERS + 1):
            handle.append(CHANGE, at_create(number, Instant(now + (1 + number) * MS_PER_SECOND)))
        await handle.barrier()
    return handle.id


async def _with_store(url: str, work: str) -> str:
    store = open_store(parse_store_url(url))
    try:
        if work == "seed":
            return await _seed(store)
        snapshot = await store.read(work)  # strict: damage raises
        return str(len(snapshot.entries))
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            await close()


def test_handovers_survive_kills_of_either_side(url: str, tmp_path: Path) -> None:
    rng = random.Random(int.from_bytes(os.urandom(4)))  # noqa: S311 - test timings only
    record = tmp_path / "record"
    session_id = asyncio.run(_with_store(url, "seed"))
    host = _child("host", url, str(record))
    kills = 0
    waits: list[float] = []
    try:
        for round_number in range(KILLS):
            time.sleep(rng.uniform(0.3, 1.0))
            front = _child("front", url, str(record), session_id, f"{rng.uniform(0.2, 1.0):.2f}")
            if round_number % 2 == 0:
                time.sleep(rng.uniform(0.0, 1.5))  # the front end, opening or holding
                _reap(front, kill=True)
            else:
                opened = front.stdout.readline() if front.stdout else ""
                if opened.startswith("opened "):
                    waits.append(float(opened.split()[1]))
                time.sleep(rng.uniform(0.0, 0.5))  # the host, handing over or taking back
                _reap(host, kill=True)
                front.wait(timeout=30)
                _reap(front, kill=False)
                host = _child("host", url, str(record))
            kills += 1
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(_delivered(record)) < REMINDERS:
            time.sleep(0.2)
    finally:
        host.send_signal(signal.SIGTERM)
        try:
            host.wait(timeout=15)
        except subprocess.TimeoutExpired:
            host.kill()
        _reap(host, kill=False)
    delivered = _delivered(record)
    assert sorted(delivered) == [f"sch_{number}" for number in range(1, REMINDERS + 1)]
    assert sum(delivered.values()) - REMINDERS <= kills
    print(f"kills {kills}, repeats {sum(delivered.values()) - REMINDERS}, waits {waits}")
    assert all(wait <= 2.5 for wait in waits), waits
    asyncio.run(_with_store(url, session_id))


def _reap(process: subprocess.Popen[str], *, kill: bool) -> None:
    if kill:
        process.kill()
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _delivered(record: Path) -> Counter[str]:
    if not record.exists():
        return Counter()
    return Counter(line.split()[2].split("@")[0] for line in record.read_text().splitlines())
