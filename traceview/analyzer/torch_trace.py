"""The analysis of a PyTorch profiler trace: the whole-run view an Nsight Systems export gets (the same code, on the
same frames), then what only a PyTorch trace has — a roofline for every op estimated from its shapes, the
collectives by kind with their bus bandwidth, CUDA/HIP graph replay and capture, the weights a step reads.

Estimated verdicts say so: FLOPs and bytes come from the op's input shapes and types (`record_shapes=True`), not
from counters; the bytes are the compulsory traffic (each input read once, the output written once), so the memory
share is a lower bound on what the kernels moved.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from traceview.analyzer.analysis import Analysis, Device, Source, analyze_nsys
from traceview.analyzer.kernel_kinds import EXPERT_ALL_TO_ALL, is_communication
from traceview.analyzer.roofline import LATENCY_THRESHOLD_PCT
from traceview.analyzer.timeline import Timeline
from traceview.parsers.kineto import TorchTrace
from traceview.wording import counted

if TYPE_CHECKING:
    from traceview.analyzer.kinds import AnalysisOptions  # kinds imports this module's analysis

ESTIMATED = "estimated from shapes"
# The ops listed in the op roofline, most kernel time first.
TOP_OPS = 25
_DTYPE_BYTES = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4, "double": 8, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
                "long int": 8, "long": 8, "int": 4, "short int": 2, "bool": 1, "unsigned char": 1, "signed char": 1,
                "c10::complex<float>": 8}
_TWO_BYTE = {"c10::BFloat16", "c10::Half"}
_MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul", "aten::_scaled_mm"}
_ATTENTION = re.compile(r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention|flash_attn")
_NORM = {"aten::layer_norm", "aten::native_layer_norm", "aten::rms_norm", "aten::_fused_rms_norm", "aten::group_norm",
         "aten::native_group_norm", "aten::batch_norm", "aten::native_batch_norm", "aten::_softmax", "aten::softmax"}
_ELEMENTWISE = {"aten::add", "aten::add_", "aten::mul", "aten::mul_", "aten::sub", "aten::div", "aten::silu", "aten::gelu", "aten::relu",
                "aten::sigmoid", "aten::tanh", "aten::exp", "aten::neg", "aten::pow", "aten::rsqrt", "aten::copy_", "aten::clone",
                "aten::where", "aten::threshold_backward"}
# Collective kernels by what they do; NCCL and RCCL name them alike (`ncclDevKernel_AllReduce_Sum_bf16_RING_LL`), PyTorch's
# symmetric-memory kernels and vLLM's custom all-reduce in snake case (`multimem_all_reduce_kernel`, `cross_device_reduce_1stage`).
_COLLECTIVES = (("all-reduce", re.compile(r"all_?reduce|cross_device_reduce", re.IGNORECASE)), ("all-gather", re.compile(r"all_?gather", re.IGNORECASE)),
                ("reduce-scatter", re.compile(r"reduce_?scatter", re.IGNORECASE)),
                ("all-to-all", re.compile(r"all_?to_?all|" + EXPERT_ALL_TO_ALL, re.IGNORECASE)),
                ("broadcast", re.compile(r"Broadcast", re.IGNORECASE)), ("send/recv", re.compile(r"SendRecv|Send|Recv", re.IGNORECASE)))
_LAUNCHES = re.compile(r"^(?:cuda|hip)(?:LaunchKernel|LaunchKernelExC|ModuleLaunchKernel|ExtModuleLaunchKernel|LaunchCooperativeKernel)|^cuLaunchKernel")
_CAPTURE_BEGIN = re.compile(r"^(?:cuda|hip)StreamBeginCapture")
_CAPTURE_END = re.compile(r"^(?:cuda|hip)StreamEndCapture")


@dataclass(frozen=True)
class TorchRun(Timeline):
    """The whole run (as for an Nsight Systems export) and what only a PyTorch trace has: `ops` (the op roofline,
    estimated from shapes: per op name, shapes and type), `collectives` (per kind: count, time, bytes, bus bandwidth),
    `graphs` (kernels replayed from graphs, graph launches, capture), `weights_per_step_bytes` (read by the linear
    layers in one step, from their shapes), `rocm`, `rank` and `world_size`."""

    ops: list[dict[str, Any]] = field(default_factory=list)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    graphs: dict[str, Any] = field(default_factory=dict)
    weights_per_step_bytes: float | None = None
    rocm: bool = False
    rank: int | None = None
    world_size: int | None = None
    headline: str | None = None  # what the trace is, when that is the first thing to say (no GPU activity, a graph capture)


def _numel(dims: Any) -> int | None:
    if not isinstance(dims, list) or not all(isinstance(d, int) and d >= 0 for d in dims):
        return None
    return math.prod(dims) if dims else 1


def op_cost(name: str, dims: list[Any], types: list[Any]) -> tuple[float, float, str | None] | None:
    """Return (FLOPs, compulsory bytes, precision) of one call of an op from its input shapes and types, or None when
    the op or its shapes are not ones traceview models. Precision: "tensor" for 2-byte matrix math, "fp32", or None
    (the op's bytes, not its math, are what it costs)."""
    tensors = [(d, t) for d, t in zip(dims, types, strict=False) if isinstance(d, list) and d and isinstance(t, str) and t in _DTYPE_BYTES]
    if not tensors:
        return None
    first_type = tensors[0][1]
    size = _DTYPE_BYTES[first_type]
    matrix_precision = "tensor" if first_type in _TWO_BYTE else "fp32" if first_type == "float" else None

    def nbytes(shape: list[int]) -> float:
        return float((_numel(shape) or 0) * size)

    shapes = [d for d, _ in tensors]
    if name in _MATMUL:
        if name in ("aten::addmm", "aten::baddbmm") and len(shapes) >= 3:
            shapes = shapes[1:]  # the bias (or the tensor added) comes first
        if len(shapes) < 2:
            return None
        a, b = shapes[0], shapes[1]
        if name == "aten::linear":  # input [..., K], weight [N, K]
            if len(b) != 2 or a[-1] != b[1]:
                return None
            rows, k, n = (_numel(a[:-1]) or 1), b[1], b[0]
            return 2.0 * rows * k * n, (rows * k + k * n + rows * n) * size, matrix_precision
        if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
            return None
        m, k, n = a[-2], a[-1], b[-1]
        batch = max(_numel(a[:-2]) or 1, _numel(b[:-2]) or 1)
        return 2.0 * batch * m * k * n, batch * (m * k + k * n + m * n) * size, matrix_precision
    if _ATTENTION.search(name):
        if len(shapes) < 3 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
            return None
        q, key, value = shapes[0], shapes[1], shapes[2]
        # SDPA and its backends (aten::_scaled_dot_product_*) take q as [B, H, L, D]; the flash and memory-efficient
        # kernels' own ops (aten::_flash_attention_forward, flash_attn) as [B, L, H, D]: the head dim is last in both.
        if "scaled_dot_product" in name:
            batch, heads, queries, dim = q
            keys = key[2]
        else:
            batch, queries, heads, dim = q
            keys = key[1]
        flops = 4.0 * batch * heads * queries * keys * dim
        return flops, nbytes(q) + nbytes(key) + nbytes(value) + nbytes(q), matrix_precision
    if name in _NORM:
        elements = _numel(shapes[0]) or 0
        return 5.0 * elements, 2.0 * elements * size, None
    if name in _ELEMENTWISE:
        out = max(_numel(s) or 0 for s in shapes)
        read = sum(float((_numel(d) or 0) * _DTYPE_BYTES[t]) for d, t in tensors)
        # An in-place op (`add_`, `copy_`) writes into its first input: no output of its own.
        return float(out), read + (0.0 if name.endswith("_") else out * size), None
    return None


def _verdict(flops: float, nbytes: float, seconds: float, peak_flops: float | None, peak_bytes: float | None) -> dict[str, Any]:
    achieved_flops, achieved_bytes = flops / seconds, nbytes / seconds
    compute = 100.0 * achieved_flops / peak_flops if peak_flops else None
    memory = 100.0 * achieved_bytes / peak_bytes if peak_bytes else None
    if compute is None and memory is None:
        bound = "unknown"
    elif max(compute or 0.0, memory or 0.0) < LATENCY_THRESHOLD_PCT:
        bound = "latency"  # under 60% of both roofs: neither is what holds it
    else:
        bound = "memory" if (memory or 0.0) >= (compute or 0.0) else "compute"
    ridge = peak_flops / peak_bytes if peak_flops and peak_bytes else None
    intensity = flops / nbytes if nbytes else None
    return {"achieved_flop_per_s": achieved_flops, "achieved_bytes_per_s": achieved_bytes, "compute_pct": compute, "memory_pct": memory,
            "arithmetic_intensity": intensity, "roofline_side": None if ridge is None or intensity is None else ("memory" if intensity < ridge else "compute"),
            "bound": bound, "source": ESTIMATED}


def op_roofline(trace: TorchTrace, device: Device) -> list[dict[str, Any]]:
    """Return the ops whose shapes traceview models, grouped by name, shapes and type: calls, kernel time (ns, of the
    kernels each call launched), FLOPs and bytes per call, achieved rates and the estimated verdict against the
    device's roofs, most kernel time first."""
    if not trace.record_shapes:
        return []
    timed = trace.kernel_links.filter(pl.col("op_id").is_not_null()).group_by("op_id").agg(
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("kernel_ns"), pl.len().alias("kernels"))
    ops = trace.ops.join(timed, on="op_id", how="inner").filter(pl.col("input_dims").is_not_null())
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in ops.select("name", "input_dims", "input_types", "kernel_ns", "kernels").iter_rows(named=True):
        try:
            dims, types = json.loads(row["input_dims"]), json.loads(row["input_types"] or "[]")
        except json.JSONDecodeError:
            continue
        cost = op_cost(row["name"], dims, types) if isinstance(dims, list) and isinstance(types, list) else None
        if cost is None or not row["kernel_ns"]:
            continue
        key = (row["name"], row["input_dims"], row["input_types"] or "")
        entry = groups.setdefault(key, {"op": row["name"], "input_dims": dims, "input_types": types, "calls": 0, "kernels": 0, "kernel_ns": 0,
                                        "flop_per_call": cost[0], "bytes_per_call": cost[1], "precision": cost[2]})
        entry["calls"] += 1
        entry["kernels"] += row["kernels"]
        entry["kernel_ns"] += row["kernel_ns"]
    peaks = device.peaks
    records = []
    for entry in sorted(groups.values(), key=lambda e: -e["kernel_ns"])[:TOP_OPS]:
        precision = entry["precision"] or "fp32"
        peak_flops = peaks.get(f"peak_{precision}_flop_per_s")
        flops, nbytes = entry["flop_per_call"] * entry["calls"], entry["bytes_per_call"] * entry["calls"]
        records.append({**entry, **_verdict(flops, nbytes, entry["kernel_ns"] / 1e9, peak_flops.value if peak_flops else None,
                                            peaks["peak_dram_bytes_per_s"].value)})
    return records


def _collective(name: str) -> str | None:
    for kind, pattern in _COLLECTIVES:
        if pattern.search(name):
            return kind
    return None


def collectives(trace: TorchTrace) -> list[dict[str, Any]]:
    """Return the collective kernels by kind: count, kernel time (ns), bytes moved and bus bandwidth (bytes/s) where
    the trace records message sizes (NCCL's convention: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n of
    the larger buffer)."""
    export = trace.export
    comm_ids = {i for i, name in export.names.items() if is_communication(name)}
    if not comm_ids:
        return []
    kernels = export.kernels.filter(pl.col("name_id").is_in(list(comm_ids)))
    sized = {(row["start_ns"], row["name_id"]): row for row in trace.collectives.iter_rows(named=True)}
    out: dict[str, dict[str, Any]] = {}
    for start, end, name_id in kernels.select("start_ns", "end_ns", "name_id").iter_rows():
        kind = _collective(export.names[name_id]) or "other"
        entry = out.setdefault(kind, {"collective": kind, "count": 0, "kernel_ns": 0, "sized": 0, "bytes": 0.0, "sized_ns": 0, "bus_bytes": 0.0})
        entry["count"] += 1
        entry["kernel_ns"] += end - start
        args = sized.get((start, name_id))
        if args and args["in_nelems"] is not None and args["dtype"]:
            element = 2 if args["dtype"] in ("BFloat16", "Half") else 4 if args["dtype"] in ("Float", "Int") else 1 if "8" in args["dtype"] else 4
            n = args["group_size"] or 1
            moved = max(args["in_nelems"], args["out_nelems"] or 0) * element
            factor = 2 * (n - 1) / n if kind == "all-reduce" else (n - 1) / n if kind in ("all-gather", "reduce-scatter") else 1.0
            entry["sized"] += 1
            entry["bytes"] += moved
            entry["sized_ns"] += end - start
            entry["bus_bytes"] += moved * factor
    for entry in out.values():
        entry["bus_bytes_per_s"] = entry["bus_bytes"] / (entry["sized_ns"] / 1e9) if entry["sized_ns"] else None
    return sorted(out.values(), key=lambda e: -e["kernel_ns"])


def graph_facts(trace: TorchTrace) -> dict[str, Any]:
    """Return kernels replayed from CUDA/HIP graphs, graph launch calls, and launch calls made inside stream capture
    (recorded into a graph, not run): a trace of capture has many of these and few kernels."""
    export = trace.export
    api = export.api.with_columns(pl.col("name").cast(pl.String))
    launches = api.filter(pl.col("name").str.contains(_LAUNCHES.pattern))
    begins = api.filter(pl.col("name").str.contains(_CAPTURE_BEGIN.pattern)).select("tid", "start_ns").sort("start_ns")
    ends = api.filter(pl.col("name").str.contains(_CAPTURE_END.pattern)).select("tid", pl.col("end_ns")).sort("end_ns")
    captured = 0
    if begins.height and ends.height:
        windows = begins.join_asof(ends.rename({"end_ns": "capture_end"}), left_on="start_ns", right_on="capture_end", by="tid", strategy="forward",
                               check_sortedness=False)  # sorted by time above; polars cannot check it within groups
        # Per thread, the launch calls' starts sorted once; each window counts its calls by two binary searches.
        starts = {tid: np.sort(rows["start_ns"].to_numpy()) for (tid,), rows in launches.partition_by("tid", as_dict=True).items()}
        for tid, start, stop in windows.select("tid", "start_ns", "capture_end").iter_rows():
            if stop is not None and tid in starts:
                captured += int(np.searchsorted(starts[tid], stop, side="right") - np.searchsorted(starts[tid], start, side="left"))
    replayed = int(export.kernels["graph_node_id"].is_not_null().sum())
    return {"replayed_kernels": replayed, "graph_launches": api.filter(pl.col("name").str.contains("GraphLaunch")).height,
            "launch_calls": launches.height, "captured_launch_calls": captured, "kernels": export.kernels.height}


def weights_per_step(trace: TorchTrace, steps: int) -> float | None:
    """Return the bytes of the weight matrices the linear layers read in one step (their shapes ÷ steps), or None."""
    if not trace.record_shapes or steps < 1:
        return None
    total = 0.0
    linear = trace.ops.filter(pl.col("name") == "aten::linear").filter(pl.col("input_dims").is_not_null())
    for dims_text, types_text in linear.select("input_dims", "input_types").iter_rows():
        dims, types = json.loads(dims_text), json.loads(types_text or "[]")
        if len(dims) >= 2 and isinstance(dims[1], list) and len(types) >= 2 and types[1] in _DTYPE_BYTES:
            total += (_numel(dims[1]) or 0) * _DTYPE_BYTES[types[1]]
    return total / steps if total else None


def _no_gpu_activity(trace: TorchTrace) -> str:
    """Return what a trace with neither GPU activity nor kernel launches is: a CPU-only profile, or another
    accelerator's (MTIA, XPU, HPU), whose device events are of categories traceview does not read."""
    if not trace.unread_categories:
        return "the trace holds no GPU activity and no kernel launch: a CPU-only profile"
    listed = ", ".join(f"{category} ×{count:,}" for category, count in trace.unread_categories[:3])
    return (f"the trace holds no CUDA or ROCm GPU activity; its other events are of kinds traceview does not read ({listed}): "
            "another accelerator's profile, of which only the host side (ops, ranges) is analysed here")


def analyze_torch(trace: TorchTrace, source: Source, options: AnalysisOptions) -> Analysis:
    """Return the analysis of a PyTorch profiler trace: the whole run as for an Nsight Systems export, the op
    roofline estimated from shapes, the collectives and the graphs (TorchRun in `detail`). Takes --gpu,
    --gap-threshold and --weights (else the weights a step reads come from the linear layers' shapes)."""
    base = analyze_nsys(trace.export, source, options.gpu, None, options.gap_threshold_ns(), options.weight_bytes(), options.phase, options.progress,
                        lanes_too=options.timeline)
    timeline = base.timeline
    assert timeline is not None  # analyze_nsys always returns its Timeline
    graphs = graph_facts(trace)
    notes = [note for note in base.notes if "nsys traced the CUDA API" not in note and "nsys traced other things" not in note
             and not note.startswith("the export has no CUDA kernel activity")]
    headline = None
    verdict, devices = timeline.verdict, timeline.devices
    if trace.export.kernels.height == 0:
        launches = graphs["launch_calls"]
        headline = (f"the trace holds no GPU activity (no kernel, copy or memset event) though {counted(launches, 'kernel launch call')} "
                        "were made: the profiler recorded the CPU only — profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] "
                        "and let the profiler flush (exit the profile context, or call prof.stop()) before exporting"
                    if launches else _no_gpu_activity(trace))
    elif graphs["captured_launch_calls"] >= 10 and graphs["captured_launch_calls"] > 5 * graphs["kernels"]:
        headline = (f"a trace of {'HIP' if trace.rocm else 'CUDA'} graph capture: {graphs['captured_launch_calls']:,} launch calls were recorded "
                    f"into graphs inside stream capture and only {counted(graphs['kernels'], 'kernel')} ran — the idle GPU is the capture, "
                    "not the workload; profile the replay (the steps after warm-up) to see the GPU's time")
        # Not an idle GPU: the run's verdict, and each GPU's, is that this is a capture.
        verdict = {"verdict": "graph_capture", "share_pct": None, "exposed_pct": {}, "message": headline}
        devices = [{**device, "verdict": "graph_capture", "verdict_message": headline} for device in devices]
    if trace.rocm:
        notes.append("an AMD ROCm trace: the GPU's name and peaks are not in the trace (pass --gpu for peaks), and its hip* calls are read "
                     "as CUDA's")
    steps = (timeline.steps or {}).get("count") or trace.ops.filter(pl.col("name").str.starts_with("ProfilerStep#")).height
    ops = op_roofline(trace, base.device)
    if ops:
        notes.append(f"op verdicts are {ESTIMATED} (the ops' input shapes and types; FLOPs and compulsory bytes, not counters): "
                     "run Nsight Compute for measured ones")
    fields = {**{f.name: getattr(timeline, f.name) for f in dataclasses.fields(Timeline)}, "verdict": verdict, "devices": devices}
    detail = TorchRun(**fields, ops=ops, collectives=collectives(trace), graphs=graphs, weights_per_step_bytes=weights_per_step(trace, steps),
                      rocm=trace.rocm, rank=trace.rank, world_size=trace.world_size, headline=headline)
    return dataclasses.replace(base, kind="torch-trace", detail=detail, notes=notes)
