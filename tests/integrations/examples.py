"""Loading the examples, and finding the README's copy of their code."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

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


def readme_snippet(heading: str) -> str:
    """The first ``python`` block under the README heading ``heading``."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split(f"\n{heading}\n", 1)[1]
    section = re.split(r"\n#{2,3} ", section, maxsplit=1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, f"no python block under {heading!r}"
    return found.group(1)
