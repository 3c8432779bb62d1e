"""Plotly figures built from an Analysis; the HTML report and the dashboard both draw with these functions.

Kernel names are untrusted: every string that reaches a figure is HTML-escaped first, because Plotly renders a
subset of HTML in hover labels and titles.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

import numpy as np
import plotly.graph_objects as go
import polars as pl

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.fleet import FleetResult
from traceview.analyzer.lanes import span_of
from traceview.analyzer.roofline import HIGH_THRESHOLD_PCT, LATENCY_THRESHOLD_PCT
from traceview.app.formatting import format_duration, format_rate, terminal_safe

BOUND_COLOURS = {"memory": "#1f77b4", "compute": "#d62728", "latency": "#ff7f0e", "unknown": "#7f7f7f"}
LEVEL_DASH = {"dram": "solid", "l2": "dash", "l1": "dot"}
PRECISION_COLOURS = {"fp64": "#444444", "fp32": "#2ca02c", "fp16": "#9467bd", "tensor": "#8c564b"}
_LAYOUT = {"template": "plotly_white", "margin": {"l": 70, "r": 30, "t": 60, "b": 60}, "height": 520}


def _text(value: Any) -> str:
    return html.escape(terminal_safe(value, limit=100_000), quote=True)


def _sizes(durations: list[float | None]) -> list[float]:
    """Marker diameters with area proportional to time (8-48 px)."""
    known = [d for d in durations if d]
    top = max(known) if known else 1.0
    return [8 + 40 * math.sqrt((d or 0) / top) if top else 12 for d in durations]


def has_roofline_points(analysis: Analysis) -> bool:
    """True when at least one kernel has an arithmetic intensity and an achieved FLOP/s to place on a roofline."""
    k = analysis.kernels
    return bool(k.height) and k.filter(k["arithmetic_intensity"].is_not_null() & k["achieved_flop_per_s"].is_not_null()).height > 0


MAX_POINTS = 5000  # the browser never gets more dots than this; the longest launches are kept


def _launch_points(analysis: Analysis) -> pl.DataFrame:
    """Per-launch rows shaped like the kernel rows (launches = 1), the longest MAX_POINTS of them."""
    launches = analysis.launches
    if launches.height == 0:
        return analysis.kernels
    frame = launches.with_columns(pl.lit(1).alias("launches"))
    return frame.sort("duration_ns", descending=True, nulls_last=True).head(MAX_POINTS)


ROOFLINE_LABELS = 5


def roofline_figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> go.Figure:
    """Return the roofline (log-log FLOP/s against FLOP per DRAM byte), or the SOL chart when the export has no counts.

    One dot per kernel name (area = time), or per launch when asked; colour = verdict.
    """
    points = _launch_points(analysis) if per_launch else analysis.kernels
    if not has_roofline_points(analysis):
        return sol_figure(analysis, highlight, points)
    sources = sorted({p.source for p in analysis.device.peaks.values() if p.value and p.source})
    return _roofline(analysis, points, highlight, "kernels",
                     f"Roofline — {_text(analysis.device.name or 'unknown device')} (peaks from {', '.join(sources) or 'nowhere'})")


def op_roofline_figure(analysis: Analysis, ops: list[dict[str, Any]], highlight: str | None = None) -> go.Figure:
    """Return the roofline of a PyTorch trace's ops (TorchRun.ops): one dot per op, shapes and type (area = the time
    of the kernels its calls launched), placed by the FLOPs and bytes estimated from its input shapes, not measured."""
    rows = [{"kernel_name": f"{op['op']} {json.dumps(op['input_dims'])}", "short_name": op["op"], "duration_ns": float(op["kernel_ns"]),
             "launches": op["calls"], "bound": op["bound"], "label": "estimated from the input shapes", "precision": op.get("precision"),
             "arithmetic_intensity": op.get("arithmetic_intensity"), "achieved_flop_per_s": op.get("achieved_flop_per_s")} for op in ops]
    points = pl.DataFrame(rows, schema={"kernel_name": pl.String, "short_name": pl.String, "duration_ns": pl.Float64, "launches": pl.Int64,
                                        "bound": pl.String, "label": pl.String, "precision": pl.String, "arithmetic_intensity": pl.Float64,
                                        "achieved_flop_per_s": pl.Float64})
    sources = sorted({p.source for p in analysis.device.peaks.values() if p.value and p.source})
    return _roofline(analysis, points, highlight, "ops (estimated)",
                     f"Op roofline, estimated from the ops' shapes — {_text(analysis.device.name or 'unknown device')} "
                     f"(peaks from {', '.join(sources) or 'nowhere'})")


def _roofline(analysis: Analysis, points: pl.DataFrame, highlight: str | None, what: str, title: str) -> go.Figure:
    """Return the roofs of the device's peaks with `points` (kernel-shaped rows) as dots named `{bound}-bound {what}`."""
    peaks = {key: peak for key, peak in analysis.device.peaks.items() if peak.value}
    kernels = points.filter(points["arithmetic_intensity"].is_not_null() & points["achieved_flop_per_s"].is_not_null())
    intensities = [v for v in kernels["arithmetic_intensity"].to_list() if v and v > 0]
    low = 10 ** math.floor(math.log10(min(intensities + [0.1]) / 10))
    high = 10 ** math.ceil(math.log10(max(intensities + [1000.0]) * 10))
    figure = go.Figure()
    used = {p for p in kernels["precision"].drop_nulls().to_list()}
    for precision in ("fp64", "fp32", "fp16", "tensor"):
        compute = peaks.get(f"peak_{precision}_flop_per_s")
        if compute is None or (used and precision not in used and precision != "fp32"):
            continue
        for level in ("dram", "l2", "l1"):
            bandwidth = peaks.get(f"peak_{level}_bytes_per_s")
            if bandwidth is None or compute.value is None or bandwidth.value is None:
                continue
            ridge = compute.value / bandwidth.value
            xs = [low, ridge, high]
            ys = [low * bandwidth.value, compute.value, compute.value]
            figure.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", line={"color": PRECISION_COLOURS[precision], "dash": LEVEL_DASH[level], "width": 1.5},
                name=f"{precision.upper()} roof, {level.upper()} ({format_rate(compute.value, 'FLOP/s')}, {format_rate(bandwidth.value, 'B/s')}; {compute.source})",
                hoverinfo="name",
            ))
            figure.add_trace(go.Scatter(
                x=[ridge], y=[compute.value], mode="markers", marker={"symbol": "diamond", "size": 8, "color": PRECISION_COLOURS[precision]},
                name=f"ridge {precision.upper()}/{level.upper()} at {ridge:.3g} FLOP/B", showlegend=False,
                hovertemplate=f"ridge point {precision.upper()}/{level.upper()}: %{{x:.3g}} FLOP/B<extra></extra>",
            ))
    rows = list(kernels.iter_rows(named=True))
    for bound in ("memory", "compute", "latency", "unknown"):
        group = [r for r in rows if r["bound"] == bound]
        if not group:
            continue
        figure.add_trace(go.Scatter(
            x=[r["arithmetic_intensity"] for r in group],
            y=[r["achieved_flop_per_s"] for r in group],
            mode="markers",
            name=f"{bound}-bound {what}",
            marker={"color": BOUND_COLOURS[bound], "size": _sizes([r["duration_ns"] for r in group]), "opacity": 0.8,
                    "line": {"width": [3 if r["kernel_name"] == highlight else 0.5 for r in group], "color": "black"}},
            customdata=[r["kernel_name"] for r in group],
            text=[_hover(r) for r in group],
            hovertemplate="%{text}<extra></extra>",
        ))
    # The few kernels that hold most of the time are named on the chart; the others on hover.
    labelled = sorted(rows, key=lambda r: -(r["duration_ns"] or 0.0))[:ROOFLINE_LABELS]
    if labelled:
        figure.add_trace(go.Scatter(x=[r["arithmetic_intensity"] for r in labelled], y=[r["achieved_flop_per_s"] for r in labelled],
                                    mode="text", text=[_text(r["short_name"])[:32] for r in labelled], textposition="top center",
                                    textfont={"size": 10}, showlegend=False, hoverinfo="skip", customdata=[r["kernel_name"] for r in labelled]))
    # SI prefixes (G, T) with the unit: Plotly's default "B" for 10⁹ reads as bytes.
    figure.update_xaxes(type="log", title="arithmetic intensity (FLOP per DRAM byte)", exponentformat="SI")
    figure.update_yaxes(type="log", title="achieved performance", tickformat="~s", ticksuffix="FLOP/s")
    figure.update_layout(title=title, **_LAYOUT)
    return figure


