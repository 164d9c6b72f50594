"""Opening a year-old session: a JSONL log of 1,000,000 history changes and 100 active reminders.

Measures ``JsonlSessionStore.open`` plus ``LiveSchedule.start`` (the fold) from the session's
checkpoint, against the same open without one (the whole log strictly decoded and folded), in
the same run; CPU time of the opening thread and the store's worker thread together.

    python3 dev.py bench open_session [--changes N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from replay import synthetic_log
from session_schedule.core.changes import create_change, encode_change
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.records import EveryScheduleRecord
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session import JsonlSessionStore, SessionId
from session_schedule.session.lines import (
    CHAIN_SEED,
    commit_line,
    entry_line,
    sealed_header_line,
)
from session_schedule.session.port import make_header
from session_schedule.testing import FakeAgent, FakeClock

SID = SessionId("s_benchopen000")
NOW = "2026-11-29T20:00:00.000Z"
ACTIVE = 100


def write_log(path: Path, changes: int) -> None:
    """A format-2 file: ``changes`` history changes, then ``ACTIVE`` Every records."""
    history = synthetic_log(changes)
    first = 10 * changes  # above every id the history uses
    active = [
        encode_change(
            create_change(
                EveryScheduleRecord(
                    id=make_schedule_id(first + n),
                    prompt=f"check the build, {n}",
                    every_seconds=3600,
                    scheduled_at="2030-01-01T00:00:00.000Z",
                )
            )
        )
        for n in range(ACTIVE)
    ]
    header = make_header(
        SID, now=FakeClock(NOW).now(), parent_id=None, seed_length=0, format_version=2
    )
    out = [sealed_header_line(header)]
    previous = CHAIN_SEED
    for position, data in enumerate(history + active):
        line, previous = entry_line(position, "schedule/change", data, previous)
        out.append(line)
    out.append(commit_line(len(history) + len(active), previous))
    path.write_bytes(b"".join(out))


def cpu() -> float:
    return time.process_time()


async def open_and_start(store: JsonlSessionStore) -> tuple[float, int, bool]:
    started = cpu()
    handle = await store.open(SID)
    live = LiveSchedule(handle, FakeAgent(), clock=FakeClock(NOW))
    await live.start()
    elapsed = cpu() - started
    active = len((await live.active())[1])
    resumed = handle.resume is not None
    await live.close()
    await handle.close()
    return elapsed, active, resumed


async def run(changes: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        store = JsonlSessionStore(Path(directory) / "data")
        store.data_dir.mkdir(mode=0o700)
        write_log(store.path_of(SID), changes)
        size = store.path_of(SID).stat().st_size
        print(f"session: {changes:,} history changes + {ACTIVE} active, {size / 1e6:.0f} MB")
        cold: list[float] = []
        warm: list[float] = []
        for _ in range(repeat):
            store.checkpoint_path(SID).unlink(missing_ok=True)
            elapsed, active, resumed = await open_and_start(store)  # writes the checkpoint
            _expect(active=active, resumed=resumed, wanted=False)
            cold.append(elapsed)
            elapsed, active, resumed = await open_and_start(store)
            _expect(active=active, resumed=resumed, wanted=True)
            warm.append(elapsed)
        cold_median, warm_median = statistics.median(cold), statistics.median(warm)
        print(f"open without a checkpoint   median {cold_median * 1e3:9.1f} ms")
        print(f"open from the checkpoint    median {warm_median * 1e3:9.1f} ms  (target <= 10 ms)")
        print(f"ratio                       {warm_median / cold_median:.5f}")


def _expect(*, active: int, resumed: bool, wanted: bool) -> None:
    if active != ACTIVE or resumed != wanted:
        raise SystemExit(f"unexpected open: {active} active, resumed from a checkpoint: {resumed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(run(args.changes, args.repeat))


if __name__ == "__main__":
    main()
