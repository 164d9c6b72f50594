"""The core install and its extras: what ``import session_schedule`` loads, what each extra
declares, and the one-line message when an extra is missing."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import session_schedule
from session_schedule.extras import (
    EXTRAS,
    Extra,
    MissingExtraError,
    install_command,
    lazy_exports,
    require,
)

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
OPTIONAL = frozenset(module for modules in EXTRAS.values() for module in modules)
"""The top-level modules of every extra."""
LAZY_PACKAGES = [
    "session_schedule",
    "session_schedule.session",
    "session_schedule.runtime",
    "session_schedule.tools",
    "session_schedule.harness",
]


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement such as ``psycopg[binary,pool]>=3.2``."""
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert found is not None, requirement
    return re.sub(r"[-_.]+", "-", found.group()).lower()


def _loaded_after(code: str) -> set[str]:
    """The top-level names of the modules a fresh interpreter has loaded after ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return set(json.loads(result.stdout.splitlines()[-1]))


# -- the core install ------------------------------------------------------------------------


def test_the_core_install_is_msgspec_and_tzdata() -> None:
    assert [_name(requirement) for requirement in PYPROJECT["project"]["dependencies"]] == [
        "msgspec",
        "tzdata",
    ]


def test_import_session_schedule_loads_no_optional_package_and_nothing_it_does_not_use() -> None:
    loaded = _loaded_after("import session_schedule")
    assert {name.split(".")[0] for name in loaded} & OPTIONAL == set()
    assert sorted(name for name in loaded if name.startswith("session_schedule")) == [
        "session_schedule",
        "session_schedule.extras",
    ]
    assert "asyncio" not in loaded


def test_the_public_api_needs_no_optional_package() -> None:
    names = ", ".join(session_schedule.__all__)
    loaded = _loaded_after(f"from session_schedule import {names}")
    assert {name.split(".")[0] for name in loaded} & OPTIONAL == set()


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_a_lazy_namespace_exports_exactly_what_it_declares(package: str) -> None:
    module = importlib.import_module(package)
    path = Path(str(module.__file__))
    declared = {
        alias.asname or alias.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package)
        for alias in node.names
        if alias.name != "lazy_exports"  # the helper behind ``__getattr__``, not an export
    }
    assert set(module.__all__) == declared
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert name in dir(module)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nothing'"):
        _ = module.nothing


def test_lazy_exports_imports_a_name_on_first_access_and_keeps_it() -> None:
    namespace: dict[str, object] = {"__name__": "pkg", "local": 1}
    load, names = lazy_exports("pkg", namespace, {"dumps": "json", "OrderedDict": "collections"})
    assert names() == ["OrderedDict", "__name__", "dumps", "local"]
    assert load("dumps") is json.dumps
    assert namespace["dumps"] is json.dumps
    assert "OrderedDict" not in namespace
    with pytest.raises(AttributeError) as raised:
        load("loads")
    assert str(raised.value) == "module 'pkg' has no attribute 'loads'"
    assert "loads" not in namespace


def test_lazy_exports_lets_a_missing_extra_raise_its_own_error() -> None:
    script = (
        "import sys\n"
        "sys.modules['psycopg'] = None\n"
        "from session_schedule.extras import lazy_exports\n"
        "load, _ = lazy_exports('pkg', {}, "
        "{'PostgresSessionStore': 'session_schedule.session.postgres'})\n"
        "load('PostgresSessionStore')"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "session_schedule.extras.MissingExtraError: the PostgreSQL store needs the 'postgres' "
        "extra (psycopg is not installed): pip install 'session-schedule[postgres]'"
    )


def test_importing_any_part_of_the_session_package_registers_its_entry_types() -> None:
    package = Path(str(importlib.import_module("session_schedule.session").__file__)).parent
    registering = sorted(
        f"session_schedule.session.{path.stem}"
        for path in package.glob("*.py")
        if "CATALOG.register(" in path.read_text()
    )
    assert "session_schedule.session.message" in registering
    loaded = _loaded_after("from session_schedule.session.jsonl import JsonlSessionStore")
    assert set(registering) <= loaded


def test_the_version_is_the_installed_distributions() -> None:
    assert session_schedule.__version__ == importlib.metadata.version("session-schedule")


# -- the extras ------------------------------------------------------------------------------


def test_every_extra_the_code_names_is_declared_with_the_packages_it_imports() -> None:
    declared = PYPROJECT["project"]["optional-dependencies"]
    distributions = importlib.metadata.packages_distributions()
    for extra, modules in EXTRAS.items():
        names = {_name(requirement) for requirement in declared[extra]}
        # psycopg[pool] brings psycopg-pool: count a requirement's extras as names too.
        names |= {
            f"{_name(requirement)}-{option.strip()}"
            for requirement in declared[extra]
            if "[" in requirement
            for option in requirement[requirement.index("[") + 1 : requirement.index("]")].split(
                ","
            )
        }
        for module in modules:
            providers = {_name(name) for name in distributions.get(module, [])}
            assert providers & names, f"[{extra}]: {module} comes from {providers}, not {names}"


def test_all_is_every_other_extra() -> None:
    declared = PYPROJECT["project"]["optional-dependencies"]
    (requirement,) = declared["all"]
    listed = requirement.removeprefix("session-schedule[").removesuffix("]").split(",")
    assert sorted(listed) == sorted(set(declared) - {"all"})
    assert set(EXTRAS) <= set(listed)


def test_the_sqlite_extra_exists_and_needs_nothing() -> None:
    assert PYPROJECT["project"]["optional-dependencies"]["sqlite"] == []


@pytest.mark.parametrize(("extra", "module"), [("web", "uvicorn"), ("langchain", "langgraph")])
def test_require_names_the_missing_module_and_the_command_to_run(
    extra: Extra, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError) as raised:
        require(extra, purpose="this feature")
    assert str(raised.value) == (
        f"this feature needs the {extra!r} extra ({module} is not installed): "
        f"pip install 'session-schedule[{extra}]'"
    )
    assert raised.value.extra == extra
    assert raised.value.name == module
    assert isinstance(raised.value, ImportError)


def test_require_can_import_only_some_modules_of_an_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prompt_toolkit", None)
    require("cli", purpose="styled output", modules=("rich",))
    with pytest.raises(ValueError, match=r"\['starlette'\] are not modules of the 'cli' extra"):
        require("cli", purpose="styled output", modules=("starlette",))


def test_require_is_silent_when_the_extra_is_installed() -> None:
    require("cli", purpose="the chat")
    assert install_command("postgres") == "pip install 'session-schedule[postgres]'"


def test_importing_the_web_package_without_its_extra_raises_missing_extra() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nsys.modules['starlette'] = None\nimport session_schedule.web",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "session_schedule.extras.MissingExtraError: the web overlay needs the 'web' extra "
        "(starlette is not installed): pip install 'session-schedule[web]'"
    )
