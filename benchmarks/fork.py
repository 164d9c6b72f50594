"""Forking a JSONL session and opening the fork, against copying its bytes and opening its parent.

Builds a format-2 JSONL session of ``--changes`` realistic history changes (the replay
benchmark's mix: creates, dispatches at new minutes, deletes) and opens and closes it once so it
has its checkpoint, then reads it back whole once and appends an entry, so that its checkpoint
carries the index of where each megabyte of the log starts, as a session in use does. Then,
each in a fresh process, ``--repeat`` times:

- a raw copy of the file's bytes (``shutil.copyfile``, which is ``sendfile`` on Linux, then
  fsync'd) — the baseline;
- ``store.fork`` of the whole session (closing the fork at once);
- ``store.fork`` at the middle of the session, before the parent's checkpoint (the fork then
  reads and decodes its parent up to the segment that holds the fork point);
- opening the parent and the fork (``store.open`` plus ``LiveSchedule.start``);
- opening the parent, and the fork, out of the page cache (``posix_fadvise(DONTNEED)`` of the
  log and its checkpoint), as after a reboot: for the fork, that is opening it after a power
  cut (the fork and its checkpoint are fsync'd as it is created, so the disk holds both);
- opening the fork without its checkpoint (what a fork cost when its checkpoint was lost).

Prints medians of wall time and the ratios to the raw copy and to the parent's open.

    python3 dev.py bench fork [--changes N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from session_schedule.runtime.live import LiveSchedule
from session_schedule.runtime.turns import TurnQueue
from session_schedule.session import JsonlSessionStore, SessionId, user_message
from session_schedule.testing import FakeClock

SID = SessionId("s_benchopen000")  # the id open_session.write_jsonl writes
FORK = SessionId("s_benchfork001")
NOW = "2026-11-29T20:00:00.000Z"


async def open_and_close(store: JsonlSessionStore, session_id: SessionId) -> None:
    handle = await store.open(session_id)
    turns = TurnQueue(handle)
    live = LiveSchedule(handle, turns, clock=FakeClock(NOW))
    await live.start()
    await live.close()
    await turns.close()
    await handle.close()


async def build(data: Path, changes: int) -> None:
    from open_session import write_jsonl  # noqa: PLC0415 - only in the parent process
    from replay import synthetic_log  # noqa: PLC0415

    store = JsonlSessionStore(data)
    data.mkdir(mode=0o700)
    write_jsonl(store.path_of(SID), synthetic_log(changes))
    await open_and_close(store, SID)  # writes the parent's checkpoint
    # A session in use has read its older entries back (and checkpointed every 1,024 entries):
    # its checkpoint carries the index of where each megabyte of the log starts.
    handle = await store.open(SID)
    for _ in handle.entries:
        pass
    handle.append("message", user_message("the index is built", at=FakeClock(NOW).now()))
    await handle.barrier()
    await handle.close()


async def child(operation: str, data: Path) -> tuple[float, float]:
    store = JsonlSessionStore(data)
    start, cpu = time.perf_counter(), time.process_time()
    if operation == "copy":
        target = data / "copy.tmp"
        shutil.copyfile(store.path_of(SID), target)  # sendfile(2) on Linux
        with target.open("rb") as file:
            os.fsync(file.fileno())
    elif operation in ("fork", "fork-middle"):
        at = None
        if operation == "fork-middle":
            at = (await store.read(SID)).header.seed_length + int(os.environ["FORK_AT"])
            start, cpu = time.perf_counter(), time.process_time()
        handle = await store.fork(SID, at=at, now=FakeClock(NOW).now(), session_id=FORK)
        await handle.close()
    elif operation in ("open-fork-evicted", "open-parent-evicted"):
        session = FORK if operation == "open-fork-evicted" else SID
        for path in (store.path_of(session), store.checkpoint_path(session)):
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        start, cpu = time.perf_counter(), time.process_time()
        await open_and_close(store, session)
    elif operation == "open-fork-cold":
        store.checkpoint_path(FORK).unlink()
        start, cpu = time.perf_counter(), time.process_time()
        await open_and_close(store, FORK)
    elif operation == "open-parent":
        await open_and_close(store, SID)
    else:
        await open_and_close(store, FORK)
    return time.perf_counter() - start, time.process_time() - cpu


def reset(data: Path) -> None:
    """Remove the fork (and the raw copy) so the next ``fork`` run starts as the first did."""
    for path in data.iterdir():
        if path.name.startswith((FORK, "copy")) or FORK in path.name:
            path.unlink()


def run_child(operation: str, data: Path, changes: int = 0) -> tuple[float, float]:
    out = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, __file__, "--child", operation, str(data)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "FORK_AT": str(changes // 2)},
    )
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(*asyncio.run(child(args.child[0], Path(args.child[1]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        asyncio.run(build(data, args.changes))
        size = JsonlSessionStore(data).path_of(SID).stat().st_size
        keys = ("copy", "fork", "middle", "parent", "open", "parent-evicted", "evicted", "cold")
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in keys}
        for _ in range(args.repeat):
            reset(data)
            times["copy"].append(run_child("copy", data))
            times["middle"].append(run_child("fork-middle", data, args.changes))
            reset(data)
            times["fork"].append(run_child("fork", data))
            times["parent"].append(run_child("open-parent", data))
            times["open"].append(run_child("open-fork", data))
            times["parent-evicted"].append(run_child("open-parent-evicted", data))
            times["evicted"].append(run_child("open-fork-evicted", data))
            times["cold"].append(run_child("open-fork-cold", data))
        wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
        print(
            f"JSONL session of {args.changes:,} changes ({size / 1e6:.1f} MB), "
            f"medians of {args.repeat} fresh processes (wall, and CPU of the process):"
        )

        def line(key: str, label: str, base: str, name: str) -> None:
            print(
                f"  {label:<34} {wall[key] * 1e3:8.1f} ms wall {cpu[key] * 1e3:8.1f} ms CPU"
                f"  {wall[key] / wall[base]:7.2f}x {name}"
            )

        line("copy", "raw copy of the bytes (fsync)", "copy", "the raw copy")
        line("fork", "fork (whole session)", "copy", "the raw copy")
        line("middle", "fork at the middle", "copy", "the raw copy")
        line("parent", "open the parent (checkpoint)", "parent", "the parent's open")
        line("open", "open the fork", "parent", "the parent's open")
        line("parent-evicted", "open the parent, out of the cache", "parent", "the parent's open")
        line("evicted", "open the fork after a power cut", "parent", "the parent's open")
        line("cold", "open the fork, checkpoint deleted", "parent", "the parent's open")


if __name__ == "__main__":
    main()
