"""Power cuts while a JSONL session is open and taking periodic checkpoints.

One session of more than two checkpoints' worth of entries (messages interleaved with creates of
every-300 s reminders, their dispatches and deletes) is written through the real store while the
test records, at many moments, what a power cut at that moment could leave. Those moments are
*cut points*: after every append, after every barrier, and inside every ``fsync`` of the log —
while it is in flight, and once it has returned but before the lone barrier's deferred commit
record is written. Whenever a barrier returns and the next entry is appended at once, that
entry's ``write`` carries the commit record ahead of its line; a cut after it, with the page
fates below, covers every part of that write. Both ways of flushing are written: lone barriers
on the event loop, and flushes on the session's thread with entries appended while they run.

The model of a power cut, per file, from what the store did up to the cut point:

- **the log**: the bytes a completed ``fsync`` covered survive; the rest — the unsynced region —
  is cut into 4096-byte pages at file offsets, each kept, zero-filled, or dropped (its bytes
  gone, later bytes surviving), as in ``test_power_cut``;
- **the checkpoint**: it is written to a temporary file and renamed into place, never fsync'd,
  and the directory is never fsync'd after the session was created — so neither its name nor
  its bytes are durable. After the cut the name holds nothing, or *any* version written before
  the cut (the newest or an older one), and that version's pages are kept, zero-filled or
  dropped;
- **the next-target index** (``.next-targets``, appended, never fsync'd): a prefix of what was
  written, its pages kept, zero-filled or dropped. Its records are made to name the crashed
  log's inode (a power cut keeps a file's inode); with ``metadata`` committed, the crashed log
  also keeps the modification time it had at the cut (its data pages may still be zero).

After the cut the session must open; every acknowledged entry is there, followed by a prefix of
the others; the resumed fold equals a strict fold of the whole surviving log, with no
checkpoint; ``session-schedule check`` passes; a checkpoint that does not describe the surviving
log is ignored, never trusted; and ``due_sessions`` before the open agrees with the log.

The last tests do the same under a real ``LiveSchedule`` on a fake clock, which creates, deletes
and delivers every-300 s reminders while messages accumulate, and count occurrence keys across
the cut: every reminder the surviving log created (every acknowledged one among them) is deleted
there or delivered after the reopen, and a key delivered before the cut is delivered again only
when its dispatch change did not survive (SPEC §6: at-least-once).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import re
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from session_schedule.cli.main import main
from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleChange,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
    create_change,
    delete_change,
    dispatch_change,
)
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.framing import occurrence_keys
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.records import EveryScheduleRecord, ScheduleRecord
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session import JsonlSessionStore, SessionId
from session_schedule.session.checkpoint import EVERY, CheckpointFile
from session_schedule.session.jsonl import JsonlSessionHandle
from session_schedule.session.jsonl import checkpoints as checkpoints_module
from session_schedule.session.jsonl.next_targets import INDEX_NAME
from session_schedule.session.lines import commit_line
from session_schedule.session.port import DueSession, LogEntry
from session_schedule.session.targets import next_target_of
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.testing.session_contract import NOW, payloads, turn
from tests.session.histories import every

PAGE = 4096
SID = SessionId("s_aaaaaaaaaaaa")
Fate = Literal["keep", "zero", "drop"]
FATES: tuple[Fate, ...] = ("keep", "zero", "drop")
Label = Literal["appended", "acknowledged", "fsync in flight", "fsync'd, commit record unwritten"]
LABELS: tuple[Label, ...] = (
    "appended",
    "acknowledged",
    "fsync in flight",
    "fsync'd, commit record unwritten",
)
ANCHOR = parse_instant("2030-01-01T00:00:00.000Z")
HOUR = 3_600_000
LAST_INSTANT = parse_instant("9999-12-31T23:59:59.999Z")


def pieces(synced: int, size: int) -> list[tuple[int, int]]:
    """``[synced, size)`` cut at page boundaries (the first piece ends where its page does)."""
    bounds = [synced]
    page_end = (synced // PAGE + 1) * PAGE
    while page_end < size:
        bounds.append(page_end)
        page_end += PAGE
    bounds.append(size)
    return [(start, end) for start, end in itertools.pairwise(bounds) if end > start]


def damaged(content: bytes, synced: int, fates: Sequence[Fate]) -> bytes:
    """``content`` after a power cut that dealt ``fates`` to the pages after ``synced``."""
    image = [content[:synced]]
    for (start, end), fate in zip(pieces(synced, len(content)), fates, strict=True):
        if fate == "keep":
            image.append(content[start:end])
        elif fate == "zero":
            image.append(bytes(end - start))
    return b"".join(image)


@dataclass(frozen=True)
class Cut:
    """What the store had done at one moment (every file but the checkpoint only grows)."""

    label: Label
    log_size: int
    synced: int
    """How many leading log bytes a completed fsync covered."""
    mtime_ns: int
    checkpoints: int
    """How many checkpoint versions had been renamed into place."""
    index_size: int
    acknowledged: int
    """How many entries a completed flush made durable."""
    appended: int
    now: Instant = NOW
    """The wall clock of the live Schedule (when one runs)."""
    delivered: int = 0
    """How many follow-ups its agent had accepted."""


@dataclass
class Run:
    """One writer's session, and the cut points recorded while it was written."""

    log: bytes = b""
    inode: int = 0
    index: bytes = b""
    versions: list[bytes] = field(default_factory=list)
    cuts: list[Cut] = field(default_factory=list)
    entries: list[tuple[str, object]] = field(default_factory=list)


