"""Roofline classification of kernel launches: pure functions, no I/O.

Conventions (stated because the field has two):
- Speed-of-light verdicts follow Nsight Compute's SOLBottleneck rule: either throughput ≥ 80 % → "High
  Throughput"; both < 60 % → "Latency Issue" ("Small Grid" when waves per SM < 1); otherwise a gap ≥ 10 points
  names the higher unit, else "Balanced Throughput". So our label agrees with what ncu shows.
- Without SOL percentages the roofline decides: compute- or memory-bound by the side of the ridge point
  (AI ≥ peak FLOP/s ÷ peak bytes/s), NERSC's hierarchical convention, with the same latency rule first: a kernel
  under 60 % of both compute and memory throughput is latency-bound whatever its arithmetic intensity.
- FLOPs follow ncu's counting (FP16 counts packed half2 ops twice; see parsers.ncu_csv). Traffic per level
  follows ncu's hierarchical charts (L2 = lts2xbar bytes, L1 = LSU writeback bytes), not NERSC's t_bytes.
- Arithmetic intensity is reported against DRAM bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from traceview.parsers.schema import MEMORY_LEVELS, PRECISIONS

LATENCY_THRESHOLD_PCT = 60.0  # ncu: latency_bound_threshold
HIGH_THRESHOLD_PCT = 80.0  # ncu: no_bound_threshold
BALANCED_GAP_PCT = 10.0  # ncu: balanced_threshold
WAVES_THRESHOLD = 1.0  # ncu: waves_threshold


class Bound(str, Enum):
    COMPUTE = "compute"
    MEMORY = "memory"
    LATENCY = "latency"
    UNKNOWN = "unknown"


SHORT_RECOMMENDATIONS = {
    Bound.MEMORY: "fewer bytes",
    Bound.COMPUTE: "cheaper math",
    Bound.LATENCY: "more parallelism",
    Bound.UNKNOWN: "profile with ncu",
}

RECOMMENDATIONS = {
    Bound.MEMORY: "move fewer bytes: fuse with neighbouring kernels, quantize weights/KV cache, improve layout and coalescing, keep reused data in L2/shared memory",
    Bound.COMPUTE: "do less or cheaper math: use tensor cores, lower precision (BF16/FP8/INT8), remove redundant work",
    Bound.LATENCY: "expose more parallelism: larger or more blocks, higher occupancy, fewer dependent stalls; batch small launches (CUDA graphs) to cut launch overhead",
    Bound.UNKNOWN: "collect throughput metrics: re-profile with `ncu --section SpeedOfLight` (or --set full)",
}

LEVEL_NAMES = {"dram": "DRAM", "l2": "L2", "l1": "L1/TEX"}


@dataclass(frozen=True)
class Verdict:
    """The classification of one launch; percentages are 0-100, intensity in FLOP per DRAM byte."""

    bound: Bound
    label: str
    reason: str
    binding_roof: str | None
    roof_pct: float | None
    arithmetic_intensity: float | None
    achieved_flop_per_s: float | None
    precision: str | None
    compute_pct: float | None
    memory_pct: float | None
    recoverable_fraction: float | None
    recoverable_source: str | None


def sol_bottleneck(sm_pct: float, memory_pct: float, waves_per_sm: float | None) -> tuple[Bound, str]:
    """Return (bound, ncu label) from SOL compute and memory throughput %, as ncu's SOLBottleneck rule does."""
    higher = Bound.COMPUTE if sm_pct >= memory_pct else Bound.MEMORY
    if sm_pct >= HIGH_THRESHOLD_PCT or memory_pct >= HIGH_THRESHOLD_PCT:
        return higher, "High Throughput"
    if sm_pct < LATENCY_THRESHOLD_PCT and memory_pct < LATENCY_THRESHOLD_PCT:
        if waves_per_sm is not None and waves_per_sm < WAVES_THRESHOLD:
            return Bound.LATENCY, "Small Grid"
        return Bound.LATENCY, "Latency Issue"
    if abs(sm_pct - memory_pct) >= BALANCED_GAP_PCT:
        return higher, "High Compute Throughput" if higher is Bound.COMPUTE else "High Memory Throughput"
    return higher, "Balanced Throughput"


def attainable(peak_flop_per_s: float, intensity: float, peak_bytes_per_s: float) -> float:
    """Return the roofline ceiling at this intensity: min(peak compute, intensity × peak bandwidth), FLOP/s."""
    return min(peak_flop_per_s, intensity * peak_bytes_per_s)


