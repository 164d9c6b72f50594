"""Replay speed: strict decode + fold of a synthetic 1,000,000-change log.

Measured against a raw untyped decode of the same lines (``msgspec.json.decode`` of every line,
no type given) in the same run; the target is a ratio of at most 1.5.

    python3 dev.py bench replay [--changes N] [--repeat R]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable

import msgspec

from session_schedule.core.changes import (
    create_change,
    delete_change,
    dispatch_change,
    encode_change,
    iter_changes,
)
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    EveryScheduleRecord,
)

BASE = parse_instant("2026-11-29T20:00:00.000Z")


PROMPTS = (
    "Stand up, stretch, and refill your water bottle before the next meeting.",
    "Check whether the nightly build on main went green and summarise any failures.",
    "Remind Aiko to send the quarterly report draft to finance by end of day.",
    "Look at the deploy dashboard and tell me if error rates are above baseline.",
)


def synthetic_log(count: int) -> list[bytes]:
    """A valid log of realistic changes.

    Every round creates one record of each kind with a realistic prompt, dispatches the one-shot,
    deletes the ``at`` record, and dispatches the Every record twice (once on time, once after a
    cold period) before deleting it — so every line makes the fold do real work.
    """
    lines: list[bytes] = []
    round_number = 0
    while len(lines) < count:
        round_number += 1
        now = BASE + round_number * 1_000
        after_id, at_id, every_id = (make_schedule_id(round_number * 3 + k) for k in range(3))
        target = format_instant(Instant(now + 60_000))
        prompt = PROMPTS[round_number % len(PROMPTS)]
        records = (
            AfterScheduleRecord(id=after_id, prompt=prompt, after_seconds=60, scheduled_at=target),
            AtScheduleRecord(id=at_id, prompt=prompt, scheduled_at=target),
            EveryScheduleRecord(id=every_id, prompt=prompt, every_seconds=300, scheduled_at=target),
        )
        lines.extend(encode_change(create_change(record)) for record in records)
        lines.append(encode_change(dispatch_change(after_id)))
        lines.append(encode_change(delete_change(at_id)))
        lines.append(encode_change(dispatch_change(every_id, Instant(now + 61_234))))
        lines.append(encode_change(dispatch_change(every_id, Instant(now + 7_200_000))))
        lines.append(encode_change(delete_change(every_id)))
    return lines[:count]


def strict_replay(lines: list[bytes]) -> int:
    """Decode and fold every line, a chunk at a time: the first bad line raises."""
    state = ScheduleFold()
    start = 0
    for changes in iter_changes(lines, where=lambda position: f"at entry {position}"):
        state.replay(zip(itertools.count(start), changes))
        start += len(changes)
    return len(state)


def raw_decode(lines: list[bytes]) -> int:
    decode = msgspec.json.decode
    for line in lines:
        decode(line)
    return 0


def timed(function: Callable[[list[bytes]], int], lines: list[bytes]) -> float:
    started = time.process_time()
    function(lines)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    lines = synthetic_log(args.changes)
    size = sum(len(line) + 1 for line in lines)
    print(f"synthetic log: {len(lines):,} changes, {size / 1e6:.1f} MB")
    raw, strict = [], []
    for _ in range(args.repeat):
        raw.append(timed(raw_decode, lines))
        strict.append(timed(strict_replay, lines))
    raw_median, strict_median = statistics.median(raw), statistics.median(strict)
    per = 1e9 / len(lines)
    print(f"raw untyped decode      median {raw_median:.3f} s  ({raw_median * per:.0f} ns/change)")
    print(
        f"strict decode + fold    median {strict_median:.3f} s  "
        f"({strict_median * per:.0f} ns/change)"
    )
    print(f"ratio strict/raw        {strict_median / raw_median:.2f}  (target <= 1.5)")


if __name__ == "__main__":
    main()
