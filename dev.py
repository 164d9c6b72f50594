#!/usr/bin/env python3
"""The project's one entry point for workflows.

    python3 dev.py run [ARGS...]   set up, then run the main program (``session-schedule ARGS``)
    python3 dev.py test [PYTEST ARGS...]
                                   set up, then lint, type-check and run the whole test suite
    python3 dev.py bench NAME      set up, then run ``benchmarks/NAME.py``
    python3 dev.py setup           only create or refresh the virtual environment

Set-up needs nothing but Python 3.11+ and its ``venv`` module: it creates ``.venv`` beside this
file, upgrades pip there (dependency groups need pip 25.1 or newer) and installs the project in
editable mode with its ``dev`` dependency group. It is skipped while ``pyproject.toml`` is
unchanged since the last successful set-up.

``test`` also needs a Chromium for the web overlay's browser tests (Playwright drives the
system's, since downloading its own browser is not possible everywhere): on a Debian-like
machine where it runs as root it installs Debian's ``chromium`` package when it is missing;
elsewhere those tests are skipped, and say why.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".session-schedule-setup"
PYTEST_NO_TESTS_COLLECTED = 5
CHROMIUM = Path("/usr/bin/chromium")


def _run(*argv: str | Path) -> int:
    return subprocess.call([str(a) for a in argv], cwd=ROOT)


def _check(*argv: str | Path) -> None:
    code = _run(*argv)
    if code != 0:
        sys.exit(code)


def setup() -> None:
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not (BIN / "python").exists():
        print("dev.py: creating .venv", file=sys.stderr)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    python = BIN / "python"
    _check(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip>=25.1")
    _check(python, "-m", "pip", "install", "--quiet", "--editable", ".", "--group", "dev")
    STAMP.write_text(wanted)


def ensure_chromium() -> None:
    if CHROMIUM.exists() or shutil.which("apt-get") is None or os.geteuid() != 0:
        return
    print("dev.py: installing Debian's chromium for the browser tests", file=sys.stderr)
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "chromium", "fonts-dejavu-core"],
    ):
        if subprocess.call(command, env=environment, stdout=subprocess.DEVNULL) != 0:
            print(
                "dev.py: could not install chromium; browser tests will be skipped", file=sys.stderr
            )
            return


def test(pytest_args: list[str]) -> int:
    ensure_chromium()
    _check(BIN / "ruff", "check", ".")
    _check(BIN / "ruff", "format", "--check", ".")
    _check(BIN / "mypy")
    code = _run(BIN / "python", "-m", "pytest", "--cov", "--cov-report=term", *pytest_args)
    if code == PYTEST_NO_TESTS_COLLECTED:
        print("dev.py: pytest collected no tests; that is a failure", file=sys.stderr)
        return 1
    return code


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"run", "test", "bench", "setup"}:
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    setup()
    if command == "setup":
        return 0
    if command == "run":
        return _run(BIN / "session-schedule", *rest)
    if command == "bench":
        if not rest:
            names = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))
            print("dev.py bench NAME, one of: " + ", ".join(names), file=sys.stderr)
            return 2
        return _run(BIN / "python", ROOT / "benchmarks" / f"{rest[0]}.py", *rest[1:])
    return test(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
