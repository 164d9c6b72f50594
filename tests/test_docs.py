"""Every code block of the documentation is executed, so a snippet that drifts fails.

- ``python`` blocks run as written, each as a program in a fresh process, in an empty working
  directory with an empty data directory; a ``text`` block right after one (nothing but blank
  lines between) is what it prints, compared exactly. A block that only includes one of the
  ``examples/`` is that example, which ``tests/integrations/test_examples.py`` runs.
- ``console`` blocks: each line that runs the program (``session-schedule …``,
  ``python3 dev.py run …``) is run by ``tests/test_examples.py``, its shown output compared; the
  other lines must be ones this module knows to be right (an install, a ``dev.py`` workflow).
- ``json`` blocks parse, as one document or one per line.
- Any other language, and a ``text`` block that shows no python block's output, fails.

The generated reference (``docs_hooks.py``) is checked here too: it fails loudly on an unknown
part, and covers every tool and every command. So is what the pages state about the code: the
README's and CONTRIBUTING's links and the headings they name, both install tables against
``pyproject.toml``, the picture of the floors against ``tests/test_layout.py``, the settings
tables against the code's defaults, and the performance page against the scripts in
``benchmarks/``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import markdown  # type: ignore[import-untyped]  # Python-Markdown, which MkDocs uses
import pytest

import docs_hooks
from session_schedule.cli.main import COMMANDS
from session_schedule.core.errors import ERROR_CODES
from session_schedule.tools.catalog import TOOL_NAMES
from tests.integrations.test_examples import EXAMPLE_PAGES
from tests.markdown import ROOT, Block, all_blocks, pages

TIMEOUT = 120
LANGUAGES = {"python", "console", "json", "text"}
MODEL_VARIABLES = ("SESSION_SCHEDULE_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY")
PG_VARIABLE = "SESSION_SCHEDULE_PG_DSN"
KNOWN_COMMANDS = {
    # Installing from the package index, or from a clone (`pip install '.[cli]'`): what the
    # install tables say each extra brings is checked below against pyproject.toml.
    "pip install": "an install from the package index or a clone",
    "pipx install": "an install from the package index",
    "uv tool install": "an install from the package index",
    "export ": "sets a variable for the lines after it",
    "python3 dev.py test": "the test suite itself",
    "python3 dev.py bench": "a benchmark (benchmarks/)",
    "python3 dev.py docs": "serves this site",
    "python3 dev.py setup": "the set-up every dev.py command does first",
    ".venv/bin/python -m pytest": "the test suite itself, one file",
}

BLOCKS = all_blocks()


def _following(block: Block) -> Block | None:
    """The block right after ``block`` on its page, if only blank lines part them."""
    index = BLOCKS.index(block)
    if index + 1 == len(BLOCKS):
        return None
    after = BLOCKS[index + 1]
    if after.page != block.page or after.after_previous.strip():
        return None
    return after


def _preceding(block: Block) -> Block | None:
    index = BLOCKS.index(block)
    if index == 0 or block.after_previous.strip():
        return None
    before = BLOCKS[index - 1]
    return before if before.page == block.page else None


def _is_example(block: Block) -> bool:
    return any(path.startswith("examples/") for path in block.includes)


PYTHON = [block for block in BLOCKS if block.language == "python" and not _is_example(block)]


def test_every_page_is_found_and_the_snippets_are_many() -> None:
    names = {str(page.relative_to(ROOT)) for page in pages()}
    assert {"README.md", "docs/index.md", "docs/reference/tools.md"} <= names
    assert len(PYTHON) >= 10


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_every_block_is_of_a_language_the_suite_runs(block: Block) -> None:
    assert block.language in LANGUAGES, (
        f"{block.name}: a block of {block.language or 'no'} language"
    )
    if block.language == "text":
        before = _preceding(block)
        assert before is not None, (
            f"{block.name}: a text block must follow the block it is the output of"
        )
        assert before.language == "python", f"{block.name}: a text block must follow a python block"


@pytest.mark.parametrize("block", PYTHON, ids=[block.name for block in PYTHON])
def test_a_python_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    environment = {**os.environ, "SESSION_SCHEDULE_DATA_DIR": str(tmp_path / "data")}
    for variable in MODEL_VARIABLES:
        environment.pop(variable, None)
    if PG_VARIABLE in block.source:
        from tests.postgres import server_dsn  # noqa: PLC0415 - psycopg only where it is used

        environment[PG_VARIABLE] = server_dsn()
    script = tmp_path / "snippet.py"
    script.write_text(block.source)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), f"{block.name}:\n{done.stderr}"
    output = _following(block)
    if output is not None and output.language == "text":
        assert done.stdout == output.source, f"{block.name}: the text block below differs"


EXAMPLES = [block for block in BLOCKS if _is_example(block)]


@pytest.mark.parametrize("block", EXAMPLES, ids=[block.name for block in EXAMPLES])
def test_an_example_block_is_a_whole_example_that_the_suite_runs(block: Block) -> None:
    (path,) = block.includes
    assert block.source == (ROOT / path).read_text()
    assert EXAMPLE_PAGES[Path(path).stem] == block.page


def _commands(block: Block) -> list[str]:
    lines = block.source.splitlines()
    if any(line.startswith("$ ") for line in lines):
        return [line.removeprefix("$ ") for line in lines if line.startswith("$ ")]
    return [line for line in lines if line.strip()]


CONSOLE = [
    (block, command)
    for block in BLOCKS
    if block.language == "console"
    for command in _commands(block)
]


@pytest.mark.parametrize(
    ("block", "command"), CONSOLE, ids=[f"{block.name}: {command}" for block, command in CONSOLE]
)
def test_a_console_line_is_run_or_known(block: Block, command: str) -> None:
    words = shlex.split(command, comments=True)
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        words = words[1:]  # variables set for the command
    runs = words[:1] == ["session-schedule"] or words[:3] == ["python3", "dev.py", "run"]
    known = any(shlex.join(words).startswith(prefix) for prefix in KNOWN_COMMANDS)
    assert runs or known, f"{block.name}: nothing runs or vouches for {command!r}"


JSON = [block for block in BLOCKS if block.language == "json"]


@pytest.mark.parametrize("block", JSON, ids=[block.name for block in JSON])
def test_a_json_block_parses(block: Block) -> None:
    try:
        json.loads(block.source)
    except json.JSONDecodeError:
        for line in block.source.splitlines():
            json.loads(line)


# -- the generated reference ---------------------------------------------------------------


def test_the_generated_reference_covers_every_tool_command_and_code() -> None:
    tools = docs_hooks.expand("<!-- generated: tools -->")
    for name in (*TOOL_NAMES, "schedule_followups_take"):
        assert f"## {name}" in tools
    cli = docs_hooks.expand("<!-- generated: cli -->")
    for command in COMMANDS:
        assert f"\n## {command.name}\n" in cli
    assert "\n## db init\n" in cli
    codes = docs_hooks.expand("<!-- generated: error-codes -->")
    assert codes == "".join(f"- `{code}`\n" for code in ERROR_CODES).rstrip("\n")
    catalog = docs_hooks.expand("<!-- generated: catalog -->")
    assert "### `schedule/change`" in catalog


def test_an_unknown_generated_part_fails_the_build() -> None:
    with pytest.raises(ValueError, match="no generator named 'nothing'"):
        docs_hooks.expand("text\n<!-- generated: nothing -->\n")


def test_a_page_asks_only_for_parts_that_exist() -> None:
    for page in pages():
        for name in re.findall(r"^<!-- generated: ([a-z-]+) -->$", page.read_text(), re.M):
            assert name in docs_hooks.GENERATORS, f"{page}: {name}"


# -- what the README and the install table say ----------------------------------------------

_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
INSTALL_TABLES = ["README.md", "docs/getting-started.md"]


README_MAX_LINES = 250
"""The README is the front page, not the manual: the docs hold the rest."""


def test_the_readme_is_at_most_250_lines() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move detail into docs/"
    )


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md"])
def test_a_front_page_links_only_to_files_that_exist(page: str) -> None:
    targets = [t for t in _LINK.findall((ROOT / page).read_text()) if "://" not in t]
    assert targets
    for target in targets:
        assert (ROOT / target).exists(), f"{page} links to {target}, which does not exist"


_ANCHORED_LINK = re.compile(r"\]\((docs/[^)#\s]+\.md)#([^)\s]+)\)")
"""A link to a heading of a documentation page: its path and its anchor."""


def _anchors(page: Path) -> set[str]:
    """The ids the site gives the headings of ``page``: Python-Markdown's ``toc`` with the
    extensions of ``mkdocs.yml`` that shape headings, on the page with its generated parts."""
    converter = markdown.Markdown(
        extensions=["admonition", "attr_list", "tables", "toc", "pymdownx.superfences"]
    )
    converter.convert(docs_hooks.expand(page.read_text()))
    found: set[str] = set()
    pending = list(converter.toc_tokens)
    while pending:
        token = pending.pop()
        found.add(token["id"])
        pending.extend(token["children"])
    return found


def test_a_front_pages_links_into_the_docs_name_headings_that_exist() -> None:
    """``mkdocs build --strict`` checks the anchors of the site's own pages, not those of the
    README and CONTRIBUTING.md: a renamed heading ("The three tools" became "The four tools")
    left a link to it dead."""
    checked = 0
    for page in ("README.md", "CONTRIBUTING.md"):
        for target, anchor in _ANCHORED_LINK.findall((ROOT / page).read_text()):
            assert anchor in _anchors(ROOT / target), (
                f"{page} links to {target}#{anchor}, but that page has no heading {anchor!r}"
            )
            checked += 1
    assert checked


def _requirement_name(requirement: str) -> str:
    """``psycopg[binary,pool]>=3.2,<4`` -> ``psycopg[binary,pool]``."""
    found = re.match(r"[A-Za-z0-9._-]+(\[[a-z,]+\])?", requirement)
    assert found is not None, requirement
    return found.group()


@pytest.mark.parametrize("page", INSTALL_TABLES)
def test_the_install_table_says_what_each_extra_brings(page: str) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    rows = re.findall(r"^\| (.+?) \| (.+?) \| .+ \|$", (ROOT / page).read_text(), re.MULTILINE)
    table = {extra: brings for extra, brings in rows if extra != "extra" and "---" not in extra}
    named = set()
    for extra, brings in table.items():
        packages = re.findall(r"`([^`]+)`", brings)
        if extra == "(none)":
            assert packages == [_requirement_name(r) for r in project["dependencies"]]
            continue
        names = re.findall(r"`([^`]+)`", extra)
        named.update(names)
        for name in names:
            assert name in extras, f"{page}: no extra {name!r} in pyproject.toml"
        if brings == "that framework":
            assert all(extras[name] for name in names)
        elif brings == "every extra above":
            assert names == ["all"]
        elif brings.startswith("nothing"):
            (name,) = names
            assert extras[name] == [], name
        else:
            (name,) = names
            assert packages == [_requirement_name(r) for r in extras[name]], name
    assert named == set(extras), f"{page}: the table and pyproject.toml name other extras"


def test_the_contributors_picture_is_the_layout_the_suite_enforces() -> None:
    from tests.test_layout import ORDER  # noqa: PLC0415 - the one place the floors are listed

    floors = re.findall(r"^\| (\d+) \| `(\w+)` \|", (ROOT / "CONTRIBUTING.md").read_text(), re.M)
    assert [name for _, name in floors] == list(reversed(ORDER))
    assert [int(number) for number, _ in floors] == list(range(len(ORDER), 0, -1))


def test_the_performance_page_has_every_benchmark() -> None:
    page = (ROOT / "docs" / "operations" / "performance.md").read_text()
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        assert f"bench {script.stem}" in page, f"no figures of benchmarks/{script.name}"


def test_a_docstring_role_renders_as_the_code_of_its_name() -> None:
    rendered = (
        "see :class:<code>~session_schedule.runtime.Agent</code> and :meth:<code>start</code>"
    )
    assert docs_hooks.plain_roles(rendered) == "see <code>Agent</code> and <code>start</code>"


def test_the_readme_gives_the_address_dev_py_docs_serves() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    found = re.search(r"^site_url: https://[^/]+(/\S*)$", config, re.M)
    assert found is not None
    address = f"http://127.0.0.1:8000{found.group(1)}"  # mkdocs serve's default address
    for page in ("README.md", "docs/getting-started.md"):
        assert f"`{address}`" in (ROOT / page).read_text(), page
    assert "dev_addr" not in config


def _defaults_table(page: str, header: str) -> dict[str, str]:
    """``{field: default}`` of the table of ``page`` whose first header cell is ``header``."""
    text = (ROOT / page).read_text()
    table = text[text.index(f"| {header} |") :].split("\n\n", 1)[0]
    return dict(re.findall(r"^\| `([\w.]+)` \| ([^|]+?) \|", table, re.MULTILINE))


def _shown(value: object) -> str:
    """A default as the tables write it: ``4,000``, ``30`` (for ``30.0``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int | float) else str(value)


