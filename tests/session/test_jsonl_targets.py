"""The JSONL store's next-target sidecar: a cache of the logs, rebuilt when missing or stale."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from pathlib import Path

import pytest

from session_schedule.core.changes import delete_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.session import DueSession, JsonlSessionStore
from session_schedule.session.ids import SessionId, new_session_id
from session_schedule.session.jsonl import next_targets
from session_schedule.session.jsonl.next_targets import (
    INDEX_NAME,
    KEY_NAME,
    MAX_INDEX_BYTES,
    TargetIndexFile,
)
from session_schedule.session.jsonl.opening import read_log
from session_schedule.session.private import read_private
from session_schedule.testing.session_contract import CHANGE, NOW, at_create, turn

TARGET = parse_instant("2030-01-01T00:00:00.000Z")
LATER_TARGET = parse_instant("2030-02-01T00:00:00.000Z")
FAR = parse_instant("2031-01-01T00:00:00.000Z")


async def _due(store: JsonlSessionStore) -> tuple[DueSession, ...]:
    return await store.due_sessions(FAR)


def test_a_missing_index_is_rebuilt_from_the_logs(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, TARGET))
            await handle.barrier()
        index = store.data_dir / INDEX_NAME
        index.unlink()
        assert await _due(store) == (DueSession(handle.id, TARGET),)
        # Rebuilt, and written back: one line per session.
        assert len(index.read_bytes().splitlines()) == 1
        assert await _due(JsonlSessionStore(store.data_dir)) == (DueSession(handle.id, TARGET),)

    asyncio.run(body())


def test_a_record_that_no_longer_describes_the_file_is_not_trusted(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, TARGET))
            await handle.barrier()
        index = store.data_dir / INDEX_NAME
        stale = index.read_bytes()
        # The owner deletes the reminder; then its record is lost (a crash before the write).
        async with await store.open(handle.id) as reopened:
            reopened.append(CHANGE, delete_change(make_schedule_id(1)))
            reopened.append(CHANGE, at_create(2, LATER_TARGET))
            await reopened.barrier()
        index.write_bytes(stale)
        assert await _due(store) == (DueSession(handle.id, LATER_TARGET),)

    asyncio.run(body())


def test_appends_without_schedule_changes_keep_the_record_fresh(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, TARGET))
            await handle.barrier()
            handle.append("message", turn(1))
            await handle.barrier()
        # Closing wrote a record for the file as it is: no log is read to answer.
        reads: list[str] = []
        original = store._index._read_log

        def counting(path: Path, session_id: str) -> object:
            reads.append(session_id)
            return original(path, session_id)  # type: ignore[arg-type]

        store._index._read_log = counting  # type: ignore[assignment]
        assert await _due(store) == (DueSession(handle.id, TARGET),)
        assert reads == []

    asyncio.run(body())


def test_a_damaged_index_line_is_logged_and_its_session_read_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, TARGET))
            await handle.barrier()
        index = store.data_dir / INDEX_NAME
        index.write_bytes(b"not json\n")
        with caplog.at_level(logging.WARNING):
            assert await _due(store) == (DueSession(handle.id, TARGET),)
        assert (
            f"{index}: 1 line(s) of the next-target index do not decode; their sessions are "
            "read again from their logs"
        ) in caplog.messages

    asyncio.run(body())


def test_a_damaged_log_is_logged_and_not_listed_until_it_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as good:
            good.append(CHANGE, at_create(1, TARGET))
            await good.barrier()
        async with await store.create(now=NOW) as bad:
            bad.append(CHANGE, at_create(1, TARGET))
            await bad.barrier()
        path = store.path_of(bad.id)
        data = path.read_bytes()
        path.write_bytes(data[:40] + b"X" + data[41:])  # the header line no longer decodes
        (store.data_dir / INDEX_NAME).unlink()
        with caplog.at_level(logging.WARNING):
            assert await _due(store) == (DueSession(good.id, TARGET),)
        warnings = [m for m in caplog.messages if m.startswith(f"session {bad.id}:")]
        assert len(warnings) == 1
        assert warnings[0].startswith(f"session {bad.id}: its next target is not indexed: ")
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert await _due(store) == (DueSession(good.id, TARGET),)
        assert caplog.messages == []

    asyncio.run(body())


def test_superseded_records_are_compacted(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as handle:
            for number in range(1, 100):
                handle.append(CHANGE, at_create(number, TARGET))
                await handle.barrier()
                # A lone barrier's bookkeeping (the record among it) runs once its caller yields.
                await asyncio.sleep(0)
        index = store.data_dir / INDEX_NAME
        # A mark before each change, a record after each barrier, one at the close.
        assert len(index.read_bytes().splitlines()) == 99 + 99 + 1
        assert await _due(store) == (DueSession(handle.id, TARGET),)
        assert len(index.read_bytes().splitlines()) == 1
        assert oct(index.stat().st_mode & 0o777) == "0o600"

    asyncio.run(body())


def test_barriers_in_a_tight_loop_leave_a_record_of_the_last_one(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        index = store._index
        original = index.record
        written: list[int | None] = []

        def recording(
            session_id: SessionId, target: Instant | None, status: os.stat_result
        ) -> None:
            written.append(target)
            original(session_id, target, status)

        index.record = recording  # type: ignore[method-assign]
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, LATER_TARGET))
            await handle.barrier()
            # No yield: the first barrier's record would describe a file that has moved on,
            # so the next flush writes it instead.
            handle.append(CHANGE, at_create(2, TARGET))
            await handle.barrier()
            handle.append("message", turn(1))
            await handle.barrier()
            await asyncio.sleep(0)
        # One record for the last barrier, one for the close.
        assert written == [TARGET, TARGET]
        reads: list[str] = []
        read_log = index._read_log

        def counting(path: Path, session_id: str) -> object:
            reads.append(session_id)
            return read_log(path, session_id)  # type: ignore[arg-type]

        index._read_log = counting  # type: ignore[assignment]
        assert await _due(store) == (DueSession(handle.id, TARGET),)
        assert reads == []

    asyncio.run(body())


def test_a_session_opened_from_a_checkpoint_is_indexed_without_reading_its_log(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, LATER_TARGET))
            for number in range(100):
                handle.append("message", turn(number))
            await handle.barrier()
        assert store.checkpoint_path(handle.id).exists()
        async with await store.open(handle.id) as reopened:
            assert reopened.resume is not None
            reopened.append(CHANGE, at_create(2, TARGET))
            await reopened.barrier()
            # The next target came from the checkpoint's fold: the log before it was not read.
            assert not reopened._entries.loaded  # type: ignore[union-attr]
        assert await _due(store) == (DueSession(handle.id, TARGET),)
        (store.data_dir / INDEX_NAME).unlink()
        assert await _due(store) == (DueSession(handle.id, TARGET),)

    asyncio.run(body())


def test_the_owner_folds_and_writes_its_record_on_the_sessions_thread(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        index = store._index
        original = index.record
        written: list[tuple[str, int | None, int]] = []

        def recording(
            session_id: SessionId, target: Instant | None, status: os.stat_result
        ) -> None:
            written.append((threading.current_thread().name, target, status.st_size))
            original(session_id, target, status)

        index.record = recording  # type: ignore[method-assign]
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, LATER_TARGET))
            await handle.barrier()
            # A lone barrier's commit record and next-target record are written once its
            # caller yields.
            await asyncio.sleep(0)
            size = store.path_of(handle.id).stat().st_size
            handle.append(CHANGE, at_create(2, TARGET))
            await handle.barrier()
            await asyncio.sleep(0)
        # In order, on the session's worker, each for the file as its barrier left it.
        assert [(target, size) for _, target, size in written] == [
            (LATER_TARGET, size),
            (TARGET, store.path_of(handle.id).stat().st_size),
            (TARGET, store.path_of(handle.id).stat().st_size),
        ]
        assert all(thread.startswith("session-worker-") for thread, _, _ in written)
        reads: list[str] = []
        read_log = index._read_log

        def counting(path: Path, session_id: str) -> object:
            reads.append(session_id)
            return read_log(path, session_id)  # type: ignore[arg-type]

        index._read_log = counting  # type: ignore[assignment]
        assert await _due(store) == (DueSession(handle.id, TARGET),)
        assert reads == []

    asyncio.run(body())


@pytest.mark.parametrize("kind", ["link", "fifo", "device", "large"])
def test_an_index_that_is_not_a_private_file_is_not_used_and_is_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, TARGET))
            await handle.barrier()
        index = store.data_dir / INDEX_NAME
        index.unlink()
        elsewhere = tmp_path / "elsewhere"
        elsewhere.write_text("kept as it is")
        if kind == "link":
            index.symlink_to(elsewhere)
        elif kind == "fifo":
            os.mkfifo(index, 0o600)  # reading it would block for ever
        elif kind == "device":
            index.symlink_to("/dev/zero")  # reading it would never end
        else:
            with index.open("wb") as file:
                file.truncate(MAX_INDEX_BYTES + 1)
        with caplog.at_level(logging.WARNING):
            assert await _due(store) == (DueSession(handle.id, TARGET),)
        assert f"{index}: the next-target index is not used (" in caplog.text
        # Compacted into a private file in its place; the link's target is untouched.
        assert index.is_file()
        assert not index.is_symlink()
        assert index.stat().st_mode & 0o777 == 0o600
        assert len(index.read_bytes().splitlines()) == 1
        assert elsewhere.read_text() == "kept as it is"

    asyncio.run(body())


def test_an_owner_never_appends_through_a_link(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        store.data_dir.mkdir(mode=0o700)
        victim = tmp_path / "victim"
        victim.write_text("untouched\n")
        (store.data_dir / INDEX_NAME).symlink_to(victim)
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, TARGET))
            await handle.barrier()
        assert victim.read_text() == "untouched\n"
        assert await _due(store) == (DueSession(handle.id, TARGET),)

    asyncio.run(body())


def test_data_directories_are_created_0700_parents_included_whatever_the_umask(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "a" / "b" / "sessions")
        async with await store.create(now=NOW):
            pass

    old = os.umask(0)
    try:
        asyncio.run(body())
    finally:
        os.umask(old)
    for directory in ("a", "a/b", "a/b/sessions"):
        assert (tmp_path / directory).stat().st_mode & 0o777 == 0o700, directory


def test_a_forged_index_line_cannot_hide_a_due_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A line naming the file's inode, size and time (all public) with nothing active once hid
    the session from the host; records now carry a digest keyed by the directory's index key."""

    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, TARGET))
            await handle.barrier()
        index = store.data_dir / INDEX_NAME
        status = store.path_of(handle.id).stat()
        forged = json.dumps([handle.id, None, status.st_ino, status.st_size, status.st_mtime_ns])
        with index.open("a") as file:
            file.write(forged + "\n")
            file.write(json.dumps([*json.loads(forged), "0" * 32]) + "\n")
        fresh = JsonlSessionStore(store.data_dir)
        with caplog.at_level(logging.WARNING):
            assert await _due(fresh) == (DueSession(handle.id, TARGET),)
        assert "2 record(s) of the next-target index do not verify" in caplog.text
        key = store.data_dir / KEY_NAME
        assert key.stat().st_mode & 0o777 == 0o600
        assert len(key.read_bytes()) == 32

    asyncio.run(body())


