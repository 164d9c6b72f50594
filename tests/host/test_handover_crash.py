"""Hand-overs between a host process and front-end processes, with SIGKILL of either side at
random moments: every reminder is delivered, at most one repeat per kill, and the log still
decodes strictly. Each store takes a few seconds (a bounded number of kills).

The power-cut variant (JSONL and SQLite) runs both sides with the power-cut recorder
(``tests/cli/powercut.c``) preloaded, sharing one journal, and cuts the power at random moments
around hand-overs: both processes are SIGKILLed at once and every byte written after its file's
last fsync is dropped or zero-filled, as a machine that lost power may leave it. The next host
recovers; at the end every reminder was delivered, with at most one repeat per cut, and the log
decodes strictly. 3 cuts per store by default, 60 with ``SESSION_SCHEDULE_FULL=1``; the test
prints its counts (``pytest -rP`` shows them)."""

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
from typing import Final

import pytest

from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.session.location import open_store, parse_store_url
from session_schedule.session.port import SessionStore
from session_schedule.testing.session_contract import CHANGE, at_create
from tests.cli.test_chat_crash import Fault, compile_shim, replay_power_cut
from tests.postgres import migrated_schema, server_dsn

REMINDERS = 6
KILLS = 4
FULL: Final = os.environ.get("SESSION_SCHEDULE_FULL") == "1"
CUTS: Final = 60 if FULL else 3
CUT_REMINDERS: Final = max(REMINDERS, 2 * CUTS)
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


def _child(*arguments: str, extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        **(extra or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.host.handover_child", *arguments],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


async def _seed(store: SessionStore, reminders: int = REMINDERS, spacing_ms: int = 1000) -> str:
    """A session with ``reminders`` one-off reminders, the first due in 2 s, then one every
    ``spacing_ms``."""
    now = Instant(round(time.time() * MS_PER_SECOND))
    async with await store.create(now=now) as handle:
        for number in range(1, reminders + 1):
            due = now + 2 * MS_PER_SECOND + (number - 1) * spacing_ms
            handle.append(CHANGE, at_create(number, Instant(due)))
        await handle.barrier()
    return handle.id


async def _with_store(url: str, work: str) -> str:
    store = open_store(parse_store_url(url))
    try:
        if work == "seed":
            return await _seed(store)
        if work == "seed-for-cuts":
            return await _seed(store, CUT_REMINDERS, spacing_ms=700)
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


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_handovers_survive_power_cuts(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shim = compile_shim(tmp_path)
    if shim is None:
        reason = "power cuts need a C compiler (cc or gcc) to build the recorder"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    data = tmp_path / "data"
    data.mkdir()
    url = f"jsonl:{data / 'sessions'}" if kind == "jsonl" else f"sqlite:{data / 'sessions.db'}"
    journal = tmp_path / "journal.bin"
    recorded = {
        "LD_PRELOAD": str(shim),
        "POWERCUT_JOURNAL": str(journal),
        "POWERCUT_ROOT": f"{data}/",
    }
    rng = random.Random(int.from_bytes(os.urandom(4)))  # noqa: S311 - test timings only
    record = tmp_path / "record"
    session_id = asyncio.run(_with_store(url, "seed-for-cuts"))
    faults: tuple[Fault, ...] = ("drop", "zero")
    unsynced = handed_over = 0
    started = time.monotonic()
    host = _child("host", url, str(record), extra=recorded)
    try:
        for cut in range(CUTS):
            time.sleep(rng.uniform(0.3, 1.0))
            hold = f"{rng.uniform(0.2, 1.0):.2f}"
            front = _child("front", url, str(record), session_id, hold, extra=recorded)
            # The front end asking, the host handing over, the front end holding or closing,
            # the host taking the session back: the power goes at any of these moments.
            time.sleep(rng.uniform(0.0, 2.5))
            for process in (host, front):
                process.kill()
            front.wait()
            handed_over += bool(front.stdout and front.stdout.read().startswith("opened "))
            _reap(front, kill=False)
            _reap(host, kill=False)
            unsynced += replay_power_cut(journal, faults[cut % len(faults)])
            journal.unlink(missing_ok=True)
            host = _child("host", url, str(record), extra=recorded)
        deadline = time.monotonic() + CUT_REMINDERS * 0.7 + 30
        while time.monotonic() < deadline and len(_delivered(record)) < CUT_REMINDERS:
            time.sleep(0.2)
    finally:
        host.send_signal(signal.SIGTERM)
        try:
            host.wait(timeout=15)
        except subprocess.TimeoutExpired:
            host.kill()
        _reap(host, kill=False)
    delivered = _delivered(record)
    repeats = sum(delivered.values()) - len(delivered)
    with capsys.disabled():
        print(
            f"\nhand-over power cuts {kind}: {CUTS} cuts ({handed_over} after the front end "
            f"had the session, {CUTS - handed_over} before), {CUT_REMINDERS} reminders, "
            f"{len(delivered)} delivered, {repeats} repeats, {unsynced} unsynced bytes lost, "
            f"{time.monotonic() - started:.1f} s"
        )
    assert sorted(delivered) == sorted(f"sch_{n}" for n in range(1, CUT_REMINDERS + 1))
    assert repeats <= CUTS
    asyncio.run(_with_store(url, session_id))
