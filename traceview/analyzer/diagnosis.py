"""Why a kernel is slow and what to change, from what the Nsight Compute export already holds. Pure functions.

Per kernel (launches merged by name), from the launch rows with their verdicts:
- `rules`: every ncu rule result, one per (section, rule, type), with the largest estimated speedup of any launch and
  that launch's text, most promising first;
- `occupancy`: theoretical and achieved occupancy, the resource that limits blocks per SM, waves per SM and the tail
  effect of a partial last wave;
- `stalls`: the warp stall reasons with their share of warp cycles, in a CUDA programmer's words;
- `tensor_core`: whether the kernel runs on tensor cores (its metrics, else its name), with the evidence;
- `advice`: sentences built from that evidence, each quoting the numbers it rests on, most valuable first.

Conventions: per-kernel occupancy, SOL and stall figures are means weighted by launch duration (launches without a
duration weigh 1); "per launch" where a kernel ran once. Occupancy arithmetic follows the CUDA occupancy calculator:
registers are allocated per warp in units of 256 (8 per thread), 64 K registers per SM unless the export says otherwise.
"""

from __future__ import annotations

import math
import re
from typing import Any

import polars as pl

from traceview.analyzer.devices import GpuSpec, tensor_speedups
from traceview.analyzer.kernel_kinds import KIND_CHARS, kernel_kind, tensor_cores_by_name
from traceview.analyzer.roofline import (
    BALANCED_GAP_PCT,
    BALANCED_LABEL,
    NCU_COLLECTION,
    Collection,
    pct_text,
    waves_in_rules,
)
from traceview.numbers import float_or_none
from traceview.parsers.nvprof_metrics import STALL_UNIT as NVPROF_STALL_UNIT
from traceview.wording import counted

# A kernel whose median launch is longer than this pays under 10 % for a ~2-5 us launch: CUDA graphs cannot help it.
LAUNCH_BOUND_MAX_NS = 20_000.0
REGISTERS_PER_SM = 65_536  # every GPU since Kepler (the raw page's device__attribute_max_registers_per_multiprocessor)
REGISTER_GRANULE = 8  # registers per thread are allocated per warp in units of 256 = 8 per thread

# Kernels whose bytes are weights or KV cache: quantization advice fits them, and nothing else.
_LLM_NAME = re.compile(r"gemv|gemm|matmul|dequant|quant|q4|q8|q5|q6|gguf|awq|gptq|marlin|kv_?cache|paged|attention|attn|fmha|flash|"
                       r"decode|rotary|rope|rms_?norm|llama|mul_mat|mmvq|mmq", re.IGNORECASE)

# Warp states (ncu's stall reasons) in words, with what usually helps. `selected` is the issuing state, not a stall.
STALLS: dict[str, tuple[str, str | None]] = {
    "long_scoreboard": ("waiting on global or local memory (an L1TEX load's result)",
                        ("hide the latency: more warps or more independent loads in flight per thread (unroll, cp.async/TMA prefetch), "
                        "keep reused data in shared memory or registers")),
    "short_scoreboard": ("waiting on shared memory or special-function (MUFU) results",
                         "fewer shared-memory round trips (register tiling), avoid bank conflicts, fewer transcendental calls"),
    "mio_throttle": ("the memory-input/output queue is full (shared memory, special math, dynamic branches)",
                     "fewer but wider shared-memory accesses (128-bit), fewer special-math instructions"),
    "lg_throttle": ("the local/global memory queue is full (many small loads or stores, or register spills)",
                    "vectorize global accesses (float4/int4), remove local-memory spills"),
    "tex_throttle": ("the texture/L1TEX queue is full", "fewer texture or L1TEX requests per thread; wider accesses"),
    "math_pipe_throttle": ("a math pipe is saturated", "move work to another pipe (tensor cores, FP16x2) or do less arithmetic"),
    "wait": ("fixed-latency dependencies between consecutive instructions",
             "more independent instructions per thread (ILP: unroll, interleave independent accumulators)"),
    "barrier": ("waiting at a block barrier (__syncthreads) for the block's other warps",
                "balance work across warps; fewer barriers, or warp-level primitives instead"),
    "membar": ("waiting on a memory fence", "fewer or narrower fences (__threadfence_block instead of __threadfence)"),
    "branch_resolving": ("waiting for branch targets to resolve", "fewer divergent branches; predication or warp-uniform control flow"),
    "no_instruction": ("no instruction fetched (instruction-cache misses)", "smaller hot loops: less unrolling or inlining"),
    "imc_miss": ("an immediate-constant-cache miss", "fewer distinct constant-memory addresses per warp"),
    "dispatch_stall": ("the dispatcher stalled (pipeline conflicts)", None),
    "drain": ("stores draining at warp exit", None),
    "sleeping": ("warps sleeping (nanosleep, yield)", None),
    "not_selected": ("eligible but another warp was picked: enough parallelism, not a problem", None),
    "misc": ("other reasons", None),
    "selected": ("issuing an instruction (not a stall)", None),
    # nvprof's stall reasons (Kepler to Volta; `stall_memory_dependency` is its `Data Request`), as its metric reference
    # words them; each is a share of the stalls rather than of all warp cycles.
    "memory_dependency": ("a load or store could not be made: memory resources busy or too many requests outstanding",
                          "fewer, wider and coalesced accesses (float4, contiguous per warp); keep reused data in shared memory"),
    "exec_dependency": ("an input of the instruction is not ready yet (a dependency on an earlier result)",
                        "more independent instructions per thread (ILP: unroll, independent accumulators) or more warps"),
    "inst_fetch": ("the next instruction was not fetched yet", "smaller hot loops: less unrolling or inlining"),
    "texture": ("the texture unit is fully used or has too many requests outstanding", "fewer texture requests per thread"),
    "sync": ("waiting at a __syncthreads() barrier", "balance work across warps; fewer barriers, or warp-level primitives instead"),
    "constant_memory_dependency": ("an immediate-constant-cache miss", "fewer distinct constant-memory addresses per warp"),
    "pipe_busy": ("the compute pipeline the instruction needs is busy", "move work to another pipe or do less arithmetic"),
    "memory_throttle": ("memory throttle: too many memory operations pending", "fewer but wider memory instructions; remove local-memory spills"),
    "other": ("other reasons", None),
}
# ncu's CPIStall rule names its stall in words; the console and CSV details carry no per-reason metrics.
_STALL_TEXT = (
    ("long_scoreboard", r"scoreboard dependency on a L1TEX"),
    ("short_scoreboard", r"scoreboard dependency on a MIO"),
    ("mio_throttle", r"MIO \(memory input/output\) instruction queue"),
    ("lg_throttle", r"L1 instruction queue for local and global"),
    ("tex_throttle", r"TEX|texture"),
    ("math_pipe_throttle", r"execution pipe to be available"),
    ("wait", r"fixed latency execution dependency"),
    ("barrier", r"sibling warps at a CTA barrier"),
    ("membar", r"memory barrier"),
    ("branch_resolving", r"branch target"),
    ("no_instruction", r"next instruction|instruction fetch"),
)
_RULE_ORDER = {"ERR": 0, "OPT": 1, "WRN": 2, "INF": 3}
# Rules whose finding the advice states itself, from the evidence, so they are not repeated as separate lines.
_COVERED_RULES = {"SOLBottleneck", "TheoreticalOccupancy", "AchievedOccupancy", "CPIStall", "IssueSlotUtilization", "LaunchConfiguration",
                  "SOLFPRoofline", "WarpStallSampling"}


