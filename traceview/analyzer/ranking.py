"""Aggregate launches by kernel name and rank them by recoverable time (most first). Pure polars."""

from __future__ import annotations

import polars as pl

from traceview.analyzer.kernel_kinds import display_names


def _time_weighted_mode(column: str) -> pl.Expr:
    """The value of `column` that covers the most kernel time (launch count when durations are missing)."""
    weight = pl.col("duration_ns").fill_null(1.0)
    return pl.col(column).sort_by(weight.sum().over(["kernel_name", column])).last()


def share_pct(durations: pl.Series, total: float) -> pl.Series:
    """Return each duration's share of `total` in % (null where the duration or the total is unknown), as 100 × time /
    total in Python: polars evaluated the same expression in another order when a frame came in one chunk than in
    two, which varies between runs and moved the last digit (65.12472753693388% or ...389 for one kernel)."""
    return pl.Series("share_pct", [100.0 * d / total if total and d is not None else None for d in durations.to_list()], dtype=pl.Float64)


def rank_kernels(launches: pl.DataFrame) -> pl.DataFrame:
    """Return one row per kernel name: launches, time (ns), verdict and recoverable time, ordered by rank."""
    weight = pl.col("duration_ns").fill_null(1.0)

    def weighted_mean(column: str) -> pl.Expr:
        """Duration-weighted mean over the launches that have the value; null (not NaN) when none has it."""
        present = pl.col(column).is_not_null() & pl.col(column).is_not_nan()
        total_weight = weight.filter(present).sum()
        return pl.when(total_weight > 0).then((pl.col(column) * weight).filter(present).sum() / total_weight)

    main_flop = pl.coalesce(
        *[pl.when(pl.col("precision") == p).then(pl.col(f"{p}_flop")) for p in ("fp64", "fp32", "fp16", "tensor")]
    )
    measured = ~pl.col("launch_failed").fill_null(False)
    duration = pl.col("duration_ns").filter(measured)
    total = launches.filter(measured)["duration_ns"].sum() if launches.height else 0
    grouped = (
        launches.with_columns(main_flop=main_flop)
        .group_by("kernel_name", maintain_order=True)
        .agg(
            pl.col("short_name").first(),
            pl.len().alias("launches"),
            (~measured).sum().cast(pl.Int64).alias("failed_launches"),
            # Failed launches have no time: the kernel's time is that of its measured launches.
            duration.sum().alias("duration_ns"),
            duration.mean().alias("avg_duration_ns"),
            duration.median().alias("median_duration_ns"),
            duration.quantile(0.99).alias("p99_duration_ns"),
            duration.min().alias("min_duration_ns"),
            duration.max().alias("max_duration_ns"),
            duration.null_count().alias("_missing_durations"),
            _time_weighted_mode("bound").alias("bound"),
            _time_weighted_mode("label").alias("label"),
            _time_weighted_mode("binding_roof").alias("binding_roof"),
            _time_weighted_mode("precision").alias("precision"),
            pl.col("reason").sort_by(weight).last().alias("reason"),
            pl.col("recommendation").sort_by(weight).last().alias("recommendation"),
            pl.col("recoverable_source").drop_nulls().first().alias("recoverable_source"),
            pl.col("tensor_warning").drop_nulls().first().alias("tensor_warning"),
            weighted_mean("roof_pct").alias("roof_pct"),
            weighted_mean("compute_pct").alias("compute_pct"),
            weighted_mean("memory_pct").alias("memory_pct"),
            weighted_mean("achieved_flop_per_s").alias("achieved_flop_per_s"),
            pl.col("recoverable_ns").filter(measured).sum().alias("recoverable_ns"),
            pl.col("recoverable_ns").filter(measured).null_count().alias("_missing_recoverable"),
            pl.col("main_flop").sum().alias("_flop"),
            pl.col("main_flop").null_count().alias("_missing_flop"),
            pl.col("dram_bytes").sum().alias("_dram_bytes"),
            pl.col("dram_bytes").null_count().alias("_missing_bytes"),
            pl.col("arithmetic_intensity").mean().alias("_mean_intensity"),
        )
    )
    def complete(name: str) -> pl.Expr:
        return pl.col(name) == 0

    grouped = grouped.with_columns(
        pl.when(complete("_missing_durations") & (pl.col("launches") > pl.col("failed_launches"))).then(pl.col("duration_ns")).alias("duration_ns"),
        pl.when(complete("_missing_recoverable") & (pl.col("launches") > pl.col("failed_launches"))).then(pl.col("recoverable_ns")).alias("recoverable_ns"),
        # Intensity of a kernel = its FLOPs over its DRAM bytes, summed over launches (ratio of sums).
        pl.when(complete("_missing_flop") & complete("_missing_bytes") & (pl.col("_dram_bytes") > 0))
        .then(pl.col("_flop") / pl.col("_dram_bytes"))
        .otherwise(pl.col("_mean_intensity"))
        .alias("arithmetic_intensity"),
    )
    grouped = grouped.with_columns(share_pct(grouped["duration_ns"], float(total)))
    # Names that tell apart the instantiations of one function (four cuBLAS `kernel<…>` GEMVs), in every output.
    grouped = grouped.with_columns(pl.Series("short_name", display_names(grouped["kernel_name"].fill_null("").to_list(),
                                                                         grouped["short_name"].fill_null("").to_list()), dtype=pl.String))
    ranked = grouped.sort(
        ["recoverable_ns", "duration_ns", "launches"], descending=True, nulls_last=True, maintain_order=True
    ).with_row_index("rank", offset=1)
    return ranked.with_columns(pl.col("rank").cast(pl.Int64)).drop(pl.selectors.starts_with("_"))
