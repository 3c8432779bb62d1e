"""The view of metrics polled over time: one row per metric (statistics in its unit, the rate of a counter), the
findings, and the metrics over time."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.gpu_metrics import MetricsRun
from traceview.app.document import Block, Column, Document, FigureRef, Heading, Table, bullets, cell, name_span, para
from traceview.app.formatting import format_number
from traceview.app.reporters.base import ReportOptions, json_safe
from traceview.app.views.common import banner, detail_of, title

_COLUMNS = (Column("metric", "name", 20), Column("unit", "text"), Column("samples", "number"), Column("mean", "number"), Column("p50", "number"),
            Column("p90", "number"), Column("max", "number"), Column("rate/s", "number"))


def _n(value: float | None) -> str:
    return "" if value is None else format_number(value, 4)


def document(analysis: Analysis, options: ReportOptions) -> Document:
    run = detail_of(analysis, MetricsRun)
    devices = sorted({m["device"] for m in run.metrics if m["device"]})
    rows = tuple((cell(name_span(m["metric"] + (f" ({m['device'][:12]}…)" if len(devices) > 1 else ""))), cell(m["unit"] or ""),
                  cell(str(m["samples"])), cell(_n(m["mean"])), cell(_n(m["p50"])), cell(_n(m["p90"])), cell(_n(m["max"])),
                  cell(_n(m["rate_per_s"]))) for m in run.metrics)
    blocks: list[Block] = [para(f"{len(run.metrics)} metrics over {run.duration_s:,.0f} s" + (f" on {', '.join(devices)}" if devices else "")),
                           FigureRef("traceview-main-figure", lambda: figure(analysis)), Table(_COLUMNS, rows)]
    blocks += [Heading("Findings"), bullets([f["message"] for f in run.findings] or ["none"])]
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes), banner(analysis))


def record(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    run = detail_of(analysis, MetricsRun)
    return {"metrics": json_safe({"duration_s": run.duration_s, "series": run.metrics, "findings": run.findings})}


def summary(analysis: Analysis) -> str:
    run = detail_of(analysis, MetricsRun)
    return f"{len(run.metrics)} metrics over {run.duration_s:,.0f} s, {len(run.findings)} finding(s)"


def side(analysis: Analysis) -> Document:
    run = detail_of(analysis, MetricsRun)
    return Document(title(analysis), (Heading("Findings"), bullets([f["message"] for f in run.findings] or ["none"])), tuple(analysis.notes))


def figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> Any:
    """Each metric over time, on its own row (up to eight, the ones that vary first)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    run = detail_of(analysis, MetricsRun)
    varying = [m for m in run.metrics if m["max"] != m["min"]][:8]
    figure = make_subplots(rows=max(1, len(varying)), cols=1, shared_xaxes=True, vertical_spacing=0.03,
                           subplot_titles=[f"{m['metric']} [{m['unit'] or ''}]" for m in varying] or ["no metric varies"])
    for index, m in enumerate(varying, start=1):
        points = run.series.filter((run.series["metric"] == m["metric"]) & (run.series["device"] == m["device"])).sort("time_s")
        figure.add_trace(go.Scatter(x=points["time_s"].to_list(), y=points["value"].to_list(), mode="lines", name=m["metric"]), row=index, col=1)
    figure.update_layout(height=160 * max(1, len(varying)) + 80, showlegend=False, template="plotly_white", title="Metrics over time (s)")
    return figure
