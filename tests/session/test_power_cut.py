"""Power cuts at page granularity: every acknowledged entry survives, and the session opens.

A session is written through the real JSONL store, several barriers and then unsynced appends,
while a wrapped ``fsync`` records how many bytes each completed fsync covered. A power cut is then
modelled on the bytes written after the last completed fsync — the unsynced region — cut into
4096-byte pages at file offsets (the first piece is the rest of the page the fsync'd bytes end
in): each page is kept, zero-filled, or dropped (its bytes gone, later bytes surviving). The
fsync'd bytes are never touched. For every pattern, opening the session must succeed and show
every acknowledged entry, followed by a prefix of the unacknowledged ones.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from session_schedule.session import (
    JsonlSessionStore,
    MessageEntry,
    PersistenceUncertain,
    SessionId,
    user_message,
)
from session_schedule.testing.session_contract import NOW

PAGE = 4096
SID = SessionId("s_aaaaaaaaaaaa")
Fate = Literal["keep", "zero", "drop"]
FATES: tuple[Fate, ...] = ("keep", "zero", "drop")


@dataclass(frozen=True)
class Written:
    content: bytes
    """The file as the writer left it."""
    synced: int
    """How many leading bytes the last completed fsync covered."""
    acknowledged: int
    """How many entries barriers acknowledged."""
    payloads: list[MessageEntry]
    """Every appended payload, by position."""

    def pieces(self) -> list[tuple[int, int]]:
        """The unsynced region, cut at page boundaries."""
        bounds = [self.synced]
        page_end = (self.synced // PAGE + 1) * PAGE
        while page_end < len(self.content):
            bounds.append(page_end)
            page_end += PAGE
        bounds.append(len(self.content))
        return list(itertools.pairwise(bounds))

    def after(self, fates: Sequence[Fate]) -> bytes:
        """The file after a power cut that dealt ``fates`` to the unsynced pieces."""
        image = [self.content[: self.synced]]
        for (start, end), fate in zip(self.pieces(), fates, strict=True):
            if fate == "keep":
                image.append(self.content[start:end])
            elif fate == "zero":
                image.append(bytes(end - start))
        return b"".join(image)


def payload(position: int, size: int) -> MessageEntry:
    return user_message(f"{position}:" + "x" * size, at=NOW)


Step = tuple[Literal["append", "barrier", "append during fsync", "cut during fsync"], Sequence[int]]


async def write(root: Path, steps: Iterable[Step], monkeypatch: pytest.MonkeyPatch) -> Written:
    """Run ``steps`` against a fresh session; the last fsync's coverage is recorded."""
    # Flushes on the session's thread, so that appends and cuts can happen during an fsync.
    store = JsonlSessionStore(root, flush_on_loop=False)
    real_fsync = os.fsync
    covered = [0]
    release = threading.Event()
    release.set()
    power = [True]

    def fsync(fd: int) -> None:
        size = os.fstat(fd).st_size
        release.wait(5)
        if not power[0]:
            raise OSError(5, "the power is off")
        real_fsync(fd)
        covered[0] = size

    payloads: list[MessageEntry] = []
    acknowledged = 0
    handle = await store.create(now=NOW, session_id=SID)
    monkeypatch.setattr(os, "fsync", fsync)
    content = b""
    for kind, sizes in steps:
        if kind == "cut during fsync":
            # The power fails while a barrier's fsync is in flight: whatever that barrier would
            # write next must not be in the file yet.
            release.clear()
            flight = asyncio.ensure_future(handle.barrier())
            await asyncio.sleep(0.01)
            content = store.path_of(SID).read_bytes()
            power[0] = False
            release.set()
            with pytest.raises(PersistenceUncertain):
                await flight
            break
        if kind == "barrier":
            await handle.barrier()
            acknowledged = len(payloads)
            continue
        if kind == "append during fsync":
            # A barrier's fsync is in flight while more entries are appended: its commit record
            # lands after them.
            release.clear()
            flight = asyncio.ensure_future(handle.barrier())
            await asyncio.sleep(0.01)
            target = len(payloads)
        for size in sizes:
            payloads.append(payload(len(payloads), size))
            handle.append("message", payloads[-1])
        if kind == "append during fsync":
            release.set()
            await flight
            acknowledged = target
    content = content or store.path_of(SID).read_bytes()
    await handle.close()
    monkeypatch.undo()
    return Written(content, covered[0], acknowledged, payloads)


