"""HTML reporter: a document as one self-contained page (Plotly embedded, no network request), deterministic but for
the timestamp. Long names are cut in the middle with the full name on hover, so no row grows tall and the page fits
1280 px without scrolling sideways."""

from __future__ import annotations

import html
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

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; width: 100%; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.memory { color: #1f77b4; } .compute { color: #d62728; } .latency { color: #ff7f0e; } .unknown { color: #7f7f7f; } .dim { color: #666; }
.name { font-family: ui-monospace, monospace; white-space: nowrap; }
.note { color: #666; font-size: 0.85rem; }
.wide { overflow-x: auto; }
"""
_CLASSES = {"dim": "dim", "memory": "memory", "compute": "compute", "latency": "latency", "unknown": "unknown"}


def _e(value: Any) -> str:
    """HTML-escaped text, its control, bidi-override and line-separator characters shown as escapes."""
    return html.escape("" if value is None else terminal_safe(value, limit=100_000), quote=True)


def spans_html(spans: tuple[Span, ...], name_chars: int = NAME_TEXT_CHARS) -> str:
    parts = []
    for span in spans:
        if span.name:
            body = f'<span class="name" title="{_e(span.hover or span.text)}">{_e(middle_cut(terminal_safe(span.text), name_chars))}</span>'
        elif span.hover:  # a name already cut to fit its column
            body = f'<span class="name" title="{_e(span.hover)}">{_e(span.text)}</span>'
        else:
            body = _e(span.text)
        if span.style == "strong":
            body = f"<strong>{body}</strong>"
        elif span.style in _CLASSES:
            body = f'<span class="{_CLASSES[span.style]}">{body}</span>'
        parts.append(body)
    return "".join(parts)


def _table(table: Table) -> str:
    table = with_names_cut(table)
    numeric = [c.unit == "number" for c in table.columns]
    head = "".join(f'<th class="num">{_e(c.title)}</th>' if n else f"<th>{_e(c.title)}</th>" for c, n in zip(table.columns, numeric, strict=True))
    body = "".join("<tr>" + "".join(f'<td class="num">{spans_html(cell, NAME_CELL_CHARS)}</td>' if numeric[i] else f"<td>{spans_html(cell, NAME_CELL_CHARS)}</td>"
                                    for i, cell in enumerate(row)) + "</tr>" for row in table.rows)
    caption = f"<caption>{_e(table.title)}</caption>" if table.title else ""
    return f'<div class="wide"><table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _bullets(block: Bullets) -> str:
    items = "".join(f'<li style="margin-left: {1.5 * item.depth:g}rem">{spans_html(item.spans)}</li>' if item.depth else f"<li>{spans_html(item.spans)}</li>"
                    for item in block.items)
    return f"<ul>{items}</ul>"


def _figure_html(figure: FigureRef, first: bool) -> str:
    return str(figure.build().to_html(full_html=False, include_plotlyjs=first, div_id=figure.key, config={"displaylogo": False, "responsive": True}))


def document_html(document: Document, provenance: dict[str, Any]) -> str:
    sections = [f"<h1>{_e(document.title)}</h1>"]
    plotly_included = False
    for block in document.blocks:
        if isinstance(block, Paragraph):
            sections.append(f"<p>{spans_html(block.spans)}</p>")
        elif isinstance(block, Heading):
            sections.append(f"<h2>{_e(block.text)}</h2>")
        elif isinstance(block, Bullets):
            sections.append(_bullets(block))
        elif isinstance(block, Table):
            sections.append(_table(block))
        elif isinstance(block, FigureRef):
            # Plotly's script once, in the first figure; fixed div ids and config keep the output byte-identical.
            sections.append(_figure_html(block, first=not plotly_included))
            plotly_included = True
    sections += [f'<p class="note">Note: {_e(note)}</p>' for note in document.notes]
    if provenance:
        rows = "".join(f"<tr><td>{_e(key)}</td><td>{_e(value)}</td></tr>" for key, value in provenance.items())
        sections.append(f"<h2>Provenance</h2><table><tbody>{rows}</tbody></table>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(document.title)}</title><style>{_STYLE}</style></head><body>\n" + "\n".join(sections) + "\n</body></html>\n")


class HTMLReporter:
    name: ClassVar[str] = "html"
    file_extension: ClassVar[str] = ".html"
    brief: ClassVar[bool] = False

    def render(self, report: Report, options: ReportOptions) -> str:
        return document_html(report.document, report.provenance)
