"""analyze(kernels, ...) → Analysis: device peaks, a verdict per launch and the ranked kernel list. Pure."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from traceview.analyzer.decode import decode_ceiling
from traceview.analyzer.devices import (
    GpuSpec,
    assumed_module_note,
    find_by_compute_capability,
    find_by_name,
    find_module,
    host_link,
    lookup_gpu,
    namesakes,
    plausible_bandwidth,
)
from traceview.analyzer.diagnosis import diagnose_kernels, tensor_core_columns
from traceview.analyzer.jetson import Board, Telemetry, analyze_telemetry
from traceview.analyzer.lanes import NvtxLanes, process_ids
from traceview.analyzer.llm import LlmAnalysis, analyze_runs, device_list
from traceview.analyzer.ncu_steps import decode_steps
from traceview.analyzer.nvtx import (
    group_summary,
    normalise_range_name,
    steps_from_kernels,
    steps_from_nvtx,
)
from traceview.analyzer.ranking import rank_kernels
from traceview.analyzer.roofline import (
    NCU_COLLECTION,
    NVPROF_COLLECTION,
    RECOMMENDATIONS,
    Bound,
    Collection,
    classify_launches,
)
from traceview.analyzer.timeline import (
    BLOCKING_API,
    Timeline,
    before_nsight_compute,
    dequantize_finding,
    fp32_fma_finding,
    join_ncu,
    kernel_summary,
    stats_copies,
    stats_copy_share_finding,
    stats_findings,
    stats_graph_trace_finding,
    stats_launch_bound_finding,
    stats_rule_findings,
    stats_unified_memory_findings,
    sync_summary,
)
from traceview.analyzer.whole_run import (
    DEFAULT_GAP_THRESHOLD_NS,
    WholeRun,
    analyze_whole_run,
    launch_bound_finding,
    launch_calls,
    launch_statistics,
    repeated_call_numbers,
    runs_two_steps_at_once,
    tiny_kernel_stretches,
)
from traceview.parsers.ncu_csv import short_kernel_name
from traceview.parsers.nsys_sqlite import NSYS_API, NSYS_GRAPHS, NSYS_MEMOPS, NSYS_NVTX, NsysExport
from traceview.parsers.nsys_stats import EXPERT_RULES, STATS_LAUNCHES, StatsReports
from traceview.parsers.schema import KERNELS, MEMORY_LEVELS, PRECISIONS
from traceview.wording import counted

if TYPE_CHECKING:
    from traceview.analyzer.projection import Projection  # projection builds on this module

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
class KernelSteps:
    """The repeating decode steps found in an Nsight Compute export (analyzer.ncu_steps): the record it made."""

    record: dict[str, Any]


@dataclass(frozen=True)
class Analysis:
    """The one envelope of every input's analysis: what the reporters, the dashboard, diff and fleet read.

    Every kind has its source, device, launches and ranked kernels (empty where the input has none: rank 1 = most
    recoverable time) and notes; `kind` names the input's kind (analyzer.kinds.ANALYSES) and `detail` holds what only
    that kind has: Telemetry (tegrastats), LlmAnalysis (llama.cpp), Timeline (Nsight Systems), KernelSteps (Nsight
    Compute decode steps), FleetResult (a saved fleet), or None."""

    source: Source
    device: Device
    launches: pl.DataFrame  # one row per launch, KERNELS + verdict columns
    kernels: pl.DataFrame  # one row per kernel name, ranked
    notes: list[str] = field(default_factory=list)
    kind: str = "kernels"
    detail: object = None
    collection: Collection = NCU_COLLECTION  # how to collect what the verdicts lack, in the input profiler's words
    projections: tuple[Projection, ...] = ()  # one per --what-if target

    @property
    def telemetry(self) -> Telemetry | None:
        return self.detail if isinstance(self.detail, Telemetry) else None

    @property
    def llm(self) -> LlmAnalysis | None:
        return self.detail if isinstance(self.detail, LlmAnalysis) else None

    @property
    def timeline(self) -> Timeline | None:
        return self.detail if isinstance(self.detail, Timeline) else None

    @property
    def steps(self) -> dict[str, Any] | None:
        return self.detail.record if isinstance(self.detail, KernelSteps) else None

    @property
    def fleet(self) -> Any:
        """The analyzer.fleet.FleetResult of a saved `traceview fleet` result, else None."""
        from traceview.analyzer.fleet import FleetResult  # analyzer.fleet builds on this module

        return self.detail if isinstance(self.detail, FleetResult) else None

    @property
    def total_duration_ns(self) -> float | None:
        """Kernel time summed over the run, ns (None when the input has no durations)."""
        total = self.kernels["duration_ns"].sum() if self.kernels.height else None
        return float(total) if total else None


def _mode(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return Counter(present).most_common(1)[0][0] if present else None


def resolve_device(kernels: pl.DataFrame, gpu: str | None = None) -> Device:
    """Return the device: --gpu if given, else the profile's device name, else a unique compute-capability match."""
    name = _mode(kernels["device_name"].to_list()) if kernels.height else None
    cc = _mode(kernels["compute_capability"].to_list()) if kernels.height else None
    spec: GpuSpec | None
    shared_bandwidth = None  # a DRAM bandwidth every candidate of an unresolved compute capability has
    if gpu:
        spec = lookup_gpu(gpu)
        how = f"chosen with --gpu {gpu}"
    elif name:
        sms = _mode(kernels["sm_count"].to_list()) if "sm_count" in kernels.columns else None
        # One name can be several GPUs (every Jetson Orin module is "Orin"): the profile's DRAM peak may tell them apart.
        candidates = namesakes(name, int(sms) if sms else None)
        narrowed = _narrowed_by_profile(candidates, kernels)[0] if len(candidates) > 1 else candidates
        spec = narrowed[0] if len(narrowed) == 1 else (candidates[0] if candidates else None)
        still = narrowed or candidates  # none within reach of the profile's DRAM peak: all stay possible
        assumed = assumed_module_note(name, still) if len(still) > 1 else None
        how = ("named in the profile" + ("" if spec else " (not in the built-in GPU table; use --gpu for datasheet peaks)")
               + (f"; {assumed}" if assumed else ""))
    elif cc:
        matches, evidence = _narrowed_by_profile(find_by_compute_capability(cc), kernels)
        spec = matches[0] if len(matches) == 1 else None
        shared_bandwidth = _shared_bandwidth(matches) if spec is None else None
        seen = f"compute capability {cc}" + "".join(f" and {e}" for e in evidence)
        if spec and evidence:
            how = f"identified from {seen}: the table GPU that fits (use --gpu if it was another)"
        elif spec:
            how = f"guessed from {seen}: the only GPU in the table with it (use --gpu if it was another)"
        elif matches and shared_bandwidth:
            how = (f"{seen} matches {', '.join(m.key for m in matches)}, all {shared_bandwidth / 1e9:,.0f} GB/s: that DRAM peak is theirs; "
                   "their compute peaks differ, use --gpu to pick one")
        elif matches:
            how = f"{seen} matches {', '.join(m.key for m in matches)}; use --gpu to pick one"
        else:
            how = f"{seen} matches no GPU in the built-in table; use --gpu"
    else:
        spec = None
        how = "the export names no device (older ncu CSV and console layouts print neither a name nor a compute capability); use --gpu"
    peaks: dict[str, Peak] = {}
    for key in PEAK_KEYS:
        measured = kernels[key].drop_nulls() if kernels.height else pl.Series([], dtype=pl.Float64)
        measured = measured.filter(measured > 0)
        if measured.len():
            peaks[key] = Peak(float(measured.median()), "profile")  # type: ignore[arg-type]
        elif key == "peak_dram_bytes_per_s" and shared_bandwidth:
            peaks[key] = Peak(shared_bandwidth, "table")
        else:
            peaks[key] = Peak(_table_peak(spec, key), "table" if _table_peak(spec, key) else None)
    display = spec.name if spec and not name else name
    return Device(display, cc or (spec.compute_capability if spec else None), spec, how, peaks)