async def check(store: JsonlSessionStore, written: Written, image: bytes) -> None:
    path = store.path_of(SID)
    path.write_bytes(image)
    # The writer left no checkpoint (its last barrier failed): the one the previous pattern's
    # close wrote belongs to another history, and would count entries this image never held.
    store.checkpoint_path(SID).unlink(missing_ok=True)
    async with await store.open(SID) as handle:
        found = [entry.payload for entry in handle.entries]
    assert len(found) >= written.acknowledged
    assert found == written.payloads[: len(found)]
    # Recovery leaves a session that opens again the same, with nothing left to repair.
    repaired = path.read_bytes()
    async with await store.open(SID) as handle:
        assert [entry.payload for entry in handle.entries] == found
    assert path.read_bytes() == repaired


SMALL: list[Step] = [
    ("append", [40, 300]),
    ("barrier", []),
    ("append", [1_500, 20]),
    ("barrier", []),
    ("append during fsync", [700, 2_000]),
    ("append", [3_000, 900, 50, 4_500, 10, 2_500, 3_000]),
    ("cut during fsync", []),
]
LARGE: list[Step] = [
    ("append", [5_000, 30]),
    ("barrier", []),
    ("append", [200] * 20),
    ("barrier", []),
    ("append during fsync", [2_500, 100, 6_000]),
    ("barrier", []),
    ("append", [1_000, 8_000, 30, 30, 3_000, 12_000, 700, 400, 9_000, 20, 5_000, 2_222]),
    ("cut during fsync", []),
]


def scenario(tmp_path: Path, steps: list[Step]) -> Written:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return asyncio.run(write(tmp_path / "writer", steps, monkeypatch))


def run_all(tmp_path: Path, written: Written, patterns: Iterable[Sequence[Fate]]) -> int:
    async def main() -> int:
        store = JsonlSessionStore(tmp_path / "crashed")
        store.data_dir.mkdir(exist_ok=True)
        count = 0
        for fates in patterns:
            await check(store, written, written.after(fates))
            count += 1
        return count

    return asyncio.run(main())


def test_every_page_pattern_of_a_small_unsynced_region(tmp_path: Path) -> None:
    written = scenario(tmp_path, SMALL)
    pieces = written.pieces()
    assert written.acknowledged == 4
    assert len(written.payloads) == 13
    assert len(pieces) == 6, pieces
    count = run_all(tmp_path, written, itertools.product(FATES, repeat=len(pieces)))
    assert count == 3 ** len(pieces)


_LARGE: list[Written] = []


def _large(tmp_path_factory: pytest.TempPathFactory) -> Written:
    if not _LARGE:
        _LARGE.append(scenario(tmp_path_factory.mktemp("large"), LARGE))
    return _LARGE[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_page_patterns_of_a_large_unsynced_region(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    written = _large(tmp_path_factory)
    assert written.acknowledged == 25
    pieces = written.pieces()
    assert len(pieces) == 11
    fates = data.draw(st.lists(st.sampled_from(FATES), min_size=len(pieces), max_size=len(pieces)))
    root = tmp_path_factory.mktemp("case")
    assert run_all(root, written, [fates]) == 1


def test_the_model_damages_only_the_unsynced_region(tmp_path: Path) -> None:
    written = scenario(tmp_path, SMALL)
    pieces = written.pieces()
    every: Callable[[Fate], list[Fate]] = lambda fate: [fate] * len(pieces)  # noqa: E731
    assert written.after(every("keep")) == written.content
    assert written.after(every("drop")) == written.content[: written.synced]
    zeroed = written.after(every("zero"))
    assert zeroed[: written.synced] == written.content[: written.synced]
    assert set(zeroed[written.synced :]) == {0}
    assert pieces[0][0] == written.synced
    assert all(end % PAGE == 0 for _, end in pieces[:-1])
