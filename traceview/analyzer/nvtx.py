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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from traceview.analyzer.ordering import grouped_time_order, time_order
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


def normalise_range_name(text: str | None) -> str:
    """Return an NVTX range name without the parts that change on every call."""
    if text is None:
        return "<unnamed>"
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return " ".join(text.split()).strip(" ,") or "<unnamed>"


GROUP_TOTALS = pl.Schema({"group": pl.String, "count": pl.Int64, "cpu_ns": pl.Int64, "gpu_ns": pl.Int64, "kernels": pl.Int64,
                          "depth": pl.Int32, "parent": pl.String})
STEP_RANGES = pl.Schema({"start_ns": pl.Int64, "end_ns": pl.Int64, "group": pl.String, "gpu_ns": pl.Int64})
_FEW_THREADS = 8  # threads in a chunk up to which each thread's rows are found by a pass over the chunk, not by a sort
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


class RangesOutOfOrder(Exception):
    """A chunk holds a range that starts before one an earlier chunk ended the nesting at, on the same thread: the
    export is not in start order per thread, and its ranges must be nested whole (RangeNester's caller reads them
    again as one chunk)."""


def _depths(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Return each range's nesting depth (int32; 0 = outermost) among ranges ordered by start, longer first on ties."""
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
    return depth.astype(np.int32)  # millions of ranges on a thread: half the memory from here on


def _levels(depth: np.ndarray) -> list[np.ndarray]:
    """Return, for each depth from 0 to the deepest, the positions at that depth in order."""
    deepest = int(depth.max(initial=-1))
    if deepest <= _SHALLOW:  # nesting is shallow: one pass per level
        return [np.flatnonzero(depth == level) for level in range(deepest + 1)]
    by_level = np.argsort(depth, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(depth))])
    return [by_level[bounds[level]:bounds[level + 1]] for level in range(deepest + 1)]


@dataclass
class _ThreadState:
    """What one thread's ranges already nested leave to the ranges still to come (RangeNester)."""

    open_starts: np.ndarray  # the nested ranges still open after the last start nested, in time order
    open_ends: np.ndarray
    last_code_at_depth: np.ndarray  # the group of the last range nested at each depth (-1: none yet)
    cutoff: int | None = None  # ranges starting at or after this wait for the next chunk; none may start before it
    pending: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None  # starts, ends, codes, row numbers


@dataclass(frozen=True)
class LaunchCalls:
    """The kernels' launch calls as the nesting projects them onto NVTX ranges: each call's thread and start (ns),
    ordered by thread then start, and the running total of its kernels' GPU time (ns), one longer. Made once from
    launch_records' frame (of_launches), so that the frame itself need not be held through the NVTX pass."""

    tids: np.ndarray
    starts: np.ndarray
    gpu_time_before: np.ndarray

    @staticmethod
    def of_launches(launches: pl.DataFrame) -> LaunchCalls:
        """Return the launch calls of launch_records' frame."""
        if not launches.height:
            return LaunchCalls(np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.zeros(1, dtype=np.int64))
        # Each array is made when its turn comes, and the GPU times are gone before the calls are reordered: selected
        # with the calls and held while they were reordered, the times were one array of ten million more at what was
        # then the 10 M-launch export's peak.
        call_tids, call_starts = launches["tid"].fill_null(-1).to_numpy(), launches["call_start_ns"].fill_null(-1).to_numpy()
        call_order = grouped_time_order(call_tids, call_starts)
        # The running total is written in place: the reordered times and their sum were two more arrays of ten
        # million, at the analysis' peak on the 10 M-launch export.
        gpu_time_before = np.zeros(len(call_order) + 1, dtype=np.int64)
        np.take((launches["end_ns"] - launches["start_ns"]).to_numpy(), call_order, out=gpu_time_before[1:])
        np.cumsum(gpu_time_before[1:], out=gpu_time_before[1:])
        return LaunchCalls(call_tids[call_order], call_starts[call_order], gpu_time_before)


