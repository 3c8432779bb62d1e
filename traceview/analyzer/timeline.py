"""Whole-run analysis of Nsight Systems data: per-kernel totals, the ncu join, and the timeline record. Pure.

The time breakdown, idle gaps and rules live in `whole_run`, NVTX grouping and steps in `nvtx`; this module puts
them together with the per-kernel table. With Nsight Compute results joined by normalised kernel name, each kernel's
verdict and recoverable fraction carry over onto its whole-run time; without them, each kernel gets the kind its
name shows and the bound that kind usually has, marked as a heuristic.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from traceview.analyzer.devices import GpuSpec, tensor_speedups
from traceview.analyzer.diagnosis import MATRIX_KINDS, duration_text, fp32_fma_advice, tensor_math_advice
from traceview.analyzer.kernel_kinds import KIND_CHARS, display_names, kernel_kind, likely_bound, tensor_cores_by_name
from traceview.analyzer.names import normalise_kernel_name
from traceview.analyzer.ranking import share_pct
from traceview.analyzer.roofline import Bound
from traceview.analyzer.whole_run import (
    CAUSES,
    DEMAND_PAGING_MAX_MEAN_BYTES,
    DEMAND_PAGING_MIN_MIGRATIONS,
    FEW_SYNC_CALLS,
    GRAPH_LAUNCH_API,
    PAGEABLE_ADVICE,
    TINY_KERNEL_NS,
    distinct_names,
)
from traceview.numbers import reduced
from traceview.parsers.ncu_csv import short_kernel_name
from traceview.parsers.nsys_stats import RULE_ROW_LIMIT
from traceview.wording import counted

if TYPE_CHECKING:  # lanes imports whole_run, as this module does, and is loaded only when a timeline is drawn
    from traceview.analyzer.lanes import Lane

BLOCKING_API = re.compile(
    r"^(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|cudaMemcpy(2D|3D)?(ToSymbol|FromSymbol)?|"
    r"cuCtxSynchronize|cuStreamSynchronize|cuEventSynchronize|cuMemcpy(HtoD|DtoH|DtoD)?(_v2)?)(_v\d+)?$"
)
NO_NCU_RECOMMENDATION = "profile the top kernels with `ncu --set full -k NAME` and join the export with --ncu for a verdict"
# Nsight Compute profiles Volta (7.0) and later; on Kepler, Maxwell and Pascal the per-kernel metrics are nvprof's.
NCU_MIN_COMPUTE_CAPABILITY = (7, 0)
NVPROF_RECOMMENDATION = ("profile the top kernels with `nvprof --kernels NAME --metrics flop_count_sp,flop_count_dp,dram_read_transactions,"
                         "dram_write_transactions,dram_read_throughput,dram_write_throughput,achieved_occupancy` (Nsight Compute does not "
                         "profile this GPU) and join that output with --ncu for a verdict")


def before_nsight_compute(compute_capability: str | None) -> bool:
    """True for a GPU older than Nsight Compute supports (compute capability under 7.0); False when unknown."""
    try:
        major, minor = (int(part) for part in (compute_capability or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < NCU_MIN_COMPUTE_CAPABILITY


SHORT_KIND_ADVICE = {"gemm": "tensor cores, precision", "attention": "fused attention", "convolution": "cuDNN algo, layout",
                     "normalization": "fuse", "reduction": "fuse", "elementwise": "fuse", "copy": "avoid or fuse the copy",
                     "communication": "overlap with compute", "latency": "fuse or CUDA graph",
                     "gemm_memory": "fewer bytes: quantize, batch", "attention_memory": "fewer KV-cache bytes",
                     "fp32_fma": "tensor cores: TF32/BF16", "tensor_math": "lower precision, less work",
                     "attention_fused": "precision, fewer tokens", "dequantize": "quantized GEMM instead"}
KIND_RECOMMENDATIONS = {
    "gemm": "a GEMM: check it runs on tensor cores at the lowest precision the model allows (TF32/BF16/FP8) with shapes in multiples of 16",
    "attention": "use a fused attention kernel (FlashAttention / SDPA); decode attention is bound by reading the KV cache",
    "dequantize": ("expands quantized weights into a full-precision copy that the GEMMs then read again: a quantized GEMM or GEMV "
                   "that dequantizes in registers never writes it (llama.cpp's MMQ/MMVQ, Marlin), or, for large prefill batches, "
                   "dequantize once at load time if memory allows"),
    "attention_fused": ("a fused attention kernel already (its name says so): what is left is its precision (FP8 attention on Hopper "
                        "and Blackwell: FlashAttention-3, cuDNN) and the tokens it attends over (prefix caching, shorter or packed "
                        "sequences without padding); check the head dimension is one its tiles support (64, 128)"),
    "convolution": "check the cuDNN algorithm, channels-last layout and tensor-core precision",
    "normalization": "memory-bound by nature: fuse it with the kernels around it (torch.compile, a fused kernel) so activations are read once",
    "reduction": "memory-bound by nature: fuse it with its producer so the data is read once",
    "elementwise": "memory-bound by nature: fuse chains of elementwise kernels (torch.compile, a fused kernel) so each tensor is read once",
    "copy": "a data-movement kernel: avoid the copy (views, contiguous layouts) or fuse it into its consumer",
    "communication": "overlap the collective with compute, or move fewer bytes (bucketing, lower-precision gradients)",
    "latency": "launch-bound (runs for microseconds): fuse it with its neighbours or capture the sequence in a CUDA graph",
    # GEMVs and decode-shaped GEMMs or attention read every weight (or the whole KV cache) once per token: bytes, not FLOPs.
    "gemm_memory": ("a GEMV or decode-shaped GEMM: it reads every weight once per token, so move fewer bytes (INT8/INT4/FP8 weights) "
                    "or serve more tokens per read (batching, speculative decoding); tensor cores do not help a memory-bound GEMV"),
    "attention_memory": ("decode attention: bound by reading the KV cache — quantize it (FP8/INT8 KV), use a paged or split-KV "
                         "(flash-decoding) kernel, or share it (GQA/MQA models)"),
}


# Attention kernels that are fused already: advising "use a fused attention kernel" to FlashAttention is no advice.
FUSED_ATTENTION = re.compile(r"flash|fmha|fused|sdpa|xformers|cutlass|cudnn", re.IGNORECASE)
DEQUANT_NAME = re.compile(r"dequant", re.IGNORECASE)


def advice_key(kind: str, likely: str | None, tensor_core: bool | None = None, name: str = "") -> str:
    """Return the KIND_RECOMMENDATIONS / SHORT_KIND_ADVICE key for a kernel of this kind, likely bound, tensor-core
    use (by its name: False for FP32 FMA) and name; `fp32_fma` and `tensor_math` have no KIND_RECOMMENDATIONS entry
    (fp32_fma_advice, tensor_math_advice: they depend on the GPU)."""
    if likely == "latency":
        return "latency"
    if kind in ("gemm", "attention") and likely == "memory":
        return f"{kind}_memory"
    if kind == "attention" and FUSED_ATTENTION.search(name[:KIND_CHARS]):
        return "attention_fused"
    if kind == "elementwise" and DEQUANT_NAME.search(name[:KIND_CHARS]):
        return "dequantize"
    if kind in MATRIX_KINDS and tensor_core is False:
        return "fp32_fma"
    if kind in MATRIX_KINDS and tensor_core is True and likely == "compute":
        return "tensor_math"
    return kind


_LANES_BUILT = threading.Lock()


@dataclass(frozen=True)
class Timeline:
    """Whole-run findings; times in ns, shares in %. For `nsys stats` inputs only the summaries are filled."""

    devices: list[dict[str, Any]]  # per device: span, breakdown, verdict, gaps
    copies: list[dict[str, Any]]  # per device and direction (nsys stats: per operation, device unknown)
    findings: list[dict[str, Any]]  # rule, cost_ns, message, advice, evidence; most costly first
    nvtx: list[dict[str, Any]]  # grouped NVTX ranges
    verdict: dict[str, Any] | None = None
    gaps: list[dict[str, Any]] = field(default_factory=list)
    idle_by_cause: list[dict[str, Any]] = field(default_factory=list)
    launch: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, Any] | None = None
    sync: dict[str, Any] = field(default_factory=dict)
    unmatched_kernels: list[str] = field(default_factory=list)
    matched_kernels: int = 0
    export: Any = None  # the NsysExport the findings came from, for the zoomable timeline (None for nsys stats)
    # Each process's NVTX lane (analyzer.lanes.Lane by process id), where the analysis built them in its own pass over
    # the ranges; else they are built from the export when the timeline is first drawn.
    nvtx_lanes: dict[int | None, Lane] | None = field(default=None, repr=False, compare=False)
    _lanes: list[Lane] | None = field(default=None, repr=False, compare=False)

    def lanes(self) -> list[Lane]:
        """Return the export's timeline lanes (analyzer.lanes), built on first use and kept."""
        with _LANES_BUILT:  # two first renders at once (the dashboard's callbacks run on threads) build them once
            return self._built_lanes()

    def _built_lanes(self) -> list[Lane]:
        if self._lanes is not None:
            return self._lanes
        from traceview.analyzer.lanes import nvtx_lanes, process_ids, timeline_lanes

        e = self.export
        lanes: list[Lane] = []
        if e is not None:
            nvtx = self.nvtx_lanes
            if nvtx is None:
                stream = e.nvtx_stream
                nvtx = nvtx_lanes(e.nvtx_chunks(), process_ids(e.kernels, e.memops), held=e.held_nvtx if stream is None else None,
                                  read=stream.rows_at if stream is not None else None)
            lanes = timeline_lanes(e.kernels, e.memops, e.graphs, e.api, nvtx, e.names)
        # A cache on a frozen record: the lanes follow from the export, which never changes.
        object.__setattr__(self, "_lanes", lanes)
        return lanes


