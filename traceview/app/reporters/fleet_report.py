"""The fleet view as JSON (`fleet.files`, `fleet.kernels`, `fleet.ranks`, `fleet.stragglers`, `fleet.failures`),
a terminal table, Markdown and self-contained HTML (heatmap and per-rank bars from the dashboard's figure functions).

The JSON holds nothing that depends on how the fleet ran (engine, workers, cache, time): the same inputs give the same
bytes whatever the engine.
"""

from __future__ import annotations

import html
import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from traceview import __version__
from traceview.analyzer.fleet import FleetDiff, FleetResult
from traceview.app.figures import fleet_breakdown_figure, fleet_heatmap_figure
from traceview.app.formatting import format_duration, middle_cut, terminal_safe
from traceview.app.reporters.base import json_safe
from traceview.app.reporters.markdown_report import escape_markdown
from traceview.wording import counted


def fleet_record(result: FleetResult, top: int | None = None) -> dict[str, Any]:
    """Return the fleet view as plain data (times in ns, shares in %)."""
    kernels = result.kernels.head(top) if top else result.kernels
    return json_safe({
        "traceview_version": __version__,
        "fleet": {
            "files": result.files.to_dicts(),
            "kernels": kernels.to_dicts(),
            "ranks": result.ranks.to_dicts(),
            "stragglers": result.stragglers,
            "straggler_metric": result.straggler_metric,
            "straggler_k": result.k,
            "failures": result.failures,
            "notes": result.notes,
            # Per rank and kernel: what the heatmap shows, so a saved result opens in the dashboard as it was.
            "rank_kernels": result.per_rank_kernels.to_dicts() if result.per_rank_kernels is not None else [],
        },
    })


_METRIC_WORDS = {"step_median_ns": "median step time", "kernel_ns": "kernel time"}


def straggler_lines(result: FleetResult) -> list[str]:
    lines = []
    for s in result.stragglers:
        metric = _METRIC_WORDS.get(s["metric"], s["metric"])
        lines.append(f"rank {s['rank']} is a straggler: {metric} {format_duration(s['value'])} against the median {format_duration(s['median'])} "
                     f"(+{s['excess_pct']:.1f}%; threshold median + {result.k:g}·MAD = {format_duration(s['threshold'])})")
    return lines


def render_table(result: FleetResult, top: int = 15, width: int = 160) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    ranks = result.ranks
    console.print(f"{counted(result.files.height, 'file')} summarised over {counted(ranks.height, 'rank')}, {len(result.failures)} failed", markup=False, highlight=False)
    checked = " and ".join(_METRIC_WORDS.get(m, m) for m in (result.straggler_metric or "").split(", ") if m)
    default = result.notes[:1] or [f"no straggler (median + {result.k:g}·MAD of {checked or 'nothing: no rank summarised'})"]
    for line in straggler_lines(result) or default:
        console.print(line, markup=False, highlight=False)
    table = Table(title="Kernels across ranks", header_style="bold")
    for title, justify in (("kernel", "left"), ("ranks", "right"), ("launches", "right"), ("total", "right"), ("median/rank", "right"),
                           ("max/rank", "right"), ("imbalance", "right"), ("slowest", "right")):
        table.add_column(title, justify=justify)  # type: ignore[arg-type]
    for k in result.kernels.head(top).iter_rows(named=True):
        table.add_row(middle_cut(terminal_safe(k["short_name"] or k["kernel_name"]), 48), str(k["ranks"]), f"{k['launches']:,}",
                      format_duration(k["total_ns"]), format_duration(k["median_per_rank_ns"]), format_duration(k["max_per_rank_ns"]),
                      "n/a" if k["imbalance"] is None else f"{k['imbalance']:.2f}×", str(k["slowest_rank"]))
    console.print(table)
    per_rank = Table(title="Ranks", header_style="bold")
    for title in ("rank", "files", "GPUs", "kernel time", "step (median)", "compute %", "comm %", "copy %", "UM %", "idle %", "verdict"):
        per_rank.add_column(title, justify="left" if title == "verdict" else "right")
    for r in ranks.iter_rows(named=True):
        pct = lambda v: "n/a" if v is None else f"{v:.1f}"
        per_rank.add_row(str(r["rank"]), str(r["files"]), str(r.get("gpus") or "n/a"), format_duration(r["kernel_ns"]),
                         format_duration(r["step_median_ns"]), pct(r.get("compute_pct")), pct(r.get("communication_pct")),
                         pct(r.get("copy_pct")), pct(r.get("unified_memory_pct")), pct(r.get("idle_pct")), terminal_safe(r.get("verdict") or ""))
    console.print(per_rank)
    for failure in result.failures:
        console.print(f"failed: {terminal_safe(failure['path'])}: {terminal_safe(failure['error'])}", markup=False, highlight=False)
    return buffer.getvalue()