class RangeNester:
    """Nests NVTX ranges chunk by chunk, thread by thread, and sums them per group: feed chunks of NSYS_NVTX rows in
    the export's row order to `add`, then call `finish` for the NvtxRanges.

    What it holds is the per-group sums, the ranges that could mark steps, and per thread the ranges still open at the
    chunk's edge with the last group seen at each depth: never the table. Depth and parent are exactly those of the
    whole thread's ranges nested at once, provided that no range starts before a range an earlier chunk held of its
    thread (the ranges at a chunk's last start wait for the next chunk, so ties are ordered whole); a chunk that breaks
    that raises RangesOutOfOrder. Nsight Systems writes NVTX_EVENTS in start order on each thread (every real export
    here); a single chunk may come in any order.
    """

    def __init__(self, launches: pl.DataFrame | LaunchCalls) -> None:
        self._number: dict[str, int] = {"<unnamed>": 0}  # group name → code, in the order found
        self._code_of_text: dict[str | None, int] = {None: 0}
        self._threads: dict[int, _ThreadState] = {}
        self._rows = 0
        self._pairs: list[pl.DataFrame] = []  # per pair of group and parent group: ranges, CPU and GPU time, kernels, least depth
        self._steps: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # rows, starts, ends, codes, gpu
        self._marks_steps = np.zeros(1, dtype=bool)
        self._marks_steps[0] = bool(_may_mark_steps(pl.Series(["<unnamed>"], dtype=pl.String))[0])
        calls = launches if isinstance(launches, LaunchCalls) else LaunchCalls.of_launches(launches)
        self.call_tids, self.call_starts, self.call_time = calls.tids, calls.starts, calls.gpu_time_before

    def _codes(self, texts: pl.Series) -> np.ndarray:
        """Return each range's group code (uint32): the distinct texts of a chunk are few, each normalised once."""
        stripped = texts.cast(pl.Categorical)
        distinct = stripped.unique().drop_nulls()
        distinct_texts = distinct.cast(pl.String).to_list()
        new = [text for text in distinct_texts if text not in self._code_of_text]
        if new:
            names = [normalise_range_name(text) for text in new]
            for text, name in zip(new, names, strict=True):
                self._code_of_text[text] = self._number.setdefault(name, len(self._number))
            if len(self._number) > len(self._marks_steps):
                known = list(self._number)[len(self._marks_steps):]
                self._marks_steps = np.concatenate([self._marks_steps, _may_mark_steps(pl.Series(known, dtype=pl.String)).to_numpy()])
        physical = distinct.to_physical().to_numpy()
        lookup = np.zeros(int(physical.max(initial=0)) + 2, dtype=np.uint32)  # the last entry: no text, <unnamed> (code 0)
        lookup[physical] = [self._code_of_text[text] for text in distinct_texts]
        codes: np.ndarray = lookup[stripped.to_physical().fill_null(len(lookup) - 1).to_numpy()]
        return codes

    def add(self, chunk: pl.DataFrame) -> None:
        """Nest and sum one chunk of NSYS_NVTX rows (marks and ranges without an end are left out)."""
        is_range = ((pl.col("kind") != "Mark") & pl.col("end_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))).fill_null(False)
        ranges = chunk.select("start_ns", "end_ns", "text", "tid")
        if ranges.height and not chunk.select(is_range.all()).item():
            ranges = ranges.filter(chunk.select(is_range).to_series())  # only when some rows are not ranges: millions of rows are not copied
        if ranges.height == 0:
            return
        codes = self._codes(ranges["text"])
        rows = np.arange(self._rows, self._rows + ranges.height, dtype=np.int64)
        self._rows += ranges.height
        tids = ranges["tid"].fill_null(-1).to_numpy()
        starts, ends = ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy()
        del ranges
        threads = pl.Series(tids).unique().sort().to_numpy()  # numpy's unique hashes every row: 25 ms per chunk
        if len(threads) == 1:
            self._thread(int(threads[0]), starts, ends, codes, rows)
            return
        if len(threads) <= _FEW_THREADS:  # a pass per thread over the chunk: a sort by thread took ten times as long
            for tid in threads.tolist():
                own = np.flatnonzero(tids == tid)
                self._thread(tid, starts[own], ends[own], codes[own], rows[own])
            return
        # One stable sort by thread: each thread's rows keep the export's order.
        by_thread = np.argsort(tids, kind="stable")
        ordered = tids[by_thread]
        bounds = np.concatenate([[0], np.flatnonzero(ordered[1:] != ordered[:-1]) + 1, [len(ordered)]])
        for first, last in itertools.pairwise(bounds.tolist()):
            own = by_thread[first:last]
            self._thread(int(ordered[first]), starts[own], ends[own], codes[own], rows[own])

    def _thread(self, tid: int, starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, rows: np.ndarray, final: bool = False) -> None:
        state = self._threads.get(tid)
        if state is None:
            state = self._threads[tid] = _ThreadState(np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([], dtype=np.int64))
        if state.cutoff is not None and len(starts) and int(starts.min()) < state.cutoff:
            raise RangesOutOfOrder(f"thread {tid}: a range starts at {int(starts.min())} ns, before {state.cutoff} ns where an earlier chunk's ranges ended")
        if state.pending is not None:
            held_starts, held_ends, held_codes, held_rows = state.pending
            starts, ends = np.concatenate([held_starts, starts]), np.concatenate([held_ends, ends])
            codes, rows = np.concatenate([held_codes, codes]), np.concatenate([held_rows, rows])
            state.pending = None
        if len(starts) == 0:
            return
        if not final:
            # The ranges at the chunk's last start wait: a later chunk may hold more ranges that start then, and a
            # tie is ordered (longer first) as a whole.
            state.cutoff = int(starts.max())
            waiting = starts >= state.cutoff
            count = int(np.count_nonzero(waiting))
            if count and waiting[len(waiting) - count:].all():
                # In start order (as nsys writes them), the few that wait are the last: views, not copies of the chunk.
                state.pending = (starts[-count:], ends[-count:], codes[-count:], rows[-count:])
                starts, ends, codes, rows = starts[:-count], ends[:-count], codes[:-count], rows[:-count]
            elif count:
                state.pending = (starts[waiting], ends[waiting], codes[waiting], rows[waiting])
                keep = ~waiting
                starts, ends, codes, rows = starts[keep], ends[keep], codes[keep], rows[keep]
            if len(starts) == 0:
                return
        order = time_order(starts, ends)
        if order is not None:  # one at a time, each copy replacing its original before the next is made
            starts = starts[order]
            ends = ends[order]
            codes = codes[order]
            rows = rows[order]
        del order
        carried = len(state.open_starts)
        # The ranges still open from earlier chunks count in the depth of these; those that ended before these start
        # would count once as before and once as ended, so they are not kept.
        all_starts, all_ends = np.concatenate([state.open_starts, starts]), np.concatenate([state.open_ends, ends])
        depth = _depths(all_starts, all_ends)[carried:]
        no_parent = np.int64(-1)
        parent_code = np.full(len(starts), no_parent, dtype=np.int64)
        levels = _levels(depth)
        last = state.last_code_at_depth
        for level in range(1, len(levels)):
            above, here = levels[level - 1], levels[level]
            index = np.searchsorted(above, here) - 1
            # A range whose parent is not among these has the last range one level up that an earlier chunk nested.
            earlier = last[level - 1] if level - 1 < len(last) else no_parent
            if len(above) == 0:  # every range one level up is an earlier chunk's
                parent_code[here] = earlier
                continue
            parent_code[here] = np.where(index >= 0, codes[above[np.clip(index, 0, None)]].astype(np.int64), earlier)
        if len(levels) > len(last):
            last = np.concatenate([last, np.full(len(levels) - len(last), -1, dtype=np.int64)])
        for level, positions in enumerate(levels):
            if len(positions):
                last[level] = codes[positions[-1]]
        state.last_code_at_depth = last
        still_open = all_ends > int(starts[-1])  # open after the latest start nested
        state.open_starts, state.open_ends = all_starts[still_open], all_ends[still_open]
        del all_starts, all_ends, still_open, levels
        # The kernels each range launched: those whose launch call, on this thread, starts inside the range.
        first_call, after_calls = np.searchsorted(self.call_tids, tid, "left"), np.searchsorted(self.call_tids, tid, "right")
        # Only the thread's calls from the first start to the last end can fall in these ranges: looked up among
        # those alone, a chunk's searches stay in cache instead of ranging over the whole run's launches.
        first_call += np.searchsorted(self.call_starts[first_call:after_calls], starts[0], "left")
        after_calls = first_call + np.searchsorted(self.call_starts[first_call:after_calls], ends.max(), "right")
        own_calls = self.call_starts[first_call:after_calls]
        for block in range(0, len(starts), _BLOCK_ROWS):  # summed a block at a time: per-range figures are never all held
            part = slice(block, block + _BLOCK_ROWS)
            low = np.searchsorted(own_calls, starts[part], side="left") + first_call
            high = np.searchsorted(own_calls, ends[part], side="right") + first_call
            kernels, gpu = (high - low).astype(np.int32), self.call_time[high] - self.call_time[low]
            block_codes = codes[part]
            # One group per pair of group and parent group (none: -1), in one 64-bit key: a second grouping by
            # group alone took as long again. finish() sums the pairs per group.
            pair = (block_codes.astype(np.int64) << 32) | (parent_code[part] + 1)
            own = pl.DataFrame({"pair": pair, "d": ends[part] - starts[part], "gpu_ns": gpu, "kernels": kernels, "depth": depth[part]})
            del pair
            self._pairs.append(own.group_by("pair").agg(pl.len().alias("count"), pl.col("d").sum().alias("cpu_ns"), pl.col("gpu_ns").sum(),
                                                        pl.col("kernels").cast(pl.Int64).sum(), pl.col("depth").min()))
            kept = np.flatnonzero(self._marks_steps[block_codes])
            if len(kept):
                self._steps.append((rows[part][kept], starts[part][kept], ends[part][kept], block_codes[kept], gpu[kept]))

    def finish(self) -> NvtxRanges:
        """Return the ranges' NvtxRanges, nesting the ranges still waiting at the last chunk's edge first."""
        for tid, state in list(self._threads.items()):
            if state.pending is not None:
                empty = np.array([], dtype=np.int64)
                self._thread(tid, empty, empty, np.array([], dtype=np.uint32), empty, final=True)
        if not self._pairs:
            return NvtxRanges(pl.DataFrame(schema=GROUP_TOTALS), pl.DataFrame(schema=STEP_RANGES))
        # Codes were given in the order the names were found; ties between parents go to the first by name.
        group_names = sorted(self._number)
        rank = np.zeros(len(self._number), dtype=np.int64)
        rank[[self._number[name] for name in group_names]] = np.arange(len(group_names))
        by_rank = dict(enumerate(rank.tolist()))
        name_of: dict[int, str] = dict(enumerate(group_names))
        totals = pl.concat(self._pairs).group_by("pair").agg(pl.col("count", "cpu_ns", "gpu_ns", "kernels").sum(), pl.col("depth").min()).with_columns(
            (pl.col("pair") // (1 << 32)).replace_strict(by_rank, return_dtype=pl.Int64).alias("code"),
            (pl.col("pair") % (1 << 32) - 1).replace_strict(by_rank, default=-1, return_dtype=pl.Int64).alias("parent"))
        # The enclosing group: the most frequent parent, the first by name on ties.
        parents = totals.filter(pl.col("parent") >= 0).sort("code", "count", "parent", descending=[False, True, False]).unique("code", keep="first").select(
            "code", pl.col("parent").alias("parent_code"))
        groups = totals.group_by("code").agg(pl.col("count", "cpu_ns", "gpu_ns", "kernels").sum(), pl.col("depth").min()).join(
            parents, on="code", how="left").with_columns(
            pl.col("code").replace_strict(name_of, return_dtype=pl.String).alias("group"),
            pl.col("parent_code").replace_strict(name_of, default=None, return_dtype=pl.String).alias("parent"))
        if self._steps:
            kept_rows, kept_starts, kept_ends, kept_codes, kept_gpu = (np.concatenate(part) for part in zip(*self._steps, strict=True))
        else:
            kept_rows = kept_starts = kept_ends = kept_gpu = np.array([], dtype=np.int64)
            kept_codes = np.array([], dtype=np.uint32)
        in_order = np.argsort(kept_rows, kind="stable")  # the export's row order
        steps = pl.DataFrame({"start_ns": kept_starts[in_order], "end_ns": kept_ends[in_order],
                              "group": pl.Series(rank[kept_codes[in_order]]).replace_strict(name_of, return_dtype=pl.String),
                              "gpu_ns": kept_gpu[in_order]}, schema=STEP_RANGES)
        return NvtxRanges(groups.select(list(GROUP_TOTALS.keys())).cast(dict(GROUP_TOTALS)), steps)  # type: ignore[arg-type]


def nvtx_ranges(nvtx: pl.DataFrame | Iterable[pl.DataFrame], launches: pl.DataFrame | LaunchCalls) -> NvtxRanges:
    """Return the export's NVTX ranges nested thread by thread, with the kernels each launched (launch_records'
    frame, or its LaunchCalls), summed per group: from one frame, or from chunks in the export's row order (RangeNester; raises
    RangesOutOfOrder where the chunks are not in start order per thread)."""
    nester = RangeNester(launches)
    for chunk in [nvtx] if isinstance(nvtx, pl.DataFrame) else nvtx:
        nester.add(chunk)
    return nester.finish()


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
    # Only the two columns the steps need are taken out and ordered: all seven copied 0.7 GB at 10 M launches.
    ordered = kernels.lazy().filter(pl.col("device_id") == device).select("name_id", "start_ns").sort("start_ns").with_row_index("position").collect()
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
