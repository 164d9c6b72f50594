"""Power cuts while the descriptor cache closes and reopens open sessions' files.

Several JSONL sessions stay open while the process's descriptor cache
(:mod:`session_schedule.session.descriptors`) holds one or two descriptors: each append or
barrier of one session makes the cache close another's descriptor, and the next use opens it
again. The sessions append and barrier in turn (and, at times, all at once; one is closed and
opened again meanwhile), while a wrapped ``fsync`` records, per file, how many leading bytes
each completed ``fsync`` covered — through whichever descriptor it was issued.

After every step, the moment is a *cut point*: the power may fail there. Every byte written to a
session file after the last ``fsync`` that covered it is then dropped, or zero-filled (the size
kept), or — file by file — one or the other or kept. The checkpoints (one written at a close,
one while open, through a reopened descriptor) are never ``fsync``'d: they are lost, or kept as
they were at the cut, whatever the log kept. The next-target index and its key are lost. The
crashed data directory must open every session with every acknowledged entry, followed by a
prefix of the others, and open again the same with nothing left to repair.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from session_schedule.session import JsonlSessionStore, MessageEntry, SessionId, user_message
from session_schedule.session.checkpoint import EVERY
from session_schedule.session.descriptors import DescriptorCache, process_cache
from session_schedule.session.jsonl import JsonlSessionHandle
from session_schedule.testing.session_contract import NOW

SESSIONS = 4
Fate = Literal["keep", "zero", "drop"]
FATES: tuple[Fate, ...] = ("keep", "zero", "drop")


def uniform(fate: Fate) -> tuple[Fate, ...]:
    return tuple(fate for _ in range(SESSIONS))


def mixed(shift: int) -> tuple[Fate, ...]:
    return tuple(FATES[(index + shift) % len(FATES)] for index in range(SESSIONS))


@dataclass(frozen=True)
class Crash:
    """What a power cut leaves: each session file's fate, and whether the checkpoints stay."""

    fates: tuple[Fate, ...]
    checkpoints: bool

    @property
    def name(self) -> str:
        return "-".join(self.fates) + ("-checkpoints" if self.checkpoints else "")


CRASHES: tuple[Crash, ...] = (
    Crash(uniform("drop"), checkpoints=False),
    Crash(uniform("zero"), checkpoints=False),
    Crash(uniform("drop"), checkpoints=True),
    *(Crash(mixed(shift), checkpoints=shift != 1) for shift in range(len(FATES))),
)
"""Every unsynced byte dropped; every one zero-filled; and mixes of the three fates; with and
without the checkpoints."""


def payload(session: int, position: int, *, short: bool = False) -> MessageEntry:
    """A distinct message, of a size that makes the files span several pages (unless
    ``short``)."""
    size = 0 if short else (position * 1_117 + session * 389) % 5_000
    return user_message(f"{session}/{position}:" + "x" * size, at=NOW)


@dataclass(frozen=True)
class Cut:
    """What the session files held at one moment, and what a power cut there keeps."""

    label: str
    contents: tuple[bytes, ...]
    """Each session's file, as written."""
    synced: tuple[int, ...]
    """How many of its leading bytes a completed ``fsync`` covered."""
    acknowledged: tuple[int, ...]
    """How many of its entries a barrier that returned acknowledged."""
    appended: tuple[int, ...]
    """How many of its entries were appended."""
    checkpoints: tuple[bytes | None, ...]
    """Each session's checkpoint (``None``: none)."""

    def after(self, fates: Sequence[Fate]) -> list[bytes]:
        """Each file after a power cut that dealt it its fate in ``fates``."""
        images = []
        for content, synced, fate in zip(self.contents, self.synced, fates, strict=True):
            tail = content[synced:]
            kept = {"keep": tail, "zero": bytes(len(tail)), "drop": b""}[fate]
            images.append(content[:synced] + kept)
        return images


