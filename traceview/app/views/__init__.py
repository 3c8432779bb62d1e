"""Views: what each kind of analysis says, written once as a document (and its JSON record), rendered by every
reporter and the dashboard. One line per kind in VIEWS; a kind without a view of its own gets the generic one.

A view is the only place that knows what a kind's detail holds; reporters render documents and never ask the kind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.app.document import Document, Report
from traceview.app.reporters.base import ReportOptions, provenance, report_data
from traceview.app.views import fleet, generic, gpu_metrics, kernels, llama_runs, serving, telemetry, torch_trace
from traceview.app.views.projection import projection_blocks, projection_record


@dataclass(frozen=True)
class View:
    """How one kind is shown: its document, the JSON keys only it has, the dashboard's one-line summary and side
    panel, and its main figure (a plotly Figure)."""

    document: Callable[[Analysis, ReportOptions], Document]
    record: Callable[[Analysis, ReportOptions], dict[str, Any]]
    summary: Callable[[Analysis], str]
    side: Callable[[Analysis], Document]
    figure: Callable[..., Any]  # (analysis, highlight kernel name or None, per_launch) -> plotly Figure


GENERIC = View(generic.document, generic.record, generic.summary, generic.side, generic.figure)
# One line per kind.
VIEWS: dict[str, View] = {
    "kernels": View(kernels.document, kernels.record, kernels.summary, kernels.side, kernels.figure),
    "nsys-export": View(kernels.document, kernels.record, kernels.summary, kernels.side, kernels.figure),
    "nsys-stats": View(kernels.document, kernels.record, kernels.summary, kernels.side, kernels.figure),
    "telemetry": View(telemetry.document, telemetry.record, telemetry.summary, telemetry.side, telemetry.figure),
    "llama-runs": View(llama_runs.document, llama_runs.record, llama_runs.summary, llama_runs.side, llama_runs.figure),
    "fleet": View(fleet.document, fleet.record, fleet.summary, fleet.side, fleet.figure),
    "gpu-metrics": View(gpu_metrics.document, gpu_metrics.record, gpu_metrics.summary, gpu_metrics.side, gpu_metrics.figure),
    "serving-bench": View(serving.document, serving.record, serving.summary, serving.side, serving.figure),
    "torch-trace": View(torch_trace.document, torch_trace.record, torch_trace.summary, torch_trace.side, torch_trace.figure),
}


def view_for(analysis: Analysis) -> View:
    """The view of the analysis's kind, or the generic view for a kind that has none."""
    return VIEWS.get(analysis.kind, GENERIC)


def report_of(analysis: Analysis, options: ReportOptions) -> Report:
    """The analysis as a report: its view's document, the JSON contract (common fields and the kind's own), and the
    provenance."""
    view = view_for(analysis)
    record = report_data(analysis, options)
    record.update(view.record(analysis, options))
    record.update(projection_record(analysis))
    document = view.document(analysis, options)
    # A projection (--what-if) is every kind's, shown after what the view says.
    document = dataclasses.replace(document, blocks=(*document.blocks, *projection_blocks(analysis)))
    return Report(document, record, provenance(analysis, options))
