"""The documentation's pages and their fenced code blocks, as the tests that run them see them.

The pages are ``README.md``, ``CONTRIBUTING.md`` and every ``*.md`` under ``docs/``, found anew on
each run, so a new page is tested without more wiring. A block is a fence of three or more
backticks (or tildes), possibly indented (inside a list item or an admonition), with its
language tag; a line ``--8<-- "path"`` inside a block includes that file of the repository, as
the site's ``pymdownx.snippets`` does when it builds (such a block stands between
``<!-- fmt: off -->`` and ``<!-- fmt: on -->``, so that ``ruff format``, which formats the pages'
python blocks, leaves the line alone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<language>[\w-]*)(?: [^`]*)?$")
"""An opening fence; after the language, attributes such as ``title="…"`` may follow."""
_INCLUDE = re.compile(r'^--8<-- "(?P<path>[^"]+)"$')


@dataclass(frozen=True, slots=True)
class Block:
    page: str
    """The page's path from the repository's root, such as ``docs/guides/chat.md``."""
    line: int
    """The line of the opening fence, from 1."""
    language: str
    source: str
    """The block's text, without the fence's indentation, with its includes."""
    includes: tuple[str, ...]
    """The repository paths the block includes."""
    after_previous: str
    """The page's text between the previous block (or the page's start) and this one."""

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """Every page of the documentation, the README and the contributor's page first."""
    front = [path for path in (ROOT / "README.md", ROOT / "CONTRIBUTING.md") if path.exists()]
    return [*front, *sorted(DOCS.rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    between: list[str] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            between.append(lines[index])
            index += 1
            continue
        indent, fence = opening.group("indent"), opening.group("fence")
        body: list[str] = []
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != f"{indent}{fence}":
            body.append(lines[end])
            end += 1
        if end == len(lines):
            raise ValueError(f"{page}:{index + 1}: a code block is not closed")
        source, includes = _expand("".join(line.removeprefix(indent) + "\n" for line in body))
        found.append(
            Block(
                page=str(page.relative_to(ROOT)),
                line=index + 1,
                language=opening.group("language"),
                source=source,
                includes=includes,
                after_previous="\n".join(between),
            )
        )
        between = []
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def _expand(source: str) -> tuple[str, tuple[str, ...]]:
    included: list[str] = []
    parts: list[str] = []
    for line in source.splitlines(keepends=True):
        found = _INCLUDE.match(line.strip())
        if found is None:
            parts.append(line)
            continue
        included.append(found.group("path"))
        parts.append((ROOT / found.group("path")).read_text())
    return "".join(parts), tuple(included)