def test_a_key_cut_short_is_replaced_and_the_old_records_read_again(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, TARGET))
            await handle.barrier()
        key = store.data_dir / KEY_NAME
        key.write_bytes(b"")  # a power cut right after its creation
        assert await _due(JsonlSessionStore(store.data_dir)) == (DueSession(handle.id, TARGET),)
        assert len(key.read_bytes()) == 32

    asyncio.run(body())


# Between polls: a reader keeps what it learnt, and an idle poll is O(1), not O(sessions).

SOON = parse_instant("2029-06-01T00:00:00.000Z")


class _Calls:
    """Counts the system calls a poll makes that touch files, and the logs it reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: JsonlSessionStore) -> None:
        self.counts: dict[str, int] = {}
        self.reads: list[str] = []
        for name in ("stat", "lstat", "fstat", "scandir", "open", "pread", "read", "write"):
            monkeypatch.setattr(os, name, self._counting(name, getattr(os, name)))
        read_log = store._index._read_log

        def counting(path: Path, session_id: str) -> object:
            self.reads.append(session_id)
            return read_log(path, session_id)  # type: ignore[arg-type]

        monkeypatch.setattr(store._index, "_read_log", counting)

    def _counting(self, name: str, call: object) -> object:
        def counted(*args: object, **kwargs: object) -> object:
            self.counts[name] = self.counts.get(name, 0) + 1
            return call(*args, **kwargs)  # type: ignore[operator]

        return counted

    def clear(self) -> None:
        self.counts.clear()
        self.reads.clear()


async def _sessions(store: JsonlSessionStore, count: int, target: Instant) -> list[SessionId]:
    made: list[SessionId] = []
    for _ in range(count):
        async with await store.create(now=NOW) as handle:
            handle.append(CHANGE, at_create(1, target))
            await handle.barrier()
        made.append(handle.id)
    return made


def _settle(store: JsonlSessionStore) -> None:
    """Date the directory back, as if its last file was made long ago (a directory changed in
    the current clock tick is listed again at every poll, rightly)."""
    long_ago = store.data_dir.stat().st_mtime_ns - 60 * 10**9
    os.utime(store.data_dir, ns=(long_ago, long_ago))


@pytest.mark.parametrize("count", [3, 60])
def test_an_idle_poll_costs_the_same_whatever_the_number_of_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """Regression: every poll stat'ed every session file (3.9 % of a core at 50,000)."""

    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        made = await _sessions(store, count, TARGET)
        _settle(store)
        reader = JsonlSessionStore(store.data_dir)
        calls = _Calls(monkeypatch, reader)
        first = reader._index.due(FAR, 1000)
        assert sorted(first) == sorted(DueSession(session_id, TARGET) for session_id in made)
        assert calls.reads == []  # every session had a fresh record
        assert calls.counts["scandir"] == 1  # the full scan (which stats what it lists)
        for _ in range(3):
            calls.clear()
            assert reader._index.due(FAR, 1000) == first
            # The index's lstat and the directory's stat; nothing opened, listed or read.
            assert calls.counts == {"stat": 2}, calls.counts
            assert calls.reads == []

    asyncio.run(body())


