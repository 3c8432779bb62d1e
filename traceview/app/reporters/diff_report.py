"""Rendering of a run-vs-run Diff as a terminal table, Markdown or JSON (the `traceview diff` contract)."""

from __future__ import annotations

import io
import json
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceview import __version__
from traceview.analyzer.diff import Diff
from traceview.app.formatting import format_change, format_duration, format_pct, terminal_safe
from traceview.app.reporters.base import source_record
from traceview.app.reporters.markdown_report import escape_markdown


def _signed(pct: float | None) -> str:
    return "n/a" if pct is None else f"{pct:+.1f}%"


def diff_data(diff: Diff, top: int | None = None) -> dict[str, Any]:
    """Return the diff as plain data: both sources, totals (ns), per-kernel changes, warnings, regressions."""
    data: dict[str, Any] = {
        "traceview_version": __version__,
        "kind": diff.kind,
        "before": {"source": source_record(diff.before), "device": diff.before.device.name},
        "after": {"source": source_record(diff.after), "device": diff.after.device.name},
        "warnings": diff.warnings,
        "findings": diff.findings,
        "regressions": diff.regressions,
    }
    if diff.kind == "kernels":
        kernels = diff.kernels[:top] if top else diff.kernels
        data["total"] = {"before_ns": diff.total_before_ns, "after_ns": diff.total_after_ns, "change_pct": diff.total_change_pct}
        data["kernels"] = [asdict(change) for change in kernels]
        changed = [c for c in diff.kernels if c.change_pct is not None]
        data["top_regressions"] = [c.short_name for c in sorted(changed, key=lambda c: -(c.change_pct or 0)) if (c.change_pct or 0) > 0][:5]
        data["top_improvements"] = [c.short_name for c in sorted(changed, key=lambda c: c.change_pct or 0) if (c.change_pct or 0) < 0][:5]
        data["new"] = [c.short_name for c in diff.kernels if c.status == "new"]
        data["vanished"] = [c.short_name for c in diff.kernels if c.status == "vanished"]
        if diff.telemetry:
            data["timeline"] = diff.telemetry
    elif diff.kind == "llama":
        data["runs"] = diff.runs
    else:
        data["telemetry"] = diff.telemetry
    return data


def render_diff(diff: Diff, fmt: str, top: int | None = None, color: bool = False) -> str:
    if fmt == "json":
        return json.dumps(diff_data(diff, top), indent=2, allow_nan=False, default=str) + "\n"
    if fmt == "md":
        return _markdown(diff, top or 15)
    return _table(diff, top or 15, color)


def _kernel_rows(diff: Diff, top: int) -> list[list[str]]:
    return [[
        change.short_name, change.status, format_duration(change.before_ns), format_duration(change.after_ns), _signed(change.change_pct),
        f"{change.bound_before or '—'} → {change.bound_after or '—'}",
        f"{format_pct(change.roof_pct_before)} → {format_pct(change.roof_pct_after)}",
    ] for change in diff.kernels[:top]]


_KERNEL_HEADERS = ["kernel", "status", "before", "after", "change", "verdict", "% of roof"]


def _headline(diff: Diff) -> str:
    names = (diff.before.source.path.rsplit("/", 1)[-1], diff.after.source.path.rsplit("/", 1)[-1])
    if diff.kind == "kernels":
        return (f"{names[0]} → {names[1]}: total GPU time {format_duration(diff.total_before_ns)} → "
                f"{format_duration(diff.total_after_ns)} ({_signed(diff.total_change_pct)})")
    return f"{names[0]} → {names[1]}"


def _table(diff: Diff, top: int, color: bool) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=160, force_terminal=color, color_system="standard" if color else None, highlight=False)
    console.print(safe_text(_headline(diff), style="bold"))
    table = Table(header_style="bold")
    if diff.kind == "kernels":
        for header in _KERNEL_HEADERS:
            table.add_column(header, justify="right" if header in ("before", "after", "change") else "left", overflow="fold")
        for row in _kernel_rows(diff, top):
            table.add_row(*(safe_text(cell) for cell in row))
        if diff.telemetry:
            console.print(table)
            table = Table(header_style="bold", title="timeline")
            for header in ("", "before", "after", "change"):
                table.add_column(header)
            for name, values in diff.telemetry.items():
                table.add_row(name, *(_value(values[k]) for k in ("before", "after")), format_change(values))
    elif diff.kind == "llama":
        for header in ("test", "configuration", "status", "before (tokens/s)", "after (tokens/s)", "change", "MBU before", "MBU after"):
            table.add_column(header, overflow="fold")
        for run in diff.runs:
            table.add_row(safe_text(str(run["test"])), safe_text(run.get("configuration") or ""), run.get("status") or "",
                          _value(run["tokens_per_s"]), _value(run["tokens_per_s_after"]), _signed(run["change_pct"]),
                          format_pct(run["mbu_pct"]), format_pct(run["mbu_pct_after"]))
    else:
        for header in ("", "before", "after", "change"):
            table.add_column(header)
        for name, values in diff.telemetry.items():
            table.add_row(name, *(_value(values[k]) for k in ("before", "after")), format_change(values))
    console.print(table)
    for line in diff.findings:
        console.print(safe_text(f"- {line}"))
    return buffer.getvalue()


def _value(value: object) -> str:
    """A before/after cell: numbers to two decimals, words (a verdict) as they are, n/a for unknown."""
    if value is None:
        return "n/a"
    return f"{value:.2f}" if isinstance(value, (int, float)) else str(value)


def _markdown(diff: Diff, top: int) -> str:
    lines = [f"## traceview diff: {escape_markdown(_headline(diff))}", ""]
    if diff.kind == "kernels":
        lines += ["| " + " | ".join(_KERNEL_HEADERS) + " |", "|---|---|---:|---:|---:|---|---|"]
        lines += ["| " + " | ".join(escape_markdown(cell) for cell in row) + " |" for row in _kernel_rows(diff, top)]
        if diff.telemetry:
            lines += ["", "| timeline | before | after | change |", "|---|---:|---:|---:|"]
            lines += [f"| {escape_markdown(name)} | {v['before'] if v['before'] is not None else 'n/a'} | "
                      f"{v['after'] if v['after'] is not None else 'n/a'} | {format_change(v)} |" for name, v in diff.telemetry.items()]
    elif diff.kind == "llama":
        lines += ["| test | configuration | status | before (tokens/s) | after (tokens/s) | change |", "|---|---|---|---:|---:|---:|"]
        lines += [f"| {escape_markdown(r['test'])} | {escape_markdown(r.get('configuration') or '')} | {r.get('status') or ''} | {_value(r['tokens_per_s'])} | "
                  f"{_value(r['tokens_per_s_after'])} | {_signed(r['change_pct'])} |" for r in diff.runs]
    else:
        lines += ["| | before | after | change |", "|---|---:|---:|---:|"]
        lines += [f"| {name} | {v['before'] if v['before'] is not None else 'n/a'} | {v['after'] if v['after'] is not None else 'n/a'} | {format_change(v)} |"
                  for name, v in diff.telemetry.items()]
    for title, items in (("Findings", diff.findings), ("Warnings", diff.warnings), ("Regressions", diff.regressions)):
        if items:
            lines += ["", f"**{title}**", ""] + [f"- {escape_markdown(item)}" for item in items]
    return "\n".join(lines) + "\n"


def safe_text(text: object, style: str = "") -> Text:
    """A rich Text of a string that may come from the input (kernel names, paths), made inert for the terminal."""
    return Text(terminal_safe(text), style=style)