TENSOR_PIPE_USED_PCT = 0.5  # tensor-pipe utilisation (% of peak) from which a launch counts as using tensor cores


def tensor_core_columns(launches: pl.DataFrame) -> list[pl.Expr]:
    """Per launch: whether it uses tensor cores (`tensor_core`) and how we know (`tensor_core_source`): its tensor
    metrics (tensor_flop, tensor_inst, tensor_pipe_pct) where any is measured, else its name; null where neither says."""
    columns = [c for c in ("tensor_flop", "tensor_inst", "tensor_pipe_pct") if c in launches.columns]
    measured = [pl.when(~pl.col(c).cast(pl.Float64).is_nan()).then(pl.col(c).cast(pl.Float64)) for c in columns]
    # Any tensor instruction counts; a pipe busy a few hundredths of a percent does not (a real OpenACC matmul on an
    # H100 shows 0.013%: a handful of instructions, not tensor-core math).
    used = [(value >= TENSOR_PIPE_USED_PCT if c == "tensor_pipe_pct" else value > 0).fill_null(False) for c, value in zip(columns, measured, strict=True)]
    by_metrics = pl.any_horizontal([value.is_not_null() for value in measured]) if measured else pl.lit(False)
    names = launches["kernel_name"].unique().drop_nulls().to_list() if "kernel_name" in launches.columns else []
    # True, False (FP32 FMA by name), or null where the name says neither.
    by_name = (pl.col("kernel_name").replace_strict({n: tensor_cores_by_name(n) for n in names}, default=None, return_dtype=pl.Boolean)
               if names else pl.lit(None, dtype=pl.Boolean))
    return [
        pl.when(by_metrics).then(pl.any_horizontal(used) if used else pl.lit(None))
        .otherwise(by_name).alias("tensor_core"),
        pl.when(by_metrics).then(pl.lit("tensor-pipe metrics")).when(by_name.is_not_null()).then(pl.lit("kernel name")).alias("tensor_core_source"),
    ]


def tensor_core_evidence(row: dict[str, Any]) -> tuple[bool | None, str | None]:
    """Return (uses tensor cores, how we know) for one launch, as tensor_core_columns says it for a frame of them."""
    columns = ("kernel_name", "tensor_flop", "tensor_inst", "tensor_pipe_pct")
    frame = pl.DataFrame({c: [row.get(c)] for c in columns if c in row},
                         schema={c: (pl.String if c == "kernel_name" else pl.Float64) for c in columns if c in row}, strict=False)
    return frame.select(tensor_core_columns(frame)).row(0)


MATRIX_KINDS = ("gemm", "convolution")  # the kinds whose math tensor cores do
_FP32_MATMUL = "PyTorch: torch.set_float32_matmul_precision('high')"
_FP32_CONV = "PyTorch: torch.backends.cudnn.allow_tf32 = True"


def fp32_fma_advice(kind: str, spec: GpuSpec | None) -> str:
    """Return what to do about GEMMs or convolutions in FP32 FMA on the CUDA cores: the tensor-core precisions this
    GPU (if known) runs faster, and by how much (datasheet ratios)."""
    flag = _FP32_MATMUL if kind == "gemm" else _FP32_CONV
    if spec is None:
        return (f"run the matrix math on tensor cores: TF32 on Ampere and later ({flag}) or BF16/FP16 (torch.autocast); "
                "pass --gpu for this GPU's rates")
    speedups = tensor_speedups(spec)
    if not speedups:
        return f"{spec.name} has no tensor-core precision faster than FP32 FMA: fewer, larger matrix operations (batching) or less work"
    options = ", ".join(f"{label} at {ratio:.1f}× the FP32 rate" + (f" ({flag})" if label == "TF32" else " (torch.autocast)")
                        for label, ratio in speedups)
    return f"run the matrix math on tensor cores: on {spec.name} they do {options}"


_LOW_PRECISION_NAME = re.compile(r"e4m3|e5m2|fp8|f8f8|imma|i8816|i16832|int8|s8s8|fp4|nvfp4|mxfp", re.IGNORECASE)


