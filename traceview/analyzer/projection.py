"""`--what-if GPU[,GPU…]`: a measured run projected onto other GPUs, every kernel moved along its own roof.

A memory-bound kernel scales with the DRAM bandwidth ratio, a compute-bound one with the peak ratio of its precision
(tensor cores or CUDA cores), and a latency-bound kernel, host time and idle time stay as they were: what a faster
GPU cannot shorten. A kernel whose verdict is only a guess from its name (no counters) moves by that guess, and the
projection says so. llama.cpp decode moves with bandwidth at the measured MBU, prefill with tensor compute; a serving
result's TPOT with bandwidth. Projecting a run onto its own GPU returns its own times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.devices import GpuSpec, lookup_gpu
from traceview.errors import UsageError

# The GPU-table peak a kernel of each precision is bound by, and the analysis's peak key for the same.
# FP16 on the CUDA cores runs at a fixed multiple of FP32 within an architecture: the table's FP32 ratio moves it.
_PRECISION_PEAKS = {"fp64": ("fp64_flop_per_s", "peak_fp64_flop_per_s"), "fp32": ("fp32_flop_per_s", "peak_fp32_flop_per_s"),
                    "fp16": ("fp32_flop_per_s", "peak_fp32_flop_per_s"), "tensor": ("tensor_fp16_flop_per_s", "peak_tensor_flop_per_s")}
DOMINANT_KERNELS = 3


@dataclass(frozen=True)
class Projection:
    """One target GPU: the measured and projected kernel time (ns), the speed-up, per-step and tokens/s where the run
    has them, the kernels that dominate the projected time, and the assumptions made."""

    target: str
    target_name: str
    measured_ns: float | None
    projected_ns: float | None
    speedup: float | None
    step_ns: float | None = None
    projected_step_ns: float | None = None
    tokens_per_s: float | None = None
    projected_tokens_per_s: float | None = None
    dominant: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()


def parse_targets(text: str) -> list[GpuSpec]:
    """The GPU table entries `--what-if` names, comma-separated; UsageError for an unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise UsageError("--what-if needs one or more GPUs, e.g. --what-if h100-sxm,a100-80gb (see `traceview gpus`)")
    return [lookup_gpu(name) for name in names]


def _source_peak(analysis: Analysis, key: str) -> float | None:
    peak = analysis.device.peaks.get(key)
    return peak.value if peak is not None else None


def _kernel_projection(analysis: Analysis, target: GpuSpec) -> Projection:
    kernels = analysis.kernels
    source_bw = analysis.device.spec.dram_bytes_per_s if analysis.device.spec is not None else _source_peak(analysis, "peak_dram_bytes_per_s")
    assumptions: list[str] = []
    if not kernels.height or source_bw is None:
        return Projection(target.key, target.name, None, None, None, assumptions=(
            "the run's own GPU and its peaks are unknown: pass --gpu for the GPU it ran on" if kernels.height else "no kernels to project",))
    rows = kernels.select("short_name", "duration_ns", "bound", "precision",
                          *(column for column in ("likely_bound", "tensor_core") if column in kernels.columns)).iter_rows(named=True)
    measured = projected = 0.0
    per_kernel: list[tuple[float, str]] = []
    guessed = 0
    for row in rows:
        time = row["duration_ns"] or 0.0
        bound = row["bound"]
        if bound == "unknown" and row.get("likely_bound") in ("memory", "compute"):
            bound, guessed = row["likely_bound"], guessed + 1
        ratio = 1.0
        if bound == "memory":
            ratio = source_bw / target.dram_bytes_per_s
        elif bound == "compute":
            # Without counters the precision is what the name says of tensor cores (cuBLAS's f32f32 GEMMs run on the CUDA cores).
            guess = "tensor" if row.get("tensor_core") else "fp32"
            table_key, peak_key = _PRECISION_PEAKS.get(row["precision"] or "", _PRECISION_PEAKS[guess])
            spec = analysis.device.spec
            source = getattr(spec, table_key) if spec is not None else _source_peak(analysis, peak_key)
            goal = getattr(target, table_key)
            ratio = source / goal if source and goal else 1.0
        measured += time
        projected += time * ratio
        per_kernel.append((time * ratio, row["short_name"] or "?"))
    if guessed:
        assumptions.append(f"{guessed} kernel(s) moved by the bound their name suggests (no counters): a measured verdict (--ncu) is firmer")
    assumptions.append("latency-bound kernels, host and idle time unchanged; memory-bound kernels by the DRAM bandwidth ratio, compute-bound by "
                       "their precision's peak ratio")
    timeline = analysis.timeline
    step_ns = projected_step = None
    if timeline is not None and timeline.steps and timeline.steps.get("median_ns") and timeline.steps.get("median_gpu_ns"):
        step_ns = float(timeline.steps["median_ns"])
        gpu = float(timeline.steps["median_gpu_ns"])
        projected_step = step_ns - min(gpu, step_ns) + min(gpu, step_ns) * (projected / measured if measured else 1.0)
    dominant = tuple(name for _, name in sorted(per_kernel, reverse=True)[:DOMINANT_KERNELS])
    return Projection(target.key, target.name, measured, projected, measured / projected if projected else None, step_ns, projected_step,
                      1e9 / step_ns if step_ns else None, 1e9 / projected_step if projected_step else None, dominant, tuple(assumptions))


