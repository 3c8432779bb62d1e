"""The reporter interface and the plain data every reporter renders (the analysis turned into dicts)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from traceview import __version__
from traceview.analyzer.analysis import Analysis
from traceview.app.document import Report
from traceview.app.formatting import format_duration, format_number, format_pct, format_rate, gap_calls_text
from traceview.wording import counted, format_count

__all__ = ["format_duration", "format_number", "format_pct", "format_rate"]

KERNEL_FIELDS = (
    "rank",
    "name",
    "short_name",
    "launches",
    "duration_ns",
    "avg_duration_ns",
    "median_duration_ns",
    "min_duration_ns",
    "max_duration_ns",
    "share_pct",
    "bound",
    "label",
    "binding_roof",
    "precision",
    "arithmetic_intensity",
    "achieved_flop_per_s",
    "roof_pct",
    "compute_pct",
    "memory_pct",
    "recoverable_ns",
    "recoverable_source",
    "reason",
    "recommendation",
    "devices",
    "p99_duration_ns",
    "kind",
    "likely_bound",
    "graph_launches",
    "failed_launches",
    # Diagnosis (Nsight Compute evidence): see analyzer.diagnosis.
    "rules",
    "occupancy",
    "stalls",
    "stall_source",
    "tensor_core",
    "tensor_core_source",
    "advice",
)


@dataclass(frozen=True)
class ReportOptions:
    top: int | None = None  # None: every kernel
    brief: bool = False  # the terminal's short form: three kernels explained, short advice
    per_launch: bool = False
    color: bool = False
    width: int = 160
    command_line: str | None = None
    generated_at: str | None = None  # ISO timestamp; the only thing that differs between two reports of one input


class Reporter(Protocol):
    """Renders a report (a document and its machine record) in one output format."""

    name: ClassVar[str]  # value for --format
    file_extension: ClassVar[str]  # lets -o infer the format
    brief: ClassVar[bool]  # whether the document is the short form (the terminal's)

    def render(self, report: Report, options: ReportOptions) -> str: ...


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def kernel_records(analysis: Analysis, top: int | None = None) -> list[dict[str, Any]]:
    """Return the ranked kernels as plain dicts with KERNEL_FIELDS (units in the names; null where unknown)."""
    frame = analysis.kernels.rename({"kernel_name": "name"})
    if top is not None:
        frame = frame.head(top)
    records = []
    for row in frame.iter_rows(named=True):
        records.append({field: _clean(row.get(field)) for field in KERNEL_FIELDS})
    return records


def launches_text(kernel: dict[str, Any]) -> str:
    """Return a kernel's launch count as shown in tables, with its failed launches: `6`, `6 (1 failed)`."""
    failed = kernel.get("failed_launches") or 0
    return format_count(kernel["launches"]) + (f" ({format_count(failed)} failed)" if failed else "")


