"""Every adapter example runs as a program, offline, and its page shows its whole code."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integrations.examples import EXAMPLES, page_snippet

EXAMPLE_PAGES = {
    "pydantic_ai_reminders": "docs/guides/adapters/pydantic-ai.md",
    "openai_agents_reminders": "docs/guides/adapters/openai-agents.md",
    "langgraph_reminders": "docs/guides/adapters/langchain.md",
    "anthropic_reminders": "docs/guides/adapters/anthropic.md",
    "openai_reminders": "docs/guides/adapters/openai.md",
}


def test_every_example_is_listed() -> None:
    assert sorted(EXAMPLE_PAGES) == sorted(
        path.stem for path in EXAMPLES.glob("*.py") if path.stem != "__init__"
    )


@pytest.mark.parametrize("example", sorted(EXAMPLE_PAGES))
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
    assert page_snippet(page) == (EXAMPLES / f"{example}.py").read_text()
