"""The view of a PyTorch profiler trace: the whole-run view (as for an Nsight Systems export) with the steps first,
then the op roofline estimated from shapes, the collectives and the graphs."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.torch_trace import ESTIMATED, TorchRun
from traceview.app.document import Block, Column, Document, FigureRef, Heading, Table, bullets, cell, name_span, para
from traceview.app.formatting import format_duration, format_number, format_pct, format_rate
from traceview.app.reporters.base import ReportOptions, json_safe, timeline_lines
from traceview.app.views import kernels
from traceview.app.views.common import banner, blocks_from_lines, detail_of, title
from traceview.wording import counted

_OP_COLUMNS = (Column("op", "name", 16), Column("shapes", "text", 16, wrap=True), Column("calls", "number", 5), Column("time", "number", 9),
               Column("GFLOP/call", "number", 6), Column("achieved", "number", 12), Column("% FLOP", "number", 6), Column("% DRAM", "number", 6),
               Column("verdict*", "text", 8))


def _shapes(op: dict[str, Any]) -> str:
    dims = [d for d in op["input_dims"] if isinstance(d, list) and d]
    kind = next((t for t in op["input_types"] if isinstance(t, str) and t), "")
    return " × ".join("[" + ",".join(str(x) for x in d) + "]" for d in dims[:3]) + (f" {kind.removeprefix('c10::')}" if kind else "")


def step_blocks(run: TorchRun) -> list[Block]:
    """What held each step back, first: the steps, how much of each the GPU was busy, and what the graphs cover."""
    steps, graphs = run.steps, run.graphs
    blocks: list[Block] = []
    if steps:
        gpu = steps.get("median_gpu_ns")
        busy = f"; the GPU ran kernels {format_duration(gpu)} of the median step ({100 * gpu / steps['median_ns']:.0f}%)" if gpu and steps["median_ns"] else ""
        blocks.append(para(f"Steps ({steps['name']}): {counted(steps['count'], 'step')}, median {format_duration(steps['median_ns'])}, "
                           f"p99 {format_duration(steps['p99_ns'])}{busy}"))
    if graphs.get("replayed_kernels"):
        blocks.append(para(f"{'HIP' if run.rocm else 'CUDA'} graphs: {graphs['replayed_kernels']:,} of {graphs['kernels']:,} kernels replayed from "
                           f"{counted(graphs['graph_launches'], 'graph launch', 'graph launches')}"))
    if run.weights_per_step_bytes:
        blocks.append(para(f"Weights read per step (the linear layers' shapes): {format_rate(run.weights_per_step_bytes, 'B')}"))
    return blocks


def op_blocks(run: TorchRun, top: int | None) -> list[Block]:
    if not run.ops:
        return []
    rows = []
    for op in run.ops[:top or len(run.ops)]:
        rows.append((cell(name_span(op["op"])), cell(_shapes(op)), cell(f"{op['calls']:,}"), cell(format_duration(op["kernel_ns"])),
                     cell(format_number(op["flop_per_call"] / 1e9)), cell(format_rate(op["achieved_flop_per_s"], "FLOP/s")), cell(format_pct(op["compute_pct"])), cell(format_pct(op["memory_pct"])),
                     cell(str(op["bound"]))))
    return [Heading(f"Ops on the roofline ({ESTIMATED})"), Table(_OP_COLUMNS, tuple(rows)),
            para("* estimated from the ops' input shapes and types: FLOPs, and the compulsory bytes (each input read once, the output "
                 "written once), over the time of the kernels each call launched; % of the device's peak FLOP/s and DRAM bandwidth", style="dim")]


def collective_blocks(run: TorchRun) -> list[Block]:
    lines = []
    for c in run.collectives:
        sized = (f"; {format_rate(c['bytes'], 'B')} over the {c['sized']} with sizes, bus bandwidth {format_rate(c['bus_bytes_per_s'], 'B/s')}"
                 if c.get("bus_bytes_per_s") else "")
        lines.append(f"{c['collective']}: {counted(c['count'], 'kernel')}, {format_duration(c['kernel_ns'])}{sized}")
    return [Heading("Collectives"), bullets(lines)] if lines else []


def document(analysis: Analysis, options: ReportOptions) -> Document:
    run = detail_of(analysis, TorchRun)
    first = [para(run.headline[0].upper() + run.headline[1:], style="strong")] if run.headline and run.verdict is None else []
    blocks: list[Block] = [*first, *kernels.headline_blocks(analysis), *step_blocks(run), FigureRef("traceview-main-figure", lambda: figure(analysis))]
    if run.export is not None and run.export.kernels.height:
        from traceview.app.figures import timeline_figure

        blocks.append(FigureRef("traceview-timeline", lambda: timeline_figure(analysis)))
    blocks += kernels.kernel_blocks(analysis, options)
    blocks += op_blocks(run, 10 if options.brief else None)
    blocks += collective_blocks(run)
    blocks += blocks_from_lines(timeline_lines(analysis))
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes), banner(analysis))


def record(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    """The whole run's keys (`timeline`), and `torch`: the op roofline, collectives, graphs, weights per step."""
    run = detail_of(analysis, TorchRun)
    data = kernels.record(analysis, options)
    data["torch"] = json_safe({"ops": run.ops, "collectives": run.collectives, "graphs": run.graphs, "weights_per_step_bytes": run.weights_per_step_bytes,
                               "rocm": run.rocm, "rank": run.rank, "world_size": run.world_size, "op_verdicts": ESTIMATED,
                               "headline": run.headline})
    return data


def summary(analysis: Analysis) -> str:
    return kernels.summary(analysis)


def side(analysis: Analysis) -> Document:
    run = detail_of(analysis, TorchRun)
    base = kernels.side(analysis)
    return Document(base.title, (*step_blocks(run), *base.blocks, *collective_blocks(run)), base.notes)


def figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> Any:
    """The op roofline where the trace recorded shapes and its kernels carry no counters (a PyTorch trace never has
    them: the kernels' own chart would be empty), else the kernels' chart."""
    from traceview.app.figures import has_roofline_points, op_roofline_figure

    run = detail_of(analysis, TorchRun)
    if run.ops and not has_roofline_points(analysis):
        return op_roofline_figure(analysis, run.ops, highlight)
    return kernels.figure(analysis, highlight, per_launch)
