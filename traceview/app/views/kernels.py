"""The view of kernels, alone (Nsight Compute, nvprof) or in a whole run (Nsight Systems): the whole-run verdict and
findings, the device and its peaks, the ranked bottlenecks, steps, why each top kernel is bound and what to do, and
where the run's time went."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.roofline import BALANCED_LABEL, SHORT_BALANCED, SHORT_RECOMMENDATIONS, Bound
from traceview.analyzer.timeline import SHORT_KIND_ADVICE, advice_key
from traceview.app.document import (
    Block,
    Cell,
    Column,
    Document,
    FigureRef,
    Heading,
    Paragraph,
    Span,
    Style,
    Table,
    bullets,
    cell,
    name_span,
    para,
)
from traceview.app.formatting import format_duration, format_number, format_pct, format_rate
from traceview.app.reporters.base import (
    ReportOptions,
    device_record,
    diagnosis_lines,
    json_safe,
    kernel_records,
    launches_text,
    steps_lines,
    timeline_lines,
    timeline_record,
)
from traceview.app.reporters.base import (
    summary as totals_of,
)
from traceview.app.views.common import banner, blocks_from_lines, device_text, title
from traceview.numbers import reduced
from traceview.wording import counted

# The kernels whose diagnosis a brief report (the terminal) explains, and how many of ncu's rules it quotes for each.
DIAGNOSED_KERNELS = 3
BRIEF_RULES = 3
_BOUND_STYLES: dict[str, Style] = {"memory": "memory", "compute": "compute", "latency": "latency", "unknown": "unknown"}
# How many kernels a full report (Markdown) shows when --top is not given.
REPORT_TOP = 10


def headline_blocks(analysis: Analysis, findings: int = 5) -> list[Block]:
    """What an engineer reads first about a whole run: the verdict per run and per GPU (strong), then the most costly
    findings with their advice."""
    t = timeline_record(analysis)
    if t is None:
        return []
    blocks: list[Block] = []
    if t["verdict"] and len(t["devices"]) > 1:
        blocks.append(para(f"Verdict: {t['verdict']['message']}", style="strong"))
    per_device = [d["verdict_message"] for d in t["devices"] if d.get("verdict_message")]
    if len(t["devices"]) == 1:
        blocks += [para(f"Verdict: {message}", style="strong") for message in per_device]
    elif per_device:
        blocks.append(bullets(per_device))
    if t["findings"]:
        blocks.append(Heading("Top findings (most costly first)"))
        blocks.append(bullets([f"{f['rule']}{_cost(f['cost_ns'])}: {f['message']} — {f['advice']}" for f in t["findings"][:findings]]))
    return blocks


def _cost(cost_ns: float | None) -> str:
    return f" [{format_duration(cost_ns)}]" if cost_ns else ""


def _verdict_cell(kernel: dict[str, Any]) -> tuple[Cell, bool]:
    """A kernel's verdict (bound in its colour, then the label dimmed), and whether it is a guess from the name."""
    if kernel["bound"] == "unknown" and kernel.get("likely_bound"):
        return cell(Span(f"{kernel['label']}*", _BOUND_STYLES.get(kernel["likely_bound"], ""))), True
    return cell(Span(str(kernel["bound"]), _BOUND_STYLES.get(kernel["bound"], "")), Span(f" · {kernel['label']}", "dim")), False


def _next_step(analysis: Analysis, kernel: dict[str, Any], brief: bool) -> str:
    if kernel.get("label") == BALANCED_LABEL:
        return SHORT_BALANCED if brief else str(kernel["recommendation"])
    if kernel["bound"] != "unknown":
        return SHORT_RECOMMENDATIONS[Bound(kernel["bound"])] if brief else str(kernel["recommendation"])
    if not kernel.get("likely_bound"):
        return analysis.collection.short if brief else str(kernel["recommendation"])
    return SHORT_KIND_ADVICE.get(advice_key(kernel["kind"], kernel["likely_bound"], kernel.get("tensor_core"), kernel.get("name") or ""), "profile with ncu")


def kernel_table(analysis: Analysis, records: list[dict[str, Any]], brief: bool) -> tuple[Table, bool]:
    """The ranked bottlenecks as a table, and whether any verdict in it is a guess from the kernel's name."""
    # Whole runs without Nsight Compute data have no roofline numbers: empty columns would only squeeze the names.
    roofline = any(k[f] is not None for k in records for f in ("arithmetic_intensity", "roof_pct", "recoverable_ns"))
    columns = [Column("#", "number", 2), Column("kernel", "name", 24), Column("launches", "number", 6), Column("time", "number", 9),
               Column("share", "number", 6), Column("verdict", "text", 12)]
    if roofline:
        columns += [Column("AI", "number", 4), Column("% roof", "number", 6), Column("recoverable", "number", 9)]
    columns.append(Column("next step", "text", 10))
    rows, heuristic = [], False
    for k in records:
        verdict, guessed = _verdict_cell(k)
        heuristic |= guessed
        cells: list[Cell] = [cell(str(k["rank"])), (name_span(k["short_name"], k["name"]),), cell(launches_text(k)), cell(format_duration(k["duration_ns"])),
                             cell(format_pct(k["share_pct"])), verdict]
        if roofline:
            cells += [cell(format_number(k["arithmetic_intensity"])), cell(format_pct(k["roof_pct"])), cell(format_duration(k["recoverable_ns"]))]
        cells.append(cell(_next_step(analysis, k, brief)))
        rows.append(tuple(cells))
    return Table(tuple(columns), tuple(rows)), heuristic