class Recorder:
    """A wrapped ``os.fsync``: the bytes each file's completed ``fsync`` calls covered."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self._real = real
        self._lock = threading.Lock()
        self.covered: dict[tuple[int, int], int] = {}
        """By ``(device, inode)``: the file's size when its latest completed fsync began."""

    def fsync(self, fd: int) -> None:
        status = os.fstat(fd)  # what the file holds now is what this fsync covers
        self._real(fd)
        key = (status.st_dev, status.st_ino)
        with self._lock:
            self.covered[key] = max(self.covered.get(key, 0), status.st_size)

    def synced(self, path: Path) -> int:
        status = path.stat()
        with self._lock:
            return self.covered.get((status.st_dev, status.st_ino), 0)


@pytest.fixture(params=[1, 2], ids=["one descriptor", "two descriptors"])
def small_cache(request: pytest.FixtureRequest) -> Iterator[DescriptorCache]:
    """The process's descriptor cache, holding one or two descriptors for the test's length."""
    cache = process_cache()
    capacity = cache.capacity
    cache.resize(request.param)
    try:
        yield cache
    finally:
        cache.resize(capacity)


@dataclass
class Writer:
    """The sessions being written, and the cut points recorded so far."""

    store: JsonlSessionStore
    recorder: Recorder
    handles: list[JsonlSessionHandle]
    payloads: list[list[MessageEntry]]
    acknowledged: list[int]
    cuts: list[Cut]

    def append(self, session: int, count: int, *, short: bool = False) -> None:
        handle, written = self.handles[session], self.payloads[session]
        for _ in range(count):
            written.append(payload(session, len(written), short=short))
            handle.append("message", written[-1])

    async def barrier(self, *sessions: int) -> None:
        """The barriers of ``sessions``, waited for together."""
        targets = [len(self.payloads[session]) for session in sessions]
        await asyncio.gather(*(self.handles[session].barrier() for session in sessions))
        for session, target in zip(sessions, targets, strict=True):
            self.acknowledged[session] = max(self.acknowledged[session], target)

    def cut(self, label: str) -> None:
        paths = [self.store.path_of(handle.id) for handle in self.handles]
        self.cuts.append(
            Cut(
                label,
                tuple(path.read_bytes() for path in paths),
                tuple(self.recorder.synced(path) for path in paths),
                tuple(self.acknowledged),
                tuple(len(written) for written in self.payloads),
                tuple(
                    self.store.checkpoint_path(handle.id).read_bytes()
                    if self.store.checkpoint_path(handle.id).exists()
                    else None
                    for handle in self.handles
                ),
            )
        )