def launch_records(analysis: Analysis) -> list[dict[str, Any]]:
    """Return every launch with its verdict, as plain dicts."""
    keep = [
        "launch_id", "kernel_name", "grid_size", "block_size", "stream_id", "duration_ns", "bound", "label",
        "roof_pct", "arithmetic_intensity", "compute_pct", "memory_pct", "recoverable_ns", "reason",
    ]
    frame = analysis.launches.select([c for c in keep if c in analysis.launches.columns])
    return [{k: _clean(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


def summary(analysis: Analysis) -> dict[str, Any]:
    """Return run totals: launches, kernels, total and recoverable time (ns), time per verdict (ns)."""
    kernels = analysis.kernels
    by_bound: dict[str, float] = {}
    for row in kernels.select("bound", "duration_ns").iter_rows():
        by_bound[row[0]] = by_bound.get(row[0], 0.0) + (row[1] or 0.0)
    recoverable = kernels["recoverable_ns"].sum() if kernels.height else None
    return {
        "launches": int(kernels["launches"].sum() or 0) if kernels.height else 0,  # counts a damaged file lost are not counted
        "kernels": kernels.height,
        "total_duration_ns": analysis.total_duration_ns,
        "recoverable_ns": float(recoverable) if recoverable else None,
        "duration_ns_by_bound": by_bound,
    }


def device_record(analysis: Analysis) -> dict[str, Any]:
    device = analysis.device
    return {
        "name": device.name,
        "compute_capability": device.compute_capability,
        "table_entry": device.spec.key if device.spec else None,
        "identified": device.how_identified,
        "peaks": {key.removeprefix("peak_"): {"value": peak.value, "source": peak.source} for key, peak in device.peaks.items()},
    }


def source_record(analysis: Analysis) -> dict[str, Any]:
    source = analysis.source
    return {
        "path": source.path,
        "format": source.format,
        "sha256": source.sha256,
        "size_bytes": source.size_bytes,
        "profiler": source.profiler,
    }


def telemetry_record(analysis: Analysis) -> dict[str, Any] | None:
    """Return the tegrastats summary as plain data (bandwidth in GB/s, times in s, power in W), or None."""
    t = analysis.telemetry
    if t is None:
        return None
    return {
        "board": t.board.key if t.board else None,
        "board_name": t.board.name if t.board else None,
        "board_identified": t.board_identified,
        "peak_bandwidth_gb_s": t.board.peak_bytes_per_s / 1e9 if t.board else None,
        "samples": t.samples,
        "duration_s": t.duration_s,
        "interval_s": t.interval_s,
        "skipped_lines": t.stray_lines,
        "skipped_examples": [{"line": n, "text": text} for n, text in t.stray_examples],
        "emc_samples": t.emc_samples,
        "bandwidth_gb_s": t.bandwidth_gb_s,
        "bandwidth_pct_of_peak": t.bandwidth_pct_of_peak,
        "gpu_util_pct": t.gpu_pct,
        "mean_power_w": t.mean_power_w,
        "energy_j": t.energy_j,
        "energy_per_token_j": t.energy_per_token_j,
        "findings": [
            {"kind": f.kind, "message": f.message, "start_s": f.start_s, "duration_s": f.duration_s, "evidence": f.evidence}
            for f in t.findings
        ],
    }


STAT_COLUMNS = ("mean", "p50", "p90", "p99", "max")


def telemetry_stat_rows(telemetry: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Return (label, formatted mean/p50/p90/p99/max) for each statistic the log has: bandwidth, % of peak, GPU busy."""
    stats = [("EMC bandwidth (GB/s)", telemetry.get("bandwidth_gb_s")), ("% of board peak", telemetry.get("bandwidth_pct_of_peak")),
             ("GPU busy (%)", telemetry.get("gpu_util_pct"))]
    return [(label, [f"{values[k]:.1f}" for k in STAT_COLUMNS]) for label, values in stats if values]


def timeline_record(analysis: Analysis) -> dict[str, Any] | None:
    """Return Nsight Systems whole-run findings as plain data (times in ns, shares in %), or None."""
    t = analysis.timeline
    if t is None:
        return None
    record: dict[str, Any] = json_safe({
        "verdict": t.verdict,
        "devices": t.devices,
        "gpu_busy_pct": {str(d["device_id"]): d["busy_pct"] for d in t.devices},
        "copies": t.copies,
        "gaps": t.gaps,
        "idle_by_cause": t.idle_by_cause,
        "launch": t.launch,
        "findings": t.findings,
        "nvtx": t.nvtx,
        "steps": t.steps,
        "sync": t.sync,
        "ncu_join": {"matched_kernels": t.matched_kernels, "unmatched_ncu_kernels": t.unmatched_kernels},
    })
    return record


def json_safe(value: Any) -> Any:
    """Return the value with NaN/inf floats as None, recursively (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return _clean(value)


def _pct_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def diagnosis_lines(kernel: dict[str, Any], rules: int = 5) -> list[str]:
    """Return what the export says about one kernel (a kernel_records entry) as plain sentences: occupancy, stalls,
    tensor cores, ncu's rules with their speedups, then the advice; empty when the input carries none of it."""
    lines = []
    occ = kernel.get("occupancy") or {}
    if occ.get("theoretical_pct") is not None or occ.get("waves_per_sm") is not None:
        limits = ", ".join(f"{name.replace('_', ' ').replace(' sm', ' SM')} {value:.0f}" for name, value in (occ.get("block_limits") or {}).items() if value is not None)
        # Only waves known (no Occupancy section): no "n/a achieved of n/a theoretical".
        parts = ([f"{_pct_text(occ.get('achieved_pct'))} achieved of {_pct_text(occ.get('theoretical_pct'))} theoretical ({occ.get('weighting')})"]
                 if occ.get("theoretical_pct") is not None or occ.get("achieved_pct") is not None else [])
        if occ.get("limiter"):
            parts.append(f"limited by {occ['limiter']}" + (f" (blocks per SM allowed by: {limits})" if limits else ""))
        launch = [text for text, present in (
            (f"{occ.get('registers_per_thread') or 0:.0f} registers/thread", occ.get("registers_per_thread")),
            (f"{(occ.get('shared_bytes_per_block') or 0) / 1024:.1f} KB shared/block", occ.get("shared_bytes_per_block")),
            (f"{occ.get('block_threads')} threads/block", occ.get("block_threads"))) if present]
        if launch:
            parts.append(", ".join(launch))
        if occ.get("waves_per_sm") is not None:
            tail = occ.get("tail")
            if tail and tail["full_waves"] == 0:
                parts.append(f"{occ['waves_per_sm']:.2f} waves per SM (one partial wave: the grid fills {tail['last_wave_full_pct']:.0f}% of the GPU)")
            else:
                parts.append(f"{occ['waves_per_sm']:.2f} waves per SM" + (
                    f" (last wave {tail['last_wave_full_pct']:.0f}% full, up to {tail['max_runtime_share_pct']:.0f}% of the runtime)" if tail else ""))
        lines.append("Occupancy: " + "; ".join(parts))
    if kernel.get("stalls"):
        top = "; ".join(f"{s['reason']} {s['share_pct']:.0f}% ({s['meaning']})" for s in kernel["stalls"][:3])
        lines.append(f"Warp stalls ({kernel.get('stall_source')}): {top}")
    if kernel.get("tensor_core") is not None:
        lines.append(f"Tensor cores: {'used' if kernel['tensor_core'] else 'not used'} (from the {kernel.get('tensor_core_source')})")
    for rule in (kernel.get("rules") or [])[:rules]:
        speedup = f", est. {rule['speedup_pct']:.0f}% {rule.get('speedup_type') or ''} speedup".replace("  ", " ") if rule.get("speedup_pct") is not None else ""
        message = rule.get("message") or ""
        lines.append(f"ncu {rule.get('type')} {rule.get('name') or rule.get('section')}{speedup}: {message[:300]}{'…' if len(message) > 300 else ''}")
    lines += [f"Do: {advice}" for advice in kernel.get("advice") or []]
    return lines


def steps_lines(analysis: Analysis) -> list[str]:
    """Return the steps of an Nsight Compute export as sentences (bytes per step, beyond the weights, MBU)."""
    steps = analysis.steps
    if not steps:
        return []
    kind = "Decode steps" if steps.get("weight_bytes") else "Steps"
    line = f"{kind} ({steps['source']}): {counted(steps['steps'], 'step')} of {counted(steps['kernels_per_step'], 'kernel')}"
    if steps.get("dram_bytes_per_step") is not None:
        line += (f"; per step (median) {format_rate(steps['dram_bytes_per_step'], 'B')} of DRAM traffic in "
                 f"{format_duration(steps['median_duration_ns'])} of kernel time = {format_rate(steps['bandwidth_bytes_per_s'], 'B/s')}")
        if steps.get("beyond_weights_bytes") is not None:
            line += f"; {format_rate(steps['beyond_weights_bytes'], 'B')} beyond the weights (KV cache, activations)"
        if steps.get("mbu_pct") is not None:
            line += f"; MBU {steps['mbu_pct']:.1f}% of {format_rate(steps['peak_bytes_per_s'], 'B/s')}"
    lines = [line]
    if steps.get("note"):
        lines.append(f"- {steps['note']}")
    return lines


def timeline_lines(analysis: Analysis) -> list[str]:
    """Return the whole-run details as plain sentences: breakdown per GPU, copies, gaps and their causes, launch
    statistics, steps and NVTX groups (for the terminal, Markdown and HTML reporters)."""
    t = timeline_record(analysis)
    if t is None:
        return []
    lines = ["Where the time went:"] if t["devices"] or t["copies"] else []
    for device in t["devices"]:
        b = device["breakdown"]
        overlaps = ", ".join(f"{k} {_pct_text(v)}" for k, v in b["overlaps"].items())
        lines.append(
            f"- GPU {device['device_id']}{' (' + device['name'] + ')' if device.get('name') else ''}: span {format_duration(device['span_ns'])}; "
            f"compute {_pct_text(b['compute_pct'])}, communication {_pct_text(b['communication_pct'])}, copy {_pct_text(b['copy_pct'])}"
            + (f", unified memory {_pct_text(b['unified_memory_pct'])}" if b["unified_memory_pct"] else "")
            + f", idle {_pct_text(b['idle_pct'])}" + (f" (overlaps: {overlaps})" if overlaps else "")
            + f"; {counted(device['gap_count'], 'idle gap')}, largest {format_duration(device['largest_gap_ns'])}")
    for copy in t["copies"]:
        where = f"GPU {copy['device_id']} " if copy.get("device_id") is not None else ""
        gb_per_s = copy.get("gb_per_s")
        # A few bytes copied (a scalar read back by .item()) move at kB/s to MB/s: "0.0 GB/s" would say nothing, and
        # a comparison with the link's peak neither.
        in_gb = gb_per_s is not None and gb_per_s >= 0.1
        rate = f" at {gb_per_s:.1f} GB/s" if in_gb else "" if gb_per_s is None else f" at {format_rate(gb_per_s * 1e9, 'B/s')}"
        link = f" of {copy['link_gb_per_s']:.0f} ({copy['link']})" if in_gb and copy.get("link_gb_per_s") else ""
        size = f", {format_rate(copy['bytes'], 'B')}" if copy.get("bytes") else ""
        pageable = f", {copy['pageable_count']} from pageable memory" if copy.get("pageable_count") else ""
        lines.append(f"- copies {where}{copy['direction']}: {format_count(copy['count'])} in {format_duration(copy['duration_ns'])}{size}{rate}{link}{pageable}")
    if t["idle_by_cause"]:
        lines.append("Why the GPU waited (idle time by cause):")
        lines += [f"- {c['cause']}: {format_duration(c['idle_ns'])} ({_pct_text(c['share_of_idle_pct'])} of idle) — {c['description']}" for c in t["idle_by_cause"]]
    for gap in t["gaps"][:5]:
        evidence = gap["evidence"]
        around = [r for r in (evidence.get("nvtx_outermost"), evidence.get("nvtx_innermost")) if r]
        calls = gap_calls_text(evidence.get("cuda_calls", []))
        lines.append(f"- gap on GPU {gap['device_id']} at {format_duration(gap['start_ns'])}: {format_duration(gap['duration_ns'])}, {gap['cause']}"
                     + (f"; NVTX: {' > '.join(repr(r['name'][:60]) for r in around)}" if around else "")
                     + (f"; CUDA calls: {calls}" if calls else ""))
    launch = t["launch"]
    if launch.get("median_latency_ns") is not None:
        idle = launch.get("onto_idle_gpu") or {}
        lines.append(f"- launch call → kernel start: median {format_duration(launch['median_latency_ns'])}, p99 {format_duration(launch['p99_latency_ns'])} "
                     f"over {counted(launch['kernels_joined'], 'kernel')} (includes queueing behind earlier work)"
                     + (f"; onto an idle GPU: median {format_duration(idle['median_latency_ns'])} over {counted(idle['kernels'], 'kernel')}" if idle.get("kernels") else "")
                     + f"; a launch call takes {format_duration(launch['median_launch_call_ns'])} (median)"
                     + (f"; {counted(launch['graph_launched_kernels'], 'kernel')} replayed from CUDA graphs" if launch.get("graph_launched_kernels") else ""))
    steps = t["steps"]
    if steps:
        lines.append(f"Steps ({steps['source']}: {steps['name'][:80]}): {counted(steps['count'], 'step')}, median {format_duration(steps['median_ns'])}, "
                     f"p99 {format_duration(steps['p99_ns'])}, jitter {_pct_text(steps['jitter_pct'])}"
                     + (f"; the first step takes {steps['first_vs_median']:.1f}× the median (warm-up or prefill)" if (steps.get("first_vs_median") or 0) >= 2 else ""))
        for phase, stats in (steps.get("phases") or {}).items():
            lines.append(f"- {phase} ({stats['name'][:60]}): {stats['count']}×, median {format_duration(stats['median_ns'])}")
        decode = steps.get("decode")
        if decode and decode.get("tokens_per_s"):
            lines.append(f"- decode: {decode['tokens_per_s']:.1f} tokens/s, {decode['bytes_per_token'] / 1e9:.2f} GB per token, "
                         f"{decode['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s" + (f" = MBU {decode['mbu_pct']:.1f}% (ceiling {decode['ceiling_tokens_per_s']:.0f} tokens/s)" if decode.get("mbu_pct") is not None else "")
                         + (f" — {decode['warning']}" if decode.get("warning") else ""))
    if t["nvtx"]:
        projected = any(entry.get("gpu_projected_ns") is not None for entry in t["nvtx"])
        lines.append("NVTX ranges (grouped; CPU time, and " + ("the GPU time they span: nvtx_gpu_proj_sum's projection, from each range's first "
                     "GPU operation to its last):" if projected else "the GPU time of the kernels they launched):"))
        for entry in t["nvtx"][:12]:
            indent = "  " * min(int(entry["depth"] or 0), 6)
            gpu = f", GPU {format_duration(entry['gpu_ns'])}" if entry.get("gpu_ns") else ""
            if entry.get("gpu_projected_ns") is not None:
                gpu = f", GPU span {format_duration(entry['gpu_projected_ns'])} ({entry['gpu_ops']:,} GPU operations)"
            lines.append(f"- {indent}{(entry['name'] or '<unnamed>')[:70]}: {entry['count']}× {format_duration(entry['cpu_ns'])}{gpu}")
    join = t["ncu_join"]
    if join["matched_kernels"] or join["unmatched_ncu_kernels"]:
        lines.append(f"- Nsight Compute join: {counted(join['matched_kernels'], 'kernel')} matched; unmatched ncu kernels: "
                     + ("; ".join(n[:60] for n in join["unmatched_ncu_kernels"]) or "none"))
    return lines


RUN_FIELDS = (
    "run", "format", "line_number", "model", "test", "phase", "n_prompt", "n_gen", "n_depth", "n_sequences", "draft_accepted", "draft_generated",
    "draft_eval_ms", "draft_eval_tokens", "verify_ms", "verify_tokens",
    "tokens_per_s", "tokens_per_s_stddev",
    "model_size_bytes", "model_params", "backend", "n_gpu_layers", "offload", "device", "device_bandwidth_bytes_per_s",
    "bytes_per_token", "bandwidth_bytes_per_s", "mbu_pct", "achieved_flop_per_s", "compute_pct", "note", "options", "build",
)


def run_records(analysis: Analysis) -> list[dict[str, Any]]:
    """Return llama.cpp measurements as plain dicts (tokens/s, bytes, bytes/s, percent; null where unknown)."""
    if analysis.llm is None:
        return []
    return [{field: _clean(row.get(field)) for field in RUN_FIELDS} for row in analysis.llm.runs.iter_rows(named=True)]


def provenance(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    """Return where a report came from: tool version, input (name, size, sha256, format, profiler), device, command."""
    source = analysis.source
    peak_sources = sorted({p.source for p in analysis.device.peaks.values() if p.source})
    return {
        "traceview_version": __version__,
        "input": source.path.rsplit("/", 1)[-1],
        "input_size_bytes": source.size_bytes,
        "input_sha256": source.sha256,
        "format": source.format,
        "profiler": source.profiler,
        "device": analysis.device.name,
        "device_identified": analysis.device.how_identified,
        "peaks_from": ", ".join(peak_sources) if peak_sources else None,
        "command_line": options.command_line,
        "generated_at": options.generated_at,
    }


def report_data(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    """Return the JSON contract's fields every kind has (a view adds its kind's own)."""
    data: dict[str, Any] = {
        "traceview_version": __version__,
        "source": source_record(analysis),
        "device": device_record(analysis),
        "summary": summary(analysis),
        "kernels": kernel_records(analysis, options.top),
        "notes": list(analysis.notes),
    }
    if options.per_launch:
        data["launches"] = launch_records(analysis)
    return data
