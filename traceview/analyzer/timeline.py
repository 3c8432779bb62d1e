"""Whole-run analysis of Nsight Systems data: per-kernel totals, GPU busy and idle gaps, copies, syncs, NVTX. Pure.

A device is busy while any kernel, memcpy or memset runs on it; busy time is the union of those intervals, idle gaps
are the holes in that union between the device's first and last activity. With Nsight Compute results joined by
normalised kernel name, each kernel's verdict and recoverable fraction carry over onto its whole-run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceview.analyzer.names import normalise_kernel_name
from traceview.analyzer.roofline import Bound
from traceview.parsers.ncu_csv import short_kernel_name

TINY_KERNEL_NS = 10_000  # kernels under 10 us are dominated by launch overhead unless launched back to back
BLOCKING_API = re.compile(
    r"^(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|cudaMemcpy(2D|3D)?(ToSymbol|FromSymbol)?|"
    r"cuCtxSynchronize|cuStreamSynchronize|cuEventSynchronize|cuMemcpy(HtoD|DtoH|DtoD)?(_v2)?)(_v\d+)?$"
)
NO_NCU_REASON = "no Nsight Compute data joined for this kernel: run `traceview analyze run.sqlite --ncu kernels.csv`"
NO_NCU_RECOMMENDATION = "profile the top kernels with `ncu --set full -k NAME` and join the export with --ncu for a verdict"


@dataclass(frozen=True)
class Timeline:
    """Timeline findings; times in ns, shares in %."""

    devices: list[dict[str, Any]]
    memcpy: list[dict[str, Any]]
    sync: dict[str, Any]
    tiny_kernels: dict[str, Any]
    nvtx: list[dict[str, Any]]
    findings: list[str] = field(default_factory=list)
    unmatched_kernels: list[str] = field(default_factory=list)
    matched_kernels: int = 0


def kernel_summary(kernels: pl.DataFrame, names: dict[int, str]) -> pl.DataFrame:
    """Return one row per kernel name: launches, total/avg/median/min/max time (ns), per-device launches and time."""
    durations = kernels.lazy().select("name_id", "device_id", (pl.col("end_ns") - pl.col("start_ns")).alias("d"))
    per_device = durations.group_by("name_id", "device_id").agg(pl.len().alias("launches"), pl.col("d").sum().alias("duration_ns"))
    summary = durations.group_by("name_id").agg(
        pl.len().alias("launches"),
        pl.col("d").sum().cast(pl.Float64).alias("duration_ns"),
        pl.col("d").mean().alias("avg_duration_ns"),
        pl.col("d").median().alias("median_duration_ns"),
        pl.col("d").min().cast(pl.Float64).alias("min_duration_ns"),
        pl.col("d").max().cast(pl.Float64).alias("max_duration_ns"),
    )
    devices = per_device.sort("device_id").group_by("name_id").agg(
        pl.struct(pl.col("device_id"), pl.col("launches"), pl.col("duration_ns")).alias("devices")
    )
    frame = summary.join(devices, on="name_id", how="left").collect()
    full = {i: names.get(i, f"<string {i}>") for i in frame["name_id"].to_list()}
    short = {i: short_kernel_name(name) for i, name in full.items()}
    total = float(frame["duration_ns"].sum() or 0)
    return frame.with_columns(
        pl.col("name_id").replace_strict(full, default=None, return_dtype=pl.String).alias("kernel_name"),
        pl.col("name_id").replace_strict(short, default=None, return_dtype=pl.String).alias("short_name"),
        (100.0 * pl.col("duration_ns") / total if total else pl.lit(None, dtype=pl.Float64)).alias("share_pct"),
    ).drop("name_id")


def join_ncu(summary: pl.DataFrame, ncu_kernels: pl.DataFrame | None) -> tuple[pl.DataFrame, list[str], int]:
    """Carry Nsight Compute verdicts onto whole-run kernels; return (kernels ranked, unmatched ncu names, matched count)."""
    verdict_columns = ["bound", "label", "binding_roof", "precision", "reason", "recommendation", "recoverable_source",
                       "roof_pct", "compute_pct", "memory_pct", "achieved_flop_per_s", "arithmetic_intensity"]
    rows = []
    ncu_rows: dict[str, dict[str, Any]] = {}
    ncu_short: dict[str, list[dict[str, Any]]] = {}
    if ncu_kernels is not None:
        for row in ncu_kernels.iter_rows(named=True):
            ncu_rows[normalise_kernel_name(row["kernel_name"])] = row
            ncu_short.setdefault(row["short_name"], []).append(row)
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
        if ncu is not None:
            matched += 1
            used.add(ncu["kernel_name"])
            fraction = (ncu["recoverable_ns"] / ncu["duration_ns"]) if ncu.get("recoverable_ns") is not None and ncu.get("duration_ns") else None
            record.update({c: ncu.get(c) for c in verdict_columns})
            record["recoverable_ns"] = row["duration_ns"] * fraction if fraction is not None else None
        else:
            record.update({c: None for c in verdict_columns})
            record.update(bound=Bound.UNKNOWN.value, label="No ncu data", reason=NO_NCU_REASON,
                          recommendation=NO_NCU_RECOMMENDATION, recoverable_ns=None)
        rows.append(record)
    if not rows:
        empty = {"rank": pl.Int64, "kernel_name": pl.String, "short_name": pl.String, "launches": pl.Int64, "duration_ns": pl.Float64,
                 "share_pct": pl.Float64, "recoverable_ns": pl.Float64, **{c: pl.Float64 if c.endswith(("pct", "per_s", "intensity")) else pl.String for c in verdict_columns}}
        return pl.DataFrame(schema=empty), [r["kernel_name"] for r in ncu_rows.values()], 0
    frame = pl.DataFrame(rows, infer_schema_length=None)
    ranked = frame.sort(["recoverable_ns", "duration_ns"], descending=True, nulls_last=True, maintain_order=True).with_row_index("rank", offset=1)
    unmatched = [name for name in ncu_rows.values() if name["kernel_name"] not in used] if ncu_kernels is not None else []
    return ranked.with_columns(pl.col("rank").cast(pl.Int64)), [u["kernel_name"] for u in unmatched], matched


def _sorted_by_start(frame: pl.DataFrame) -> pl.DataFrame:
    # Exports are nearly always in start order already: checking is O(n), sorting is not.
    return frame if frame["start_ns"].is_sorted() else frame.sort("start_ns")


def device_activity(kernels: pl.DataFrame, memops: pl.DataFrame, run_start_ns: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return (per device: span, busy and idle ns, busy %, idle gaps; tiny-kernel statistics over all devices).

    One ordered pass per device: kernels and copies are merged by start time (both already sorted), busy time is the
    union of their intervals (a running maximum of end times), gaps are the holes in it.
    """
    devices: list[dict[str, Any]] = []
    tiny_parts: list[pl.DataFrame] = []
    device_ids = sorted(set(kernels["device_id"].unique().drop_nulls().to_list()) | set(memops["device_id"].unique().drop_nulls().to_list()))
    single = len(device_ids) == 1
    for device in device_ids:
        own = kernels.select("start_ns", "end_ns") if single else kernels.filter(pl.col("device_id") == device).select("start_ns", "end_ns")
        own = _sorted_by_start(own)
        copies = _sorted_by_start(memops.filter(pl.col("device_id") == device).select("start_ns", "end_ns"))
        merged = own.merge_sorted(copies, key="start_ns") if copies.height else own
        if merged.height == 0:
            continue
        gaps = merged.select(
            (pl.col("start_ns") - pl.col("end_ns").cum_max().shift(1)).alias("gap"),
            pl.col("end_ns").cum_max().shift(1).alias("covered_until"),
        ).filter(pl.col("gap") > 0)
        span = int(merged["end_ns"].max() - merged["start_ns"].min())  # type: ignore[operator]
        idle = int(gaps["gap"].sum() or 0)
        largest = gaps.row(int(gaps["gap"].arg_max()), named=True) if gaps.height else None  # type: ignore[arg-type]
        devices.append({
            "device_id": device,
            "span_ns": span,
            "busy_ns": span - idle,
            "idle_ns": idle,
            "busy_pct": 100.0 * (span - idle) / span if span else None,
            "idle_gaps": {
                "count": gaps.height,
                "total_ns": idle,
                "over_10us": int((gaps["gap"] >= 10_000).sum()),
                "over_1ms": int((gaps["gap"] >= 1_000_000).sum()),
                "largest_ns": int(largest["gap"]) if largest else 0,
                "largest_at_ns": int(largest["covered_until"] - run_start_ns) if largest else None,
            },
        })
        if own.height:
            tiny_parts.append(own.select(
                (pl.col("end_ns") - pl.col("start_ns")).alias("d"),
                (pl.col("start_ns") - pl.col("end_ns").shift(1)).clip(lower_bound=0).alias("gap_before"),
            ).filter(pl.col("d") < TINY_KERNEL_NS))
    launches = kernels.height
    tiny = pl.concat(tiny_parts) if tiny_parts else pl.DataFrame(schema={"d": pl.Int64, "gap_before": pl.Int64})
    tiny_stats: dict[str, Any] = {
        "threshold_ns": TINY_KERNEL_NS,
        "launches": tiny.height,
        "share_of_launches_pct": 100.0 * tiny.height / launches if launches else None,
        "duration_ns": int(tiny["d"].sum() or 0),
        "median_duration_ns": float(tiny["d"].median()) if tiny.height else None,  # type: ignore[arg-type]
        "median_gap_before_ns": float(tiny["gap_before"].median()) if tiny["gap_before"].drop_nulls().len() else None,  # type: ignore[arg-type]
    }
    return devices, tiny_stats