def tensor_math_advice(name: str, spec: GpuSpec | None) -> str:
    """Return what is left for a compute-bound kernel already on tensor cores: a lower precision, with this GPU's
    datasheet ratio to its BF16/FP16 tensor rate where the table has both, or less work."""
    work = "less work: shapes in multiples of 16 (no padded tiles), fewer and larger (batched) matrix operations"
    if _LOW_PRECISION_NAME.search(name[:KIND_CHARS]):
        return f"already on tensor cores at 8 bits or fewer (its name says so): what is left is {work}"
    half = spec.tensor_fp16_flop_per_s if spec else None
    if spec and half and spec.tensor_fp8_flop_per_s:
        lower = f"FP8 at {spec.tensor_fp8_flop_per_s / half:.1f}× the BF16/FP16 rate on {spec.name} (Transformer Engine, TensorRT, torchao)"
    elif spec and half and spec.tensor_int8_op_per_s:
        lower = f"INT8 at {spec.tensor_int8_op_per_s / half:.1f}× the FP16 rate on {spec.name}, which has no FP8"
    else:
        lower = "FP8 on Ada, Hopper and later, INT8 before them"
    return f"already on tensor cores: what is left is a lower precision — {lower} — or {work}"


def block_threads(block_size: str | None) -> int | None:
    """Return the threads per block of an ncu block size: `(32, 4, 1)` → 128, `256` → 256; None when unreadable."""
    if not block_size:
        return None
    digits = re.findall(r"\d+", block_size)
    if not digits or any(len(n) > 9 for n in digits):  # no block has a billion threads; int() refuses 4,300 digits
        return None
    numbers = [int(n) for n in digits]
    return math.prod(numbers) if all(numbers) else None


def _weighted(values: list[tuple[float | None, float]]) -> float | None:
    """Duration-weighted mean of the values that are present; None when none is."""
    pairs = [(v, w) for v, w in values if v is not None and math.isfinite(v)]
    total = sum(w for _, w in pairs)
    mean = sum(v * w for v, w in pairs) / total if total > 0 else None
    return mean if mean is not None and math.isfinite(mean) else None  # a damaged export's 1e308s overflow


def _longest(launches: list[dict[str, Any]]) -> dict[str, Any]:
    return max(launches, key=lambda r: r.get("duration_ns") or 0.0)


