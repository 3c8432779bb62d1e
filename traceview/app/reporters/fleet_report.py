"""The fleet as a report: its record is the JSON (`fleet.files`, `fleet.kernels`, `fleet.ranks`, `fleet.stragglers`,
`fleet.failures`), its document what the terminal, Markdown and HTML show (heatmap and per-rank bars as figures).

The JSON holds nothing that depends on how the fleet ran (engine, workers, cache, time): the same inputs give the same
bytes whatever the engine.
"""

from __future__ import annotations

from typing import Any

from traceview import __version__
from traceview.analyzer.fleet import FleetDiff, FleetResult
from traceview.app.document import (
    Block,
    Column,
    Document,
    FigureRef,
    Heading,
    Report,
    Table,
    bullets,
    cell,
    name_span,
    para,
)
from traceview.app.figures import fleet_breakdown_figure, fleet_heatmap_figure
from traceview.app.formatting import format_duration
from traceview.app.reporters.base import json_safe
from traceview.wording import counted


def fleet_record(result: FleetResult, top: int | None = None) -> dict[str, Any]:
    """Return the fleet view as plain data (times in ns, shares in %)."""
    kernels = result.kernels.head(top) if top else result.kernels
    record: dict[str, Any] = json_safe({
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
    return record


_METRIC_WORDS = {"step_median_ns": "median step time", "kernel_ns": "kernel time"}


def straggler_lines(result: FleetResult) -> list[str]:
    lines = []
    for s in result.stragglers:
        metric = _METRIC_WORDS.get(s["metric"], s["metric"])
        lines.append(f"rank {s['rank']} is a straggler: {metric} {format_duration(s['value'])} against the median {format_duration(s['median'])} "
                     f"(+{s['excess_pct']:.1f}%; threshold median + {result.k:g}·MAD = {format_duration(s['threshold'])})")
    return lines


_KERNEL_COLUMNS = (Column("kernel", "name"), Column("ranks", "number"), Column("launches", "number"), Column("total", "number"),
                   Column("median/rank", "number"), Column("max/rank", "number"), Column("imbalance", "number"), Column("slowest", "number"))
_RANK_COLUMNS = (*(Column(t, "number") for t in ("rank", "files", "GPUs", "kernel time", "step (median)", "compute %", "comm %", "copy %",
                                                 "UM %", "idle %")), Column("verdict", wrap=True))


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def fleet_report(result: FleetResult, top: int | None = None, brief: bool = True) -> Report:
    """The fleet as a report: files and ranks, the stragglers (or why there is none), the kernels across ranks, the
    ranks, the heatmap and per-rank bars (where figures are drawn), the failed files; its record the JSON contract."""
    ranks = result.ranks
    checked = " and ".join(_METRIC_WORDS.get(m, m) for m in (result.straggler_metric or "").split(", ") if m)
    default = result.notes[:1] or [f"no straggler (median + {result.k:g}·MAD of {checked or 'nothing: no rank summarised'})"]
    blocks: list[Block] = [para(line, style="strong" if result.stragglers else "") for line in straggler_lines(result) or default]
    blocks += [FigureRef("fleet-heatmap", lambda: fleet_heatmap_figure(result, top or 25)),
               FigureRef("fleet-ranks", lambda: fleet_breakdown_figure(result))]
    kernels = tuple((cell(name_span(k["short_name"] or k["kernel_name"], k["kernel_name"])), *(cell(v) for v in (
        str(k["ranks"]), f"{k['launches']:,}", format_duration(k["total_ns"]), format_duration(k["median_per_rank_ns"]),
        format_duration(k["max_per_rank_ns"]), "n/a" if k["imbalance"] is None else f"{k['imbalance']:.2f}×", str(k["slowest_rank"]))))
        for k in result.kernels.head(top or 15).iter_rows(named=True))
    blocks.append(Table(_KERNEL_COLUMNS, kernels, "Kernels across ranks"))
    rows = tuple(tuple(cell(v) for v in (
        str(r["rank"]), str(r["files"]), str(r.get("gpus") or "n/a"), format_duration(r["kernel_ns"]), format_duration(r["step_median_ns"]),
        _pct(r.get("compute_pct")), _pct(r.get("communication_pct")), _pct(r.get("copy_pct")), _pct(r.get("unified_memory_pct")),
        _pct(r.get("idle_pct")), r.get("verdict") or "")) for r in ranks.iter_rows(named=True))
    blocks.append(Table(_RANK_COLUMNS, rows, "Ranks"))
    blocks += [para(f"failed: {f['path']}: {f['error']}") for f in result.failures]
    title = f"traceview fleet: {counted(result.files.height, 'file')}, {counted(ranks.height, 'rank')}"
    banner = f"{counted(result.files.height, 'file')} summarised over {counted(ranks.height, 'rank')}, {len(result.failures)} failed"
    return Report(Document(title, tuple(blocks), banner=banner), fleet_record(result, top))


def fleet_diff_report(diff: FleetDiff, top: int | None = None, brief: bool = True) -> Report:
    """Two fleets compared as a report: the median kernel time per rank before and after, per-kernel changes, the
    regressions; its record the `fleet_diff` JSON contract."""
    kernels = diff.kernels.head(top) if top else diff.kernels
    t = diff.total
    change = "n/a" if t["change_pct"] is None else f"{t['change_pct']:+.1f}%"
    head = (f"median kernel time per rank: {format_duration(t['median_kernel_ns_per_rank_before'])} → "
            f"{format_duration(t['median_kernel_ns_per_rank_after'])} ({change}); ranks {t['ranks_before']} → {t['ranks_after']}")
    columns = (Column("kernel", "name"), Column("before (per rank)", "number"), Column("after (per rank)", "number"), Column("change", "number"))
    rows = tuple((cell(name_span(k["short_name"] or k["kernel_name"], k["kernel_name"])), cell(format_duration(k["before_ns"])),
                  cell(format_duration(k["after_ns"])), cell("n/a" if k["change_pct"] is None else f"{k['change_pct']:+.1f}%"))
                 for k in kernels.head(top or 15).iter_rows(named=True))
    blocks: list[Block] = [Table(columns, rows)]
    if diff.regressions and not brief:
        blocks += [Heading("Regressions"), bullets(diff.regressions)]
    record = json_safe({"traceview_version": __version__, "fleet_diff": {"total": diff.total, "kernels": kernels.to_dicts(), "regressions": diff.regressions}})
    return Report(Document("traceview fleet diff", tuple(blocks), banner=head), record)
