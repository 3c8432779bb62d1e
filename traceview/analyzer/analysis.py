"""analyze(kernels, ...) → Analysis: device peaks, a verdict per launch and the ranked kernel list. Pure."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceview.analyzer.devices import GpuSpec, find_by_compute_capability, find_by_name, lookup_gpu
from traceview.analyzer.jetson import Board, Telemetry, analyze_telemetry
from traceview.analyzer.llm import LlmAnalysis, analyze_runs
from traceview.analyzer.ranking import rank_kernels
from traceview.analyzer.roofline import RECOMMENDATIONS, classify_launch
from traceview.parsers.schema import KERNELS, MEMORY_LEVELS, PRECISIONS

PEAK_KEYS = tuple(f"peak_{p}_flop_per_s" for p in PRECISIONS) + tuple(f"peak_{m}_bytes_per_s" for m in MEMORY_LEVELS)


@dataclass(frozen=True)
class Peak:
    value: float | None
    source: str | None  # "profile" (measured clock × peak per cycle), "table" (datasheet), or None


@dataclass(frozen=True)
class Device:
    """The GPU the run was profiled on, as far as the profile and the table tell."""

    name: str | None
    compute_capability: str | None
    spec: GpuSpec | None
    how_identified: str
    peaks: dict[str, Peak]


@dataclass(frozen=True)
class Source:
    path: str
    format: str
    sha256: str
    size_bytes: int
    profiler: str | None = None


@dataclass(frozen=True)
class Analysis:
    """Everything the reporters show; `kernels` is ranked (rank 1 = most recoverable time)."""

    source: Source
    device: Device
    launches: pl.DataFrame  # one row per launch, KERNELS + verdict columns
    kernels: pl.DataFrame  # one row per kernel name, ranked
    notes: list[str] = field(default_factory=list)
    telemetry: Telemetry | None = None  # tegrastats logs
    llm: LlmAnalysis | None = None  # llama.cpp outputs

    @property
    def total_duration_ns(self) -> float | None:
        total = self.launches["duration_ns"].sum() if self.launches.height else None
        return float(total) if total else None


def _mode(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return Counter(present).most_common(1)[0][0] if present else None


def resolve_device(kernels: pl.DataFrame, gpu: str | None = None) -> Device:
    """Return the device: --gpu if given, else the profile's device name, else a unique compute-capability match."""
    name = _mode(kernels["device_name"].to_list()) if kernels.height else None
    cc = _mode(kernels["compute_capability"].to_list()) if kernels.height else None
    spec: GpuSpec | None
    if gpu:
        spec = lookup_gpu(gpu)
        how = f"chosen with --gpu {gpu}"
    elif name:
        spec = find_by_name(name)
        how = "named in the profile" + ("" if spec else " (not in the built-in GPU table; use --gpu for datasheet peaks)")
    elif cc:
        matches = find_by_compute_capability(cc)
        spec = matches[0] if len(matches) == 1 else None
        if spec:
            how = f"guessed from compute capability {cc}: the only GPU in the table with it (use --gpu if it was another)"
        elif matches:
            how = f"compute capability {cc} matches {', '.join(m.key for m in matches)}; use --gpu to pick one"
        else:
            how = f"compute capability {cc} is not in the built-in table; use --gpu"
    else:
        spec = None
        how = "the export names no device (ncu 2019.x prints neither name nor compute capability); use --gpu"
    peaks: dict[str, Peak] = {}
    for key in PEAK_KEYS:
        measured = kernels[key].drop_nulls() if kernels.height else pl.Series([], dtype=pl.Float64)
        measured = measured.filter(measured > 0)
        if measured.len():
            peaks[key] = Peak(float(measured.median()), "profile")  # type: ignore[arg-type]
        else:
            peaks[key] = Peak(_table_peak(spec, key), "table" if _table_peak(spec, key) else None)
    display = spec.name if spec and not name else name
    return Device(display, cc or (spec.compute_capability if spec else None), spec, how, peaks)


def _table_peak(spec: GpuSpec | None, key: str) -> float | None:
    if spec is None:
        return None
    return {
        "peak_fp64_flop_per_s": spec.fp64_flop_per_s,
        "peak_fp32_flop_per_s": spec.fp32_flop_per_s,
        "peak_fp16_flop_per_s": None,
        "peak_tensor_flop_per_s": spec.tensor_fp16_flop_per_s,
        "peak_dram_bytes_per_s": spec.dram_bytes_per_s,
    }.get(key)


def _tensor_table_peak(spec: GpuSpec | None, dtype: str | None) -> float | None:
    """Return the datasheet tensor peak for ncu's tensor datatype name (e.g. `bf16_dst_fp32`, `int8`)."""
    if spec is None or not dtype:
        return spec.tensor_fp16_flop_per_s if spec else None
    if "tf32" in dtype:
        return spec.tensor_tf32_flop_per_s
    if "int8" in dtype or "int4" in dtype:
        return spec.tensor_int8_op_per_s
    if "fp8" in dtype or "fp4" in dtype or "fp6" in dtype:
        return spec.tensor_fp8_flop_per_s
    if "fp64" in dtype:
        return spec.fp64_flop_per_s
    return spec.tensor_fp16_flop_per_s


