"""The view of board telemetry (tegrastats): the board, the bandwidth and GPU-busy statistics, and the findings
with the stretch of time each covers."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.app.document import Block, Column, Document, FigureRef, Heading, Table, bullets, cell, para
from traceview.app.reporters.base import STAT_COLUMNS, ReportOptions, telemetry_record, telemetry_stat_rows
from traceview.app.views.common import banner, title
from traceview.wording import counted


def _record(analysis: Analysis) -> dict[str, Any]:
    t = telemetry_record(analysis)
    if t is None:
        raise ValueError(f"a {analysis.kind} analysis without telemetry")  # the registry pairs this view with telemetry only
    return t


def _findings(t: dict[str, Any]) -> list[str]:
    lines = []
    for finding in t["findings"]:
        when = (f" [at {finding['start_s']:.0f} s, {finding['duration_s']:.0f} s]"
                if finding["start_s"] is not None and finding["duration_s"] is not None else "")
        lines.append(f"{finding['message']}{when}")
    return lines or ["none"]


def document(analysis: Analysis, options: ReportOptions) -> Document:
    t = _record(analysis)
    samples = f"{counted(t['samples'], 'sample')} over {t['duration_s']:.0f} s"
    if t["skipped_lines"]:
        samples += f"; {t['skipped_lines']} non-sample line(s) skipped"
    blocks: list[Block] = [para(f"Board: {t['board_name'] or 'unknown'} — {t['board_identified']}"), para(samples),
                           FigureRef("traceview-main-figure", lambda: figure(analysis))]
    rows = telemetry_stat_rows(t)
    if rows:
        columns = (Column("", "text", wrap=True), *(Column(c, "number", wrap=True) for c in STAT_COLUMNS))
        blocks.append(Table(columns, tuple((cell(label), *(cell(v) for v in values)) for label, values in rows)))
    if t["peak_bandwidth_gb_s"]:
        blocks.append(para(f"Board peak bandwidth: {t['peak_bandwidth_gb_s']:.1f} GB/s"))
    blocks += [Heading("Findings"), bullets(_findings(t))]
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes), banner(analysis))


def record(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    return {"telemetry": _record(analysis)}


def summary(analysis: Analysis) -> str:
    t = _record(analysis)
    device = analysis.device
    return f"{t['samples']} tegrastats samples over {t['duration_s']:.0f} s — {device.name or 'unknown board'} ({device.how_identified})"


def side(analysis: Analysis) -> Document:
    t = _record(analysis)
    return Document(title(analysis), (Heading("Telemetry findings"), bullets([f["message"] for f in t["findings"]] or ["none"])),
                    tuple(analysis.notes))


def figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> Any:
    from traceview.app.figures import telemetry_figure

    return telemetry_figure(analysis)