def _known(value: Any) -> bool:
    """A number to show: present and finite (NaN and infinity are unknown, never printed as `nan`)."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def _hover(row: dict[str, Any]) -> str:
    parts = [
        f"<b>{_text(row['short_name'])}</b>",
        f"{_text(row['kernel_name'])[:160]}",
        f"time {format_duration(row['duration_ns'])} in {row.get('launches', 1)} launch(es)",
        f"verdict: {_text(row['bound'])} ({_text(row['label'])})",
    ]
    if _known(row.get("arithmetic_intensity")):
        parts.append(f"AI {row['arithmetic_intensity']:.3g} FLOP/B")
    if _known(row.get("achieved_flop_per_s")):
        parts.append(f"achieved {format_rate(row['achieved_flop_per_s'], 'FLOP/s')}")
    if _known(row.get("roof_pct")):
        parts.append(f"{row['roof_pct']:.1f}% of roof ({_text(row['binding_roof'])})")
    return "<br>".join(parts)


def sol_figure(analysis: Analysis, highlight: str | None = None, points: pl.DataFrame | None = None) -> go.Figure:
    """Return the speed-of-light plane: memory vs compute throughput (% of peak), with ncu's 60/80 % thresholds."""
    figure = go.Figure()
    source = analysis.kernels if points is None else points
    rows = [r for r in source.iter_rows(named=True) if r.get("compute_pct") is not None and r.get("memory_pct") is not None]
    for value, dash in ((LATENCY_THRESHOLD_PCT, "dot"), (HIGH_THRESHOLD_PCT, "dash")):
        figure.add_shape(type="line", x0=0, x1=100, y0=value, y1=value, line={"dash": dash, "color": "#999"})
        figure.add_shape(type="line", x0=value, x1=value, y0=0, y1=100, line={"dash": dash, "color": "#999"})
    figure.add_annotation(x=30, y=30, text="latency-bound (< 60 % of both)", showarrow=False, font={"color": "#999"})
    for bound in ("memory", "compute", "latency", "unknown"):
        group = [r for r in rows if r["bound"] == bound]
        if not group:
            continue
        figure.add_trace(go.Scatter(
            x=[r["memory_pct"] for r in group], y=[r["compute_pct"] for r in group], mode="markers", name=f"{bound}-bound kernels",
            marker={"color": BOUND_COLOURS[bound], "size": _sizes([r["duration_ns"] for r in group]), "opacity": 0.8,
                    "line": {"width": [3 if r["kernel_name"] == highlight else 0.5 for r in group], "color": "black"}},
            customdata=[r["kernel_name"] for r in group],
            text=[_hover(r) for r in group], hovertemplate="%{text}<extra></extra>",
        ))
    if not rows:
        # Neither counts for a roofline nor SOL percentages: an empty plane with thresholds would suggest data.
        empty = go.Figure()
        empty.update_layout(title="No roofline and no speed-of-light data in this input (see the table and the side panel)", **_LAYOUT)
        return empty
    figure.update_xaxes(range=[0, 105], title="memory throughput (% of peak)")
    figure.update_yaxes(range=[0, 105], title="compute (SM) throughput (% of peak)")
    figure.update_layout(title="Speed of light — this export has no FLOP/byte counts for a roofline", **_LAYOUT)
    return figure


