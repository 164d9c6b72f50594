"""Open sessions hold bounded descriptors and threads; ownership outlives an evicted descriptor.

The counts are deterministic (descriptors in ``/proc/self/fd``, threads, reopenings), never
timings. The many-sessions test runs in a child process whose soft descriptor limit is 1,024,
the default of most systems: before the descriptor cache, 1,017 JSONL or 338 SQLite open
sessions exhausted it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from session_schedule.core.instants import Instant
from session_schedule.session import JsonlSessionStore, SessionBusy, SqliteSessionStore
from session_schedule.session.descriptors import CachedDescriptor, DescriptorCache, process_cache
from session_schedule.session.errors import PersistenceUncertain
from session_schedule.session.message import user_message
from session_schedule.session.owners import OwnerLocks, lock_files_held, lock_offset
from session_schedule.session.port import SessionStore
from session_schedule.session.sqlite import shared_connections

NOW = Instant(1_767_225_600_000)
SESSIONS = 1_200
"""More open sessions than a limit of 1,024 descriptors allowed before."""

_CHILD = r"""
import asyncio, json, resource, sys, threading
from contextlib import AsyncExitStack
from pathlib import Path

from session_schedule.core.instants import Instant
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session import JsonlSessionStore, SqliteSessionStore
from session_schedule.session.descriptors import process_cache
from session_schedule.session.message import user_message
from session_schedule.testing import IdleAgent

kind, place, count = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
NOW = Instant(1_767_225_600_000)


def make():
    return JsonlSessionStore(place) if kind == "jsonl" else SqliteSessionStore(place)


def descriptors():
    return sum(1 for _ in Path("/proc/self/fd").iterdir())


async def main():
    store = make()
    ids = []
    for _ in range(count):
        async with await store.create(now=NOW) as handle:
            ids.append(handle.id)
    most = 0
    async with AsyncExitStack() as stack:
        handles = []
        for session_id in ids:
            handle = await stack.enter_async_context(await store.open(session_id))
            await stack.enter_async_context(LiveSchedule(handle, IdleAgent()))
            handles.append(handle)
            most = max(most, descriptors())
        # Write to sessions spread over the cache: the oldest descriptors were closed.
        for index in range(0, count, 97):
            handles[index].append("message", user_message(f"hello {index}", at=NOW))
            await handles[index].barrier()
            most = max(most, descriptors())
        live = {"descriptors": descriptors(), "threads": threading.active_count()}
        listed = len(await store.list())
    written = []
    for index in range(0, count, 97):
        snapshot = await store.read(ids[index])
        written.append(snapshot.entries[-1].payload.content == f"hello {index}")
    print(json.dumps({
        "live": live, "most": most, "listed": listed, "written": all(written),
        "reopened": process_cache().reopened, "after": descriptors(),
    }))


