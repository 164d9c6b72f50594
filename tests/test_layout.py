"""Imports flow one way: cli → mcp → web → host → harness → integrations → tools → runtime → session
→ extras → core; nothing imports testing, only the mcp layer imports the MCP SDK, nothing in the
library imports ``integrations``, and each framework is imported only by its own adapter.
``extras`` is one module (the gate of the optional dependencies)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import session_schedule

PACKAGE = Path(session_schedule.__file__).parent
ORDER = [
    "core",
    "extras",
    "session",
    "runtime",
    "tools",
    "integrations",
    "harness",
    "host",
    "web",
    "mcp",
    "cli",
]
FRAMEWORKS = {
    "pydantic_ai": "pydantic_ai",
    "agents": "openai_agents",
    "langchain_core": "langchain",
    "langgraph": "langchain",
    "anthropic": "anthropic",
}
"""Each framework's top-level module, and the one adapter that may import it."""


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
    if layer != "integrations":
        allowed.discard("integrations")  # the adapters are a leaf: the library never uses them
    module = PACKAGE / f"{layer}.py"
    paths = [module] if module.exists() else sorted((PACKAGE / layer).rglob("*.py"))
    for path in paths:  # a layer not written yet has none
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


def test_each_framework_is_imported_only_by_its_adapter() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _imports(path):
            adapter = FRAMEWORKS.get(name.split(".")[0])
            if adapter is not None:
                assert path == PACKAGE / "integrations" / f"{adapter}.py", (
                    f"{path.relative_to(PACKAGE)} imports {name}"
                )