def _series_by_name(frame: pl.DataFrame, column: str, value: str) -> dict[str, list[float | None]]:
    """Return one series per name in a list-of-struct column (rails, temperatures), aligned with the frame's rows."""
    exploded = frame.select(pl.int_range(pl.len()).alias("_row"), column).explode(column).drop_nulls(column).unnest(column)
    if exploded.height == 0:
        return {}
    out: dict[str, list[float | None]] = {}
    for (name,), part in exploded.group_by("name", maintain_order=True):
        values: list[float | None] = [None] * frame.height
        for row, number in zip(part["_row"].to_list(), part[value].to_list(), strict=True):
            values[row] = number
        out[str(name)] = values
    return out


# Findings that mark a stretch of time on the telemetry axis, with their colour.
_FINDING_COLOURS = {"thermal": "#d62728", "gpu_clock_low": "#ff7f0e", "emc_clock_low": "#9467bd", "memory_bound": "#1f77b4",
                    "gpu_idle_cpu_busy": "#8c564b"}


def telemetry_figure(analysis: Analysis, max_points: int = 5000) -> go.Figure:
    """Return a tegrastats log over time in five panels on one time axis: EMC bandwidth against the board's peak (GB/s),
    GPU load (%), GPU and EMC clocks (MHz), power rails (W) and temperatures (°C); findings that cover a stretch of the
    log (clock caps, thermal throttling) are shaded on every panel. Long logs are downsampled to `max_points`."""
    from plotly.subplots import make_subplots

    telemetry = analysis.telemetry
    figure = make_subplots(rows=5, cols=1, shared_xaxes=True, vertical_spacing=0.03,
                           subplot_titles=("EMC bandwidth (GB/s)", "GPU load (%)", "clocks (MHz)", "power rails (W)", "temperatures (°C)"))
    if telemetry is None:
        return figure
    frame = telemetry.frame
    step = max(1, frame.height // max_points)
    frame = frame.gather_every(step)
    time = frame["time_s"].to_list()

    def line(row: int, values: list[Any], name: str, **style: Any) -> None:
        if any(v is not None for v in values):
            figure.add_trace(go.Scatter(x=time, y=values, name=_text(name), mode="lines", legendgroup=str(row), **style), row=row, col=1)

    line(1, (frame["emc_bytes_per_s"] / 1e9).to_list(), "EMC bandwidth")
    if telemetry.board is not None and time:
        line(1, [telemetry.board.peak_bytes_per_s / 1e9] * len(time), f"{telemetry.board.name} peak", line={"dash": "dash", "color": "black"})
    line(2, frame["gpu_pct"].to_list(), "GPU load")
    line(3, frame["gpu_mhz"].to_list(), "GPU clock")
    line(3, frame["emc_mhz"].to_list(), "EMC clock")
    for name, values in _series_by_name(frame, "rails", "current_mw").items():
        line(4, [None if v is None else v / 1e3 for v in values], name)
    for name, values in _series_by_name(frame, "temperatures", "celsius").items():
        line(5, values, f"{name} temperature")
    for finding in telemetry.findings:
        # Findings about the whole log (energy, averages) are in the text; stretches are shaded where they happened.
        if finding.kind in _FINDING_COLOURS and finding.duration_s and finding.start_s is not None:
            figure.add_vrect(x0=finding.start_s, x1=finding.start_s + finding.duration_s, fillcolor=_FINDING_COLOURS[finding.kind],
                             opacity=0.10, line_width=0, annotation_text=_text(finding.kind.replace("_", " ")), annotation_position="top left")
    figure.update_yaxes(rangemode="tozero")
    figure.update_yaxes(range=[0, 100], row=2, col=1)
    figure.update_xaxes(title_text="time (s)", row=5, col=1)
    figure.update_layout(**{**_LAYOUT, "height": 1000}, title="tegrastats over time" + (f" (every {step}th sample)" if step > 1 else ""))
    return figure


def runs_figure(analysis: Analysis) -> go.Figure:
    """Return llama.cpp decode runs: measured tokens/s beside the memory-bandwidth ceiling of each configuration
    (device bandwidth ÷ bytes read per token), and below, the MBU (measured ÷ ceiling, %) per configuration."""
    from plotly.subplots import make_subplots

    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.65, 0.35],
                           subplot_titles=("decode tokens/s against the bandwidth ceiling", "MBU: share of the memory bandwidth used (%)"))
    if analysis.llm is None:
        return figure
    runs = [r for r in analysis.llm.runs.iter_rows(named=True) if r["phase"] == "decode"]
    labels = [_text(f"#{r['run']} {r['model'] or ''} {r['test']}" + (f" ngl {r['n_gpu_layers']}" if r["n_gpu_layers"] is not None else "")) for r in runs]
    ceilings = [r["device_bandwidth_bytes_per_s"] / r["bytes_per_token"] if r.get("device_bandwidth_bytes_per_s") and r.get("bytes_per_token") else None
                for r in runs]
    figure.add_trace(go.Bar(x=labels, y=[r["tokens_per_s"] for r in runs], name="measured tokens/s",
                            marker={"color": ["#1f77b4" if r["offload"] == "full" else "#aec7e8" for r in runs]},
                            hovertemplate="%{x}<br>%{y:.2f} tokens/s measured<extra></extra>"), row=1, col=1)
    if any(c is not None for c in ceilings):
        figure.add_trace(go.Bar(x=labels, y=ceilings, name="bandwidth ceiling (tokens/s)", marker={"color": "#d9d9d9", "line": {"color": "#555", "width": 1}},
                                hovertemplate="%{x}<br>ceiling %{y:.1f} tokens/s<extra></extra>"), row=1, col=1)
    if any(r["mbu_pct"] is not None for r in runs):
        figure.add_trace(go.Bar(x=labels, y=[r["mbu_pct"] for r in runs], name="MBU (%)", marker={"color": "#2ca02c"},
                                text=["" if r["mbu_pct"] is None else f"{r['mbu_pct']:.0f}%" for r in runs], textposition="outside",
                                hovertemplate="%{x}<br>MBU %{y:.1f}%<extra></extra>"), row=2, col=1)
    figure.update_yaxes(title_text="tokens/s", row=1, col=1)
    figure.update_yaxes(title_text="%", range=[0, 110], row=2, col=1)
    figure.update_layout(**{**_LAYOUT, "height": 620}, barmode="group", title="llama.cpp decode: measured against the memory-bandwidth ceiling")
    return figure


