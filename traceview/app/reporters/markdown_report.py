"""Markdown reporter: a document as Markdown for tickets (GitHub, GitLab, Jira): paragraphs, lists, pipe tables
whose name columns are cut in the middle, and the provenance folded away."""

from __future__ import annotations

import html
import re
from typing import Any, ClassVar

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

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-!|~])")


def escape_markdown(text: object) -> str:
    """Return text that renders literally in Markdown: HTML-escaped, punctuation and pipes backslash-escaped."""
    # Controls, bidi overrides and line separators as visible escapes first, as the terminal shows them.
    escaped = html.escape(terminal_safe(text), quote=False)
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", escaped)
    return " ".join(escaped.split())  # a newline would end a table row


def spans_markdown(spans: tuple[Span, ...], name_chars: int = NAME_TEXT_CHARS) -> str:
    parts = []
    for span in spans:
        body = escape_markdown(middle_cut(terminal_safe(span.text), name_chars) if span.name else span.text)
        if body and span.style == "strong":
            body = f"**{body}**"
        elif body and span.style == "dim" and not span.text.startswith(" "):
            body = f"_{body}_"
        parts.append(body)
    return "".join(parts)


def _table(table: Table) -> list[str]:
    lines = [f"**{escape_markdown(table.title)}**", ""] if table.title else []
    lines.append("| " + " | ".join(escape_markdown(c.title) for c in table.columns) + " |")
    lines.append("|" + "|".join("---:" if c.unit == "number" else "---" for c in table.columns) + "|")
    lines += ["| " + " | ".join(spans_markdown(cell, NAME_CELL_CHARS) for cell in row) + " |" for row in with_names_cut(table).rows]
    return lines


def document_markdown(document: Document, provenance: dict[str, Any]) -> str:
    out = [f"## {escape_markdown(document.title)}"]
    for block in document.blocks:
        if isinstance(block, Paragraph):
            out += ["", spans_markdown(block.spans)]
        elif isinstance(block, Heading):
            out += ["", f"**{escape_markdown(block.text)}**"]
        elif isinstance(block, Bullets):
            if not block.under_previous:
                out.append("")
            out += [("   - " if block.under_previous else "  " * item.depth + "- ") + spans_markdown(item.spans) for item in block.items]
        elif isinstance(block, Table):
            out += ["", *_table(block)]
        elif isinstance(block, FigureRef):
            continue  # Markdown embeds no figures; the HTML report has them
    out += [line for note in document.notes for line in ("", f"_Note: {escape_markdown(note)}_")]
    if provenance:
        shown = ", ".join(f"{key.replace('_', ' ')}: {escape_markdown(value)}" for key, value in provenance.items() if value not in (None, ""))
        out += ["", "<details><summary>Provenance</summary>", "", shown, "", "</details>"]
    return "\n".join(out) + "\n"


class MarkdownReporter:
    name: ClassVar[str] = "md"
    file_extension: ClassVar[str] = ".md"
    brief: ClassVar[bool] = False

    def render(self, report: Report, options: ReportOptions) -> str:
        return document_markdown(report.document, report.provenance)
