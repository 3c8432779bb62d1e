"""The analysis of metrics polled over time (nvidia-smi, a serving engine's Prometheus counters): per metric its
statistics — and for a cumulative counter its rate — and findings about what the run was held by: a GPU idle much
of the time, clocks held down, requests queued behind a full batch, a KV cache full enough to preempt."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from traceview.analyzer.analysis import Analysis, Device, Source, _table_peaks, _without_launches
from traceview.analyzer.devices import lookup_gpu
from traceview.analyzer.ranking import rank_kernels
from traceview.numbers import reduced

if TYPE_CHECKING:
    from traceview.analyzer.kinds import AnalysisOptions  # kinds imports this module's analysis

LOW_UTILIZATION_PCT = 50.0
KV_CACHE_FULL = 0.9


@dataclass(frozen=True)
class MetricsRun:
    """`metrics`: per device and metric the samples, mean, p50, p90, min, max (in its unit), and for a cumulative
    counter (`*_total`, never decreasing) its rate per second over the run; `findings` with their numbers;
    `series` the samples themselves (METRICS frame, for the figure)."""

    metrics: list[dict[str, Any]]
    duration_s: float
    findings: list[dict[str, Any]] = field(default_factory=list)
    series: pl.DataFrame = field(default_factory=pl.DataFrame)


def _stats(frame: pl.DataFrame) -> list[dict[str, Any]]:
    grouped = frame.filter(pl.col("value").is_not_null()).sort("time_s").group_by(["device", "metric"], maintain_order=True).agg(
        pl.col("unit").drop_nulls().first(), pl.len().alias("samples"), pl.col("value").mean().alias("mean"),
        pl.col("value").median().alias("p50"), pl.col("value").quantile(0.9, "linear").alias("p90"), pl.col("value").min().alias("min"),
        pl.col("value").max().alias("max"), pl.col("value").first().alias("first"), pl.col("value").last().alias("last"),
        (pl.col("value").diff().fill_null(0) >= 0).all().alias("monotonic"), pl.col("time_s").first().alias("t0"), pl.col("time_s").last().alias("t1"))
    out = []
    for row in grouped.iter_rows(named=True):
        cumulative = row["monotonic"] and (row["metric"].endswith("_total") or row["metric"].endswith("_total_time")) and row["last"] > row["first"]
        span = row["t1"] - row["t0"]
        row["rate_per_s"] = (row["last"] - row["first"]) / span if cumulative and span > 0 else None
        row["cumulative"] = bool(cumulative)
        out.append(row)
    return out


def _by(metrics: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((m for m in metrics if m["metric"].removeprefix("vllm:") == name), None)


def _findings(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    busy = _by(metrics, "utilization.gpu")
    if busy and busy["mean"] < LOW_UTILIZATION_PCT:
        found.append({"rule": "gpu_idle", "message": f"the GPU was busy {busy['mean']:.0f}% of the time on average (p50 {busy['p50']:.0f}%): "
                      "the host, the scheduler or the request rate held it back"})
    for m in metrics:
        if m["metric"].startswith(("clocks_event_reasons.", "clocks_throttle_reasons.")) and m["unit"] == "active" and m["mean"] > 0:
            reason = m["metric"].split(".", 1)[1]
            found.append({"rule": "clocks_held", "message": f"clock event {reason} was active in {100 * m['mean']:.0f}% of the samples: "
                          "the GPU ran below its clocks then (power, thermal or a hardware slowdown)"})
    used, total = _by(metrics, "memory.used"), _by(metrics, "memory.total")
    if used and total and total["max"]:
        share = 100 * used["max"] / total["max"]
        if share > 90:
            found.append({"rule": "memory_full", "message": f"GPU memory was {share:.0f}% used at its peak ({used['max']:,.0f} of {total['max']:,.0f} "
                          f"{used['unit'] or ''}): serving engines reserve it up front (vLLM's --gpu-memory-utilization), so this is the KV cache's pool"})
    running, waiting = _by(metrics, "num_requests_running"), _by(metrics, "num_requests_waiting")
    if running and waiting and waiting["max"] > 0:
        found.append({"rule": "requests_queued", "message": f"up to {waiting['max']:,.0f} requests waited (mean {waiting['mean']:,.0f}) while at most "
                      f"{running['max']:,.0f} ran: the batch was full (--max-num-seqs or the KV cache), so time to first token is queueing"})
    cache = _by(metrics, "gpu_cache_usage_perc")
    if cache and cache["max"] >= KV_CACHE_FULL:
        found.append({"rule": "kv_cache_full", "message": f"the KV cache reached {100 * cache['max']:.0f}% of its blocks: sequences are preempted or "
                      "requests wait for blocks — more memory for the cache, a quantized KV cache, or fewer concurrent sequences"})
    preempted = _by(metrics, "num_preemptions_total")
    if preempted and preempted["last"] > preempted["first"]:
        found.append({"rule": "preemptions", "message": f"{preempted['last'] - preempted['first']:,.0f} sequences were preempted (recomputed or swapped)"})
    forward, scheduler = _by(metrics, "model_forward_total_time"), _by(metrics, "scheduler_total_time")
    if forward and scheduler and forward["rate_per_s"] is not None and scheduler["rate_per_s"] is not None:
        found.append({"rule": "engine_time", "message": f"the model's forward passes took {100 * forward['rate_per_s']:.0f}% of the wall time and the "
                      f"scheduler {100 * scheduler['rate_per_s']:.1f}%"})
    tokens = _by(metrics, "generation_tokens_total")
    if tokens and tokens["rate_per_s"]:
        found.append({"rule": "generation_rate", "message": f"{tokens['rate_per_s']:,.0f} generated tokens/s over the run (from the counter)"})
    return found


def analyze_metrics(series: pl.DataFrame, source: Source, options: AnalysisOptions) -> Analysis:
    """Return the analysis of polled metrics (MetricsRun in `detail`)."""
    metrics = _stats(series)
    duration = (reduced(series["time_s"].max()) or 0.0) - (reduced(series["time_s"].min()) or 0.0) if series.height else 0.0
    spec = lookup_gpu(options.gpu) if options.gpu else None
    device = Device(spec.name if spec else None, spec.compute_capability if spec else None, spec,
                    f"chosen with --gpu {options.gpu}" if spec else "the metrics name no GPU model; use --gpu", _table_peaks(spec))
    run = MetricsRun(metrics, duration, _findings(metrics), series)
    launches = _without_launches(device)  # polled metrics hold no kernels
    return Analysis(source, device, launches, rank_kernels(launches), [], kind="gpu-metrics", detail=run)