BREAKDOWN_COLOURS = {"compute": "#2ca02c", "communication": "#9467bd", "copy": "#1f77b4", "unified_memory": "#17becf", "overlap": "#bcbd22"}
CAUSE_COLOURS = ("#d62728", "#ff7f0e", "#e377c2", "#8c564b", "#7f7f7f", "#ff9896", "#ffbb78", "#c49c94", "#f7b6d2")


def breakdown_figure(analysis: Analysis) -> go.Figure:
    """Return where each GPU's time went: one stacked bar per GPU (% of its span), work by category alone, the
    overlaps, and idle time split by its cause."""
    timeline = analysis.timeline
    devices = timeline.devices if timeline is not None else []
    labels = [_text(f"GPU {d['device_id']}" + (f" ({d['name']})" if d.get("name") else "")) for d in devices]
    figure = go.Figure()

    def bar(name: str, values: list[float], colour: str) -> None:
        if any(v > 0 for v in values):
            figure.add_trace(go.Bar(y=labels, x=values, name=_text(name), orientation="h", marker_color=colour,
                                    hovertemplate="%{y}: %{x:.2f}% of the span<extra>" + _text(name) + "</extra>"))

    for category, colour in BREAKDOWN_COLOURS.items():
        if category == "overlap":
            values = [sum(v or 0.0 for v in d["breakdown"]["overlaps"].values()) for d in devices]
            bar("overlapping work", values, colour)
        else:
            values = [d["breakdown"]["exclusive"].get(f"{category}_only_pct") or 0.0 for d in devices]
            bar(f"{category.replace('_', ' ')} alone", values, colour)
    causes = [c["cause"] for c in timeline.idle_by_cause] if timeline is not None else []
    for index, cause in enumerate(causes):
        values = [100.0 * d.get("idle_by_cause", {}).get(cause, 0) / d["span_ns"] if d["span_ns"] else 0.0 for d in devices]
        bar(f"idle: {cause.replace('_', ' ')}", values, CAUSE_COLOURS[index % len(CAUSE_COLOURS)])
    verdict = timeline.verdict["message"] if timeline is not None and timeline.verdict else "no GPU activity in this export"
    # Plotly's own legend on the right: the figure is tall enough for a dozen categories whatever the GPU count.
    figure.update_layout(**{**_LAYOUT, "height": max(380, 200 + 60 * len(devices))}, barmode="stack", title=_text(verdict),
                         xaxis={"title": "% of the GPU's span (first to last activity)", "range": [0, 100]})
    return figure


