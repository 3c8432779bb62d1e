"""Terminal reporter: a rich table of the ranked kernels with the device and totals above it."""

from __future__ import annotations

import io
from typing import ClassVar

from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.roofline import BALANCED_LABEL, SHORT_BALANCED, SHORT_RECOMMENDATIONS, Bound
from traceview.analyzer.timeline import SHORT_KIND_ADVICE, advice_key
from traceview.app.formatting import middle_cut, terminal_safe
from traceview.app.reporters.base import (
    STAT_COLUMNS,
    ReportOptions,
    device_record,
    diagnosis_lines,
    format_duration,
    format_number,
    format_pct,
    format_rate,
    kernel_records,
    launches_text,
    run_records,
    steps_lines,
    summary,
    telemetry_record,
    telemetry_stat_rows,
    timeline_headline,
    timeline_lines,
)
from traceview.wording import counted

# The kernels whose diagnosis the terminal prints below the table (reports show every kernel shown).
DIAGNOSED_KERNELS = 3
BOUND_STYLES = {"memory": "cyan", "compute": "magenta", "latency": "yellow", "unknown": "dim"}


class TerminalReporter:
    name: ClassVar[str] = "table"
    file_extension: ClassVar[str] = ".txt"

    def render(self, analysis: Analysis, options: ReportOptions) -> str:
        buffer = io.StringIO()
        console = Console(
            file=buffer,
            width=options.width,
            force_terminal=options.color,
            color_system="standard" if options.color else None,
            highlight=False,
            soft_wrap=False,
        )
        console.print(safe_text(f"{analysis.source.path}  [{analysis.source.format}]", style="bold"))
        if analysis.telemetry is not None:
            self._telemetry(console, analysis)
        elif analysis.llm is not None:
            self._runs(console, analysis)
        else:
            self._kernels(console, analysis, options)
        for note in analysis.notes:
            console.print(safe_text(f"note: {note}", style="dim"))
        return buffer.getvalue()

    def _telemetry(self, console: Console, analysis: Analysis) -> None:
        t = telemetry_record(analysis)
        assert t is not None
        console.print(safe_text(f"Board: {t['board_name'] or 'unknown'} — {t['board_identified']}"))
        line = f"{counted(t['samples'], 'sample')} over {t['duration_s']:.0f} s"
        if t["skipped_lines"]:
            line += f"; {t['skipped_lines']} non-sample line(s) skipped"
        console.print(safe_text(line))
        table = Table(header_style="bold")
        for title in ("", *STAT_COLUMNS):
            table.add_column(title, justify="left" if not title else "right")
        for label, values in telemetry_stat_rows(t):
            table.add_row(label, *values)
        if table.rows:
            console.print(table)
        if t["peak_bandwidth_gb_s"]:
            console.print(safe_text(f"Board peak bandwidth: {t['peak_bandwidth_gb_s']:.1f} GB/s"))
        console.print(safe_text("Findings:", style="bold"))
        for finding in t["findings"]:
            when = f" [at {finding['start_s']:.0f} s, {finding['duration_s']:.0f} s]" if finding["start_s"] is not None and finding["duration_s"] is not None else ""
            console.print(safe_text(f"- {finding['message']}{when}"))
        if not t["findings"]:
            console.print(safe_text("- none"))

    def _runs(self, console: Console, analysis: Analysis) -> None:
        device = device_record(analysis)
        console.print(safe_text(f"Device: {device['name'] or 'unknown'} — {device['identified']}"))
        table = Table(header_style="bold")
        for title in ("#", "model", "test", "ngl", "tokens/s", "bytes/token", "achieved", "MBU", "prefill compute", "note"):
            table.add_column(title, justify="left" if title in ("model", "test", "note") else "right", overflow="fold")
        for run in run_records(analysis):
            table.add_row(
                str(run["run"]), safe_text(str(run["model"] or "")), f"{run['test']} ({run['phase']})",
                "" if run["n_gpu_layers"] is None else str(run["n_gpu_layers"]),
                format_number(run["tokens_per_s"], 4),
                "" if run["bytes_per_token"] is None else f"{run['bytes_per_token'] / 1e9:.2f} GB",
                "" if run["bandwidth_bytes_per_s"] is None else f"{run['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s",
                "" if run["mbu_pct"] is None else format_pct(run["mbu_pct"]),
                "" if run["compute_pct"] is None else format_pct(run["compute_pct"]),
                safe_text(run["note"] or ""),
            )
        console.print(table)
        for finding in analysis.llm.findings if analysis.llm else []:
            console.print(safe_text(f"- {finding['message']}"))

    def _kernels(self, console: Console, analysis: Analysis, options: ReportOptions) -> None:
        totals = summary(analysis)
        device = device_record(analysis)
        peaks = [
            f"{key} {format_rate(peak['value'], 'FLOP/s' if 'flop' in key else 'B/s')} ({peak['source']})"
            for key, peak in device["peaks"].items()
            if peak["value"]
        ]
        for line in timeline_headline(analysis):
            console.print(safe_text(line, style="bold" if line.startswith("Verdict") else ""))
        console.print(safe_text(f"Device: {device['name'] or 'unknown'} — {device['identified']}"))
        if peaks or analysis.timeline is None:
            console.print(safe_text("Peaks: " + ("; ".join(peaks) if peaks else "none known (verdicts from SOL percentages only)")))
        console.print(
            safe_text(
                f"{counted(totals['launches'], 'launch', 'launches')}, {counted(totals['kernels'], 'kernel')}, "
                f"GPU time {format_duration(totals['total_duration_ns'])}, "
                f"recoverable ≈ {format_duration(totals['recoverable_ns'])}"
            )
        )
        records = kernel_records(analysis, options.top)
        # Whole runs without Nsight Compute data have no roofline numbers: empty columns would only squeeze the names.
        roofline = any(k[f] is not None for k in records for f in ("arithmetic_intensity", "roof_pct", "recoverable_ns"))
        columns = [("#", "right", 2), ("kernel", "left", 24), ("launches", "right", 6), ("time", "right", 9), ("share", "right", 6),
                   ("verdict", "left", 12)]
        if roofline:
            columns += [("AI", "right", 4), ("% roof", "right", 6), ("recoverable", "right", 9)]
        columns.append(("next step", "left", 10))
        table = Table(show_lines=False, header_style="bold", expand=False)
        for title, justify, width in columns:
            table.add_column(title, justify=justify, no_wrap=True, overflow="ellipsis", min_width=width,  # type: ignore[arg-type]
                             max_width=56 if title == "kernel" else None)
        heuristic = False
        for k in records:
            if k["bound"] == "unknown" and k.get("likely_bound"):
                verdict = safe_text(f"{k['label']}*", style=BOUND_STYLES.get(k["likely_bound"], ""))
                heuristic = True
            else:
                verdict = safe_text(f"{k['bound']}", style=BOUND_STYLES.get(k["bound"], ""))
                verdict.append(terminal_safe(f" · {k['label']}"), style="dim" if options.color else "")
            cells: list[str | Text] = [str(k["rank"]), safe_text(middle_cut(terminal_safe(k["short_name"]), 56)), launches_text(k),
                                       format_duration(k["duration_ns"]), format_pct(k["share_pct"]), verdict]
            if roofline:
                cells += [format_number(k["arithmetic_intensity"]), format_pct(k["roof_pct"]), format_duration(k["recoverable_ns"])]
            if k.get("label") == BALANCED_LABEL:
                cells.append(SHORT_BALANCED)
            else:
                short = analysis.collection.short if k["bound"] == Bound.UNKNOWN.value else SHORT_RECOMMENDATIONS[Bound(k["bound"])]
                cells.append(short if k["bound"] != "unknown" or not k.get("likely_bound")
                             else SHORT_KIND_ADVICE.get(advice_key(k["kind"], k["likely_bound"], k.get("tensor_core"), k.get("name") or ""), "profile with ncu"))
            table.add_row(*cells)
        console.print(table if records else safe_text("No kernel launches in this export.", style="dim"))
        if heuristic:
            console.print(safe_text("* kind and likely bound from the kernel's name (a heuristic); join Nsight Compute results with --ncu for measured verdicts",
                               style="dim"))
        hidden = analysis.kernels.height - (options.top or analysis.kernels.height)
        if hidden > 0:
            console.print(safe_text(f"{hidden} more kernels (use --top to show more)", style="dim"))
        for line in steps_lines(analysis):
            console.print(safe_text(line))
        explained = [(k, lines) for k in records[:DIAGNOSED_KERNELS] if (lines := diagnosis_lines(k, rules=3))]
        if explained:
            console.print(safe_text("Why, and what to do:", style="bold"))
        for k, lines in explained:
            console.print(safe_text(f"{k['rank']}. {middle_cut(terminal_safe(k['short_name']), 80)}: {k['reason']}"))
            for line in lines:
                console.print(safe_text(f"   - {line}"))
        if analysis.timeline is not None:
            for line in timeline_lines(analysis):
                console.print(safe_text(line))


def safe_text(text: object, style: str = "") -> Text:
    """A rich Text of a string that may come from the input (kernel names, paths), made inert for the terminal."""
    return Text(terminal_safe(text), style=style)