def memcpy_summary(memops: pl.DataFrame) -> list[dict[str, Any]]:
    """Return per operation (memcpy direction, memset): count, bytes, time (ns) and the pageable-host share."""
    if memops.height == 0:
        return []
    pageable = (pl.col("src_kind") == "Pageable") | (pl.col("dst_kind") == "Pageable")
    grouped = memops.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("d"), pageable.fill_null(False).alias("pageable")).group_by("operation").agg(
        pl.len().alias("count"), pl.col("bytes").sum().alias("bytes"), pl.col("d").sum().alias("duration_ns"),
        pl.col("pageable").sum().alias("pageable_count"), pl.col("d").filter(pl.col("pageable")).sum().alias("pageable_ns"),
    ).sort("duration_ns", descending=True)
    return grouped.to_dicts()


def sync_summary(sync: pl.DataFrame, api: pl.DataFrame) -> dict[str, Any]:
    """Return GPU-side synchronisation time by type and blocking CUDA API calls (count, ns), top calls first."""
    by_type = (sync.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("d")).group_by("sync_type")
               .agg(pl.len().alias("count"), pl.col("d").sum().alias("duration_ns")).sort("duration_ns", descending=True).to_dicts())
    blocking = api.filter(pl.col("name").str.contains(BLOCKING_API.pattern)).with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("d"))
    calls = blocking.group_by("name").agg(pl.len().alias("count"), pl.col("d").sum().alias("duration_ns")).sort("duration_ns", descending=True)
    return {
        "by_type": by_type,
        "blocking_api_count": blocking.height,
        "blocking_api_ns": int(blocking["d"].sum() or 0),
        "blocking_api_calls": calls.head(10).to_dicts(),
        "api_calls": api.height,
    }


