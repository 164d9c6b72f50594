"""The ``chat`` program killed while it manages reminders in place (SPEC §11 durability).

The scripted model sets recurring reminders when asked "remind me rN", and pauses, resumes,
snoozes or updates one of them when asked "pause rN", "resume rN", "snooze rN" or "move rN"
(finding its id in the tool results of the conversation; a move gives it a new interval). The chat is fed such prompts at random and killed at random moments, under the
three fault models of ``test_chat_crash`` (SIGKILL, and power cuts that drop or zero-fill every
byte written after a file's last sync). After each kill the session is reopened and checked:

- acknowledged is never lost: every pause, resume, snooze or update whose successful result
  reached the model is in the recovered log (a ``pause`` change; as many ``resume`` changes of
  the reminder as resumes were acknowledged; a ``snooze`` change to the very instant the result
  reported; an ``update`` change to the very interval it reported);
- the rest is whole or absent: the recovered log decodes strictly and folds without error, so
  no change of a call that was not acknowledged is there in part.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

import pytest

from session_schedule.core.changes import (
    CHANGE_CLASSES,
    CHANGE_EVENT_TYPE,
    SchedulePauseChange,
    ScheduleResumeChange,
    ScheduleSnoozeChange,
    ScheduleUpdateChange,
)
from session_schedule.core.fold import fold
from session_schedule.core.framing import FRAME_TITLE
from session_schedule.core.records import EveryScheduleRecord
from tests.cli.chat_endpoint import Answer, CallTool, Reply, ScriptedEndpoint
from tests.cli.chat_process import ChatProcess
from tests.cli.test_chat_crash import (
    FULL,
    KILLS,
    MAX_RUN_SECONDS,
    Fault,
    Store,
    chat_arguments,
    compile_shim,
    location,
    open_store,
    replay_power_cut,
)

ROUNDS_PER_SESSION: Final = 3


VERBS: Final = ("pause", "resume", "snooze", "move")


class Model:
    """Sets, pauses, resumes, snoozes and moves reminders when asked; records what it was told
    succeeded."""

    def __init__(self) -> None:
        self._calls = itertools.count(1)
        self._lock = threading.Lock()
        self.acknowledged: set[tuple[str, str, str]] = set()
        """``(operation, id, detail)`` of every successful pause (detail ``""``), resume (the
        call's id), snooze (the instant) or move (the interval) whose result the model was
        sent."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages: list[dict[str, Any]] = body["messages"]
        ids = self._note_results(messages)
        last = messages[-1]
        content = str(last.get("content") or "")
        with self._lock:
            number = next(self._calls)
        if last["role"] == "user" and content.startswith("remind me "):
            prompt = content.removeprefix("remind me ")
            arguments = {"prompt": prompt, "every_seconds": 3600}
            return CallTool(f"call_{number}", "schedule_create", json.dumps(arguments))
        for verb in VERBS:
            if last["role"] == "user" and content.startswith(f"{verb} "):
                schedule_id = ids.get(content.removeprefix(f"{verb} "))
                if schedule_id is None:
                    return Answer("I know no such reminder.")
                change: dict[str, object] = {"id": schedule_id}
                if verb in ("pause", "resume"):
                    change["paused"] = verb == "pause"
                elif verb == "snooze":
                    change["snooze"] = {"after_seconds": 600 + number}
                else:
                    change["every_seconds"] = 3600 + number
                return CallTool(f"call_{number}", "schedule_update", json.dumps(change))
        if last["role"] == "user" and content.startswith(FRAME_TITLE):
            return Answer("done")
        return Answer("noted")

    def _note_results(self, messages: list[dict[str, Any]]) -> dict[str, str]:
        """The ids of the reminders created so far, by prompt; notes acknowledged updates."""
        ids: dict[str, str] = {}
        calls: dict[str, dict[str, Any]] = {}
        for message in messages:
            for call in message.get("tool_calls") or ():
                try:
                    calls[call["id"]] = json.loads(call["function"]["arguments"])
                except (KeyError, TypeError, json.JSONDecodeError):
                    continue
            if message["role"] != "tool":
                continue
            try:
                result = json.loads(message["content"])
            except json.JSONDecodeError:
                continue  # a call the chat answered itself (one cut short by a kill, say)
            schedule = result.get("schedule") if result.get("ok") else None
            if not isinstance(schedule, dict):
                continue
            ids[schedule["prompt"]] = schedule["id"]
            arguments = calls.get(message.get("tool_call_id", ""), {})
            with self._lock:
                if schedule.get("paused"):
                    self.acknowledged.add(("pause", schedule["id"], ""))
                if "snoozedUntil" in schedule:
                    self.acknowledged.add(("snooze", schedule["id"], schedule["snoozedUntil"]))
                if arguments.get("paused") is False:
                    self.acknowledged.add(("resume", schedule["id"], message["tool_call_id"]))
                if "id" in arguments and arguments.get("every_seconds") is not None:
                    self.acknowledged.add(("move", schedule["id"], str(schedule["everySeconds"])))
        return ids


def killed_run(
    store: Store,
    root: Path,
    session_id: str | None,
    endpoint: ScriptedEndpoint,
    shim: Path | None,
    fault: Fault,
    rng: random.Random,
    prompts: itertools.count[int],
) -> str:
    journal = root / "journal.bin"
    journal.unlink(missing_ok=True)
    environment = {"OPENAI_API_KEY": "not-needed"}
    if shim is not None:
        environment |= {
            "LD_PRELOAD": str(shim),
            "POWERCUT_JOURNAL": str(journal),
            "POWERCUT_ROOT": str(location(root)) + "/",
        }
    sent: list[int] = []
    paused: list[int] = []
    with ChatProcess(
        location(root), *chat_arguments(store, endpoint, session_id), environment=environment
    ) as chat:
        opened = chat.session_id()
        deadline = time.monotonic() + rng.uniform(0.5, MAX_RUN_SECONDS)
        while (remaining := deadline - time.monotonic()) > 0:
            roll = rng.random()
            if roll < 0.3 or not sent:
                sent.append(next(prompts))
                chat.send(f"remind me r{sent[-1]}")
            elif roll < 0.8:
                verb = rng.choice(VERBS)
                # A resume is of a reminder asked to pause, so that it is one now and then.
                chosen = rng.choice(paused if verb == "resume" and paused else sent)
                if verb == "pause":
                    paused.append(chosen)
                chat.send(f"{verb} r{chosen}")
            time.sleep(min(remaining, rng.uniform(0.0, 0.4)))
        finished = chat.kill()
    assert finished.returncode == -signal.SIGKILL, finished.stderr
    if fault != "sigkill":
        replay_power_cut(journal, fault)
    return opened


async def recovered_changes(store: Store, root: Path, session_id: str) -> list[object]:
    """Open the session (its recovery), then read it: the changes of its log, folded."""
    async with await open_store(store, root).open(session_id):
        pass
    snapshot = await open_store(store, root).read(session_id)
    changes = [
        (entry.position, entry.payload)
        for entry in snapshot.entries
        if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, CHANGE_CLASSES)
    ]
    fold(changes, session=session_id)  # whole or absent: the log folds
    return [payload for _, payload in changes]


