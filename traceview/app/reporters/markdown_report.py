"""Markdown reporter: a summary paragraph and the ranked table, for tickets (GitHub, GitLab, Jira)."""

from __future__ import annotations

import html
import re
from typing import ClassVar

from traceview.analyzer.analysis import Analysis
from traceview.app.formatting import terminal_safe
from traceview.app.reporters.base import (
    STAT_COLUMNS,
    ReportOptions,
    device_record,
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

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-!|~])")


def escape_markdown(text: object) -> str:
    """Return text that renders literally in Markdown: HTML-escaped, punctuation and pipes backslash-escaped."""
    # Controls, bidi overrides and line separators as visible escapes first, as the terminal shows them.
    escaped = html.escape(terminal_safe(text), quote=False)
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", escaped)
    return " ".join(escaped.split())  # a newline would end a table row


class MarkdownReporter:
    name: ClassVar[str] = "md"
    file_extension: ClassVar[str] = ".md"

    def render(self, analysis: Analysis, options: ReportOptions) -> str:
        if analysis.telemetry is not None:
            return self._telemetry(analysis, options)
        if analysis.llm is not None:
            return self._runs(analysis, options)
        return self._kernels(analysis, options)

    def _block(self, lines: list[str]) -> list[str]:
        """Report lines as Markdown paragraphs and lists: a blank line before each paragraph, so lines do not merge."""
        out: list[str] = []
        for line in lines:
            if not line.startswith("- ") and out:
                out.append("")
            out.append(self._line(line, bold=line.startswith("Verdict")))
        return out

    @staticmethod
    def _line(line: str, bold: bool = False) -> str:
        """A report line as Markdown: list items stay list items (indentation kept), everything else is escaped."""
        stripped = line.lstrip(" ")
        if line.startswith("- "):
            body = line[2:]
            depth = len(body) - len(body.lstrip(" "))
            return "  " * (depth // 2) + "- " + escape_markdown(body.lstrip(" "))
        text = escape_markdown(stripped)
        return f"**{text}**" if bold else text

    @staticmethod
    def _provenance(analysis: Analysis, options: ReportOptions) -> list[str]:
        facts = provenance(analysis, options)
        shown = ", ".join(f"{key.replace('_', ' ')}: {escape_markdown(value)}" for key, value in facts.items() if value not in (None, ""))
        return ["", "<details><summary>Provenance</summary>", "", shown, "", "</details>", ""]

    def _runs(self, analysis: Analysis, options: ReportOptions) -> str:
        device = device_record(analysis)
        lines = [f"## traceview: {escape_markdown(analysis.source.path.rsplit('/', 1)[-1])}", ""]
        lines.append(f"Device: {escape_markdown(device['name'] or 'unknown')} ({escape_markdown(device['identified'])}).")
        lines += ["", "| # | model | test | ngl | tokens/s | bytes/token | achieved | MBU | note |", "|---:|---|---|---:|---:|---:|---:|---:|---|"]
        for run in run_records(analysis):
            ngl = "" if run["n_gpu_layers"] is None else str(run["n_gpu_layers"])
            per_token = "" if run["bytes_per_token"] is None else f"{run['bytes_per_token'] / 1e9:.2f} GB"
            achieved = "" if run["bandwidth_bytes_per_s"] is None else f"{run['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s"
            mbu = "" if run["mbu_pct"] is None else format_pct(run["mbu_pct"])
            lines.append(
                f"| {run['run']} | {escape_markdown(run['model'] or '')} | {escape_markdown(run['test'])} ({run['phase']}) | "
                f"{ngl} | {format_number(run['tokens_per_s'], 4)} | {per_token} | {achieved} | {mbu} | {escape_markdown(run['note'] or '')} |"
            )
        findings = analysis.llm.findings if analysis.llm else []
        if findings:
            lines += ["", "**Findings**", ""] + [f"- {escape_markdown(f['message'])}" for f in findings]
        return "\n".join(lines + self._provenance(analysis, options))

    def _telemetry(self, analysis: Analysis, options: ReportOptions) -> str:
        t = telemetry_record(analysis)
        assert t is not None
        name = escape_markdown(analysis.source.path.rsplit("/", 1)[-1])
        lines = [f"## traceview: {name}", ""]
        lines.append(
            f"{t['samples']} tegrastats samples over {t['duration_s']:.0f} s on "
            f"{escape_markdown(t['board_name'] or 'an unknown board')} ({escape_markdown(t['board_identified'])})."
        )
        rows = telemetry_stat_rows(t)
        if rows:
            lines += ["", "| | " + " | ".join(STAT_COLUMNS) + " |", "|---" + "|---:" * len(STAT_COLUMNS) + "|"]
            lines += [f"| {label} | " + " | ".join(values) + " |" for label, values in rows]
        lines += ["", "**Findings**", ""]
        lines += [f"- {escape_markdown(f['message'])}" for f in t["findings"]] or ["- none"]
        return "\n".join(lines + self._provenance(analysis, options))

    def _kernels(self, analysis: Analysis, options: ReportOptions) -> str:
        totals = summary(analysis)
        device = device_record(analysis)
        top = options.top if options.top is not None else 10
        kernels = kernel_records(analysis, top)
        lines = [f"## traceview: {escape_markdown(analysis.source.path.rsplit('/', 1)[-1])}", ""]
        headline = timeline_headline(analysis)
        if headline:
            lines += self._block(headline) + [""]
        by_bound = ", ".join(
            f"{bound} {format_duration(ns)}" for bound, ns in sorted(totals["duration_ns_by_bound"].items(), key=lambda kv: -kv[1])
        )
        lines.append(
            f"{counted(totals['launches'], 'launch', 'launches')} of {counted(totals['kernels'], 'kernel')}, "
            f"{format_duration(totals['total_duration_ns'])} of GPU time"
            + (f" ({by_bound})" if by_bound and totals["total_duration_ns"] else "")
            + (f"; about {format_duration(totals['recoverable_ns'])} recoverable" if totals["recoverable_ns"] else "") + ". "
            f"Device: {escape_markdown(device['name'] or 'unknown')} ({escape_markdown(device['identified'])})."
        )
        if kernels:
            lines += ["", "| # | kernel | launches | time | share | verdict | AI (FLOP/B) | % of roof | recoverable |", "|---:|---|---:|---:|---:|---|---:|---:|---:|"]
        else:
            lines += ["", "No kernel launches in this export."]
        for k in kernels:
            lines.append(
                f"| {k['rank']} | {escape_markdown(k['short_name'])} | {launches_text(k)} | {format_duration(k['duration_ns'])} | "
                f"{format_pct(k['share_pct'])} | {k['bound']}: {escape_markdown(k['label'])} | {format_number(k['arithmetic_intensity'])} | "
                f"{format_pct(k['roof_pct'])} | {format_duration(k['recoverable_ns'])} |"
            )
        if len(analysis.kernels) > len(kernels):
            lines.append("")
            lines.append(f"{len(analysis.kernels) - len(kernels)} more kernels not shown (`--top`).")
        if analysis.timeline is not None:
            lines += [""] + self._block(timeline_lines(analysis))
        if analysis.steps is not None:
            lines += [""] + self._block(steps_lines(analysis))
        lines += ["", "**Why, and what to do**", ""]
        for k in kernels:
            lines.append(f"{k['rank']}. {escape_markdown(k['short_name'])}: {escape_markdown(k['reason'])}. Next: {escape_markdown(k['recommendation'])}.")
            lines += [f"   - {escape_markdown(line)}" for line in diagnosis_lines(k)]
        for note in analysis.notes:
            lines += ["", f"_Note: {escape_markdown(note)}_"]
        return "\n".join(lines + self._provenance(analysis, options))