def fleet_heatmap_figure(result: FleetResult, top: int = 25) -> go.Figure:
    """Return the rank × kernel heatmap of a fleet: each cell a kernel's total time on one rank, relative to that kernel's
    median over ranks (1.0 = typical; a straggling rank shows as a bright row)."""
    kernels = result.kernels.head(top)
    names = kernels["kernel_name"].to_list()
    ranks = result.ranks["rank"].to_list()
    cells = {(r, n): t for r, n, t in result.per_rank_kernels.select("rank", "kernel_name", "total_ns").iter_rows()} if result.per_rank_kernels is not None else {}
    medians = dict(zip(names, kernels["median_per_rank_ns"].to_list(), strict=True))
    z = [[(cells.get((rank, name)) or 0.0) / medians[name] if medians.get(name) else None for name in names] for rank in ranks]
    short = [_text(s) for s in kernels["short_name"].to_list()]
    figure = go.Figure(go.Heatmap(z=z, x=short, y=[f"rank {r}" for r in ranks], colorscale="Viridis", zmin=0,
                                  colorbar={"title": "× median rank"},
                                  hovertemplate="%{y}, %{x}: %{z:.2f}× the median rank<extra></extra>"))
    figure.update_layout(**{**_LAYOUT, "height": max(380, 160 + 22 * len(ranks))}, title="Kernel time per rank, relative to the median rank",
                         xaxis={"tickangle": -45}, yaxis={"autorange": "reversed"})
    return figure


