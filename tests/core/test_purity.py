"""The core stays pure: the boundary is enforced here, so it cannot erode silently."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import session_schedule.core

CORE = Path(session_schedule.core.__file__).parent
FORBIDDEN_MODULES = {
    "asyncio",
    "time",
    "os",
    "sqlite3",
    "socket",
    "random",
    "secrets",
    "uuid",
    "subprocess",
    "threading",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
}
FORBIDDEN_CALLS = {"now", "today", "utcnow", "time", "monotonic", "perf_counter"}
SHELL_PACKAGES = ("session_schedule.session", "session_schedule.runtime", "session_schedule.tools")


def core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


@pytest.mark.parametrize("path", core_modules(), ids=lambda path: path.name)
def test_core_module_imports_no_clock_io_or_event_loop(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN_MODULES, f"{path.name} imports {name}"
            assert not name.startswith(SHELL_PACKAGES), f"{path.name} imports the shell: {name}"
            assert not name.startswith("session_schedule.testing"), f"{path.name} imports {name}"


@pytest.mark.parametrize("path", core_modules(), ids=lambda path: path.name)
def test_core_module_never_reads_a_clock(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            assert node.attr not in FORBIDDEN_CALLS, f"{path.name}:{node.lineno} uses .{node.attr}"


def test_the_check_sees_every_core_module() -> None:
    names = {path.stem for path in core_modules()}
    assert {"instants", "changes", "fold", "rules", "due", "framing", "catalog"} <= names
