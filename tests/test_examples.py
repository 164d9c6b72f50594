"""Every console example of the documentation and of the program's help runs as written.

Examples are the ``console`` lines of every documentation page (``tests.markdown.pages``: the
README, ``CONTRIBUTING.md`` and ``docs/``) that start with ``session-schedule`` (or
``$ session-schedule``) or ``python3 dev.py run``, and the ``example:`` lines of every command's
help. Each runs in a fresh process with an empty data directory holding one session, the
``s_7k2m4q9x3v5b`` the help refers to, and no model configured. An example that talks to a
model is skipped (there is none here); a server is started, reached and stopped with Ctrl-C, as
a person would; when a page shows an example's output, the output must match.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from session_schedule.session import SessionId
from tests.cli.test_operator import make_session
from tests.markdown import all_blocks

ROOT = Path(__file__).resolve().parent.parent
HELP = ROOT / "tests" / "cli" / "snapshots" / "help.txt"
PROGRAM = Path(sys.executable).parent / "session-schedule"
HELP_SESSION = SessionId("s_7k2m4q9x3v5b")
TIMEOUT = 60
MODEL_VARIABLES = ("SESSION_SCHEDULE_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY")
_ADDRESS = re.compile(r"the web overlay is at (http://\S+)")


@dataclass(frozen=True)
class Example:
    source: str
    command: str
    output: str | None
    """What the page shows the command printing, if it shows it."""


def _page_examples() -> Iterator[Example]:
    for block in all_blocks():
        if block.language != "console":
            continue
        lines = block.source.splitlines()
        for index, line in enumerate(lines):
            command = line.removeprefix("$ ")
            if not command.startswith("session-schedule") and "python3 dev.py run" not in command:
                continue
            output = None
            if line.startswith("$ "):
                shown = []
                for following in lines[index + 1 :]:
                    if following.startswith("$ "):
                        break
                    shown.append(following + "\n")
                output = "".join(shown)
            yield Example(block.page, command, output)


def _help_examples() -> Iterator[Example]:
    text = HELP.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if line.startswith("example: "):
            command = line.removeprefix("example: ")
        elif line.startswith("  session-schedule "):
            command = re.split(r"\s{2,}", line.strip())[0]  # the description follows
        else:
            continue
        substitution = re.fullmatch(r"\w+=\$\((.*)\)", command)
        yield Example("help", substitution.group(1) if substitution else command, None)


def _once(examples: Iterator[Example]) -> list[Example]:
    """Each command and shown output once, from the first page that shows it."""
    found: dict[tuple[str, str | None], Example] = {}
    for example in examples:
        found.setdefault((example.command, example.output), example)
    return list(found.values())


EXAMPLES = _once(itertools.chain(_page_examples(), _help_examples()))


def test_the_pages_and_the_help_have_examples() -> None:
    sources = {example.source for example in EXAMPLES}
    assert {"README.md", "help"} <= sources
    assert any(source.startswith("docs/") for source in sources)
    assert len(EXAMPLES) > 20


def _argv(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    if words[0] == "session-schedule":
        return [str(PROGRAM), *words[1:]]
    assert words[:3] == ["python3", "dev.py", "run"], command
    return [sys.executable, str(ROOT / "dev.py"), *words[2:]]


def _skip_reason(command: str) -> str | None:
    words = shlex.split(command, comments=True)
    if "--model" in words or any(word.startswith("OPENAI_API_KEY=") for word in words):
        return "talks to a model"
    if "db" in words:
        return "needs a PostgreSQL server (tests/cli/test_db.py runs these commands on one)"
    if "--dsn" in words or "--postgres" in words:
        return "needs a PostgreSQL server (tests/host/test_failover.py runs hosts on one)"
    if "--host" in words and "0.0.0.0" in words:  # noqa: S104 - recognising it, not binding
        return "listens on every interface of the machine"
    return None


@pytest.fixture
def data(tmp_path: Path) -> Path:
    directory = tmp_path / "data"
    make_session(directory, HELP_SESSION)
    return directory


def _environment(data: Path) -> dict[str, str]:
    environment = {**os.environ, "SESSION_SCHEDULE_DATA_DIR": str(data)}
    for variable in MODEL_VARIABLES:
        environment.pop(variable, None)
    return environment


def _port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _fetch(address: str) -> int:
    """The status of ``address`` as a browser sees it (the token it carries is traded for a
    cookie); uvicorn logs its start-up a moment before it listens."""
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            with browser.open(address, timeout=TIMEOUT) as page:
                return int(page.status)
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _serve(argv: list[str], environment: dict[str, str]) -> None:
    """Start a server example, fetch its page, stop it as Ctrl-C in a terminal does."""
    if "--port" not in argv and _port_in_use(8765):
        pytest.skip("port 8765, the default, is in use on this machine")
    with subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**environment, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    ) as process:
        assert process.stdout is not None
        address = None
        seen: list[str] = []
        try:
            for line in process.stdout:
                seen.append(line)
                found = _ADDRESS.search(line)
                address = found.group(1) if found else address
                if address is not None and "Application startup complete." in line:
                    assert _fetch(address) == 200
                    break
            else:
                pytest.fail(f"the server did not start: {''.join(seen)}")
        finally:
            os.killpg(process.pid, signal.SIGINT)
            rest, _ = process.communicate(timeout=TIMEOUT)
    output = "".join(seen) + rest
    assert process.returncode == 130, output
    assert "Traceback" not in output
    assert "Application shutdown complete." in output


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{e.source}: {e.command}" for e in EXAMPLES])
def test_an_example_runs_as_written(example: Example, data: Path) -> None:
    reason = _skip_reason(example.command)
    if reason is not None:
        pytest.skip(reason)
    argv = _argv(example.command)
    environment = _environment(data)
    if "serve" in argv:
        _serve(argv, environment)
        return
    result = subprocess.run(
        argv,
        cwd=ROOT,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    # resolve exits 1 when it shows that an input is rejected, as its examples do on purpose.
    expected = {0, 1} if argv[1:2] == ["resolve"] else {0}
    assert result.returncode in expected, result.stderr
    assert "Traceback" not in result.stderr
    if example.output is not None:
        assert result.stdout == example.output