def history(seed: int, count: int) -> list[tuple[str, object] | None]:
    """``count`` entries, mostly messages, with creates, dispatches and deletes among them;
    ``None`` marks a barrier."""
    chosen = random.Random(seed)  # noqa: S311 - reproducible test data
    active: list[int] = []
    created = 0
    dispatches = 0
    steps: list[tuple[str, object] | None] = []
    for number in range(count):
        roll = chosen.random()
        if roll < 0.06:
            created += 1
            active.append(created)
            steps.append((CHANGE_EVENT_TYPE, every(created, every_seconds=300)))
        elif roll < 0.10 and active:
            # Each dispatch is decided an hour after the one before: never before a target.
            dispatches += 1
            accepted = Instant(ANCHOR + dispatches * HOUR)
            steps.append(
                (
                    CHANGE_EVENT_TYPE,
                    dispatch_change(make_schedule_id(chosen.choice(active)), accepted),
                )
            )
        elif roll < 0.12 and active:
            gone = active.pop(chosen.randrange(len(active)))
            steps.append((CHANGE_EVENT_TYPE, delete_change(make_schedule_id(gone))))
        else:
            steps.append(("message", turn(number)))
        if chosen.random() < 0.2:
            steps.append(None)
    return steps


class Writer:
    """Writes the session through the real store and records a cut point after every step and
    inside every fsync of the log (after the fsync, before anything the barrier writes next)."""

    def __init__(self, root: Path, handle: JsonlSessionHandle, *, flush_on_loop: bool) -> None:
        self.handle = handle
        self.flush_on_loop = flush_on_loop
        self.path = handle.path
        self.index = root / INDEX_NAME
        self.run = Run(inode=self.path.stat().st_ino)
        self.versions: list[bytes] = []
        self.synced = self.path.stat().st_size
        """How many leading bytes of the log a completed fsync covered (creating it fsync'd
        the header)."""
        self.observe: Callable[[], tuple[Instant, int]] = lambda: (NOW, 0)
        """What the live Schedule shows at a cut point: its clock and its agent's follow-ups."""
        self.lock = threading.Lock()
        self.flight: asyncio.Future[None] | None = None
        self.real_fsync = os.fsync
        self.real_write_checkpoint = checkpoints_module.write_checkpoint

    def cut(self, label: Label) -> None:
        with self.lock:
            status = self.path.stat()
            self.run.cuts.append(
                Cut(
                    label,
                    status.st_size,
                    self.synced,
                    status.st_mtime_ns,
                    len(self.versions),
                    self.index.stat().st_size if self.index.exists() else 0,
                    self.handle.durable_length,
                    len(self.handle._entries),
                    *self.observe(),
                )
            )

    def fsync(self, fd: int) -> None:
        status = os.fstat(fd)
        if status.st_ino == self.run.inode:
            self.cut("fsync in flight")
        self.real_fsync(fd)
        if status.st_ino == self.run.inode:
            self.synced = max(self.synced, status.st_size)
            self.cut("fsync'd, commit record unwritten")

    def write_checkpoint(self, target: Path, data: bytes) -> None:
        self.real_write_checkpoint(target, data)
        with self.lock:
            self.versions.append(data)

    async def barrier(self, chosen: random.Random) -> None:
        if not self.flush_on_loop and chosen.random() < 0.5:
            if self.flight is None:
                # A barrier in flight while more entries are appended (session's thread).
                self.flight = asyncio.ensure_future(self.handle.barrier())
                await asyncio.sleep(0)
            return
        await self.landed(wait=True)
        await self.handle.barrier()
        self.cut("acknowledged")
        if chosen.random() < 0.5:
            # The loop runs the deferred commit record's callback (or, after a flush on the
            # session's thread, the next-target record lands) before the next entry.
            await self.settle()
            self.cut("acknowledged")

    async def landed(self, *, wait: bool) -> None:
        if self.flight is not None and (wait or self.flight.done()):
            await self.flight
            self.flight = None

    async def settle(self) -> None:
        await asyncio.sleep(0)
        await self.handle._worker.run(lambda: None)
        await asyncio.sleep(0)

    async def append(self, step: tuple[str, object]) -> None:
        self.handle.append(*step)
        await self.landed(wait=False)
        self.cut("appended")

    async def finish(self) -> Run:
        await self.landed(wait=True)
        await self.handle.barrier()
        await self.settle()
        self.cut("acknowledged")
        self.run.log = self.path.read_bytes()
        self.run.index = self.index.read_bytes() if self.index.exists() else b""
        self.run.versions = list(self.versions)
        self.run.entries = payloads(self.handle.entries)
        await self.handle.close()
        return self.run