def kernel_summary(kernels: pl.DataFrame, names: dict[int, str]) -> pl.DataFrame:
    """Return one row per kernel name: launches, total/avg/median/p99/min/max time (ns), graph-launched count,
    per-device launches and time."""
    durations = kernels.lazy().select("name_id", "device_id", (pl.col("end_ns") - pl.col("start_ns")).alias("d"),
                                      pl.col("graph_node_id").is_not_null().alias("graph"))
    per_device = durations.group_by("name_id", "device_id").agg(pl.len().alias("launches"), pl.col("d").sum().alias("duration_ns"))
    summary = durations.group_by("name_id").agg(
        pl.len().alias("launches"),
        pl.col("d").sum().cast(pl.Float64).alias("duration_ns"),
        pl.col("d").mean().alias("avg_duration_ns"),
        pl.col("d").median().alias("median_duration_ns"),
        pl.col("d").quantile(0.99).alias("p99_duration_ns"),
        pl.col("d").min().cast(pl.Float64).alias("min_duration_ns"),
        pl.col("d").max().cast(pl.Float64).alias("max_duration_ns"),
        pl.col("graph").sum().cast(pl.Int64).alias("graph_launches"),
    )
    devices = per_device.sort("device_id").group_by("name_id").agg(
        pl.struct(pl.col("device_id"), pl.col("launches"), pl.col("duration_ns")).alias("devices")
    )
    # In name order, since the hash group-by's order varies from run to run.
    frame = summary.join(devices, on="name_id", how="left").collect().sort("name_id")
    full = {i: names.get(i, f"<string {i}>") for i in frame["name_id"].to_list()}
    short = {i: short_kernel_name(name) for i, name in full.items()}
    total = float(frame["duration_ns"].sum() or 0)
    return frame.with_columns(
        pl.col("name_id").replace_strict(full, default=None, return_dtype=pl.String).alias("kernel_name"),
        pl.col("name_id").replace_strict(short, default=None, return_dtype=pl.String).alias("short_name"),
        share_pct(frame["duration_ns"], total),
    ).drop("name_id")


