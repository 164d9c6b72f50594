"""The ``chat`` program killed at random moments: no reminder is ever lost.

A scripted OpenAI-compatible endpoint plays the model: asked to "remind me rN" it calls
``schedule_create`` for one second later, and it answers every reminder turn. The chat (plain
mode, JSONL or SQLite) is fed such prompts at random intervals and SIGKILLed at a random moment;
the next run of the same session is its recovery. Kills cycle through three fault models:

- ``sigkill``: the process dies; everything it wrote is in the page cache and survives;
- ``drop``: a power cut that loses every byte written after each file's last fsync;
- ``zero``: a power cut that leaves those bytes zero-filled (SQLite's shared-memory index, never
  synced, is lost in both power cuts).

The power cuts are replayed from a journal that ``powercut.c``, preloaded into the chat, keeps of
every write and sync under the data directory (the test compiles it with the system C compiler;
without one only ``sigkill`` runs, and the test says so). Every ``ROUNDS_PER_SESSION`` kills the
session is run to completion — every reminder delivered, every turn finished — and checked:

- no reminder lost: every reminder created in the log was delivered as a follow-up turn;
- a repeat carries the same occurrence key as the first delivery, and there are no more repeats
  than kills.

3 kills per store by default (one of each fault); 200 with ``SESSION_SCHEDULE_FULL=1``. The test
prints its counts (``pytest -rP`` shows them).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import pytest

from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
)
from session_schedule.core.fold import fold
from session_schedule.core.framing import FRAME_TITLE, occurrence_keys
from session_schedule.harness.transcript import TranscriptCheck, transcript_check
from session_schedule.session import JsonlSessionStore, SessionStore, SqliteSessionStore
from session_schedule.session.message import MessageEntry
from session_schedule.session.port import SessionSnapshot
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    TurnFinished,
    TurnQueued,
)
from tests.cli.chat_endpoint import Answer, CallTool, Fail, Reply, ScriptedEndpoint
from tests.cli.chat_process import ChatProcess

FULL: Final = os.environ.get("SESSION_SCHEDULE_FULL") == "1"
KILLS: Final = 200 if FULL else 3
ROUNDS_PER_SESSION: Final = 10
MAX_RUN_SECONDS: Final = 2.5
"""A run is killed at a random moment up to this long after it printed its banner."""
STALL_SECONDS: Final = 90.0
"""A run to completion fails when the log shows no progress for this long."""
SHIM: Final = Path(__file__).with_name("powercut.c")
Store = Literal["jsonl", "sqlite"]
Fault = Literal["sigkill", "drop", "zero"]


MAX_FAILURES_PER_FRAME: Final = 2
"""A failing endpoint fails one reminder frame at most this often, so the retry waits (about 1
and 2 s) stay shorter than the stall bound of a run to completion."""


class Model:
    """The scripted model: sets a reminder when asked, answers everything else. With
    ``failure_rate``, it fails that share of the reminder turns' requests (up to
    :data:`MAX_FAILURES_PER_FRAME` times each) with a 503 the client may retry, so kills land in
    retry waits and in retried turns."""

    def __init__(self, *, failure_rate: float = 0.0, seed: str = "") -> None:
        self._calls = itertools.count(1)
        self._lock = threading.Lock()
        self._failure_rate = failure_rate
        self._random = random.Random(seed)  # noqa: S311 - reproducible failures
        self._failures: Counter[str] = Counter()
        self.failed = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        content = str(last.get("content") or "")
        if self._failure_rate and last["role"] == "user" and content.startswith(FRAME_TITLE):
            with self._lock:
                failures = self._failures[content]
                if failures < MAX_FAILURES_PER_FRAME and self._random.random() < self._failure_rate:
                    self._failures[content] += 1
                    self.failed += 1
                    return Fail(503, "overloaded, try again", retry=True)
        return self._answer(body)

    def _answer(self, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        content = str(last.get("content") or "")
        if last["role"] == "user" and content.startswith("remind me "):
            with self._lock:
                number = next(self._calls)
            prompt = content.removeprefix("remind me ")
            return CallTool(
                f"call_{number}", "schedule_create", f'{{"prompt":"{prompt}","after_seconds":1}}'
            )
        if last["role"] == "user" and content.startswith(FRAME_TITLE):
            return Answer("done")
        return Answer("noted")


@dataclass
class Tally:
    kills: Counter[str]
    runs: int = 0
    sessions: int = 0
    reminders: int = 0
    """Reminders created (and found in the log) across the checked sessions."""
    deliveries: int = 0
    """Follow-up turns in the transcripts."""
    repeats: int = 0
    """Deliveries beyond the first of an occurrence."""
    lost: int = 0
    failed_turns: int = 0
    """Reminder turns recorded ``failed`` (after their retries): reminders not answered."""
    unsynced_bytes: int = 0
    """Bytes the power cuts dropped or zero-filled (written after their file's last sync)."""


def location(root: Path) -> Path:
    return root / "data"


def open_store(store: Store, root: Path) -> SessionStore:
    data = location(root)
    return JsonlSessionStore(data) if store == "jsonl" else SqliteSessionStore(data / "sessions.db")


def compile_shim(directory: Path) -> Path | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    library = directory / "powercut.so"
    subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", "-o", str(library), str(SHIM), "-ldl", "-lpthread"],
        check=True,
        capture_output=True,
    )
    return library