async def write(root: Path, *, flush_on_loop: bool, seed: int, count: int) -> Run:
    """Write the session of :func:`history`, recording its cut points."""
    store = JsonlSessionStore(root, flush_on_loop=flush_on_loop)
    writer = Writer(root, await store.create(now=NOW, session_id=SID), flush_on_loop=flush_on_loop)
    chosen = random.Random(seed + 1)  # noqa: S311 - reproducible test data
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", writer.fsync)
        patch.setattr(checkpoints_module, "write_checkpoint", writer.write_checkpoint)
        for step in history(seed, count):
            if step is None:
                await writer.barrier(chosen)
            else:
                await writer.append(step)
        return await writer.finish()


@dataclass(frozen=True)
class Case:
    """One power cut: where, and the fate of every page of every file."""

    cut: Cut
    log_fates: list[Fate]
    checkpoint: int | None
    """Which checkpoint version the name holds after the cut (``None``: none)."""
    checkpoint_fates: list[Fate]
    index_size: int
    index_fates: list[Fate]
    metadata: Literal["committed", "fresh"]


def fates(count: int) -> st.SearchStrategy[list[Fate]]:
    # Mostly whole pages kept: a cut that loses everything unsynced is one case among many.
    fate: st.SearchStrategy[Fate] = st.sampled_from(FATES) | st.just("keep")
    return st.lists(fate, min_size=count, max_size=count)


