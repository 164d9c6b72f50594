"""Forks of JSONL sessions: the prefix copied from the parent's checkpoint, the fork's own
checkpoint written with it, durably, and every integrity property of the parent's log kept."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from session_schedule.session import JsonlSessionStore, SessionCorrupt, SessionId
from session_schedule.session.checkpoint import WINDOW, CheckpointFile, seal
from session_schedule.session.handle import LazyEntries
from session_schedule.session.jsonl import creation as creation_module
from session_schedule.session.jsonl import files as files_module
from session_schedule.session.jsonl import segments as segments_module
from session_schedule.session.jsonl.files import SUFFIX
from session_schedule.session.jsonl.handle import JsonlSessionHandle
from session_schedule.session.lines import commit_line
from session_schedule.testing.session_contract import NOW, payloads, schedule_create, turn
from tests.session.database_forks import FORK, GRANDCHILD, SID, full_read, max_id, write_history
from tests.session.histories import append_history


@pytest.fixture
def store(tmp_path: Path) -> JsonlSessionStore:
    return JsonlSessionStore(tmp_path / "data")


def checkpoint_of(store: JsonlSessionStore, session: SessionId) -> CheckpointFile:
    body = store.checkpoint_path(session).read_bytes().partition(b"\n")[2]
    return msgspec.json.decode(body, type=CheckpointFile)


def head_length(path: Path) -> int:
    return path.read_bytes().index(b"\n") + 1


async def assert_sound_fork(
    store: JsonlSessionStore, fork: SessionId, inherited: list[tuple[str, object]], highest: int
) -> None:
    """The fork holds exactly ``inherited``, opens from its checkpoint with none of its parent's
    reminders, ``check`` finds nothing, and its next reminder's id is past every inherited one."""
    assert await full_read(store, fork) == inherited
    assert await store.derived_problems(fork) == ()
    async with await store.open(fork) as handle:
        assert handle.resume is not None
        assert handle.resume.position == len(inherited)
        assert handle.resume.records == ()
        assert handle.resume.highest_id == highest
        entries = handle._entries
        assert isinstance(entries, LazyEntries)
        assert entries.start == max(0, len(inherited) - WINDOW)  # only the window decoded
        assert payloads(handle.entries) == inherited


