"""Many ranks or runs at once: a small per-file summary (map) and the fleet view across files (reduce). Pure.

Map (`summarize`): one Analysis → small polars frames — `meta` (one row: rank, host, GPU, profiler, sha256, totals,
step time), `kernels` (per kernel and device: launches, total, p50, p99, ns), `devices` (per GPU: span and the
compute/communication/copy/idle shares, gaps), `nvtx` (groups: count, CPU and GPU ns). They are what travels back
from a worker and what the cache stores, so a fleet's memory is the summaries', whatever the exports' size.

Reduce (`reduce_fleet`): per-kernel totals across ranks with their imbalance (max ÷ median of the per-rank totals),
per-rank shares and step time, and straggler ranks: a rank whose step time (or, without steps, busy time) is above
median + k·MAD of all ranks, MAD scaled by 1.4826 so that k reads as standard deviations for normal data (the usual
robust z-score convention). Both step time (when every rank has steps) and kernel time are checked; a rank is a
straggler by either, and says which.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceview.analyzer.analysis import PEAK_KEYS, Analysis, Device, Peak, Source, _without_launches
from traceview.analyzer.names import normalise_kernel_name
from traceview.analyzer.ranking import rank_kernels
from traceview.numbers import reduced
from traceview.parsers.ncu_csv import short_kernel_name
from traceview.parsers.schema import schema_of

MAD_SCALE = 1.4826
DEFAULT_K = 3.0

META = schema_of({"path": pl.String, "sha256": pl.String, "rank": pl.Int64, "host": pl.String, "gpu": pl.String, "format": pl.String,
                  "profiler": pl.String, "size_bytes": pl.Int64, "launches": pl.Int64, "kernel_ns": pl.Float64, "span_ns": pl.Float64,
                  "step_median_ns": pl.Float64, "step_p99_ns": pl.Float64, "steps": pl.Int64, "verdict": pl.String})
KERNELS = schema_of({"kernel_name": pl.String, "short_name": pl.String, "device_id": pl.Int64, "launches": pl.Int64, "total_ns": pl.Float64,
                     "p50_ns": pl.Float64, "p99_ns": pl.Float64, "bound": pl.String})
DEVICES = schema_of({"device_id": pl.Int64, "span_ns": pl.Float64, "compute_pct": pl.Float64, "communication_pct": pl.Float64,
                     "copy_pct": pl.Float64, "unified_memory_pct": pl.Float64, "idle_pct": pl.Float64, "busy_pct": pl.Float64, "gap_count": pl.Int64,
                     "largest_gap_ns": pl.Float64, "verdict": pl.String})
NVTX = schema_of({"name": pl.String, "count": pl.Int64, "cpu_ns": pl.Float64, "gpu_ns": pl.Float64})
TABLES = {"meta": META, "kernels": KERNELS, "devices": DEVICES, "nvtx": NVTX}


def summarize(analysis: Analysis, rank: int | None, host: str | None = None) -> dict[str, pl.DataFrame]:
    """Return the per-file summary tables (TABLES) of one analysis."""
    kernels = analysis.kernels
    rows = []
    for k in kernels.iter_rows(named=True):
        devices = k.get("devices") or [{"device_id": None, "launches": k["launches"], "duration_ns": k["duration_ns"]}]
        for device in devices:
            rows.append({"kernel_name": k["kernel_name"], "short_name": k["short_name"], "device_id": device.get("device_id"),
                         "launches": device.get("launches"), "total_ns": device.get("duration_ns"),
                         "p50_ns": k.get("median_duration_ns"), "p99_ns": k.get("p99_duration_ns"), "bound": k.get("bound")})
    timeline = analysis.timeline
    device_rows = []
    if timeline is not None:
        for d in timeline.devices:
            b = d["breakdown"]
            device_rows.append({"device_id": d["device_id"], "span_ns": d["span_ns"], "compute_pct": b["compute_pct"],
                                "communication_pct": b["communication_pct"], "copy_pct": b["copy_pct"],
                                "unified_memory_pct": b.get("unified_memory_pct"), "idle_pct": b["idle_pct"],
                                "busy_pct": d["busy_pct"], "gap_count": d.get("gap_count"), "largest_gap_ns": d.get("largest_gap_ns"),
                                "verdict": d.get("verdict")})
    steps = (timeline.steps if timeline is not None else None) or analysis.steps or {}
    step_median = steps.get("median_ns", steps.get("median_duration_ns"))
    nvtx = [{"name": g["name"], "count": g["count"], "cpu_ns": g["cpu_ns"], "gpu_ns": g.get("gpu_ns")} for g in (timeline.nvtx if timeline else [])]
    span = max((d["span_ns"] for d in device_rows), default=None)
    meta = {"path": analysis.source.path, "sha256": analysis.source.sha256, "rank": rank, "host": host, "gpu": analysis.device.name,
            "format": analysis.source.format, "profiler": analysis.source.profiler, "size_bytes": analysis.source.size_bytes,
            "launches": int(kernels["launches"].sum() or 0) if kernels.height else 0,
            "kernel_ns": float(kernels["duration_ns"].sum() or 0) if kernels.height else 0.0, "span_ns": span,
            "step_median_ns": step_median, "step_p99_ns": steps.get("p99_ns"), "steps": steps.get("count", steps.get("steps")),
            "verdict": (timeline.verdict or {}).get("verdict") if timeline is not None and timeline.verdict else None}
    return {"meta": pl.DataFrame([meta], schema=META), "kernels": pl.DataFrame(rows, schema=KERNELS),
            "devices": pl.DataFrame(device_rows, schema=DEVICES), "nvtx": pl.DataFrame(nvtx, schema=NVTX)}


def rank_from_name(path: str, pattern: str | None) -> int | None:
    """Return the rank in a file name: the first group of `pattern`, else the last number after `rank`, `r` or `_`."""
    name = path.rsplit("/", 1)[-1]
    if pattern:
        match = re.search(pattern, name)
        return int(match.group(1)) if match and match.groups() and (match.group(1) or "").isdigit() else None
    match = re.search(r"(?i)(?:rank|proc|worker|gpu|node)[_\-.]?(\d+)", name)
    return int(match.group(1)) if match else None


@dataclass
class FleetResult:
    """The fleet view: per-kernel totals across ranks, per-rank breakdowns, stragglers, and the files that failed."""

    files: pl.DataFrame  # meta of every summarised file, by rank then path
    kernels: pl.DataFrame  # per kernel: ranks, launches, total_ns, mean/median/max per rank, imbalance, slowest_rank
    ranks: pl.DataFrame  # per rank: shares, step time, kernel time, files
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    straggler_metric: str | None = None  # the measures checked, comma-separated (step_median_ns, kernel_ns)
    k: float = DEFAULT_K
    per_rank_kernels: pl.DataFrame | None = None  # rank × kernel totals, for the heatmap
    notes: list[str] = field(default_factory=list)


def _concat(parts: list[pl.DataFrame], schema: pl.Schema) -> pl.DataFrame:
    return pl.concat(parts, how="vertical") if parts else pl.DataFrame(schema=schema)


def reduce_fleet(summaries: list[dict[str, pl.DataFrame]], failures: list[dict[str, Any]] | None = None, k: float = DEFAULT_K) -> FleetResult:
    """Return the fleet view of per-file summaries. Files without a rank are numbered after the highest rank seen, in
    path order, so the result does not depend on the order summaries arrive in."""
    metas = _concat([s["meta"] for s in summaries], META).sort("path")
    known = [r for r in metas["rank"].to_list() if r is not None]
    next_rank = (max(known) + 1) if known else 0
    assigned = []
    for rank in metas["rank"].to_list():
        if rank is None:
            rank, next_rank = next_rank, next_rank + 1
        assigned.append(rank)
    metas = metas.with_columns(pl.Series("rank", assigned, dtype=pl.Int64)).sort("rank", "path")
    # Keyed by path: two ranks may write byte-identical exports (same sha256), and both count.
    rank_of = dict(zip(metas["path"].to_list(), metas["rank"].to_list(), strict=True))

    def tagged(table: str) -> pl.DataFrame:
        parts = [s[table].with_columns(pl.lit(rank_of[s["meta"]["path"][0]], dtype=pl.Int64).alias("rank")) for s in summaries]
        return _concat(parts, schema_of({**TABLES[table], "rank": pl.Int64}))

    kernels, devices = tagged("kernels"), tagged("devices")
    per_rank = kernels.group_by("rank", "kernel_name").agg(pl.col("short_name").first(), pl.col("launches").sum(), pl.col("total_ns").sum())
    ranks_count = metas["rank"].n_unique()
    fleet_kernels = (per_rank.group_by("kernel_name").agg(
        pl.col("short_name").first(), pl.len().alias("ranks"), pl.col("launches").sum(), pl.col("total_ns").sum(),
        pl.col("total_ns").mean().alias("mean_per_rank_ns"), pl.col("total_ns").median().alias("median_per_rank_ns"),
        pl.col("total_ns").max().alias("max_per_rank_ns"), pl.col("rank").sort_by("total_ns").last().alias("slowest_rank"))
        .with_columns(pl.when(pl.col("median_per_rank_ns") > 0).then(pl.col("max_per_rank_ns") / pl.col("median_per_rank_ns")).alias("imbalance"),
                      (pl.col("ranks") < ranks_count).alias("missing_on_some_ranks"))
        .sort(["total_ns", "kernel_name"], descending=[True, False]))
    by_rank_devices = devices.group_by("rank").agg(
        pl.len().alias("gpus"), pl.col("span_ns").max(),
        *[((pl.col(c) * pl.col("span_ns")).sum() / pl.col("span_ns").sum()).alias(c) for c in ("compute_pct", "communication_pct", "copy_pct", "unified_memory_pct", "idle_pct", "busy_pct")],
        pl.col("gap_count").sum(), pl.col("largest_gap_ns").max())
    ranks = (metas.group_by("rank").agg(pl.len().alias("files"), pl.col("path").first(), pl.col("host").first(), pl.col("gpu").first(),
                                        pl.col("launches").sum(), pl.col("kernel_ns").sum(), pl.col("step_median_ns").mean(),
                                        pl.col("step_p99_ns").max(), pl.col("verdict").first())
             .join(by_rank_devices, on="rank", how="left").sort("rank"))
    # Both measures are checked: a rank slow in its GPU work (kernel time) need not be slow in its host-side steps,
    # and a rank waiting on the host shows in its step time alone.
    metrics = ["step_median_ns", "kernel_ns"] if ranks["step_median_ns"].null_count() == 0 and ranks.height else ["kernel_ns"]
    flagged: dict[int, dict[str, Any]] = {}
    notes = []
    # Ranks of one job run the same kernels; files of different workloads have nothing to straggle behind.
    shared = reduced(fleet_kernels["ranks"].max()) if fleet_kernels.height else 0
    if ranks_count >= 3 and shared is not None and shared < ranks_count / 2:
        notes.append(f"no straggler test: no kernel runs on half of the {ranks_count} files (at most {shared}), so they do not look like "
                     f"ranks of one job")
        metrics = []
    for metric in metrics:
        for found in _stragglers(ranks, metric, k):
            flagged.setdefault(found["rank"], found)
    stragglers = sorted(flagged.values(), key=lambda s: (-(s["excess_pct"] or 0.0), s["rank"]))
    return FleetResult(metas, fleet_kernels, ranks, stragglers, sorted(failures or [], key=lambda f: f["path"]), ", ".join(metrics), k,
                       per_rank.sort("rank", "kernel_name"), notes)


def _stragglers(ranks: pl.DataFrame, metric: str, k: float) -> list[dict[str, Any]]:
    """Return the ranks above median + k·MAD (scaled) of `metric`, slowest first, with the numbers that decided."""
    values = ranks.select("rank", metric).drop_nulls()
    if values.height < 3:
        return []  # two ranks have no majority to stand out from
    series = values[metric]
    median = float(series.median())  # type: ignore[arg-type]
    if median <= 0:
        return []  # most ranks did none of this work (logs, summaries): nothing to stand out from
    mad = float((series - median).abs().median()) * MAD_SCALE  # type: ignore[arg-type]
    # With identical ranks MAD is 0: a rank 1 % slower would count; 1 % of the median is the floor of the spread.
    spread = max(mad, 0.01 * median)
    threshold = median + k * spread
    found = []
    for rank, value in values.iter_rows():
        if value > threshold:
            found.append({"rank": rank, "metric": metric, "value": value, "median": median, "mad": mad, "threshold": threshold,
                          "excess_pct": 100.0 * (value - median) / median, "robust_z": (value - median) / spread})
    return sorted(found, key=lambda s: -s["value"])


@dataclass
class FleetDiff:
    """Two fleets compared kernel by kernel (time per rank: the kernel's total over the files where it ran, divided by
    their number) and as a whole (median kernel time per rank)."""

    kernels: pl.DataFrame  # kernel_name, short_name, before_ns, after_ns, change_pct, share_pct (of the new fleet's time)
    total: dict[str, Any]
    regressions: list[str] = field(default_factory=list)


def compare_fleets(before: FleetResult, after: FleetResult, fail_on_regression_pct: float | None = None, min_share_pct: float = 1.0) -> FleetDiff:
    """Return how per-rank kernel time changed between two fleets; with a threshold, the regressions beyond it (kernels
    under `min_share_pct` of the new fleet's time never count)."""
    columns = ["kernel_name", "short_name", "mean_per_rank_ns"]
    joined = (before.kernels.select(columns).rename({"mean_per_rank_ns": "before_ns"})
              .join(after.kernels.select(columns).rename({"mean_per_rank_ns": "after_ns", "short_name": "short_after"}), on="kernel_name", how="full", coalesce=True)
              .with_columns(pl.coalesce("short_name", "short_after").alias("short_name")).drop("short_after"))
    total_after = float(joined["after_ns"].sum() or 0.0)
    kernels = joined.with_columns(
        pl.when(pl.col("before_ns") > 0).then(100.0 * (pl.col("after_ns") - pl.col("before_ns")) / pl.col("before_ns")).alias("change_pct"),
        (100.0 * pl.col("after_ns") / total_after if total_after else pl.lit(None, dtype=pl.Float64)).alias("share_pct"),
    ).sort(["after_ns", "kernel_name"], descending=[True, False], nulls_last=True)
    median_before = reduced(before.ranks["kernel_ns"].median()) if before.ranks.height else None
    median_after = reduced(after.ranks["kernel_ns"].median()) if after.ranks.height else None
    total = {"ranks_before": before.ranks.height, "ranks_after": after.ranks.height,
             "median_kernel_ns_per_rank_before": median_before, "median_kernel_ns_per_rank_after": median_after,
             "change_pct": 100.0 * (median_after - median_before) / median_before if median_before and median_after is not None else None}
    regressions = []
    if fail_on_regression_pct is not None:
        if total["change_pct"] is not None and total["change_pct"] > fail_on_regression_pct:
            regressions.append(f"median kernel time per rank grew {total['change_pct']:.1f}% (> {fail_on_regression_pct:g}%)")
        for k in kernels.filter((pl.col("change_pct") > fail_on_regression_pct) & (pl.col("share_pct") >= min_share_pct)).iter_rows(named=True):
            regressions.append(f"{k['short_name']}: {k['change_pct']:.1f}% more time per rank ({k['share_pct']:.1f}% of the new fleet's kernel time)")
    return FleetDiff(kernels, total, regressions)


def result_from_record(record: dict[str, Any]) -> FleetResult:
    """Return the FleetResult that a saved `traceview fleet --format json` holds (its `fleet` object)."""
    fleet = record["fleet"]

    def frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
        return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()

    return FleetResult(frame(fleet["files"]), frame(fleet["kernels"]), frame(fleet["ranks"]), fleet["stragglers"], fleet["failures"],
                       fleet.get("straggler_metric"), fleet.get("straggler_k", DEFAULT_K), frame(fleet.get("rank_kernels", [])),
                       list(fleet.get("notes", [])))


def fleet_analysis(result: FleetResult, source: Source) -> Analysis:
    """Return an Analysis that carries a fleet result (for the dashboard, which shows one Analysis at a time)."""
    gpus = sorted({g for g in result.files["gpu"].to_list() if g}) if "gpu" in result.files.columns else []
    device = Device(", ".join(gpus) or None, None, None, "from the fleet's files", {key: Peak(None, None) for key in PEAK_KEYS})
    launches = _without_launches(device)
    return Analysis(source, device, launches, rank_kernels(launches), [], kind="fleet", detail=result)


def join_ncu_verdicts(result: FleetResult, ncu: Analysis) -> tuple[FleetResult, int]:
    """Return the fleet with Nsight Compute's verdict per kernel (bound, label, % of roof, recommendation) joined once,
    as `analyze --ncu` joins them: by normalised name, else by the bare function name where it is unique on both
    sides; and how many fleet kernels matched."""
    columns = {"bound": "ncu_bound", "label": "ncu_label", "roof_pct": "ncu_roof_pct", "recommendation": "ncu_recommendation"}
    by_name: dict[str, dict[str, Any]] = {}
    by_function: dict[str, list[dict[str, Any]]] = {}
    for ncu_row in ncu.kernels.iter_rows(named=True):
        by_name.setdefault(normalise_kernel_name(ncu_row["kernel_name"] or ""), ncu_row)
        by_function.setdefault(short_kernel_name(ncu_row["kernel_name"] or ""), []).append(ncu_row)
    functions = [short_kernel_name(name or "") for name in result.kernels["kernel_name"].to_list()]
    unique_here = {f for f in functions if functions.count(f) == 1}
    joined = []
    for name, function in zip(result.kernels["kernel_name"].to_list(), functions, strict=True):
        row: dict[str, Any] | None = by_name.get(normalise_kernel_name(name or ""))
        if row is None and function in unique_here and len(by_function.get(function, [])) == 1:
            row = by_function[function][0]  # one kernel of that function: the same kernel under another name
        joined.append({target: (row or {}).get(source) for source, target in columns.items()})
    verdicts = pl.DataFrame(joined, schema={"ncu_bound": pl.String, "ncu_label": pl.String, "ncu_roof_pct": pl.Float64, "ncu_recommendation": pl.String})
    kernels = pl.concat([result.kernels, verdicts], how="horizontal")
    matched = int(kernels["ncu_bound"].is_not_null().sum())
    return FleetResult(result.files, kernels, result.ranks, result.stragglers, result.failures, result.straggler_metric, result.k,
                       result.per_rank_kernels, result.notes), matched
