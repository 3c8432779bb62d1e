"""NVTX ranges grouped by name, nested as they nest, with the GPU time they launched; repeated steps. Pure.

PyTorch names every op range `aten::linear, seq = 7, op_id = 317126`: grouping drops the parts that change on every
call (`op_id`, `seq`, addresses, long numbers, step and layer numbers) so one row stands for one op. GPU time is
projected the way nsys's `nvtx_gpu_proj_sum` does: a kernel belongs to every range, on the launching thread, that
contains the CUDA call that launched it (matched through correlationId); `gpu_ns` is the sum of those kernels' times.
Depth and parent assume ranges on one thread nest (push/pop ranges always do; start/end ranges usually do).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

_VOLATILE = (
    (re.compile(r"\s*,?\s*\b(op_id|seq|sequence_number|seq_id|fwd_seq|bwd_seq)\s*[=:]\s*-?\d+"), ""),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x…"),
    (re.compile(r"(?i)(?<![a-z])(step|iter|iteration|epoch|batch|layer|layers|token|block|blocks|rank|microbatch|h)([\s_:#=.\[-]*)\d+"), r"\1\2N"),
    (re.compile(r"(?i)(step|iter)#\d+"), r"\1#N"),
    (re.compile(r"\d{4,}"), "N"),
)
# A step is a whole word of the name (`train_step`, `ProfilerStep#N`, `decode`, `forward`), not a framework hook such
# as `FSDP::pre_forward` or an op such as `aten::...`: names with `::` count only when they say step.
STEP_RANGE = re.compile(r"(?i)((^|[^a-z])(step|iteration|iter|forward|decode|prefill|generate|inference)([^a-z]|$)|step)")
_FRAMEWORK_RANGE = re.compile(r"::")
PHASE_PATTERNS = (("prefill", re.compile(r"(?i)prefill|prompt|context")), ("decode", re.compile(r"(?i)decode|generat|token")))
MIN_STEPS = 3
MAX_LISTED_STEPS = 1000


def normalise_range_name(text: str | None) -> str:
    """Return an NVTX range name without the parts that change on every call."""
    if text is None:
        return "<unnamed>"
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return " ".join(text.split()).strip(" ,") or "<unnamed>"


def _depth_and_parent(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return each range's nesting depth (0 = outermost) and the index of its parent (-1 for none), for one thread's
    ranges ordered by start, longer first on ties (range_table sorts them so: millions of ranges, one sort)."""
    rank = np.arange(len(starts))
    depth = np.clip(rank - np.searchsorted(np.sort(ends), starts, side="right"), 0, None)
    parent = np.full(len(starts), -1, dtype=np.int64)
    # Positions grouped by depth, each group in order: a range's parent is the last range one level up before it.
    by_level = np.argsort(depth.astype(np.int32), kind="stable")
    level_bounds = np.searchsorted(depth[by_level], np.arange(int(depth.max(initial=0)) + 2))
    for level in range(1, len(level_bounds) - 1):
        above = by_level[level_bounds[level - 1]:level_bounds[level]]
        here = by_level[level_bounds[level]:level_bounds[level + 1]]
        index = np.searchsorted(above, here) - 1
        parent[here] = np.where(index >= 0, above[np.clip(index, 0, None)], -1)
    return depth.astype(np.int64), parent


