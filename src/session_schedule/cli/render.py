"""What the operator commands print: styled text, groups of lines and tables, written as plain
text — or, on a terminal with the ``cli`` extra installed, styled through rich.

Plain output (a pipe, a file, a test) needs no third-party package, so the inspection commands
start fast and work on the core install. It is laid out as rich lays out the same table — box
``SIMPLE_HEAD`` without edges: columns three spaces apart, a rule of ``─`` under the header, the
last column taking the room that is left and wrapping at word boundaries (a word longer than the
column is folded), every other column as wide as its widest line — so a terminal and a pipe show
the same table. Text is never read as markup: a style is a separate value, and ``[bold]`` in a
prompt stays ``[bold]``.

A table reads at any width. Besides the last column, a table may name columns that wrap (a
reminder's rule): when the table is too wide, they shrink down to their longest word, and the
last column down to :data:`MIN_LAST` columns (or its own width). When even that does not fit, each
row is shown as a block instead — its first cell on a line, then one ``column: value`` line per
other column, the values wrapping under themselves — so an id, a time and a prompt never turn
into a column of single letters, and no column is dropped.

The text inside tables — prompts, turns, tool arguments — is untrusted: :func:`untrusted` shows
it with terminal control characters made visible, and :func:`print_json` writes JSON whose hidden
characters are escapes.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import sys
import unicodedata
from collections.abc import Iterator, Sequence
from typing import IO, TYPE_CHECKING, Final, Protocol, TypeAlias, assert_never, final

import msgspec

from session_schedule.core.calendar import calendar_rule_text
from session_schedule.core.framing import daily_rule_text
from session_schedule.core.records import (
    AfterScheduleRecord,
    AtScheduleRecord,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    ScheduleRecord,
)
from session_schedule.core.visible import frame_escape, reveal
from session_schedule.extras import MissingExtraError, require

if TYPE_CHECKING:
    from rich.console import RenderableType

WIDTH: Final = 120
"""The width of plain output: tables and text wrap to it."""
SEPARATOR: Final = "   "
MIN_LAST: Final = 20
"""The narrowest the last column of a table gets (unless its text is narrower); below that, the
rows are shown as blocks."""
MIN_WRAP: Final = 8
"""The narrowest a wrapping column other than the last gets (unless its text is narrower)."""
_WORD: Final = re.compile(r"\s*\S+\s*")

Part: TypeAlias = "str | tuple[str, str] | Text"
"""A piece of :meth:`Text.assemble`: plain text, ``(text, style)``, or styled text."""


@final
class Text:
    """Text with styled spans; the text is always taken literally."""

    __slots__ = ("_plain", "_spans", "_style")

    def __init__(self, text: str = "", *, style: str = "") -> None:
        self._plain = text
        self._style = style
        self._spans: list[tuple[int, int, str]] = []

    @classmethod
    def assemble(cls, *parts: Part) -> Text:
        """The parts one after the other, each keeping its style."""
        text = cls()
        for part in parts:
            if isinstance(part, Text):
                text.append_text(part)
            elif isinstance(part, tuple):
                text.append(part[0], style=part[1])
            else:
                text.append(part)
        return text

    @property
    def plain(self) -> str:
        return self._plain

    def append(self, text: str, *, style: str = "") -> None:
        start = len(self._plain)
        self._plain += text
        if style and text:
            self._spans.append((start, len(self._plain), style))

    def append_text(self, other: Text) -> None:
        start = len(self._plain)
        self._plain += other._plain
        if other._style and other._plain:
            self._spans.append((start, len(self._plain), other._style))
        self._spans.extend((start + a, start + b, style) for a, b, style in other._spans)

    def stylize(self, style: str) -> None:
        """Give the whole text ``style`` (under the styles of its spans)."""
        self._style = f"{self._style} {style}".strip()

    def to_rich(self) -> RenderableType:
        from rich.text import Text as RichText  # noqa: PLC0415 - only a terminal needs rich

        text = RichText(self._plain, style=self._style)
        for start, end, style in self._spans:
            text.stylize(style, start, end)
        return text


@final
class Group:
    """Renderables shown one under the other."""

    __slots__ = ("items",)

    def __init__(self, *items: Text | Group) -> None:
        self.items: Final = items

    def to_rich(self) -> RenderableType:
        from rich.console import Group as RichGroup  # noqa: PLC0415 - only a terminal needs rich

        return RichGroup(*(item.to_rich() for item in self.items))


Cell: TypeAlias = Text | Group


@final
class Table:
    """Rows under a header; the last column takes the room that is left and wraps, the columns
    named in ``wrapping`` wrap when the table is too wide, the others never wrap."""

    __slots__ = ("columns", "header", "rows", "wrapping")

    def __init__(self, *columns: str, wrapping: tuple[str, ...] = (), header: bool = True) -> None:
        """``header``: whether the column names and the rule under them are shown."""
        unknown = set(wrapping) - set(columns[:-1])
        if unknown:
            raise ValueError(f"{sorted(unknown)} are not columns before the last")
        self.columns: Final = columns
        self.header: Final = header
        self.wrapping: Final = frozenset(columns.index(name) for name in wrapping)
        self.rows: Final[list[tuple[Cell, ...]]] = []

    def add_row(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)}")
        self.rows.append(cells)

    def to_rich(self, width: int = WIDTH) -> RenderableType:
        """The table for a console ``width`` columns wide."""
        from rich import box  # noqa: PLC0415 - only a terminal needs rich
        from rich.console import Group as RichGroup  # noqa: PLC0415
        from rich.table import Table as RichTable  # noqa: PLC0415

        widths = layout(self, width)
        if widths is None:
            return RichGroup(
                *(
                    part.to_rich(width) if isinstance(part, Table) else part.to_rich()
                    for part in stacked(self, width)
                )
            )
        table = RichTable(
            box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, show_header=self.header
        )
        last = len(self.columns) - 1
        for index, column in enumerate(self.columns):
            if index == last:
                table.add_column(column, overflow="fold", ratio=1)
            elif index in self.wrapping:
                table.add_column(column, overflow="fold", width=widths[index])
            else:
                table.add_column(column, no_wrap=True)
        for row in self.rows:
            table.add_row(*(cell.to_rich() for cell in row))
        return table


def layout(table: Table, width: int) -> list[int] | None:
    """The width of each column of ``table`` in ``width`` columns, or ``None`` when it does not
    fit and its rows are shown as blocks (:func:`stacked`)."""
    columns = len(table.columns)
    rows = [tuple(Text(column) for column in table.columns), *table.rows]
    if not table.header:
        rows = rows[1:]
    natural = [
        max(max((cell_width(line) for line in _lines(row[index])), default=0) for row in rows)
        for index in range(columns)
    ]
    last = columns - 1
    wrapping = [last, *sorted(table.wrapping)]
    widths = list(natural)
    widths[last] = min(natural[last], MIN_LAST)
    for index in table.wrapping:
        longest = max(
            (cell_width(word) for row in rows for word in _plain_text(row[index]).split()),
            default=0,
        )
        widths[index] = min(natural[index], max(longest, MIN_WRAP))
    room = width - len(SEPARATOR) * last - sum(widths)
    if room < 0:
        return None
    for index in wrapping:  # the last column first, then the others from the left
        grown = min(room, natural[index] - widths[index])
        widths[index] += grown
        room -= grown
    return widths


def stacked(table: Table, width: int) -> list[Text | Table]:
    """The rows of ``table`` as blocks ``width`` columns wide: the first cell, then a
    ``column: value`` line for every other column (values wrap under themselves), a blank line
    between rows."""
    parts: list[Text | Table] = []
    for number, row in enumerate(table.rows):
        if number:
            parts.append(Text())
        first = row[0]
        parts.append(Text(_plain_text(first)) if isinstance(first, Group) else first)
        fields = Table("column", "value", header=False)
        for column, cell in zip(table.columns[1:], row[1:], strict=True):
            fields.add_row(Text(f"  {column}:", style="dim"), cell)
        widths = layout(fields, width)
        longest = max(
            (cell_width(word) for cell in row[1:] for word in _plain_text(cell).split()),
            default=0,
        )
        # Values wrap, but never inside a word; an all-blank value column (0 wide) is laid out
        # line by line, as a table cannot show its line breaks.
        if widths is not None and widths[-1] >= longest and widths[-1] > 0:
            parts.append(fields)
            continue
        for column, cell in zip(table.columns[1:], row[1:], strict=True):
            line = Text.assemble("  ", (f"{column}:", "dim"), " ")
            line.append_text(cell if isinstance(cell, Text) else Text(_plain_text(cell)))
            parts.append(line)
    return parts


def _plain_text(cell: Cell) -> str:
    return "\n".join(_lines(cell))


Renderable: TypeAlias = Text | Group | Table


class Output(Protocol):
    """Where the operator commands print; see :func:`output`."""

    def print(self, renderable: Renderable) -> None: ...


@final
class PlainOutput:
    """Plain text, ``width`` columns wide, without trailing blanks."""

    def __init__(self, file: IO[str], *, width: int = WIDTH) -> None:
        self._file = file
        self._width = width

    def print(self, renderable: Renderable) -> None:
        lines = render(renderable, self._width)
        self._file.write("".join(line.rstrip() + "\n" for line in lines))


@final
class StyledOutput:
    """Through a rich console, styled for a terminal."""

    def __init__(self, file: IO[str]) -> None:
        from rich.console import Console  # noqa: PLC0415 - only a terminal needs rich

        self._console = Console(file=file, markup=False, emoji=False, highlight=False)

    def print(self, renderable: Renderable) -> None:
        if isinstance(renderable, Table):
            self._console.print(renderable.to_rich(self._console.width))
        else:
            self._console.print(renderable.to_rich())


@contextlib.contextmanager
def output() -> Iterator[Output]:
    """Where to print: styled on a terminal when rich is installed; plain otherwise, written
    once the caller is done."""
    if sys.stdout.isatty():
        try:
            require("cli", purpose="styled output", modules=("rich",))
        except MissingExtraError:
            pass
        else:
            yield StyledOutput(sys.stdout)
            return
    buffer = io.StringIO()
    yield PlainOutput(buffer)
    sys.stdout.write(buffer.getvalue())


# -- plain layout ----------------------------------------------------------------------------


def render(renderable: Renderable, width: int) -> list[str]:
    """The lines of ``renderable`` laid out in ``width`` columns (the last may carry blanks)."""
    if isinstance(renderable, Table):
        return _table(renderable, width)
    return _wrap(renderable, width)


def cell_width(text: str) -> int:
    """How many terminal columns ``text`` takes: two for wide East Asian characters, none for
    combining marks."""
    if text.isascii():
        return len(text)
    return sum(_char_width(char) for char in text)


def _char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in {"W", "F"} else 1


def _lines(cell: Cell) -> list[str]:
    if isinstance(cell, Group):
        return [line for item in cell.items for line in _lines(item)]
    return [line.expandtabs(8) for line in cell.plain.split("\n")]


def _wrap(cell: Cell, width: int) -> list[str]:
    wrapped: list[str] = []
    for line in _lines(cell):
        wrapped.extend(_wrap_line(line, width))
    return wrapped


def _wrap_line(line: str, width: int) -> list[str]:
    """``line`` broken at word boundaries into lines of at most ``width`` columns; a word
    longer than that is folded."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(line):
        start, word = match.start(), match.group()
        length = cell_width(word.rstrip())
        if width - offset >= length:
            offset += cell_width(word)
        elif length > width:
            chunks = _chop(word, width)
            for index, chunk in enumerate(chunks):
                if start:
                    breaks.append(start)
                if index == len(chunks) - 1:
                    offset = cell_width(chunk)
                else:
                    start += len(chunk)
        elif offset and start:
            breaks.append(start)
            offset = cell_width(word)
    bounds = [0, *breaks, len(line)]
    return [_fit(line[begin:end].rstrip(), width) for begin, end in itertools.pairwise(bounds)] or [
        ""
    ]