# Listed kernels whose own shares (a profiler's Time(%)) add up to less than this are part of the run's kernels.
WHOLE_TABLE_PCT = 99.5


def run_kernel_ns(ranked: pl.DataFrame) -> float:
    """Return the run's kernel time (ns) that a finding's share is of: the listed kernels' time, or, where their own
    shares add up to visibly less than 100% (an nsys stats table cut by hand keeps nsys's Time(%) of the whole run),
    that time scaled up to the whole."""
    listed = float(ranked["duration_ns"].sum() or 0.0)
    shares = ranked["share_pct"] if "share_pct" in ranked.columns else None
    if shares is None or shares.null_count() or not shares.len():
        return listed
    shown = float(shares.sum() or 0.0)
    return listed * 100.0 / shown if 0.0 < shown < WHOLE_TABLE_PCT else listed


def fp32_fma_finding(ranked: pl.DataFrame, spec: GpuSpec | None) -> dict[str, Any] | None:
    """Return a run finding for the GEMMs and convolutions whose names say FP32 FMA on the CUDA cores and that are
    compute-bound (measured by ncu, else likely by their kind and duration), or None. Its cost is the most the
    tensor cores could give back: their time × (1 − 1/the best datasheet ratio on `spec`); 0 where the GPU is unknown."""
    if ranked.height == 0 or "tensor_core" not in ranked.columns:
        return None
    # Measured by ncu: FP32 precision (an FP64 GEMM has no tensor-core FP32 path to move to); else by name and duration.
    compute = (((pl.col("bound") == Bound.COMPUTE.value) & (pl.col("precision") == "fp32"))
               | ((pl.col("bound") == Bound.UNKNOWN.value) & (pl.col("likely_bound") == "compute")))
    fma = ranked.filter(pl.col("kind").is_in(MATRIX_KINDS) & (pl.col("tensor_core") == False) & compute.fill_null(False))
    speedups = tensor_speedups(spec)
    if fma.height == 0 or (spec is not None and not speedups):
        return None
    time_ns = float(fma["duration_ns"].sum() or 0.0)
    total_ns = run_kernel_ns(ranked)
    kinds = fma.group_by("kind").agg(pl.col("duration_ns").sum()).sort("duration_ns", descending=True)["kind"].to_list()
    what = " and ".join({"gemm": "GEMMs", "convolution": "convolutions"}[kind] for kind in kinds)
    share = f", {100.0 * time_ns / total_ns:.1f}% of kernel time" if total_ns else ""
    message = (f"FP32 {what} on the CUDA cores, not tensor cores: {fma.height} compute-bound kernel(s) whose names (or tensor-pipe "
               f"metrics) say so ran {duration_text(time_ns)}{share}")
    advice = fp32_fma_advice(kinds[0], spec)
    cost = 0.0
    if speedups:
        label, ratio = speedups[0]
        cost = time_ns * (1.0 - 1.0 / ratio)
        advice += f" — at most {duration_text(cost)} back if they were compute-bound in {label} too"
    return {"rule": "fp32_matrix_math", "cost_ns": int(cost), "message": message, "advice": advice, "evidence": _longest_kernels(fma)}


DEQUANT_MIN_SHARE_PCT = 5.0  # of kernel time: below it, expanding the weights is not worth a finding