def test_a_poll_checks_only_the_sessions_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        made = await _sessions(store, 40, TARGET)
        _settle(store)
        reader = JsonlSessionStore(store.data_dir)
        reader._index.due(FAR, 1000)
        calls = _Calls(monkeypatch, reader)
        async with await store.open(made[7]) as handle:
            handle.append(CHANGE, at_create(2, SOON))
            await handle.barrier()
        _settle(store)
        calls.clear()
        found = reader._index.due(FAR, 1000)
        assert found[0] == DueSession(made[7], SOON)
        assert len(found) == 40
        assert calls.reads == []  # the owner's record describes the file
        # The index's and the directory's stat, the new lines read, that one file's lstat, and
        # a listing (closing the session wrote its checkpoint file: the directory changed).
        assert calls.counts == {"stat": 3, "pread": 1, "scandir": 1}, calls.counts

    asyncio.run(body())


def test_a_crash_between_the_entries_and_the_record_is_found_by_a_running_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        made = await _sessions(store, 5, TARGET)
        _settle(store)
        reader = JsonlSessionStore(store.data_dir)
        assert len(reader._index.due(FAR, 1000)) == 5
        # The owner dies after its entries reached the file, before its record did.
        owner = JsonlSessionStore(store.data_dir)
        monkeypatch.setattr(owner._index, "record", lambda *_: None)
        async with await owner.open(made[2]) as handle:
            handle.append(CHANGE, delete_change(make_schedule_id(1)))
            handle.append(CHANGE, at_create(2, SOON))
            await handle.barrier()
        _settle(store)
        calls = _Calls(monkeypatch, reader)
        assert reader._index.due(FAR, 1000)[0] == DueSession(made[2], SOON)
        assert calls.reads == [made[2]]
        # The mark is never settled: the file is stat'ed at every poll, read only if it changes.
        for _ in range(2):
            calls.clear()
            assert reader._index.due(FAR, 1000)[0] == DueSession(made[2], SOON)
            assert calls.reads == []
            assert calls.counts == {"stat": 3}, calls.counts
        # A reader that starts later finds it too (its full scan, and the pending mark).
        later = JsonlSessionStore(store.data_dir)
        assert later._index.due(FAR, 1000)[0] == DueSession(made[2], SOON)
        assert made[2] in later._index._marks

    asyncio.run(body())