def _chop(word: str, width: int) -> list[str]:
    chunks: list[str] = []
    begin = size = 0
    for index, char in enumerate(word):
        char_size = _char_width(char)
        if size + char_size > width:
            chunks.append(word[begin:index])
            begin, size = index, 0
        size += char_size
    if size:
        chunks.append(word[begin:])
    return chunks


def _fit(line: str, width: int) -> str:
    """``line`` cut to ``width`` columns, then padded to them."""
    while cell_width(line) > width:
        line = line[:-1]
    return line + " " * (width - cell_width(line))


def _table(table: Table, width: int) -> list[str]:
    widths = layout(table, width)
    if widths is None:
        return [line for part in stacked(table, width) for line in render(part, width)]
    columns = len(table.columns)
    lines: list[str] = []
    if table.header:
        header: tuple[Cell, ...] = tuple(Text(column) for column in table.columns)
        lines.extend(_row(header, widths, table.wrapping, bottom=True))
        lines.append("─" * (sum(widths) + len(SEPARATOR) * (columns - 1)))
    for row in table.rows:
        lines.extend(_row(row, widths, table.wrapping))
    return lines


def _row(
    row: Sequence[Cell],
    widths: Sequence[int],
    wrapping: frozenset[int],
    *,
    bottom: bool = False,
) -> list[str]:
    """The lines of one row; cells are aligned to its top (the header's to its bottom)."""
    blocks = [
        [_fit(line, width) for line in _lines(cell)]
        if index < len(widths) - 1 and index not in wrapping
        else [_fit(line, width) for line in _wrap(cell, width)]
        for index, (cell, width) in enumerate(zip(row, widths, strict=True))
    ]
    height = max(len(block) for block in blocks)
    if bottom:
        blocks = [
            [" " * width] * (height - len(block)) + block
            for block, width in zip(blocks, widths, strict=True)
        ]
    return [
        SEPARATOR.join(
            block[line] if line < len(block) else " " * width
            for block, width in zip(blocks, widths, strict=True)
        )
        for line in range(height)
    ]


