"""The JSONL store's next-target sidecar: a cache of the logs, rebuilt when missing or stale."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from pathlib import Path

import pytest

from session_schedule.core.changes import delete_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.session import DueSession, JsonlSessionStore
from session_schedule.session.ids import SessionId
from session_schedule.session.jsonl.next_targets import INDEX_NAME, KEY_NAME, MAX_INDEX_BYTES
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
