"""Replay speed: a JSONL session file of 1,000,000 entries opened without a checkpoint, and
``check``, against a raw decode of the file's lines.

The file holds a realistic mix: recurring reminders dispatched hour after hour (each dispatch at
a new minute), the turn each dispatch queues (``turn/queued``, the reminder's user message, the
model's answer, ``turn/finished``), conversation turns, one-shot reminders created and
dispatched, ``at`` reminders created and deleted, and a commit record after each turn, as a
session's barriers write them. Each of these runs in a fresh process, ``--repeat`` times:

- **raw decode**: read the file, split its lines, ``msgspec.json.decode`` each (untyped);
- **open**: ``store.open`` + ``LiveSchedule.start`` + ``TurnQueue`` (the whole log strictly
  decoded, verified and folded);
- **check**: ``session-schedule check`` (every line verified and decoded, the changes folded, the
  transcript checked).

CPU time of the process for the work alone (imports excluded) and the peak resident memory the
work added (``VmHWM`` once reset, less the resident size before); medians, and ratios to the
raw decode. Targets: open and ``check`` at most 3x.

Then, as before, the in-memory figure: strict decode + fold of ``--changes`` ``schedule/change``
payloads held in memory (``iter_changes`` + ``ScheduleFold``), against a raw untyped decode of
the same payloads (target 1.5).

With ``--instructions`` (valgrind installed), instead: the instructions each work executes,
counted by ``valgrind --tool=cachegrind --cache-sim=no`` — a figure the machine's load does not
move — less those of a run in a fresh process that only imports what that work imports; the
work stops where the CPU measurement stops, and string hashing is fixed (``PYTHONHASHSEED=0``)
so that runs compare (use a smaller ``--entries``, e.g. 100,000).

    python3 dev.py bench replay [--entries N] [--changes N] [--repeat R] [--skip-memory]
    python3 dev.py bench replay --instructions [--entries N]

With ``--checkpoint`` the file is given the checkpoint a session has after a close (opened and
closed through the store once, restored before each run): the open then starts from it, and
``check`` compares it with the log.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from session_schedule.core.changes import (
    create_change,
    delete_change,
    dispatch_change,
    encode_change,
    iter_changes,
)
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.ids import ScheduleId, make_schedule_id
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    EveryScheduleRecord,
)
from session_schedule.session.crc import SPEEDUPS
from session_schedule.session.ids import SessionId
from session_schedule.session.lines import (
    CHAIN_SEED,
    commit_line,
    entry_line,
    sealed_header_line,
)
from session_schedule.session.message import MessageEntry, Origin, Role
from session_schedule.session.port import make_header
from session_schedule.session.turns import TurnFinished, TurnQueued
from session_schedule.testing import FakeClock

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


SID = "s_benchreplay0"
EVERY = 8
"""Recurring reminders, each dispatched every hour."""
_FOLLOWUPS = (
    "It is time: stand up, stretch, and refill your water bottle.",
    "Reminder: check whether the nightly build on main went green.",
    "Reminder: look at the deploy dashboard for error rates above baseline.",
)
_ANSWERS = (
    "Done - the build on main is green; two flaky tests were retried and passed.",
    "Error rates are at baseline (0.02 %); nothing needs your attention right now.",
    "Stretch break noted. Your next meeting starts in 25 minutes.",
)


class _Writer:
    """The lines of a format-2 session file, entry by entry."""

    def __init__(self) -> None:
        header = make_header(
            SessionId(SID),
            now=FakeClock(format_instant(Instant(BASE))).now(),
            parent_id=None,
            seed_length=0,
            format_version=2,
        )
        self.out = [sealed_header_line(header)]
        self.chain = CHAIN_SEED
        self.count = 0

    def add(self, entry_type: str, payload: object) -> int:
        """Append an entry; its position."""
        line, self.chain = entry_line(
            self.count, entry_type, msgspec.json.encode(payload), self.chain
        )
        self.out.append(line)
        self.count += 1
        return self.count - 1

    def commit(self) -> None:
        self.out.append(commit_line(self.count, self.chain))

    def message(self, role: Role, origin: Origin, content: str, at: int) -> None:
        entry = MessageEntry(
            role=role, content=content, at=format_instant(Instant(at)), origin=origin
        )
        self.add("message", entry)

    def reminder_turn(self, schedule_id: ScheduleId, hour: int, k: int) -> None:
        """Reminder ``k`` dispatched in hour ``hour`` (at a new minute), and the turn it queues,
        in the order the runtime writes them: the turn the agent accepts, then the dispatch."""
        target = BASE + hour * 3_600_000 + k * 7 * 60_000
        accepted = target + 150 + (hour * 7919 + k * 104_729) % 4_000
        queued = TurnQueued(
            version=1,
            origin="schedule",
            text=_FOLLOWUPS[k % 3],
            at=format_instant(Instant(accepted)),
            occurrences=(f"{schedule_id}@{format_instant(Instant(target))}",),
        )
        turn = self.add("turn/queued", queued)
        self.add("schedule/change", dispatch_change(schedule_id, Instant(accepted)))
        self.message("user", "followup", _FOLLOWUPS[k % 3], accepted + 5)
        self.message("assistant", "model", _ANSWERS[(hour + k) % 3], accepted + 2_300)
        finished_at = format_instant(Instant(accepted + 2_310))
        finished = TurnFinished(version=1, turn=turn, outcome="completed", at=finished_at)
        self.add("turn/finished", finished)
        self.commit()

    def conversation(self, hour: int, next_id: int) -> int:
        """A person's turn that creates a one-shot reminder, later dispatched, and now and then
        an ``at`` reminder created and deleted; the next free id number."""
        now = BASE + hour * 3_600_000 + 3_000_000
        prompt = PROMPTS[hour % len(PROMPTS)]
        self.message("user", "person", "Remind me in 20 minutes to " + prompt.lower(), now)
        one_shot = make_schedule_id(next_id)
        target = format_instant(Instant(now + 1_200_000))
        record = AfterScheduleRecord(
            id=one_shot, prompt=prompt, after_seconds=1200, scheduled_at=target
        )
        self.add("schedule/change", create_change(record))
        self.message("assistant", "model", f"Done: I will remind you at {target}.", now + 1_900)
        self.commit()
        self.add("schedule/change", dispatch_change(one_shot))
        if hour % 6 == 0:
            at_id = make_schedule_id(next_id + 1)
            tomorrow = format_instant(Instant(now + 86_400_000))
            at_record = AtScheduleRecord(id=at_id, prompt=prompt, scheduled_at=tomorrow)
            self.add("schedule/change", create_change(at_record))
            self.add("schedule/change", delete_change(at_id))
            next_id += 1
        self.commit()
        return next_id + 1


def session_file(path: Path, entries: int) -> int:
    """Write a format-2 session file of about ``entries`` entries of the realistic mix (see the
    module docstring) at ``path``; returns its entry count."""
    writer = _Writer()
    every = [make_schedule_id(k + 1) for k in range(EVERY)]
    for k, schedule_id in enumerate(every):
        first = format_instant(Instant(BASE + 3_600_000 + k * 7 * 60_000))
        record = EveryScheduleRecord(
            id=schedule_id, prompt=PROMPTS[k % len(PROMPTS)], every_seconds=3600, scheduled_at=first
        )
        writer.add("schedule/change", create_change(record))
    writer.commit()
    next_id = EVERY + 1
    hour = 0
    while writer.count < entries:
        hour += 1
        for k, schedule_id in enumerate(every):
            writer.reminder_turn(schedule_id, hour, k)
        next_id = writer.conversation(hour, next_id)
    path.write_bytes(b"".join(writer.out))
    return writer.count


def _raw(path: Path) -> None:
    decode = msgspec.json.decode
    with path.open("rb") as file:
        data = file.read()
    for line in data.split(b"\n")[:-1]:
        decode(line)


def _open(path: Path) -> None:
    import asyncio  # noqa: PLC0415

    from session_schedule.runtime.live import LiveSchedule  # noqa: PLC0415
    from session_schedule.runtime.turns import TurnQueue  # noqa: PLC0415
    from session_schedule.session import JsonlSessionStore  # noqa: PLC0415

    store = JsonlSessionStore(path.parent)

    async def run() -> None:
        handle = await store.open(SessionId(SID))
        turns = TurnQueue(handle)
        live = LiveSchedule(handle, turns, clock=FakeClock(format_instant(Instant(BASE))))
        await live.start()
        # Measured up to here: the first list (which reads the reminders' runs) and closing
        # (which writes a checkpoint, removed before the next run) are not part of the open.
        _stop()
        if len((await live.active())[1]) != EVERY:
            raise SystemExit("unexpected open: not the recurring reminders only")
        await live.close()
        await turns.close()
        await handle.close()

    asyncio.run(run())


def _check(path: Path) -> None:
    import contextlib  # noqa: PLC0415
    import io  # noqa: PLC0415

    from session_schedule.cli.main import main as cli  # noqa: PLC0415

    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        code = cli(["check", "--data-dir", str(path.parent), SID])
    if code != 0 or "is sound" not in output.getvalue():
        raise SystemExit(f"check failed ({code}): {output.getvalue()}")
    _stop()


_WORK: Final[dict[str, Callable[[Path], None]]] = {"raw": _raw, "open": _open, "check": _check}
_STARTED: list[float] = []
_STOPPED: list[tuple[float, int]] = []


def _memory(field: str) -> int:
    """A ``Vm…`` figure of this process from ``/proc/self/status``, in bytes."""
    with Path("/proc/self/status").open() as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise SystemExit(f"no {field} in /proc/self/status")


_EXIT_AT_STOP: Final = "REPLAY_BENCH_EXIT_AT_STOP"
"""Set in a child's environment: the child ends as the measurement stops and prints the modules
it imported (counting instructions); set to ``imports`` the child imports the modules named in
:data:`_IMPORTS` instead of doing the work."""
_IMPORTS: Final = "REPLAY_BENCH_IMPORTS"


def _stop() -> None:
    if not _STOPPED:
        _STOPPED.append((time.process_time() - _STARTED[0], _memory("VmHWM")))
        if os.environ.get(_EXIT_AT_STOP):
            print(" ".join(sorted(sys.modules)))
            sys.stdout.flush()
            os._exit(0)  # nothing after the measured work: no teardown


def child(work: str, path: Path) -> None:
    """One measurement in this (fresh) process: prints CPU seconds and the peak resident
    memory the work added."""
    if work != "raw":
        import session_schedule.cli.check  # noqa: PLC0415
        import session_schedule.cli.main  # noqa: PLC0415
        import session_schedule.runtime.live  # noqa: PLC0415
        import session_schedule.session  # noqa: F401, PLC0415
    # The peak resident size starts again from the current one (Linux: "5" to clear_refs).
    Path("/proc/self/clear_refs").write_text("5")
    before = _memory("VmRSS")
    _STARTED.append(time.process_time())
    if os.environ.get(_EXIT_AT_STOP) == "imports":
        for module in os.environ[_IMPORTS].split():
            with contextlib.suppress(Exception):
                importlib.import_module(module)
        _stop()
    _WORK[work](path)
    _stop()
    cpu, peak = _STOPPED[0]
    print(f"{cpu} {max(peak - before, 0)}")


def in_fresh_process(work: str, path: Path) -> tuple[float, int]:
    """CPU seconds and peak bytes added of ``work`` on ``path``, in a new interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(  # noqa: S603 - this very script, with our own arguments
        [sys.executable, __file__, "--child", work, str(path)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    cpu, peak = done.stdout.split()
    return float(cpu), int(peak)


_INSTRUCTIONS = re.compile(rb"I\s+refs:\s+([\d,]+)")


def _instructions(work: str, path: Path, imports: str | None) -> tuple[int, str]:
    """Instructions executed by ``work`` on ``path`` in a fresh process under cachegrind, and
    the modules it imported; with ``imports``, by a process importing those modules only."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        _EXIT_AT_STOP: "1" if imports is None else "imports",
        _IMPORTS: imports or "",
        "PYTHONHASHSEED": "0",  # the same hashes, so the same dictionary probes, in every run
    }
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    done = subprocess.run(  # noqa: S603 - valgrind on this very script, with our own arguments
        [*command, sys.executable, __file__, "--child", work, str(path)],
        check=True,
        capture_output=True,
        env=env,
    )
    found = _INSTRUCTIONS.search(done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind: {done.stderr[-500:]!r}")
    return int(found.group(1).replace(b",", b"")), done.stdout.decode()


def with_checkpoint(path: Path) -> bytes:
    """Open the session file ``path`` through the store and close it, which writes the
    checkpoint a session has after a close; its bytes."""
    import asyncio  # noqa: PLC0415

    from session_schedule.session import JsonlSessionStore  # noqa: PLC0415

    async def run() -> None:
        handle = await JsonlSessionStore(path.parent).open(SessionId(SID))
        await handle.close()

    asyncio.run(run())
    return _checkpoint_of(path).read_bytes()


def _checkpoint_of(path: Path) -> Path:
    return path.with_suffix(".checkpoint")


def _fresh(path: Path, checkpoint: bytes | None) -> None:
    """Leave the session's log alone beside it, with the checkpoint ``checkpoint`` if given."""
    for leftover in path.parent.glob(f"{SID}*"):
        if leftover != path:
            leftover.unlink()  # a checkpoint the last open wrote as it closed
    if checkpoint is not None:
        _checkpoint_of(path).write_bytes(checkpoint)


def instructions(directory: Path, entries: int, *, checkpoint: bool = False) -> None:
    """The instructions of each work, less those of its imports alone, and their ratios."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind")
    path = directory / f"{SID}.jsonl"
    count = session_file(path, entries)
    bound = with_checkpoint(path) if checkpoint else None
    print(
        f"session file: {count:,} entries, {path.stat().st_size / 1e6:.1f} MB"
        + (", with a checkpoint bound to its end" if checkpoint else "")
    )
    counted: dict[str, int] = {}
    for work in _WORK:
        _fresh(path, bound)
        total, modules = _instructions(work, path, None)
        _fresh(path, bound)
        imports, _ = _instructions(work, path, modules)
        counted[work] = total - imports
        print(
            f"{work:<6} {total / 1e6:9,.0f} M instructions, {imports / 1e6:7,.0f} M the imports "
            f"alone: {counted[work] / 1e6:7,.0f} M  ratio {counted[work] / counted['raw']:5.2f}"
        )


def file_path(directory: Path, entries: int, repeat: int, *, checkpoint: bool = False) -> None:
    path = directory / f"{SID}.jsonl"
    started = time.perf_counter()
    count = session_file(path, entries)
    size = path.stat().st_size
    bound = with_checkpoint(path) if checkpoint else None
    print(
        f"session file: {count:,} entries, {size / 1e6:.1f} MB "
        + ("with a checkpoint bound to its end " if checkpoint else "")
        + f"(written in {time.perf_counter() - started:.1f} s); medians of {repeat} fresh "
        "processes; the lines' CRC-32 by "
        + ("zlib-ng (the speedups extra)" if SPEEDUPS else "the standard library's zlib")
    )
    runs: dict[str, list[tuple[float, int]]] = {work: [] for work in _WORK}
    for _ in range(repeat):
        for work in _WORK:
            _fresh(path, bound)
            runs[work].append(in_fresh_process(work, path))
    raw = statistics.median(cpu for cpu, _ in runs["raw"])
    raw_peak = statistics.median(peak for _, peak in runs["raw"])
    per = 1e9 / count
    for work, label in (
        ("raw", "raw decode of the lines"),
        ("open", "open (bound checkpoint)" if checkpoint else "open (no checkpoint)"),
        ("check", "check"),
    ):
        cpu = statistics.median(run[0] for run in runs[work])
        peak = statistics.median(run[1] for run in runs[work])
        target = "" if work == "raw" else "  (target <= 3)"
        print(
            f"{label:<25} CPU median {cpu:7.3f} s ({cpu * per:5.0f} ns/entry)  ratio "
            f"{cpu / raw:5.2f}{target}  peak RSS added {peak / 2**20:6.1f} MiB "
            f"({peak / max(raw_peak, 1):4.2f}x raw)"
        )


def in_memory(changes: int, repeat: int) -> None:
    lines = synthetic_log(changes)
    size = sum(len(line) + 1 for line in lines)
    print(f"in memory: {len(lines):,} changes, {size / 1e6:.1f} MB")
    raw, strict = [], []
    for _ in range(repeat):
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true", help="only the file path")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under valgrind instead"
    )
    parser.add_argument(
        "--checkpoint",
        action="store_true",
        help="give the file the checkpoint a close writes (open and check with it bound)",
    )
    parser.add_argument("--child", nargs=2, metavar=("WORK", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child[0], Path(args.child[1]))
        return
    if args.instructions:
        with tempfile.TemporaryDirectory() as directory:
            instructions(Path(directory), args.entries, checkpoint=args.checkpoint)
        return
    with tempfile.TemporaryDirectory() as directory:
        file_path(Path(directory), args.entries, args.repeat, checkpoint=args.checkpoint)
    if not args.skip_memory:
        in_memory(args.changes, args.repeat)


if __name__ == "__main__":
    main()
