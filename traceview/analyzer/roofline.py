"""Roofline classification of kernel launches: pure functions, no I/O.

Conventions (stated because the field has two):
- Speed-of-light verdicts follow Nsight Compute's SOLBottleneck rule: either throughput ≥ 80 % → "High
  Throughput"; both < 60 % → "Latency Issue" ("Small Grid" when waves per SM < 1); otherwise a gap ≥ 10 points
  names the higher unit, else "Balanced Throughput". So our label agrees with what ncu shows.
- Without SOL percentages the roofline decides: compute- or memory-bound by the side of the ridge point
  (AI ≥ peak FLOP/s ÷ peak bytes/s), NERSC's hierarchical convention, with the same latency rule first: a kernel
  under 60 % of both compute and memory throughput is latency-bound whatever its arithmetic intensity.
- FLOPs follow ncu's counting (FP16 counts packed half2 ops twice; see parsers.ncu_csv). Traffic per level
  follows ncu's hierarchical charts (L2 = lts2xbar bytes, L1 = LSU writeback bytes); only where an export has
  NERSC's `lts__t_bytes.sum` / `l1tex__t_bytes.sum` alone are those used, and the reader's note says so.
- Arithmetic intensity is reported against DRAM bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import polars as pl

from traceview.numbers import float_or_none
from traceview.parsers.schema import KERNELS, MEMORY_LEVELS, PRECISIONS

LATENCY_THRESHOLD_PCT = 60.0  # ncu: latency_bound_threshold
HIGH_THRESHOLD_PCT = 80.0  # ncu: no_bound_threshold
BALANCED_GAP_PCT = 10.0  # ncu: balanced_threshold
WAVES_THRESHOLD = 1.0  # ncu: waves_threshold


class Bound(str, Enum):
    COMPUTE = "compute"
    MEMORY = "memory"
    LATENCY = "latency"
    UNKNOWN = "unknown"


# ncu's name for a kernel whose compute and memory throughput are within BALANCED_GAP_PCT of each other: the verdict
# names the higher side, but cutting only one of them moves the wall to the other.
BALANCED_LABEL = "Balanced Throughput"
SHORT_BALANCED = "math and bytes"

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

_NVPROF_ROOFLINE_METRICS = ("`nvprof --metrics flop_count_sp,flop_count_dp,dram_read_transactions,dram_write_transactions,"
                            "dram_read_throughput,dram_write_throughput`")
_NVPROF_STALL_METRICS = ("stall_memory_dependency,stall_exec_dependency,stall_inst_fetch,stall_sync,stall_texture,stall_pipe_busy,"
                         "stall_memory_throttle,stall_constant_memory_dependency,stall_not_selected,stall_other")


@dataclass(frozen=True)
class Collection:
    """What to run for the evidence a verdict or a diagnosis lacks, in the words of the profiler that wrote the input:
    Nsight Compute's sections, or nvprof's metrics on the GPUs ncu does not profile (Kepler, Maxwell, Pascal)."""

    no_verdict: str  # advice for a launch with neither side measured
    both_sides: str  # what collects compute and memory together, quoted where one side alone gave no verdict
    short: str  # the next step of an unjudged kernel in a table cell
    # ncu section (Occupancy, LaunchStats, WarpStateStats) → what collects its evidence here (None: nothing can)
    evidence: Mapping[str, str | None]
    evidence_command: str
    evidence_noun: str  # "section" or "metric"
    per_instruction: str  # where a waiting kernel's stalls are seen per instruction
    no_durations: str  # the note for an input without kernel durations

    def collect_missing(self, missing: list[str]) -> str | None:
        """Return "collect the X and Y sections (`command`)", for the evidence that can be collected, or None."""
        wanted = [self.evidence[name] for name in missing if self.evidence.get(name)]
        if not wanted:
            return None
        listed = wanted[0] if len(wanted) == 1 else f"{', '.join(wanted[:-1])} and {wanted[-1]}"  # type: ignore[arg-type]
        noun = self.evidence_noun + ("s" if len(wanted) > 1 else "")
        return f"collect the {listed} {noun} ({self.evidence_command})"


NCU_COLLECTION = Collection(
    no_verdict="collect throughput metrics: re-profile with `ncu --section SpeedOfLight` (or --set full)",
    both_sides="`ncu --section SpeedOfLight`, or --set full",
    short="profile with ncu",
    evidence={name: name for name in ("Occupancy", "LaunchStats", "WarpStateStats")},
    evidence_command="`ncu --set full`",
    evidence_noun="section",
    per_instruction="ncu's Source page (`ncu --set full --import-source yes`)",
    no_durations="the export has no kernel durations (a single-section export?): times and recoverable time are unknown",
)
NVPROF_COLLECTION = Collection(
    no_verdict=f"collect FLOP counts and DRAM traffic: re-profile with {_NVPROF_ROOFLINE_METRICS}",
    both_sides=_NVPROF_ROOFLINE_METRICS,
    short="collect nvprof metrics",
    # nvprof has no wave count: its GPU trace gives the grid, not the waves per SM.
    evidence={"Occupancy": "achieved_occupancy", "LaunchStats": None, "WarpStateStats": "stall_*"},
    evidence_command=f"`nvprof --metrics achieved_occupancy,{_NVPROF_STALL_METRICS}`",
    evidence_noun="metric",
    per_instruction="the Visual Profiler's source-level analysis (`nvprof --source-level-analysis pc_sampling -o run.nvprof`)",
    no_durations=("nvprof prints no kernel durations with metrics, and this file has neither DRAM bytes with DRAM throughputs to derive "
                  "them from nor a timing run that agrees: times and recoverable time are unknown — collect dram_read_transactions, "
                  "dram_write_transactions, dram_read_throughput and dram_write_throughput too, or add the output of a plain "
                  "`nvprof ./app` run to the file"),
)


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
    """Return (bound, ncu label) from SOL compute and memory throughput %, as ncu's SOLBottleneck rule does (the rule
    classify_launches applies to every launch)."""
    verdict = classify_launch({"sm_throughput_pct": sm_pct, "memory_throughput_pct": memory_pct, "waves_per_sm": waves_per_sm}, {})
    return verdict.bound, verdict.label


def attainable(peak_flop_per_s: Any, intensity: Any, peak_bytes_per_s: Any) -> Any:
    """Return the roofline ceiling at this intensity: min(peak compute, intensity × peak bandwidth), FLOP/s (numbers,
    or polars expressions for a column of launches)."""
    if any(isinstance(v, pl.Expr) for v in (peak_flop_per_s, intensity, peak_bytes_per_s)):
        return pl.min_horizontal(peak_flop_per_s, intensity * peak_bytes_per_s)
    return min(peak_flop_per_s, intensity * peak_bytes_per_s)


def ridge_point(peak_flop_per_s: Any, peak_bytes_per_s: Any) -> Any:
    """Return the arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof (numbers or
    expressions)."""
    return peak_flop_per_s / peak_bytes_per_s


def pct_text(pct: float | None) -> str:
    """A percentage as the reasons quote it: one decimal, or n/a."""
    return "n/a" if pct is None else f"{pct:.1f}%"


def waves_in_rules(rules: list[Mapping[str, Any]]) -> float | None:
    """Return the wave count that ncu's SOLBottleneck text quotes ("only 0.7 full waves"), or None."""
    for rule in rules:
        match = re.search(r"only ([0-9.]+) full waves", rule.get("message") or "")
        if match and float_or_none(match.group(1)) is not None:
            return float_or_none(match.group(1))
    return None