def dequantize_finding(ranked: pl.DataFrame) -> dict[str, Any] | None:
    """Return a run finding for standalone dequantization kernels (their names say dequant and they are not GEMMs or
    GEMVs themselves, which read packed weights in place), when they take DEQUANT_MIN_SHARE_PCT or more of the kernel
    time; its cost is their time, the most a kernel that never writes the expanded weights could save."""
    if ranked.height == 0 or "kind" not in ranked.columns:
        return None
    names = ranked["kernel_name"].fill_null("").to_list()
    standalone = ranked.filter(pl.Series([DEQUANT_NAME.search(name[:KIND_CHARS]) is not None for name in names]) & (pl.col("kind") != "gemm"))
    time_ns = float(standalone["duration_ns"].sum() or 0.0)
    total_ns = run_kernel_ns(ranked)
    if standalone.height == 0 or not total_ns or 100.0 * time_ns / total_ns < DEQUANT_MIN_SHARE_PCT:
        return None
    top = standalone.sort("duration_ns", descending=True)
    listed = ", ".join(top["short_name"].head(3).to_list()) + (", …" if top.height > 3 else "")
    message = (f"standalone dequantization: {top.height} kernel(s) that expand quantized weights ({listed}) ran {duration_text(time_ns)}, "
               f"{100.0 * time_ns / total_ns:.1f}% of kernel time, writing a full-precision copy for the GEMMs to read again")
    advice = ("a quantized GEMM that reads the packed weights in place does not write them out (llama.cpp's MMQ, e.g. built with "
              "GGML_CUDA_FORCE_MMQ; Marlin or Machete kernels for GPTQ/AWQ in vLLM); for large prefill batches, where cuBLAS on the "
              "expanded weights can be faster, dequantize once at load time if memory allows")
    return {"rule": "standalone_dequantize", "cost_ns": int(time_ns), "message": message, "advice": advice, "evidence": _longest_kernels(top)}


def _longest_kernels(kernels: pl.DataFrame, count: int = 5) -> dict[str, Any]:
    """Return a finding's evidence: the `count` kernels of `kernels` (ranked rows) with the most time, longest first."""
    longest = kernels.sort("duration_ns", descending=True, maintain_order=True).head(count)
    return {"kernels": [{"name": row["kernel_name"], "duration_ns": row["duration_ns"], "launches": row["launches"]}
                        for row in longest.iter_rows(named=True)]}


def _heuristic_verdict(row: dict[str, Any], spec: GpuSpec | None = None, compute_capability: str | None = None) -> dict[str, Any]:
    """Label a kernel with no Nsight Compute data from its name: kind, the bound that kind usually has (a heuristic),
    whether it runs on tensor cores (matrix kinds whose name says), and advice for that kind on this GPU (`spec`).
    Kernels of a few microseconds launched one by one are launch-bound whatever their kind; on a GPU older than Nsight
    Compute supports (`compute_capability`, else the table entry's), the profiler to ask is nvprof."""
    name = row.get("kernel_name") or ""
    kind = kernel_kind(name)
    bound = likely_bound(name, kind)
    tensor = tensor_cores_by_name(name) if kind in (*MATRIX_KINDS, "attention") else None
    median = row.get("median_duration_ns")
    one_by_one = not row.get("graph_launches")
    if median is not None and median < TINY_KERNEL_NS and one_by_one and kind != "communication":
        bound = "latency"
    key = advice_key(kind, bound, tensor, name)
    old_gpu = before_nsight_compute(compute_capability or (spec.compute_capability if spec else None))
    label = f"{kind}, likely {bound}" if bound else f"{kind}, no kernel metrics"
    reason = (f"{'no per-kernel metrics' if old_gpu else 'no Nsight Compute data'}; the name says {kind}" + (f", and {kind} kernels are usually {bound}-bound" if bound and bound != "latency" else "")
              + ("; it names FP32 FMA on the CUDA cores, not tensor cores" if key == "fp32_fma" else "")
              + (f"; it runs {median / 1e3:.1f} us per launch, so launch overhead dominates" if bound == "latency" and median is not None else "")
              + (" (a heuristic: join nvprof --metrics results with --ncu for a measured verdict)" if old_gpu else
                 " (a heuristic: join ncu results with --ncu for a measured verdict)"))
    what = "a GEMM" if kind == "gemm" else "a convolution"
    recommendation = (f"{what} in FP32 FMA on the CUDA cores — {fp32_fma_advice(kind, spec)}" if key == "fp32_fma"
                      else f"{what} {tensor_math_advice(name, spec)}" if key == "tensor_math"
                      else KIND_RECOMMENDATIONS.get(key, NVPROF_RECOMMENDATION if old_gpu else NO_NCU_RECOMMENDATION))
    return {"kind": kind, "likely_bound": bound, "label": label, "reason": reason, "recommendation": recommendation,
            "tensor_core": tensor, "tensor_core_source": "kernel name" if tensor is not None else None}


