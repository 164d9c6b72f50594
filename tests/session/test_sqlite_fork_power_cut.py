"""A SQLite fork killed at any point of its I/O, then a power cut: the parent keeps every
acknowledged entry, and the fork is either absent or sound with exactly the parent's prefix.

A child process, under the power-cut recorder (``tests/cli/powercut.c``, preloaded), appends to the
parent and waits for the barrier (acknowledged), forks it, closes both and ends. A run to the end
tells where the fork's I/O begins (a marker file the child syncs) and where the fork was
acknowledged (``fork`` returned: another marker). Then, for points from the start of the fork to
the end of the run, the child SIGKILLs itself right after that write or sync, every byte written
after a file's last sync is dropped or zero-filled (the database, its WAL, the WAL index), and the
store is opened again. SQLite's I/O goes through the calls the recorder hooks (``pwrite64``,
``write``, ``ftruncate64``, ``fdatasync``): the run to the end checks that it journals the WAL's
syncs and the database's."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Final

import pytest

import session_schedule
from session_schedule.cli.common import EXIT_OK, SQLITE_FILE
from session_schedule.cli.main import main
from session_schedule.session import SessionNotFound, SqliteSessionStore
from session_schedule.testing.session_contract import turn
from tests.cli.test_chat_crash import Fault, compile_shim, replay_power_cut
from tests.session.database_forks import (
    FORK,
    SID,
    assert_sound_fork,
    full_read,
    max_id,
    write_history,
)
from tests.session.test_sqlite_fork import TABLES, connect, stored_anywhere

APPENDED: Final = range(500, 505)
"""The turns the child appends to the parent (and waits for) before it forks."""
FORKING: Final = "forking"
FORKED: Final = "forked"
CHECKPOINTED: Final = "checkpointed"
EVERY: Final = 6
"""Besides every sync and the writes next to one, every this many records is a kill point."""

CHILD: Final = textwrap.dedent(
    f"""
    import asyncio
    import os
    import sqlite3
    import sys
    from pathlib import Path

    from session_schedule.session import SessionId, SqliteSessionStore
    from session_schedule.testing.session_contract import NOW, turn

    root = Path(sys.argv[1])
    at = None if sys.argv[2] == "whole" else int(sys.argv[2])


    def mark(name):
        descriptor = os.open(root / name, os.O_CREAT | os.O_WRONLY, 0o600)
        os.fsync(descriptor)
        os.close(descriptor)


    async def main():
        store = SqliteSessionStore(root / {SQLITE_FILE!r})
        async with await store.open(SessionId({SID!r})) as parent:
            for number in {APPENDED!r}:
                parent.append("message", turn(number))
            await parent.barrier()
            mark({FORKING!r})
            fork = await store.fork(parent.id, at=at, now=NOW, session_id=SessionId({FORK!r}))
            mark({FORKED!r})
            await fork.close()
        # The database's own checkpoint (the WAL copied into it, synced, the WAL truncated), here
        # rather than at whatever moment the process's last connection is closed on its way out.
        connection = sqlite3.connect(root / {SQLITE_FILE!r})
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.close()
        mark({CHECKPOINTED!r})


    asyncio.run(main())
    """
)


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = compile_shim(tmp_path_factory.mktemp("powercut"))
    if built is None:
        pytest.skip("no C compiler to build the power-cut recorder")
    return built


def run_child(
    shim: Path, root: Path, journal: Path, at: int | None, kill_after: int = 0
) -> subprocess.CompletedProcess[str]:
    journal.unlink(missing_ok=True)
    environment = {
        **os.environ,
        "PYTHONPATH": str(Path(session_schedule.__file__).parents[1]),
        "LD_PRELOAD": str(shim),
        "POWERCUT_ROOT": f"{root}/",
        "POWERCUT_JOURNAL": str(journal),
        "POWERCUT_KILL_AFTER": str(kill_after),
    }
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(root), "whole" if at is None else str(at)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def journaled(journal: Path) -> list[tuple[str, str]]:
    """The journal's records in order: ``("U", file name)`` for a write or truncation,
    ``("S", file name)`` for a sync."""
    data = journal.read_bytes()
    found: list[tuple[str, str]] = []
    at = 0
    while at < len(data):
        kind = data[at : at + 1].decode()
        (length,) = struct.unpack_from("<I", data, at + 1)
        found.append((kind, Path(data[at + 5 : at + 5 + length].decode()).name))
        at += 5 + length
        if kind == "U":
            at += 32 + struct.unpack_from("<qqqq", data, at)[3]
    return found


def kill_points(records: list[tuple[str, str]], start: int, end: int) -> list[int]:
    """The records after ``start`` up to ``end`` (1-based) to kill after: each sync and the
    records on either side of it, and every :data:`EVERY` th record."""
    syncs = [number for number, (kind, _) in enumerate(records, 1) if kind == "S"]
    near = {number + step for number in syncs for step in (-1, 0, 1)}
    spread = set(range(start + 1, end + 1, EVERY))
    return sorted(number for number in near | spread if start < number <= end)


async def outcome(
    root: Path,
    parent: list[tuple[str, object]],
    inherited: list[tuple[str, object]],
    acknowledged: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """Check the store after a kill and a power cut; ``"absent"`` or ``"sound"``, the fork."""
    store = SqliteSessionStore(root / SQLITE_FILE)
    with connect(store) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [(b"ok",)]
    async with await store.open(SID) as handle:
        assert [(entry.type, entry.payload) for entry in handle.entries] == parent
    assert await full_read(store) == parent
    if not stored_anywhere(store, FORK):
        assert not acknowledged, "the fork was acknowledged, then lost"
        with pytest.raises(SessionNotFound):
            await store.read(FORK)
        return "absent"
    await assert_sound_fork(store, TABLES, FORK, inherited, max_id(inherited), monkeypatch)
    return "sound"


@pytest.mark.parametrize("at", [None, 100], ids=["whole", "before-the-checkpoint"])
def test_a_fork_killed_and_cut_anywhere_leaves_the_parent_whole_and_the_fork_sound_or_absent(
    shim: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    at: int | None,
) -> None:
    pristine = tmp_path / "pristine"
    pristine.mkdir()
    asyncio.run(write_history(SqliteSessionStore(pristine / SQLITE_FILE)))
    history = asyncio.run(full_read(SqliteSessionStore(pristine / SQLITE_FILE)))
    parent = [*history, *(("message", turn(number)) for number in APPENDED)]
    inherited = parent if at is None else parent[:at]
    journal = tmp_path / "journal.bin"

    # A run to the end: the fork is made, and where its I/O lies in the journal.
    whole = tmp_path / "whole"
    shutil.copytree(pristine, whole)
    finished = run_child(shim, whole, journal, at)
    assert finished.returncode == 0, finished.stderr
    records = journaled(journal)
    forking = records.index(("S", FORKING)) + 1
    forked = records.index(("S", FORKED)) + 1
    checkpointed = records.index(("S", CHECKPOINTED)) + 1
    # The WAL and the database are journaled: each written, each synced.
    for name in (SQLITE_FILE, f"{SQLITE_FILE}-wal"):
        assert ("U", name) in records[forking:checkpointed]
        assert ("S", name) in records[forking:checkpointed]
    assert asyncio.run(outcome(whole, parent, inherited, True, monkeypatch)) == "sound"

    outcomes: Counter[str] = Counter()
    ends: Counter[bool] = Counter()
    # Up to the database's checkpoint: what follows (the process's way out) is not the same from
    # one run to the next.
    points = kill_points(records, forking, checkpointed)
    for point in points:
        for fault in ("drop", "zero"):
            fault_model: Fault = fault
            root = tmp_path / f"killed-{point}-{fault}"
            shutil.copytree(pristine, root)
            killed = run_child(shim, root, journal, at, point)
            written = journaled(journal)
            if killed.returncode == 0:
                # SQLite rewrites its WAL index (the -shm file) only now and then: a run that
                # did not is shorter, and may have ended before this point.
                assert ("S", CHECKPOINTED) in written, killed.stderr
                assert len(written) < point
            else:
                assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
                assert len(written) == point
            ends[killed.returncode == 0] += 1
            replay_power_cut(journal, fault_model)
            acknowledged = ("S", FORKED) in written  # the fork had returned
            checked = asyncio.run(outcome(root, parent, inherited, acknowledged, monkeypatch))
            outcomes[checked] += 1
            if checked == "sound":
                assert main(["--store", "sqlite", "--data-dir", str(root), "check", FORK]) == (
                    EXIT_OK
                )
            shutil.rmtree(root)
    capsys.readouterr()  # what ``check`` printed
    with capsys.disabled():
        print(
            f"\nSQLite fork power cut ({'whole' if at is None else f'at {at}'}): "
            f"{len(points)} kill points of {checkpointed - forking} records, drop and zero-fill; "
            f"forks {dict(sorted(outcomes.items()))}; runs that ended before their point: {ends[True]}"
        )
    # Both ends were reached: kills before the fork's commit was synced, and after.
    assert outcomes["absent"], outcomes
    assert outcomes["sound"], outcomes
    assert sum(outcomes.values()) == 2 * len(points)
    # Nearly every run was killed where it was meant to be (only the last points can be past
    # the end of a shorter run).
    assert ends[False] >= 2 * len([point for point in points if point <= forked]), ends