def classify_launch(row: Mapping[str, Any], peaks: Mapping[str, float | None]) -> Verdict:
    """Return the verdict for one launch (a KERNELS row); `peaks` holds peak_* values to use where the row has none."""
    columns = {name: [row.get(name)] for name in KERNELS if name in row}
    frame = pl.DataFrame(columns, schema={name: KERNELS[name] for name in columns}, strict=False)
    verdict = classify_launches(frame, peaks).row(0, named=True)
    verdict["bound"] = Bound(verdict["bound"])
    return Verdict(**verdict)


def _number(frame: pl.DataFrame, name: str) -> pl.Expr:
    """The column as Float64 with NaN as null (a damaged cell is unknown, not a number); null when absent."""
    if name not in frame.columns:
        return pl.lit(None, dtype=pl.Float64)
    value = pl.col(name).cast(pl.Float64, strict=False)
    return pl.when(~value.is_nan()).then(value)


def _first_where(conditions: dict[str, pl.Expr]) -> pl.Expr:
    """The name of the first condition that holds (dict order), else null: Python's max/min keep the first of ties."""
    return pl.coalesce([pl.when(condition).then(pl.lit(name)) for name, condition in conditions.items()])


def _pick(choice: pl.Expr, values: dict[str, pl.Expr]) -> pl.Expr:
    """The value named by `choice`, per row."""
    return pl.coalesce([pl.when(choice == name).then(value) for name, value in values.items()])


