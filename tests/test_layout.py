"""Imports flow one way: cli → mcp → web → harness → tools → runtime → session → core; nothing
imports testing, and only the mcp layer imports the MCP SDK."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import session_schedule

PACKAGE = Path(session_schedule.__file__).parent
ORDER = ["core", "session", "runtime", "tools", "harness", "web", "mcp", "cli"]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("layer", ORDER)
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    allowed = set(ORDER[: ORDER.index(layer) + 1])
    for path in sorted((PACKAGE / layer).rglob("*.py")):  # a layer not written yet has none
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] != "session_schedule" or len(parts) < 2:
                continue
            assert parts[1] in allowed, f"{path.relative_to(PACKAGE)} imports {name}"


def test_only_the_mcp_layer_imports_the_mcp_sdk() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "mcp":
            continue
        for name in _imports(path):
            assert name.split(".")[0] not in {"mcp", "mcp_types"}, (
                f"{path.relative_to(PACKAGE)} imports {name}"
            )
