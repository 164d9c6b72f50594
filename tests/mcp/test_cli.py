"""The ``mcp`` command's edges: the SDK is optional and imported only when the command runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from session_schedule.cli.main import main
from session_schedule.runtime.live import Settings


def test_without_the_sdk_the_command_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # ``import mcp`` now fails as if absent
    monkeypatch.delitem(sys.modules, "session_schedule.mcp.server", raising=False)
    assert main(["mcp"]) == 2
    assert capsys.readouterr().err == (
        "session-schedule: the MCP server needs the 'mcp' extra (mcp is not installed): "
        "pip install 'session-schedule[mcp]'\n"
    )


def test_the_program_does_not_import_the_sdk_until_the_mcp_command_runs() -> None:
    probe = (
        "import sys; import session_schedule.cli.main as m; m.build_parser(); "
        "print(sorted(name for name in sys.modules if name.split('.')[0] in {'mcp', 'mcp_types'}))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert completed.stdout == "[]\n"


def test_the_follow_up_budget_is_an_option(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from session_schedule.mcp import server  # noqa: PLC0415 - the optional SDK

    served: list[tuple[Path, str | None, Settings | None]] = []
    places: list[str | None] = []

    async def serve(
        data_dir: Path, session: str | None, *, settings: Settings | None, place: str | None
    ) -> None:
        served.append((data_dir, session, settings))
        places.append(place)

    monkeypatch.setattr(server, "serve_stdio", serve)
    assert main(["--data-dir", str(tmp_path), "mcp", "--followup-limit", "20", "s_x"]) == 0
    assert served == [(tmp_path, "s_x", Settings(followup_limit=20))]
    assert main(["--data-dir", str(tmp_path), "mcp"]) == 0
    assert served[-1] == (tmp_path, None, Settings())
    assert places == [f"jsonl:{tmp_path}"] * 2  # the store, named as the hints name it