def test_the_settings_tables_give_the_codes_defaults() -> None:
    from session_schedule import Settings  # noqa: PLC0415

    table = _defaults_table("docs/concepts/schedule.md", "`Settings` field")
    settings = Settings()
    nested = ("limits", "turn_retry")
    expected = {
        name: _shown(getattr(settings, name))
        for name in Settings.__struct_fields__
        if name not in nested
    }
    for group in nested:
        value = getattr(settings, group)
        expected |= {
            f"{group}.{name}": _shown(getattr(value, name)) for name in value.__struct_fields__
        }
    assert table == expected


def test_the_host_settings_table_gives_the_codes_defaults() -> None:
    from session_schedule import Settings  # noqa: PLC0415
    from session_schedule.host import HostSettings  # noqa: PLC0415

    page = "docs/guides/fleet.md"
    table = _defaults_table(page, "`HostSettings` field")
    settings = HostSettings()
    expected = {
        name: _shown(getattr(settings, name))
        for name in HostSettings.__struct_fields__
        if name not in {"schedule", "max_open", "max_opening"}
    }
    expected["schedule"] = "`Settings()`"
    assert table == expected
    assert settings.schedule == Settings()
    row = f"| `max_open` / `max_opening` | {settings.max_open:,} / {settings.max_opening:,} |"
    assert row in (ROOT / page).read_text()