def _narrowed_by_profile(candidates: list[GpuSpec], kernels: pl.DataFrame) -> tuple[list[GpuSpec], list[str]]:
    """Return the table entries of one compute capability that also fit the profile's SM count and measured DRAM
    peak (within 15%: the profile measures at its own clock), and the evidence used, e.g. ["58 SMs"]. A profile whose
    SM count fits no entry is of a GPU the table lacks (a SUPER or laptop part): none is returned."""
    evidence = []
    sms = _mode(kernels["sm_count"].to_list()) if kernels.height and "sm_count" in kernels.columns else None
    if candidates and sms:
        candidates = [spec for spec in candidates if spec.sm_count == int(sms)]
        evidence.append(f"{int(sms)} SMs")
    dram_peak, how = _profile_dram_peak(kernels)
    if len(candidates) > 1 and dram_peak:
        off = {spec.key: abs(spec.dram_bytes_per_s - dram_peak) / spec.dram_bytes_per_s for spec in candidates}
        candidates = sorted((spec for spec in candidates if off[spec.key] <= 0.15), key=lambda spec: off[spec.key])
        # Profiles measure within a few % of the datasheet (RTX 5090 1,764 of 1,792 GB/s, T4 319.7 of 320): a GPU
        # that close, with the next three times as far, is the one.
        if len(candidates) > 1 and off[candidates[0].key] <= 0.03 and off[candidates[1].key] >= 3 * off[candidates[0].key]:
            candidates = candidates[:1]
        evidence.append(f"a {dram_peak / 1e9:.0f} GB/s DRAM peak ({how})")
    return candidates, evidence


def _shared_bandwidth(candidates: list[GpuSpec]) -> float | None:
    """Return the DRAM bandwidth (bytes/s) every one of several candidate GPUs has (within 1%: the RTX 5090 and the
    RTX PRO 6000 Blackwell both have 1,792 GB/s), or None."""
    if len(candidates) < 2:
        return None
    low, high = min(c.dram_bytes_per_s for c in candidates), max(c.dram_bytes_per_s for c in candidates)
    return low if high <= low * 1.01 else None


def _profile_dram_peak(kernels: pl.DataFrame) -> tuple[float | None, str]:
    """Return the DRAM peak (bytes/s) the profile shows and how: measured (ncu's peak bytes per cycle × clock), else
    implied by a launch's DRAM bytes/s over its DRAM throughput % of peak (both ncu's, at the same clock). Launches
    under 1% are left out: their two-decimal percentage is too coarse."""
    if not kernels.height:
        return None, ""
    measured = kernels["peak_dram_bytes_per_s"].drop_nulls()
    measured = measured.filter(measured > 0)
    if measured.len():
        return float(measured.median()), "measured"  # type: ignore[arg-type]
    implied = kernels.filter(pl.col("dram_throughput_pct") >= 1).select(pl.col("dram_bytes_per_s") / pl.col("dram_throughput_pct") * 100).to_series().drop_nulls()
    implied = implied.filter(implied > 0)
    if implied.len():
        return float(implied.median()), "DRAM bytes/s ÷ % of peak"  # type: ignore[arg-type]
    return None, ""


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


def _table_peaks(spec: GpuSpec | None) -> dict[str, Peak]:
    """Return every peak from the GPU table entry (None where the table has none)."""
    return {key: Peak(_table_peak(spec, key), "table" if _table_peak(spec, key) else None) for key in PEAK_KEYS}


def _with_ncu_peaks(peaks: dict[str, Peak], ncu: Analysis | None) -> dict[str, Peak]:
    """Prefer the peaks a joined Nsight Compute analysis measured or looked up."""
    if ncu is None:
        return peaks
    return {key: (ncu.device.peaks[key] if ncu.device.peaks[key].value else peak) for key, peak in peaks.items()}


def _join_notes(ncu: Analysis | None, matched: int, kernels: int, unmatched: list[str]) -> list[str]:
    if ncu is None:
        return []
    whose = "nvprof's metric results" if ncu.source.format == "nvprof-metrics" else "Nsight Compute results"
    notes = [f"joined {whose} from {ncu.source.path}: {matched} of {counted(kernels, 'kernel')} matched by name"]
    if unmatched:
        notes.append(f"{len(unmatched)} kernel(s) of the {whose} match no kernel in this run: " + "; ".join(n[:80] for n in unmatched[:5]))
    return notes