@st.composite
def cases(draw: st.DrawFn, run: Run) -> Case:
    # Each kind of cut point as likely as the others (most are appends of messages).
    label = draw(st.sampled_from(LABELS))
    cut = draw(st.sampled_from([cut for cut in run.cuts if cut.label == label]))
    log_fates = draw(fates(len(pieces(cut.synced, cut.log_size))))
    version = draw(st.none() | st.integers(0, cut.checkpoints - 1)) if cut.checkpoints else None
    checkpoint_fates: list[Fate] = []
    if version is not None:
        # The newest version is the likeliest survivor; an older one is still possible.
        if draw(st.booleans()):
            version = cut.checkpoints - 1
        checkpoint_fates = draw(fates(len(pieces(0, len(run.versions[version])))))
    index_size = draw(st.integers(0, cut.index_size) | st.just(cut.index_size))
    index_fates = draw(fates(len(pieces(0, index_size))))
    metadata: Literal["committed", "fresh"] = draw(st.sampled_from(["committed", "fresh"]))
    return Case(cut, log_fates, version, checkpoint_fates, index_size, index_fates, metadata)


def strict_fold(entries: Sequence[LogEntry]) -> ScheduleFold:
    return fold(
        (entry.position, entry.payload)  # type: ignore[misc]
        for entry in entries
        if entry.type == CHANGE_EVENT_TYPE
    )


Folded = tuple[list[ScheduleRecord], int]


def records(state: ScheduleFold) -> Folded:
    return state.by_creation(), state.highest_id


def bound_to(checkpoint_image: bytes | None, log: bytes) -> int | None:
    """The entry count of ``checkpoint_image`` if it is intact and bound to a commit record
    that ``log`` holds where it says; ``None`` otherwise (such a checkpoint must not be used)."""
    if checkpoint_image is None:
        return None
    seal, _, body = checkpoint_image.partition(b"\n")
    try:
        found = msgspec.json.decode(body, type=CheckpointFile)
    except msgspec.DecodeError:
        return None
    if seal != b"%08x" % zlib.crc32(body):
        return None
    if not log[: found.offset].endswith(commit_line(found.entries, found.chain)):
        return None
    return found.entries


async def crash_and_open(
    root: Path, run: Run, case: Case
) -> tuple[list[tuple[str, object]], Folded]:
    store = JsonlSessionStore(root)
    store.data_dir.mkdir(parents=True)
    path = store.path_of(SID)
    cut = case.cut
    log = damaged(run.log[: cut.log_size], cut.synced, case.log_fates)
    path.write_bytes(log)
    path.chmod(0o600)
    if case.metadata == "committed":
        os.utime(path, ns=(cut.mtime_ns, cut.mtime_ns))
    checkpoint_image = None
    if case.checkpoint is not None:
        checkpoint_image = damaged(run.versions[case.checkpoint], 0, case.checkpoint_fates)
        store.checkpoint_path(SID).write_bytes(checkpoint_image)
    index = damaged(run.index[: case.index_size], 0, case.index_fates)
    # A power cut keeps the log's inode: the index's records name the crashed file's.
    index = index.replace(b",%d," % run.inode, b",%d," % path.stat().st_ino)
    (root / INDEX_NAME).write_bytes(index)

    # Cold, before anything repairs the log: the index answers as the log reads.
    before = await store.read(SID)
    expected_target = next_target_of(before.header, before.entries)
    due = await store.due_sessions(LAST_INSTANT, limit=10)
    assert [(found.session_id, found.next_target) for found in due] == (
        [] if expected_target is None else [(SID, expected_target)]
    ), f"due_sessions disagrees with the log at a cut point {cut.label!r}"

    usable = bound_to(checkpoint_image, log)
    async with await store.open(SID) as handle:
        found = payloads(handle.entries)
        resume = handle.resume
        assert len(found) >= cut.acknowledged
        assert found == run.entries[: len(found)]
        whole = (await store.read(SID)).entries
        assert payloads(whole) == found
        if resume is not None:
            # Used only when it is intact and bound to a commit record the log holds.
            assert usable == resume.position
            assert (list(resume.records), resume.highest_id) == records(
                strict_fold(whole[: resume.position])
            )
            state = ScheduleFold.resumed(resume.records, highest_id=resume.highest_id, session=SID)
            state.replay(
                [
                    (entry.position, entry.payload)  # type: ignore[misc]
                    for entry in whole[resume.position :]
                    if entry.type == CHANGE_EVENT_TYPE
                ]
            )
            assert records(state) == records(strict_fold(whole))
    # The open left a file that verifies throughout.
    inspection = await store.inspect(SID)
    assert inspection.torn_bytes == 0
    assert payloads(inspection.snapshot.entries) == found
    return found, records(strict_fold(whole))