def kernel_blocks(analysis: Analysis, options: ReportOptions) -> list[Block]:
    """The device, the totals, the ranked table, the steps and the explanations of the top kernels."""
    brief = options.brief
    totals = totals_of(analysis)
    device = device_record(analysis)
    peaks = [f"{key} {format_rate(peak['value'], 'FLOP/s' if 'flop' in key else 'B/s')} ({peak['source']})"
             for key, peak in device["peaks"].items() if peak["value"]]
    blocks: list[Block] = [para(device_text(analysis))]
    if peaks or analysis.timeline is None:
        blocks.append(para("Peaks: " + ("; ".join(peaks) if peaks else "none known (verdicts from SOL percentages only)")))
    blocks.append(para(f"{counted(totals['launches'], 'launch', 'launches')}, {counted(totals['kernels'], 'kernel')}, "
                       f"GPU time {format_duration(totals['total_duration_ns'])}, recoverable ≈ {format_duration(totals['recoverable_ns'])}"))
    top = options.top if options.top is not None or brief else REPORT_TOP
    records = kernel_records(analysis, top)
    table, heuristic = kernel_table(analysis, records, brief)
    blocks.append(table if records else para("No kernel launches in this export.", style="dim"))
    if heuristic:
        blocks.append(para("* kind and likely bound from the kernel's name (a heuristic); join Nsight Compute results with --ncu for measured verdicts",
                           style="dim"))
    hidden = analysis.kernels.height - (top or analysis.kernels.height)
    if hidden > 0:
        blocks.append(para(f"{hidden} more kernels (use --top to show more)", style="dim"))
    blocks += blocks_from_lines(steps_lines(analysis))
    explained = [(k, lines) for k in (records[:DIAGNOSED_KERNELS] if brief else records)
                 if (lines := diagnosis_lines(k, rules=BRIEF_RULES if brief else 5))]
    if explained:
        blocks.append(Heading("Why, and what to do"))
    for k, lines in explained:
        blocks.append(Paragraph((Span(f"{k['rank']}. "), name_span(k["short_name"], k["name"]), Span(f": {k['reason']}"))))
        blocks.append(bullets(lines, under_previous=True))
    return blocks


def document(analysis: Analysis, options: ReportOptions) -> Document:
    blocks = [*headline_blocks(analysis), FigureRef("traceview-main-figure", lambda: figure(analysis))]
    if analysis.timeline is not None and analysis.timeline.export is not None:
        from traceview.app.figures import timeline_figure

        blocks.append(FigureRef("traceview-timeline", lambda: timeline_figure(analysis)))
    blocks += kernel_blocks(analysis, options)
    blocks += blocks_from_lines(timeline_lines(analysis))
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes), banner(analysis))


def record(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    """The JSON keys of a whole run (`timeline`) and of an Nsight Compute export's steps (`steps`)."""
    data: dict[str, Any] = {}
    timeline = timeline_record(analysis)
    if timeline is not None:
        data["timeline"] = timeline
    if analysis.steps is not None:
        data["steps"] = json_safe(analysis.steps)
    return data


def summary(analysis: Analysis) -> str:
    device = analysis.device
    if analysis.timeline is not None and analysis.timeline.verdict:
        return f"{analysis.timeline.verdict['message']} — {counted(analysis.kernels.height, 'kernel')}, {device.name or 'unknown device'}"
    total = analysis.total_duration_ns
    recoverable = reduced(analysis.kernels["recoverable_ns"].sum()) if analysis.kernels.height and "recoverable_ns" in analysis.kernels.columns else None
    return (f"{counted(analysis.kernels.height, 'kernel')}, GPU time {format_duration(total)}, recoverable ≈ {format_duration(recoverable or None)} — "
            f"{device.name or 'unknown device'} ({device.how_identified})")


def side(analysis: Analysis) -> Document:
    """The dashboard's side panel: the whole-run verdict, findings and details."""
    blocks: list[Block] = []
    if analysis.timeline is not None:
        blocks = [Heading("Whole run"), *headline_blocks(analysis), Heading("Details"),
                  *(b for b in blocks_from_lines(timeline_lines(analysis)) if not isinstance(b, Paragraph))]
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes))


def has_points(analysis: Analysis) -> bool:
    from traceview.app.figures import has_roofline_points

    return has_roofline_points(analysis)


def figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> Any:
    """Where each GPU's time went for a whole run without roofline data, else the roofline (the highlighted kernel
    marked, every launch a point when asked)."""
    from traceview.app.figures import breakdown_figure, roofline_figure

    if analysis.timeline is not None and analysis.timeline.devices and not has_points(analysis):
        return breakdown_figure(analysis)
    return roofline_figure(analysis, highlight, per_launch)
