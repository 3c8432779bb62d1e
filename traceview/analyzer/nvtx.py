"""NVTX ranges grouped by name, nested as they nest, with the GPU time they launched; repeated steps. Pure.

PyTorch names every op range `aten::linear, seq = 7, op_id = 317126`: grouping drops the parts that change on every
call (`op_id`, `seq`, addresses, long numbers, step and layer numbers) so one row stands for one op. GPU time is
projected the way nsys's `nvtx_gpu_proj_sum` does: a kernel belongs to every range, on the launching thread, that
contains the CUDA call that launched it (matched through correlationId); `gpu_ns` is the sum of those kernels' times.
Depth and parent assume ranges on one thread nest (push/pop ranges always do; start/end ranges usually do).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from traceview.analyzer.ordering import grouped_time_order, time_order
from traceview.analyzer.threads import pool_for
from traceview.parsers.nsys_sqlite import PER_CALL_NUMBERS
from traceview.wording import counted

# The reader has already taken the per-call numbers out of the texts of an export (nsys_sqlite.PER_CALL_NUMBERS); a
# name from elsewhere (an `nsys stats` report) goes through them here.
_VOLATILE = (
    # Started only after a non-space: a pattern that opens with `\s*`, tried at every position of a long run of spaces,
    # takes the square of its length in Python's backtracking engine (polars' engine, where the reader uses them, is linear).
    *((re.compile(rf"(?:^|(?<=\S)){pattern}" if pattern.startswith(r"\s*") else pattern), replacement) for pattern, replacement in PER_CALL_NUMBERS),
    (re.compile(r"(?i)(?<![a-z])(step|iter|iteration|epoch|batch|layer|layers|token|block|blocks|rank|microbatch|h)([\s_:#=.\[-]*)\d+"), r"\1\2N"),
    (re.compile(r"(?i)(step|iter)#\d+"), r"\1#N"),
    # A module's index before its class, as PyTorch module hooks name ranges (`:40: FSDPNemotronV3Block`).
    (re.compile(r"(?<![\w.])\d+(?=:\s)"), "N"),
    (re.compile(r"\d{4,}"), "N"),
)
# A step is a whole word of the name (`train_step`, `ProfilerStep#N`, `decode`, `forward`, vLLM's `execute_model`), not a framework hook such
# as `FSDP::pre_forward` or an op such as `aten::...`: names with `::` count only when they say step.
STEP_RANGE = re.compile(r"(?i)((^|[^a-z])(step|iteration|iter|forward|decode|prefill|generate|inference|execute_model)([^a-z]|$)|step)")
_FRAMEWORK_RANGE = re.compile(r"::")
# PyTorch's optimizers wrap each step in a range (`Optimizer.step#SGD.step`): a part of an iteration, never one. An MTIA
# training trace's optimizer ranges had been taken for its steps (median 146 us, p99 4.4 s).
_OPTIMIZER_RANGE = re.compile(r"(?i)^optimizer\.")
# PyTorch's own marker spans exactly one iteration (prof.step() closes one and opens the next): where a trace has enough
# of them it is the step, whatever nests around it. A with_stack trace's ranges do not nest cleanly around it (each
# ProfilerStep opens inside the Python frame of the prof.step() that closed the last).
PROFILER_STEP = "ProfilerStep#N"
PHASE_PATTERNS = (("prefill", re.compile(r"(?i)prefill|prompt|context")), ("decode", re.compile(r"(?i)decode|generat|token")))
MIN_STEPS = 3
MAX_LISTED_STEPS = 1000
_SHALLOW = 48  # nesting levels up to which each level's ranges are found with one pass, not a sort
_FEW_THREADS = 32  # threads up to which each thread's ranges are found with one pass over all, not a sort


def normalise_range_name(text: str | None) -> str:
    """Return an NVTX range name without the parts that change on every call."""
    if text is None:
        return "<unnamed>"
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return " ".join(text.split()).strip(" ,") or "<unnamed>"


def _depth_and_parent(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return each range's nesting depth (0 = outermost) and the index of its parent (-1 for none), both int32, for
    one thread's ranges ordered by start, longer first on ties (ordering.time_order)."""
    # A range's depth is the number of ranges before it that are still open when it starts: those before it, less
    # those that ended by then. Ends come nearly sorted (ranges are short next to the run), which the stable sort
    # (timsort) exploits.
    depth = np.arange(len(starts), dtype=np.int64)
    depth -= np.searchsorted(np.sort(ends, kind="stable"), starts, side="right")
    # That count of ended ranges also takes in zero-length ranges at the same start that come after (ties are ordered
    # longer first, so they close each tie): each is given back to the ranges from its tie's first up to itself.
    zero = np.flatnonzero(ends == starts)
    if len(zero):
        given_back = np.zeros(len(starts) + 1, dtype=np.int64)
        np.add.at(given_back, np.searchsorted(starts, starts[zero], side="left"), 1)
        np.add.at(given_back, zero + 1, -1)
        depth += np.cumsum(given_back[:-1])
    np.clip(depth, 0, None, out=depth)
    depth = depth.astype(np.int32)  # millions of ranges on a thread: half the memory from here on
    parent = np.full(len(starts), -1, dtype=np.int32)
    # A range's parent is the last range one level up that starts before it. Nesting is shallow: the positions at
    # each level, in order, come from one pass per level (a stable sort by level where it is deep).
    deepest = int(depth.max(initial=0))
    if deepest <= _SHALLOW:
        levels = [np.flatnonzero(depth == level) for level in range(deepest + 1)]
    else:
        by_level = np.argsort(depth, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(depth))])
        levels = [by_level[bounds[level]:bounds[level + 1]] for level in range(deepest + 1)]
    for above, here in itertools.pairwise(levels):
        index = np.searchsorted(above, here) - 1
        parent[here] = np.where(index >= 0, above[np.clip(index, 0, None)], -1)
    return depth, parent


