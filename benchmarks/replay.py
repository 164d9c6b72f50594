"""Replay speed: strict decode + fold of a synthetic 1,000,000-change log.

Measured against a raw untyped decode of the same lines (``msgspec.json.decode`` of every line,
no type given) in the same run; the target is a ratio of at most 1.5.

    python3 dev.py bench replay [--changes N] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import msgspec

from session_schedule.core.changes import (
    create_change,
    decode_change,
    delete_change,
    dispatch_change,
    encode_change,
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


def synthetic_log(count: int) -> list[bytes]:
    """A valid log: creates of all three kinds, then their dispatches and deletes, interleaved.

    Roughly a third of the lines are creates; every one-shot is later dispatched or deleted and
    every Every record is dispatched a few times, so the fold does real work on every line.
    """
    lines: list[bytes] = []
    number = 0
    now = BASE
    while len(lines) < count:
        now = Instant(now + 1_000)
        number += 1
        base_id = number
        a, b, c = (make_schedule_id(base_id * 3 + k) for k in range(3))
        target = Instant(now + 60_000)
        lines.append(
            encode_change(
                create_change(
                    AfterScheduleRecord(
                        id=a, prompt="stretch", after_seconds=60, scheduled_at=format_instant(target)
                    )
                )
            )
        )
        lines.append(
            encode_change(
                create_change(
                    AtScheduleRecord(id=b, prompt="call", scheduled_at=format_instant(target))
                )
            )
        )
        lines.append(
            encode_change(
                create_change(
                    EveryScheduleRecord(
                        id=c, prompt="check", every_seconds=300, scheduled_at=format_instant(target)
                    )
                )
            )
        )
        lines.append(encode_change(dispatch_change(a)))
        lines.append(encode_change(delete_change(b)))
        lines.append(encode_change(dispatch_change(c, Instant(target + 1_234))))
        lines.append(encode_change(dispatch_change(c, Instant(target + 900_000))))
        lines.append(encode_change(delete_change(c)))
    return lines[:count]


def strict_replay(lines: list[bytes]) -> int:
    state = ScheduleFold()
    apply = state.apply
    for position, line in enumerate(lines):
        where = f"at entry {position}"
        apply(decode_change(line, where=where), position=position)
    return len(state)


def raw_decode(lines: list[bytes]) -> int:
    decode = msgspec.json.decode
    for line in lines:
        decode(line)
    return 0


def timed(function: Callable[[list[bytes]], int], lines: list[bytes]) -> float:
    started = time.perf_counter()
    function(lines)
    return time.perf_counter() - started


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
