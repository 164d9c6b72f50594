"""Plain output is laid out as rich lays out the same table, without importing rich: the two
agree on random tables and texts (rich is installed with the ``cli`` extra, so the tests can
ask it)."""

from __future__ import annotations

import io

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


def _plain(renderable: Renderable) -> str:
    buffer = io.StringIO()
    PlainOutput(buffer).print(renderable)
    return buffer.getvalue()


def _rich(renderable: Renderable) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=WIDTH,
        color_system=None,
        force_terminal=False,
        markup=False,
        emoji=False,
        highlight=False,
    )
    console.print(renderable.to_rich())
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
    table.add_row(Text("x" * 100), Text("short words here " + "y" * 30))
    lines = _plain(table).splitlines()
    assert lines == [
        "first" + " " * 95 + "   last",
        "─" * 120,
        "x" * 100 + "   short words here",
        " " * 103 + "y" * 17,
        " " * 103 + "y" * 13,
    ]


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
