"""The ``chat`` program killed while it pauses and snoozes reminders (SPEC §11 durability).

The scripted model sets recurring reminders when asked "remind me rN", and pauses or snoozes
one of them when asked "pause rN" or "snooze rN" (finding its id in the tool results of the
conversation). The chat is fed such prompts at random and killed at random moments, under the
three fault models of ``test_chat_crash`` (SIGKILL, and power cuts that drop or zero-fill every
byte written after a file's last sync). After each kill the session is reopened and checked:

- acknowledged is never lost: every pause or snooze whose successful result reached the model
  is in the recovered log (a ``pause`` change, or a ``snooze`` change to the very instant the
  result reported);
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
from pathlib import Path
from typing import Any, Final

import pytest

from session_schedule.core.changes import (
    CHANGE_CLASSES,
    CHANGE_EVENT_TYPE,
    SchedulePauseChange,
    ScheduleSnoozeChange,
)
from session_schedule.core.fold import fold
from session_schedule.core.framing import FRAME_TITLE
from tests.cli.chat_endpoint import Answer, CallTool, Reply, ScriptedEndpoint
from tests.cli.chat_process import ChatProcess
from tests.cli.test_chat_crash import (
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


class Model:
    """Sets, pauses and snoozes reminders when asked; records what it was told succeeded."""

    def __init__(self) -> None:
        self._calls = itertools.count(1)
        self._lock = threading.Lock()
        self.acknowledged: set[tuple[str, str, str]] = set()
        """(session-free) ``(operation, id, snoozed until or "")`` of every successful pause
        or snooze whose result the model was sent."""

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
        for verb in ("pause", "snooze"):
            if last["role"] == "user" and content.startswith(f"{verb} "):
                schedule_id = ids.get(content.removeprefix(f"{verb} "))
                if schedule_id is None:
                    return Answer("I know no such reminder.")
                change: dict[str, object] = {"id": schedule_id}
                if verb == "pause":
                    change["paused"] = True
                else:
                    change["snooze"] = {"after_seconds": 600 + number}
                return CallTool(f"call_{number}", "schedule_update", json.dumps(change))
        if last["role"] == "user" and content.startswith(FRAME_TITLE):
            return Answer("done")
        return Answer("noted")

    def _note_results(self, messages: list[dict[str, Any]]) -> dict[str, str]:
        """The ids of the reminders created so far, by prompt; notes acknowledged updates."""
        ids: dict[str, str] = {}
        for message in messages:
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
            with self._lock:
                if schedule.get("paused"):
                    self.acknowledged.add(("pause", schedule["id"], ""))
                if "snoozedUntil" in schedule:
                    self.acknowledged.add(("snooze", schedule["id"], schedule["snoozedUntil"]))
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
                chat.send(f"{rng.choice(['pause', 'snooze'])} r{rng.choice(sent)}")
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


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_an_acknowledged_pause_or_snooze_survives_a_kill(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shim = compile_shim(tmp_path)
    faults: tuple[Fault, ...] = ("sigkill", "drop", "zero") if shim else ("sigkill",)
    rng = random.Random(f"chat-crash-manage-{store}-{KILLS}")  # noqa: S311 - reproducible
    prompts = itertools.count(1)
    checked = 0
    managed = 0
    with ScriptedEndpoint(model := Model()) as endpoint:
        session_id: str | None = None
        for kill in range(KILLS):
            fault = faults[kill % len(faults)]
            model.acknowledged.clear()
            session_id = killed_run(
                store, tmp_path, session_id, endpoint, shim, fault, rng, prompts
            )
            changes = asyncio.run(recovered_changes(store, tmp_path, session_id))
            logged = {
                ("pause", change.id, "")
                for change in changes
                if isinstance(change, SchedulePauseChange)
            } | {
                ("snooze", change.id, change.until)
                for change in changes
                if isinstance(change, ScheduleSnoozeChange)
            }
            missing = model.acknowledged - logged
            assert not missing, f"acknowledged but lost after a {fault}: {sorted(missing)}"
            checked += len(model.acknowledged)
            managed += len(logged)
            if (kill + 1) % ROUNDS_PER_SESSION == 0:
                session_id = None
    with capsys.disabled():
        print(
            f"\nchat crash test (pause/snooze) {store}: {KILLS} kills, {checked} acknowledged "
            f"pauses and snoozes checked, {managed} in the logs"
        )
    assert managed > 0
