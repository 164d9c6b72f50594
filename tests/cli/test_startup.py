"""How the program starts: each command imports only what it uses, a missing extra is one line
(exit 2), Ctrl-C is exit 130 without a traceback, and ``--version``.

Import checks run the program in a fresh interpreter and read its ``sys.modules``: never timings
(``benchmarks/cli_startup.py`` measures those).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from session_schedule.cli import render
from session_schedule.cli.main import main
from tests.cli.test_operator import SESSION, make_session

WEB_AND_MODEL_SDKS = frozenset(
    {
        "starlette",
        "uvicorn",
        "h11",
        "httptools",
        "websockets",
        "anyio",
        "sniffio",
        "httpx",
        "httpcore",
        "openai",
        "anthropic",
        "pydantic",
        "mcp",
        "agents",
        "pydantic_ai",
        "langchain_core",
        "langgraph",
        "psycopg",
        "email",
    }
)
"""Web servers, HTTP clients, model SDKs and what they bring: no inspection command needs one."""
TERMINAL = frozenset({"rich", "prompt_toolkit"})
"""Only a terminal needs these; plain output does without."""

PROGRAM = """\
import json, sys
from session_schedule.cli.main import main
try:
    code = main(sys.argv[2:])
except SystemExit as exit:
    code = exit.code
with open(sys.argv[1], "w") as report:
    json.dump(sorted(sys.modules), report)
