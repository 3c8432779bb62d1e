"""A run-vs-run Diff as a report (its document, and the `traceview diff` JSON contract as its record)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from traceview import __version__
from traceview.analyzer.diff import Diff, KernelChange
from traceview.app.document import Block, Cell, Column, Document, Heading, Report, Table, bullets, cell, name_span
from traceview.app.formatting import format_change, format_duration, format_pct
from traceview.app.reporters.base import source_record


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


def diff_report(diff: Diff, top: int | None = None, brief: bool = True) -> Report:
    """The diff as a report: the headline, the kernel (or run, or telemetry) table, the findings; in a full report
    also the warnings and regressions (the CLI prints those to stderr beside the terminal's table)."""
    shown = top or 15
    blocks: list[Block] = []
    if diff.kind == "kernels":
        wide = (Column("kernel", "name", wrap=True), Column("status", wrap=True), Column("before", "number", wrap=True),
                Column("after", "number", wrap=True), Column("change", "number", wrap=True), Column("verdict", wrap=True),
                Column("% of roof", wrap=True))
        blocks.append(Table(wide, tuple(_kernel_row(change) for change in diff.kernels[:shown])))
        if diff.telemetry:
            blocks.append(_telemetry_table(diff.telemetry, "timeline"))
    elif diff.kind == "llama":
        columns = tuple(Column(title, "number" if "tokens/s" in title or title in ("change", "MBU before", "MBU after") else "text", wrap=True)
                        for title in ("test", "configuration", "status", "before (tokens/s)", "after (tokens/s)", "change", "MBU before", "MBU after"))
        blocks.append(Table(columns, tuple(tuple(cell(v) for v in (
            str(run["test"]), run.get("configuration") or "", run.get("status") or "", _value(run["tokens_per_s"]),
            _value(run["tokens_per_s_after"]), _signed(run["change_pct"]), format_pct(run["mbu_pct"]), format_pct(run["mbu_pct_after"])))
            for run in diff.runs)))
    else:
        blocks.append(_telemetry_table(diff.telemetry, ""))
    if diff.findings:
        blocks.append(bullets(diff.findings))
    if not brief:
        for title, items in (("Warnings", diff.warnings), ("Regressions", diff.regressions)):
            if items:
                blocks += [Heading(title), bullets(items)]
    headline = _headline(diff)
    return Report(Document(f"traceview diff: {headline}", tuple(blocks), banner=headline), diff_data(diff, top))


def _telemetry_table(telemetry: dict[str, Any], title: str) -> Table:
    columns = (Column(title, wrap=True), Column("before", "number", wrap=True), Column("after", "number", wrap=True), Column("change", "number", wrap=True))
    return Table(columns, tuple((cell(name), cell(_value(values["before"])), cell(_value(values["after"])), cell(format_change(values)))
                                for name, values in telemetry.items()))


def _kernel_row(change: KernelChange) -> tuple[Cell, ...]:
    return (cell(name_span(change.short_name, change.name)), *(cell(text) for text in (
        change.status, format_duration(change.before_ns), format_duration(change.after_ns), _signed(change.change_pct),
        f"{change.bound_before or '—'} → {change.bound_after or '—'}",
        f"{format_pct(change.roof_pct_before)} → {format_pct(change.roof_pct_after)}")))


def _headline(diff: Diff) -> str:
    names = (diff.before.source.path.rsplit("/", 1)[-1], diff.after.source.path.rsplit("/", 1)[-1])
    if diff.kind == "kernels":
        return (f"{names[0]} → {names[1]}: total GPU time {format_duration(diff.total_before_ns)} → "
                f"{format_duration(diff.total_after_ns)} ({_signed(diff.total_change_pct)})")
    return f"{names[0]} → {names[1]}"


def _value(value: object) -> str:
    """A before/after cell: numbers to two decimals, words (a verdict) as they are, n/a for unknown."""
    if value is None:
        return "n/a"
    return f"{value:.2f}" if isinstance(value, (int, float)) else str(value)