async def reopen(root: Path, found: list[tuple[str, object]], folded: Folded) -> None:
    """The session opens again the same, from the checkpoint its close wrote, and nothing
    is left to repair."""
    store = JsonlSessionStore(root)
    path = store.path_of(SID)
    repaired = path.read_bytes()
    async with await store.open(SID) as again:
        assert payloads(again.entries) == found
        if found:
            assert again.resume is not None
            assert again.resume.position == len(found)
            assert (list(again.resume.records), again.resume.highest_id) == folded
    assert path.read_bytes() == repaired


def check(root: Path, count: int, capsys: pytest.CaptureFixture[str]) -> None:
    """``session-schedule check`` finds the session sound."""
    capsys.readouterr()
    assert main(["--data-dir", str(root), "check", SID]) == 0
    entries = "1 entry" if count == 1 else f"{count} entries"
    assert re.fullmatch(rf"session {SID} is sound: {entries} .*\n", capsys.readouterr().out)


_RUNS: dict[str, Run] = {}


def recorded(factory: pytest.TempPathFactory, flush: Literal["loop", "thread"]) -> Run:
    if flush not in _RUNS:
        root = factory.mktemp(f"writer-{flush}")
        _RUNS[flush] = asyncio.run(
            write(root, flush_on_loop=flush == "loop", seed=7, count=2 * EVERY + 300)
        )
    return _RUNS[flush]


