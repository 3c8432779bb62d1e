"""Steps in an Nsight Compute export (a decode step, a solver iteration): the kernels of one step summed, for the
measured bytes per step — per token, for a decode step — and, with the weights' size, what is read beyond them. Pure.

ncu profiles launches one at a time (serialised, caches flushed by default), so a step's time here is the sum of its
kernels' durations — GPU time without launch gaps — and its traffic the sum of their DRAM bytes. One token per
sequence per step; with a batch, divide the bytes per step by the batch size yourself.
"""

from __future__ import annotations

from typing import Any

import polars as pl

MIN_REPEATS = 2
MIN_COVERAGE = 0.8  # the repeating sequence must cover this share of the launches to be called a step


def find_period(names: list[str]) -> int | None:
    """Return the smallest number of launches after which the kernel sequence repeats (at least twice, covering 80 %
    of the launches, two or more distinct kernels per period), or None."""
    count = len(names)
    if len(set(names)) < 2:
        return None  # one kernel over and over is not a step of several kernels
    for period in range(2, count // MIN_REPEATS + 1):
        # The next step starts like the first: most periods fail this one comparison without copying anything.
        if names[period] != names[0] or names[2 * period - 1] != names[period - 1]:
            continue
        if len(set(names[:period])) < 2:
            continue
        repeats = 1
        while (repeats + 1) * period <= count and names[repeats * period:(repeats + 1) * period] == names[:period]:
            repeats += 1
        if repeats >= MIN_REPEATS and repeats * period >= MIN_COVERAGE * count:
            return period
    return None


def decode_steps(launches: pl.DataFrame, weight_bytes: float | None = None, peak_bytes_per_s: float | None = None,
                 step_kernels: int | None = None) -> dict[str, Any] | None:
    """Return per-step DRAM bytes and kernel time (medians over whole steps), bytes per token, and with `weight_bytes`
    the traffic beyond the weights (KV cache, activations) and the step's memory-bandwidth utilisation; None when the
    export shows no repeating step and none was given."""
    measured = launches.filter(~pl.col("launch_failed").fill_null(False)).sort("launch_id", "process_id", nulls_last=True)
    names = measured["kernel_name"].fill_null("").to_list()
    source = f"--step-kernels {step_kernels}" if step_kernels else "repeating kernel sequence"
    period = step_kernels or find_period(names)
    if not period or measured.height < period:
        return None
    steps = measured.height // period
    frame = measured.head(steps * period).with_columns((pl.int_range(pl.len()) // period).alias("step"))
    per_step = frame.group_by("step", maintain_order=True).agg(
        pl.col("dram_bytes").sum().alias("dram_bytes"), pl.col("dram_bytes").null_count().alias("missing_bytes"),
        pl.col("duration_ns").sum().alias("duration_ns"), pl.col("duration_ns").null_count().alias("missing_time"))
    complete = per_step.filter((pl.col("missing_bytes") == 0) & (pl.col("missing_time") == 0))
    record: dict[str, Any] = {
        "source": source, "kernels_per_step": period, "steps": steps, "steps_measured": complete.height,
        "first_kernel": names[0] if names else None, "left_over_launches": measured.height - steps * period,
        "median_duration_ns": None, "dram_bytes_per_step": None, "bytes_per_token": None, "bandwidth_bytes_per_s": None,
        "weight_bytes": weight_bytes, "beyond_weights_bytes": None, "peak_bytes_per_s": peak_bytes_per_s, "mbu_pct": None,
        "tokens_per_s_at_kernel_time": None,
    }
    if complete.height == 0:
        if not step_kernels and not weight_bytes:
            return None  # a repeating sequence without traffic figures says nothing the kernel table does not
        record["note"] = "no step has DRAM bytes and durations for every kernel: collect dram__bytes.sum and gpu__time_duration.sum"
        return record
    duration = float(complete["duration_ns"].median())  # type: ignore[arg-type]
    traffic = float(complete["dram_bytes"].median())  # type: ignore[arg-type]
    record.update(median_duration_ns=duration, dram_bytes_per_step=traffic, bytes_per_token=traffic,
                  bandwidth_bytes_per_s=traffic / (duration / 1e9) if duration else None,
                  tokens_per_s_at_kernel_time=1e9 / duration if duration else None)
    if weight_bytes:
        record["beyond_weights_bytes"] = traffic - weight_bytes
        if traffic < 0.5 * weight_bytes:
            record["note"] = (f"a step reads {traffic / 1e9:.3g} GB, under half the {weight_bytes / 1e9:.3g} GB of weights: the export "
                              f"does not cover whole steps (ncu -c/-k filters?) or --step-kernels is wrong")
    if peak_bytes_per_s and record["bandwidth_bytes_per_s"]:
        record["mbu_pct"] = 100.0 * record["bandwidth_bytes_per_s"] / peak_bytes_per_s
    return record
