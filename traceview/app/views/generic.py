"""The view of a kind that has no view of its own: the device, the totals and the ranked kernels it has, its notes.
A new kind is shown by this until it earns a view (a registry test renders every kind through every reporter)."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.app.document import Document, FigureRef
from traceview.app.reporters.base import ReportOptions
from traceview.app.views import kernels
from traceview.app.views.common import banner, title


def document(analysis: Analysis, options: ReportOptions) -> Document:
    blocks = [*kernels.headline_blocks(analysis), FigureRef("traceview-main-figure", lambda: figure(analysis)), *kernels.kernel_blocks(analysis, options)]
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes), banner(analysis))


def record(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    return kernels.record(analysis, options)


def summary(analysis: Analysis) -> str:
    return kernels.summary(analysis)


def side(analysis: Analysis) -> Document:
    return kernels.side(analysis)


def figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> Any:
    return kernels.figure(analysis, highlight, per_launch)
