"""What every view shows when the run is projected onto other GPUs (--what-if): a table, a bar chart, the assumptions."""

from __future__ import annotations

import dataclasses
from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.app.document import Block, Column, FigureRef, Heading, Table, bullets, cell, name_span
from traceview.app.formatting import format_duration

_COLUMNS = (Column("target", "text"), Column("kernel time", "number"), Column("projected", "number"), Column("speed-up", "number"),
            Column("step", "number"), Column("projected step", "number"), Column("tokens/s", "number"), Column("projected tokens/s", "number"),
            Column("dominant kernels", "name", 20))


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def projection_blocks(analysis: Analysis) -> list[Block]:
    """The projection table, its figure and the assumptions; nothing when no --what-if was given."""
    if not analysis.projections:
        return []
    rows = tuple((cell(f"{p.target_name} ({p.target})"), cell(format_duration(p.measured_ns)), cell(format_duration(p.projected_ns)),
                  cell("n/a" if p.speedup is None else f"{p.speedup:.2f}×"), cell(format_duration(p.step_ns)), cell(format_duration(p.projected_step_ns)),
                  cell(_rate(p.tokens_per_s)), cell(_rate(p.projected_tokens_per_s)), (name_span(", ".join(p.dominant)),))
                 for p in analysis.projections)
    assumptions = list(dict.fromkeys(a for p in analysis.projections for a in p.assumptions))
    source = analysis.device.name or "the run's GPU"
    return [Heading(f"Projected onto other GPUs (from {source})"), Table(_COLUMNS, rows),
            FigureRef("traceview-projection", lambda: figure(analysis)), bullets(assumptions)]


def projection_record(analysis: Analysis) -> dict[str, Any]:
    return {"projection": [dataclasses.asdict(p) for p in analysis.projections]} if analysis.projections else {}


def figure(analysis: Analysis) -> Any:
    """One bar per target: the projected speed-up against the measured run (1.0 = the same)."""
    import plotly.graph_objects as go

    projections = analysis.projections
    figure = go.Figure(go.Bar(x=[p.target_name for p in projections], y=[p.speedup for p in projections], marker_color="#2ca02c",
                              text=["" if p.speedup is None else f"{p.speedup:.2f}×" for p in projections], textposition="outside"))
    figure.update_layout(title="Projected speed-up on each GPU (kernels moved along their own roofs)", yaxis_title="× the measured run",
                         template="plotly_white", height=380)
    return figure
