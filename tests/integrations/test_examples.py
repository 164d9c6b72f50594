"""Every adapter example runs as a program, offline, and its page shows its whole code; every
durable example continues its conversation across a restart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from session_schedule.session.framework import FRAMEWORK_MESSAGES_TYPE, FrameworkMessages
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.turns import TURN_FINISHED_TYPE, TurnFinished
from tests.integrations.examples import EXAMPLES, ROOT, page_snippet

EXAMPLE_PAGES = {
    "pydantic_ai_reminders": "docs/guides/adapters/pydantic-ai.md",
    "pydantic_ai_durable": "docs/guides/adapters/pydantic-ai.md",
    "openai_agents_reminders": "docs/guides/adapters/openai-agents.md",
    "openai_agents_durable": "docs/guides/adapters/openai-agents.md",
    "langgraph_reminders": "docs/guides/adapters/langchain.md",
    "langgraph_durable": "docs/guides/adapters/langchain.md",
    "anthropic_reminders": "docs/guides/adapters/anthropic.md",
    "anthropic_durable": "docs/guides/adapters/anthropic.md",
    "openai_reminders": "docs/guides/adapters/openai.md",
    "openai_durable": "docs/guides/adapters/openai.md",
}
DURABLE = sorted(example for example in EXAMPLE_PAGES if example.endswith("_durable"))
IN_MEMORY = sorted(set(EXAMPLE_PAGES) - set(DURABLE))
KEPT_IN_THE_LOG = {
    "anthropic_durable": "anthropic",
    "openai_durable": "openai",
    "pydantic_ai_durable": "pydantic-ai",
}
"""The durable examples whose conversation is kept in the session's log, and its framework."""

START = "2026-11-30T09:00:00.000Z"
LATER = "2026-11-30T10:00:00.000Z"
RUN_AT = """\
import asyncio
import sys
from pathlib import Path

from session_schedule.testing import FakeClock
from tests.integrations.examples import load

example, directory, now = sys.argv[1:]
asyncio.run(load(example).main(Path(directory), clock=FakeClock(now)))
"""
"""Runs an example's ``main`` in a process of its own, at a virtual instant."""


def test_every_example_is_listed() -> None:
    assert sorted(EXAMPLE_PAGES) == sorted(
        path.stem for path in EXAMPLES.glob("*.py") if path.stem != "__init__"
    )
    assert all(f"{example.removesuffix('_durable')}_reminders" in IN_MEMORY for example in DURABLE)


@pytest.mark.parametrize("example", IN_MEMORY)
def test_the_example_runs_as_a_program(example: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{example}.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "prompt -> I will remind you in a second.\nreminder -> Time to stretch!\n"


@pytest.mark.parametrize(("example", "page"), sorted(EXAMPLE_PAGES.items()))
def test_the_page_shows_the_whole_example(example: str, page: str) -> None:
    assert page_snippet(page, example) == (EXAMPLES / f"{example}.py").read_text()


def _run(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout


@pytest.mark.parametrize("example", DURABLE)
def test_a_durable_example_continues_the_conversation_after_a_restart(
    example: str, tmp_path: Path
) -> None:
    directory = tmp_path / "data"
    # The first process: the person asks for a reminder and says their name; it ends.
    first = _run("-c", RUN_AT, example, str(directory), START)
    assert first == "prompt -> I will remind you in a second.\nprompt -> Nice to meet you, Ada.\n"
    # The second, an hour later: the reminder is delivered, and the model knows the name.
    second = _run("-c", RUN_AT, example, str(directory), LATER)
    assert second == "reminder -> Time to stretch, Ada!\n"
    # The third, the program as a person runs it: nothing more is due.
    third = _run(str(EXAMPLES / f"{example}.py"), str(directory))
    assert third == f"nothing more is due: remove {directory} to start again\n"


@pytest.mark.parametrize(("example", "framework"), sorted(KEPT_IN_THE_LOG.items()))
async def test_a_durable_example_keeps_each_turns_messages_before_its_finish(
    example: str, framework: str, tmp_path: Path
) -> None:
    directory = tmp_path / "data"
    _run("-c", RUN_AT, example, str(directory), START)
    _run("-c", RUN_AT, example, str(directory), LATER)
    store = JsonlSessionStore(directory)
    (header,) = await store.list()
    _header, entries = await store.read(header.id)  # strictly decoded
    kept = [entry for entry in entries if entry.type == FRAMEWORK_MESSAGES_TYPE]
    assert [entry.payload.framework for entry in kept] == [framework] * 3  # type: ignore[attr-defined]
    for entry in kept:
        assert isinstance(entry.payload, FrameworkMessages)
        finished = entries[entry.position + 1].payload
        assert entries[entry.position + 1].type == TURN_FINISHED_TYPE
        assert isinstance(finished, TurnFinished)
        assert (finished.turn, finished.outcome) == (entry.payload.turn, "completed")
