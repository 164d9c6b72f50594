"""Loading the examples, and finding the documentation's copy of their code."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.markdown import blocks

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FOLLOW_UP = "[session-schedule] Reminder follow-up"


def load(name: str) -> ModuleType:
    """The example ``examples/<name>.py`` as a module (its ``main`` not run)."""
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page_snippet(page: str, example: str) -> str:
    """The ``python`` block of the documentation page ``page`` that includes the example
    ``examples/<example>.py``, its includes expanded."""
    path = f"examples/{example}.py"
    found = [
        block
        for block in blocks(ROOT / page)
        if block.language == "python" and path in block.includes
    ]
    assert len(found) == 1, f"{page} includes {path} {len(found)} times"
    return found[0].source