def render_markdown(result: FleetResult, top: int = 15) -> str:
    lines = [f"## traceview fleet: {counted(result.files.height, 'file')}, {counted(result.ranks.height, 'rank')}", ""]
    lines += [f"- **{escape_markdown(line)}**" for line in straggler_lines(result)] or [f"- {escape_markdown(n)}" for n in result.notes] or ["- no straggler"]
    lines += ["", "| kernel | ranks | launches | total | median/rank | max/rank | imbalance | slowest rank |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k in result.kernels.head(top).iter_rows(named=True):
        lines.append(f"| {escape_markdown(k['short_name'] or k['kernel_name'])} | {k['ranks']} | {k['launches']:,} | {format_duration(k['total_ns'])} | "
                     f"{format_duration(k['median_per_rank_ns'])} | {format_duration(k['max_per_rank_ns'])} | "
                     f"{'n/a' if k['imbalance'] is None else format(k['imbalance'], '.2f') + '×'} | {k['slowest_rank']} |")
    lines += ["", "| rank | kernel time | step (median) | compute % | comm % | copy % | unified memory % | idle % |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result.ranks.iter_rows(named=True):
        pct = lambda v: "n/a" if v is None else f"{v:.1f}"
        lines.append(f"| {r['rank']} | {format_duration(r['kernel_ns'])} | {format_duration(r['step_median_ns'])} | {pct(r.get('compute_pct'))} | "
                     f"{pct(r.get('communication_pct'))} | {pct(r.get('copy_pct'))} | {pct(r.get('unified_memory_pct'))} | {pct(r.get('idle_pct'))} |")
    if result.failures:
        lines += ["", "**Failed files**", ""] + [f"- `{escape_markdown(f['path'])}`: {escape_markdown(f['error'])}" for f in result.failures]
    return "\n".join(lines) + "\n"


def render_html(result: FleetResult, top: int = 25) -> str:
    heatmap = fleet_heatmap_figure(result, top).to_html(full_html=False, include_plotlyjs=True, div_id="fleet-heatmap", config={"displaylogo": False})
    bars = fleet_breakdown_figure(result).to_html(full_html=False, include_plotlyjs=False, div_id="fleet-ranks", config={"displaylogo": False})
    stragglers = "".join(f"<li><strong>{html.escape(line)}</strong></li>" for line in straggler_lines(result)) or "<li>no straggler</li>"
    failures = "".join(f"<li><code>{html.escape(f['path'])}</code>: {html.escape(f['error'])}</li>" for f in result.failures)
    title = f"traceview fleet: {counted(result.files.height, 'file')}, {counted(result.ranks.height, 'rank')}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html.escape(title) + "</title></head><body>"
            f"<h1>{html.escape(title)}</h1><ul>{stragglers}</ul>{heatmap}{bars}"
            + (f"<h2>Failed files</h2><ul>{failures}</ul>" if failures else "") + "</body></html>\n")


def render_fleet(result: FleetResult, fmt: str, top: int | None = None) -> str:
    """Return the fleet view in `fmt` (table, json, md, html)."""
    if fmt == "json":
        return json.dumps(fleet_record(result, top), indent=2, allow_nan=False) + "\n"
    if fmt == "md":
        return render_markdown(result, top or 15)
    if fmt == "html":
        return render_html(result, top or 25)
    return render_table(result, top or 15)


def render_fleet_diff(diff: FleetDiff, fmt: str, top: int | None = None) -> str:
    """Return two fleets compared, in `fmt` (table, json, md; html gives md inside a page)."""
    kernels = diff.kernels.head(top) if top else diff.kernels
    if fmt == "json":
        return json.dumps(json_safe({"traceview_version": __version__, "fleet_diff": {
            "total": diff.total, "kernels": kernels.to_dicts(), "regressions": diff.regressions}}), indent=2, allow_nan=False) + "\n"
    t = diff.total
    change = "n/a" if t["change_pct"] is None else f"{t['change_pct']:+.1f}%"
    head = (f"median kernel time per rank: {format_duration(t['median_kernel_ns_per_rank_before'])} → "
            f"{format_duration(t['median_kernel_ns_per_rank_after'])} ({change}); ranks {t['ranks_before']} → {t['ranks_after']}")
    rows = [(k["short_name"] or k["kernel_name"], format_duration(k["before_ns"]), format_duration(k["after_ns"]),
             "n/a" if k["change_pct"] is None else f"{k['change_pct']:+.1f}%") for k in kernels.head(top or 15).iter_rows(named=True)]
    if fmt in ("md", "html"):
        lines = ["## traceview fleet diff", "", escape_markdown(head), "", "| kernel | before (per rank) | after (per rank) | change |", "|---|---:|---:|---:|"]
        lines += [f"| {escape_markdown(n)} | {b} | {a} | {c} |" for n, b, a, c in rows]
        lines += [""] + [f"- **regression:** {escape_markdown(r)}" for r in diff.regressions]
        text = "\n".join(lines) + "\n"
        return text if fmt == "md" else f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body><pre>{html.escape(text)}</pre></body></html>\n"
    buffer = io.StringIO()
    console = Console(file=buffer, width=160, force_terminal=False, color_system=None)
    console.print(head, markup=False, highlight=False)
    table = Table(header_style="bold")
    for title, justify in (("kernel", "left"), ("before (per rank)", "right"), ("after (per rank)", "right"), ("change", "right")):
        table.add_column(title, justify=justify)  # type: ignore[arg-type]
    for n, b, a, c in rows:
        table.add_row(middle_cut(terminal_safe(n), 56), b, a, c)
    console.print(table)
    return buffer.getvalue()
