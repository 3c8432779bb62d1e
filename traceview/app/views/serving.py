"""The view of serving benchmark results: per result the measured latencies beside the TPOT floor the weights and
the KV cache set on the GPU, the MBU of the median and p99 TPOT, and what the gap is most likely made of."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.serving import ServingRun
from traceview.app.document import Block, Column, Document, FigureRef, Heading, Table, bullets, cell, para
from traceview.app.formatting import format_pct, format_rate
from traceview.app.reporters.base import ReportOptions, json_safe
from traceview.app.views.common import banner, detail_of, device_text, title

_COLUMNS = (Column("#", "number"), Column("model", "text", wrap=True), Column("conc.", "number"), Column("out tok/s", "number"),
            Column("TTFT p50", "number"), Column("TPOT p50", "number"), Column("TPOT p99", "number"), Column("ITL p99", "number"),
            Column("bytes/step", "number"), Column("TPOT floor", "number"), Column("MBU p50", "number"), Column("MBU p99", "number"))


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f} ms"


def _model(name: str | None) -> str:
    return (name or "").rstrip("/").rsplit("/", 1)[-1] or "?"


def document(analysis: Analysis, options: ReportOptions) -> Document:
    run = detail_of(analysis, ServingRun)
    rows = tuple((cell(str(r["result"])), cell(_model(r["model"])), cell("n/a" if r["concurrency"] is None else f"{r['concurrency']:.0f}"),
                  cell("n/a" if r["output_tokens_per_s"] is None else f"{r['output_tokens_per_s']:,.0f}"), cell(_ms(r["median_ttft_ms"])),
                  cell(_ms(r["median_tpot_ms"])), cell(_ms(r["p99_tpot_ms"])), cell(_ms(r["p99_itl_ms"])),
                  cell(format_rate(r["bytes_per_step"], "B")), cell(_ms(r["tpot_floor_ms"])), cell(format_pct(r["mbu_median_pct"])),
                  cell(format_pct(r["mbu_p99_pct"]))) for r in run.results)
    bandwidth = (f"Bandwidth: {format_rate(run.bandwidth_bytes_per_s, 'B/s')} ({run.bandwidth_source})" if run.bandwidth_bytes_per_s
                 else "Bandwidth: unknown (pass --gpu or --bandwidth)")
    blocks: list[Block] = [para(device_text(analysis)), para(bandwidth), FigureRef("traceview-main-figure", lambda: figure(analysis)),
                           Table(_COLUMNS, rows)]
    sources = sorted({r["concurrency_source"] for r in run.results if r["concurrency"] is not None})
    if sources:
        blocks.append(para("Concurrency from " + "; ".join(sources) + "; the floor reads the weights once per step and every running "
                           "sequence's KV cache at its mean context (prompt + half the output)", style="dim"))
    if run.findings:
        blocks += [Heading("What the gap is most likely made of"), bullets([f["message"] for f in run.findings])]
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes), banner(analysis))


def record(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    """`serving`: per result the measured metrics and its floor (bytes, ms, %), the findings and the assumptions."""
    run = detail_of(analysis, ServingRun)
    return {"serving": json_safe({"results": run.results, "findings": run.findings, "assumptions": run.assumptions,
                                  "bandwidth_bytes_per_s": run.bandwidth_bytes_per_s, "bandwidth_source": run.bandwidth_source})}


def summary(analysis: Analysis) -> str:
    run = detail_of(analysis, ServingRun)
    first = run.results[0] if run.results else {}
    mbu = first.get("mbu_median_pct")
    return (f"{len(run.results)} serving result(s); median TPOT {_ms(first.get('median_tpot_ms'))}"
            + (f", MBU {mbu:.0f}%" if mbu is not None else "") + f" — {analysis.device.name or 'unknown GPU'}")


def side(analysis: Analysis) -> Document:
    run = detail_of(analysis, ServingRun)
    return Document(title(analysis), (Heading("Findings"), bullets([f["message"] for f in run.findings] or ["none"])), tuple(analysis.notes))


def figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> Any:
    """Measured median and p99 TPOT beside the floor, per result (ms)."""
    import plotly.graph_objects as go

    run = detail_of(analysis, ServingRun)
    labels = [f"#{r['result']} {_model(r['model'])}" for r in run.results]
    figure = go.Figure()
    for name, key, colour in (("TPOT floor (bandwidth)", "tpot_floor_ms", "#d9d9d9"), ("median TPOT", "median_tpot_ms", "#1f77b4"),
                              ("p99 TPOT", "p99_tpot_ms", "#ff7f0e")):
        figure.add_trace(go.Bar(x=labels, y=[r[key] for r in run.results], name=name, marker_color=colour))
    figure.update_layout(barmode="group", title="Serving: time per output token against its memory-bandwidth floor", yaxis_title="ms",
                         template="plotly_white", height=420)
    return figure