@pytest.mark.parametrize("flush", ["loop", "thread"])
def test_the_writer_took_periodic_checkpoints_and_cut_points_of_every_kind(
    tmp_path_factory: pytest.TempPathFactory, flush: Literal["loop", "thread"]
) -> None:
    run = recorded(tmp_path_factory, flush)
    assert len(run.entries) > 2 * EVERY
    bound = [msgspec.json.decode(v.partition(b"\n")[2], type=CheckpointFile) for v in run.versions]
    assert [found.entries // EVERY for found in bound][:2] == [1, 2]
    labels = {cut.label for cut in run.cuts}
    assert labels == set(LABELS)
    changes = [kind for kind, value in run.entries if kind == CHANGE_EVENT_TYPE]
    assert len(changes) > 100
    assert run.cuts[-1].acknowledged == len(run.entries)


@pytest.mark.parametrize("flush", ["loop", "thread"])
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_power_cut_while_checkpointing_loses_no_acknowledged_entry_and_trusts_no_stale_checkpoint(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    flush: Literal["loop", "thread"],
    data: st.DataObject,
) -> None:
    run = recorded(tmp_path_factory, flush)
    case = data.draw(cases(run))
    root = tmp_path_factory.mktemp("crashed") / "data"
    found, folded = asyncio.run(crash_and_open(root, run, case))
    check(root, len(found), capsys)
    asyncio.run(reopen(root, found, folded))


def later(number: int) -> ScheduleChange:
    return create_change(
        EveryScheduleRecord(
            id=make_schedule_id(number),
            prompt=f"later {number}",
            every_seconds=300,
            scheduled_at="2031-01-01T00:00:00.000Z",
        )
    )


def power_cut(path: Path, synced: int, index: Path) -> Callable[[], None]:
    """The session's files as they are now, after a power cut that zero-fills the log's bytes
    after ``synced`` and keeps its inode, size and modification time (its metadata was committed,
    its data pages were not): returns what puts them back so once the writer has gone."""
    content, status, records = path.read_bytes(), path.stat(), index.read_bytes()

    def restore() -> None:
        with path.open("r+b") as file:
            file.truncate(0)
            file.write(content[:synced] + bytes(len(content) - synced))
        os.utime(path, ns=(status.st_mtime_ns, status.st_mtime_ns))
        index.write_bytes(records)

    return restore


@pytest.mark.parametrize("how", ["flush lands", "close"])
async def test_the_next_target_record_never_counts_an_entry_that_is_not_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: Literal["flush lands", "close"]
) -> None:
    """Regression: a record written when a flush on the session's thread landed counted the
    entries appended during its fsync, and one written at close counted entries no barrier
    covered. A power cut that zero-filled them (keeping the file's size and mtime) left a record
    that looked fresh: ``due_sessions`` reported 2031 while the surviving log's reminder is due
    in 2030."""
    store = JsonlSessionStore(tmp_path / "data", flush_on_loop=False)
    handle = await store.create(now=NOW, session_id=SID)
    path = store.path_of(SID)
    handle.append(CHANGE_EVENT_TYPE, every(1, every_seconds=300))
    handle.append(CHANGE_EVENT_TYPE, later(2))
    await handle.barrier()
    synced = path.stat().st_size
    index = store.data_dir / INDEX_NAME
    if how == "flush lands":
        real_fsync = os.fsync
        release = threading.Event()

        def fsync(fd: int) -> None:
            release.wait(5)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        handle.append("message", turn(1))
        handle.append(CHANGE_EVENT_TYPE, later(3))
        flight = asyncio.ensure_future(handle.barrier())
        while handle.flush_count < 2:
            await asyncio.sleep(0)
        synced = path.stat().st_size  # what the fsync in flight covers at most
        handle.append(CHANGE_EVENT_TYPE, delete_change(make_schedule_id(1)))
        release.set()
        await flight
        await handle._worker.run(lambda: None)  # whatever record it wrote is written
        monkeypatch.undo()
        restore = power_cut(path, synced, index)
        await handle.close()
    else:
        handle.append(CHANGE_EVENT_TYPE, delete_change(make_schedule_id(1)))
        await handle.close()
        restore = power_cut(path, synced, index)
    restore()
    survived = await store.read(SID)
    assert [entry.type for entry in survived.entries][:2] == [CHANGE_EVENT_TYPE] * 2
    assert next_target_of(survived.header, survived.entries) == ANCHOR
    assert await store.due_sessions(LAST_INSTANT) == (DueSession(SID, Instant(ANCHOR)),)


# Reminder accounting: a live Schedule on a fake clock, cut and reopened.


@dataclass
class LiveRun:
    """A session a live Schedule kept: the writer's run and every follow-up's keys."""

    run: Run
    followups: list[tuple[str, ...]]
    """The occurrence keys of each accepted follow-up, in order."""
    dispatches: list[int]
    """The log position of each delivered occurrence's dispatch change, in delivery order."""


async def live_write(root: Path, *, seed: int, rounds: int) -> LiveRun:
    """Rounds of messages, creates of every-300 s reminders, deletes, and 300 s of virtual time
    in which the owner delivers what is due, recording cut points throughout."""
    store = JsonlSessionStore(root)
    handle = await store.create(now=NOW, session_id=SID)
    writer = Writer(root, handle, flush_on_loop=True)
    clock = FakeClock(NOW)
    agent = FakeAgent()
    writer.observe = lambda: (clock.now(), len(agent.followups))
    chosen = random.Random(seed)  # noqa: S311 - reproducible test data
    active: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", writer.fsync)
        patch.setattr(checkpoints_module, "write_checkpoint", writer.write_checkpoint)
        async with LiveSchedule(handle, agent, clock=clock) as live:
            for number in range(rounds):
                for _ in range(chosen.randrange(60, 120)):
                    await writer.append(("message", turn(number)))
                await writer.barrier(chosen)
                if chosen.random() < 0.7:
                    view = await live.create({"prompt": f"r{number}", "every_seconds": 300})
                    active.append(view.id)
                    writer.cut("acknowledged")
                if active and chosen.random() < 0.2:
                    await live.delete({"id": active.pop(chosen.randrange(len(active)))})
                    writer.cut("acknowledged")
                clock.advance(chosen.choice([100, 300, 900]))
                await live.settled()
                writer.cut("acknowledged")
        run = await writer.finish()
    followups = [occurrence_keys(text) for text in agent.followups]
    dispatches = [
        position
        for position, (kind, value) in enumerate(run.entries)
        if kind == CHANGE_EVENT_TYPE and isinstance(value, ScheduleDispatchChange)
    ]
    keys = [key for frame in followups for key in frame]
    # One dispatch per delivered occurrence, appended in the order they were framed.
    assert [key.partition("@")[0] for key in keys] == [
        cast("ScheduleDispatchChange", run.entries[position][1]).id for position in dispatches
    ]
    return LiveRun(run, followups, dispatches)