# -- what the commands write -------------------------------------------------------------------

_JSON: Final = msgspec.json.Encoder()


def untrusted(text: str, *, style: str = "") -> Text:
    """``text`` exactly as written, never read as markup, with control and other hidden
    characters made visible (:func:`~session_schedule.core.visible.reveal`)."""
    return Text(reveal(text), style=style)


def print_json(value: object) -> None:
    """``value`` as indented JSON on stdout, hidden characters in its strings written as JSON
    escapes (the same data, but a person reading it sees them)."""
    print(frame_escape(msgspec.json.format(_JSON.encode(value), indent=2).decode()))


def rule_text(record: ScheduleRecord) -> str:
    """A reminder's rule in a table cell: ``after 15m``, ``at``, ``every 1h``, ``daily …``,
    ``calendar …``."""
    match record:
        case AfterScheduleRecord():
            return f"after {_seconds(record.after_seconds)}"
        case AtScheduleRecord():
            return "at"
        case EveryScheduleRecord():
            return f"every {_seconds(record.every_seconds)}"
        case DailyScheduleRecord():
            return f"daily {daily_rule_text(record)}"
        case CalendarScheduleRecord():
            return f"calendar {calendar_rule_text(record)}"
        case _:
            assert_never(record)


def _seconds(seconds: int) -> str:
    """``90s``, ``15m``, ``2h``, ``7d``: the largest unit that divides evenly."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
