"""One model request on a long session opened from its checkpoint: built from the end of the log.

A JSONL session of ``--rounds`` prompt-and-answer rounds (two entries each) is closed, so its
checkpoint is written, then opened again and one request is built — by ``recent_context`` on
the session's entries, against ``bounded_context`` on the whole transcript
(``chat_messages(messages_of(entries))``, what the harness did before), each on a freshly opened
session, in the same run. CPU time of the request alone (the open is the same for both), and the
memory the request allocates at its peak (tracemalloc, a separate pass).

Two budgets: 4,000 characters (the request fits in the 64 entries the checkpoint holds decoded)
and the default 60,000 (the request reaches before them: the session reads, from the file, the
segments of its history that hold them, found in the index its checkpoint carries).

    python3 dev.py bench recent_context [--rounds N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from session_schedule.harness.model import ChatMessage
from session_schedule.harness.transcript import (
    DEFAULT_MAX_CONTEXT_CHARS,
    bounded_context,
    chat_messages,
    messages_of,
    recent_context,
)
from session_schedule.session import JsonlSessionStore, SessionId
from session_schedule.session.handle import EntriesView, LazyEntries
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, assistant_message, user_message
from session_schedule.session.port import SessionHandle
from session_schedule.testing import FakeClock

NOW = "2026-11-29T20:00:00.000Z"
SYSTEM: ChatMessage = {"role": "system", "content": "You are a helpful assistant."}
BUDGETS = (4_000, DEFAULT_MAX_CONTEXT_CHARS)
Build = Callable[[SessionHandle, int], list[ChatMessage]]


def from_the_end(session: SessionHandle, budget: int) -> list[ChatMessage]:
    return recent_context(SYSTEM, session.entries, budget)


def from_everything(session: SessionHandle, budget: int) -> list[ChatMessage]:
    return bounded_context(SYSTEM, chat_messages(messages_of(session.entries)), budget)


BUILDS: tuple[tuple[str, Build], ...] = (("end", from_the_end), ("whole", from_everything))


async def write_session(store: JsonlSessionStore, rounds: int) -> SessionId:
    clock = FakeClock(NOW)
    async with await store.create(now=clock.now()) as session:
        for n in range(rounds):
            session.append(
                MESSAGE_ENTRY_TYPE, user_message(f"question {n}: what is next?", at=clock.now())
            )
            session.append(
                MESSAGE_ENTRY_TYPE,
                assistant_message(f"answer {n}: the next thing, in a sentence.", at=clock.now()),
            )
            if n % 1000 == 999:
                await session.barrier()
        await session.barrier()
        return session.id


def lazy(session: SessionHandle) -> LazyEntries:
    view = session.entries
    entries = view._entries if isinstance(view, EntriesView) else view
    if not isinstance(entries, LazyEntries):
        raise SystemExit("the session did not open from its checkpoint")
    return entries


async def measure(
    store: JsonlSessionStore, session_id: SessionId, build: Build, budget: int, *, memory: bool
) -> tuple[float, list[ChatMessage], bool]:
    """CPU seconds (or peak bytes, with ``memory``) of one request on a freshly opened session;
    the request; whether the history before the checkpoint's window was read."""
    async with await store.open(session_id) as session:
        entries = lazy(session)
        if memory:
            tracemalloc.start()
            request = build(session, budget)
            _size, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            return float(peak), request, entries.loaded
        started = time.process_time()
        request = build(session, budget)
        return time.process_time() - started, request, entries.loaded


async def run(rounds: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        store = JsonlSessionStore(Path(directory) / "data")
        started = time.monotonic()
        session_id = await write_session(store, rounds)
        size = store.path_of(session_id).stat().st_size
        print(
            f"session: {2 * rounds:,} entries ({rounds:,} rounds), {size / 1e6:.1f} MB, "
            f"written in {time.monotonic() - started:.1f} s"
        )
        for budget in BUDGETS:
            await compare(store, session_id, budget, repeat)


async def compare(
    store: JsonlSessionStore, session_id: SessionId, budget: int, repeat: int
) -> None:
    times: dict[str, list[float]] = {name: [] for name, _build in BUILDS}
    requests: dict[str, list[ChatMessage]] = {}
    reads: dict[str, bool] = {}
    for _ in range(repeat):
        for name, build in BUILDS:
            seconds, requests[name], reads[name] = await measure(
                store, session_id, build, budget, memory=False
            )
            times[name].append(seconds)
    if requests["end"] != requests["whole"]:
        raise SystemExit("the two requests differ")
    peaks = {
        name: (await measure(store, session_id, build, budget, memory=True))[0]
        for name, build in BUILDS
    }
    medians = {name: statistics.median(times[name]) for name in times}
    print(f"budget {budget:,} characters: a request of {len(requests['end'])} messages")
    for name, label in (
        ("end", "from the end of the log  "),
        ("whole", "from the whole transcript"),
    ):
        print(
            f"  {label} median {medians[name] * 1e3:9.2f} ms  peak {peaks[name] / 1e6:7.2f} MB"
            f"  history read: {reads[name]}"
        )
    print(
        f"  ratio (end / whole)       time {medians['end'] / medians['whole']:.5f}  "
        f"memory {peaks['end'] / peaks['whole']:.5f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.repeat))


if __name__ == "__main__":
    main()