# -- what the pages list of the program ------------------------------------------------------

_CODE = re.compile(r"`((?:[^`\\]|\\.)+)`")
"""A code span of a table cell; a ``|`` in it is written ``\\|``."""


def _first_cells(page: str, heading: str) -> list[str]:
    """The code spans of the first column of the table under ``heading`` (a ``|`` unescaped)."""
    text = (ROOT / page).read_text()
    section = text.split(f"{heading}\n", 1)[1].split("\n#", 1)[0]
    cells = re.findall(r"^\| (.+?) \| .+ \|$", section, re.MULTILINE)
    return [span.replace("\\|", "|") for cell in cells for span in _CODE.findall(cell)]


def test_the_chat_commands_table_lists_every_command_help_prints() -> None:
    from session_schedule.cli.slash import HELP  # noqa: PLC0415

    printed = [
        re.split(r"\s{2,}", line.strip())[0] for line in HELP.splitlines() if line.startswith("  /")
    ]
    listed = _first_cells("docs/reference/chat-commands.md", "# Chat commands")
    assert [form for form in printed if form not in listed] == []
    # ... and nothing /help does not know, but for the other names of /help and /quit.
    assert {form.split()[0] for form in listed} == {form.split()[0] for form in printed} | {
        "/?",
        "/exit",
    }