GROUP_TOTALS = pl.Schema({"group": pl.String, "count": pl.Int64, "cpu_ns": pl.Int64, "gpu_ns": pl.Int64, "kernels": pl.Int64,
                          "depth": pl.Int32, "parent": pl.String})
STEP_RANGES = pl.Schema({"start_ns": pl.Int64, "end_ns": pl.Int64, "group": pl.String, "gpu_ns": pl.Int64})
_BLOCK_ROWS = 1 << 20  # ranges summed at a time: the per-range figures of ten million ranges are never held at once


@dataclass(frozen=True)
class NvtxRanges:
    """The NVTX ranges of an export (marks left out), grouped by name.

    `groups`: one row per group (GROUP_TOTALS): ranges, CPU time, GPU time and kernels they launched, the shallowest
    depth, and the group that most often encloses it (ties: the first by name). `steps`: the ranges of the groups whose
    names could mark steps or phases (STEP_RANGES, in the export's row order), for steps_from_nvtx.
    """

    groups: pl.DataFrame
    steps: pl.DataFrame


def _names_a_step() -> pl.Expr:
    """Whether a group's name says step/iteration/forward/decode, and is not a framework hook unless it says step."""
    group = pl.col("group")
    return (group.str.contains(STEP_RANGE.pattern) & (~group.str.contains(_FRAMEWORK_RANGE.pattern) | group.str.contains("(?i)step"))
            & ~group.str.contains(_OPTIMIZER_RANGE.pattern))


def _may_mark_steps(names: pl.Series) -> pl.Series:
    """Whether each group name could mark steps or a phase (steps_from_nvtx's tests of the name alone)."""
    return names.to_frame("group").select(pl.any_horizontal(_names_a_step(), *(pl.col("group").str.contains(pattern.pattern) for _, pattern in PHASE_PATTERNS))).to_series()


def _thread_ranges(ranges: pl.DataFrame, tids: pl.Series) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Yield each thread's id, row numbers (in row order), starts and ends, one thread at a time."""
    threads = tids.unique().sort().to_list()
    if len(threads) <= _FEW_THREADS:
        for tid in threads:
            on_thread = tids == tid
            # A filter reads the (chunked) columns in order, where a gather would look up every row.
            yield tid, on_thread.arg_true().to_numpy(), ranges["start_ns"].filter(on_thread).to_numpy(), ranges["end_ns"].filter(on_thread).to_numpy()
        return
    # Many threads: one stable sort by thread instead of a pass over every row per thread.
    thread_of_row = tids.to_numpy()
    by_thread = np.argsort(thread_of_row, kind="stable")
    ordered = thread_of_row[by_thread]
    del thread_of_row
    bounds = np.concatenate([[0], np.flatnonzero(ordered[1:] != ordered[:-1]) + 1, [len(ordered)]])
    for first, last in itertools.pairwise(bounds.tolist()):
        rows = by_thread[first:last]
        yield int(ordered[first]), rows, ranges["start_ns"].gather(rows).to_numpy(), ranges["end_ns"].gather(rows).to_numpy()