def nvtx_summary(nvtx: pl.DataFrame, top: int = 15) -> list[dict[str, Any]]:
    """Return the NVTX ranges by total (CPU-side) time: name, kind, count, total and mean ns."""
    ranges = nvtx.filter(pl.col("end_ns").is_not_null() & (pl.col("kind") != "Mark"))
    if ranges.height == 0:
        return []
    return (ranges.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("d"))
            .group_by("text", "kind").agg(pl.len().alias("count"), pl.col("d").sum().alias("total_ns"), pl.col("d").mean().alias("mean_ns"))
            .sort("total_ns", descending=True).head(top).to_dicts())


def timeline_findings(devices: list[dict[str, Any]], memcpy: list[dict[str, Any]], sync: dict[str, Any], tiny: dict[str, Any]) -> list[str]:
    """Return one sentence per notable finding, each with the time it costs."""
    found = []
    for device in devices:
        gaps = device["idle_gaps"]
        if device["busy_pct"] is not None and device["busy_pct"] < 80 and device["span_ns"] > 0:
            found.append(
                f"GPU {device['device_id']} idle {100 - device['busy_pct']:.0f}% of its active span ({device['idle_ns'] / 1e6:.2f} ms in {gaps['count']} gaps; "
                f"largest {gaps['largest_ns'] / 1e6:.3f} ms at {(gaps['largest_at_ns'] or 0) / 1e6:.2f} ms into the run): the CPU is not feeding it — "
                "look at host work, synchronisation and launch overhead in those gaps")
    for op in memcpy:
        if op["pageable_count"]:
            found.append(f"{op['pageable_count']} {op['operation']} copies use pageable host memory ({op['pageable_ns'] / 1e6:.3f} ms): pin it "
                         "(cudaHostAlloc / pin_memory=True) so copies run at full speed and can overlap")
    if sync.get("blocking_api_ns"):
        found.append(f"{sync['blocking_api_count']} blocking CUDA API calls (synchronize, synchronous memcpy) took {sync['blocking_api_ns'] / 1e6:.2f} ms of CPU time")
    if tiny.get("launches") and tiny["share_of_launches_pct"] >= 50 and (tiny.get("median_gap_before_ns") or 0) >= (tiny.get("median_duration_ns") or 0):
        found.append(f"{tiny['share_of_launches_pct']:.0f}% of launches run under 10 us and wait longer between launches than they run: "
                     "launch-bound — capture them in a CUDA graph or fuse them")
    return found