def test_entries_written_after_a_poll_saw_only_the_mark_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark comes before the entries: a poll between the two finds the file as its record
    says, and must go on watching it."""

    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        made = await _sessions(store, 3, TARGET)
        _settle(store)
        reader = JsonlSessionStore(store.data_dir)
        reader._index.due(FAR, 1000)
        owner = JsonlSessionStore(store.data_dir)
        size = store.path_of(made[1]).stat().st_size
        owner._index.mark(made[1], size)
        assert DueSession(made[1], TARGET) in reader._index.due(FAR, 1000)
        assert made[1] in reader._index._marks
        # Then the entries land, and the owner dies before its record (the mark was written).
        monkeypatch.setattr(owner._index, "record", lambda *_: None)
        monkeypatch.setattr(owner._index, "mark", lambda *_: None)
        async with await owner.open(made[1]) as handle:
            handle.append(CHANGE, at_create(2, SOON))
            await handle.barrier()
        assert reader._index.due(FAR, 1000)[0] == DueSession(made[1], SOON)

    asyncio.run(body())


def test_a_mark_is_appended_without_a_digest_and_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An owner writes its mark on the event loop, before the entry: it computes no keyed
    digest (a reader honours a mark whether or not it verifies)."""

    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        (made,) = await _sessions(store, 1, TARGET)
        _settle(store)
        reader = JsonlSessionStore(store.data_dir)
        reader._index.due(FAR, 1000)

        def no_digest(*_: object) -> str:
            raise AssertionError("a mark was signed")

        monkeypatch.setattr(next_targets, "_digest", no_digest)
        store._index.mark(made, store.path_of(made).stat().st_size)
        last = store._index.path.read_bytes().splitlines()[-1]
        assert json.loads(last) == [made, None, -1, store.path_of(made).stat().st_size, -1, ""]
        monkeypatch.undo()
        reader._index.due(FAR, 1000)
        assert made in reader._index._marks

    asyncio.run(body())