def _without_launches(device: Device) -> pl.DataFrame:
    """The per-launch frame of inputs that have no per-launch metrics (tegrastats, llama.cpp, Nsight Systems)."""
    return with_verdicts(pl.DataFrame(schema=KERNELS), device)


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
    "tensor_core": pl.Boolean,
    "tensor_core_source": pl.String,
    "tensor_warning": pl.String,
}

_FFMA_PRECISIONS = ("fp64", "fp32", "fp16")


def _tensor_checked(verdicts: pl.DataFrame, kernels: pl.DataFrame) -> pl.DataFrame:
    """Return the verdicts with tensor-core evidence; a tensor-core kernel measured by FFMA counts alone gets precision
    `unknown` and a warning, and no roofline verdict (its FFMA roofline leaves its real work out)."""
    verdicts = verdicts.with_columns(kernels.select(tensor_core_columns(kernels)))
    tensor_flop = kernels["tensor_flop"] if "tensor_flop" in kernels.columns else pl.Series([None] * kernels.height, dtype=pl.Float64)
    verdicts = verdicts.with_columns(tensor_flop.alias("_tensor_flop"))
    ffma_only = (pl.col("tensor_core").fill_null(False) & ~(pl.col("_tensor_flop").fill_nan(0.0).fill_null(0.0) > 0)
                 & pl.col("precision").is_in(_FFMA_PRECISIONS).fill_null(False))
    warning = pl.format("a tensor-core kernel (by its {}) measured only by FMA counts: its {} roofline leaves the tensor work out — collect "
                        "`--section SpeedOfLight_HierarchicalTensorRooflineChart` or the sm__ops_path_tensor_* metrics",
                        pl.col("tensor_core_source"), pl.col("precision"))
    no_verdict = ffma_only & pl.col("label").str.ends_with("(roofline)").fill_null(False)
    return verdicts.with_columns(
        pl.when(ffma_only).then(warning).alias("tensor_warning"),
    ).with_columns(
        pl.when(ffma_only).then(pl.lit("unknown")).otherwise(pl.col("precision")).alias("precision"),
        pl.when(no_verdict).then(pl.lit(Bound.UNKNOWN.value)).otherwise(pl.col("bound")).alias("bound"),
        pl.when(no_verdict).then(pl.lit("Tensor kernel, FMA-only roofline")).otherwise(pl.col("label")).alias("label"),
        pl.when(~no_verdict).then(pl.col("recoverable_fraction")).alias("recoverable_fraction"),
        pl.when(~no_verdict).then(pl.col("recoverable_source")).alias("recoverable_source"),
        pl.when(no_verdict).then(pl.format("{} — not a verdict: {}", pl.col("reason"), pl.col("tensor_warning"))).otherwise(pl.col("reason")).alias("reason"),
    ).drop("_tensor_flop")


def with_verdicts(kernels: pl.DataFrame, device: Device, collection: Collection = NCU_COLLECTION) -> pl.DataFrame:
    """Return the launches with verdict columns and recoverable_ns added; `collection` words what to collect where a
    launch has no verdict."""
    peaks: dict[str, float | pl.Expr | None] = {key: peak.value for key, peak in device.peaks.items()}
    if device.peaks["peak_tensor_flop_per_s"].source != "profile" and "tensor_dtype" in kernels.columns:
        # Without a measured tensor peak, each launch's datatype picks its datasheet peak.
        dtypes = kernels["tensor_dtype"].unique().drop_nulls().to_list()
        if dtypes:
            peaks["peak_tensor_flop_per_s"] = (
                pl.when(pl.col("tensor_dtype").is_not_null() & (pl.col("tensor_dtype") != ""))
                .then(pl.col("tensor_dtype").replace_strict({d: _tensor_table_peak(device.spec, d) for d in dtypes},
                                                            default=None, return_dtype=pl.Float64))
                .otherwise(pl.lit(peaks["peak_tensor_flop_per_s"], dtype=pl.Float64))
            )
    verdicts = _tensor_checked(classify_launches(kernels, peaks, collection), kernels)
    failed = kernels["launch_failed"].fill_null(False) if "launch_failed" in kernels.columns else pl.Series([False] * kernels.height)
    if failed.any():
        failed_verdict = {**{name: None for name in VERDICT_SCHEMA}, "bound": Bound.UNKNOWN.value, "label": "launch failed",
                          "reason": "the launch failed while it was profiled (every metric is nan or empty): nothing was measured"}
        verdicts = verdicts.with_columns(failed.alias("_failed")).with_columns(
            [pl.when(pl.col("_failed")).then(pl.lit(value, dtype=VERDICT_SCHEMA[name])).otherwise(pl.col(name)).alias(name)
             for name, value in failed_verdict.items()]
        ).drop("_failed")
    frame = pl.concat([kernels, verdicts.select([pl.col(n).cast(t) for n, t in VERDICT_SCHEMA.items()])], how="horizontal")
    return frame.with_columns(
        recoverable_ns=pl.col("duration_ns") * pl.col("recoverable_fraction"),
        recommendation=pl.col("bound").replace_strict({**{b.value: text for b, text in RECOMMENDATIONS.items()},
                                                       Bound.UNKNOWN.value: collection.no_verdict}),
    )


def analyze(kernels: pl.DataFrame, source: Source, gpu: str | None = None, weight_bytes: float | None = None,
            step_kernels: int | None = None) -> Analysis:
    """Return the full analysis of a KERNELS frame: device, per-launch verdicts and the ranked kernel list, and the
    decode steps when the launches repeat (or `step_kernels` says how many make one step)."""
    device = resolve_device(kernels, gpu)
    # nvprof's metrics come from GPUs Nsight Compute does not profile: advice to collect more names nvprof's metrics.
    collection = NVPROF_COLLECTION if source.format == "nvprof-metrics" else NCU_COLLECTION
    launches = with_verdicts(kernels, device, collection)
    notes = []
    failed_note = _failed_launches_note(launches)
    if failed_note:
        notes.append(failed_note)
    timed = launches.filter(~pl.col("launch_failed").fill_null(False)) if launches.height else launches
    if timed.height and timed["duration_ns"].null_count() == timed.height:
        notes.append(collection.no_durations)
    if any(p.source == "profile" for p in device.peaks.values()):
        notes.append("peaks marked 'profile' are measured by Nsight Compute at the clocks of the run (peak per cycle × clock)")
    if launches["tensor_warning"].drop_nulls().len():
        notes.append("tensor-core kernels measured only by FMA counts have precision 'unknown': an FFMA roofline would understate their work")
    steps = decode_steps(launches, weight_bytes, device.peaks["peak_dram_bytes_per_s"].value, step_kernels) if launches.height else None
    if step_kernels and steps is None:
        notes.append(f"--step-kernels {step_kernels}: the export has fewer launches than one step")
    return Analysis(source, device, launches, diagnose_kernels(launches, rank_kernels(launches), device.spec, collection), notes, kind="kernels",
                    detail=KernelSteps(steps) if steps is not None else None, collection=collection)


