"""HTML reporter: one self-contained file (Plotly embedded, no network request), deterministic but for the timestamp."""

from __future__ import annotations

import html
from typing import Any, ClassVar

from traceview.analyzer.analysis import Analysis
from traceview.app.figures import main_figure, timeline_figure
from traceview.app.formatting import terminal_safe
from traceview.app.reporters.base import (
    STAT_COLUMNS,
    ReportOptions,
    diagnosis_lines,
    format_duration,
    format_number,
    format_pct,
    kernel_records,
    launches_text,
    provenance,
    run_records,
    steps_lines,
    summary,
    telemetry_record,
    telemetry_stat_rows,
    timeline_headline,
    timeline_lines,
)
from traceview.wording import counted

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; width: 100%; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.memory { color: #1f77b4; } .compute { color: #d62728; } .latency { color: #ff7f0e; } .unknown { color: #7f7f7f; }
.name { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
.note { color: #666; font-size: 0.85rem; }
"""


def _e(value: Any) -> str:
    """HTML-escaped text, its control, bidi-override and line-separator characters shown as escapes."""
    return html.escape("" if value is None else terminal_safe(value, limit=100_000), quote=True)


def _table(headers: list[tuple[str, bool]], rows: list[list[str]]) -> str:
    head = "".join(f'<th class="num">{_e(h)}</th>' if num else f"<th>{_e(h)}</th>" for h, num in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{cell}</td>' if headers[i][1] else f"<td>{cell}</td>" for i, cell in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _lines_html(lines: list[str], strong_first: bool = False) -> str:
    """Report lines as HTML: runs of `- ` items become lists, other lines paragraphs (the first bold when asked)."""
    parts, items = [], []
    for index, line in enumerate(lines):
        if line.startswith("- "):
            items.append(f"<li>{_e(line[2:].strip())}</li>")
            continue
        if items:
            parts.append(f"<ul>{''.join(items)}</ul>")
            items = []
        parts.append(f"<p><strong>{_e(line)}</strong></p>" if strong_first and index == 0 else f"<p>{_e(line)}</p>")
    if items:
        parts.append(f"<ul>{''.join(items)}</ul>")
    return "".join(parts)


class HTMLReporter:
    name: ClassVar[str] = "html"
    file_extension: ClassVar[str] = ".html"

    def render(self, analysis: Analysis, options: ReportOptions) -> str:
        figure = main_figure(analysis)
        # A fixed div id and config keep the output byte-identical for the same input.
        plot = figure.to_html(full_html=False, include_plotlyjs=True, div_id="traceview-main-figure",
                              config={"displaylogo": False, "responsive": True})
        title = f"traceview: {analysis.source.path.rsplit('/', 1)[-1]}"
        sections = [f"<h1>{_e(title)}</h1>", self._headline(analysis), self._summary(analysis), plot]
        if analysis.timeline is not None and analysis.timeline.export is not None:
            # The dashboard's timeline, whole run (a static page cannot re-bin on zoom: the bins are those of the whole run).
            sections.append("<h2>Timeline</h2>" + timeline_figure(analysis).to_html(
                full_html=False, include_plotlyjs=False, div_id="traceview-timeline", config={"displaylogo": False, "responsive": True}))
        if analysis.telemetry is not None:
            sections.append(self._telemetry(analysis))
        elif analysis.llm is not None:
            sections.append(self._runs(analysis))
        else:
            sections.append(self._kernels(analysis, options))
            if analysis.steps is not None:
                sections.append("<h2>Steps</h2>" + _lines_html(steps_lines(analysis)))
            if analysis.timeline is not None:
                sections.append("<h2>Whole run</h2>" + _lines_html(timeline_lines(analysis)))
        sections += [f'<p class="note">Note: {_e(note)}</p>' for note in analysis.notes]
        sections.append(self._provenance(analysis, options))
        return (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>\n" + "\n".join(sections) + "\n</body></html>\n"
        )

    def _headline(self, analysis: Analysis) -> str:
        lines = timeline_headline(analysis)
        return _lines_html(lines, strong_first=True) if lines else ""

    def _summary(self, analysis: Analysis) -> str:
        if analysis.telemetry is not None:
            t = telemetry_record(analysis) or {}
            return (f"<p>{t['samples']} tegrastats samples over {t['duration_s']:.0f} s on "
                    f"{_e(t['board_name'] or 'an unknown board')} ({_e(t['board_identified'])}).</p>")
        if analysis.llm is not None:
            return f"<p>{len(run_records(analysis))} llama.cpp measurements. Device: {_e(analysis.device.name or 'unknown')} ({_e(analysis.device.how_identified)}).</p>"
        totals = summary(analysis)
        by_bound = ", ".join(f"{_e(b)} {format_duration(ns)}" for b, ns in sorted(totals["duration_ns_by_bound"].items(), key=lambda kv: -kv[1]))
        return (f"<p>{counted(totals['launches'], 'launch', 'launches')} of {counted(totals['kernels'], 'kernel')}, {format_duration(totals['total_duration_ns'])} of GPU "
                f"time ({by_bound})" + (f"; about {format_duration(totals['recoverable_ns'])} recoverable" if totals["recoverable_ns"] else "") + ". "
                f"Device: {_e(analysis.device.name or 'unknown')} ({_e(analysis.device.how_identified)}).</p>")

    def _kernels(self, analysis: Analysis, options: ReportOptions) -> str:
        headers = [("#", True), ("kernel", False), ("launches", True), ("time", True), ("share", True), ("verdict", False),
                   ("AI (FLOP/B)", True), ("% of roof", True), ("recoverable", True), ("why", False), ("next step", False)]
        records = kernel_records(analysis, options.top)
        rows = [[
            str(k["rank"]), f'<span class="name" title="{_e(k["name"])}">{_e(k["short_name"])}</span>', launches_text(k),
            format_duration(k["duration_ns"]), format_pct(k["share_pct"]), f'<span class="{_e(k["bound"])}">{_e(k["bound"])}</span> · {_e(k["label"])}',
            format_number(k["arithmetic_intensity"]), format_pct(k["roof_pct"]), format_duration(k["recoverable_ns"]),
            _e(k["reason"]), _e(k["recommendation"]),
        ] for k in records]
        explained = [(k, diagnosis_lines(k)) for k in records]
        details = "".join(f"<h3>{k['rank']}. {_e(k['short_name'])}</h3>" + _lines_html(lines) for k, lines in explained if lines)
        return ("<h2>Ranked bottlenecks</h2>" + (_table(headers, rows) if rows else "<p>No kernel launches in this export.</p>")
                + (f"<h2>Why, and what to do</h2>{details}" if details else ""))

    def _telemetry(self, analysis: Analysis) -> str:
        t = telemetry_record(analysis) or {}
        rows = [[_e(label), *values] for label, values in telemetry_stat_rows(t)]
        table = _table([("", False), *((column, True) for column in STAT_COLUMNS)], rows) if rows else ""
        findings = "".join(f"<li>{_e(f['message'])}</li>" for f in t.get("findings", [])) or "<li>none</li>"
        return f"<h2>Telemetry</h2>{table}<h2>Findings</h2><ul>{findings}</ul>"

    def _runs(self, analysis: Analysis) -> str:
        headers = [("#", True), ("model", False), ("test", False), ("ngl", True), ("tokens/s", True), ("bytes/token", True),
                   ("achieved", True), ("MBU", True), ("note", False)]
        rows = [[
            str(r["run"]), _e(r["model"]), f"{_e(r['test'])} ({_e(r['phase'])})", _e(r["n_gpu_layers"]), format_number(r["tokens_per_s"], 4),
            "" if r["bytes_per_token"] is None else f"{r['bytes_per_token'] / 1e9:.2f} GB",
            "" if r["bandwidth_bytes_per_s"] is None else f"{r['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s",
            "" if r["mbu_pct"] is None else format_pct(r["mbu_pct"]), _e(r["note"]),
        ] for r in run_records(analysis)]
        findings = "".join(f"<li>{_e(f['message'])}</li>" for f in (analysis.llm.findings if analysis.llm else []))
        return "<h2>Runs</h2>" + _table(headers, rows) + (f"<h2>Findings</h2><ul>{findings}</ul>" if findings else "")

    def _provenance(self, analysis: Analysis, options: ReportOptions) -> str:
        rows = [[_e(key), _e(value)] for key, value in provenance(analysis, options).items()]
        return "<h2>Provenance</h2>" + _table([("", False), ("", False)], rows)