def join_ncu(summary: pl.DataFrame, ncu_kernels: pl.DataFrame | None, spec: GpuSpec | None = None,
             compute_capability: str | None = None) -> tuple[pl.DataFrame, list[str], int]:
    """Carry Nsight Compute verdicts onto whole-run kernels, and name-based ones (advice for `spec`, the run's GPU) onto
    the others; return (kernels ranked, unmatched ncu names, matched count)."""
    verdict_columns = ["bound", "label", "binding_roof", "precision", "reason", "recommendation", "recoverable_source",
                       "roof_pct", "compute_pct", "memory_pct", "achieved_flop_per_s", "arithmetic_intensity",
                       "rules", "occupancy", "stalls", "stall_source", "tensor_core", "tensor_core_source", "advice"]
    rows = []
    ncu_rows: dict[str, dict[str, Any]] = {}
    ncu_short: dict[str, list[dict[str, Any]]] = {}
    if ncu_kernels is not None:
        for row in ncu_kernels.iter_rows(named=True):
            ncu_rows[normalise_kernel_name(row["kernel_name"])] = row
            # By the bare function name: the ncu analysis' own short names tell its instantiations apart.
            ncu_short.setdefault(short_kernel_name(row["kernel_name"] or ""), []).append(row)
    used: set[str] = set()
    matched = 0
    run_short = summary["short_name"].value_counts() if summary.height and "short_name" in summary.columns else None
    unique_in_run = {r["short_name"] for r in run_short.iter_rows(named=True) if r["count"] == 1} if run_short is not None else set()
    for row in summary.iter_rows(named=True):
        key = normalise_kernel_name(row["kernel_name"] or "")
        ncu = ncu_rows.get(key)
        if ncu is None and row["short_name"] in unique_in_run:
            # Fall back on the bare function name only where it is unambiguous on both sides.
            candidates = ncu_short.get(row["short_name"], [])
            ncu = candidates[0] if len(candidates) == 1 else None
        record = dict(row)
        heuristic = _heuristic_verdict(row, spec, compute_capability)
        record.update(kind=heuristic["kind"], likely_bound=heuristic["likely_bound"])
        if ncu is not None:
            matched += 1
            used.add(ncu["kernel_name"])
            fraction = (ncu["recoverable_ns"] / ncu["duration_ns"]) if ncu.get("recoverable_ns") is not None and ncu.get("duration_ns") else None
            record.update({c: ncu.get(c) for c in verdict_columns})
            record["recoverable_ns"] = row["duration_ns"] * fraction if fraction is not None else None
        else:
            record.update({c: None for c in verdict_columns})
            record.update(bound=Bound.UNKNOWN.value, label=heuristic["label"], reason=heuristic["reason"],
                          recommendation=heuristic["recommendation"], recoverable_ns=None, tensor_core=heuristic["tensor_core"],
                          tensor_core_source=heuristic["tensor_core_source"])
        rows.append(record)
    if not rows:
        empty = {"rank": pl.Int64, "kernel_name": pl.String, "short_name": pl.String, "launches": pl.Int64, "duration_ns": pl.Float64,
                 "share_pct": pl.Float64, "recoverable_ns": pl.Float64, "kind": pl.String, "likely_bound": pl.String, **{c: pl.Float64 if c.endswith(("pct", "per_s", "intensity")) else pl.String for c in verdict_columns}}
        return pl.DataFrame(schema=empty), [r["kernel_name"] for r in ncu_rows.values()], 0
    frame = pl.DataFrame(rows, infer_schema_length=None)
    # The name settles ties: the summary comes from a hash group-by, so rows of equal time would otherwise swap places
    # from one run to the next (two 4 µs kernels of one launch each, in the real H200 export).
    ranked = frame.sort(["recoverable_ns", "duration_ns", "kernel_name"], descending=[True, True, False], nulls_last=True,
                        maintain_order=True).with_row_index("rank", offset=1)
    # Matching used the bare function names; what people read are names that tell the instantiations apart.
    ranked = ranked.with_columns(pl.Series("short_name", display_names(ranked["kernel_name"].fill_null("").to_list(),
                                                                      ranked["short_name"].fill_null("").to_list()), dtype=pl.String))
    unmatched = [name for name in ncu_rows.values() if name["kernel_name"] not in used] if ncu_kernels is not None else []
    return ranked.with_columns(pl.col("rank").cast(pl.Int64)), [u["kernel_name"] for u in unmatched], matched


def sync_summary(sync: pl.DataFrame, api: pl.DataFrame) -> dict[str, Any]:
    """Return GPU-side synchronisation time by type and blocking CUDA API calls (count, ns), top calls first."""
    by_type = (sync.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("d")).group_by("sync_type")
               .agg(pl.len().alias("count"), pl.col("d").sum().alias("duration_ns")).sort(["duration_ns", "sync_type"], descending=[True, False]).to_dicts())
    # Each distinct call name is matched once: millions of launch calls are not run through the pattern one by one.
    blocking_names = [n for n in distinct_names(api["name"]) if BLOCKING_API.search(n)]
    blocking = api.filter(pl.col("name").is_in(blocking_names)).with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("d"))
    calls = blocking.group_by(pl.col("name").cast(pl.String)).agg(pl.len().alias("count"), pl.col("d").sum().alias("duration_ns")).sort(["duration_ns", "name"], descending=[True, False])
    return {
        "by_type": by_type,
        "blocking_api_count": blocking.height,
        "blocking_api_ns": int(blocking["d"].sum() or 0),
        "blocking_api_calls": calls.head(10).to_dicts(),
        "api_calls": api.height,
    }