def _failed_launches_note(launches: pl.DataFrame) -> str | None:
    """Return what failed under profiling and what the kernels' times are made of, or None when nothing failed."""
    if not launches.height or not launches["launch_failed"].fill_null(False).any():
        return None
    per_kernel = (launches.group_by("short_name", maintain_order=True)
                  .agg(pl.col("launch_failed").fill_null(False).sum().alias("failed"), pl.len().alias("launches"))
                  .filter(pl.col("failed") > 0))
    failed = int(per_kernel["failed"].sum())
    parts = []
    for name, count, total in per_kernel.head(3).iter_rows():
        measured = total - count
        parts.append(f"{name}'s time is that of its {counted(measured, 'measured launch', 'measured launches')}" if measured
                     else f"every launch of {name} failed: it has no time")
    more = f"; and {per_kernel.height - 3} more kernels" if per_kernel.height > 3 else ""
    return (f"{counted(failed, 'launch', 'launches')} failed under profiling (every measurement nan or empty, as after ncu's "
            f"`==ERROR== LaunchFailed`), counted as failed, not measured: " + "; ".join(parts) + more)


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
    launches = _without_launches(device)
    notes = []
    if skipped_lines:
        notes.append(f"skipped {skipped_lines} line(s) that are not tegrastats samples")
    return Analysis(source, device, launches, rank_kernels(launches), notes, kind="telemetry", detail=telemetry)


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
    gpus = device_list(names[0]) if len(names) == 1 else []
    assumed = None
    if spec is None and len(set(gpus)) == 1:
        matches = namesakes(gpus[0])
        spec = matches[0] if matches else None
        assumed = assumed_module_note(gpus[0], matches) if not bandwidth_bytes_per_s else None
    # Where --bandwidth was given, MBU is measured against it: the line says so rather than asking for it.
    if gpu:
        how = f"chosen with --gpu {gpu}"
    elif names:
        several = f"; {len(gpus)} GPUs" if len(gpus) > 1 else ""
        unknown = "; not in the GPU table: MBU against --bandwidth" if bandwidth_bytes_per_s else "; not in the GPU table, use --gpu or --bandwidth"
        how = f"named in the output (gpu_info / Device N){several}" + ("" if spec else unknown) + (f"; {assumed}" if assumed else "")
    else:
        how = "the output names no device; " + ("MBU against --bandwidth" if bandwidth_bytes_per_s else "use --gpu NAME or --bandwidth for MBU")
    peaks = _table_peaks(spec)
    if bandwidth_bytes_per_s:
        peaks["peak_dram_bytes_per_s"] = Peak(bandwidth_bytes_per_s, "--bandwidth")
    device = Device(spec.name if spec else (names[0] if names else None), spec.compute_capability if spec else None, spec, how, peaks)
    launches = _without_launches(device)
    return Analysis(source, device, launches, rank_kernels(launches), [], kind="llama-runs", detail=llm)


