"""``dev.py``'s own command line (its commands are run by CI and by the docs' tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_script", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_is_printed_on_stdout_and_exits_0(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _dev()
    assert dev.main([flag]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (str(dev.__doc__) + "\n", "")


@pytest.mark.parametrize("argv", [[], ["nope"]])
def test_no_or_an_unknown_command_prints_the_usage_on_stderr_and_exits_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _dev()
    assert dev.main(argv) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", str(dev.__doc__) + "\n")