# nsys prints MB with three decimals: below 0.1 MB a total has under two significant digits, too few for a rate.
_MIN_STATS_MB_FOR_RATE = 0.1


def stats_copies(times: pl.DataFrame, sizes: pl.DataFrame | None) -> list[dict[str, Any]]:
    """Return the copies of an `nsys stats` run per operation: count and GPU time (cuda_gpu_mem_time_sum), and where the
    size summary is there too, bytes and the achieved GB/s."""
    moved = {} if sizes is None else {row["name"]: row for row in sizes.iter_rows(named=True)}
    copies = []
    for row in times.iter_rows(named=True):
        size = moved.get(row["name"]) or {}
        total_mb = size.get("total_mb")
        size_bytes = total_mb * 1e6 if total_mb is not None else None
        rate = (size_bytes / row["total_ns"] if size_bytes is not None and total_mb is not None and total_mb >= _MIN_STATS_MB_FOR_RATE
                and row["total_ns"] else None)
        copies.append({"device_id": None, "direction": row["name"], "count": row["count"], "bytes": size_bytes, "duration_ns": row["total_ns"],
                       "gb_per_s": rate, "pageable_count": None, "link_gb_per_s": None, "link": None, "link_pct": None})
    return copies


def stats_unified_memory_findings(copies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the managed-memory finding an `nsys stats` run supports: many small unified-memory migrations (demand
    paging), by the same rule as the SQLite export's; its cost is the migrations' GPU time (no timeline says more)."""
    found = []
    for copy in copies:
        count, size = copy.get("count") or 0, copy.get("bytes")
        if "unified" not in str(copy["direction"]).lower() or size is None or count < DEMAND_PAGING_MIN_MIGRATIONS:
            continue
        if size / count >= DEMAND_PAGING_MAX_MEAN_BYTES:
            continue
        found.append({"rule": "unified_memory_paging", "cost_ns": int(copy["duration_ns"] or 0),
                      "message": (f"managed memory moved on demand: {count:,} {copy['direction']} migrations ({size / 1e6:.1f} MB, "
                                  f"{size / count / 1e3:.1f} kB each) took {(copy['duration_ns'] or 0) / 1e6:.2f} ms of GPU time"),
                      "advice": CAUSES["unified_memory"][1],
                      "evidence": {"direction": copy["direction"], "migrations": count, "bytes": size}})
    return found


# Calls that launch one kernel each (graph launches and host functions launch other things).
_KERNEL_LAUNCH_API = re.compile(r"^(cuda|cu)Launch(Kernel|CooperativeKernel)")
SUMMARY_LAUNCH_BOUND_MIN_CALLS = 1000


def stats_launch_bound_finding(api: pl.DataFrame | None, kernels: pl.DataFrame | None) -> dict[str, Any] | None:
    """Return the launch_bound finding two `nsys stats` summaries support on their own, or None: kernels launched one
    call each (their count within 10% of the launch calls') that run, on average, for less time than a launch call
    takes on the host. From one launching thread the GPU is then busy at most kernel time ÷ launch-call time; the
    cost is the difference, the GPU time those launches leave idle (ns). Both tables: cuda_api_sum, cuda_gpu_kern_sum
    frames as nsys_stats reads them (count, total_ns, name)."""
    if api is None or kernels is None or not api.height or not kernels.height:
        return None
    calls = api.filter(pl.col("name").cast(pl.String).str.contains(_KERNEL_LAUNCH_API.pattern))
    call_count, call_ns = int(calls["count"].sum() or 0), float(calls["total_ns"].sum() or 0)
    launches, kernel_ns = int(kernels["count"].sum() or 0), float(kernels["total_ns"].sum() or 0)
    if call_count < SUMMARY_LAUNCH_BOUND_MIN_CALLS or not launches or not 0.9 <= launches / call_count <= 1.1:
        return None
    per_call, per_kernel = call_ns / call_count, kernel_ns / launches
    if per_call <= per_kernel:
        return None
    busy_pct = 100.0 * kernel_ns / call_ns
    return {"rule": "launch_bound", "cost_ns": int(call_ns - kernel_ns),
            "message": (f"{call_count:,} kernel launch calls take {duration_text(per_call)} each on the host ({duration_text(call_ns)} in all) "
                        f"for kernels that run {duration_text(per_kernel)} on average ({duration_text(kernel_ns)} of GPU time): launched from "
                        f"one thread, the GPU is busy at most {busy_pct:.0f}% of that time — launch-bound"),
            "advice": CAUSES["launch_overhead"][1] + " (one kernel over all the work, e.g. a grid-stride loop)",
            "evidence": {"launch_calls": call_count, "launch_call_ns": call_ns, "kernel_launches": launches, "kernel_ns": kernel_ns,
                         "busy_ceiling_pct": busy_pct}}


def stats_graph_trace_finding(api: pl.DataFrame | None, kernels: pl.DataFrame | None) -> dict[str, Any] | None:
    """Return the cuda_graph_trace finding where `nsys stats` summaries show CUDA graph launches but no more kernels
    than the calls that launch one kernel each: nsys's default `--cuda-graph-trace=graph` leaves the kernels inside
    graphs out of cuda_gpu_kern_sum, so its GPU time covers only the kernels launched outside graphs. Else None."""
    if api is None or not api.height:
        return None
    names = api["name"].cast(pl.String)
    graphs = int(api.filter(names.str.contains(GRAPH_LAUNCH_API.pattern))["count"].sum() or 0)
    if not graphs:
        return None
    direct = int(api.filter(names.str.contains(_KERNEL_LAUNCH_API.pattern))["count"].sum() or 0)
    launched = int(kernels["count"].sum() or 0) if kernels is not None and kernels.height else 0
    if launched > 1.1 * direct:
        return None  # more kernels than direct launches: the graphs' kernels are in the table (--cuda-graph-trace=node)
    message = (f"{graphs:,} CUDA graph launches, and the kernel summary holds no more kernels ({launched:,}) than were launched one by "
               f"one ({direct:,}): the kernels inside the graphs are not in it (nsys --cuda-graph-trace=graph, the default), so its "
               "GPU time covers only the kernels launched outside graphs")
    return {"rule": "cuda_graph_trace", "cost_ns": 0, "message": message,
            "advice": "profile again with nsys --cuda-graph-trace=node to see the kernels inside the graphs",
            "evidence": {"graph_launches": graphs, "direct_launch_calls": direct, "kernel_launches": launched}}


def _rule_count(rows: pl.DataFrame, what: str, plural: str | None = None) -> str:
    """`3 synchronous copies`, or `at least 50 ...` where the table has nsys analyze's default row limit (it lists the
    longest first, so the rest are shorter ones)."""
    text = counted(rows.height, what, plural)
    return f"at least {text} (nsys analyze lists the {RULE_ROW_LIMIT} longest; `--rule NAME:rows=-1` lists all)" if rows.height == RULE_ROW_LIMIT else text


def _sized(rows: pl.DataFrame) -> str:
    moved = reduced(rows["bytes"].sum()) if rows["bytes"].null_count() < rows.height else None
    return f", {moved / 1e6:,.1f} MB" if moved else ""


def stats_rule_findings(rules: dict[str, pl.DataFrame], have_api_summary: bool) -> list[dict[str, Any]]:
    """Return the findings of the `nsys analyze` rule tables (nsys_stats.RULE_ROWS by rule), named as the SQLite
    export's rules are. Their times are the copies' own GPU time (the copy rules), the calls' host time
    (cuda_api_sync), or the idle time (gpu_gaps; gpu_time_util's idle share of each stretch): a lower bound on what
    the host was held for, since the tables do not give the calls' host time. cuda_api_sync is left to the API
    summary's finding where that was read too (`have_api_summary`): the summary counts every call, the table 50."""
    found: list[dict[str, Any]] = []
    # A row without its duration (a damaged or hand-edited table) says nothing about time.
    rules = {rule: rows.filter(pl.col("duration_ns").is_not_null()) for rule, rows in rules.items()}

    def add(rule: str, cost: float, message: str, advice: str, evidence: dict[str, Any]) -> None:
        found.append({"rule": rule, "cost_ns": int(cost), "message": message, "advice": advice, "evidence": evidence})

    rows = rules.get("cuda_memcpy_async")
    if rows is not None and rows.height:
        copy_ns = float(rows["duration_ns"].sum() or 0)
        add("cuda_memcpy_async", copy_ns,
            f"nsys analyze: {_rule_count(rows, 'asynchronous copy', 'asynchronous copies')} from or to pageable host memory ran synchronously, "
            f"holding the host while they ran ({duration_text(copy_ns)} of copy time{_sized(rows)})",
            PAGEABLE_ADVICE, {"copies": rows.height, "copy_ns": copy_ns, "bytes": rows["bytes"].sum()})
    for rule, what, advice in (("cuda_memcpy_sync", "synchronous memcpy call", CAUSES["synchronous_copy"][1]),
                               ("cuda_memset_sync", "synchronous memset call", "use cudaMemsetAsync on the work's stream")):
        rows = rules.get(rule)
        if rows is None or not rows.height:
            continue
        copy_ns = float(rows["duration_ns"].sum() or 0)
        pageable = rows.filter((pl.col("src_kind") == "Pageable") | (pl.col("dst_kind") == "Pageable")).height
        calls = ", ".join(sorted({name for name in rows["api_name"].drop_nulls().to_list()}))[:80]
        add(rule, copy_ns,
            f"nsys analyze: {_rule_count(rows, what)}{f' ({calls})' if calls else ''} blocked the host for at least their "
            f"{'copies' if rule == 'cuda_memcpy_sync' else 'memsets'}' own {duration_text(copy_ns)}{_sized(rows)}"
            + (f"; {pageable} of them from or to pageable memory" if pageable else ""),
            advice, {"calls": rows.height, "copy_ns": copy_ns, "pageable": pageable})
    rows = rules.get("cuda_api_sync")
    if rows is not None and rows.height and not have_api_summary:
        blocked = float(rows["duration_ns"].sum() or 0)
        by_name = rows.group_by("api_name").agg(pl.len().alias("count"), pl.col("duration_ns").sum().alias("ns")).sort(
            ["ns", "api_name"], descending=[True, False])
        # A handful of synchronize calls in a whole run is the host waiting for results it needs (as in the export's rule).
        advice = CAUSES["synchronization"][1] if rows.height >= FEW_SYNC_CALLS else (
            f"only {counted(rows.height, 'synchronize call')} in the run: the host waits for results it needs; "
            "move one later only if more work could be queued before it")
        add("cuda_api_sync", blocked,
            f"nsys analyze: {_rule_count(rows, 'synchronization call')} blocked the host for {duration_text(blocked)} "
            f"(most: {by_name['api_name'][0]} ×{by_name['count'][0]})",
            advice,
            {"calls": [{"name": r["api_name"], "count": r["count"], "duration_ns": r["ns"]} for r in by_name.head(5).iter_rows(named=True)]})
    rows = rules.get("gpu_gaps")
    if rows is not None and rows.height:
        idle = float(rows["duration_ns"].sum() or 0)
        longest = rows.sort("duration_ns", descending=True).row(0, named=True)
        where = f" at {longest['start_ns'] / 1e9:.3f} s" if longest["start_ns"] is not None else ""
        sizes = (f"{duration_text(idle)}{where}" if rows.height == 1
                 else f"{duration_text(idle)} in all, the longest {duration_text(longest['duration_ns'])}{where}")
        add("gpu_gaps", idle, f"nsys analyze: {_rule_count(rows, 'GPU idle gap')} over the rule's threshold (500 ms unless set): {sizes}",
            "see what the host did then (nsys --sample=cpu, the OS runtime trace, NVTX ranges); the SQLite export names each gap's cause",
            {"gaps": rows.height, "idle_ns": idle, "devices": sorted(set(rows["device_id"].drop_nulls().to_list()))})
    rows = rules.get("gpu_time_util")
    if rows is not None and rows.height:
        idle = float(rows.select((pl.col("duration_ns") * (1 - pl.col("in_use_pct").fill_null(0) / 100)).sum()).item() or 0)
        span = float(rows["duration_ns"].sum() or 0)
        lowest = reduced(rows["in_use_pct"].min())
        add("gpu_time_util", idle,
            f"nsys analyze: low GPU utilization in {_rule_count(rows, 'stretch', 'stretches')} ({duration_text(span)}"
            + (f", as low as {lowest:.1f}% in use" if lowest is not None else "") + f"): {duration_text(idle)} of idle GPU time in them",
            "see the idle gaps and their causes for those stretches (the SQLite export)",
            {"stretches": rows.head(60).to_dicts(), "idle_ns": idle})
    return found


COPY_DOMINATED_PCT = 50.0  # copies' share of the GPU time the summaries list beyond which copies, not kernels, are the work


def stats_copy_share_finding(kernels: pl.DataFrame | None, copies: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Return the copy_dominated finding two summaries support, or None: host↔device copies (stats_copies, unified
    memory left to its own finding) take over half of the GPU time the kernel and copy summaries list. Summed times,
    not a timeline: copies on other streams may overlap kernels, which only a trace shows; the cost is the copies'
    time (ns)."""
    copy_ns = sum(float(c["duration_ns"] or 0) for c in copies
                  if "memcpy" in str(c["direction"]).lower() and "unified" not in str(c["direction"]).lower())
    kernel_ns = float(kernels["total_ns"].sum() or 0) if kernels is not None and kernels.height else 0.0
    if not copy_ns or 100.0 * copy_ns / (copy_ns + kernel_ns) < COPY_DOMINATED_PCT:
        return None
    share = 100.0 * copy_ns / (copy_ns + kernel_ns)
    return {"rule": "copy_dominated", "cost_ns": int(copy_ns),
            "message": (f"copies take {share:.1f}% of the GPU time the summaries list ({duration_text(copy_ns)} of copies, "
                        f"{duration_text(kernel_ns)} of kernels): the GPU mostly moves data; whether copies overlapped the kernels "
                        "(other streams) only a trace shows"),
            "advice": "keep the data on the GPU between steps, overlap the copies with compute on another stream (from pinned memory), or move fewer bytes",
            "evidence": {"copy_ns": copy_ns, "kernel_ns": kernel_ns, "copy_share_pct": share}}


def stats_findings(sync: dict[str, Any], copies_apart: bool = False) -> list[dict[str, Any]]:
    """Return the findings an `nsys stats` summary supports: blocking CUDA API time (nsys analyze's cuda_api_sync).
    `copies_apart`: the synchronous copies have their own finding (nsys analyze's table), so `sync` counts none."""
    if not sync.get("blocking_api_ns"):
        return []
    kinds = "synchronize" if copies_apart else "synchronize, synchronous memcpy"
    return [{"rule": "cuda_api_sync", "cost_ns": int(sync["blocking_api_ns"]),
             "message": f"{counted(sync['blocking_api_count'], 'blocking CUDA API call')} ({kinds}) took {sync['blocking_api_ns'] / 1e6:.2f} ms of CPU time",
             "advice": "take synchronizations out of the loop and use cudaMemcpyAsync from pinned memory; the SQLite export shows whether the GPU waited",
             "evidence": {"calls": sync.get("blocking_api_calls", [])}}]
