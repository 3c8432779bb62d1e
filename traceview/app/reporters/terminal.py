"""Terminal reporter: a document as rich text — paragraphs, lists, and tables whose name columns are cut in the middle."""

from __future__ import annotations

import io
from typing import ClassVar, Literal

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from traceview.app.document import (
    NAME_CELL_CHARS,
    NAME_TEXT_CHARS,
    Bullets,
    Document,
    FigureRef,
    Heading,
    Paragraph,
    Report,
    Span,
    Table,
    with_names_cut,
)
from traceview.app.formatting import middle_cut, terminal_safe
from traceview.app.reporters.base import ReportOptions

# Terminal colours of a document's styles.
STYLES = {"": "", "strong": "bold", "dim": "dim", "memory": "cyan", "compute": "magenta", "latency": "yellow", "unknown": "dim"}


def spans_text(spans: tuple[Span, ...], name_chars: int = NAME_TEXT_CHARS, color: bool = True) -> Text:
    """Spans as one rich Text, each made inert for the terminal; names cut in the middle to `name_chars`."""
    text = Text()
    for span in spans:
        body = middle_cut(terminal_safe(span.text), name_chars) if span.name else terminal_safe(span.text)
        # A dimmed label inside a cell only dims where there is colour (it would otherwise be the same text).
        text.append(body, style=STYLES[span.style] if color or span.style != "dim" else "")
    return text


def render_document(document: Document, console: Console, color: bool) -> None:
    console.print(safe_text(document.banner or document.title, style="bold"))
    for block in document.blocks:
        if isinstance(block, Paragraph):
            console.print(spans_text(block.spans))
        elif isinstance(block, Heading):
            console.print(safe_text(f"{block.text}:", style="bold"))
        elif isinstance(block, Bullets):
            for item in block.items:
                lead = "   - " if block.under_previous else "- " + "  " * item.depth
                console.print(Text(lead) + spans_text(item.spans))
        elif isinstance(block, Table):
            console.print(_table(block, color))
        elif isinstance(block, FigureRef):
            continue  # a terminal draws no figures
    for note in document.notes:
        console.print(safe_text(f"note: {note}", style="dim"))


def _table(table: Table, color: bool) -> RichTable:
    out = RichTable(header_style="bold", title=table.title or None)
    for column in table.columns:
        justify: Literal["right", "left"] = "right" if column.unit == "number" else "left"
        out.add_column(column.title, justify=justify, no_wrap=not column.wrap, overflow="fold" if column.wrap else "ellipsis",
                       min_width=column.min_width or None, max_width=NAME_CELL_CHARS if column.unit == "name" else None)
    for row in with_names_cut(table).rows:
        out.add_row(*(spans_text(cell, NAME_CELL_CHARS, color) for cell in row))
    return out


class TerminalReporter:
    name: ClassVar[str] = "table"
    file_extension: ClassVar[str] = ".txt"
    brief: ClassVar[bool] = True

    def render(self, report: Report, options: ReportOptions) -> str:
        buffer = io.StringIO()
        console = Console(file=buffer, width=options.width, force_terminal=options.color, color_system="standard" if options.color else None,
                          highlight=False, soft_wrap=False)
        render_document(report.document, console, options.color)
        return buffer.getvalue()


def safe_text(text: object, style: str = "") -> Text:
    """A rich Text of a string that may come from the input (kernel names, paths), made inert for the terminal."""
    return Text(terminal_safe(text), style=style)
