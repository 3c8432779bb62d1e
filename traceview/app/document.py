"""The document a view writes and every reporter renders: paragraphs of styled spans, bullet lists, tables with
unit-typed columns, figure references, notes. Nothing here knows which kind of input it came from, so a reporter that
renders documents never asks.

A document is data (frozen dataclasses); the figures it refers to are built only by the reporters that draw them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# How a span is shown: emphasis, de-emphasis, or the colour of a roofline verdict.
Style = Literal["", "strong", "dim", "memory", "compute", "latency", "unknown"]
# What a column holds: a kernel or other long name (cut in the middle, the full text kept for hover), free text, or a
# number already formatted with its unit (right-aligned).
ColumnUnit = Literal["name", "text", "number"]
# The longest name a table shows before cutting it in the middle; a name in a paragraph gets more room.
NAME_CELL_CHARS = 56
NAME_TEXT_CHARS = 80


@dataclass(frozen=True)
class Span:
    """A run of text with one style. A `name` span (a kernel's name) is cut in the middle by every reporter when it is
    too long; `hover` (the full name, or the text itself when empty) is shown where the output can show it on hover."""

    text: str
    style: Style = ""
    name: bool = False
    hover: str = ""


@dataclass(frozen=True)
class Paragraph:
    spans: tuple[Span, ...]


@dataclass(frozen=True)
class Heading:
    """A section title (Markdown and HTML show it as a heading; the terminal prints it bold)."""

    text: str


@dataclass(frozen=True)
class Item:
    """A list item; depth 0 is the outer list, each level one step in."""

    spans: tuple[Span, ...]
    depth: int = 0


@dataclass(frozen=True)
class Bullets:
    """A list. `under_previous` lists belong to the paragraph before them (a numbered explanation's details)."""

    items: tuple[Item, ...]
    under_previous: bool = False


@dataclass(frozen=True)
class Column:
    """A table column: its title, what it holds, and the narrowest the terminal may make it (characters).
    `wrap` lets a text column run onto more lines instead of being cut with an ellipsis."""

    title: str
    unit: ColumnUnit = "text"
    min_width: int = 0
    wrap: bool = False


Cell = tuple[Span, ...]


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    title: str = ""


@dataclass(frozen=True)
class FigureRef:
    """A figure the reporters that can draw draw here: `build()` returns a plotly Figure, made only when drawn; `key`
    is its element id (fixed, so the same input gives the same page)."""

    key: str
    build: Callable[[], Any]


Block = Paragraph | Heading | Bullets | Table | FigureRef


@dataclass(frozen=True)
class Document:
    """What a report says, in order: a title, blocks, and notes about the input (shown last, de-emphasised)."""

    title: str
    blocks: tuple[Block, ...]
    notes: tuple[str, ...] = ()
    banner: str = ""  # the terminal's first line (the input and its format); the title when empty


@dataclass(frozen=True)
class Report:
    """A document and the machine record of the same answer (the JSON contract, plain data); `provenance` says where
    it came from, shown by the human-readable reporters and merged into the JSON."""

    document: Document
    record: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)


def with_names_cut(table: Table, width: int = NAME_CELL_CHARS) -> Table:
    """The table with the names in each name column cut in the middle to `width` characters (made inert for a
    terminal first), two different names never cut alike; each cut span keeps its full name as `hover`."""
    from traceview.app.formatting import distinct_cuts, terminal_safe

    rows = [list(row) for row in table.rows]
    for column_index, column in enumerate(table.columns):
        if column.unit != "name":
            continue
        places = [(r, s) for r, row in enumerate(rows) for s, part in enumerate(row[column_index]) if part.name]
        texts = [terminal_safe(rows[r][column_index][s].text) for r, s in places]
        for (r, s), cut in zip(places, distinct_cuts(texts, width), strict=True):
            part = rows[r][column_index][s]
            cells = list(rows[r][column_index])
            cells[s] = Span(cut, part.style, name=False, hover=part.hover or part.text)
            rows[r][column_index] = tuple(cells)
    return Table(table.columns, tuple(tuple(row) for row in rows), table.title)


def name_span(text: object, hover: object = None, style: Style = "") -> Span:
    """A span holding a name (a kernel's display name; `hover` its full name): every reporter cuts it in the middle
    when it is too long."""
    return Span("" if text is None else str(text), style, name=True, hover="" if hover is None else str(hover))


def para(*parts: Span | str, style: Style = "") -> Paragraph:
    """A paragraph of plain strings (in `style`) and spans."""
    return Paragraph(tuple(p if isinstance(p, Span) else Span(p, style) for p in parts))


def cell(*parts: Span | str) -> Cell:
    return tuple(p if isinstance(p, Span) else Span(p) for p in parts)


def bullets(texts: Sequence[str | Span | tuple[Span, ...]], under_previous: bool = False) -> Bullets:
    items = []
    for text in texts:
        spans = text if isinstance(text, tuple) else (text if isinstance(text, Span) else Span(text),)
        items.append(Item(spans))
    return Bullets(tuple(items), under_previous)


def plain(spans: Sequence[Span]) -> str:
    """The text of spans, uncut."""
    return "".join(s.text for s in spans)
