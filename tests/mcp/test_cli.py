"""The ``mcp`` command's edges: the SDK is optional and imported only when the command runs."""

from __future__ import annotations

import os
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


def _session_in(data_dir: Path) -> str:
    """A new session's id, made in ``data_dir`` by the command itself (stdin closed at once)."""
    completed = subprocess.run(
        [sys.executable, "-m", "session_schedule", "--data-dir", str(data_dir), "mcp"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return completed.stderr.split("session ", 1)[1].split()[0]


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo", "too large", "not JSON"])
def test_an_outbox_that_cannot_be_read_is_one_line_and_exit_5_not_a_traceback(
    tmp_path: Path, kind: str
) -> None:
    session_id = _session_in(tmp_path)
    outbox = tmp_path / f"{session_id}.mcp-outbox.json"
    if kind == "link to /dev/zero":
        outbox.symlink_to("/dev/zero")
        reason = "cannot be read (it is a symbolic link, not a regular file)"
    elif kind == "fifo":
        os.mkfifo(outbox)
        reason = "cannot be read (it is a named pipe (FIFO), not a regular file)"
    elif kind == "too large":
        with outbox.open("wb") as file:
            file.truncate(300 * 1024 * 1024)  # sparse: no disk used
        reason = "cannot be read (it holds 314572800 bytes, more than 67108864)"
    else:
        outbox.write_text("xx")
        reason = "is corrupt (JSON is malformed: invalid character (byte 0))"
    completed = subprocess.run(
        [sys.executable, "-m", "session_schedule", "--data-dir", str(tmp_path), "mcp", session_id],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (completed.returncode, completed.stdout) == (5, "")
    assert completed.stderr.splitlines()[-1] == (
        f"session-schedule: the outbox of undelivered follow-ups {outbox} {reason}; move it "
        "away to start without it, and any follow-up it held will not be offered again"
    )
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_an_owners_file_that_is_not_a_regular_file_is_one_line_and_exit_6(
    tmp_path: Path, kind: str
) -> None:
    session_id = _session_in(tmp_path)
    owners = tmp_path / ".owners"
    owners.unlink()
    if kind == "fifo":
        os.mkfifo(owners)
        message = "[Errno 22] the owners' lock file is a named pipe (FIFO), not a regular file"
    else:
        owners.symlink_to("/dev/zero")
        message = "[Errno 40] the owners' lock file is a symbolic link, not a regular file"
    completed = subprocess.run(
        [sys.executable, "-m", "session_schedule", "--data-dir", str(tmp_path), "mcp", session_id],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (completed.returncode, completed.stdout) == (6, "")
    assert completed.stderr == f"session-schedule: {message}: '{owners}'\n"


@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_a_data_directory_that_cannot_hold_the_outbox_is_one_line_and_exit_6(
    tmp_path: Path, kind: str
) -> None:
    """On a database store the outbox is the data directory's; one that cannot be made stops
    the server at start, before a session is created, not with a traceback on every take."""
    (tmp_path / "notes").write_text("not a directory\n")
    data_dir = tmp_path / "notes" if kind == "a file" else tmp_path / "notes" / "data"
    database = tmp_path / "sessions.db"
    completed = subprocess.run(
        [
            *(sys.executable, "-m", "session_schedule", "--data-dir", str(data_dir)),
            *("--store", f"sqlite:{database}", "mcp"),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    reason = "it is not a directory" if kind == "a file" else "Not a directory"
    assert (completed.returncode, completed.stdout) == (6, "")
    assert completed.stderr == (
        f"session-schedule: the outbox of undelivered follow-ups cannot be kept in {data_dir} "
        f"({reason}); choose another data directory with --data-dir or "
        "$SESSION_SCHEDULE_DATA_DIR\n"
    )
    assert not database.exists()