def _rule_columns(frame: pl.DataFrame) -> list[pl.Expr]:
    """Per launch from ncu's rule results: whether SOLBottleneck says the grid is too small, the wave count its text
    quotes (0 when none), and the largest estimated speedups (%), global and local apart.

    ncu's global estimates are of the kernel's whole duration; a local one is of the unit or section the rule looks at
    (an 83% local occupancy estimate on a kernel whose global estimates top out at 26%), so it is no share of the
    kernel's time. Estimates with no type (ncu before 2023.3, .ncu-rep wheels that do not say) count as global."""
    dtype = frame.schema.get("ncu_rules")
    fields = {f.name for f in dtype.inner.fields} if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct) else set()
    if not {"name", "message", "speedup_pct"} <= fields:
        return [pl.lit(False).alias("_small_grid"), pl.lit(None, dtype=pl.Float64).alias("_rule_waves"),
                pl.lit(None, dtype=pl.Float64).alias("_rule_speedup"), pl.lit(None, dtype=pl.Float64).alias("_rule_local_speedup")]
    rules = pl.col("ncu_rules")
    name, message, speedup = (pl.element().struct.field(f) for f in ("name", "message", "speedup_pct"))
    local = (pl.element().struct.field("speedup_type").str.contains("local", literal=True).fill_null(False) if "speedup_type" in fields
             else pl.lit(False))
    return [
        rules.list.eval((name == "SOLBottleneck") & message.str.contains("grid is too small", literal=True)).list.any().fill_null(False).alias("_small_grid"),
        rules.list.eval(message.str.extract(r"only ([0-9.]+) full waves", 1)).list.drop_nulls().list.first()
        .cast(pl.Float64, strict=False).fill_null(0.0).alias("_rule_waves"),
        rules.list.eval(speedup.filter(~local)).list.drop_nulls().list.max().alias("_rule_speedup"),
        rules.list.eval(speedup.filter(local)).list.drop_nulls().list.max().alias("_rule_local_speedup"),
    ]


_VERDICT_COLUMNS = {
    "bound": pl.String, "label": pl.String, "reason": pl.String, "binding_roof": pl.String, "roof_pct": pl.Float64,
    "arithmetic_intensity": pl.Float64, "achieved_flop_per_s": pl.Float64, "precision": pl.String, "compute_pct": pl.Float64,
    "memory_pct": pl.Float64, "recoverable_fraction": pl.Float64, "recoverable_source": pl.String,
}