def ridge_point(peak_flop_per_s: float, peak_bytes_per_s: float) -> float:
    """Return the arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof."""
    return peak_flop_per_s / peak_bytes_per_s


def _value(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN → None


def pct_text(pct: float | None) -> str:
    """A percentage as the reasons quote it: one decimal, or n/a."""
    return "n/a" if pct is None else f"{pct:.1f}%"


def waves_in_rules(rules: list[Mapping[str, Any]]) -> float | None:
    """Return the wave count that ncu's SOLBottleneck text quotes ("only 0.7 full waves"), or None."""
    for rule in rules:
        match = re.search(r"only ([0-9.]+) full waves", rule.get("message") or "")
        if match:
            return float(match.group(1))
    return None


def classify_launch(row: Mapping[str, Any], peaks: Mapping[str, float | None]) -> Verdict:
    """Return the verdict for one launch (a KERNELS row); `peaks` holds peak_* values to use where the row has none."""

    def peak(name: str) -> float | None:
        own = _value(row, name)
        if own is not None and own > 0:
            return own
        fallback = peaks.get(name)
        return fallback if fallback and fallback > 0 else None

    # Compute side: the precision using the largest share of its own peak is the one that matters.
    best: tuple[float, str, float, float] | None = None
    for precision in PRECISIONS:
        rate = _value(row, f"{precision}_flop_per_s")
        top = peak(f"peak_{precision}_flop_per_s")
        if rate is None or rate <= 0 or top is None:
            continue
        share = rate / top
        if best is None or share > best[0]:
            best = (share, precision, rate, top)
    # Memory side: achieved / peak bandwidth per level present.
    levels: dict[str, tuple[float, float]] = {}
    for level in MEMORY_LEVELS:
        rate = _value(row, f"{level}_bytes_per_s")
        top = peak(f"peak_{level}_bytes_per_s")
        if rate is not None and rate > 0 and top is not None:
            levels[level] = (rate, top)

    roof_pct: float | None = None
    binding: str | None = None
    intensity: float | None = None
    ridge_side: Bound | None = None
    if best is not None and levels:
        _, precision, flops, top = best
        ceilings = {level: attainable(top, flops / rate, bw) for level, (rate, bw) in levels.items()}
        # A damaged cell (1e-320 bytes/s) can underflow a ceiling to zero: such a level has no usable roof.
        ceilings = {level: ceiling for level, ceiling in ceilings.items() if ceiling > 0 and math.isfinite(ceiling)}
        levels = {level: levels[level] for level in ceilings}
    if best is not None and levels:
        _, precision, flops, top = best
        binding = min(ceilings, key=lambda level: ceilings[level])
        roof_pct = 100.0 * flops / ceilings[binding]
        rate, bw = levels[binding]
        ridge_side = Bound.COMPUTE if flops / rate >= ridge_point(top, bw) else Bound.MEMORY
        binding = f"{precision} compute" if ridge_side is Bound.COMPUTE else LEVEL_NAMES[binding]
    elif levels:
        level = max(levels, key=lambda name: levels[name][0] / levels[name][1])
        roof_pct = 100.0 * levels[level][0] / levels[level][1]
        binding = LEVEL_NAMES[level]
    elif best is not None:
        roof_pct = 100.0 * best[0]
        binding = f"{best[1]} compute"
    if "dram" in levels and best is not None:
        intensity = best[2] / levels["dram"][0]
    elif best is not None:
        dram_rate = _value(row, "dram_bytes_per_s")
        intensity = best[2] / dram_rate if dram_rate else None
    roofline_compute_pct = 100.0 * best[0] if best is not None else None
    roofline_memory_pct = max((100.0 * r / b for r, b in levels.values()), default=None)

    sm_pct = _value(row, "sm_throughput_pct")
    memory_pct = _value(row, "memory_throughput_pct")
    memory_text = "Memory"
    if memory_pct is None:
        # `ncu --metrics` exports may lack gpu__compute_memory_throughput (the max over the memory units); the busiest
        # of the units collected is a lower bound of it.
        units = {name: _value(row, f"{level}_throughput_pct") for level, name in LEVEL_NAMES.items()}
        present = {name: value for name, value in units.items() if value is not None}
        if present:
            memory_pct = max(present.values())
            memory_text = f"Memory (busiest of {'/'.join(present)})"
    waves = _value(row, "waves_per_sm")
    rules = row.get("ncu_rules") or []
    if waves is None and any(
        r.get("name") == "SOLBottleneck" and "grid is too small" in (r.get("message") or "") for r in rules
    ):
        # Exports without Launch Statistics lack the wave count; ncu's own rule result still says it.
        waves = waves_in_rules(rules) or 0.0
    one_sided = None
    if (sm_pct is None) != (memory_pct is None) and max(sm_pct or 0.0, memory_pct or 0.0) >= HIGH_THRESHOLD_PCT:
        # One unit at 80 %+ is a verdict whatever the other (not collected) does: ncu's "High Throughput" case.
        one_sided = "SM throughput not collected" if sm_pct is None else "memory throughput not collected"
        sm_pct, memory_pct = (sm_pct or 0.0), (memory_pct or 0.0)
    if sm_pct is not None and memory_pct is not None:
        bound, label = sol_bottleneck(sm_pct, memory_pct, waves)
        pipes = {name: _value(row, f"{level}_throughput_pct") for level, name in LEVEL_NAMES.items()}
        top_pipe = max((p for p in pipes if pipes[p] is not None), key=lambda p: pipes[p] or 0.0, default=None)
        if bound is Bound.MEMORY and top_pipe and label != "Balanced Throughput":
            label = f"{label} ({top_pipe})"
        # SOL percentages are measured against each unit's own peak, so the busiest unit is the nearest roof
        # even where the roofline (DRAM only, say) sees less: an L2-bound kernel shows low DRAM use.
        sol_pct = max(sm_pct, memory_pct)
        if roof_pct is None or sol_pct > roof_pct:
            roof_pct = sol_pct
            binding = "SM" if sm_pct >= memory_pct else (top_pipe or "memory")
        pipe_text = ", ".join(f"{p} {pct_text(v)}" for p, v in pipes.items() if v is not None)
        sm_text = "n/a" if one_sided == "SM throughput not collected" else pct_text(sm_pct)
        mem_text = "n/a" if one_sided == "memory throughput not collected" else pct_text(memory_pct)
        reason = f"ncu SOL: Compute (SM) {sm_text}, {memory_text} {mem_text}" + (f" [{pipe_text}]" if pipe_text else "")
        if one_sided:
            reason += f" ({one_sided})"
        if label == "Small Grid":
            reason += f"; {waves:.2f} waves per SM"
        reason += f" → {label}"
        if intensity is not None and roof_pct is not None:
            reason += f"; roofline: {intensity:.3g} FLOP/DRAM byte, {roof_pct:.1f}% of the {binding} roof"
        compute_pct = None if one_sided == "SM throughput not collected" else sm_pct
        mem_pct = None if one_sided == "memory throughput not collected" else memory_pct
    elif roofline_compute_pct is not None or roofline_memory_pct is not None:
        compute_pct, mem_pct = roofline_compute_pct, roofline_memory_pct
        c, m = compute_pct or 0.0, mem_pct or 0.0
        if c < LATENCY_THRESHOLD_PCT and m < LATENCY_THRESHOLD_PCT:
            bound, label = Bound.LATENCY, "Latency Issue (roofline)"
        elif ridge_side is not None:
            bound = ridge_side
            label = f"{bound.value.capitalize()}-bound (roofline)"
        else:
            bound = Bound.COMPUTE if c >= m else Bound.MEMORY
            label = f"{bound.value.capitalize()}-bound (roofline)"
        reason = f"roofline: {pct_text(compute_pct)} of peak compute, {pct_text(mem_pct)} of peak bandwidth, binding roof {binding}"
        if bound is Bound.LATENCY:
            reason += " — under 60% of both, so latency-bound whatever the intensity"
    else:
        return Verdict(Bound.UNKNOWN, "No Data", "no FLOP or byte counts with known peaks and no SOL percentages in this export",
                       None, None, None, None, None, None, None, None, None)

    speedups = [rule.get("speedup_pct") for rule in rules if rule.get("speedup_pct") is not None]
    if speedups:
        fraction = min(max(speedups), 100.0) / 100.0
        source = "ncu estimated speedup"
    elif roof_pct is not None:
        fraction = max(0.0, 1.0 - min(roof_pct, 100.0) / 100.0)
        source = "roofline headroom"
    else:
        fraction, source = None, None
    return Verdict(bound, label, reason, binding, roof_pct, intensity, best[2] if best else None,
                   best[1] if best else None, compute_pct, mem_pct, fraction, source)