def test_comparing_a_record_with_the_log_reads_marks_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: ``check``'s comparison of the index with a log counted every mark as a
    record that does not verify, and warned of tampering on a store nobody had touched."""

    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        (made,) = await _sessions(store, 1, TARGET)
        lines = [json.loads(line) for line in store._index.path.read_bytes().splitlines()]
        assert [line[2] for line in lines if line[0] == made].count(-1) >= 1  # a mark
        with caplog.at_level(logging.WARNING):
            reader = JsonlSessionStore(store.data_dir)
            status = store.path_of(made).stat()
            assert reader._index.mismatch(made, status, TARGET) is None
            assert reader._index.mismatch(made, status, LATER_TARGET) == (
                f"its record in {INDEX_NAME} says a target at 2030-01-01T00:00:00.000Z, and the "
                "log says a target at 2030-02-01T00:00:00.000Z"
            )
        assert caplog.records == []

    asyncio.run(body())


def test_a_record_posted_before_a_mark_does_not_settle_it(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        (made,) = await _sessions(store, 1, TARGET)
        reader = JsonlSessionStore(store.data_dir)
        reader._index.due(FAR, 1000)
        status = store.path_of(made).stat()
        # The owner marks the file before its next entries; the record of the file as it was
        # before them, posted earlier to the session's thread, lands after the mark.
        store._index.mark(made, status.st_size)
        store._index.record(made, TARGET, status)
        reader._index.due(FAR, 1000)
        assert made in reader._index._marks
        grown = store.path_of(made)
        with grown.open("ab") as file:  # stands for the entries (no record follows)
            file.write(b"\n")
        store._index.record(made, SOON, grown.stat())
        assert reader._index.due(FAR, 1000) == (DueSession(made, SOON),)
        assert made not in reader._index._marks

    asyncio.run(body())


def test_a_reader_never_settles_a_mark_with_what_it_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        (made,) = await _sessions(store, 1, TARGET)
        owner = JsonlSessionStore(store.data_dir)
        monkeypatch.setattr(owner._index, "record", lambda *_: None)
        async with await owner.open(made) as handle:
            handle.append(CHANGE, at_create(2, SOON))
            await handle.barrier()
        index = store.data_dir / INDEX_NAME
        before = index.read_bytes()
        reader = JsonlSessionStore(store.data_dir)
        assert reader._index.due(FAR, 1000) == (DueSession(made, SOON),)
        # Rebuilt, not appended: a record after the mark would tell other readers the owner
        # had finished writing.
        assert index.read_bytes() == before
        later = JsonlSessionStore(store.data_dir)
        assert later._index.due(FAR, 1000) == (DueSession(made, SOON),)
        assert made in later._index._marks

    asyncio.run(body())


def test_a_session_file_replaced_created_or_removed_is_found_by_a_running_reader(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        first, second = await _sessions(store, 2, TARGET)
        path = store.path_of(first)
        copy = tmp_path / "copy"
        copy.write_bytes(path.read_bytes())
        reader = JsonlSessionStore(store.data_dir)
        async with await store.open(first) as handle:
            handle.append(CHANGE, at_create(2, SOON))
            await handle.barrier()
        assert reader._index.due(FAR, 1000)[0] == DueSession(first, SOON)
        # Restored from a copy (renamed over it: another inode), with no record.
        copy.replace(path)
        assert sorted(reader._index.due(FAR, 1000)) == sorted(
            [DueSession(first, TARGET), DueSession(second, TARGET)]
        )
        (third,) = await _sessions(JsonlSessionStore(store.data_dir), 1, SOON)
        store.path_of(second).unlink()
        assert reader._index.due(FAR, 1000) == (
            DueSession(third, SOON),
            DueSession(first, TARGET),
        )

    asyncio.run(body())


def test_a_compaction_keeps_what_is_appended_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        (made,) = await _sessions(store, 1, TARGET)
        async with await store.open(made) as handle:
            for number in range(2, 80):  # superseded lines to compact
                handle.append(CHANGE, at_create(number, TARGET))
                await handle.barrier()
                await asyncio.sleep(0)
        index = store.data_dir / INDEX_NAME
        owner = JsonlSessionStore(store.data_dir)
        owner._index.mark(made, 0)  # the owner's descriptor is now the old file's
        reader = JsonlSessionStore(store.data_dir)
        replace = reader._index._replace
        size = store.path_of(made).stat().st_size

        def racing(temporary: Path, fd: int) -> bytes | None:
            # Appended after the reader read the index, before it renames the new one in.
            owner._index.mark(made, size)
            return replace(temporary, fd)

        monkeypatch.setattr(reader._index, "_replace", racing)
        reader._index.due(FAR, 1000)
        old_lines = 1 + 79 + 79 + 1
        assert len(index.read_bytes().splitlines()) < old_lines
        assert reader._index._marks == {made: size}
        # The owner's next line goes to the new file, though it held the old one open.
        status = store.path_of(made).stat()
        owner._index.record(made, SOON, status)
        fresh = JsonlSessionStore(store.data_dir)
        assert fresh._index.due(FAR, 1000) == (DueSession(made, SOON),)
        assert fresh._index._marks == {made: size}  # the record is of a file no larger

    asyncio.run(body())


def test_compactions_racing_appenders_lose_no_line(tmp_path: Path) -> None:
    """Whatever the interleaving: every mark appended while another reader compacts over and
    over is in the index at the end (appenders write under a shared ``flock``; a compaction
    copies what was appended since it read, under an exclusive one, then renames)."""
    data_dir = tmp_path / "sessions"
    data_dir.mkdir(mode=0o700)

    def reader() -> TargetIndexFile:
        return TargetIndexFile(data_dir, suffix=".jsonl", read_log=read_log)

    writers = [reader(), reader()]
    compactor = reader()
    ids = [new_session_id() for _ in range(400)]

    def append(writer: TargetIndexFile, part: list[SessionId]) -> None:
        for size, session_id in enumerate(part):
            writer.mark(session_id, size)
            time.sleep(0.0005)  # spread over many compactions

    threads = [
        threading.Thread(target=append, args=(writer, ids[number::2]))
        for number, writer in enumerate(writers)
    ]
    for thread in threads:
        thread.start()
    compactions = 0
    while any(thread.is_alive() for thread in threads) or compactions < 3:
        compactor._read_index()
        compactor._compact()
        compactions += 1
    for thread in threads:
        thread.join()
    assert compactions > 10
    expected = {session_id: size for size, session_id in enumerate(ids[0::2])}
    expected.update({session_id: size for size, session_id in enumerate(ids[1::2])})
    fresh = reader()
    fresh._read_index()
    assert fresh._marks == expected
    compactor._read_index()
    assert compactor._marks == expected


@pytest.mark.parametrize("bulk", [0, 1000])
def test_the_due_order_is_the_same_checked_in_bulk_or_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bulk: int
) -> None:
    monkeypatch.setattr(next_targets, "_BULK", bulk)

    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        (late,) = await _sessions(store, 1, LATER_TARGET)
        (soon,) = await _sessions(store, 1, SOON)
        first, second = await _sessions(store, 2, TARGET)
        expected = [
            DueSession(soon, SOON),
            *sorted([DueSession(first, TARGET), DueSession(second, TARGET)]),
            DueSession(late, LATER_TARGET),
        ]
        reader = JsonlSessionStore(store.data_dir)
        assert list(reader._index.due(FAR, 1000)) == expected
        assert reader._index.due(LATER_TARGET, 2) == tuple(expected[:2])
        store.path_of(soon).unlink()
        async with await store.open(first) as handle:
            handle.append(CHANGE, delete_change(make_schedule_id(1)))
            await handle.barrier()
        (sooner,) = await _sessions(store, 1, NOW)
        assert reader._index.due(FAR, 1000) == (
            DueSession(sooner, NOW),
            DueSession(second, TARGET),
            DueSession(late, LATER_TARGET),
        )

    asyncio.run(body())


def test_a_line_read_half_written_is_read_whole_at_the_next_poll(tmp_path: Path) -> None:
    async def body() -> None:
        store = JsonlSessionStore(tmp_path / "sessions")
        (made,) = await _sessions(store, 1, TARGET)
        reader = JsonlSessionStore(store.data_dir)
        assert reader._index.due(FAR, 1000) == (DueSession(made, TARGET),)
        async with await store.open(made) as handle:
            handle.append(CHANGE, at_create(2, SOON))
            await handle.barrier()
        index = store.data_dir / INDEX_NAME
        data = index.read_bytes()
        # The reader meets the new lines with the last one cut short, then whole.
        index.write_bytes(data[:-10])
        reader._index._read_index()
        assert reader._index._offset < len(data) - 10
        index.write_bytes(data)
        assert reader._index.due(FAR, 1000) == (DueSession(made, SOON),)

    asyncio.run(body())


def test_sessions_created_together_in_a_new_directory_all_get_signed_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's worker threads sign records at once when sessions are created together: the
    first to read the key must not leave the others signing with none (their records did not
    verify, and a fresh reader warned of them and read their logs again)."""

    def slow_read(path: Path, *, limit: int) -> bytes | None:
        time.sleep(0.05)  # the other threads reach the key meanwhile
        return read_private(path, limit=limit)

    monkeypatch.setattr("session_schedule.session.jsonl.next_targets.read_private", slow_read)

    async def body() -> tuple[DueSession, ...]:
        store = JsonlSessionStore(tmp_path / "sessions")

        async def one(number: int) -> SessionId:
            async with await store.create(now=NOW) as handle:
                handle.append(CHANGE, at_create(1, Instant(TARGET + number)))
                await handle.barrier()
                return handle.id

        made = await asyncio.gather(*(one(number) for number in range(8)))
        assert len(set(made)) == 8
        with caplog.at_level(logging.WARNING):
            return await _due(JsonlSessionStore(store.data_dir))

    assert len(asyncio.run(body())) == 8
    assert "do not verify" not in caplog.text