def classify_launches(launches: pl.DataFrame, peaks: Mapping[str, float | pl.Expr | None],
                      collection: Collection = NCU_COLLECTION) -> pl.DataFrame:
    """Return one verdict row per launch (the Verdict fields as columns, `bound` as its string value).

    `peaks` holds the peak_* values (or per-row expressions) to use where a launch has none of its own; `collection`
    words what to collect where a side is missing. The decisions
    are column expressions, so a 10 k-launch export costs one pass; only the reason text is formatted per row, in
    Python, so it reads exactly as the single-launch form always did."""
    frame = launches

    def peak(name: str) -> pl.Expr:
        fallback = peaks.get(name)
        if not isinstance(fallback, pl.Expr):
            fallback = pl.lit(fallback if fallback and fallback > 0 else None, dtype=pl.Float64)
        fallback = pl.when(fallback > 0).then(fallback)
        own = _number(frame, name)
        return pl.when(own > 0).then(own).otherwise(fallback)

    # Compute side: the precision using the largest share of its own peak is the one that matters.
    rate = {p: _number(frame, f"{p}_flop_per_s") for p in PRECISIONS}
    top = {p: peak(f"peak_{p}_flop_per_s") for p in PRECISIONS}
    share = {p: pl.when((rate[p] > 0) & top[p].is_not_null()).then(rate[p] / top[p]) for p in PRECISIONS}
    stage = frame.select(
        *[s.alias(f"_share_{p}") for p, s in share.items()],
        *[r.alias(f"_rate_{p}") for p, r in rate.items()],
        *[t.alias(f"_top_{p}") for p, t in top.items()],
        *[_number(frame, f"{m}_bytes_per_s").alias(f"_mrate_{m}") for m in MEMORY_LEVELS],
        *[peak(f"peak_{m}_bytes_per_s").alias(f"_mtop_{m}") for m in MEMORY_LEVELS],
        *[_number(frame, f"{m}_throughput_pct").alias(f"_pipe_{m}") for m in MEMORY_LEVELS],
        _number(frame, "sm_throughput_pct").alias("_sm"),
        _number(frame, "memory_throughput_pct").alias("_memory"),
        _number(frame, "waves_per_sm").alias("_waves"),
        *_rule_columns(frame),
    )
    col = pl.col
    best_share = pl.max_horizontal([col(f"_share_{p}") for p in PRECISIONS])
    stage = stage.with_columns(best_share.alias("_best_share")).with_columns(
        _first_where({p: col(f"_share_{p}") == col("_best_share") for p in PRECISIONS}).alias("precision"))
    stage = stage.with_columns(
        _pick(col("precision"), {p: col(f"_rate_{p}") for p in PRECISIONS}).alias("achieved_flop_per_s"),
        _pick(col("precision"), {p: col(f"_top_{p}") for p in PRECISIONS}).alias("_best_top"),
    )
    has_best = col("precision").is_not_null()
    flops = col("achieved_flop_per_s")
    # Memory side: achieved / peak bandwidth per level present; with a compute side, only levels whose roofline
    # ceiling is usable (a damaged cell of 1e-320 bytes/s can underflow a ceiling to zero).
    ceiling = {m: attainable(col("_best_top"), flops / col(f"_mrate_{m}"), col(f"_mtop_{m}")) for m in MEMORY_LEVELS}
    present = {m: (col(f"_mrate_{m}") > 0) & col(f"_mtop_{m}").is_not_null() for m in MEMORY_LEVELS}
    stage = stage.with_columns(
        *[pl.when(has_best).then(ceiling[m]).alias(f"_ceiling_{m}") for m in MEMORY_LEVELS],
    ).with_columns(
        *[(present[m] & (~has_best | ((col(f"_ceiling_{m}") > 0) & col(f"_ceiling_{m}").is_finite()))).fill_null(False).alias(f"_in_{m}")
          for m in MEMORY_LEVELS],
    )
    # Each level's share is a column before the busiest is picked by equality: computed twice, as expressions, the
    # two quotients can differ in the last bit (0.7375367398006154 against ...155 under polars 2.1), and then no level
    # is found equal to the busiest.
    stage = stage.with_columns(*[pl.when(col(f"_in_{m}")).then(col(f"_mrate_{m}") / col(f"_mtop_{m}")).alias(f"_lshare_{m}") for m in MEMORY_LEVELS])
    level_share = {m: col(f"_lshare_{m}") for m in MEMORY_LEVELS}
    lowest_ceiling = pl.min_horizontal([pl.when(col(f"_in_{m}")).then(col(f"_ceiling_{m}")) for m in MEMORY_LEVELS])
    stage = stage.with_columns(
        lowest_ceiling.alias("_lowest_ceiling"),
        pl.max_horizontal(level_share.values()).alias("_busiest_share"),
        pl.any_horizontal([col(f"_in_{m}") for m in MEMORY_LEVELS]).alias("_any_level"),
    ).with_columns(
        pl.when(has_best).then(_first_where({m: col(f"_in_{m}") & (col(f"_ceiling_{m}") == col("_lowest_ceiling")) for m in MEMORY_LEVELS}))
        .otherwise(_first_where({m: level_share[m] == col("_busiest_share") for m in MEMORY_LEVELS})).alias("_level"),
    )
    level_rate = _pick(col("_level"), {m: col(f"_mrate_{m}") for m in MEMORY_LEVELS})
    level_top = _pick(col("_level"), {m: col(f"_mtop_{m}") for m in MEMORY_LEVELS})
    both = has_best & col("_any_level")
    ridge_side = pl.when(both).then(pl.when(flops / level_rate >= ridge_point(col("_best_top"), level_top)).then(pl.lit(Bound.COMPUTE.value))
                                    .otherwise(pl.lit(Bound.MEMORY.value)))
    level_name = col("_level").replace_strict(LEVEL_NAMES, default=None, return_dtype=pl.String)
    compute_roof = pl.concat_str(col("precision"), pl.lit(" compute"))
    dram_rate = col("_mrate_dram")
    stage = stage.with_columns(
        ridge_side.alias("_ridge_side"),
        pl.when(both).then(100.0 * flops / col("_lowest_ceiling"))
        .when(col("_any_level")).then(100.0 * col("_busiest_share"))
        .when(has_best).then(100.0 * col("_best_share")).alias("roof_pct"),
        pl.when(both & (ridge_side == Bound.COMPUTE.value)).then(compute_roof)
        .when(col("_any_level")).then(level_name)
        .when(has_best).then(compute_roof).alias("binding_roof"),
        pl.when(has_best & (dram_rate != 0)).then(flops / dram_rate).alias("arithmetic_intensity"),
        # FLOP counts collected and all zero (a copy kernel) are a measured 0%; none collected are unknown.
        pl.when(has_best).then(100.0 * col("_best_share"))
        .when(pl.any_horizontal([col(f"_rate_{p}").is_not_null() for p in PRECISIONS])
              & (pl.max_horizontal([col(f"_rate_{p}") for p in PRECISIONS]) == 0)).then(0.0)
        .alias("_roofline_compute"),
        (100.0 * col("_busiest_share")).alias("_roofline_memory"),
    )

    # Speed of light. `ncu --metrics` exports may lack gpu__compute_memory_throughput (the max over the memory
    # units); the busiest of the units collected is a lower bound of it.
    pipes = {name: col(f"_pipe_{m}") for m, name in LEVEL_NAMES.items()}
    stage = stage.with_columns(
        col("_memory").is_null().alias("_memory_from_units"),
        pl.coalesce(col("_memory"), pl.max_horizontal(pipes.values())).alias("_memory"),
        # Exports without Launch Statistics lack the wave count; ncu's own rule result still says it.
        pl.when(col("_waves").is_null() & col("_small_grid")).then(col("_rule_waves")).otherwise(col("_waves")).alias("_waves"),
        _first_where({name: value == pl.max_horizontal(pipes.values()) for name, value in pipes.items()}).alias("_top_pipe"),
    )
    sm, memory = col("_sm"), col("_memory")
    # One unit at 80 %+ is a verdict whatever the other (not collected) does: ncu's "High Throughput" case.
    one_sided = (sm.is_null() != memory.is_null()) & (pl.max_horizontal(sm.fill_null(0.0), memory.fill_null(0.0)) >= HIGH_THRESHOLD_PCT)
    stage = stage.with_columns(
        pl.when(one_sided & sm.is_null()).then(pl.lit("SM throughput not collected"))
        .when(one_sided).then(pl.lit("memory throughput not collected")).alias("_one_sided"),
    ).with_columns(
        pl.when(col("_one_sided").is_not_null()).then(sm.fill_null(0.0)).otherwise(sm).alias("_sm"),
        pl.when(col("_one_sided").is_not_null()).then(memory.fill_null(0.0)).otherwise(memory).alias("_memory"),
    )
    sol = sm.is_not_null() & memory.is_not_null()
    higher = pl.when(sm >= memory).then(pl.lit(Bound.COMPUTE.value)).otherwise(pl.lit(Bound.MEMORY.value))
    latency = (sm < LATENCY_THRESHOLD_PCT) & (memory < LATENCY_THRESHOLD_PCT)
    sol_label = (
        pl.when((sm >= HIGH_THRESHOLD_PCT) | (memory >= HIGH_THRESHOLD_PCT)).then(pl.lit("High Throughput"))
        .when(latency & col("_waves").is_not_null() & (col("_waves") < WAVES_THRESHOLD)).then(pl.lit("Small Grid"))
        .when(latency).then(pl.lit("Latency Issue"))
        .when((sm - memory).abs() >= BALANCED_GAP_PCT)
        .then(pl.when(sm >= memory).then(pl.lit("High Compute Throughput")).otherwise(pl.lit("High Memory Throughput")))
        .otherwise(pl.lit(BALANCED_LABEL))
    )
    sol_bound = pl.when(~((sm >= HIGH_THRESHOLD_PCT) | (memory >= HIGH_THRESHOLD_PCT)) & latency).then(pl.lit(Bound.LATENCY.value)).otherwise(higher)
    stage = stage.with_columns(sol_bound.alias("_sol_bound"), sol_label.alias("_sol_label"))
    labelled_pipe = (col("_sol_bound") == Bound.MEMORY.value) & col("_top_pipe").is_not_null() & (col("_sol_label") != BALANCED_LABEL)
    # SOL percentages are measured against each unit's own peak, so the busiest unit is the nearest roof even where
    # the roofline (DRAM only, say) sees less: an L2-bound kernel shows low DRAM use.
    sol_pct = pl.max_horizontal(sm, memory)
    sol_roof = col("roof_pct").is_null() | (sol_pct > col("roof_pct"))
    c, m = col("_roofline_compute").fill_null(0.0), col("_roofline_memory").fill_null(0.0)
    # As with SOL percentages: one side measured gives a verdict only at 80%+ (`--metrics dram__bytes.sum.per_second`
    # alone says nothing of the SMs, so 1% of DRAM is no latency verdict); below that the kernel stays unknown.
    one_side = col("_roofline_compute").is_null() != col("_roofline_memory").is_null()
    one_side_high = one_side & (pl.max_horizontal(c, m) >= HIGH_THRESHOLD_PCT)
    roofline = (col("_roofline_compute").is_not_null() & col("_roofline_memory").is_not_null()) | one_side_high
    # SOL percentages with one side only, under 80% (high ones were filled in above), where no roofline decides either.
    sol_one_low = ~sol & ~roofline & (sm.is_null() != memory.is_null())
    stage = stage.with_columns((~sol & one_side & ~one_side_high).alias("_one_side_low"), sol_one_low.alias("_sol_one_low"))
    roofline_bound = (
        pl.when((c < LATENCY_THRESHOLD_PCT) & (m < LATENCY_THRESHOLD_PCT)).then(pl.lit(Bound.LATENCY.value))
        .when(col("_ridge_side").is_not_null()).then(col("_ridge_side"))
        .when(c >= m).then(pl.lit(Bound.COMPUTE.value)).otherwise(pl.lit(Bound.MEMORY.value))
    )
    roofline_label = pl.when(roofline_bound == Bound.LATENCY.value).then(pl.lit("Latency Issue (roofline)")).otherwise(
        pl.concat_str(roofline_bound.str.slice(0, 1).str.to_uppercase(), roofline_bound.str.slice(1), pl.lit("-bound (roofline)")))
    stage = stage.with_columns(
        pl.when(sol).then(col("_sol_bound")).when(roofline).then(roofline_bound).otherwise(pl.lit(Bound.UNKNOWN.value)).alias("bound"),
        pl.when(sol & labelled_pipe).then(pl.concat_str(col("_sol_label"), pl.lit(" ("), col("_top_pipe"), pl.lit(")")))
        .when(sol).then(col("_sol_label")).when(roofline).then(roofline_label)
        .when(col("_one_side_low") & col("_roofline_compute").is_null()).then(pl.lit("Compute Not Measured"))
        .when(col("_one_side_low")).then(pl.lit("Memory Not Measured"))
        .when(col("_sol_one_low") & sm.is_null()).then(pl.lit("SM Throughput Not Collected"))
        .when(col("_sol_one_low")).then(pl.lit("Memory Throughput Not Collected")).otherwise(pl.lit("No Data")).alias("label"),
        pl.when(sol & sol_roof).then(sol_pct).when(sol | roofline).then(col("roof_pct")).alias("roof_pct"),
        pl.when(sol & sol_roof).then(pl.when(sm >= memory).then(pl.lit("SM")).otherwise(pl.coalesce(col("_top_pipe"), pl.lit("memory"))))
        .when(sol | roofline | col("_one_side_low")).then(col("binding_roof")).alias("binding_roof"),
        pl.when(sol).then(pl.when(col("_one_sided") != "SM throughput not collected").then(sm).when(col("_one_sided").is_null()).then(sm))
        .when(roofline | col("_one_side_low")).then(col("_roofline_compute")).when(col("_sol_one_low")).then(sm).alias("compute_pct"),
        pl.when(sol).then(pl.when(col("_one_sided") != "memory throughput not collected").then(memory).when(col("_one_sided").is_null()).then(memory))
        .when(roofline | col("_one_side_low")).then(col("_roofline_memory")).when(col("_sol_one_low")).then(memory).alias("memory_pct"),
        (sol | roofline).alias("_known"),
    ).with_columns(
        *[pl.when(col("_known")).then(col(name)).alias(name) for name in ("arithmetic_intensity", "achieved_flop_per_s", "precision")],
    )
    reasons, fractions, sources = _reasons(stage, collection)
    stage = stage.with_columns(pl.Series("reason", reasons, dtype=pl.String), pl.Series("recoverable_fraction", fractions, dtype=pl.Float64),
                               pl.Series("recoverable_source", sources, dtype=pl.String))
    return stage.select([pl.col(name).cast(dtype) for name, dtype in _VERDICT_COLUMNS.items()])