def nvtx_ranges(nvtx: pl.DataFrame, launches: pl.DataFrame) -> NvtxRanges:
    """Return the export's NVTX ranges nested thread by thread, with the kernels each launched (launch_records'
    frame), summed per group."""
    is_range = ((pl.col("kind") != "Mark") & pl.col("end_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))).fill_null(False)
    ranges = nvtx.select("start_ns", "end_ns", "text", "tid")
    if ranges.height and not nvtx.select(is_range.all()).item():
        ranges = ranges.filter(nvtx.select(is_range).to_series())  # only when some rows are not ranges: ten million rows are not copied
    if ranges.height == 0:
        return NvtxRanges(pl.DataFrame(schema=GROUP_TOTALS), pl.DataFrame(schema=STEP_RANGES))
    # A range carries the number of its group, not the string, through the nesting. The reader has taken the numbers
    # that change on every call out of the texts (PyTorch numbers every op), so the distinct texts are few and each is
    # normalised once.
    stripped = ranges["text"].cast(pl.Categorical)
    distinct = stripped.unique().drop_nulls()
    names = [normalise_range_name(value) for value in distinct.cast(pl.String).to_list()]
    group_names = sorted({*names, "<unnamed>"})
    number = {name: i for i, name in enumerate(group_names)}
    physical = distinct.to_physical().to_numpy()
    lookup = np.full(int(physical.max(initial=0)) + 2, number["<unnamed>"], dtype=np.uint32)  # the last entry: no text
    lookup[physical] = [number[name] for name in names]
    codes = lookup[stripped.to_physical().fill_null(len(lookup) - 1).to_numpy()]
    no_parent = len(group_names)
    may_mark_steps = _may_mark_steps(pl.Series(group_names, dtype=pl.String)).to_numpy()
    call_tids, call_starts, call_time = np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.zeros(1, dtype=np.int64)
    if launches.height:
        calls = launches.select(pl.col("tid").fill_null(-1), pl.col("call_start_ns").fill_null(-1), (pl.col("end_ns") - pl.col("start_ns")).alias("d"))
        call_tids, call_starts = calls["tid"].to_numpy(), calls["call_start_ns"].to_numpy()
        call_order = grouped_time_order(call_tids, call_starts)
        call_tids, call_starts = call_tids[call_order], call_starts[call_order]
        call_time = np.concatenate([[0], np.cumsum(calls["d"].to_numpy()[call_order])])
    totals, pairs, step_rows, step_gpu = [], [], [], []
    tids = ranges["tid"].fill_null(-1)
    # Nesting and the launched kernels need only the starts and ends: the nesting runs on a second thread meanwhile
    # (numpy releases the GIL in its sorts and searches).
    with pool_for(ranges.height, workers=1) as pool:
        for tid, rows, starts, ends in _thread_ranges(ranges, tids):
            # Depth and parent assume one thread's ranges nest: each thread's are nested apart, in time order.
            order = time_order(starts, ends)
            if order is not None:  # one at a time, each copy replacing its original before the next is made
                starts = starts[order]
                ends = ends[order]
                rows = rows[order]
            del order
            nesting = pool.submit(_depth_and_parent, starts, ends)
            own_codes = codes[rows]
            first_call, after_calls = np.searchsorted(call_tids, tid, "left"), np.searchsorted(call_tids, tid, "right")
            own_calls = call_starts[first_call:after_calls]
            blocks = [slice(block, block + _BLOCK_ROWS) for block in range(0, len(rows), _BLOCK_ROWS)]
            # The calls before each range's start, counted from the calls' side (there are fewer calls than ranges,
            # and the starts are in order): a call before k starts is before every start from the k-th on.
            before_start = np.cumsum(np.bincount(np.searchsorted(starts, own_calls, side="right"), minlength=len(starts) + 1)[:len(starts)]) + first_call
            launched = []
            for part in blocks:
                low = before_start[part]
                high = np.searchsorted(own_calls, ends[part], side="right") + first_call
                launched.append(((high - low).astype(np.int32), call_time[high] - call_time[low]))
            del before_start
            depth, parent = nesting.result()
            # Summed a block at a time: what is kept is one row per group, and the ranges that could be steps.
            for part, (kernels, gpu) in zip(blocks, launched, strict=True):
                block_codes = own_codes[part]
                own_parent = parent[part]
                own = pl.DataFrame({"code": block_codes, "d": ends[part] - starts[part], "gpu_ns": gpu, "kernels": kernels, "depth": depth[part],
                                    "parent": np.where(own_parent >= 0, own_codes[np.clip(own_parent, 0, None)], no_parent).astype(np.uint32)})
                totals.append(own.group_by("code").agg(pl.len().alias("count"), pl.col("d").sum().alias("cpu_ns"), pl.col("gpu_ns").sum(),
                                                       pl.col("kernels").cast(pl.Int64).sum(), pl.col("depth").min()))
                pairs.append(own.filter(pl.col("parent") != no_parent).group_by("code", "parent").len())
                kept = np.flatnonzero(may_mark_steps[block_codes])
                step_rows.append(rows[part][kept])
                step_gpu.append(gpu[kept])
            # The next thread's arrays are built while these would still be bound: a thread's ranges are millions.
            del launched, depth, parent, rows, starts, ends, own_codes
    name_of: dict[int, str] = dict(enumerate(group_names))
    # The enclosing group: the most frequent parent, the first by name on ties (codes are in name order).
    parents = pl.concat(pairs).group_by("code", "parent").agg(pl.col("len").sum()).sort("code", "len", "parent", descending=[False, True, False]).unique(
        "code", keep="first").select("code", pl.col("parent").alias("parent_code"))
    groups = pl.concat(totals).group_by("code").agg(pl.col("count", "cpu_ns", "gpu_ns", "kernels").sum(), pl.col("depth").min()).join(
        parents, on="code", how="left").with_columns(
        pl.col("code").replace_strict(name_of, return_dtype=pl.String).alias("group"),
        pl.col("parent_code").replace_strict(name_of, default=None, return_dtype=pl.String).alias("parent"))
    kept_rows, kept_gpu = np.concatenate(step_rows), np.concatenate(step_gpu)
    in_order = np.argsort(kept_rows, kind="stable")
    kept_rows, kept_gpu = kept_rows[in_order], kept_gpu[in_order]
    steps = ranges.select("start_ns", "end_ns")[kept_rows].with_columns(
        pl.Series(codes[kept_rows]).replace_strict(name_of, return_dtype=pl.String).alias("group"), pl.Series("gpu_ns", kept_gpu, dtype=pl.Int64))
    return NvtxRanges(groups.select(list(GROUP_TOTALS.keys())).cast(dict(GROUP_TOTALS)), steps)  # type: ignore[arg-type]


def group_summary(ranges: NvtxRanges, top: int = 60) -> list[dict[str, Any]]:
    """Return NVTX groups by CPU time: name, count, cpu_ns, mean_ns, gpu_ns, kernels, depth, parent (the group that
    most often encloses it); gpu_projected_ns and gpu_ops are nvtx_gpu_proj_sum's, unknown here."""
    grouped = ranges.groups.sort(["cpu_ns", "group"], descending=[True, False]).head(top)
    return [{"name": r["group"], "count": r["count"], "cpu_ns": r["cpu_ns"], "mean_ns": r["cpu_ns"] / r["count"], "gpu_ns": r["gpu_ns"],
             "kernels": r["kernels"], "depth": r["depth"], "parent": r["parent"], "gpu_projected_ns": None, "gpu_ops": None}
            for r in grouped.iter_rows(named=True)]


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


def steps_from_nvtx(ranges: NvtxRanges) -> dict[str, Any] | None:
    """Return per-step times from PyTorch's ProfilerStep ranges, or else the outermost repeated NVTX range whose name
    says step/iteration/forward/decode (at least MIN_STEPS of them), with prefill and decode apart where range names
    tell them apart."""
    counts = ranges.groups.select("group", pl.col("count").alias("n"), "depth", pl.col("cpu_ns").alias("cpu"))
    candidates = counts.filter((pl.col("n") >= MIN_STEPS) & _names_a_step())
    candidates = candidates.sort([pl.col("group") != PROFILER_STEP, "depth", "cpu", "group"], descending=[False, False, True, False])
    if candidates.height == 0:
        return None
    name = candidates["group"][0]
    chosen = ranges.steps.filter(pl.col("group") == name).sort("start_ns")
    stats = _step_statistics((chosen["end_ns"] - chosen["start_ns"]).to_numpy(), chosen["gpu_ns"].to_numpy())
    phases = {}
    for phase, pattern in PHASE_PATTERNS:
        named = counts.filter(pl.col("group").str.contains(pattern.pattern)).sort(["depth", "cpu", "group"], descending=[False, True, False])
        if named.height:
            own = ranges.steps.filter(pl.col("group") == named["group"][0]).sort("start_ns")
            phases[phase] = {"name": named["group"][0], **{k: v for k, v in _step_statistics((own["end_ns"] - own["start_ns"]).to_numpy()).items() if k != "durations_ns"}}
    return {"source": "nvtx", "name": name, **stats, "phases": phases if len(phases) == 2 else {}}


def steps_from_kernels(kernels: pl.DataFrame, names: dict[int, str]) -> dict[str, Any] | None:
    """Return per-step times from a repeating kernel sequence on the busiest device: the kernel that occurs at a
    fixed stride (every N launches) the fewest times (at least MIN_STEPS + 1) marks the start of each step."""
    if kernels.height < 2 * (MIN_STEPS + 1):
        return None
    # The busiest device; on a tie the first by id (a group_by comes in no fixed order).
    device = kernels.group_by("device_id").len().sort(["len", "device_id"], descending=[True, False], nulls_last=True)["device_id"][0]
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
    return {"source": "kernel sequence", "name": f"every {counted(marker['stride'], 'launch', 'launches')}, starting at {names.get(marker['name_id'], '?')[:80]}",
            "device_id": device, **_step_statistics(durations), "phases": {}}