asyncio.run(main())
"""


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_many_open_sessions_fit_under_1024_descriptors(kind: str, tmp_path: Path) -> None:
    place = tmp_path / ("sessions" if kind == "jsonl" else "sessions.db")
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, str(place), str(SESSIONS)],
        capture_output=True,
        check=False,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])
    assert found["listed"] == SESSIONS
    assert found["written"]
    # The process's own descriptors (stdio, the event loop's) plus the cache (a quarter of the
    # limit), the store's lock file and index, and SQLite's shared connection.
    assert found["most"] <= 300, found
    assert found["live"]["threads"] <= 64, found
    if kind == "jsonl":
        assert found["reopened"] > 0  # the writes above reopened evicted descriptors
    assert found["after"] <= 20, found


def is_open(descriptor: CachedDescriptor) -> bool:
    """Whether ``descriptor`` is open now (read through a call: each look is a new one)."""
    return descriptor.is_open


@pytest.fixture
def one_descriptor() -> Iterator[DescriptorCache]:
    """The process's descriptor cache, holding one descriptor for the test's length."""
    cache = process_cache()
    capacity = cache.capacity
    cache.resize(1)
    try:
        yield cache
    finally:
        cache.resize(capacity)


_OPEN_ELSEWHERE = (
    "import asyncio, sys\n"
    "from pathlib import Path\n"
    "from session_schedule.session import JsonlSessionStore, SqliteSessionStore, SessionBusy\n"
    "store = (JsonlSessionStore if sys.argv[1] == 'jsonl' else SqliteSessionStore)(Path(sys.argv[2]))\n"
    "async def main():\n"
    "    handle = await store.open(sys.argv[3])\n"
    "    await handle.close()\n"
    "try:\n"
    "    asyncio.run(main())\n"
    "    print('opened')\n"
    "except SessionBusy:\n"
    "    print('busy')\n"
)


async def open_elsewhere(kind: str, place: Path, session_id: str) -> str:
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _OPEN_ELSEWHERE, kind, str(place), session_id],
        capture_output=True,
        check=True,
        text=True,
    )
    return result.stdout.strip()


def make_store(kind: str, tmp_path: Path) -> tuple[SessionStore, Path]:
    if kind == "jsonl":
        return JsonlSessionStore(tmp_path / "sessions"), tmp_path / "sessions"
    return SqliteSessionStore(tmp_path / "sessions.db"), tmp_path / "sessions.db"


async def test_ownership_outlives_an_evicted_descriptor(
    one_descriptor: DescriptorCache, tmp_path: Path
) -> None:
    store, place = make_store("jsonl", tmp_path)
    first = await store.create(now=NOW)
    second = await store.create(now=NOW)  # its descriptor takes the cache's only place
    try:
        assert one_descriptor.open_count == 1
        # Neither this process nor another can own the first while its descriptor is closed.
        with pytest.raises(SessionBusy):
            await store.open(first.id)
        assert await open_elsewhere("jsonl", place, first.id) == "busy"
        reopened = one_descriptor.reopened
        first.append("message", user_message("still mine", at=NOW))
        await first.barrier()
        assert one_descriptor.reopened > reopened
        assert await open_elsewhere("jsonl", place, second.id) == "busy"
    finally:
        await first.close()
        await second.close()
    assert await open_elsewhere("jsonl", place, first.id) == "opened"
    assert (await store.read(first.id)).entries[-1].payload == user_message("still mine", at=NOW)


async def test_a_file_replaced_while_its_descriptor_was_closed_is_not_written(
    one_descriptor: DescriptorCache, tmp_path: Path
) -> None:
    store = JsonlSessionStore(tmp_path / "sessions")
    first = await store.create(now=NOW)
    second = await store.create(now=NOW)
    try:
        path = store.path_of(first.id)
        original = path.read_bytes()
        impostor = tmp_path / "impostor"
        impostor.write_bytes(original)
        impostor.replace(path)
        with pytest.raises(PersistenceUncertain):
            first.append("message", user_message("lost?", at=NOW))
        assert first.poisoned
        assert path.read_bytes() == original  # nothing written to the file now at that name
    finally:
        await first.close()
        await second.close()


async def test_a_symbolic_link_is_not_followed_on_reopening(
    one_descriptor: DescriptorCache, tmp_path: Path
) -> None:
    store = JsonlSessionStore(tmp_path / "sessions")
    first = await store.create(now=NOW)
    second = await store.create(now=NOW)
    try:
        path = store.path_of(first.id)
        target = tmp_path / "elsewhere"
        path.rename(target)
        path.symlink_to(target)
        with pytest.raises(PersistenceUncertain):
            first.append("message", user_message("through a link?", at=NOW))
    finally:
        await first.close()
        await second.close()
    assert b"through a link?" not in target.read_bytes()


async def test_sqlite_sessions_share_one_connection(tmp_path: Path) -> None:
    store, place = make_store("sqlite", tmp_path)
    before = sum(1 for _ in Path("/proc/self/fd").iterdir())
    handles = [await store.create(now=NOW) for _ in range(40)]
    try:
        assert shared_connections() == 1
        during = sum(1 for _ in Path("/proc/self/fd").iterdir())
        # The database, its -wal and -shm, and the owners' lock file: not four per session.
        assert during - before <= 6
        assert await open_elsewhere("sqlite", place, handles[7].id) == "busy"
        for handle in handles[::5]:
            handle.append("message", user_message(handle.id, at=NOW))
        await asyncio.gather(*(handle.barrier() for handle in handles[::5]))
    finally:
        for handle in handles:
            await handle.close()
    assert shared_connections() == 0
    for handle in handles[::5]:
        assert (await store.read(handle.id)).entries[-1].payload == user_message(handle.id, at=NOW)
    assert await open_elsewhere("sqlite", place, handles[7].id) == "opened"


def test_owner_locks_are_exclusive_in_the_process_and_across(tmp_path: Path) -> None:
    locks = OwnerLocks(tmp_path / "owners")
    other = OwnerLocks(tmp_path / "owners")  # another store of the same place
    held = lock_files_held()
    assert locks.acquire("s_aaaaaaaaaaaa")
    assert not other.acquire("s_aaaaaaaaaaaa")
    assert other.acquire("s_bbbbbbbbbbbb")
    assert lock_files_held() == held + 1  # one descriptor for every owner of the file
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from session_schedule.session.owners import OwnerLocks\n"
        "locks = OwnerLocks(Path(sys.argv[1]))\n"
        "print(locks.acquire('s_aaaaaaaaaaaa'), locks.acquire('s_cccccccccccc'))\n"
    )
    run = [sys.executable, "-c", script, str(tmp_path / "owners")]
    assert subprocess.run(run, capture_output=True, check=True, text=True).stdout == "False True\n"
    locks.release("s_aaaaaaaaaaaa")
    assert subprocess.run(run, capture_output=True, check=True, text=True).stdout == "True True\n"
    other.release("s_bbbbbbbbbbbb")
    assert lock_files_held() == held


def test_a_lock_offset_is_a_stable_62_bit_number() -> None:
    offset = lock_offset("s_aaaaaaaaaaaa")
    assert offset == lock_offset("s_aaaaaaaaaaaa")
    assert 0 <= offset < 2**62
    assert offset != lock_offset("s_aaaaaaaaaaab")


def test_a_descriptor_in_use_or_with_unsynced_writes_is_never_closed(tmp_path: Path) -> None:
    cache = DescriptorCache(1)
    paths = [tmp_path / name for name in ("a", "b")]
    for path in paths:
        path.write_bytes(b"")

    def opener(path: Path) -> CachedDescriptor:
        def reopen() -> int:
            return os.open(path, os.O_RDWR | os.O_APPEND)

        return CachedDescriptor(cache, reopen(), reopen)

    first, second = (opener(path) for path in paths)
    assert (is_open(first), is_open(second)) == (False, True)
    with first.use(dirty=True) as fd:
        os.write(fd, b"entry\n")
        assert not is_open(second)  # closed to make room
        with second.use():
            # Both in use: beyond the bound, neither is closed under its user.
            assert is_open(first)
            assert cache.open_count == 2
    # Written but not synced: ``first`` stays open, and ``second`` was closed to make room.
    assert is_open(first)
    assert not is_open(second)
    first.sync()
    assert is_open(first)
    with second.use():
        pass
    assert not is_open(first)
    assert cache.open_count == 1
    first.close()
    second.close()
    assert cache.open_count == 0
    assert paths[0].read_bytes() == b"entry\n"