async def deliver_after_reopen(root: Path, now: Instant) -> tuple[list[str], ScheduleFold]:
    """Reopen the session and run a live Schedule from ``now`` for 300 s: the keys it delivers
    and the fold it started from."""
    store = JsonlSessionStore(root)
    clock = FakeClock(now)
    agent = FakeAgent()
    async with await store.open(SID) as handle:
        state = strict_fold((await store.read(SID)).entries)
        async with LiveSchedule(handle, agent, clock=clock) as live:
            await live.settled()
            clock.advance(300)
            await live.settled()
    return [key for text in agent.followups for key in occurrence_keys(text)], state


def account(live: LiveRun, cut: Cut, survived: list[tuple[str, object]], after: list[str]) -> None:
    """No acknowledged reminder lost, no phantom dispatch, repeats only after a lost dispatch."""
    keys = [key for frame in live.followups for key in frame]
    before = keys[: sum(len(frame) for frame in live.followups[: cut.delivered])]
    # Every dispatch that survived was preceded by its follow-up.
    surviving = [position for position in live.dispatches if position < len(survived)]
    assert len(surviving) <= len(before)
    # A repeat is allowed only for an occurrence whose dispatch did not survive (at-least-once).
    lost = {
        key
        for key, position in zip(before, live.dispatches, strict=False)
        if position >= len(survived)
    }
    lost |= set(before[len(live.dispatches) :])
    assert set(after) & set(before) <= lost
    assert len(after) == len(set(after))
    # Every reminder the surviving log created is deleted there, or delivered after the reopen.
    created = {
        value.schedule.id for kind, value in survived if isinstance(value, ScheduleCreateChange)
    }
    deleted = {value.id for kind, value in survived if isinstance(value, ScheduleDeleteChange)}
    delivered = {key.partition("@")[0] for key in after}
    assert created - deleted == delivered
    # Acknowledged creates are among them.
    acknowledged = {
        value.schedule.id
        for kind, value in survived[: cut.acknowledged]
        if isinstance(value, ScheduleCreateChange)
    }
    assert acknowledged <= created


_LIVE: list[LiveRun] = []


def live_recorded(factory: pytest.TempPathFactory) -> LiveRun:
    if not _LIVE:
        root = factory.mktemp("live-writer")
        _LIVE.append(asyncio.run(live_write(root, seed=11, rounds=30)))
    return _LIVE[0]


def test_the_live_writer_took_checkpoints_and_delivered_across_them(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    live = live_recorded(tmp_path_factory)
    assert len(live.run.entries) > 2 * EVERY
    assert len(live.run.versions) >= 2
    assert len(live.dispatches) > 20
    assert {cut.label for cut in live.run.cuts} == set(LABELS)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_power_cut_under_a_live_schedule_loses_no_acknowledged_reminder(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    data: st.DataObject,
) -> None:
    live = live_recorded(tmp_path_factory)
    case = data.draw(cases(live.run))
    root = tmp_path_factory.mktemp("crashed") / "data"
    found, _ = asyncio.run(crash_and_open(root, live.run, case))
    after, _ = asyncio.run(deliver_after_reopen(root, case.cut.now))
    account(live, case.cut, found, after)