def merge_rules(launches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the kernel's ncu rule results: one per (section, rule, type), the largest speedup and its text, the number
    of launches where it fired; most promising first (speedup, then ERR/OPT/WRN/INF)."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for launch in launches:
        for rule in launch.get("ncu_rules") or []:
            name = rule.get("name")
            key = (rule.get("section"), name or (rule.get("message") or "")[:60], rule.get("type"))
            speedup = rule.get("speedup_pct")
            entry = merged.get(key)
            if entry is None:
                merged[key] = {"section": rule.get("section"), "name": name, "type": rule.get("type"), "message": rule.get("message"),
                               "speedup_pct": speedup, "speedup_type": rule.get("speedup_type") or None, "launches": 1}
                continue
            entry["launches"] += 1
            if speedup is not None and (entry["speedup_pct"] is None or speedup > entry["speedup_pct"]):
                entry.update(speedup_pct=speedup, message=rule.get("message"), speedup_type=rule.get("speedup_type") or None)
    return sorted(merged.values(), key=lambda r: (-(r["speedup_pct"] or -1.0), _RULE_ORDER.get(r["type"] or "", 4), r["section"] or ""))


def _dominant_block_size(launches: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Return the launches of the block size with the most time (the most launches where times are unknown) and every
    block size the kernel ran with, that one first: occupancy belongs to one launch shape, and blending a 1-thread and
    a 256-thread configuration describes neither."""
    totals: dict[str, list[float]] = {}
    for launch in launches:
        size = launch.get("block_size")
        if size is not None:
            entry = totals.setdefault(str(size), [0.0, 0.0])
            entry[0] += launch.get("duration_ns") or 0.0
            entry[1] += 1
    if len(totals) < 2:
        return launches, [_shape_text(size) for size in totals]
    order = sorted(totals, key=lambda size: (-totals[size][0], -totals[size][1]))
    return [launch for launch in launches if str(launch.get("block_size")) == order[0]], [_shape_text(size) for size in order]


def _shape_text(size: str) -> str:
    """`(256, 1, 1)` → `256`, `(16, 16, 1)` → `16×16`: a block shape without its trailing ones."""
    numbers = re.findall(r"\d+", size)
    while len(numbers) > 1 and numbers[-1] == "1":
        numbers.pop()
    return "×".join(numbers) or size


def occupancy(launches: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Return the kernel's occupancy: theoretical/achieved % and warps (duration-weighted), the limiting resource and
    the block limits (of the longest launch), waves per SM and the tail of a partial last wave; None without data.
    A kernel launched with several block sizes is described by the one with the most time, and says so."""
    launches, block_sizes = _dominant_block_size(launches)
    weight = [(r, r.get("duration_ns") or 1.0) for r in launches]
    theoretical = _weighted([(r.get("theoretical_occupancy_pct"), w) for r, w in weight])
    achieved = _weighted([(r.get("achieved_occupancy_pct"), w) for r, w in weight])
    waves = _weighted([(r.get("waves_per_sm"), w) for r, w in weight])
    if waves is None:
        # Exports without Launch Statistics still quote the wave count in ncu's SOLBottleneck text.
        waves = _weighted([(waves_in_rules(r.get("ncu_rules") or []), w) for r, w in weight])
    longest = _longest(launches)
    all_limits = {name: longest.get(f"block_limit_{key}") for name, key in
                  (("registers", "registers"), ("shared_memory", "shared_mem"), ("warps", "warps"), ("blocks_per_sm", "sm"), ("barriers", "barriers"))}
    limits = {name: value for name, value in all_limits.items() if value is not None}
    if theoretical is None and achieved is None and waves is None and not limits:
        return None
    threads = block_threads(longest.get("block_size"))
    warps_per_block = math.ceil(threads / 32) if threads else None
    theoretical_warps = longest.get("theoretical_warps_per_sm")
    max_warps = (theoretical_warps * 100.0 / longest["theoretical_occupancy_pct"]
                 if theoretical_warps and longest.get("theoretical_occupancy_pct") else None)
    if max_warps is not None and not 1 <= max_warps <= 1024:  # no GPU holds more than 64 warps per SM; this is damage
        max_warps = None
    limiter = _limiter(limits, longest.get("shared_bytes_per_block"))
    blocks_per_sm = min(limits.values()) if limits else None
    record: dict[str, Any] = {
        "theoretical_pct": theoretical, "achieved_pct": achieved,
        "limiter": limiter if theoretical is None or theoretical < 99.9 else None,
        "blocks_per_sm": blocks_per_sm, "block_limits": all_limits,
        "registers_per_thread": longest.get("registers_per_thread"), "shared_bytes_per_block": longest.get("shared_bytes_per_block"),
        "block_threads": threads, "warps_per_block": warps_per_block, "max_warps_per_sm": round(max_warps) if max_warps else None,
        "waves_per_sm": waves, "tail": _tail(waves),
        "weighting": ("per launch" if len(launches) == 1 else _combination(len(launches), any(r.get('duration_ns') for r in launches)))
                     + (f" with {block_sizes[0]}-thread blocks, the {'most time' if any(r.get('duration_ns') for r in launches) else 'first'} of "
                        f"the kernel's {len(block_sizes)} block sizes: {', '.join(block_sizes)}" if len(block_sizes) > 1 else ""),
        "block_sizes": block_sizes,
    }
    return record


def _limiter(limits: dict[str, float], shared_bytes: float | None) -> str | None:
    """Return the resource that caps blocks per SM. Where the SM's own block limit ties, small blocks are the cause
    (fixing registers would not lift it); shared memory a block does not use cannot be the cause."""
    if not limits:
        return None
    lowest = min(limits.values())
    binding = [name for name, value in limits.items() if value == lowest]
    if "blocks_per_sm" in binding:
        return "block size"
    if shared_bytes == 0 and "shared_memory" in binding and len(binding) > 1:
        binding.remove("shared_memory")
    for name in ("registers", "shared_memory", "warps", "barriers"):
        if name in binding:
            return name.replace("_", " ")
    return binding[0].replace("_", " ")


def _tail(waves: float | None) -> dict[str, Any] | None:
    """Return the partial last wave: how full it is (%) and the most of the runtime it can take (%, ncu's bound: one
    wave's share under uniform block durations); None without a partial wave or with more than a few waves."""
    if waves is None or waves <= 0 or not math.isfinite(waves):
        return None
    if waves < 1:
        return {"full_waves": 0, "last_wave_full_pct": 100.0 * waves, "max_runtime_share_pct": 100.0}
    full = math.floor(waves)
    fraction = waves - full
    if fraction < 0.01 or full >= 8:
        return None
    return {"full_waves": full, "last_wave_full_pct": 100.0 * fraction, "max_runtime_share_pct": 100.0 / (full + 1)}


def stall_totals(launches: pl.DataFrame) -> dict[str, tuple[dict[str, float], str | None]]:
    """Return per kernel the weighted stall totals (reason → duration-weighted cycles per issue, or summed PC samples)
    and their unit, computed in one vectorised pass (a list of structs per launch is slow to walk in Python)."""
    if "stalls" not in launches.columns or launches.height == 0:
        return {}
    measured = launches.filter(~pl.col("launch_failed").fill_null(False) & pl.col("stalls").is_not_null())
    if measured.height == 0:
        return {}
    weight = pl.when(pl.col("stall_unit") == "PC samples").then(1.0).otherwise(pl.col("duration_ns").fill_null(1.0))
    exploded = (measured.select("kernel_name", "stall_unit", weight.alias("_w"), "stalls").explode("stalls").drop_nulls("stalls").unnest("stalls")
                .filter(pl.col("value").is_not_null()))
    # Summed exactly (fsum) in Python: a parallel sum's order, and so its last digit, would differ between runs.
    totals = exploded.group_by("kernel_name", "reason").agg((pl.col("value") * pl.col("_w")).alias("parts"), pl.col("_w").alias("weights"),
                                                            pl.col("stall_unit").first())
    out: dict[str, tuple[dict[str, float], str | None]] = {}
    for name, reason, parts, weights, unit in totals.sort("kernel_name", "reason").iter_rows():
        entry = out.setdefault(name, ({}, unit))
        # Percentages are averaged (weighted by duration), counts and cycles summed.
        entry[0][reason] = math.fsum(parts) / math.fsum(weights) if unit == NVPROF_STALL_UNIT else math.fsum(parts)
    return out


def stalls(rules: list[dict[str, Any]], totals: tuple[dict[str, float], str | None] | None) -> tuple[list[dict[str, Any]], str | None]:
    """Return the stall reasons with their share of warp cycles (%), largest first (`selected` and shares under 1 %
    left out), and where they come from: the kernel's stall metrics (`totals`, from stall_totals: duration-weighted
    cycles per issued instruction, or summed PC samples), else the CPIStall text among the kernel's merged `rules`."""
    by_reason, unit = totals or ({}, None)
    # nvprof's shares are of all stalls, collected or not: one reason alone at 40% is 40%, not all of them.
    whole = max(100.0, sum(by_reason.values())) if unit == NVPROF_STALL_UNIT else sum(by_reason.values())
    if whole > 0:
        shares = [{"reason": reason, "share_pct": 100.0 * value / whole, "meaning": STALLS.get(reason, (reason.replace("_", " "), None))[0]}
                  for reason, value in by_reason.items() if reason != "selected" and value / whole >= 0.01]
        return sorted(shares, key=lambda s: -s["share_pct"]), unit
    found: dict[str, float] = {}
    for rule in rules:
        if rule["name"] != "CPIStall" and "cycles being stalled" not in (rule["message"] or ""):
            continue
        share = re.search(r"represents about ([0-9.]+)% of the total", rule["message"] or "")
        reason = next((name for name, pattern in _STALL_TEXT if re.search(pattern, rule["message"] or "")), None)
        value = float_or_none(share.group(1)) if share else None
        if value is not None and reason:
            found[reason] = max(found.get(reason, 0.0), value)
    entries = [{"reason": reason, "share_pct": share, "meaning": STALLS[reason][0]} for reason, share in found.items()]
    return sorted(entries, key=lambda s: -s["share_pct"]), ("ncu CPIStall rule" if entries else None)


def duration_text(ns: float | None) -> str:
    """Return a duration given in ns as text with three significant digits: `115 s`, `3.2 ms`, `1.29 us`."""
    if ns is None:
        return "n/a"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def _rule_speedup(rules: list[dict[str, Any]], *names: str) -> tuple[float, str] | None:
    """Return the largest speedup estimate (%) of the named rules and its wording ("speedup", or "local speedup":
    of the rule's own unit, not of the kernel's duration), or None."""
    values = [(r["speedup_pct"], _speedup_words(r)) for r in rules if r["name"] in names and r["speedup_pct"] is not None]
    return max(values) if values else None


def _speedup_words(rule: dict[str, Any]) -> str:
    return "local speedup" if "local" in (rule.get("speedup_type") or "") else "speedup"


def _first_sentence(text: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    return sentence if len(sentence) <= 240 else sentence[:237] + "…"


# Under this, with no theoretical figure to compare with, achieved occupancy is itself the finding.
LOW_ACHIEVED_OCCUPANCY_PCT = 40.0


def _occupancy_advice(occ: dict[str, Any], rules: list[dict[str, Any]]) -> list[str]:
    advice = []
    limiter, theoretical = occ.get("limiter"), occ.get("theoretical_pct")
    blocks, threads, warps_per_block, max_warps = occ.get("blocks_per_sm"), occ.get("block_threads"), occ.get("warps_per_block"), occ.get("max_warps_per_sm")
    estimated = _rule_speedup(rules, "TheoreticalOccupancy", "AchievedOccupancy")
    speedup = estimated[0] if estimated else None
    estimate = f"; ncu estimates {speedup:.0f}% {estimated[1]}" if estimated and speedup else ""
    # Occupancy above 75 % rarely limits; below it, or where ncu's own occupancy rule estimates a gain, it is a cause.
    limiting = theoretical is not None and (theoretical < 75.0 or (speedup or 0.0) >= 5.0)
    if limiter and limiting and blocks is not None and blocks >= 1:
        blocks = int(blocks)
        others = [v for k, v in occ["block_limits"].items() if k != "registers" and v]
        if limiter == "registers" and threads and warps_per_block:
            registers = occ.get("registers_per_thread")
            target = math.floor(REGISTERS_PER_SM / ((blocks + 1) * warps_per_block * 32) / REGISTER_GRANULE) * REGISTER_GRANULE
            next_blocks = min([blocks + 1, *[int(v) for v in others]])
            after = f" ({100.0 * next_blocks * warps_per_block / max_warps:.0f}% occupancy)" if max_warps else ""
            per_sm = f"{counted(blocks, 'block')} of {threads} threads per SM"
            if registers and 16 <= target < registers and next_blocks > blocks:
                advice.append(f"registers cap occupancy at {theoretical:.0f}% ({registers:.0f}/thread allow {per_sm}): "
                              f"`__launch_bounds__({threads}, {blocks + 1})` or `-maxrregcount={target}` would allow {blocks + 1} blocks/SM{after} — "
                              f"check that it does not spill{estimate}")
            else:
                used = f"{registers:.0f}/thread, " if registers else ""
                advice.append(f"registers cap occupancy at {theoretical:.0f}% ({used}{per_sm}): fewer live values per thread "
                              f"(smaller tiles, fewer accumulators) would allow more warps{estimate}")
        elif limiter == "registers":
            advice.append(f"registers cap occupancy at {theoretical:.0f}% ({blocks} block(s) per SM): fewer registers per thread "
                          f"(`__launch_bounds__`, `-maxrregcount`) would allow more warps{estimate}")
        elif limiter == "shared memory":
            size = occ.get("shared_bytes_per_block")
            per_block = f" ({size / 1024:.1f} KB/block)" if size else ""
            advice.append(f"shared memory caps occupancy at {theoretical:.0f}%{per_block}, {blocks} block(s) per SM: smaller tiles or fewer "
                          f"pipeline stages, or a larger carveout (cudaFuncAttributePreferredSharedMemoryCarveout){estimate}")
        elif limiter == "block size" and threads:
            need = math.ceil(max_warps / blocks) * 32 if max_warps else None
            target = f": use at least {need} threads per block" if need and need > threads else ": use larger blocks (128-256 threads)"
            advice.append(f"blocks of {threads} threads: an SM holds at most {blocks} blocks, so occupancy caps at {theoretical:.0f}%{target}{estimate}")
        elif limiter == "warps" and threads:
            advice.append(f"blocks of {threads} threads ({warps_per_block} warps) fit {blocks} per SM, occupancy {theoretical:.0f}%: "
                          f"a block size that divides the SM's {max_warps or 'maximum'} warps evenly would waste fewer{estimate}")
    achieved = occ.get("achieved_pct")
    small_grid = (occ.get("waves_per_sm") or 1.0) < 1.0  # a grid under one wave explains low achieved occupancy by itself
    if achieved is not None and theoretical and achieved < 0.8 * theoretical and theoretical - achieved >= 10 and not small_grid:
        advice.append(f"achieved occupancy {achieved:.0f}% is well under the theoretical {theoretical:.0f}%: warps or blocks finish unevenly "
                      f"(load imbalance) or the last wave is partial")
    elif achieved is not None and theoretical is None and achieved < LOW_ACHIEVED_OCCUPANCY_PCT and not small_grid:
        # nvprof measures achieved occupancy alone: low, it is still a cause, though what caps it is not in the input.
        advice.append(f"achieved occupancy is {achieved:.0f}%: few resident warps to hide latency — see what caps it (registers per "
                      "thread, shared memory per block, block size; the CUDA Occupancy Calculator tells from those) or whether blocks "
                      "finish unevenly")
    return advice


def _grid_advice(occ: dict[str, Any], launches: list[dict[str, Any]], kind: str) -> list[str]:
    tail, waves = occ.get("tail"), occ.get("waves_per_sm")
    if not tail or waves is None:
        return []
    longest = _longest(launches)
    grid = block_threads(longest.get("grid_size"))
    sms, blocks = longest.get("sm_count"), occ.get("blocks_per_sm")
    if sms and blocks and blocks >= 1:
        wave_text = f" ({sms * int(blocks)} blocks: {int(blocks)} per SM on {sms} SMs)"
    elif grid and waves:
        wave_text = f" (about {grid / waves:.0f} blocks)"  # ncu prints waves to 2 decimals: the quotient is approximate
    else:
        wave_text = ""
    if tail["full_waves"] == 0:
        how = " (split-K, smaller tiles)" if kind in ("gemm", "attention", "convolution") else ""
        return [(f"the grid{f' of {grid} blocks' if grid else ''} fills {tail['last_wave_full_pct']:.0f}% of one wave{wave_text}: more, smaller "
                f"blocks{how} or other work on concurrent streams would use the idle SMs")]
    if tail["last_wave_full_pct"] <= 50 and tail["full_waves"] <= 3:
        return [(f"{waves:.2f} waves per SM: the last wave is {tail['last_wave_full_pct']:.0f}% full and can take up to "
                f"{tail['max_runtime_share_pct']:.0f}% of the runtime at low occupancy; a grid of whole waves{wave_text} or a persistent-block loop avoids it")]
    return []


def diagnose(launches: list[dict[str, Any]], kernel: dict[str, Any], stall_sums: tuple[dict[str, float], str | None] | None = None,
             spec: GpuSpec | None = None, collection: Collection = NCU_COLLECTION) -> dict[str, Any]:
    """Return the diagnosis of one kernel: rules, occupancy, stalls, tensor_core, advice (most valuable first) and a
    reason that quotes the kernel-level numbers. `kernel` is its ranked row (bound, label, duration-weighted SOL %);
    `stall_sums` its entry of stall_totals (None: no stall metrics); `spec` the GPU, for what tensor cores would give;
    `collection` what collects the evidence it lacks, in the input profiler's words."""
    measured = [r for r in launches if not r.get("launch_failed")]
    rules = merge_rules(launches)
    occ = occupancy(measured) if measured else None
    stall_list, stall_source = stalls(rules, stall_sums)
    # with_verdicts has judged each launch already; launches built elsewhere (tests) are judged here.
    tensor_votes = [(r["tensor_core"], r["tensor_core_source"]) if "tensor_core_source" in r else tensor_core_evidence(r) for r in measured]
    tensor = next((t for t in tensor_votes if t[1] == "tensor-pipe metrics"), None) or next((t for t in tensor_votes if t[0] is not None), (None, None))
    name = kernel.get("kernel_name") or ""
    kind = kernel_kind(name)
    bound = kernel.get("bound")
    warnings: list[str] = []
    if not measured:
        warnings.append("every launch failed under profiling: nothing was measured; if the kernel fails, fix that (run without ncu, "
                        "compute-sanitizer); if the profiling was cut short (a job's time limit during ncu's replay of a long "
                        "kernel), profile fewer passes (--section SpeedOfLight) or a smaller input, and profile again")
    if kernel.get("tensor_warning"):
        warnings.append(kernel["tensor_warning"])
    specific: list[str] = []
    if occ:
        specific += _occupancy_advice(occ, rules)
        specific += _grid_advice(occ, measured, kind)
    if stall_list and stall_list[0]["share_pct"] >= 25:
        top = stall_list[0]
        fix = STALLS.get(top["reason"], (None, None))[1]
        if fix:
            share_of = "stalls" if stall_source == NVPROF_STALL_UNIT else "warp cycles"
            specific.append(f"warps stall most on {top['reason']} ({top['share_pct']:.0f}% of {share_of}): {top['meaning']} — {fix}")
    for rule in rules:
        if rule["type"] in ("OPT", "WRN", "ERR") and rule["name"] not in _COVERED_RULES and (rule["speedup_pct"] or 0) >= 5:
            specific.append(f"ncu {rule['name'] or rule['section']}: est. {rule['speedup_pct']:.0f}% {_speedup_words(rule)} — "
                            f"{_first_sentence(rule['message'] or '')}")
    # The sections that would say why a latency-bound kernel waits: what the export holds of them, and which it lacks.
    held, missing = [], []
    if occ is not None and occ["achieved_pct"] is not None:
        held.append(f"occupancy ({pct_text(occ['achieved_pct'])} achieved)")
    if occ is None or (occ["achieved_pct"] is None and occ["theoretical_pct"] is None):
        missing.append("Occupancy")
    if occ is not None and occ["waves_per_sm"] is not None:
        held.append(f"{occ['waves_per_sm']:.2f} waves per SM")
    else:
        missing.append("LaunchStats")
    if not stall_list:
        missing.append("WarpStateStats")
    general = _bound_advice(kernel, kind, tensor[0], bool(specific), held, missing, spec, collection)
    # A unit at 80 %+ of its peak is the wall: doing less of that work comes first. Otherwise the kernel waits, and
    # the evidence of why (occupancy, grid, stalls, ncu's rules) comes first.
    saturated = bound in ("compute", "memory") and (kernel.get("roof_pct") or 0.0) >= 80.0
    advice = warnings + (general + specific if saturated else specific + general)
    return {
        "kind": kind,
        "rules": rules,
        "occupancy": occ,
        "stalls": stall_list,
        "stall_source": stall_source,
        "tensor_core": tensor[0],
        "tensor_core_source": tensor[1],
        "advice": advice,
    }


def slow_fp64_ratio(spec: GpuSpec | None) -> float | None:
    """Return how many times slower FP64 is than FP32 on a GPU built for FP32 (GeForce, most workstation parts: 1/32
    or 1/64), or None where FP64 is at least 1/4 of FP32 (data-center parts) or the table lacks either rate."""
    if spec is None or not spec.fp64_flop_per_s or not spec.fp32_flop_per_s:
        return None
    ratio = spec.fp32_flop_per_s / spec.fp64_flop_per_s
    return round(ratio) if ratio >= 8 else None


def _bound_advice(kernel: dict[str, Any], kind: str, tensor: bool | None, have_specific: bool, held: list[str],
                  missing_sections: list[str], spec: GpuSpec | None = None, collection: Collection = NCU_COLLECTION) -> list[str]:
    """Return the advice that follows from the verdict alone, fitted to the kernel's kind and duration; a latency-bound
    kernel with nothing more specific is told what of the evidence its export `held` and to collect only the sections
    (`missing_sections`) it lacks."""
    bound, label, median = kernel.get("bound"), kernel.get("label") or "", kernel.get("median_duration_ns")
    name = kernel.get("kernel_name") or ""
    lines = []
    if label == BALANCED_LABEL:
        lines.append(f"compute ({pct_text(kernel.get('compute_pct'))}) and memory ({pct_text(kernel.get('memory_pct'))}) are within "
                     f"{BALANCED_GAP_PCT:.0f} points of each other (ncu: Balanced Throughput): cutting only one moves the wall to the other "
                     "— reduce both the work and the traffic")
    if bound == "memory":
        level = "L1/TEX" if "L1" in label else ("L2" if "L2" in label else None)
        if level:
            lines.append(f"{level}-bound: the traffic is between the SMs and {level}, not DRAM — uncoalesced or strided accesses and "
                         f"shared-memory bank conflicts; see the Memory Workload Analysis tables")
        text = "move fewer bytes: fuse with the kernels before and after it, keep reused data in shared memory or L2, coalesce accesses"
        if _LLM_NAME.search(name[:KIND_CHARS]) and kind in ("gemm", "attention", "other", "normalization", "elementwise"):
            text += "; for weights or KV cache, fewer bytes per value (INT8/FP8/4-bit quantization)"
        lines.append(text)
    elif bound == "compute":
        slow_fp64 = slow_fp64_ratio(spec)
        if kernel.get("precision") == "fp64" and slow_fp64:
            lines.append(f"the FP64 pipes are the wall, and on the {spec.name} FP64 runs at 1/{slow_fp64:.0f} of the FP32 rate: "  # type: ignore[union-attr]
                         "do the bulk in FP32 where accuracy allows (FP64 only for accumulations or a final refinement step), or "
                         "run it on a GPU with full-rate FP64 (Tesla P100, V100, A100, H100)")
        elif tensor:
            lines.append(tensor_math_advice(name, spec))
        elif kind in MATRIX_KINDS and (kernel.get("precision") == "fp32" or (tensor is False and kernel.get("precision") in (None, "unknown"))):
            lines.append(fp32_fma_advice(kind, spec))
        elif kind in ("gemm", "convolution", "attention"):
            lines.append("do the matrix math on tensor cores (TF32/BF16/FP16 through cuBLAS, cuDNN or CUTLASS) instead of FFMA")
        else:
            lines.append("do less or cheaper math: remove redundant work, fast intrinsics or lower precision where accuracy allows")
    elif bound == "latency":
        if median is not None and median < LAUNCH_BOUND_MAX_NS:
            lines.append(f"at {duration_text(median)} per launch, launch overhead (2-5 us) is a large share: fuse it with its neighbours or "
                         f"capture the sequence in a CUDA graph")
        to_collect = collection.collect_missing(missing_sections)
        if not have_specific and to_collect:
            lines.append("under 60% of both compute and memory throughput: the SMs wait — "
                         + (f"the export has {' and '.join(held)}; " if held else "") + f"{to_collect} to see why")
        elif not have_specific:
            lines.append("under 60% of both compute and memory throughput: the SMs wait, and neither occupancy nor the warp stalls name "
                         f"one cause: look at the stalls per instruction in {collection.per_instruction}")
    elif bound == "unknown" and not kernel.get("tensor_warning") and kernel.get("failed_launches", 0) < kernel.get("launches", 1):
        lines.append(collection.no_verdict)
    return lines


def _combination(launches: int, have_durations: bool) -> str:
    """How the per-launch figures of several launches were combined: weighted by duration, or, with no durations in
    the export, alike."""
    return f"duration-weighted over {counted(launches, 'launch', 'launches')}" if have_durations else f"averaged over {counted(launches, 'launch', 'launches')} (no durations)"


def kernel_reason(kernel: dict[str, Any], occ: dict[str, Any] | None, stall_list: list[dict[str, Any]]) -> str | None:
    """Return the kernel-level reason: the same duration-weighted numbers as the kernel's JSON fields, named as such."""
    launches, failed = kernel.get("launches") or 0, kernel.get("failed_launches") or 0
    if launches and failed == launches:
        return "every launch failed under profiling: nothing was measured"
    weighting = "per launch" if launches - failed == 1 else _combination(launches - failed, bool(kernel.get('duration_ns')))
    label, base = kernel.get("label"), kernel.get("reason")
    if (base or "").startswith("ncu SOL"):
        text = f"ncu SOL ({weighting}): Compute (SM) {pct_text(kernel.get('compute_pct'))}, Memory {pct_text(kernel.get('memory_pct'))} → {label}"
    elif kernel.get("compute_pct") is not None or kernel.get("memory_pct") is not None:
        text = (f"roofline ({weighting}): {pct_text(kernel.get('compute_pct'))} of peak compute, {pct_text(kernel.get('memory_pct'))} of peak "
                f"bandwidth → {label}")
    else:
        return base
    if kernel.get("roof_pct") is not None and kernel.get("binding_roof"):
        intensity = kernel.get("arithmetic_intensity")
        text += f"; {pct_text(kernel['roof_pct'])} of the {kernel['binding_roof']} roof" + (f" at {intensity:.3g} FLOP/DRAM byte" if intensity else "")
    if occ and occ.get("theoretical_pct") is not None:
        text += f"; occupancy {pct_text(occ.get('achieved_pct'))} achieved of {pct_text(occ['theoretical_pct'])} theoretical"
        if occ.get("limiter"):
            text += f" (limited by {occ['limiter']})"
    if occ and occ.get("waves_per_sm") is not None:
        text += f", {occ['waves_per_sm']:.2f} waves per SM"
    if stall_list:
        text += f"; top stall {stall_list[0]['reason']} {stall_list[0]['share_pct']:.0f}%"
    if kernel.get("tensor_warning"):
        text += "; " + kernel["tensor_warning"]
    return text


_LAUNCH_COLUMNS = (
    "kernel_name", "duration_ns", "launch_failed", "ncu_rules", "block_size", "grid_size", "sm_count", "waves_per_sm",
    "registers_per_thread", "shared_bytes_per_block", "block_limit_sm", "block_limit_registers", "block_limit_shared_mem",
    "block_limit_warps", "block_limit_barriers", "theoretical_occupancy_pct", "achieved_occupancy_pct", "theoretical_warps_per_sm",
    "stalls", "stall_unit", "tensor_core", "tensor_core_source", "tensor_flop", "tensor_inst", "tensor_pipe_pct",
)

DIAGNOSIS_SCHEMA: dict[str, Any] = {
    "kernel_name": pl.String,
    "kind": pl.String,
    "rules": pl.List(pl.Struct({"section": pl.String, "name": pl.String, "type": pl.String, "message": pl.String, "speedup_pct": pl.Float64,
                                "speedup_type": pl.String, "launches": pl.Int64})),
    "stalls": pl.List(pl.Struct({"reason": pl.String, "share_pct": pl.Float64, "meaning": pl.String})),
    "stall_source": pl.String,
    "tensor_core": pl.Boolean,
    "tensor_core_source": pl.String,
    "advice": pl.List(pl.String),
    "occupancy": pl.Struct({
        "theoretical_pct": pl.Float64, "achieved_pct": pl.Float64, "limiter": pl.String, "blocks_per_sm": pl.Float64,
        "block_limits": pl.Struct({name: pl.Float64 for name in ("registers", "shared_memory", "warps", "blocks_per_sm", "barriers")}),
        "registers_per_thread": pl.Float64, "shared_bytes_per_block": pl.Float64, "block_threads": pl.Int64, "warps_per_block": pl.Int64,
        "max_warps_per_sm": pl.Int64, "waves_per_sm": pl.Float64,
        "tail": pl.Struct({"full_waves": pl.Int64, "last_wave_full_pct": pl.Float64, "max_runtime_share_pct": pl.Float64}),
        "weighting": pl.String,
        "block_sizes": pl.List(pl.String),
    }),
    "reason": pl.String,
    "recommendation": pl.String,
}


def diagnose_kernels(launches: pl.DataFrame, kernels: pl.DataFrame, spec: GpuSpec | None = None,
                     collection: Collection = NCU_COLLECTION) -> pl.DataFrame:
    """Return the ranked kernels with their diagnosis: rules, occupancy, stalls, tensor_core, advice, and
    reason/recommendation rebuilt from the kernel-level evidence; advice on tensor cores is for `spec`, the GPU, and
    on what to collect in `collection`'s words."""
    if kernels.height == 0:
        return kernels.with_columns(*[pl.lit(None, dtype=dtype).alias(name) for name, dtype in DIAGNOSIS_SCHEMA.items() if name not in kernels.columns])
    by_name: dict[str, list[dict[str, Any]]] = {}
    # Only the columns the diagnosis reads: a launch row has a hundred, and exports have tens of thousands of launches.
    used = [c for c in _LAUNCH_COLUMNS if c in launches.columns and c not in ("stalls", "stall_unit")]
    sums = stall_totals(launches)
    for row in launches.select(used).to_dicts():  # in bulk: a third cheaper than row by row
        by_name.setdefault(row["kernel_name"], []).append(row)
    rows = []
    for kernel in kernels.iter_rows(named=True):
        found = diagnose(by_name.get(kernel["kernel_name"], []), kernel, sums.get(kernel["kernel_name"], ({}, None)), spec, collection)
        reason = kernel_reason(kernel, found["occupancy"], found["stalls"])
        rows.append({**{k: v for k, v in found.items()}, "kernel_name": kernel["kernel_name"], "reason": reason,
                     "recommendation": found["advice"][0] if found["advice"] else kernel.get("recommendation")})
    frame = pl.DataFrame(rows, schema=DIAGNOSIS_SCHEMA)
    return kernels.drop([c for c in ("reason", "recommendation", "kind") if c in kernels.columns]).join(frame, on="kernel_name", how="left", maintain_order="left")