sys.exit(code)
"""


def _modules_of(tmp_path: Path, *argv: str) -> set[str]:
    """The modules the program has loaded once ``session-schedule ARGV`` is done."""
    report = tmp_path / "modules.json"
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(report), "--data-dir", str(tmp_path), *argv],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    loaded: list[str] = json.loads(report.read_text())
    return set(loaded)


def _top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["list", SESSION],
        ["list", SESSION, "--json"],
        ["show", SESSION],
        ["check", SESSION],
        ["sessions"],
        ["timeline", SESSION, "--zone", "Asia/Tokyo"],
        ["resolve", "2026-12-01 09:00 Asia/Tokyo"],
        ["list", "--help"],
        ["tools", "--format", "mcp"],
        ["catalog"],
    ],
    ids=" ".join,
)
def test_inspection_commands_import_no_web_server_model_sdk_or_terminal_library(
    tmp_path: Path, argv: list[str]
) -> None:
    make_session(tmp_path)
    loaded = _modules_of(tmp_path, *argv)
    assert _top_level(loaded) & (WEB_AND_MODEL_SDKS | TERMINAL) == set()
    assert not any(name.startswith("session_schedule.web") for name in loaded)
    # Of the harness, only the transcript rules (where a fork may cut) and the message shapes they
    # use: no agent loop, and no model client (the SDK check above).
    assert {name for name in loaded if name.startswith("session_schedule.harness")} <= {
        "session_schedule.harness",
        "session_schedule.harness.transcript",
        "session_schedule.harness.model",
    }


def test_help_imports_no_command(tmp_path: Path) -> None:
    loaded = _modules_of(tmp_path, "--help")
    ours = sorted(name for name in loaded if name.startswith("session_schedule"))
    assert ours == [
        "session_schedule",
        "session_schedule.cli",
        "session_schedule.cli.common",
        "session_schedule.cli.main",
        "session_schedule.extras",
    ]
    assert {"asyncio", "msgspec", "zoneinfo"} & loaded == set()


def test_a_command_imports_its_own_module_only(tmp_path: Path) -> None:
    loaded = _modules_of(tmp_path, "resolve", "2026-12-01T09:00:00Z")
    commands = {name for name in loaded if name.startswith("session_schedule.cli.")}
    assert commands == {
        "session_schedule.cli.common",
        "session_schedule.cli.main",
        "session_schedule.cli.resolve",
    }
    assert "asyncio" not in loaded  # only a daily input needs the clock (and its asyncio)


def test_the_chat_without_a_terminal_needs_no_terminal_library(tmp_path: Path) -> None:
    loaded = _top_level(_modules_of(tmp_path, "chat"))
    assert loaded & (WEB_AND_MODEL_SDKS | TERMINAL) == set()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == "session-schedule 0.1.0\n"


# -- missing extras --------------------------------------------------------------------------


def _without(module: str, *argv: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = (
        f"import sys\nsys.modules[{module!r}] = None\n"
        "from session_schedule.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    )
    environment = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    return subprocess.run(
        [sys.executable, "-c", script, "--data-dir", str(tmp_path), *argv],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=environment,
        check=False,
    )


@pytest.mark.parametrize(
    ("module", "argv", "message"),
    [
        (
            "starlette",
            ["serve", "--port", "0"],
            "the web overlay needs the 'web' extra (starlette is not installed): "
            "pip install 'session-schedule[web]'",
        ),
        (
            "uvicorn",
            ["serve", "--port", "0"],
            "the web overlay needs the 'web' extra (uvicorn is not installed): "
            "pip install 'session-schedule[web]'",
        ),
        (
            "mcp",
            ["mcp"],
            "the MCP server needs the 'mcp' extra (mcp is not installed): "
            "pip install 'session-schedule[mcp]'",
        ),
        (
            "psycopg",
            ["db", "init", "--dsn", "postgresql://app@db.invalid/app"],
            "the PostgreSQL store needs the 'postgres' extra (psycopg is not installed): "
            "pip install 'session-schedule[postgres]'",
        ),
        (
            "openai",
            ["chat", "--model", "gpt-4.1-mini"],
            "chatting with a model needs the 'openai' extra (openai is not installed): "
            "pip install 'session-schedule[openai]'",
        ),
        (
            "openai",
            ["serve", "--model", "gpt-4.1-mini", "--port", "0"],
            "chatting with a model needs the 'openai' extra (openai is not installed): "
            "pip install 'session-schedule[openai]'",
        ),
        (
            "openai",
            ["host", "--model", "gpt-4.1-mini"],
            "chatting with a model needs the 'openai' extra (openai is not installed): "
            "pip install 'session-schedule[openai]'",
        ),
        (
            "psycopg",
            ["host", "--dsn", "postgresql://app@db.invalid/app"],
            "the PostgreSQL store needs the 'postgres' extra (psycopg is not installed): "
            "pip install 'session-schedule[postgres]'",
        ),
    ],
)
def test_a_missing_extra_is_one_line_and_exit_2(
    tmp_path: Path, module: str, argv: list[str], message: str
) -> None:
    result = _without(module, *argv, tmp_path=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        f"session-schedule: {message}\n",
    )
    assert list(tmp_path.iterdir()) == []  # refused before any session was created


def test_the_inspection_commands_work_without_any_extra(tmp_path: Path) -> None:
    make_session(tmp_path)
    for module in ("rich", "prompt_toolkit", "openai", "starlette", "uvicorn"):
        result = _without(module, "list", SESSION, tmp_path=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"session {SESSION} at ")


def test_a_terminal_without_rich_gets_plain_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_session(tmp_path)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setitem(sys.modules, "rich", None)
    assert main(["--data-dir", str(tmp_path), "list", SESSION]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert out.splitlines()[1].split() == [
        "id", "rule", "target", "(UTC)", "state", "delivery", "prompt"
    ]  # fmt: skip
    assert render.WIDTH == 120


# -- Ctrl-C ----------------------------------------------------------------------------------


SERVE = ("serve", "--port", "0")


def test_ctrl_c_stops_the_server_quietly_with_exit_130(tmp_path: Path) -> None:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for variable in ("SESSION_SCHEDULE_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        environment.pop(variable, None)
    with subprocess.Popen(
        [sys.executable, "-m", "session_schedule", "--data-dir", str(tmp_path), *SERVE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=environment,
    ) as process:
        assert process.stderr is not None
        for line in process.stderr:
            if "Application startup complete." in line:
                break
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "Traceback" not in err
    assert "Application shutdown complete." in err
