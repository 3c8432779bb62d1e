"""The view of llama.cpp measurements: one row per run (tokens/s, bytes per token, the bandwidth it implies, MBU,
prefill compute), then the findings."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.app.document import Block, Column, Document, FigureRef, Heading, Table, bullets, cell, para
from traceview.app.formatting import format_number, format_pct
from traceview.app.reporters.base import ReportOptions, run_records
from traceview.app.views.common import banner, device_text, title

_COLUMNS = (Column("#", "number", wrap=True), Column("model", "text", wrap=True), Column("test", "text", wrap=True),
            Column("ngl", "number", wrap=True), Column("tokens/s", "number", wrap=True), Column("bytes/token", "number", wrap=True),
            Column("achieved", "number", wrap=True), Column("MBU", "number", wrap=True), Column("prefill compute", "number", wrap=True),
            Column("note", "text", wrap=True))


def _findings(analysis: Analysis) -> list[str]:
    return [str(f["message"]) for f in analysis.llm.findings] if analysis.llm else []


def document(analysis: Analysis, options: ReportOptions) -> Document:
    rows = []
    for run in run_records(analysis):
        rows.append((
            cell(str(run["run"])), cell(str(run["model"] or "")), cell(f"{run['test']} ({run['phase']})"),
            cell("" if run["n_gpu_layers"] is None else str(run["n_gpu_layers"])),
            cell(format_number(run["tokens_per_s"], 4)),
            cell("" if run["bytes_per_token"] is None else f"{run['bytes_per_token'] / 1e9:.2f} GB"),
            cell("" if run["bandwidth_bytes_per_s"] is None else f"{run['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s"),
            cell("" if run["mbu_pct"] is None else format_pct(run["mbu_pct"])),
            cell("" if run["compute_pct"] is None else format_pct(run["compute_pct"])),
            cell(run["note"] or ""),
        ))
    blocks: list[Block] = [para(device_text(analysis)), FigureRef("traceview-main-figure", lambda: figure(analysis)), Table(_COLUMNS, tuple(rows))]
    findings = _findings(analysis)
    if findings:
        blocks.append(bullets(findings))
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes), banner(analysis))


def record(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    return {"runs": run_records(analysis), "findings": analysis.llm.findings if analysis.llm else []}


def summary(analysis: Analysis) -> str:
    runs = run_records(analysis)
    decode = sum(1 for r in runs if r["phase"] == "decode")
    device = analysis.device
    return f"{len(runs)} llama.cpp measurements ({decode} decode) — {device.name or 'unknown device'} ({device.how_identified})"


_SIDE_FIELDS = ("run", "model", "test", "n_gpu_layers", "tokens_per_s", "mbu_pct", "note")


def side(analysis: Analysis) -> Document:
    """The dashboard's side panel: the runs as a sortable table."""
    rows = tuple(tuple(cell(_side_value(r[c])) for c in _SIDE_FIELDS) for r in run_records(analysis))
    table = Table(tuple(Column(c, "number" if c in ("run", "n_gpu_layers", "tokens_per_s", "mbu_pct") else "text") for c in _SIDE_FIELDS), rows)
    return Document(title(analysis), (Heading("llama.cpp runs"), table), tuple(analysis.notes))


def _side_value(value: object) -> str:
    if value is None:
        return ""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> Any:
    from traceview.app.figures import runs_figure

    return runs_figure(analysis)