def range_table(nvtx: pl.DataFrame, launches: pl.DataFrame) -> pl.DataFrame:
    """Return every NVTX range (marks excluded) with its group name, depth, parent group, and the kernels it launched:
    start_ns, end_ns, tid, group, depth, parent, kernels, gpu_ns."""
    ranges = nvtx.filter((pl.col("kind") != "Mark") & pl.col("end_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns")))
    empty = pl.DataFrame(schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "tid": pl.Int64, "group": pl.String, "depth": pl.Int64,
                                 "parent": pl.String, "kernels": pl.Int64, "gpu_ns": pl.Int64})
    if ranges.height == 0:
        return empty
    # Names repeat millions of times but are few: normalise each distinct name once, attach by a join (a hash join;
    # a per-row dictionary lookup is ten times slower at 10 M rows).
    texts = ranges["text"].unique().drop_nulls()
    groups = pl.DataFrame({"text": texts, "group": [normalise_range_name(t) for t in texts.cast(pl.String).to_list()]},
                          schema={"text": ranges.schema["text"], "group": pl.String})
    ranges = (ranges.select("start_ns", "end_ns", pl.col("tid").fill_null(-1), "text").join(groups, on="text", how="left")
              .select("start_ns", "end_ns", "tid", pl.col("group").fill_null("<unnamed>"))
              .sort(["tid", "start_ns", "end_ns"], descending=[False, False, True]))
    starts, ends, tids = ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy(), ranges["tid"].to_numpy()
    depth = np.zeros(ranges.height, dtype=np.int64)
    parent = np.full(ranges.height, -1, dtype=np.int64)
    kernels = np.zeros(ranges.height, dtype=np.int64)
    gpu = np.zeros(ranges.height, dtype=np.int64)
    calls = (launches.select(pl.col("tid").fill_null(-1), "call_start_ns", (pl.col("end_ns") - pl.col("start_ns")).alias("d"))
             .sort("tid", "call_start_ns") if launches.height else None)
    call_tids = calls["tid"].to_numpy() if calls is not None else np.array([], dtype=np.int64)
    call_starts = calls["call_start_ns"].to_numpy() if calls is not None else np.array([], dtype=np.int64)
    call_time = np.concatenate([[0], np.cumsum(calls["d"].to_numpy())]) if calls is not None else np.zeros(1, dtype=np.int64)
    # One thread's ranges at a time: a contiguous slice after the sort, no copies.
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(tids)) + 1, [len(tids)]])
    for first, last in zip(bounds[:-1], bounds[1:], strict=True):
        own_depth, own_parent = _depth_and_parent(starts[first:last], ends[first:last])
        depth[first:last] = own_depth
        parent[first:last] = np.where(own_parent >= 0, own_parent + first, -1)
        low_call, high_call = np.searchsorted(call_tids, tids[first], "left"), np.searchsorted(call_tids, tids[first], "right")
        if high_call > low_call:
            t = call_starts[low_call:high_call]
            low = np.searchsorted(t, starts[first:last], side="left") + low_call
            high = np.searchsorted(t, ends[first:last], side="right") + low_call
            kernels[first:last], gpu[first:last] = high - low, call_time[high] - call_time[low]
    group = ranges["group"]
    parent_group = group.gather(np.clip(parent, 0, None)).alias("parent")
    return ranges.with_columns(
        pl.Series("depth", depth), pl.when(pl.Series(parent) >= 0).then(parent_group).alias("parent"),
        pl.Series("kernels", kernels, dtype=pl.Int64), pl.Series("gpu_ns", gpu, dtype=pl.Int64))


def group_summary(ranges: pl.DataFrame, top: int = 60) -> list[dict[str, Any]]:
    """Return NVTX groups by CPU time: name, count, cpu_ns, mean_ns, gpu_ns, kernels, depth, parent (the group that
    most often encloses it)."""
    if ranges.height == 0:
        return []
    grouped = ranges.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("d")).group_by("group").agg(
        pl.len().alias("count"), pl.col("d").sum().alias("cpu_ns"), pl.col("d").mean().alias("mean_ns"),
        pl.col("gpu_ns").sum().alias("gpu_ns"), pl.col("kernels").sum().alias("kernels"), pl.col("depth").min().alias("depth"),
        pl.col("parent").drop_nulls().mode().sort().first().alias("parent"),
    ).sort(["cpu_ns", "group"], descending=[True, False]).head(top)
    return [{"name": r["group"], "count": r["count"], "cpu_ns": int(r["cpu_ns"]), "mean_ns": float(r["mean_ns"]), "gpu_ns": int(r["gpu_ns"]),
             "kernels": int(r["kernels"]), "depth": int(r["depth"]), "parent": r["parent"]} for r in grouped.iter_rows(named=True)]