def replay_power_cut(journal: Path, fault: Fault) -> int:
    """Undo (``drop``) or zero-fill (``zero``) every write after each file's last sync; how
    many written bytes that touched."""
    since_sync: dict[str, list[tuple[int, int, int, bytes]]] = {}
    data = journal.read_bytes() if journal.exists() else b""
    at = 0
    while at < len(data):
        kind = data[at : at + 1]
        (length,) = struct.unpack_from("<I", data, at + 1)
        path = data[at + 5 : at + 5 + length].decode()
        at += 5 + length
        if kind == b"S":
            since_sync[path] = []
            continue
        assert kind == b"U", kind
        offset, written, old_size, old_length = struct.unpack_from("<qqqq", data, at)
        at += 32
        old = data[at : at + old_length]
        at += old_length
        since_sync.setdefault(path, []).append((offset, written, old_size, old))
    touched = 0
    for path, writes in since_sync.items():
        if not writes or not Path(path).exists():
            continue
        touched += sum(written for _offset, written, _old_size, _old in writes)
        fd = os.open(path, os.O_RDWR)
        try:
            if fault == "drop":
                for offset, _written, old_size, old in reversed(writes):
                    os.pwrite(fd, old, offset)
                    os.ftruncate(fd, old_size)
            else:
                size = os.fstat(fd).st_size
                for offset, written, _old_size, _old in writes:
                    end = min(offset + written, size)
                    if end > offset:
                        os.pwrite(fd, bytes(end - offset), offset)
        finally:
            os.close(fd)
    for shared in Path(next(iter(since_sync), "/nonexistent")).parent.glob("*-shm"):
        shared.unlink()
    return touched


def chat_arguments(store: Store, endpoint: ScriptedEndpoint, session_id: str | None) -> list[str]:
    arguments = ["--store", store, "--model", "scripted", "--base-url", endpoint.base_url]
    return [*arguments, session_id] if session_id else arguments


def killed_run(
    store: Store,
    root: Path,
    session_id: str | None,
    endpoint: ScriptedEndpoint,
    shim: Path | None,
    fault: Fault,
    rng: random.Random,
    prompts: itertools.count[int],
    tally: Tally,
) -> str:
    """One run of the chat, killed at a random moment; the fault replayed; the session id."""
    journal = root / "journal.bin"
    journal.unlink(missing_ok=True)
    environment = {"OPENAI_API_KEY": "not-needed"}
    if shim is not None:
        environment |= {
            "LD_PRELOAD": str(shim),
            "POWERCUT_JOURNAL": str(journal),
            "POWERCUT_ROOT": str(location(root)) + "/",
        }
    with ChatProcess(
        location(root), *chat_arguments(store, endpoint, session_id), environment=environment
    ) as chat:
        opened = chat.session_id()
        deadline = time.monotonic() + rng.uniform(0.0, MAX_RUN_SECONDS)
        while (remaining := deadline - time.monotonic()) > 0:
            if rng.random() < 0.4:
                chat.send(f"remind me r{next(prompts)}")
            time.sleep(min(remaining, rng.uniform(0.0, 0.5)))
        finished = chat.kill()
    assert finished.returncode == -signal.SIGKILL, finished.stderr
    if fault != "sigkill":
        tally.unsynced_bytes += replay_power_cut(journal, fault)
    return opened


def pending(snapshot: SessionSnapshot) -> tuple[int, int]:
    """Active reminders and unfinished turns in ``snapshot``."""
    changes = [
        (entry.position, entry.payload)
        for entry in snapshot.entries
        if entry.type == CHANGE_EVENT_TYPE
        and isinstance(
            entry.payload, ScheduleCreateChange | ScheduleDeleteChange | ScheduleDispatchChange
        )
    ]
    state = fold(changes, seed_length=0, session=snapshot.header.id)
    queued = {e.position for e in snapshot.entries if e.type == TURN_QUEUED_TYPE}
    finished = {
        e.payload.turn
        for e in snapshot.entries
        if e.type == TURN_FINISHED_TYPE and isinstance(e.payload, TurnFinished)
    }
    return len(state.ordered()), len(queued - finished)