def _llama_projection(analysis: Analysis, target: GpuSpec) -> Projection:
    llm = analysis.llm
    assert llm is not None
    decode = [r for r in llm.runs.iter_rows(named=True) if r["phase"] == "decode" and r["tokens_per_s"]]
    source_bw = next((r["device_bandwidth_bytes_per_s"] for r in decode if r.get("device_bandwidth_bytes_per_s")), None) or _source_peak(analysis, "peak_dram_bytes_per_s")
    if not decode or not source_bw:
        return Projection(target.key, target.name, None, None, None, assumptions=("no decode run with a known device bandwidth: pass --gpu",))
    measured = decode[0]["tokens_per_s"]
    projected = measured * target.dram_bytes_per_s / source_bw
    return Projection(target.key, target.name, None, None, target.dram_bytes_per_s / source_bw, tokens_per_s=measured, projected_tokens_per_s=projected,
                      assumptions=((f"decode ({decode[0]['test']}) at the measured MBU, scaled by the bandwidth ratio "
                                   f"({target.dram_bytes_per_s / 1e9:,.0f} / {source_bw / 1e9:,.0f} GB/s); prefill would scale with tensor compute"),))


def _serving_projection(analysis: Analysis, target: GpuSpec) -> Projection:
    run: Any = analysis.detail
    result = run.results[0] if run.results else None
    source_bw = run.bandwidth_bytes_per_s
    if result is None or not source_bw or not result.get("median_tpot_ms"):
        return Projection(target.key, target.name, None, None, None, assumptions=("the result's GPU bandwidth is unknown: pass --gpu",))
    ratio = source_bw / target.dram_bytes_per_s
    step, projected = result["median_tpot_ms"] * 1e6, result["median_tpot_ms"] * 1e6 * ratio
    concurrency = result.get("concurrency") or 1.0
    return Projection(target.key, target.name, None, None, 1 / ratio, step, projected, 1e9 * concurrency / step, 1e9 * concurrency / projected,
                      assumptions=("median TPOT at the measured MBU, scaled by the bandwidth ratio; TTFT and queueing not projected",))


def project(analysis: Analysis, targets: list[GpuSpec]) -> list[Projection]:
    """Return the analysis projected onto each target GPU (Projection per target), by the kind of what it holds."""
    if analysis.llm is not None:
        return [_llama_projection(analysis, t) for t in targets]
    if analysis.kind == "serving-bench":
        return [_serving_projection(analysis, t) for t in targets]
    if analysis.telemetry is not None:
        return [Projection(t.key, t.name, None, None, None, assumptions=("a telemetry log holds no kernels to project",)) for t in targets]
    return [_kernel_projection(analysis, t) for t in targets]
