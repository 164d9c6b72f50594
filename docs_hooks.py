"""MkDocs hooks: the reference pages that are generated from the code at every build.

A page asks for a generated part with a line of its own, ``<!-- generated: NAME -->``; the hook
replaces it with markdown made from the code as it is now, so the reference cannot go stale:

- ``cli``: every command's ``--help``, from the program's argparse parsers;
- ``tools``: the three tools' descriptions and JSON schemas from the tool catalog, the error
  result, and the MCP server's ``schedule_followups_take``;
- ``catalog``: the persistence catalog (every durable event type, its versions and schema);
- ``error-codes``: the stable error codes, in the order the code declares them.

The docstrings use Sphinx roles (``:class:`TurnQueue```), which the Python reference renders as
written; ``on_page_content`` shows each as the code of the name it refers to.

An unknown name fails the build. ``mkdocs build --strict`` runs in ``python3 dev.py test``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator

_MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", flags=re.MULTILINE)
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc):<code>~?(?:[\w.]+\.)?([\w]+)</code>")
"""A Sphinx cross-reference role in a docstring, as the Python handler renders it."""
HELP_COLUMNS = "100"


@contextlib.contextmanager
def _columns(columns: str) -> Iterator[None]:
    """argparse wraps help to ``$COLUMNS``: make it the same on every machine."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = columns
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def _json(value: object) -> str:
    return "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```\n"


def _text(value: str) -> str:
    return "```text\n" + value.rstrip("\n") + "\n```\n"


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command under ``parser``, nested ones (``db init``) after their parent, by name."""
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name in sorted(action.choices):
                child = action.choices[name]
                found.append((name, child))
                found.extend((f"{name} {nested}", grand) for nested, grand in _subcommands(child))
    return found


def cli_reference() -> str:
    from session_schedule.cli.main import build_parser, register_all  # noqa: PLC0415

    with _columns(HELP_COLUMNS):
        parser = build_parser()
        register_all(parser)  # the program registers a command's arguments only when it runs it
        parts = ["## session-schedule\n\n", _text(parser.format_help())]
        for name, child in _subcommands(parser):
            parts += [f"\n## {name}\n\n", _text(child.format_help())]
    return "".join(parts)


def tools_reference() -> str:
    from session_schedule.mcp.server import take_tool  # noqa: PLC0415
    from session_schedule.tools.catalog import ERROR_SCHEMA, tool_definitions  # noqa: PLC0415

    parts: list[str] = []
    for definition in tool_definitions():
        parts += [
            f"## {definition.name}\n\n",
            "What the model reads:\n\n",
            _text(definition.description),
            "\nArguments (`input_schema`):\n\n",
            _json(definition.input_schema),
            "\nResult on success (`output_schema`):\n\n",
            _json(definition.output_schema),
            "\n",
        ]
    parts += ["## The error result\n\n", "Every tool's failure:\n\n", _json(ERROR_SCHEMA), "\n"]
    take = take_tool()
    parts += [
        f"## {take['name']} (MCP only)\n\n",
        "What the model reads:\n\n",
        _text(str(take["description"])),
        "\nThe whole MCP tool definition:\n\n",
        _json(take),
    ]
    return "".join(parts)


def catalog_reference() -> str:
    from session_schedule.session.entry_types import complete_catalog  # noqa: PLC0415

    parts: list[str] = []
    for entry in complete_catalog():
        versions = ", ".join(str(version) for version in entry.versions)
        parts += [
            f"### `{entry.name}`\n\n",
            f"Versions {versions}; declared by `{entry.declaration}`.\n\n",
            _json(entry.schema),
            "\n",
        ]
    return "".join(parts)


def error_codes_reference() -> str:
    from session_schedule.core.errors import ERROR_CODES  # noqa: PLC0415

    return "".join(f"- `{code}`\n" for code in ERROR_CODES)


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "tools": tools_reference,
    "catalog": catalog_reference,
    "error-codes": error_codes_reference,
}


def expand(markdown: str) -> str:
    """``markdown`` with every ``<!-- generated: NAME -->`` line replaced by its part."""

    def generate(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in GENERATORS:
            raise ValueError(f"no generator named {name!r}; known: {sorted(GENERATORS)}")
        return GENERATORS[name]().rstrip("\n")

    return _MARKER.sub(generate, markdown)


def plain_roles(html: str) -> str:
    """``html`` with each docstring role (``:class:`~a.b.C```, rendered as ``:class:<code>…``)
    shown as the code of its last name: ``<code>C</code>``."""
    return _ROLE.sub(r"<code>\1</code>", html)


def on_page_markdown(markdown: str, **_: object) -> str:
    """MkDocs calls this with each page's markdown before rendering it."""
    return expand(markdown)


def on_page_content(html: str, **_: object) -> str:
    """MkDocs calls this with each page's HTML once rendered (the Python API reference)."""
    return plain_roles(html)