def test_the_chat_guide_lists_every_command_but_those_with_guides_of_their_own() -> None:
    listed = {
        span.split()[0] for span in _first_cells("docs/guides/chat.md", "## Looking into sessions")
    }
    with_guides = {"chat", "serve", "mcp", "host", "db"}
    assert listed == {command.name for command in COMMANDS} - with_guides


def test_getting_started_names_the_operator_commands_that_need_no_extra() -> None:
    from tests.cli.test_installs import WORKING  # noqa: PLC0415

    text = " ".join((ROOT / "docs/getting-started.md").read_text().split())
    found = re.search(
        r"The operator commands \(([^)]*)\), `resolve`, `walkthrough` and the chat", text
    )
    assert found is not None
    named = re.findall(r"`([a-z]+)`", found.group(1))
    working = [argv[0] for argv in WORKING if argv[0] in {c.name for c in COMMANDS}]
    assert named == [name for name in working if name not in {"chat", "resolve", "walkthrough"}]


def test_the_web_overlay_guide_names_the_options_serve_shares_with_the_chat() -> None:
    from session_schedule.cli.main import build_parser, register_all  # noqa: PLC0415

    parser = build_parser()
    register_all(parser)
    commands = dict(docs_hooks._subcommands(parser))
    serve, chat = (
        {option for action in commands[name]._actions for option in action.option_strings}
        for name in ("serve", "chat")
    )
    text = " ".join((ROOT / "docs/guides/web-overlay.md").read_text().split())
    shared = re.search(r"`--model` and `--base-url` choose .*? are the chat's options too", text)
    chats = re.search(r"The chat's (.*?) are not options of `serve`", text)
    assert shared is not None
    assert chats is not None
    assert set(re.findall(r"`(--[a-z-]+)`", shared.group())) == (serve & chat) - {"-h", "--help"}
    assert set(re.findall(r"`(--[a-z-]+)`", chats.group(1))) == chat - serve