VERDICT_SCHEMA = {
    "bound": pl.String,
    "label": pl.String,
    "reason": pl.String,
    "binding_roof": pl.String,
    "roof_pct": pl.Float64,
    "arithmetic_intensity": pl.Float64,
    "achieved_flop_per_s": pl.Float64,
    "precision": pl.String,
    "compute_pct": pl.Float64,
    "memory_pct": pl.Float64,
    "recoverable_fraction": pl.Float64,
    "recoverable_source": pl.String,
}


def with_verdicts(kernels: pl.DataFrame, device: Device) -> pl.DataFrame:
    """Return the launches with verdict columns and recoverable_ns added."""
    base_peaks = {key: peak.value for key, peak in device.peaks.items()}
    rows = []
    for row in kernels.iter_rows(named=True):
        peaks = base_peaks
        if device.peaks["peak_tensor_flop_per_s"].source != "profile" and row.get("tensor_dtype"):
            peaks = {**base_peaks, "peak_tensor_flop_per_s": _tensor_table_peak(device.spec, row["tensor_dtype"])}
        verdict = classify_launch(row, peaks)
        rows.append({name: getattr(verdict, name) for name in VERDICT_SCHEMA})
    for row in rows:
        row["bound"] = row["bound"].value
    verdicts = pl.DataFrame(rows, schema=VERDICT_SCHEMA)
    frame = pl.concat([kernels, verdicts], how="horizontal")
    return frame.with_columns(
        recoverable_ns=pl.col("duration_ns") * pl.col("recoverable_fraction"),
        recommendation=pl.col("bound").replace_strict({b.value: text for b, text in RECOMMENDATIONS.items()}),
    )


def analyze(kernels: pl.DataFrame, source: Source, gpu: str | None = None) -> Analysis:
    """Return the full analysis of a KERNELS frame: device, per-launch verdicts and the ranked kernel list."""
    device = resolve_device(kernels, gpu)
    launches = with_verdicts(kernels, device)
    notes = []
    if launches["duration_ns"].null_count() == launches.height:
        notes.append("the export has no kernel durations (a single-section export?): times and recoverable time are unknown")
    if any(p.source == "profile" for p in device.peaks.values()):
        notes.append("peaks marked 'profile' are measured by Nsight Compute at the clocks of the run (peak per cycle × clock)")
    return Analysis(source, device, launches, rank_kernels(launches), notes)


def analyze_samples(
    samples: pl.DataFrame,
    source: Source,
    board: Board | None = None,
    interval_s: float = 1.0,
    tokens: int | None = None,
    skipped_lines: int = 0,
    skipped_examples: list[tuple[int, str]] | None = None,
) -> Analysis:
    """Return the analysis of a tegrastats log: telemetry summary and findings, no kernels."""
    telemetry = analyze_telemetry(samples, interval_s, board, tokens, skipped_lines, skipped_examples)
    board = telemetry.board
    spec = find_by_name(board.key) if board else None
    peaks = {key: Peak(None, None) for key in PEAK_KEYS}
    if board:
        peaks["peak_dram_bytes_per_s"] = Peak(board.peak_bytes_per_s, "table")
    if spec and spec.fp32_flop_per_s:
        peaks["peak_fp32_flop_per_s"] = Peak(spec.fp32_flop_per_s, "table")
    device = Device(board.name if board else None, spec.compute_capability if spec else None, spec, telemetry.board_identified, peaks)
    launches = with_verdicts(pl.DataFrame(schema=KERNELS), device)
    notes = []
    if skipped_lines:
        notes.append(f"skipped {skipped_lines} line(s) that are not tegrastats samples")
    return Analysis(source, device, launches, rank_kernels(launches), notes, telemetry)


def analyze_llama(
    runs: pl.DataFrame,
    source: Source,
    gpu: str | None = None,
    bandwidth_bytes_per_s: float | None = None,
    weight_bytes: float | None = None,
) -> Analysis:
    """Return the analysis of llama.cpp measurements: MBU of decode, prefill against compute, scaling findings."""
    spec = lookup_gpu(gpu) if gpu else None
    llm = analyze_runs(runs, spec, bandwidth_bytes_per_s, weight_bytes)
    names = [n for n in runs["device_name"].unique().drop_nulls().to_list()]
    if spec is None and len(names) == 1:
        spec = find_by_name(names[0])
    if gpu:
        how = f"chosen with --gpu {gpu}"
    elif names:
        how = "named in the output (gpu_info / Device 0)" + ("" if spec else "; not in the GPU table, use --gpu or --bandwidth")
    else:
        how = "the output names no device; use --gpu NAME or --bandwidth for MBU"
    peaks = {key: Peak(_table_peak(spec, key), "table" if _table_peak(spec, key) else None) for key in PEAK_KEYS}
    if bandwidth_bytes_per_s:
        peaks["peak_dram_bytes_per_s"] = Peak(bandwidth_bytes_per_s, "--bandwidth")
    device = Device(spec.name if spec else (names[0] if names else None), spec.compute_capability if spec else None, spec, how, peaks)
    launches = with_verdicts(pl.DataFrame(schema=KERNELS), device)
    return Analysis(source, device, launches, rank_kernels(launches), [], llm=llm)
