"""The web page's timeline poll on a long session: the fold each poll reads, against folding the
whole log as every poll did before.

Writes the replay benchmark's realistic format-2 JSONL session of ``--entries`` entries (hourly
reminders dispatched at new minutes, their turns, one-shots, ``at`` reminders created and
deleted), opens it, and measures, on the open handle:

- **whole-log fold** (the baseline): ``fold(schedule_changes(entries))``, what the endpoint ran
  for every request;
- **first poll**: ``LiveSession.state()`` the first time (the fold it keeps, then its copy);
- **later polls**: ``LiveSession.state()`` again, nothing appended (what the page's poll every
  1.5 s costs while a reminder is overdue), and after one more entry.

CPU time, medians of ``--repeat`` runs each, in one process.

    python3 dev.py bench timeline_poll [--entries N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from replay import SID, session_file
from session_schedule.core.fold import fold
from session_schedule.session import JsonlSessionStore
from session_schedule.session.ids import SessionId
from session_schedule.session.message import MessageEntry
from session_schedule.session.port import schedule_changes
from session_schedule.web.live import LiveSession


def median_cpu(work: Callable[[], object], repeat: int) -> float:
    samples = []
    kept = []  # what each run returns is freed after the measurements, not within them
    for _ in range(repeat):
        started = time.process_time()
        kept.append(work())
        samples.append(time.process_time() - started)
    return statistics.median(samples)


async def run(entries: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        count = session_file(Path(directory) / f"{SID}.jsonl", entries)
        store = JsonlSessionStore(directory)
        handle = await store.open(SessionId(SID))
        try:
            header = handle.header

            def whole() -> object:
                return fold(schedule_changes(handle.entries), seed_length=header.seed_length)

            baseline = median_cpu(whole, repeat)
            firsts = []
            for _ in range(repeat):
                fresh = LiveSession(handle, max_pending=8)
                firsts.append(median_cpu(fresh.state, 1))
            live = LiveSession(handle, max_pending=8)
            live.state()
            idle = median_cpu(live.state, max(repeat, 20))

            def after_one() -> object:
                message = MessageEntry(
                    role="user", origin="person", content="and?", at="2026-12-01T00:00:00.000Z"
                )
                handle.append("message", message)
                return live.state()

            appended = median_cpu(after_one, max(repeat, 20))
        finally:
            await handle.close()
    first = statistics.median(firsts)
    print(f"session file: {count:,} entries; CPU medians")
    print(f"{'':<40}{'CPU':>12}{'ratio':>10}")
    for label, cpu in (
        ("whole-log fold (every poll before)", baseline),
        ("first poll (fold kept, then copied)", first),
        ("later poll, nothing appended", idle),
        ("later poll, one entry appended", appended),
    ):
        print(f"{label:<40}{cpu * 1e3:9.3f} ms{cpu / baseline:10.5f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(run(args.entries, args.repeat))


if __name__ == "__main__":
    main()