def fleet_breakdown_figure(result: FleetResult) -> go.Figure:
    """Return one stacked bar per rank: compute, communication, copy, unified memory and idle as % of its GPUs' spans
    (span-weighted)."""
    ranks = result.ranks
    labels = [f"rank {r}" for r in ranks["rank"].to_list()]
    figure = go.Figure()
    for column, name, colour in (("compute_pct", "compute", BREAKDOWN_COLOURS["compute"]),
                                 ("communication_pct", "communication", BREAKDOWN_COLOURS["communication"]),
                                 ("copy_pct", "copy", BREAKDOWN_COLOURS["copy"]),
                                 ("unified_memory_pct", "unified memory", BREAKDOWN_COLOURS["unified_memory"]),
                                 ("idle_pct", "idle", "#d62728")):
        values = ranks[column].fill_null(0.0).to_list() if column in ranks.columns else []
        if any(v > 0 for v in values):
            figure.add_trace(go.Bar(y=labels, x=values, name=name, orientation="h", marker_color=colour,
                                    hovertemplate="%{y}: %{x:.1f}%<extra>" + name + "</extra>"))
    figure.update_layout(**{**_LAYOUT, "height": max(380, 160 + 22 * len(labels))}, barmode="group",
                         title="Where each rank's GPU time went (% of span; categories may overlap)",
                         xaxis={"title": "% of the rank's GPU span"}, yaxis={"autorange": "reversed"})
    return figure


LANE_COLOURS = {"compute": BREAKDOWN_COLOURS["compute"], "communication": BREAKDOWN_COLOURS["communication"],
                "copy": BREAKDOWN_COLOURS["copy"], "nvtx": "#8c564b", "cuda_api": "#7f7f7f"}
TIMELINE_BINS = 1000


HIGHLIGHTED_LAUNCHES = 2000


