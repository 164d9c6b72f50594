#!/usr/bin/env python3
"""The project's one entry point for workflows.

    python3 dev.py run [ARGS...]   set up, then run the main program (``session-schedule ARGS``)
    python3 dev.py test [--all-pythons] [PYTEST ARGS...]
                                   set up, then lint, type-check and run the whole test suite;
                                   with --all-pythons, the suite runs on every supported Python
                                   the machine has (3.11, 3.12, 3.13: on PATH, or installed
                                   with pyenv), each in its own venv
    python3 dev.py bench NAME      set up, then run ``benchmarks/NAME.py``
    python3 dev.py docs [ARGS...]  set up, then serve the documentation site on
                                   http://127.0.0.1:8000/session-schedule/ (``mkdocs serve
                                   ARGS``), rebuilt as its pages change
    python3 dev.py setup           only create or refresh the virtual environment

Set-up needs nothing but Python 3.11+ and its ``venv`` module: it creates ``.venv`` beside this
file, upgrades pip there (dependency groups need pip 25.1 or newer) and installs the project in
editable mode with every extra (``.[all]``) and its ``dev`` dependency group, so the program and
every test have what they need; the program is then ``.venv/bin/session-schedule``. It is
skipped while ``pyproject.toml`` is unchanged since the last successful set-up. Other Pythons get
``.venv-3.12`` and the like, set up the same way.

``test`` lints, type-checks and builds the documentation site (``mkdocs build --strict``, so a
broken link or a stale reference fails) before it runs the suite, which executes every code
block of the documentation. It also needs a Chromium for the web overlay's browser tests
(Playwright drives the system's, since downloading its own browser is not possible everywhere):
on a Debian-like machine where it runs as root it installs Debian's ``chromium`` package when it
is missing; elsewhere those tests are skipped, and say why.

Ctrl-C stops quietly: the program or the tests get the interrupt, and dev.py exits with their
exit code (130 when they were ended by it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
SUPPORTED_PYTHONS = ("3.11", "3.12", "3.13")
PYTEST_NO_TESTS_COLLECTED = 5
EXIT_INTERRUPTED = 130
CHROMIUM = Path("/usr/bin/chromium")


def _bin(environment: Path) -> Path:
    return environment / ("Scripts" if os.name == "nt" else "bin")


def _run(*argv: str | Path) -> int:
    """Run ``argv`` in the project directory and return its exit code (``128 + N`` when signal
    N ended it). A Ctrl-C reaches it as well (it is in the terminal's foreground process group):
    wait for it to finish on its own; a second Ctrl-C kills it."""
    with subprocess.Popen([str(a) for a in argv], cwd=ROOT) as process:
        interrupted = False
        while True:
            try:
                code = process.wait()
                break
            except KeyboardInterrupt:
                if interrupted:
                    process.kill()
                interrupted = True
    return 128 - code if code < 0 else code


def _check(*argv: str | Path) -> None:
    code = _run(*argv)
    if code != 0:
        sys.exit(code)


def setup(environment: Path = VENV, python: str = sys.executable) -> None:
    """Create or refresh the virtual environment ``environment`` with ``python``."""
    stamp = environment / ".session-schedule-setup"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    interpreter = _bin(environment) / "python"
    if not interpreter.exists():
        print(f"dev.py: creating {environment.name}", file=sys.stderr)
        if python == sys.executable:
            venv.EnvBuilder(with_pip=True, clear=True).create(environment)
        else:
            _check(python, "-m", "venv", "--clear", environment)
    _check(interpreter, "-m", "pip", "install", "--quiet", "--upgrade", "pip>=25.1")
    _check(interpreter, "-m", "pip", "install", "--quiet", "--editable", ".[all]", "--group", "dev")
    stamp.write_text(wanted)


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


def lint() -> None:
    """ruff (lint and format) and mypy --strict, in ``.venv``; exits on the first failure."""
    _check(_bin(VENV) / "ruff", "check", ".")
    _check(_bin(VENV) / "ruff", "format", "--check", ".")
    _check(_bin(VENV) / "mypy")


def _mkdocs_environment() -> None:
    # MkDocs 1.6 prints a banner about its successor on every run; the build's output is ours.
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")


def build_docs() -> None:
    """``mkdocs build --strict`` into a temporary directory; exits when the site has a warning
    (a broken link or anchor, a reference to a name that no longer exists)."""
    _mkdocs_environment()
    with tempfile.TemporaryDirectory(prefix="session-schedule-site-") as site:
        _check(_bin(VENV) / "mkdocs", "build", "--strict", "--quiet", "--site-dir", site)


def pytest(environment: Path, pytest_args: list[str]) -> int:
    code = _run(
        _bin(environment) / "python", "-m", "pytest", "--cov", "--cov-report=term", *pytest_args
    )
    if code == PYTEST_NO_TESTS_COLLECTED:
        print("dev.py: pytest collected no tests; that is a failure", file=sys.stderr)
        return 1
    return code


def _works(executable: str) -> bool:
    return (
        subprocess.call(
            [executable, "-c", "import venv"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        == 0
    )


def find_python(version: str) -> str | None:
    """An interpreter of Python ``version`` ("3.12"): ``python3.12`` on PATH, else pyenv's."""
    candidates = [found] if (found := shutil.which(f"python{version}")) else []
    pyenv = shutil.which("pyenv")
    if pyenv is not None:
        # A pyenv shim runs only the versions pyenv has selected: ask pyenv for the others.
        listed = subprocess.run(
            [pyenv, "versions", "--bare"], capture_output=True, text=True, check=False
        ).stdout.split()
        patches = [v for v in listed if v.startswith(f"{version}.") and v.split(".")[2].isdigit()]
        for installed in sorted(patches, key=lambda v: int(v.split(".")[2]), reverse=True):
            prefix = subprocess.run(
                [pyenv, "prefix", installed], capture_output=True, text=True, check=False
            ).stdout.strip()
            if prefix:
                candidates.append(str(Path(prefix) / "bin" / f"python{version}"))
    return next((candidate for candidate in candidates if _works(candidate)), None)


def other_pythons() -> list[tuple[str, str]]:
    """(version, executable) of each supported Python here other than the one running."""
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    found: list[tuple[str, str]] = []
    for version in SUPPORTED_PYTHONS:
        if version == running:
            continue
        executable = find_python(version)
        if executable is None:
            print(f"dev.py: Python {version} is not available here; skipping it", file=sys.stderr)
            continue
        found.append((version, executable))
    return found


def test(pytest_args: list[str]) -> int:
    all_pythons = "--all-pythons" in pytest_args
    pytest_args = [argument for argument in pytest_args if argument != "--all-pythons"]
    ensure_chromium()
    lint()
    build_docs()
    if not all_pythons:
        return pytest(VENV, pytest_args)
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    print(f"dev.py: tests on Python {running} (.venv)", file=sys.stderr)
    codes = {running: pytest(VENV, pytest_args)}
    for version, executable in other_pythons():
        environment = ROOT / f".venv-{version}"
        setup(environment, executable)
        print(f"dev.py: tests on Python {version} ({environment.name})", file=sys.stderr)
        codes[version] = pytest(environment, pytest_args)
    summary = ", ".join(
        f"{version} {'passed' if code == 0 else f'failed ({code})'}"
        for version, code in codes.items()
    )
    print(f"dev.py: Python {summary}", file=sys.stderr)
    return next((code for code in codes.values() if code != 0), 0)


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if not argv or argv[0] not in {"run", "test", "bench", "docs", "setup"}:
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    setup()
    if command == "setup":
        return 0
    if command == "run":
        return _run(_bin(VENV) / "session-schedule", *rest)
    if command == "docs":
        _mkdocs_environment()
        return _run(_bin(VENV) / "mkdocs", "serve", *rest)
    if command == "bench":
        if not rest:
            names = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))
            print("dev.py bench NAME, one of: " + ", ".join(names), file=sys.stderr)
            return 2
        return _run(_bin(VENV) / "python", ROOT / "benchmarks" / f"{rest[0]}.py", *rest[1:])
    return test(rest)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        # Interrupted outside a child (during set-up, for instance): no traceback.
        print("dev.py: interrupted", file=sys.stderr)
        sys.exit(128 + signal.SIGINT)
