"""Live delivery on the real clock: lateness of due reminders, and ``schedule_list`` at 10,000.

    python3 dev.py bench delivery [--reminders N] [--spread S] [--store memory|jsonl|both]
                                  [--lead L] [--list-size M] [--list-calls K] [--seed X]
                                  [--dir PATH]

1. **Lateness.** ``N`` ``at`` reminders, targets drawn uniformly (fixed seed) over ``S`` seconds
   starting a lead time after creation starts, are created through ``LiveSchedule.create`` and
   delivered by the owner, on ``SystemClock``, to an always-idle agent that stamps
   ``time.time_ns()`` when ``followup()`` accepts a turn. Lateness = acceptance - ``scheduledAt``
   (read back from the framed turn's occurrence key). The lead time is sized from a pilot
   measurement of create latency on the same store, so creation ends before the first target.
   Run on the memory store and on the JSONL store (one fsync per dispatch) in a temp directory.
2. **Baseline**, right before each store's run: bare ``loop.call_at`` timers for the same
   wall-clock pattern (wall targets converted to loop time when scheduled); for JSONL also the
   same timers feeding a consumer that appends and fsyncs one line per item on a dedicated
   thread (the floor of one barrier per dispatch). The target is Schedule's p99 ≤ 5 ms; its
   ratio to the bare-timer p99 is printed.
3. **``schedule_list``** with ``M`` active reminders on the memory store: per-create latency while
   filling it, then ``K`` timed calls of ``LiveSchedule.active()`` and of
   ``ScheduleTools.call("schedule_list")`` (which also builds the JSON-ready result).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.rules import Limits
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.session import JsonlSessionStore, LogHandle, MemorySessionStore
from session_schedule.session.worker import Worker
from session_schedule.testing import IdleAgent
from session_schedule.tools.handlers import ScheduleTools

StoreKind = Literal["memory", "jsonl"]

PROMPT: Final = "Check whether the nightly build on main went green and summarise any failures."
TARGET_P99_MS: Final = 5.0
PILOT_CREATES: Final = 100
LEAD_MARGIN_S: Final = 0.5
"""Slack between the end of creation and the first target."""
DRAIN_TIMEOUT_S: Final = 10.0
"""How long after the last target the run waits for stragglers before giving up."""
KEY_PREFIX: Final = "occurrence key: "
DUE_PREFIX: Final = "due at: "


# -- statistics --------------------------------------------------------------------------------


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass
class Lateness:
    """Lateness samples in ms, and how many of how many arrived."""

    samples: list[float]
    expected: int

    def row(self, label: str) -> str:
        if not self.samples:
            return f"{label:<31} {0:>5}/{self.expected:<5}   (nothing delivered)"
        return (
            f"{label:<31} {len(self.samples):>5}/{self.expected:<5}"
            f" {percentile(self.samples, 0.5):8.2f} {percentile(self.samples, 0.99):8.2f}"
            f" {max(self.samples):8.2f} {min(self.samples):8.2f}"
        )

    @property
    def p99(self) -> float:
        return percentile(self.samples, 0.99) if self.samples else float("inf")


# -- the agent ---------------------------------------------------------------------------------


class Recorder:
    """Every follow-up an always-idle agent accepts, stamped: ``IdleAgent(recorder.accept)``."""

    def __init__(self, expected: int) -> None:
        self.accepted: list[tuple[int, str]] = []
        """``(time.time_ns() at acceptance, framed text)`` per follow-up, in order."""
        self.all_in = asyncio.Event()
        self._expected = expected

    def accept(self, message: str) -> None:
        self.accepted.append((time.time_ns(), message))
        if len(self.accepted) >= self._expected:
            self.all_in.set()


def ignore(message: str) -> None:
    """For runs that only time creates: a follow-up that comes due anyway is taken and dropped."""
    del message


@dataclass
class Delivered:
    accepted_ns: int
    target_ms: int
    key: str

    @property
    def lateness_ms(self) -> float:
        return self.accepted_ns / 1e6 - self.target_ms


def read_turn(accepted_ns: int, message: str) -> Delivered:
    """The one reminder a framed one-shot turn carries (``ValueError`` if it is not one)."""
    lines = message.split("\n")
    keys = [line.removeprefix(KEY_PREFIX) for line in lines if line.startswith(KEY_PREFIX)]
    dues = [line.removeprefix(DUE_PREFIX) for line in lines if line.startswith(DUE_PREFIX)]
    if len(keys) != 1 or len(dues) != 1:
        raise ValueError(f"expected one reminder per turn, got {len(keys)}:\n{message}")
    scheduled_at = keys[0].partition("@")[2]
    if scheduled_at != dues[0]:
        raise ValueError(f"key {keys[0]} and due time {dues[0]} disagree")
    return Delivered(accepted_ns, parse_instant(scheduled_at), keys[0])


# -- stores ------------------------------------------------------------------------------------


async def open_session(kind: StoreKind, directory: Path) -> LogHandle:
    now = Instant(time.time_ns() // 1_000_000)
    if kind == "memory":
        return await MemorySessionStore().create(now=now)
    return await JsonlSessionStore(directory).create(now=now)


def settings_for(active: int) -> Settings:
    # max_wait_seconds stays at its default: the owner sleeps to the next target exactly. The
    # follow-up budget is raised past the run's reminders: this measures lateness, not the budget.
    return Settings(limits=Limits(max_active=active), followup_limit=active + 1)


# -- 1. delivery lateness ----------------------------------------------------------------------


def target_pattern(count: int, spread_s: float, seed: int) -> list[int]:
    """Offsets in ms from the first possible target, uniform over ``spread_s``, sorted."""
    rng = random.Random(seed)
    return sorted(int(rng.uniform(0, spread_s * 1000)) for _ in range(count))


async def pilot_create_seconds(kind: StoreKind, directory: Path) -> float:
    """Median seconds per ``create`` on a throwaway session of this kind of store."""
    session = await open_session(kind, directory)
    schedule = LiveSchedule(session, IdleAgent(ignore), settings=settings_for(PILOT_CREATES))
    times: list[float] = []
    try:
        await schedule.start()
        for index in range(PILOT_CREATES):
            start = time.perf_counter()
            await schedule.create({"prompt": PROMPT, "after_seconds": 86_400 + index})
            times.append(time.perf_counter() - start)
    finally:
        await schedule.close()
        await session.close()
    return statistics.median(times)


@dataclass
class ScheduleRun:
    lateness: Lateness
    create_seconds: float
    create_samples: list[float]
    lead_s: float
    flushes: int
    back_to_back_gaps_ms: list[float] = field(default_factory=list)
    alone: list[float] = field(default_factory=list)
    queued: list[float] = field(default_factory=list)
    failure: str | None = None


async def schedule_lateness(
    kind: StoreKind, directory: Path, offsets: list[int], lead_s: float
) -> ScheduleRun | None:
    """One run; ``None`` when creation did not finish a margin before the first target (or a
    target passed while creating, on a machine slower than the pilot measured)."""
    count = len(offsets)
    recorder = Recorder(count)
    session = await open_session(kind, directory)
    schedule = LiveSchedule(session, IdleAgent(recorder.accept), settings=settings_for(count))
    try:
        await schedule.start()
        base = time.time_ns() // 1_000_000 + round(lead_s * 1000)
        targets = [base + offset for offset in offsets]
        # Created in a shuffled order, as a model would, not conveniently sorted.
        order = list(range(count))
        random.Random(1).shuffle(order)
        samples: list[float] = []
        started = time.perf_counter()
        for index in order:
            at = format_instant(Instant(targets[index]))
            one = time.perf_counter()
            try:
                await schedule.create({"prompt": PROMPT, "at": at})
            except ScheduleError as error:
                if error.code != "not_future":
                    raise
                return None  # a target passed while creating: again with a longer lead
            samples.append(time.perf_counter() - one)
        create_seconds = time.perf_counter() - started
        if time.time_ns() / 1e6 > base - LEAD_MARGIN_S * 1000 / 2:
            return None
        flushes_before = session.flush_count
        deadline = (targets[-1] - time.time_ns() / 1e6) / 1000 + DRAIN_TIMEOUT_S
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(recorder.all_in.wait(), timeout=deadline)
        flushes = session.flush_count - flushes_before
        failure = None if schedule.failure is None else repr(schedule.failure)
    finally:
        await schedule.close()
        await session.close()
    delivered = [read_turn(stamp, message) for stamp, message in recorder.accepted]
    if len({item.key for item in delivered}) != len(delivered):
        raise RuntimeError("a reminder was delivered twice")
    run = ScheduleRun(
        lateness=Lateness([item.lateness_ms for item in delivered], count),
        create_seconds=create_seconds,
        create_samples=samples,
        lead_s=lead_s,
        flushes=flushes,
        failure=failure,
    )
    # A delivery whose target had passed when the previous one was accepted waited in line: the
    # gap between the two acceptances is the cost of one dispatch, back to back. (One due just
    # after the previous acceptance may still wait for that dispatch's barrier.)
    previous: Delivered | None = None
    for item in delivered:
        if previous is not None and item.target_ms * 1e6 <= previous.accepted_ns:
            run.back_to_back_gaps_ms.append((item.accepted_ns - previous.accepted_ns) / 1e6)
            run.queued.append(item.lateness_ms)
        else:
            run.alone.append(item.lateness_ms)
        previous = item
    return run


async def bare_timers(offsets: list[int], lead_s: float) -> Lateness:
    """The same wall-clock pattern on bare ``loop.call_at`` timers."""
    loop = asyncio.get_running_loop()
    count = len(offsets)
    lateness: list[float] = []
    done = asyncio.Event()

    def fire(target: int) -> None:
        lateness.append(time.time_ns() / 1e6 - target)
        if len(lateness) == count:
            done.set()

    base = time.time_ns() // 1_000_000 + round(lead_s * 1000)
    targets = [base + offset for offset in offsets]
    handles = []
    for target in targets:
        when = loop.time() + (target * 1_000_000 - time.time_ns()) / 1e9
        handles.append(loop.call_at(when, fire, target))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=lead_s + offsets[-1] / 1000 + DRAIN_TIMEOUT_S)
    for handle in handles:
        handle.cancel()
    return Lateness(lateness, count)


async def fsync_floor(offsets: list[int], lead_s: float, directory: Path) -> Lateness:
    """Bare timers feeding one consumer that, per item, stamps and then appends a line and fsyncs
    it on a dedicated thread before taking the next: the floor for one barrier per dispatch."""
    loop = asyncio.get_running_loop()
    count = len(offsets)
    due: asyncio.Queue[int] = asyncio.Queue()
    lateness: list[float] = []
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "floor.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    line = b'{"type":"schedule/change","data":{"op":"dispatch","id":"sch_1000"}}\n'

    def write() -> None:
        os.write(fd, line)
        os.fsync(fd)

    async def consume() -> None:
        while len(lateness) < count:
            target = await due.get()
            lateness.append(time.time_ns() / 1e6 - target)
            await worker.run(write)

    worker = Worker("bench-fsync-floor")
    base = time.time_ns() // 1_000_000 + round(lead_s * 1000)
    handles = []
    for target in (base + offset for offset in offsets):
        when = loop.time() + (target * 1_000_000 - time.time_ns()) / 1e9
        handles.append(loop.call_at(when, due.put_nowait, target))
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(consume(), timeout=lead_s + offsets[-1] / 1000 + DRAIN_TIMEOUT_S)
    finally:
        for handle in handles:
            handle.cancel()
        await worker.stop(lambda: os.close(fd))
    return Lateness(lateness, count)


async def delivery(kind: StoreKind, args: argparse.Namespace, directory: Path) -> None:
    count, spread = args.reminders, args.spread
    offsets = target_pattern(count, spread, args.seed)
    per_create = await pilot_create_seconds(kind, directory)
    lead_s = max(args.lead, per_create * count * 2 + LEAD_MARGIN_S)
    print(
        f"\n== {kind} store: {count:,} `at` reminders due over {spread:.1f} s =="
        f"\npilot: {per_create * 1e6:.0f} µs per create (median of {PILOT_CREATES});"
        f" lead time {lead_s:.2f} s"
    )
    baseline = await bare_timers(offsets, lead_s)
    floor = await fsync_floor(offsets, lead_s, directory) if kind == "jsonl" else None
    run = await schedule_lateness(kind, directory, offsets, lead_s)
    while run is None:
        lead_s *= 2
        print(f"creation ran into the first target; again with lead time {lead_s:.2f} s")
        run = await schedule_lateness(kind, directory, offsets, lead_s)
    create_ms = [sample * 1000 for sample in run.create_samples]
    print(
        f"created {count:,} in {run.create_seconds:.3f} s"
        f" (per create median {statistics.median(create_ms):.3f} ms,"
        f" p99 {percentile(create_ms, 0.99):.3f} ms)"
    )
    print()
    print(f"{'lateness (ms)':<31} {'delivered':>11} {'p50':>8} {'p99':>8} {'max':>8} {'min':>8}")
    print(baseline.row("bare asyncio call_at"))
    if floor is not None:
        print(floor.row("bare timers + serial fsync"))
    print(run.lateness.row(f"Schedule ({kind})"))
    if run.alone:
        print(Lateness(run.alone, len(run.alone)).row("  due after previous accepted"))
    if run.queued:
        print(Lateness(run.queued, len(run.queued)).row("  due before previous accepted"))
    print()
    ratio = run.lateness.p99 / baseline.p99
    verdict = "met" if run.lateness.p99 <= TARGET_P99_MS else "MISSED"
    print(f"p99 ratio Schedule / bare timers: {ratio:.2f}x")
    if floor is not None:
        print(
            f"p99 ratio Schedule / bare timers + serial fsync: {run.lateness.p99 / floor.p99:.2f}x"
        )
    print(
        f"p99 {run.lateness.p99:.2f} ms against the target p99 <= {TARGET_P99_MS:g} ms: {verdict}"
    )
    if run.back_to_back_gaps_ms:
        gaps = run.back_to_back_gaps_ms
        print(
            f"back-to-back dispatches: {len(gaps)}, gap median {statistics.median(gaps):.3f} ms,"
            f" p99 {percentile(gaps, 0.99):.3f} ms, max {max(gaps):.3f} ms"
            " (cost of one follow-up turn + barrier)"
        )
    print(f"flushes during delivery: {run.flushes} (one barrier flush per dispatch expected)")
    if len(run.lateness.samples) != count:
        print(f"PROBLEM: {len(run.lateness.samples)} of {count} reminders delivered")
    if run.failure is not None:
        print(f"PROBLEM: the owner stopped: {run.failure}")


# -- 3. schedule_list at size ------------------------------------------------------------------


async def list_latency(size: int, calls: int) -> None:
    print(f"\n== schedule_list with {size:,} active reminders (memory store) ==")
    session = await open_session("memory", Path())
    schedule = LiveSchedule(session, IdleAgent(ignore), settings=settings_for(size))
    tools = ScheduleTools(schedule)
    try:
        await schedule.start()
        creates: list[float] = []
        started = time.perf_counter()
        for index in range(size):
            one = time.perf_counter_ns()
            await schedule.create({"prompt": PROMPT, "after_seconds": 86_400 + index})
            creates.append((time.perf_counter_ns() - one) / 1e3)
        filled = time.perf_counter() - started
        print(
            f"created {size:,} in {filled:.2f} s:"
            f" per create median {statistics.median(creates):.1f} µs,"
            f" p99 {percentile(creates, 0.99):.1f} µs (decision + append + 2 barriers)"
        )
        direct: list[float] = []
        for _ in range(calls):
            one = time.perf_counter_ns()
            _, views = await schedule.active()
            direct.append((time.perf_counter_ns() - one) / 1e6)
            if len(views) != size:
                raise RuntimeError(f"active() returned {len(views)} reminders, not {size}")
        tool: list[float] = []
        for _ in range(calls):
            one = time.perf_counter_ns()
            result = await tools.call("schedule_list")
            tool.append((time.perf_counter_ns() - one) / 1e6)
            schedules = result.get("schedules")
            if not isinstance(schedules, list) or len(schedules) != size:
                raise RuntimeError(f"schedule_list failed: {str(result)[:200]}")
        print()
        print(f"{'list latency (ms)':<40} {'median':>8} {'p99':>8} {'max':>8}")
        for label, values in (
            ("LiveSchedule.active()", direct),
            ('ScheduleTools.call("schedule_list")', tool),
        ):
            print(
                f"{label:<40} {statistics.median(values):8.2f} {percentile(values, 0.99):8.2f}"
                f" {max(values):8.2f}"
            )
        print(f"({calls} calls each; per reminder {statistics.median(tool) / size * 1e6:.0f} ns)")
    finally:
        await schedule.close()
        await session.close()


# -- main --------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, directory: Path) -> None:
    print(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, real clock (SystemClock),"
        f" max_wait_seconds {Settings().max_wait_seconds:g}"
    )
    kinds: list[StoreKind] = ["memory", "jsonl"] if args.store == "both" else [args.store]
    for kind in kinds:
        sub = directory / kind
        await delivery(kind, args, sub)
    if args.list_size > 0:
        await list_latency(args.list_size, args.list_calls)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reminders", type=int, default=1_000)
    parser.add_argument("--spread", type=float, default=3.0, help="seconds the targets span")
    parser.add_argument(
        "--lead", type=float, default=1.0, help="minimum seconds from creation to first target"
    )
    parser.add_argument("--store", choices=("memory", "jsonl", "both"), default="both")
    parser.add_argument("--list-size", type=int, default=10_000, help="0 skips the list part")
    parser.add_argument("--list-calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20_261_129)
    parser.add_argument("--dir", type=Path, default=None, help="where JSONL goes (default: temp)")
    args = parser.parse_args(argv)
    if args.reminders < 1 or args.spread <= 0:
        parser.error("--reminders must be positive and --spread greater than 0")
    return args


if __name__ == "__main__":
    arguments = parse(sys.argv[1:])
    with tempfile.TemporaryDirectory(dir=arguments.dir) as temporary:
        asyncio.run(run(arguments, Path(temporary)))
