"""Pieces every view uses: sentences turned into blocks, the device line, the source banner."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from traceview.analyzer.analysis import Analysis
from traceview.app.document import Block, Bullets, Item, Paragraph, Span

Detail = TypeVar("Detail")


def detail_of(analysis: Analysis, kind: type[Detail]) -> Detail:
    """The analysis's detail, which a view's registry line promises is a `kind`; TypeError when it is not."""
    if not isinstance(analysis.detail, kind):
        raise TypeError(f"a {analysis.kind} analysis whose detail is no {kind.__name__}")
    return analysis.detail


def blocks_from_lines(lines: Iterable[str]) -> list[Block]:
    """Sentences as blocks: a run of `- ` lines is one list (two more spaces after the dash is one level deeper),
    every other line a paragraph."""
    blocks: list[Block] = []
    items: list[Item] = []
    for line in lines:
        if line.startswith("- "):
            body = line[2:]
            depth = (len(body) - len(body.lstrip(" "))) // 2
            items.append(Item((Span(body.lstrip(" ")),), depth))
            continue
        if items:
            blocks.append(Bullets(tuple(items)))
            items = []
        blocks.append(Paragraph((Span(line),)))
    if items:
        blocks.append(Bullets(tuple(items)))
    return blocks


def banner(analysis: Analysis) -> str:
    """The first line of a terminal report: the input's path and its detected format."""
    return f"{analysis.source.path}  [{analysis.source.format}]"


def title(analysis: Analysis) -> str:
    """A report's title: the input's file name."""
    return f"traceview: {analysis.source.path.rsplit('/', 1)[-1]}"


def device_text(analysis: Analysis, what: str = "Device") -> str:
    device = analysis.device
    return f"{what}: {device.name or 'unknown'} — {device.how_identified}"