async def test_a_fork_copies_the_bytes_up_to_the_parents_checkpoint_verbatim(
    store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    parent = await full_read(store)
    found = checkpoint_of(store, SID)
    assert found.entries == len(parent)

    def no_whole_read(data: bytes, source: object) -> object:
        raise AssertionError("the parent was read whole")

    monkeypatch.setattr(creation_module, "scan", no_whole_read)
    async with await store.fork(SID, now=NOW, session_id=FORK) as fork:
        assert fork.resume is not None
        assert [fork.checksum(n) for n in (0, len(parent) - 1)] == [
            (await store.inspect(SID)).checksums[n] for n in (0, len(parent) - 1)
        ]
    monkeypatch.undo()
    parent_bytes = store.path_of(SID).read_bytes()
    fork_bytes = store.path_of(FORK).read_bytes()
    # Everything after the header up to the checkpoint's commit record, byte for byte, and the
    # fork ends with that commit record (to which its own checkpoint is bound).
    assert (
        fork_bytes[head_length(store.path_of(FORK)) :]
        == (parent_bytes[head_length(store.path_of(SID)) : found.offset])
    )
    assert found.offset == len(parent_bytes)
    assert fork_bytes.endswith(commit_line(len(parent), found.chain))
    own = checkpoint_of(store, FORK)
    assert (own.entries, own.offset, own.chain) == (len(parent), len(fork_bytes), found.chain)
    assert own.lines == fork_bytes.count(b"\n")
    # The parent's segment index, moved by the header's change in length.
    shift = head_length(store.path_of(FORK)) - head_length(store.path_of(SID))
    assert len(found.segments) >= 2
    assert [(s.entries, s.offset + shift, s.lines, s.chain) for s in found.segments] == [
        (s.entries, s.offset, s.lines, s.chain) for s in own.segments
    ]
    await assert_sound_fork(store, FORK, parent, highest=60)


async def test_the_copy_falls_back_to_reads_without_copy_file_range(
    store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_history(store)
    calls: list[int] = []

    def unsupported(*args: object) -> int:
        calls.append(1)
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(os, "copy_file_range", unsupported, raising=False)
    monkeypatch.setattr(creation_module, "_COPY_CHUNK", 4096)  # several reads and writes
    await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    assert calls == [1]
    await assert_sound_fork(store, FORK, await full_read(store), highest=60)


async def test_a_fork_after_the_parents_checkpoint_decodes_only_the_entries_after_it(
    store: JsonlSessionStore,
) -> None:
    await write_history(store)
    at_checkpoint = checkpoint_of(store, SID).entries
    async with await store.open(SID) as parent:
        await append_history(parent, 61, 70)  # after the checkpoint, which stays where it was
        assert checkpoint_of(store, SID).entries == at_checkpoint
        everything = payloads(parent.entries)
        for at in (at_checkpoint, at_checkpoint + 5, len(everything)):
            fork = SessionId(f"s_fork{at:08d}")
            await (await store.fork(SID, at=at, now=NOW, session_id=fork)).close()
            inherited = everything[:at]
            await assert_sound_fork(store, fork, inherited, highest=max_id(inherited))


async def test_a_fork_before_the_parents_checkpoint_reads_the_parent_whole(
    store: JsonlSessionStore,
) -> None:
    await write_history(store)
    everything = await full_read(store)
    for at in (0, 1, 20, len(everything) - 1):
        fork = SessionId(f"s_fork{at:08d}")
        await (await store.fork(SID, at=at, now=NOW, session_id=fork)).close()
        if at == 0:
            assert await full_read(store, fork) == []
            assert not store.checkpoint_path(fork).exists()  # nothing inherited, nothing to keep
            continue
        await assert_sound_fork(store, fork, everything[:at], highest=max_id(everything[:at]))


async def test_a_fork_of_a_parent_without_a_checkpoint(store: JsonlSessionStore) -> None:
    await write_history(store)
    store.checkpoint_path(SID).unlink()
    await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    await assert_sound_fork(store, FORK, await full_read(store), highest=60)


async def test_forks_of_forks(store: JsonlSessionStore) -> None:
    await write_history(store)
    parent = await full_read(store)
    async with await store.fork(SID, now=NOW, session_id=FORK) as fork:
        fork.append("message", turn(500))
        fork.append("schedule/change", schedule_create(61))
        await fork.barrier()
    child = await full_read(store, FORK)
    # The checkpoint its close wrote counts the fork's lines and bytes as they are.
    written = store.path_of(FORK).read_bytes()
    assert (checkpoint_of(store, FORK).lines, checkpoint_of(store, FORK).offset) == (
        written.count(b"\n"),
        len(written),
    )
    assert child == [*parent, ("message", turn(500)), ("schedule/change", schedule_create(61))]
    # The child's checkpoint (written with it) binds: the grandchild copies up to it.
    async with await store.fork(FORK, now=NOW, session_id=GRANDCHILD) as grandchild:
        assert grandchild.resume is not None
        assert grandchild.header.seed_length == len(child)
    await assert_sound_fork(store, GRANDCHILD, child, highest=61)
    async with await store.open(GRANDCHILD) as grandchild:
        grandchild.append("message", turn(501))
        await grandchild.barrier()
    # And a fork of the grandchild before its own checkpoint, within the parent's history.
    early = SessionId("s_dddddddddddd")
    await (await store.fork(GRANDCHILD, at=100, now=NOW, session_id=early)).close()
    await assert_sound_fork(store, early, parent[:100], highest=max_id(parent[:100]))


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


async def test_a_parent_damaged_after_its_checkpoint_is_not_forked(
    store: JsonlSessionStore,
) -> None:
    await write_history(store)
    offset = checkpoint_of(store, SID).offset
    async with await store.open(SID) as parent:
        await append_history(parent, 61, 62)
        # A lone barrier's commit record is written by a loop callback once its caller has gone
        # on: let it run, so that the damage below is vouched for (else it is a torn tail).
        await asyncio.sleep(0)
        assert store.path_of(SID).read_bytes().rsplit(b"\n", 2)[-2].startswith(b'{"ack":')
        # Damage an acknowledged entry after the checkpoint (a commit record vouches for it).
        flip(store.path_of(SID), offset + 30)
        with pytest.raises(SessionCorrupt, match="does not match its checksum"):
            await store.fork(SID, now=NOW, session_id=FORK)
    assert not store.path_of(FORK).exists()
    assert not store.checkpoint_path(FORK).exists()


@contextlib.contextmanager
def commit_callbacks_held() -> Iterator[list[Callable[[], None]]]:
    """The loop callbacks that write lone barriers' commit records, held back (as when a fork
    reads the parent before the loop has run them): run them in the order returned."""
    held: list[Callable[[], None]] = []
    real = JsonlSessionHandle._after_flush

    def hold(handle: JsonlSessionHandle, target: int) -> None:
        held.append(functools.partial(real, handle, target))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(JsonlSessionHandle, "_after_flush", hold)
        yield held


async def test_a_fork_right_after_a_lone_barrier_reads_its_commit_record(
    store: JsonlSessionStore,
) -> None:
    await write_history(store)
    with commit_callbacks_held() as held:
        async with await store.open(SID) as parent:
            await append_history(parent, 61, 62)
            # A lone barrier: its commit record waits for a loop callback.
            assert not store.path_of(SID).read_bytes().rsplit(b"\n", 2)[-2].startswith(b'{"ack":')
            fork = await store.fork(SID, now=NOW, session_id=FORK)
            await fork.close()
            # The fork had the parent's handle write it first; the callback finds it written.
            assert held
            tail = store.path_of(SID).read_bytes()
            assert tail.rsplit(b"\n", 2)[-2].startswith(b'{"ack":')
            for callback in held:
                callback()
            assert store.path_of(SID).read_bytes() == tail
            inherited = payloads(parent.entries)
    assert await full_read(store, SID) == inherited
    await assert_sound_fork(store, FORK, inherited, max_id(inherited))


async def test_an_acknowledged_entry_damaged_right_after_a_lone_barrier_is_not_cut_by_a_fork(
    store: JsonlSessionStore,
) -> None:
    await write_history(store)
    offset = checkpoint_of(store, SID).offset
    with commit_callbacks_held() as held:
        async with await store.open(SID) as parent:
            await append_history(parent, 61, 62)
            # Damage an acknowledged entry while its commit record still waits for the loop: the
            # fork sees that record first, so the damage is reported, not taken for a torn tail.
            flip(store.path_of(SID), offset + 30)
            with pytest.raises(SessionCorrupt, match="does not match its checksum"):
                await store.fork(SID, now=NOW, session_id=FORK)
            for callback in held:
                callback()
    assert not store.path_of(FORK).exists()
    assert not store.checkpoint_path(FORK).exists()


async def test_a_parent_damaged_in_its_checkpoints_window_is_not_forked(
    store: JsonlSessionStore,
) -> None:
    await write_history(store)
    found = checkpoint_of(store, SID)
    data = store.path_of(SID).read_bytes()
    # A line inside the window (the checkpoint then does not bind: the whole read reports it).
    line_start = data.rindex(b'\n{"seq":', 0, found.offset - 200) + 1
    flip(store.path_of(SID), line_start + 30)
    with pytest.raises(SessionCorrupt, match="does not match its checksum"):
        await store.fork(SID, now=NOW, session_id=FORK)
    assert sorted(p.name for p in store.data_dir.iterdir() if FORK in p.name) == []


async def test_a_forged_parent_checkpoint_is_not_copied_from(store: JsonlSessionStore) -> None:
    await write_history(store)
    found = checkpoint_of(store, SID)
    # Bound to a commit record that is not in the log: ignored, the parent read whole.
    body = msgspec.json.decode(store.checkpoint_path(SID).read_bytes().partition(b"\n")[2])
    body["chain"] = found.chain ^ 1
    store.checkpoint_path(SID).write_bytes(
        seal(msgspec.json.decode(msgspec.json.encode(body), type=CheckpointFile))
    )
    await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    await assert_sound_fork(store, FORK, await full_read(store), highest=60)


class _Disk:
    """What a power cut keeps of the directory operations and fsyncs traced: a file's bytes
    once it is fsync'd, a new name (link, rename, unlink) once its directory is fsync'd."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.synced: set[int] = set()
        self.durable: dict[str, int] = {p.name: p.lstat().st_ino for p in directory.iterdir()}
        self.pending: list[tuple[str, int | None]] = []
        self.cuts: list[dict[str, int]] = []

    def fsync(self, fd: int) -> None:
        status = os.fstat(fd)
        if Path(f"/proc/self/fd/{fd}").samefile(self.directory):
            for name, inode in self.pending:
                if inode is None:
                    self.durable.pop(name, None)
                else:
                    self.durable[name] = inode
            self.pending.clear()
        else:
            self.synced.add(status.st_ino)
        self.cut()

    def named(self, target: str | os.PathLike[str], inode: int | None) -> None:
        path = Path(target)
        if path.parent == self.directory:
            self.pending.append((path.name, inode))
        self.cut()

    def cut(self) -> None:
        """A power cut here keeps these names, each of a file whose bytes are durable or not."""
        self.cuts.append(dict(self.durable))


def traced(disk: _Disk, monkeypatch: pytest.MonkeyPatch) -> None:
    real_fsync, real_link, real_replace, real_rename = os.fsync, os.link, os.replace, os.rename
    real_unlink = os.unlink

    def fsync(fd: int) -> None:
        real_fsync(fd)
        disk.fsync(fd)

    def link(source: str | os.PathLike[str], target: str | os.PathLike[str], **kw: object) -> None:
        real_link(source, target)
        disk.named(target, os.lstat(target).st_ino)

    def replace_with(real: Callable[..., None]) -> Callable[..., None]:
        def move(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
            real(source, target)
            disk.named(source, None)
            disk.named(target, os.lstat(target).st_ino)

        return move

    def unlink(target: str | os.PathLike[str], **kw: object) -> None:
        real_unlink(target)
        disk.named(target, None)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "replace", replace_with(real_replace))
    monkeypatch.setattr(os, "rename", replace_with(real_rename))
    monkeypatch.setattr(os, "unlink", unlink)


async def test_a_forks_checkpoint_survives_a_power_cut(
    store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """At every moment of the fork and its close, a power cut that keeps the fork keeps its
    checkpoint, fsync'd; the fork then opens from it."""
    await write_history(store)
    parent = await full_read(store)
    disk = _Disk(store.data_dir)
    traced(disk, monkeypatch)
    await (await store.fork(SID, now=NOW, session_id=FORK)).close()
    monkeypatch.undo()
    fork_name, checkpoint_name = f"{FORK}{SUFFIX}", store.checkpoint_path(FORK).name
    surviving = [cut for cut in disk.cuts if fork_name in cut]
    assert surviving  # the fork itself is durable once created
    for cut in surviving:
        assert checkpoint_name in cut
        assert cut[checkpoint_name] in disk.synced
    # What the disk holds after the first such cut opens from the fork's checkpoint.
    after = tmp_path / "after"
    after.mkdir(mode=0o700)
    for name in surviving[0]:
        if (store.data_dir / name).is_file() and not name.startswith("."):
            shutil.copy2(store.data_dir / name, after / name)
    await assert_sound_fork(JsonlSessionStore(after), FORK, parent, highest=60)


async def test_a_fork_whose_name_is_taken_leaves_the_sessions_checkpoint(
    store: JsonlSessionStore,
) -> None:
    await write_history(store)
    async with await store.create(now=NOW, session_id=FORK) as other:
        other.append("message", turn(1))
        await other.barrier()
    before = store.checkpoint_path(FORK).read_bytes()
    with pytest.raises(Exception, match="exists already"):
        await store.fork(SID, now=NOW, session_id=FORK)
    assert store.checkpoint_path(FORK).read_bytes() == before
    assert [p.name for p in store.data_dir.iterdir() if p.name.endswith(".tmp")] == []


async def write_indexed_history(store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The history, with a checkpoint whose segment index has many starts (a small log, cut in
    segments of 600 bytes once it has been read back)."""
    monkeypatch.setattr(segments_module, "SEGMENT", 600)
    await write_history(store)
    async with await store.open(SID) as handle:
        assert len(list(handle.entries)) == 150  # reads the older entries: the index is built
        handle.append("message", turn(999))
        await handle.barrier()


async def test_a_fork_before_the_checkpoint_reads_the_parent_only_up_to_its_segment(
    store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_indexed_history(store, monkeypatch)
    everything = await full_read(store)
    size = store.path_of(SID).stat().st_size
    found = checkpoint_of(store, SID)
    assert len(found.segments) > 5
    read: list[int] = []
    real = files_module.pread_all

    def counted(fd: int, length: int, offset: int) -> bytes:
        read.append(length)
        return real(fd, length, offset)

    monkeypatch.setattr(creation_module, "pread_all", counted)
    monkeypatch.setattr(creation_module, "read_all", None)  # never the whole parent
    await (await store.fork(SID, at=20, now=NOW, session_id=FORK)).close()
    assert max(read) < size // 3
    monkeypatch.undo()
    await assert_sound_fork(store, FORK, everything[:20], highest=max_id(everything[:20]))


async def test_a_wrong_segment_index_makes_a_fork_read_the_parent_whole(
    store: JsonlSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_indexed_history(store, monkeypatch)
    everything = await full_read(store)
    found = checkpoint_of(store, SID)
    moved = [
        [s.entries, s.offset + (7 if n == 2 else 0), s.lines, s.chain]
        for n, s in enumerate(found.segments)
    ]
    body = msgspec.json.decode(store.checkpoint_path(SID).read_bytes().partition(b"\n")[2])
    body["segments"] = moved
    store.checkpoint_path(SID).write_bytes(
        seal(msgspec.json.decode(msgspec.json.encode(body), type=CheckpointFile))
    )
    at = found.segments[2].entries  # read up to the moved start: it does not verify
    await (await store.fork(SID, at=at, now=NOW, session_id=FORK)).close()
    await assert_sound_fork(store, FORK, everything[:at], highest=max_id(everything[:at]))