def complete_run(
    store: Store, root: Path, session_id: str, endpoint: ScriptedEndpoint, tally: Tally
) -> SessionSnapshot:
    """Run the chat until every reminder is delivered and every turn finished; the log."""
    arguments = chat_arguments(store, endpoint, session_id)
    with ChatProcess(
        location(root), *arguments, environment={"OPENAI_API_KEY": "not-needed"}
    ) as chat:
        chat.session_id()
        # The follow-up budget (6 a minute) spreads a backlog of reminders over minutes: give
        # up only when nothing has moved for longer than one budget window.
        left = pending(asyncio.run(open_store(store, root).read(session_id)))
        deadline = time.monotonic() + STALL_SECONDS
        while left != (0, 0):
            assert time.monotonic() < deadline, f"stuck at {left}:\n{chat.output}"
            time.sleep(0.2)
            now_left = pending(asyncio.run(open_store(store, root).read(session_id)))
            if now_left != left:
                left, deadline = now_left, time.monotonic() + STALL_SECONDS
        finished = chat.finish()
    assert finished.returncode == 0, finished.stderr
    tally.runs += 1
    return asyncio.run(open_store(store, root).read(session_id))


def check_session(snapshot: SessionSnapshot, tally: Tally) -> None:
    created = [
        entry.payload.schedule.id
        for entry in snapshot.entries
        if isinstance(entry.payload, ScheduleCreateChange)
    ]
    delivered: Counter[str] = Counter()
    for entry in snapshot.entries:
        message = entry.payload
        if isinstance(message, MessageEntry) and message.origin == "followup":
            delivered.update(occurrence_keys(message.content))
    for schedule_id in created:
        keys = [key for key in delivered if key.startswith(f"{schedule_id}@")]
        assert len(keys) <= 1, f"{schedule_id} was delivered under several keys: {keys}"
        if not keys:
            tally.lost += 1
            continue
        tally.repeats += delivered[keys[0]] - 1
    reminder_turns = [
        e.payload
        for e in snapshot.entries
        if isinstance(e.payload, TurnQueued) and e.payload.origin == "schedule"
    ]
    assert {key for turn in reminder_turns for key in turn.occurrences} == set(delivered)
    reminder_positions = {
        e.position
        for e in snapshot.entries
        if isinstance(e.payload, TurnQueued) and e.payload.origin == "schedule"
    }
    tally.failed_turns += sum(
        1
        for e in snapshot.entries
        if isinstance(e.payload, TurnFinished)
        and e.payload.turn in reminder_positions
        and e.payload.outcome == "failed"
    )
    # A chat killed in the middle of a tool call recorded the interruption when it resumed.
    assert transcript_check(snapshot.entries) == TranscriptCheck(stray=None, interrupted=())
    tally.sessions += 1
    tally.reminders += len(created)
    tally.deliveries += sum(delivered.values())


@pytest.mark.parametrize(
    ("store", "failure_rate"), [("jsonl", 0.0), ("sqlite", 0.0), ("jsonl", 0.5)]
)
def test_no_reminder_is_lost_when_the_chat_is_killed(
    store: Store, failure_rate: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``failure_rate``, half of the reminder turns' requests fail (retried), so kills also
    land during retry waits and retried turns."""
    shim = compile_shim(tmp_path)
    faults: tuple[Fault, ...] = ("sigkill", "drop", "zero") if shim else ("sigkill",)
    name = f"chat-crash-{store}-{KILLS}" + (f"-failing-{failure_rate}" if failure_rate else "")
    rng = random.Random(name)  # noqa: S311 - reproducible kill times
    tally = Tally(kills=Counter())
    prompts = itertools.count(1)
    started = time.perf_counter()
    model = Model(failure_rate=failure_rate, seed=name)
    with ScriptedEndpoint(model) as endpoint:
        session_id: str | None = None
        for kill in range(KILLS):
            fault = faults[kill % len(faults)]
            session_id = killed_run(
                store, tmp_path, session_id, endpoint, shim, fault, rng, prompts, tally
            )
            tally.kills[fault] += 1
            tally.runs += 1
            last_of_session = (kill + 1) % ROUNDS_PER_SESSION == 0 or kill + 1 == KILLS
            if last_of_session:
                check_session(complete_run(store, tmp_path, session_id, endpoint, tally), tally)
                session_id = None
    elapsed = time.perf_counter() - started
    with capsys.disabled():
        compiler = "" if shim else " (no C compiler: power cuts not simulated)"
        failing = f", {model.failed} reminder requests failed" if failure_rate else ""
        print(f"\nchat crash test {store}{compiler}{failing}: {tally} in {elapsed:.1f} s")
    assert tally.lost == 0
    assert tally.failed_turns == 0
    assert tally.repeats <= sum(tally.kills.values())
    assert tally.reminders > 0
