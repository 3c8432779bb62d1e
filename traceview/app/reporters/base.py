"""The reporter interface and the plain data every reporter renders (the analysis turned into dicts)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from traceview import __version__
from traceview.analyzer.analysis import Analysis
from traceview.app.formatting import format_duration, format_number, format_pct, format_rate

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
)


@dataclass(frozen=True)
class ReportOptions:
    top: int | None = None  # None: every kernel
    per_launch: bool = False
    color: bool = False
    width: int = 160
    command_line: str | None = None
    generated_at: str | None = None  # ISO timestamp; the only thing that differs between two reports of one input


class Reporter(Protocol):
    name: ClassVar[str]  # value for --format
    file_extension: ClassVar[str]  # lets -o infer the format

    def render(self, analysis: Analysis, options: ReportOptions) -> str: ...


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
        "launches": int(kernels["launches"].sum()) if kernels.height else 0,
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
    """Return Nsight Systems timeline findings as plain data (times in ns, shares in %), or None."""
    t = analysis.timeline
    if t is None:
        return None
    return {
        "gpu_busy_pct": {str(d["device_id"]): d["busy_pct"] for d in t.devices},
        "devices": t.devices,
        "idle_gaps": {str(d["device_id"]): d["idle_gaps"] for d in t.devices},
        "memcpy": t.memcpy,
        "sync": t.sync,
        "tiny_kernels": t.tiny_kernels,
        "nvtx": t.nvtx,
        "findings": t.findings,
        "ncu_join": {"matched_kernels": t.matched_kernels, "unmatched_ncu_kernels": t.unmatched_kernels},
    }


RUN_FIELDS = (
    "run", "format", "line_number", "model", "test", "phase", "n_prompt", "n_gen", "tokens_per_s", "tokens_per_s_stddev",
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
    """Return the whole JSON contract as plain data."""
    data: dict[str, Any] = {
        "traceview_version": __version__,
        "source": source_record(analysis),
        "device": device_record(analysis),
        "summary": summary(analysis),
        "kernels": kernel_records(analysis, options.top),
        "notes": list(analysis.notes),
    }
    telemetry = telemetry_record(analysis)
    if telemetry is not None:
        data["telemetry"] = telemetry
    timeline = timeline_record(analysis)
    if timeline is not None:
        data["timeline"] = timeline
    if analysis.llm is not None:
        data["runs"] = run_records(analysis)
        data["findings"] = analysis.llm.findings
    if options.per_launch:
        data["launches"] = launch_records(analysis)
    return data


def timeline_lines(analysis: Analysis) -> list[str]:
    """Return the timeline findings as plain sentences, for the terminal, Markdown and HTML reporters."""
    t = timeline_record(analysis)
    if t is None:
        return []
    lines = ["Timeline:"]
    for device in t["devices"]:
        gaps = device["idle_gaps"]
        lines.append(
            f"- GPU {device['device_id']}{' (' + device['name'] + ')' if device.get('name') else ''}: busy {format_pct(device['busy_pct'])} of "
            f"{format_duration(device['span_ns'])}; {gaps['count']} idle gaps, {format_duration(gaps['total_ns'])} in all, largest "
            f"{format_duration(gaps['largest_ns'])}"
        )
    for op in t["memcpy"]:
        lines.append(f"- {op['operation']}: {op['count']} operations, {format_duration(op['duration_ns'])}"
                     + (f", {op['bytes'] / 1e6:.1f} MB" if op.get("bytes") else ""))
    sync = t["sync"]
    if sync.get("blocking_api_count"):
        lines.append(f"- blocking CUDA API calls: {sync['blocking_api_count']}, {format_duration(sync['blocking_api_ns'])}")
    tiny = t["tiny_kernels"]
    if tiny.get("launches"):
        lines.append(f"- launches under 10 us: {tiny['launches']} ({format_pct(tiny['share_of_launches_pct'])} of launches)")
    for entry in t["nvtx"][:5]:
        lines.append(f"- NVTX {entry['text']!s:.60}: {entry['count']}× {format_duration(entry['total_ns'])}")
    lines += [f"- finding: {finding}" for finding in t["findings"]]
    join = t["ncu_join"]
    if join["matched_kernels"] or join["unmatched_ncu_kernels"]:
        lines.append(f"- Nsight Compute join: {join['matched_kernels']} kernels matched; unmatched ncu kernels: "
                     + ("; ".join(n[:60] for n in join["unmatched_ncu_kernels"]) or "none"))
    return lines