def missing_from(
    acknowledged: set[tuple[str, str, str]], changes: list[object]
) -> set[tuple[str, str, str]]:
    """The acknowledged operations that the recovered ``changes`` lack."""
    logged = (
        {("pause", change.id, "") for change in changes if isinstance(change, SchedulePauseChange)}
        | {
            ("snooze", change.id, change.until)
            for change in changes
            if isinstance(change, ScheduleSnoozeChange)
        }
        | {
            ("move", change.id, str(change.schedule.every_seconds))
            for change in changes
            if isinstance(change, ScheduleUpdateChange)
            and isinstance(change.schedule, EveryScheduleRecord)
        }
    )
    missing = {entry for entry in acknowledged if entry[0] != "resume"} - logged
    resumes: Counter[str] = Counter(
        str(change.id) for change in changes if isinstance(change, ScheduleResumeChange)
    )
    acknowledged_resumes = Counter(entry[1] for entry in acknowledged if entry[0] == "resume")
    missing |= {
        ("resume", schedule_id, f"{count} acknowledged, {resumes[schedule_id]} logged")
        for schedule_id, count in acknowledged_resumes.items()
        if count > resumes[schedule_id]
    }
    return missing


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_an_acknowledged_pause_resume_snooze_or_update_survives_a_kill(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shim = compile_shim(tmp_path)
    faults: tuple[Fault, ...] = ("sigkill", "drop", "zero") if shim else ("sigkill",)
    rng = random.Random(f"chat-crash-manage-{store}-{KILLS}")  # noqa: S311 - reproducible
    prompts = itertools.count(1)
    checked = 0
    kinds: Counter[str] = Counter()
    with ScriptedEndpoint(model := Model()) as endpoint:
        session_id: str | None = None
        for kill in range(KILLS):
            fault = faults[kill % len(faults)]
            model.acknowledged.clear()
            session_id = killed_run(
                store, tmp_path, session_id, endpoint, shim, fault, rng, prompts
            )
            changes = asyncio.run(recovered_changes(store, tmp_path, session_id))
            missing = missing_from(model.acknowledged, changes)
            assert not missing, f"acknowledged but lost after a {fault}: {sorted(missing)}"
            logged = (
                SchedulePauseChange,
                ScheduleResumeChange,
                ScheduleSnoozeChange,
                ScheduleUpdateChange,
            )
            kinds.update(type(change).__name__ for change in changes if isinstance(change, logged))
            checked += len(model.acknowledged)
            if (kill + 1) % ROUNDS_PER_SESSION == 0:
                session_id = None
    with capsys.disabled():
        print(
            f"\nchat crash test (manage) {store}: {KILLS} kills, {checked} acknowledged "
            f"operations checked; in the logs: {dict(sorted(kinds.items()))}"
        )
    assert kinds
    if FULL:
        assert set(kinds) == {
            "SchedulePauseChange",
            "ScheduleResumeChange",
            "ScheduleSnoozeChange",
            "ScheduleUpdateChange",
        }
