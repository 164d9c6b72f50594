"""The complete persistence catalog: every durable type any module registers, however the program
is entered.

A type registers itself when its module is imported, so a process that has not imported a module
does not know its type. Each check runs in a fresh interpreter: in this one, the suite has
imported everything already.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Final

SRC: Final = Path(__file__).resolve().parents[2] / "src"
REGISTRATION: Final = re.compile(r"\bCATALOG\.register\(")
"""A call of the persistence catalog's ``register``: the line that registers a durable type."""
PROGRAM: Final = """\
import sys
from session_schedule.cli.main import main
sys.exit(main(["catalog"]))
"""
IMPORTING: Final = """\
import importlib, json, sys
for module in sys.argv[1:]:
    importlib.import_module(module)
from session_schedule.core.catalog import CATALOG
print(json.dumps([entry.name for entry in CATALOG]))
"""


def _fresh(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout


def _registering_modules() -> set[str]:
    """Every module under ``src`` that registers a durable type, found by its source."""
    found = set()
    for path in SRC.rglob("*.py"):
        if REGISTRATION.search(path.read_text(encoding="utf-8")):
            found.add(".".join(path.relative_to(SRC).with_suffix("").parts))
    return found


def test_the_catalog_command_lists_every_type_any_module_registers() -> None:
    modules = _registering_modules()
    assert "session_schedule.session.quotas" in modules
    registered = json.loads(_fresh(IMPORTING, *sorted(modules)))
    listed = json.loads(_fresh(PROGRAM))
    assert [entry["name"] for entry in listed] == registered
    assert {entry["module"] for entry in listed} == modules


def test_the_generated_reference_lists_every_type_in_a_fresh_process() -> None:
    registered = json.loads(_fresh(IMPORTING, *sorted(_registering_modules())))
    reference = _fresh(
        f"import sys; sys.path.insert(0, {str(SRC.parent)!r}); import docs_hooks; "
        "print(docs_hooks.catalog_reference())"
    )
    assert re.findall(r"^### `([^`]+)`$", reference, flags=re.MULTILINE) == registered