async def write(writer: Writer) -> None:
    """The sessions append and barrier in turn, one at a time and all at once; some appends
    are left unacknowledged at every cut point after the first rounds."""
    for round_number in range(6):
        for session in range(SESSIONS):
            writer.append(session, 1 + (round_number + session) % 3)
            writer.cut(f"round {round_number}: session {session} appended")
            if (round_number + session) % 4 != 3:  # some entries wait for a later barrier
                await writer.barrier(session)
                writer.cut(f"round {round_number}: session {session} acknowledged")
        if round_number == 2:
            # One session is closed and opened again: its new descriptor joins the cache.
            await writer.barrier(1)
            await writer.handles[1].close()
            writer.handles[1] = await writer.store.open(writer.handles[1].id)
            writer.cut(f"round {round_number}: session 1 closed and opened again")
        if round_number == 4:
            # Enough entries for a checkpoint while open: written on session 3's thread, through
            # its descriptor opened again.
            writer.append(3, EVERY + 10, short=True)
            await writer.barrier(3)
            await writer.handles[3]._worker.run(lambda: None)  # the checkpoint is written
            writer.cut(f"round {round_number}: session 3 past a checkpoint")
        if round_number % 2:
            for session in range(SESSIONS):
                writer.append(session, 2)
            await writer.barrier(*range(SESSIONS))
            writer.cut(f"round {round_number}: every session acknowledged at once")
    for session in range(0, SESSIONS, 2):
        writer.append(session, 3)  # never acknowledged: the power fails first
    # Those sessions hold unsynced entries: their descriptors stay open, whatever the bound.
    assert [handle._file.is_open for handle in writer.handles[::2]] == [True] * (SESSIONS // 2)
    writer.cut("unacknowledged appends last")


async def check(
    store: JsonlSessionStore, ids: list[SessionId], cut: Cut, payloads: list[list[MessageEntry]]
) -> tuple[int, int]:
    """Every session of the crashed copy ``store`` opens with what ``cut`` promises; returns
    how many of them lost entries (unacknowledged ones) to the cut, and how many opened from
    their checkpoint."""
    lost = resumed = 0
    for session, session_id in enumerate(ids):
        path = store.path_of(session_id)
        async with await store.open(session_id) as handle:
            found = [entry.payload for entry in handle.entries]
            resumed += handle.resume is not None
        assert len(found) >= cut.acknowledged[session], (cut.label, session)
        assert found == payloads[session][: len(found)], (cut.label, session)
        assert len(found) <= cut.appended[session]
        lost += len(found) < cut.appended[session]
        # Recovery leaves a file that opens again the same, with nothing left to repair.
        repaired = path.read_bytes()
        async with await store.open(session_id) as handle:
            assert [entry.payload for entry in handle.entries] == found
        assert path.read_bytes() == repaired
    return lost, resumed


@pytest.mark.parametrize("flush_on_loop", [True, False], ids=["loop", "thread"])
def test_a_power_cut_loses_no_acknowledged_entry_while_descriptors_are_evicted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    small_cache: DescriptorCache,
    flush_on_loop: bool,
) -> None:
    recorder = Recorder(os.fsync)
    monkeypatch.setattr(os, "fsync", recorder.fsync)
    reopened = small_cache.reopened

    async def run() -> Writer:
        store = JsonlSessionStore(tmp_path / "writer", flush_on_loop=flush_on_loop)
        writer = Writer(store, recorder, [], [[] for _ in range(SESSIONS)], [0] * SESSIONS, [])
        try:
            for _ in range(SESSIONS):
                writer.handles.append(await store.create(now=NOW))
            writer.cut("created")
            await write(writer)
        finally:
            for handle in writer.handles:
                await handle.close()
        return writer

    writer = asyncio.run(run())
    monkeypatch.undo()
    # The cache did close the sessions' descriptors, and opened them again, all along (at
    # least once per session and round).
    assert small_cache.reopened - reopened >= SESSIONS * 6
    ids = [handle.id for handle in writer.handles]
    # Every file was fsync'd at its creation: a cut never loses a session's header.
    assert all(cut.synced[session] > 0 for cut in writer.cuts for session in range(SESSIONS))
    assert len(writer.cuts) == 49
    past = next(cut for cut in writer.cuts if cut.label.endswith("past a checkpoint"))
    assert past.checkpoints[1] is not None  # written at its close
    assert past.checkpoints[3] is not None  # written while open

    async def check_all() -> tuple[int, int, int]:
        count = lost = resumed = 0
        for number, cut in enumerate(writer.cuts):
            for crash in CRASHES:
                root = tmp_path / f"crashed-{number}-{crash.name}"
                root.mkdir(mode=0o700)
                crashed = JsonlSessionStore(root)
                images = cut.after(crash.fates)
                for session, session_id in enumerate(ids):
                    crashed.path_of(session_id).write_bytes(images[session])
                    kept = cut.checkpoints[session]
                    if crash.checkpoints and kept is not None:
                        crashed.checkpoint_path(session_id).write_bytes(kept)
                lost_here, resumed_here = await check(crashed, ids, cut, writer.payloads)
                lost, resumed, count = lost + lost_here, resumed + resumed_here, count + 1
        return count, lost, resumed

    count, lost, resumed = asyncio.run(check_all())
    assert count == len(writer.cuts) * len(CRASHES)
    assert lost > 0  # the cuts did take the unacknowledged entries of some sessions
    assert resumed > 0  # and some sessions opened from the checkpoint they kept
