"""NVTX ranges grouped by name, nested as they nest, with the GPU time they launched; repeated steps. Pure.

PyTorch names every op range `aten::linear, seq = 7, op_id = 317126`: grouping drops the parts that change on every
call (`op_id`, `seq`, addresses, long numbers, step and layer numbers) so one row stands for one op. GPU time is
projected the way nsys's `nvtx_gpu_proj_sum` does: a kernel belongs to every range, on the launching thread, that
contains the CUDA call that launched it (matched through correlationId); `gpu_ns` is the sum of those kernels' times.
Depth and parent assume ranges on one thread nest (push/pop ranges always do; start/end ranges usually do).
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import polars as pl

from traceview.analyzer.ordering import grouped_time_order

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
    # Ends come nearly sorted (ranges are short next to the run), which the stable sort (timsort) exploits.
    depth = np.clip(rank - np.searchsorted(np.sort(ends, kind="stable"), starts, side="right"), 0, None)
    parent = np.full(len(starts), -1, dtype=np.int64)
    # Positions grouped by depth, each group in order: a range's parent is the last range one level up before it.
    # Depths are small: as 16-bit integers numpy sorts them stably by radix, in linear time.
    by_level = np.argsort(depth.astype(np.int16 if depth.max(initial=0) < 2**15 else np.int64), kind="stable")
    level_bounds = np.searchsorted(depth[by_level], np.arange(int(depth.max(initial=0)) + 2))
    for level in range(1, len(level_bounds) - 1):
        above = by_level[level_bounds[level - 1]:level_bounds[level]]
        here = by_level[level_bounds[level]:level_bounds[level + 1]]
        index = np.searchsorted(above, here) - 1
        parent[here] = np.where(index >= 0, above[np.clip(index, 0, None)], -1)
    return depth.astype(np.int64), parent


def range_table(nvtx: pl.DataFrame, launches: pl.DataFrame) -> pl.DataFrame:
    """Return every NVTX range (marks excluded) with its group name, depth, parent group, and the kernels it launched:
    start_ns, end_ns, group, depth, parent, kernels, gpu_ns, ordered by thread and start."""
    ranges = nvtx.filter((pl.col("kind") != "Mark") & pl.col("end_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns")))
    empty = pl.DataFrame(schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "group": pl.String, "depth": pl.Int32,
                                 "parent": pl.String, "kernels": pl.Int32, "gpu_ns": pl.Int64})
    if ranges.height == 0:
        return empty
    # Names repeat millions of times but are few: each distinct name is normalised once, and a range carries the
    # number of its group (an Enum), not the string, through the sort and the nesting.
    text = ranges["text"] if ranges.schema["text"] == pl.Categorical else ranges["text"].cast(pl.String).cast(pl.Categorical)
    texts = text.unique().drop_nulls()
    names = [normalise_range_name(t) for t in texts.cast(pl.String).to_list()]
    group_names = sorted({*names, "<unnamed>"})
    number = {name: i for i, name in enumerate(group_names)}
    physical = texts.to_physical().to_numpy()
    lookup = np.full(int(physical.max(initial=0)) + 2, number["<unnamed>"], dtype=np.uint32)  # the last entry: no text
    lookup[physical] = [number[name] for name in names]
    codes = lookup[text.to_physical().fill_null(len(lookup) - 1).to_numpy()]
    starts, ends, tids = ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy(), ranges["tid"].fill_null(-1).to_numpy()
    order = grouped_time_order(tids, starts, ends)
    starts, ends, tids, codes = starts[order], ends[order], tids[order], codes[order]
    del order
    # Ten million ranges: 32-bit depths, parents and counts where they fit keep the analysis' peak memory down.
    index_type = np.int32 if len(starts) < 2**31 else np.int64
    depth = np.zeros(len(starts), dtype=index_type)
    parent = np.full(len(starts), -1, dtype=index_type)
    kernels = np.zeros(len(starts), dtype=index_type)
    gpu = np.zeros(len(starts), dtype=np.int64)
    call_tids, call_starts, call_time = np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.zeros(1, dtype=np.int64)
    if launches.height:
        calls = launches.select(pl.col("tid").fill_null(-1), pl.col("call_start_ns").fill_null(-1), (pl.col("end_ns") - pl.col("start_ns")).alias("d"))
        call_tids, call_starts = calls["tid"].to_numpy(), calls["call_start_ns"].to_numpy()
        call_order = grouped_time_order(call_tids, call_starts)
        call_tids, call_starts = call_tids[call_order], call_starts[call_order]
        call_time = np.concatenate([[0], np.cumsum(calls["d"].to_numpy()[call_order])])
    # One thread's ranges at a time: a contiguous slice after the sort, no copies. Threads are independent and numpy
    # releases the GIL in its sorts and searches, so they run on a thread pool, each writing its own slices.
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(tids)) + 1, [len(tids)]])

    # tids and parent come in as defaults, so that the names can be released below once the threads are done.
    def one_thread(first: int, last: int, tids: np.ndarray = tids, parent: np.ndarray = parent) -> None:
        own_depth, own_parent = _depth_and_parent(starts[first:last], ends[first:last])
        depth[first:last] = own_depth
        parent[first:last] = np.where(own_parent >= 0, own_parent + first, -1)
        low_call, high_call = np.searchsorted(call_tids, tids[first], "left"), np.searchsorted(call_tids, tids[first], "right")
        if high_call > low_call:
            t = call_starts[low_call:high_call]
            low = np.searchsorted(t, starts[first:last], side="left") + low_call
            high = np.searchsorted(t, ends[first:last], side="right") + low_call
            kernels[first:last], gpu[first:last] = high - low, call_time[high] - call_time[low]

    slices = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
    if len(slices) > 1 and len(starts) > 100_000:
        with ThreadPoolExecutor(min(len(slices), os.cpu_count() or 1)) as pool:
            list(pool.map(lambda bound: one_thread(*bound), slices))
    else:
        for first, last in slices:
            one_thread(first, last)
    del tids
    groups = pl.Series(group_names, dtype=pl.Enum(group_names))
    has_parent = parent >= 0
    parent_code = codes[np.where(has_parent, parent, 0)]
    del parent
    return pl.DataFrame({"start_ns": starts, "end_ns": ends}, schema={"start_ns": pl.Int64, "end_ns": pl.Int64}).with_columns(
        groups.gather(codes).alias("group"), pl.Series("depth", depth),
        pl.when(pl.Series(has_parent)).then(groups.gather(parent_code)).alias("parent"),
        pl.Series("kernels", kernels), pl.Series("gpu_ns", gpu, dtype=pl.Int64))


def group_summary(ranges: pl.DataFrame, top: int = 60) -> list[dict[str, Any]]:
    """Return NVTX groups by CPU time: name, count, cpu_ns, mean_ns, gpu_ns, kernels, depth, parent (the group that
    most often encloses it)."""
    if ranges.height == 0:
        return []
    grouped = ranges.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("d")).group_by("group").agg(
        pl.len().alias("count"), pl.col("d").sum().alias("cpu_ns"), pl.col("d").mean().alias("mean_ns"),
        pl.col("gpu_ns").sum().alias("gpu_ns"), pl.col("kernels").cast(pl.Int64).sum().alias("kernels"), pl.col("depth").min().alias("depth"),
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
                                          (pl.col("end_ns") - pl.col("start_ns")).sum().alias("cpu")).with_columns(pl.col("group").cast(pl.String))
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
