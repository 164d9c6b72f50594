"""How fast the ``session-schedule`` program starts, against ``python -c pass`` in the same run.

    python3 dev.py bench cli_startup [--runs N] [--no-bytecode-cache] [--src DIR]

Each round runs every command once, in turn (so all of them see the same machine), as a fresh
process of the installed console script next to this interpreter; the figures are the medians
over N rounds of the wall time and of the CPU time (user + system) of each process, and their
ratio to those of ``python -c pass``. The inspection commands read a session the offline chat
creates first, with two reminders in it.

Python's bytecode cache is on, as after any install (pip compiles what it installs; an editable
install writes the cache on first use): the runs write it to a temporary directory
(``PYTHONPYCACHEPREFIX``) after one warm-up round. ``--no-bytecode-cache`` measures with
``PYTHONDONTWRITEBYTECODE=1`` and a copy of the package without its cache, so each run compiles
the package (but not the standard library or the dependencies, which their installers compiled).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import session_schedule

PROGRAM = Path(sys.executable).parent / "session-schedule"


def commands(session: str) -> dict[str, list[str]]:
    python = sys.executable
    return {
        "python -c pass (baseline)": [python, "-c", "pass"],
        "python -c 'import session_schedule'": [python, "-c", "import session_schedule"],
        "session-schedule --help": [str(PROGRAM), "--help"],
        "session-schedule --version": [str(PROGRAM), "--version"],
        "session-schedule list SESSION": [str(PROGRAM), "list", session],
        "session-schedule list SESSION --json": [str(PROGRAM), "list", session, "--json"],
        "session-schedule show SESSION": [str(PROGRAM), "show", session],
        "session-schedule timeline SESSION": [str(PROGRAM), "timeline", session],
        "session-schedule check SESSION": [str(PROGRAM), "check", session],
        "session-schedule resolve AT": [str(PROGRAM), "resolve", "2026-12-01 09:00 Asia/Tokyo"],
    }


def run_once(argv: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``argv``; raises if it fails."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(  # noqa: S603 - this interpreter and program, our arguments
            argv, env=environment, stdout=subprocess.DEVNULL, stderr=errors
        )
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"{argv} failed: {errors.read().decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def make_session(environment: dict[str, str]) -> str:
    """A new session with two reminders, created by the offline chat; its id."""
    subprocess.run(  # noqa: S603 - the program beside this interpreter
        [str(PROGRAM), "chat"],
        input="/create after 1h stretch your legs\n/create every 10m check the build\n",
        text=True,
        env=environment,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    listed = subprocess.run(  # noqa: S603 - the program beside this interpreter
        [str(PROGRAM), "sessions", "--json"],
        text=True,
        env=environment,
        check=True,
        capture_output=True,
    )
    (summary,) = json.loads(listed.stdout)
    return str(summary["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="rounds to take medians over")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="compile the package on every run (PYTHONDONTWRITEBYTECODE=1, no cache)",
    )
    parser.add_argument(
        "--src",
        type=Path,
        metavar="DIR",
        help="measure the session_schedule package under DIR instead (another checkout's src/, "
        "for a before-and-after comparison)",
    )
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        environment = {**os.environ, "SESSION_SCHEDULE_DATA_DIR": str(Path(scratch) / "data")}
        for variable in ("SESSION_SCHEDULE_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
            environment.pop(variable, None)
        if arguments.src is not None:
            environment["PYTHONPATH"] = str(arguments.src.resolve())
        if arguments.no_bytecode_cache:
            # A copy of the package without its __pycache__, first on the path; the standard
            # library and the dependencies keep the bytecode their installers wrote.
            copy = Path(scratch) / "src"
            original = arguments.src or Path(session_schedule.__file__).parent.parent
            shutil.copytree(
                original / "session_schedule",
                copy / "session_schedule",
                ignore=shutil.ignore_patterns("__pycache__"),
            )
            environment["PYTHONDONTWRITEBYTECODE"] = "1"
            environment["PYTHONPATH"] = str(copy)
            cache = "off for the package: it is compiled on every run"
        else:
            environment.pop("PYTHONDONTWRITEBYTECODE", None)
            environment["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "pycache")
            cache = "on (warmed up)"
        session = make_session(environment)
        table = commands(session)
        for name, argv in list(table.items()):  # warm-up: the bytecode cache, the page cache
            try:
                run_once(argv, environment)
            except RuntimeError:
                if arguments.src is None:
                    raise
                print(f"{name}: fails with the package from {arguments.src}; left out")
                del table[name]
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in table}
        for round_number in range(arguments.runs):
            names = list(table)
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(run_once(table[name], environment))
    wall = {name: statistics.median(s[0] for s in runs) for name, runs in samples.items()}
    cpu = {name: statistics.median(s[1] for s in runs) for name, runs in samples.items()}
    base = "python -c pass (baseline)"
    print(
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs; "
        f"medians of {arguments.runs} runs; bytecode cache {cache}"
        + ("" if arguments.src is None else f"; the package from {arguments.src}")
    )
    print(f"{'command':40} {'wall ms':>9} {'ratio':>6} {'CPU ms':>9} {'ratio':>6}")
    for name in table:
        print(
            f"{name:40} {wall[name] * 1000:9.1f} {wall[name] / wall[base]:6.1f} "
            f"{cpu[name] * 1000:9.1f} {cpu[name] / cpu[base]:6.1f}"
        )


if __name__ == "__main__":
    main()