def timeline_figure(analysis: Analysis, start_ms: float | None = None, end_ms: float | None = None, bins: int = TIMELINE_BINS,
                    highlight: str | None = None) -> go.Figure:
    """Return the zoomable timeline of an Nsight Systems run for the window [start_ms, end_ms), in ms from the run's
    first activity as the axis shows them (default: the whole run):
    one row per lane (GPU compute, communication, copies; host NVTX and CUDA API), shaded by the share of each of
    `bins` time bins the lane is busy; events listed one by one where a window holds few; idle gaps marked with their
    cause. Times on the axis are ms from the run's first activity."""
    timeline = analysis.timeline
    lanes = timeline.lanes() if timeline is not None else []
    figure = go.Figure()
    span = span_of(lanes)
    if span is None:
        figure.update_layout(title="No timeline: the input has no timed GPU or host activity", **_LAYOUT)
        return figure
    origin = span[0]
    start = max(span[0], origin + int(start_ms * 1e6)) if start_ms is not None else span[0]
    end = min(span[1], origin + int(end_ms * 1e6)) if end_ms is not None else span[1]
    if end <= start:
        start, end = span
    edges = np.linspace(start, end, bins + 1).round().astype(np.int64)
    centres_ms = (edges[:-1] + edges[1:]) / 2 / 1e6 - origin / 1e6
    names = [lane.name for lane in lanes]
    figure.add_trace(go.Heatmap(z=[lane.busy(edges) for lane in lanes], x=centres_ms, y=names, zmin=0, zmax=1, colorscale="Blues",
                                colorbar={"title": "busy", "tickformat": ".0%"}, hovertemplate="%{y} at %{x:.3f} ms: busy %{z:.0%}<extra></extra>"))
    for lane in lanes:
        listed = lane.events_in(start, end)
        if listed is None or not len(listed[0]):
            continue
        starts, ends, labels = listed
        figure.add_trace(go.Scatter(
            x=(starts + ends) / 2 / 1e6 - origin / 1e6, y=[lane.name] * len(starts), mode="markers",
            marker={"symbol": "line-ew", "size": 14, "line": {"width": 3, "color": LANE_COLOURS.get(lane.kind, "#444")}},
            customdata=[[label, "event"] for label in labels], showlegend=False,
            text=[f"{_text(label)[:120]}<br>{format_duration(float(e - s))}" for label, s, e in zip(labels, starts, ends, strict=True)],
            hovertemplate="%{text}<extra></extra>"))
    title_note = ""
    if highlight:
        # The launches of the kernel selected in the table, on their GPU lanes (named up to HIGHLIGHTED_LAUNCHES).
        ids = {i for i, n in (timeline.export.names.items() if timeline is not None and timeline.export is not None else []) if n == highlight}
        xs: list[float] = []
        ys: list[str] = []
        total = 0
        for lane in lanes:
            if lane.kind not in ("compute", "communication") or not ids:
                continue
            starts, ends = lane.labelled(start, end, ids)
            total += len(starts)
            if total <= HIGHLIGHTED_LAUNCHES:
                xs += list((starts + ends) / 2 / 1e6 - origin / 1e6)
                ys += [lane.name] * len(starts)
        if total and total <= HIGHLIGHTED_LAUNCHES:
            figure.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=_text(f"launches of {highlight[:60]}"),
                                        marker={"symbol": "diamond", "size": 9, "color": "#ff7f0e", "line": {"width": 1, "color": "black"}},
                                        hovertemplate="launch at %{x:.3f} ms<extra></extra>"))
        title_note = f"; {total:,} launch(es) of the selected kernel in view" + (" (zoom in to see them)" if total > HIGHLIGHTED_LAUNCHES else "")
    gaps = [g for g in (timeline.gaps if timeline is not None else [])]
    firsts = {d["device_id"]: d["first_ns"] for d in timeline.devices} if timeline is not None else {}
    shown = []
    for gap_index, gap in enumerate(gaps):
        gap_start = firsts.get(gap["device_id"], origin) + gap["start_ns"]
        if gap_start + gap["duration_ns"] < start or gap_start > end:
            continue
        shown.append((gap_index, gap, gap_start))
        figure.add_vrect(x0=gap_start / 1e6 - origin / 1e6, x1=(gap_start + gap["duration_ns"]) / 1e6 - origin / 1e6,
                         fillcolor="#d62728", opacity=0.12, line_width=0)
    if shown:
        figure.add_trace(go.Scatter(
            x=[(s + g["duration_ns"] / 2) / 1e6 - origin / 1e6 for _, g, s in shown],
            y=[next((n for n in names if n == f"GPU {g['device_id']} compute"), names[0]) for _, g, _ in shown],
            mode="markers", marker={"symbol": "x", "size": 11, "color": "#d62728"}, name="idle gaps (click for the cause)",
            customdata=[[str(i), "gap"] for i, _, _ in shown],
            text=[f"idle {format_duration(g['duration_ns'])}: {_text(g['cause'])} — {_text(g['cause_text'])}" for _, g, _ in shown],
            hovertemplate="%{text}<extra></extra>"))
    figure.update_layout(**{**_LAYOUT, "height": max(380, 140 + 42 * len(lanes))},
                         title=f"Timeline ({format_duration(float(end - start))} shown in {bins} bins; zoom to see more{title_note})",
                         xaxis={"title": "ms from the first activity"}, yaxis={"autorange": "reversed"}, uirevision="timeline")
    return figure