def analyze_nsys(
    export: NsysExport,
    source: Source,
    gpu: str | None = None,
    ncu: Analysis | None = None,
    gap_threshold_ns: int = DEFAULT_GAP_THRESHOLD_NS,
    weight_bytes: float | None = None,
    phase: Callable[[str], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    lanes_too: bool = False,
) -> Analysis:
    """Return the whole-run analysis of Nsight Systems data, with Nsight Compute verdicts joined when given.

    `weight_bytes` (the bytes a decode step reads: the model's weights) turns the per-step time into decode tokens/s,
    bytes per token and memory-bandwidth utilisation, with the same maths as `traceview decode`. `phase(name)` is
    told each step as it starts, and `progress(rows, total)` the NVTX rows streamed (a progress display for large
    exports). `lanes_too`: the timeline's lanes are built as well (Timeline.lanes), the NVTX ones in the same pass over
    the ranges, for a dashboard that will draw them.
    """
    say = phase or (lambda name: None)
    if export.nvtx_stream is not None and runs_two_steps_at_once(export.kernels, export.api, export.memops):
        # The first NVTX chunk is read while the kernels are summed and swept, which leave a core idle part of the
        # time; not on larger exports, where it would come on top of the sweep's peak.
        export.nvtx_stream.read_ahead()
    say("kernel summary")
    # One check of every timed row, here: a row with no time or an end before its start (a damaged export) would
    # otherwise give negative or NaN durations everywhere downstream.
    timed = pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))
    untimed = export.kernels.height + export.memops.height
    # Filtered only where a row fails: the caller still holds the export, so a filtered copy of millions of valid
    # kernels would be held twice.
    filtered: dict[str, Any] = {name: frame.filter(timed) for name, frame in (("kernels", export.kernels), ("memops", export.memops))
                                if frame.height and not frame.select(timed.all()).item()}
    export = dataclasses.replace(export, **filtered)
    untimed -= export.kernels.height + export.memops.height
    kernels, gpus = export.kernels, export.gpus
    summary = kernel_summary(kernels, export.names)

    spec = lookup_gpu(gpu) if gpu else None
    device_names = {row["device_id"]: row["name"] for row in gpus.iter_rows(named=True) if row["name"]}
    device_ids = set(kernels["device_id"].drop_nulls().unique().to_list()) | set(export.memops["device_id"].drop_nulls().unique().to_list())
    # A host lists every GPU it has; the ones that ran the work decide the peaks (a box of two A40s and two A100s
    # whose run used one A100 is an A100 run).
    active = [device for device in device_names if device in device_ids] or list(device_names)
    names_seen = list(dict.fromkeys(device_names[device] for device in active))
    gpu_rows = {row["device_id"]: row for row in gpus.iter_rows(named=True)}
    found = {device: find_module(name, gpu_rows[device]["sm_count"], gpu_rows[device]["memory_bytes"], bool(gpu_rows[device]["integrated"]),
                                 gpu_rows[device]["clock_hz"])
             for device, name in device_names.items()} if not gpu else {}
    specs = {device: (spec if gpu else found[device][0]) for device in device_names}
    module_notes = list(dict.fromkeys(note for _, note in found.values() if note))
    if spec is None and names_seen:
        spec = specs[active[0]]
    first_recorded = gpus.filter(pl.col("device_id").is_in(active))["compute_capability"].drop_nulls().first() if gpus.height else None
    recorded_cc = None if first_recorded is None else str(first_recorded)
    ranked, unmatched, matched = join_ncu(summary, ncu.kernels if ncu is not None else None, spec, recorded_cc)
    links: dict[int, tuple[float | None, str | None]] = {}
    for device in device_ids:
        link = host_link(specs.get(device, spec))
        links[device] = link if link else (None, None)

    mode = next((v for k, v in export.capture_options.items() if k.endswith("CUDA_GRAPH_TRACE_OPTIONS:MODE")), None)
    lanes = NvtxLanes(process_ids(kernels, export.memops), export.nvtx_stream.rows_at) if lanes_too and export.nvtx_stream is not None else None
    run = analyze_whole_run(kernels, export.names, export.memops, export.api, _counted(export, say, progress, lanes), export.graphs, links,
                            gap_threshold_ns, graph_trace_mode=mode, phase=say)
    for activity in run.devices:
        activity["name"] = device_names.get(activity["device_id"]) or (spec.name if gpu and spec else None)
    # The NVTX ranges were nested in the whole-run pass over them, after the sweep.
    say("steps")
    ranges = run.nvtx
    nvtx_groups, steps = group_summary(ranges), steps_from_nvtx(ranges) or steps_from_kernels(kernels, export.names)

    # With --gpu the export's own GPU name stays the device's: the peaks are the chosen entry's, and the line says whose.
    chosen = (f"the peaks of {spec.name}, chosen with --gpu {gpu}" if spec and names_seen and spec.name not in names_seen
              else f"chosen with --gpu {gpu}")
    how = chosen if gpu else ("recorded in the export" if names_seen else
                              "the export records no GPU; use --gpu for peaks and the host link")
    peaks = _table_peaks(spec)
    recorded = gpus.filter(pl.col("memory_bandwidth_bytes_per_s").is_not_null() & pl.col("device_id").is_in(active))
    # nsys derives an integrated GPU's bandwidth from CUDA's memory clock and bus width, which on a Jetson describe
    # no real memory path (an Orin Nano 8GB of 102 GB/s recorded at 29.4 GB/s; Orin modules report 612-918 MHz on 64- to
    # 256-bit buses): the module's datasheet figure stands instead.
    shared_memory = recorded.filter(pl.col("integrated").fill_null(False))
    recorded = recorded.filter(~pl.col("integrated").fill_null(False))
    implausible = [row for row in recorded.iter_rows(named=True) if not plausible_bandwidth(row["memory_bandwidth_bytes_per_s"], row["compute_capability"])]
    bandwidth = recorded.filter(~pl.col("device_id").is_in([row["device_id"] for row in implausible]))["memory_bandwidth_bytes_per_s"]
    if bandwidth.len() and not gpu:
        peaks["peak_dram_bytes_per_s"] = Peak(float(bandwidth.max()), "profile")  # type: ignore[arg-type]
    peaks = _with_ncu_peaks(peaks, ncu)
    if steps is not None and weight_bytes:
        steps["decode"] = _decode_from_steps(steps, weight_bytes, peaks["peak_dram_bytes_per_s"].value)
    display = (f"{len(names_seen)}× GPUs: " + ", ".join(names_seen)) if len(names_seen) > 1 else (names_seen[0] if names_seen else (spec.name if spec else None))
    first_cc = gpus["compute_capability"].drop_nulls().first() if gpus.height else None
    cc = None if first_cc is None else str(first_cc)
    device = Device(display, cc or (spec.compute_capability if spec else None), spec, how, peaks)
    findings = sorted([*run.findings, *filter(None, [fp32_fma_finding(ranked, spec), dequantize_finding(ranked)])], key=lambda f: -f["cost_ns"])
    timeline = Timeline(run.devices, run.copies, findings, nvtx_groups, run.verdict, run.gaps, run.idle_by_cause, run.launch,
                        steps, sync_summary(export.sync, export.api), unmatched, matched, export=export,
                        nvtx_lanes=lanes.lanes() if lanes is not None else None)
    if lanes_too:
        # The rest of the lanes too, while the analysis runs: the dashboard's first timeline then only bins them.
        say("timeline lanes")
        timeline.lanes()
    notes = list(export.notes) + run.notes
    if len(active) < len(device_names):
        listed = ", ".join(f"{count}× {name}" for name, count in Counter(device_names.values()).items())
        notes.append(f"the export lists {len(device_names)} GPUs ({listed}); the work ran on "
                     + ", ".join(f"GPU {device} ({device_names[device]})" for device in active) + (": the peaks are those GPUs'" if len(active) > 1 else ": the peaks are that GPU's"))
    for row in shared_memory.head(1).iter_rows(named=True):
        entry = specs.get(row["device_id"]) or spec
        notes.append(f"GPU {row['device_id']} ({row['name']}) shares the host's memory (a Jetson): the {row['memory_bandwidth_bytes_per_s'] / 1e9:,.1f} GB/s "
                     "nsys records for it comes from CUDA's memory clock and bus width, which on a Jetson do not describe the module's memory, "
                     "and is not used; " + (f"the peaks are the table's for {entry.name} ({entry.dram_bytes_per_s / 1e9:,.1f} GB/s)"
                                            + (f", the module with {row['memory_bytes'] / 1e9:,.1f} GB of memory" if row["memory_bytes"] and entry.memory_gb else "")
                                            if entry else "pass --gpu with the module (see `traceview gpus`) for its bandwidth"))
    notes += module_notes
    for row in implausible[:1]:
        notes.append(f"the export records {row['memory_bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s of memory bandwidth for {row['name'] or 'GPU ' + str(row['device_id'])}, "
                     f"more than any GPU of compute capability {row['compute_capability']} has: a misread field, not used"
                     + ("" if peaks["peak_dram_bytes_per_s"].value else "; pass --gpu for the datasheet peak"))
    if untimed:
        notes.append(f"{untimed} kernel or copy row(s) with no start or end time, or an end before the start, were left out (a damaged export?)")
    launched = launch_calls(export.api) if kernels.height == 0 else 0
    if launched:
        # The host side was traced and launched kernels, but no GPU activity was recorded (seen in real exports from
        # laptops and WSL2, and where nsys did not support the driver).
        wsl = export.kernel_release is not None and "microsoft" in export.kernel_release.lower()
        why = (f"the capture ran under WSL (kernel {export.kernel_release}), where nsys may trace no GPU activity" if wsl else
               "as under WSL2, or with a driver or CUPTI nsys could not use; see nsys's own warnings")
        notes.append(f"the export holds {launched:,} kernel launch calls but no kernel ran on the GPU in it: nsys traced the CUDA API but not the "
                     f"GPU activity ({why}), so there is no busy %, verdict or gap; re-profile on native Linux or Windows, or where GPU tracing works")
    elif kernels.height == 0 and not {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL"} & export.tables:
        notes.append("the export holds no CUDA trace at all (no CUDA API or kernel table): nsys traced other things only; "
                     "profile with -t cuda,nvtx (or check that the process used the GPU)")
    elif kernels.height == 0:
        notes.append("the export has no CUDA kernel activity (CUDA tracing off, or the application ended before the profiler flushed "
                     "its buffers: end it with cudaDeviceReset or cudaProfilerStop): only NVTX and API findings")
    repeated = repeated_call_numbers(export.api)
    if repeated:
        notes.append(f"{counted(repeated, 'CUDA call')} repeat the process and correlation id of an earlier call (nsys numbers them "
                     "uniquely: a merged or damaged export): each kernel and copy is matched to the latest call with its id that "
                     "started before it")
    notes += _join_notes(ncu, matched, summary.height, unmatched)
    collection = NVPROF_COLLECTION if before_nsight_compute(device.compute_capability) else NCU_COLLECTION
    return Analysis(source, device, _without_launches(device), ranked, notes, kind="nsys-export", detail=timeline, collection=collection)


# The phase an Nsight Systems analysis names while it streams the NVTX ranges: after the sweep's peak, and before the
# gaps' causes.
NVTX_PASS = "nesting NVTX ranges"


def _counted(export: NsysExport, say: Callable[[str], None], progress: Callable[[int, int], None] | None,
             lanes: NvtxLanes | None = None) -> Callable[[], Iterator[pl.DataFrame]]:
    """Return export.nvtx_chunks, telling `say` when the streamed NVTX rows are read and `progress` how many so far
    (the whole run's longest pass on an export with NVTX ranges), then when the gaps' causes follow; each chunk also
    goes to `lanes` where given (a pass read again starts them again)."""
    total = export.nvtx_stream.rows if export.nvtx_stream is not None else export.held_nvtx.height

    def chunks() -> Iterator[pl.DataFrame]:
        if progress is not None:
            progress(0, total)  # first, so that a bar is shown for a large table even where the read showed none
        say(NVTX_PASS)
        if lanes is not None:
            lanes.restart()
        done = 0
        for chunk in export.nvtx_chunks():
            if lanes is not None:
                lanes.add(chunk)
            yield chunk
            done += chunk.height
            if progress is not None:
                progress(min(done, total), total)
        say("causes of the idle gaps")

    return chunks


def _decode_from_steps(steps: dict[str, Any], weight_bytes: float, peak_bytes_per_s: float | None) -> dict[str, Any]:
    """Return decode tokens/s, bytes per token and MBU from the median step time (one token per sequence per step)."""
    tokens_per_s = 1e9 / steps["median_ns"] if steps.get("median_ns") else None
    record: dict[str, Any] = {"tokens_per_s": tokens_per_s, "bytes_per_token": weight_bytes,
                              "bandwidth_bytes_per_s": tokens_per_s * weight_bytes if tokens_per_s else None,
                              "peak_bytes_per_s": peak_bytes_per_s, "mbu_pct": None, "ceiling_tokens_per_s": None}
    if peak_bytes_per_s and tokens_per_s:
        ceiling = decode_ceiling(weight_bytes, peak_bytes_per_s, 0.0, 1, tokens_per_s)
        record.update(mbu_pct=ceiling.mbu_pct, ceiling_tokens_per_s=ceiling.ceiling_tokens_per_s, warning=ceiling.warning)
    return record


def _stats_launch_statistics(launches: pl.DataFrame) -> dict[str, Any]:
    """Return the launch record of a per-launch stats report (STATS_LAUNCHES): the tiny-kernel stretches, and where
    the report has each kernel's launch call (cuda_kern_exec_trace), the export's launch latency and call cost."""
    called = launches.filter(pl.col("call_start_ns").is_not_null()).with_columns(
        call_end_ns=(pl.col("call_start_ns") + pl.col("launch_call_ns")).cast(pl.Int64, strict=False))
    launch = launch_statistics(called, launches, pl.DataFrame(schema={"name": pl.String})) if called.height else {"median_launch_call_ns": None}
    return {**launch, "tiny_kernels": tiny_kernel_stretches(launches)}


def _whole_run_of_trace(stats: StatsReports, specs: dict[int, GpuSpec | None]) -> WholeRun:
    """Return the export's whole-run analysis of cuda_gpu_trace's kernels and copies: busy %, the breakdown, gaps and
    the findings they support (copies against each GPU's host link, from `specs`). With no CUDA API calls or NVTX
    ranges, gap causes stay unknown."""
    launches = stats.launches if stats.launches is not None else pl.DataFrame(schema=STATS_LAUNCHES)
    copies = stats.copy_launches if stats.copy_launches is not None else pl.DataFrame(schema=NSYS_MEMOPS)
    if launches["device_id"].null_count() == launches.height and copies["device_id"].null_count() == copies.height:
        # A trace without its Device column is one GPU's.
        launches, copies = launches.with_columns(device_id=pl.lit(0, pl.Int64)), copies.with_columns(device_id=pl.lit(0, pl.Int64))
    names = dict(enumerate(launches["name"].unique(maintain_order=True).to_list()))
    kernels = launches.select(
        "start_ns", "end_ns", "device_id",
        pl.col("name").replace_strict({name: i for i, name in names.items()}, return_dtype=pl.Int64).alias("name_id"),
        pl.lit(None, pl.Int64).alias("correlation_id"), pl.lit(None, pl.Int64).alias("pid"), "graph_node_id")
    links: dict[int, tuple[float | None, str | None]] = {device: link for device, spec in specs.items() if (link := host_link(spec)) is not None}
    return analyze_whole_run(kernels, names, copies, pl.DataFrame(schema=NSYS_API), lambda: [pl.DataFrame(schema=NSYS_NVTX)],
                             pl.DataFrame(schema=NSYS_GRAPHS), links)


def _stats_nvtx_groups(nvtx_sum: pl.DataFrame | None, projection: pl.DataFrame | None) -> list[dict[str, Any]]:
    """Return nvtx_sum's ranges grouped as the export's are (one row per name without its per-call parts, so
    `iter_0` … `iter_4` are one), most CPU time first. nsys stats writes `domain:name`; the empty default domain's
    leading colon is dropped.

    nvtx_gpu_proj_sum adds each group's projection onto the GPU, summed over its ranges (`gpu_projected_ns`: nsys's
    definition, from the start of a range's first GPU operation to the end of its last, nested ranges not
    subtracted), the GPU operations launched (`gpu_ops`) and the shallowest mean depth; alone, its range times and
    instances stand for nvtx_sum's (it lists only ranges that launched GPU work and began and ended on one thread)."""
    groups: dict[str, dict[str, Any]] = {}

    def group_of(name: object) -> dict[str, Any]:
        key = normalise_range_name(str(name or "").removeprefix(":") or None)
        return groups.setdefault(key, {"name": key, "count": 0, "cpu_ns": 0.0, "mean_ns": None, "gpu_ns": None, "kernels": None,
                                       "depth": None, "parent": None, "gpu_projected_ns": None, "gpu_ops": None})

    for row in nvtx_sum.iter_rows(named=True) if nvtx_sum is not None else ():
        group = group_of(row["name"])
        group["count"] += int(row["count"] or 0)
        group["cpu_ns"] += float(row["total_ns"] or 0)
    for row in projection.iter_rows(named=True) if projection is not None else ():
        group = group_of(row["name"])
        group["gpu_projected_ns"] = (group["gpu_projected_ns"] or 0.0) + float(row["total_ns"] or 0)
        group["gpu_ops"] = (group["gpu_ops"] or 0) + int(row["gpu_ops"] or 0)
        if row["avg_level"] is not None:
            group["depth"] = min(group["depth"] if group["depth"] is not None else 1 << 30, int(row["avg_level"]))
        if nvtx_sum is None:
            group["count"] += int(row["count"] or 0)
            group["cpu_ns"] += float(row["range_ns"] or 0)
    for group in groups.values():
        group["mean_ns"] = group["cpu_ns"] / group["count"] if group["count"] else None
    return sorted(groups.values(), key=lambda g: -g["cpu_ns"])


def analyze_stats(stats: StatsReports, source: Source, gpu: str | None = None, ncu: Analysis | None = None) -> Analysis:
    """Return the analysis of `nsys stats` reports: kernels ranked by total time (verdicts from joined ncu results),
    memcpy time by direction, blocking API time, NVTX ranges. A per-launch report adds the launch-bound test, and
    cuda_gpu_trace, which lists every kernel and copy, the export's busy %, breakdown and gaps; summaries alone carry
    no timeline."""
    reports, notes, launches = stats.reports, stats.notes, stats.launches
    spec = lookup_gpu(gpu) if gpu else None
    # cuda_gpu_trace names each GPU in its Device column (`NVIDIA A100-SXM4-80GB (0)`); summaries name none.
    specs = {device: spec or find_by_name(name) for device, name in stats.device_names.items()}
    named = list(dict.fromkeys(stats.device_names.values()))
    whole = _whole_run_of_trace(stats, specs) if stats.whole_timeline else None
    kern = reports.get("cuda_gpu_kern_sum")
    summary_rows = []
    if kern is not None:
        total = float(kern["total_ns"].sum() or 0)
        for row in kern.iter_rows(named=True):
            summary_rows.append({
                "kernel_name": row["name"], "short_name": short_kernel_name(row["name"] or "<unnamed>"), "launches": row["count"],
                "duration_ns": row["total_ns"], "avg_duration_ns": row["avg_ns"], "median_duration_ns": row["med_ns"],
                "min_duration_ns": row["min_ns"], "max_duration_ns": row["max_ns"],
                # nsys's own Time (%) where the report has it: a table cut by hand does not add up to the whole run.
                "share_pct": row["time_pct"] if row.get("time_pct") is not None else (
                    100.0 * row["total_ns"] / total if total and row["total_ns"] is not None else None),
            })
    summary = pl.DataFrame(summary_rows, infer_schema_length=None) if summary_rows else pl.DataFrame(
        schema={"kernel_name": pl.String, "short_name": pl.String, "launches": pl.Int64, "duration_ns": pl.Float64})
    kernel_spec = spec or next((found for found in specs.values() if found), None)  # the GPU the advice is for
    ranked, unmatched, matched = join_ncu(summary, ncu.kernels if ncu is not None else None, kernel_spec)
    kernel_findings = [f for f in [fp32_fma_finding(ranked, kernel_spec), dequantize_finding(ranked)] if f]
    mem = reports.get("cuda_gpu_mem_time_sum")
    copies = [] if mem is None else stats_copies(mem, reports.get("cuda_gpu_mem_size_sum"))
    api = reports.get("cuda_api_sum")
    blocking = [] if api is None else [r for r in api.iter_rows(named=True) if BLOCKING_API.match(r["name"] or "")]
    # nsys analyze's cuda_memcpy_sync table gives the synchronous copies a finding of their own: not counted twice.
    copies_apart = "cuda_memcpy_sync" in stats.rules
    if copies_apart:
        blocking = [r for r in blocking if "Memcpy" not in (r["name"] or "")]
    syncs = {
        "by_type": [],
        "blocking_api_count": sum(int(r["count"] or 0) for r in blocking),
        "blocking_api_ns": int(sum(r["total_ns"] or 0 for r in blocking)),
        "blocking_api_calls": [{"name": r["name"], "count": r["count"], "duration_ns": r["total_ns"]} for r in blocking[:10]],
        "api_calls": int(api["count"].sum() or 0) if api is not None else 0,
    }
    nvtx = _stats_nvtx_groups(reports.get("nvtx_sum"), reports.get("nvtx_gpu_proj_sum"))
    rule_findings = stats_rule_findings(stats.rules, api is not None)
    if whole is not None:
        # cuda_gpu_trace's timeline gives the gaps and low-use stretches itself; the host-call rules need nsys analyze.
        rule_findings = [f for f in rule_findings if f["rule"] not in ("gpu_gaps", "gpu_time_util")]
        findings = sorted(stats_findings(syncs, copies_apart) + whole.findings + kernel_findings + rule_findings, key=lambda f: -(f.get("cost_ns") or 0))
        timeline = Timeline(whole.devices, whole.copies, findings, nvtx, whole.verdict, whole.gaps, whole.idle_by_cause, whole.launch,
                            sync=syncs, unmatched_kernels=unmatched, matched_kernels=matched)
    else:
        graphs = stats_graph_trace_finding(api, kern)
        # Where the kernel summary lacks the kernels inside CUDA graphs, a copy share of what it lists would be wrong.
        copy_share = stats_copy_share_finding(kern, copies) if graphs is None else None
        findings = (stats_findings(syncs, copies_apart) + stats_unified_memory_findings(copies) + kernel_findings + rule_findings
                    + ([copy_share] if copy_share else []))
        launch: dict[str, Any] = {}
        if launches is not None and launches.height:
            launch = _stats_launch_statistics(launches)
            bound = launch_bound_finding(launch["tiny_kernels"], launch["median_launch_call_ns"])
        else:
            # Without a per-launch report, the two summaries still compare a launch call with the kernel it launches.
            bound = stats_launch_bound_finding(api, kern)
        findings += [f for f in (bound, graphs) if f is not None]
        findings.sort(key=lambda f: -(f.get("cost_ns") or 0))
        if graphs is not None:
            notes = [*(notes or []), graphs["message"]]
        timeline = Timeline([], copies, findings, nvtx, launch=launch, sync=syncs, unmatched_kernels=unmatched, matched_kernels=matched)
    if spec is None and len(named) == 1:
        spec = next(iter(specs.values()))  # every device carries the one name
    peaks = _with_ncu_peaks(_table_peaks(spec), ncu)
    name = named[0] if named and not gpu else (spec.name if spec else (ncu.device.name if ncu is not None else None))
    if gpu:
        how = f"chosen with --gpu {gpu}"
    elif named:
        where = "nvprof's output" if stats.producer == "nvprof" else "cuda_gpu_trace's Device column"
        how = f"named in {where}" + ("" if spec else " (not in the built-in GPU table; use --gpu for datasheet peaks)")
    else:
        unnamed = ("nvprof's summary names no device (its unified-memory section does, where it has one)" if stats.producer == "nvprof"
                   else "nsys stats reports name no device")
        how = "from the joined Nsight Compute results" if ncu is not None and name else f"{unnamed}; use --gpu for peaks"
    device = Device(name, spec.compute_capability if spec else None, spec, how, peaks)
    if whole is not None and stats.producer == "nvprof":
        last = ("nvprof's GPU trace lists every kernel and copy on each GPU: busy %, the breakdown and idle gaps come from it; what the "
                "GPU waited for (the gaps' causes) needs the CUDA API calls beside them, as in an Nsight Systems trace's SQLite export")
    elif whole is not None:
        last = ("cuda_gpu_trace lists every kernel and copy on each GPU: busy %, the breakdown and idle gaps come from it; what the "
                "GPU waited for (the gaps' causes) needs the CUDA API calls of the SQLite export")
    else:
        # What nsys analyze's rules already answered (with a table, or with "no problems") is not asked for again.
        ran = set(stats.rules) | {rule for rule, outcome in stats.rule_outcomes.items() if outcome.startswith("no problems")}
        missing = ["GPU busy %", "the idle gaps' causes" if "gpu_gaps" in ran else "idle gaps with their causes"]
        if not {"cuda_memcpy_async", "cuda_memcpy_sync"} & ran:
            missing.append("pageable copies")
        listed = " and ".join(missing) if len(missing) == 2 else f"{', '.join(missing[:-1])}, and {missing[-1]}"
        if stats.producer == "nvprof":
            last = f"nvprof's summary carries no timeline: {listed} need a trace (nsys profile, and its SQLite export)"
        elif timeline.launch:
            last = f"the per-launch report gives the launch-bound test only: {listed} need the SQLite export"
        else:
            last = f"nsys stats summaries carry no timeline: {listed} need the SQLite export"
    outcomes = [f"nsys analyze {rule}: {outcome}" for rule, outcome in stats.rule_outcomes.items() if rule in EXPERT_RULES]
    if not reports:
        outcomes.append("nsys analyze output alone lists no kernels: pass it with the `nsys stats` reports of the same run "
                        "(nsys stats --report cuda_gpu_kern_sum,cuda_api_sum REPORT), or the SQLite export")
    all_notes = [*(notes or []), *(whole.notes if whole is not None else []), *outcomes, last]
    all_notes += _join_notes(ncu, matched, summary.height, unmatched)
    collection = NVPROF_COLLECTION if before_nsight_compute(device.compute_capability) else NCU_COLLECTION
    return Analysis(source, device, _without_launches(device), ranked, all_notes, kind="nsys-stats", detail=timeline, collection=collection)
