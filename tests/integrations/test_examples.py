"""Every adapter example runs as a program, offline, and the README shows its code."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integrations.examples import EXAMPLES, readme_snippet

README_HEADINGS = {
    "pydantic_ai_reminders": "### PydanticAI",
    "openai_agents_reminders": "### OpenAI Agents SDK",
    "langgraph_reminders": "### LangChain and LangGraph",
    "anthropic_reminders": "### Anthropic Messages API",
    "openai_reminders": "### OpenAI Chat Completions API",
}


def test_every_example_is_listed() -> None:
    assert sorted(README_HEADINGS) == sorted(
        path.stem for path in EXAMPLES.glob("*.py") if path.stem != "__init__"
    )


@pytest.mark.parametrize("example", sorted(README_HEADINGS))
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


@pytest.mark.parametrize(("example", "heading"), sorted(README_HEADINGS.items()))
def test_the_readme_shows_the_examples_code(example: str, heading: str) -> None:
    assert readme_snippet(heading) in (EXAMPLES / f"{example}.py").read_text()
