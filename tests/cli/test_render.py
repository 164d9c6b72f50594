"""Plain output is laid out as rich lays out the same table, without importing rich: the two
agree on random tables and texts (rich is installed with the ``cli`` extra, so the tests can
ask it)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text as RichText

from session_schedule.cli.render import WIDTH, Group, PlainOutput, Renderable, Table, Text

# Spaces, line breaks, ASCII and a few wide and combining characters; long words too. Tabs are
# left out: rich measures a tab in a table cell as zero columns and then cuts the cell short,
# while plain output expands it to the next multiple of eight (see the test below).
WORD = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789[]/→·—é東京"),
    min_size=1,
    max_size=40,
)
TEXT = st.lists(st.one_of(WORD, st.sampled_from([" ", "  ", "\n", " \n"])), max_size=30).map(
    "".join
)
CELL = st.one_of(
    TEXT.map(Text),
    st.lists(TEXT.map(Text), min_size=1, max_size=3).map(lambda texts: Group(*texts)),
)


SHORT = st.text(alphabet=st.sampled_from("abcxyz0189:-→·東"), min_size=0, max_size=24)


@st.composite
def tables(draw: st.DrawFn) -> Table:
    """Tables shaped as the operator's: short columns that never wrap, then one of free text
    (so the short ones always leave it room)."""
    headers = [*draw(st.lists(SHORT.filter(bool), min_size=1, max_size=4)), draw(WORD)]
    table = Table(*headers)
    for _ in range(draw(st.integers(0, 6))):
        short = [Text(draw(SHORT)) for _ in headers[:-1]]
        table.add_row(*short, draw(CELL))
    return table


def _plain(renderable: Renderable, width: int = WIDTH) -> str:
    buffer = io.StringIO()
    PlainOutput(buffer, width=width).print(renderable)
    return buffer.getvalue()


def _rich(renderable: Renderable, width: int = WIDTH) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system=None,
        force_terminal=False,
        markup=False,
        emoji=False,
        highlight=False,
    )
    console.print(
        renderable.to_rich(width) if isinstance(renderable, Table) else renderable.to_rich()
    )
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


@settings(max_examples=150, deadline=None)
@given(tables())
def test_a_table_is_laid_out_as_rich_lays_it_out(table: Table) -> None:
    assert _plain(table) == _rich(table)


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_text_wraps_as_rich_wraps_it(text: str) -> None:
    assert _plain(Text(text)) == _rich(Text(text))


def test_a_narrow_last_column_wraps_at_words_and_folds_long_words() -> None:
    table = Table("first", "last")
    table.add_row(Text("x" * 95), Text("short words here " + "y" * 30))
    lines = _plain(table).splitlines()
    assert lines == [
        "first" + " " * 90 + "   last",
        "─" * 120,
        "x" * 95 + "   short words here",
        " " * 98 + "y" * 22,
        " " * 98 + "y" * 8,
    ]


@st.composite
def wrapping_tables(draw: st.DrawFn) -> tuple[Table, int]:
    """Tables with a column that wraps before the free text, and a width to show them in."""
    headers = [draw(SHORT.filter(bool)), "rule", draw(SHORT.filter(bool)), "prompt"]
    table = Table(*headers, wrapping=("rule",))
    for _ in range(draw(st.integers(1, 4))):
        table.add_row(Text(draw(SHORT)), Text(draw(TEXT)), Text(draw(SHORT)), draw(CELL))
    return table, draw(st.integers(30, 140))


@settings(max_examples=150, deadline=None)
@given(wrapping_tables())
def test_a_table_with_a_wrapping_column_is_laid_out_as_rich_lays_it_out(
    shown: tuple[Table, int],
) -> None:
    table, width = shown
    assert _plain(table, width) == _rich(table, width)


def reminders() -> Table:
    table = Table("id", "rule", "target (UTC)", "prompt", wrapping=("rule",))
    table.add_row(
        Text("sch_1"),
        Text("daily 09:00 Asia/Tokyo every day"),
        Text("2026-12-01T00:00:00.000Z"),
        Text("water the plants on the balcony"),
    )
    table.add_row(
        Text("sch_2"),
        Text("after 90s"),
        Text("2026-11-30T00:01:30.000Z"),
        Group(Text("stretch"), Text("and breathe")),
    )
    return table


def test_a_wrapping_column_shrinks_before_the_prompt_does() -> None:
    assert _plain(reminders(), 80) == (
        "id      rule          target (UTC)               prompt\n" + "─" * 80 + "\n"
        "sch_1   daily 09:00   2026-12-01T00:00:00.000Z   water the plants on the balcony\n"
        "        Asia/Tokyo\n"
        "        every day\n"
        "sch_2   after 90s     2026-11-30T00:01:30.000Z   stretch\n"
        "                                                 and breathe\n"
    )
    assert _plain(reminders(), 80) == _rich(reminders(), 80)


def test_a_table_too_wide_for_its_columns_is_shown_as_blocks() -> None:
    assert _plain(reminders(), 50) == (
        "sch_1\n"
        "  rule:           daily 09:00 Asia/Tokyo every day\n"
        "  target (UTC):   2026-12-01T00:00:00.000Z\n"
        "  prompt:         water the plants on the balcony\n"
        "\n"
        "sch_2\n"
        "  rule:           after 90s\n"
        "  target (UTC):   2026-11-30T00:01:30.000Z\n"
        "  prompt:         stretch\n"
        "                  and breathe\n"
    )
    assert _plain(reminders(), 50) == _rich(reminders(), 50)


def test_blocks_too_wide_for_a_value_column_are_lines() -> None:
    assert _plain(reminders(), 30) == (
        "sch_1\n"
        "  rule: daily 09:00 Asia/Tokyo\n"
        "every day\n"
        "  target (UTC):\n"
        "2026-12-01T00:00:00.000Z\n"
        "  prompt: water the plants on\n"
        "the balcony\n"
        "\n"
        "sch_2\n"
        "  rule: after 90s\n"
        "  target (UTC):\n"
        "2026-11-30T00:01:30.000Z\n"
        "  prompt: stretch\n"
        "and breathe\n"
    )
    assert _plain(reminders(), 30) == _rich(reminders(), 30)


def test_a_table_without_its_header_shows_only_the_rows() -> None:
    table = Table("key", "value", header=False)
    table.add_row(Text("a"), Text("one"))
    assert _plain(table) == _rich(table) == "a   one\n"


def test_only_columns_before_the_last_can_wrap() -> None:
    with pytest.raises(ValueError, match=r"\['prompt'\] are not columns before the last"):
        Table("id", "prompt", wrapping=("prompt",))


def test_styles_are_kept_apart_from_the_text() -> None:
    text = Text.assemble(("bold", "bold"), " [red]plain[/red] ", Text("dim", style="dim"))
    text.append("!", style="yellow")
    text.stylize("italic")
    assert text.plain == "bold [red]plain[/red] dim!"
    assert _plain(text) == "bold [red]plain[/red] dim!\n"
    rich_text = text.to_rich()
    assert isinstance(rich_text, RichText)
    assert (rich_text.plain, rich_text.style) == (text.plain, "italic")
    assert [(span.start, span.end, str(span.style)) for span in rich_text.spans] == [
        (0, 4, "bold"),
        (22, 25, "dim"),
        (25, 26, "yellow"),
    ]


def test_a_tab_is_expanded_to_the_next_multiple_of_eight() -> None:
    table = Table("a", "b")
    table.add_row(Text("x\ty"), Text("long\tz"))
    assert _plain(table) == "a           b\n" + "─" * 21 + "\nx       y   long    z\n"
    assert _plain(Text("a\tb")) == _rich(Text("a\tb")) == "a       b\n"


def test_a_blank_value_with_a_line_break_is_shown_as_rich_shows_it_in_a_block() -> None:
    table = Table("id", "rule", "when", "prompt", wrapping=("rule",))
    table.add_row(Text("0" * 11), Text(""), Text(""), Text("\n"))
    assert _plain(table, 30) == _rich(table, 30) == "0" * 11 + "\n  rule:\n  when:\n  prompt:\n\n"