def _reasons(stage: pl.DataFrame, collection: Collection) -> tuple[list[str], list[float | None], list[str | None]]:
    """Per launch, from the decided columns: the reason text (what ncu's SOL said, or the roofline's numbers), the
    fraction of its time a fix could give back (ncu's largest estimated speedup, else the headroom under its roof),
    and where that fraction comes from. In Python, so the numbers are exactly those of the single-launch form."""
    names = list(LEVEL_NAMES.values())
    one_side_advice = f"under 80% one side alone gives no verdict: collect both ({collection.both_sides})"
    columns = ["bound", "label", "_sol_label", "roof_pct", "binding_roof", "arithmetic_intensity", "compute_pct", "memory_pct",
               "_sm", "_memory", "_memory_from_units", "_one_sided", "_waves", "_known", "_one_side_low", "_sol_one_low", "_rule_speedup",
               "_rule_local_speedup",
               *(f"_pipe_{m}" for m in MEMORY_LEVELS)]
    reasons: list[str] = []
    fractions: list[float | None] = []
    sources: list[str | None] = []
    for (bound, label, sol_label, roof, binding, intensity, compute, memory, sm, mem, from_units, one_sided, waves, known, one_side_low,
         sol_one_low, speedup, local_speedup, *pipes) in stage.select(columns).rows():
        # A kernel without a verdict has only its reason: no fraction to recover, from no source.
        unjudged = None
        if sol_one_low:
            measured = f"Memory {pct_text(mem)}" if sm is None else f"Compute (SM) {pct_text(sm)}"
            missing = "SM throughput" if sm is None else "memory throughput"
            unjudged = f"ncu SOL: {measured}, {missing} not collected: {one_side_advice}"
        elif one_side_low:
            measured = f"{pct_text(memory)} of the {binding} roof" if compute is None else f"{pct_text(compute)} of the {binding} roof"
            missing = "no FLOP counts" if compute is None else "no byte counts"
            unjudged = f"roofline: {measured}; the other side was not measured ({missing}), and {one_side_advice}"
        elif not known:
            unjudged = "no FLOP or byte counts with known peaks and no SOL percentages in this export"
        if unjudged is not None:
            reasons.append(unjudged)
            fractions.append(None)
            sources.append(None)
            continue
        if speedup is not None:
            fractions.append(min(speedup, 100.0) / 100.0)
            sources.append("ncu estimated speedup")
        elif roof is not None:
            fractions.append(max(0.0, 1.0 - min(roof, 100.0) / 100.0))
            sources.append("roofline headroom")
        elif local_speedup is not None:
            # Only local estimates and no roof: the largest is an upper bound on what the kernel's time could gain.
            fractions.append(min(local_speedup, 100.0) / 100.0)
            sources.append("ncu local estimate (upper bound)")
        else:
            fractions.append(None)
            sources.append(None)
        if sm is not None and mem is not None:
            present = [(name, value) for name, value in zip(names, pipes, strict=True) if value is not None]
            memory_text = f"Memory (busiest of {'/'.join(name for name, _ in present)})" if from_units and present else "Memory"
            sm_text = "n/a" if one_sided == "SM throughput not collected" else pct_text(sm)
            mem_text = "n/a" if one_sided == "memory throughput not collected" else pct_text(mem)
            reason = f"ncu SOL: Compute (SM) {sm_text}, {memory_text} {mem_text}"
            if present:
                reason += " [" + ", ".join(f"{name} {pct_text(value)}" for name, value in present) + "]"
            if one_sided:
                reason += f" ({one_sided})"
            if sol_label == "Small Grid":
                reason += f"; {waves:.2f} waves per SM"
            reason += f" → {label}"
            if intensity is not None and roof is not None:
                reason += f"; roofline: {intensity:.3g} FLOP/DRAM byte, {roof:.1f}% of the {binding} roof"
            reasons.append(reason)
        else:
            reason = f"roofline: {pct_text(compute)} of peak compute, {pct_text(memory)} of peak bandwidth, binding roof {binding}"
            if bound == Bound.LATENCY.value:
                reason += " — under 60% of both, so latency-bound whatever the intensity"
            reasons.append(reason)
    return reasons, fractions, sources
