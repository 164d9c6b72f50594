"""Every command on a core-only install and on a ``[cli]`` install: it works, or it prints one line
naming the extra it needs and exits 2 — never a traceback.

An install is simulated the way the extras tests do it: the packages it lacks are put in
``sys.modules`` as ``None`` before the program starts, so importing any of them (or anything
inside them) fails as it would on a machine without them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final, Literal

import pytest

from session_schedule.extras import EXTRAS
from tests.cli.test_operator import SESSION, make_session

Install = Literal["core", "cli"]

_BROUGHT_BY_EXTRAS: Final = frozenset(
    {module for modules in EXTRAS.values() for module in modules} | {"anyio", "httpx", "pydantic"}
)
"""What no extra-less install has: every extra's modules, and what the MCP SDK and the model
clients bring with them."""
MISSING: Final[dict[Install, frozenset[str]]] = {
    "core": _BROUGHT_BY_EXTRAS,
    "cli": _BROUGHT_BY_EXTRAS - set(EXTRAS["cli"]),
}

PROGRAM: Final = """\
import sys
for module in sys.argv[1].split(","):
    sys.modules[module] = None
from session_schedule.cli.main import main
sys.exit(main(sys.argv[2:]))
"""

DSN: Final = "postgresql://app@db.invalid/app"
WEB: Final = (
    "the web overlay needs the 'web' extra (starlette is not installed): "
    "pip install 'session-schedule[web]'"
)
MCP: Final = (
    "the MCP server needs the 'mcp' extra (mcp is not installed): "
    "pip install 'session-schedule[mcp]'"
)
POSTGRES: Final = (
    "the PostgreSQL store needs the 'postgres' extra (psycopg is not installed): "
    "pip install 'session-schedule[postgres]'"
)
OPENAI: Final = (
    "chatting with a model needs the 'openai' extra (openai is not installed): "
    "pip install 'session-schedule[openai]'"
)


def _environment() -> dict[str, str]:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", "OPENAI_API_KEY": "sk-test"}
    for variable in ("SESSION_SCHEDULE_MODEL", "OPENAI_BASE_URL", "SESSION_SCHEDULE_PG_DSN"):
        environment.pop(variable, None)
    return environment


def _command(install: Install, data_dir: Path, argv: list[str]) -> list[str]:
    blocked = ",".join(sorted(MISSING[install]))
    return [sys.executable, "-c", PROGRAM, blocked, "--data-dir", str(data_dir), *argv]


def _run(install: Install, data_dir: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(install, data_dir, argv),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=_environment(),
        check=False,
        timeout=60,
    )


WORKING: Final[list[list[str]]] = [
    ["chat"],
    [SESSION],
    ["sessions"],
    ["show", SESSION],
    ["list", SESSION],
    ["timeline", SESSION],
    ["check", SESSION],
    ["history", SESSION],
    ["fork", SESSION],
    ["catalog"],
    ["tools"],
    ["walkthrough"],
    ["resolve", "2026-12-01 09:00 Asia/Tokyo"],
]
"""Commands that need no extra (the chat here reads piped input, offline)."""

NEEDING_AN_EXTRA: Final[list[tuple[list[str], str]]] = [
    (["chat", "--model", "gpt-4.1-mini"], OPENAI),
    (["serve", "--port", "0"], WEB),
    (["mcp"], MCP),
    (["mcp", SESSION], MCP),
    (["host", "--dsn", DSN], POSTGRES),
    (["db", "init", "--dsn", DSN], POSTGRES),
]


def test_every_command_is_covered() -> None:
    from session_schedule.cli.main import COMMANDS  # noqa: PLC0415

    named = {argv[0] for argv in WORKING} | {argv[0] for argv, _ in NEEDING_AN_EXTRA}
    assert {command.name for command in COMMANDS} <= named | {SESSION}


@pytest.mark.parametrize("install", ["core", "cli"])
@pytest.mark.parametrize("argv", WORKING, ids=" ".join)
def test_a_command_that_needs_no_extra_works(
    tmp_path: Path, install: Install, argv: list[str]
) -> None:
    make_session(tmp_path)
    result = _run(install, tmp_path, argv)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("install", ["core", "cli"])
@pytest.mark.parametrize(("argv", "message"), NEEDING_AN_EXTRA, ids=str)
def test_a_command_that_needs_an_extra_says_which_in_one_line(
    tmp_path: Path, install: Install, argv: list[str], message: str
) -> None:
    make_session(tmp_path)
    before = sorted(tmp_path.iterdir())
    result = _run(install, tmp_path, argv)
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        f"session-schedule: {message}\n",
    )
    assert sorted(tmp_path.iterdir()) == before


HELP_COMMANDS: Final = sorted({argv[0] for argv, _ in NEEDING_AN_EXTRA})
"""The commands that need an extra to run: their help needs none."""


def _help(blocked: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, blocked, command, "--help"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**_environment(), "COLUMNS": "100"},
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize("install", ["core", "cli"])
@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_the_help_of_a_command_that_needs_an_extra_needs_none(
    install: Install, command: str
) -> None:
    """``serve --help`` once printed the missing-extra line and exited 2 (the others printed
    their help): each prints the help the full install prints."""
    full = _help("no_such_module_to_block", command)
    assert (full.returncode, full.stderr) == (0, "")
    assert full.stdout.startswith(f"usage: session-schedule {command} ")
    result = _help(",".join(sorted(MISSING[install])), command)
    assert (result.returncode, result.stdout, result.stderr) == (0, full.stdout, "")


@pytest.mark.parametrize("install", ["core", "cli"])
def test_the_host_runs_on_the_data_directory_without_any_extra(
    tmp_path: Path, install: Install
) -> None:
    make_session(tmp_path)
    with subprocess.Popen(
        _command(install, tmp_path, ["host"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=_environment(),
    ) as process:
        assert process.stdout is not None
        first = process.stdout.readline()
        process.send_signal(signal.SIGTERM)
        rest, err = process.communicate(timeout=60)
    assert first.startswith(f"session-schedule host: keeping the sessions in jsonl:{tmp_path} live")
    assert rest.startswith("session-schedule host: stopped;")
    assert (process.returncode, err) == (0, "")