def _step_statistics(durations: np.ndarray, gpu: np.ndarray | None = None) -> dict[str, Any]:
    median = float(np.median(durations))
    p99 = float(np.quantile(durations, 0.99))
    result: dict[str, Any] = {
        "count": len(durations),
        "median_ns": median,
        "p99_ns": p99,
        "min_ns": float(durations.min()),
        "max_ns": float(durations.max()),
        "mean_ns": float(durations.mean()),
        "jitter_pct": 100.0 * (p99 - median) / median if median else None,  # how far the slow tail sits above the typical step
        "first_ns": float(durations[0]),
        "first_vs_median": float(durations[0] / median) if median else None,
        "durations_ns": [int(d) for d in durations[:MAX_LISTED_STEPS]],
    }
    if gpu is not None:
        result["median_gpu_ns"] = float(np.median(gpu))
    return result


def steps_from_nvtx(ranges: pl.DataFrame) -> dict[str, Any] | None:
    """Return per-step times from the outermost repeated NVTX range whose name says step/iteration/forward/decode
    (at least MIN_STEPS of them), with prefill and decode apart where range names tell them apart."""
    if ranges.height == 0:
        return None
    counts = ranges.group_by("group").agg(pl.len().alias("n"), pl.col("depth").min().alias("depth"),
                                          (pl.col("end_ns") - pl.col("start_ns")).sum().alias("cpu"))
    candidates = counts.filter((pl.col("n") >= MIN_STEPS) & pl.col("group").str.contains(STEP_RANGE.pattern)
                               & (~pl.col("group").str.contains(_FRAMEWORK_RANGE.pattern) | pl.col("group").str.contains("(?i)step")))
    candidates = candidates.sort(["depth", "cpu"], descending=[False, True])
    if candidates.height == 0:
        return None
    name = candidates["group"][0]
    chosen = ranges.filter(pl.col("group") == name).sort("start_ns")
    stats = _step_statistics((chosen["end_ns"] - chosen["start_ns"]).to_numpy(), chosen["gpu_ns"].to_numpy())
    phases = {}
    for phase, pattern in PHASE_PATTERNS:
        named = counts.filter(pl.col("group").str.contains(pattern.pattern)).sort(["depth", "cpu"], descending=[False, True])
        if named.height:
            own = ranges.filter(pl.col("group") == named["group"][0]).sort("start_ns")
            phases[phase] = {"name": named["group"][0], **{k: v for k, v in _step_statistics((own["end_ns"] - own["start_ns"]).to_numpy()).items() if k != "durations_ns"}}
    return {"source": "nvtx", "name": name, **stats, "phases": phases if len(phases) == 2 else {}}


def steps_from_kernels(kernels: pl.DataFrame, names: dict[int, str]) -> dict[str, Any] | None:
    """Return per-step times from a repeating kernel sequence on the busiest device: the kernel that occurs at a
    fixed stride (every N launches) the fewest times (at least MIN_STEPS + 1) marks the start of each step."""
    if kernels.height < 2 * (MIN_STEPS + 1):
        return None
    device = kernels.group_by("device_id").len().sort("len", descending=True)["device_id"][0]
    ordered = kernels.filter(pl.col("device_id") == device).sort("start_ns").with_row_index("position")
    periodic = ordered.group_by("name_id").agg(
        pl.len().alias("n"), pl.col("position").min().alias("first"),
        (pl.col("position").diff().drop_nulls().n_unique() == 1).alias("regular"), pl.col("position").diff().drop_nulls().first().alias("stride"),
    ).filter(pl.col("name_id").is_not_null() & pl.col("regular") & (pl.col("n") >= MIN_STEPS + 1) & (pl.col("stride") > 1)).sort(["n", "first"])
    if periodic.height == 0:
        return None
    marker = periodic.row(0, named=True)
    starts = ordered.filter(pl.col("name_id") == marker["name_id"])["start_ns"].to_numpy()
    durations = np.diff(starts)
    if len(durations) < MIN_STEPS:
        return None
    return {"source": "kernel sequence", "name": f"every {marker['stride']} launches, starting at {names.get(marker['name_id'], '?')[:80]}",
            "device_id": device, **_step_statistics(durations), "phases": {}}
