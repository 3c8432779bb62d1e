"""Where each GPU's time went in an Nsight Systems run, and why it waited. Pure functions over the parser's frames.

Categories per device: compute (kernels, and whole-graph executions when graphs were traced as a whole),
communication (NCCL-style collective kernels), copy (memcpy and memset) and unified memory (migrations, counted
apart). One exact sweep over every start and end gives the time spent in each combination of categories, so unions,
overlaps and idle time add up to the device's span (first to last GPU activity) with nothing counted twice.

The verdict follows what the GPU was *exposed* to, HTA's convention for communication: compute time counts fully;
communication only where no kernel ran beside it; copies only where neither did; idle is the rest. The largest of
these four names the run: compute-, communication-, copy- or host-bound; an idle GPU that had its next work queued
through most of its idle time (launch latency, or waits the trace does not show), or whose input has no CUDA API calls
to tell, is said to be idle, not host-bound (IDLE_KINDS).

Idle gaps get a cause from what the host did meanwhile (same process as the device's work): the NVTX ranges and
CUDA API calls that cover most of the gap, or none. The rules named after `nsys analyze`'s (`gpu_gaps`,
`gpu_time_util`, `cuda_memcpy_async`, `cuda_memcpy_sync`, `cuda_memset_sync`, `cuda_api_sync`) keep its semantics and
default thresholds; `copy_bound` (with the copies' throughput against the host link), `communication_bound`,
`host_bound` (`gpu_idle_queued` where the idle GPU had its work queued, `gpu_idle_untraced` where the input cannot
say), `jit_compile`, `launch_bound` and `cuda_graph_trace` are traceview's own.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import polars as pl

from traceview.analyzer.kernel_kinds import is_communication
from traceview.analyzer.nvtx import LaunchCalls, NvtxRanges, RangeNester, RangesOutOfOrder
from traceview.analyzer.ordering import time_order
from traceview.numbers import reduced
from traceview.parsers.nsys_sqlite import NSYS_API, NSYS_GRAPHS, NSYS_KERNELS, NSYS_MEMOPS, NSYS_NVTX, threads_of
from traceview.parsers.schema import conform, schema_of
from traceview.wording import counted

CATEGORIES = ("compute", "communication", "copy", "unified_memory")
COMPUTE, COMMUNICATION, COPY, UNIFIED = (1 << i for i in range(len(CATEGORIES)))

DEFAULT_GAP_THRESHOLD_NS = 500_000_000  # nsys analyze gpu_gaps: DEFAULT_GAP = 500 ms
TIME_UTIL_CHUNKS = 30  # nsys analyze gpu_time_util: DEFAULT_NUM_CHUNKS
TIME_UTIL_THRESHOLD_PCT = 50.0  # nsys analyze gpu_time_util: DEFAULT_THRESHOLD
TINY_KERNEL_NS = 10_000
# A launch call normally takes a few microseconds; a kernel's first launch that takes a fifth of a millisecond or more
# is the driver loading (or JIT-compiling) its module on first use (CUDA_MODULE_LOADING=LAZY; a real RTX 3090 export:
# 575 us for a small module), so it counts as module loading, not launch overhead.
SLOW_LAUNCH_CALL_NS = 200_000
LAUNCH_BOUND_STRETCH = 20  # consecutive tiny kernels that wait longer than they run
FEW_SYNC_CALLS = 10  # synchronize calls in a run below which they are waits for results, not a synchronize in a loop
LISTED_GAPS = 20

# copyKind (ENUM_CUDA_MEMCPY_OPER; the same numbers in every version) → direction.
DIRECTIONS = {1: "HtoD", 2: "DtoH", 3: "HtoD", 4: "DtoH", 5: "DtoD", 6: "DtoD", 7: "DtoD", 8: "DtoD", 9: "HtoH",
              10: "PtoP", 11: "unified HtoD", 12: "unified DtoH", 13: "unified DtoD"}
UNIFIED_KINDS = (11, 12, 13)
HOST_LINK_DIRECTIONS = ("HtoD", "DtoH", "unified HtoD", "unified DtoH")

# CUDA API calls by what they make the host do (runtime names carry a _vNNNN suffix, driver names _v2).
# HIP's runtime (ROCm PyTorch traces) names its calls as CUDA's with `hip` for `cuda`, and hipMemcpyWithStream is the
# blocking copy PyTorch's ROCm build makes for a tensor copied to the host (`.item()`, `.cpu()`).
_API_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("module_load", re.compile(r"^cu(Module|Library)(Load|GetFunction|GetKernel)|^cuLink|^cudaGetFuncBySymbol|^nvrtc|^hipModule(Load|GetFunction)|^hiprtc")),
    ("synchronization", re.compile(r"^(cuda|cu|hip)(Device|Ctx|Stream|Event)Synchronize")),
    ("synchronous_copy", re.compile(r"^((cuda|hip)Memcpy(2D|3D)?(ToSymbol|FromSymbol|Peer|ToArray|FromArray|WithStream|HtoD|DtoH|DtoD)?|cuMemcpy\w*?|"
                                    r"(cuda|hip)Memset(2D|3D)?|cuMemsetD\w*?|hipMemsetD\d+)(_v\d+)*$")),
    ("memory_allocation", re.compile(r"^((cuda|hip)Malloc(Host|Managed|Pitch|Array|3D)?|(cuda|hip)Free(Host|Array)?|cudaHostAlloc|hipHostMalloc|hipHostFree|"
                                     r"(cuda|hip)HostRegister|(cuda|hip)HostUnregister|hipExtMallocWithFlags|"
                                     r"cuMem(Alloc|Free|HostAlloc|HostRegister|Create|Release|Map|Unmap|AddressReserve|AddressFree)\w*)(_v\d+)*$")),
    ("launch", re.compile(r"^(cudaLaunch\w*|cuLaunch\w*|cudaGraphLaunch\w*|cuGraphLaunch\w*|hipLaunch\w*|hipModuleLaunch\w*|hipExtModuleLaunch\w*|"
                          r"hipExtLaunch\w*|hipGraphLaunch\w*)")),
)
_ASYNC = re.compile(r"Async")
_MEMCPY_API = re.compile(r"^(cudaMemcpy|cuMemcpy)")
_MEMSET_API = re.compile(r"^(cudaMemset|cuMemset)")
GRAPH_LAUNCH_API = re.compile(r"^(cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch)")
JIT_RANGE = re.compile(r"compil|nvrtc|\bjit\b|_jit|jit_|autotun|codegen|ptxas|inductor|triton", re.IGNORECASE)
DATA_RANGE = re.compile(r"data_?load|dataloader|collate|prefetch|\breader\b|load_data|preprocess|read_batch|next_batch|__next__", re.IGNORECASE)

QUEUED_LATENCY_NS = 100_000  # the longest gap before already queued work that is still the GPU's own launch latency
CAUSES = {
    "gpu_launch_latency": ("work was already queued: the GPU's own launch latency between dependent kernels and copies",
                           "fuse the dependent kernels or capture them in a CUDA graph; this gap cannot be removed from the host"),
    # A GPU starts queued work within microseconds of the work before it; queued work that waits far longer waits on
    # something the export does not hold.
    "queued_waiting": ((f"work was queued, yet the GPU did not start it for over {QUEUED_LATENCY_NS // 1000} us: it waited on something the trace "
                       "does not show (an event from another stream or GPU, a host function in the stream, or another process's or graphics' "
                       "work on the GPU)"),
                       ("see what the stream waits on (cudaStreamWaitEvent, cudaLaunchHostFunc, another GPU) and what else runs on the GPU "
                       "(profile every process; nsys --trace=cuda,opengl,vulkan); on Windows the WDDM driver can hold submissions back in batches")),
    "jit_compile": ("JIT compilation or module loading on the host",
                    ("a one-time cost, not steady state: run a warm-up iteration before profiling (or cache compiled kernels) "
                     "and start the capture after it (nsys --capture-range=cudaProfilerApi or an NVTX range)")),
    "synchronization": ("the host was blocked in a synchronize call",
                        "take the synchronize out of the loop or move it later: record events and query them, so the host keeps queueing work"),
    "synchronous_copy": ("a synchronous memcpy/memset",
                         "use cudaMemcpyAsync from pinned memory on a stream (PyTorch: pin_memory=True, .to(device, non_blocking=True))"),
    "memory_allocation": ("cudaMalloc/cudaFree-style allocation",
                          "allocate once and reuse buffers (a caching allocator, cudaMallocAsync memory pools) instead of allocating in the loop"),
    "launch_overhead": ("the host was busy launching (time inside launch calls)",
                        "launch fewer, larger kernels: fuse them, or capture the sequence in a CUDA graph and replay it"),
    "data_loading": ("data loading on the host",
                     "overlap loading with compute: more DataLoader workers, pinned memory and prefetching"),
    "other_cuda_api": ("other CUDA API calls",
                       "see the calls listed in the evidence; move them out of the hot loop"),
    "unified_memory": ("the host touching managed (unified) memory: its page faults moved the data back page by page",
                       ("prefetch managed memory to where it is used next: cudaMemPrefetchAsync(ptr, bytes, cudaCpuDeviceId) before the "
                       "host reads it (and to the device before the kernels), or use cudaMalloc and one cudaMemcpyAsync")),
    "host_code": ("host code with no CUDA call (Python, CPU work)",
                  "profile the host in that range (nsys --sample=cpu, py-spy) and overlap the CPU work with GPU work or move it off the critical path"),
    # An input with kernels but no CUDA API calls (nsys stats' cuda_gpu_trace, an export trimmed of its runtime table)
    # cannot tell host code from a synchronize or a copy: saying which would be a guess.
    "not_traced": ("unknown: the input has no trace of CUDA API calls to show what the host was doing",
                   "analyze the SQLite export of the run (nsys export --type sqlite; nsys profile -t cuda) to see what the GPU waited for"),
}


CAUSE_CODES = tuple(CAUSES)
# Kernels, runtime calls and copies together up to which independent steps of the analysis run two at once, the second
# on a thread of its own: most steps use one core, and the realistic 2 M-launch export (5.9 M such rows) took 1.3-4 s
# less of its 17.6 (three runs each, this 2-core machine), its peak (in the NVTX pass) unchanged. Beyond, one after
# the other, so that the peak stays within what a 10 M-launch export needs (1.85 GB; under 2 GB is the bound): a
# second step's arrays would come on top of it.
TWO_STEPS_AT_ONCE_MAX_ROWS = 8_000_000
PAGEABLE_ADVICE = "pin the host buffers (cudaHostAlloc / cudaHostRegister; PyTorch: pin_memory=True) so the copies overlap with work"


@dataclass(frozen=True)
class WholeRun:
    """Whole-run findings of one Nsight Systems export; times in ns, shares in %."""

    verdict: dict[str, Any] | None
    devices: list[dict[str, Any]]
    copies: list[dict[str, Any]]
    gaps: list[dict[str, Any]]
    idle_by_cause: list[dict[str, Any]]
    launch: dict[str, Any]
    findings: list[dict[str, Any]]
    notes: list[str]
    nvtx: NvtxRanges  # the NVTX ranges nested and summed per group


def _category_of_names(names: dict[int, str], ids: list[int]) -> dict[int, int]:
    return {i: COMMUNICATION if is_communication(names.get(i, "")) else COMPUTE for i in ids}


@dataclass(frozen=True)
class DeviceSweep:
    """One device's span cut where any of its activities starts or ends: how long each set of categories was active,
    and its idle pieces (the gaps), in time order. Only the idle pieces are kept: the busy time between them is
    busy_of(), and two or three pieces per launch are not held through the rest of the analysis."""

    device_id: int
    first_ns: int  # the first activity's start
    span_ns: int  # from the first activity's start to the last one's end
    time_by_mask: dict[int, int]  # ns per bit mask of the categories active together (0 = idle)
    gaps: pl.DataFrame  # start_ns, duration_ns of each idle piece, in time order
    between_migrations: np.ndarray | None  # per gap: a unified-memory migration just before and just after it

    def busy_of(self) -> BusyTime:
        """Return the device's busy time (any GPU work): its span less the gaps."""
        return BusyTime(self)


class BusyTime:
    """A device's busy time: its span less its gaps (ns), answering how much of [a, b) it covers for many (a, b) at
    once. The gaps are in time order and do not overlap, so they are their own union: nothing is merged or sorted."""

    def __init__(self, sweep: DeviceSweep) -> None:
        self.first_ns, self.last_ns = sweep.first_ns, sweep.first_ns + sweep.span_ns
        # The gaps' own columns (no copy), and the idle time before each: one array of its own per gap, where the
        # ends were a second (millions of gaps per device on the 10 M-launch export: 0.1 GB at its peak).
        self._starts, self._durations = sweep.gaps["start_ns"].to_numpy(), sweep.gaps["duration_ns"].to_numpy()
        self._idle_before = np.zeros(len(self._durations) + 1, dtype=np.int64)
        np.cumsum(self._durations, out=self._idle_before[1:])
        self.busy_ns = sweep.span_ns - int(self._idle_before[-1])

    def _idle_upto(self, t: np.ndarray) -> np.ndarray:
        index = np.searchsorted(self._starts, t, side="right") - 1
        if not len(self._starts):
            return np.zeros(len(t), dtype=np.int64)
        safe = np.clip(index, 0, None)
        inside = np.clip(t - self._starts[safe], 0, self._durations[safe])
        return np.where(index >= 0, self._idle_before[safe] + inside, 0)

    def overlap(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Return the busy time (ns) inside each [a, b), a ≤ b."""
        a, b = np.clip(a, self.first_ns, self.last_ns), np.clip(b, self.first_ns, self.last_ns)
        busy: np.ndarray = (b - a) - (self._idle_upto(b) - self._idle_upto(a))
        return busy


def runs_two_steps_at_once(kernels: pl.DataFrame, api: pl.DataFrame, memops: pl.DataFrame) -> bool:
    """Return whether the analysis of these kernels, runtime calls and copies runs independent steps two at once
    (TWO_STEPS_AT_ONCE_MAX_ROWS)."""
    return kernels.height + api.height + memops.height <= TWO_STEPS_AT_ONCE_MAX_ROWS


_First = TypeVar("_First")
_Second = TypeVar("_Second")
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


class _Steps:
    """Runs independent steps of the analysis one after the other, or two at once where `at_once`."""

    def __init__(self, at_once: bool) -> None:
        self.at_once = at_once

    def both(self, first: Callable[[], _First], second: Callable[[], _Second]) -> tuple[_First, _Second]:
        """Return the results of first() and second(), run in that order or at once. An error in either is raised
        (the first's where both fail) once both have ended: a step is not stopped midway."""
        if not self.at_once:
            return first(), second()
        with ThreadPoolExecutor(max_workers=1) as pool:
            later = pool.submit(second)
            return first(), later.result()

    def each(self, step: Callable[[_Item], _Result], items: list[_Item]) -> list[_Result]:
        """Return step(item) for each item, in their order, run one after the other or two at once."""
        if not self.at_once or len(items) < 2:
            return [step(item) for item in items]
        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(step, items))


def _valid_interval() -> pl.Expr:
    return (pl.col("device_id").is_not_null() & pl.col("start_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))).fill_null(False)


def activity_intervals(kernels: pl.DataFrame, memops: pl.DataFrame, graphs: pl.DataFrame, names: dict[int, str]) -> pl.LazyFrame:
    """Return every GPU activity as (device_id, start_ns, end_ns, category bit as Int8), lazily: a device's rows are
    taken out when it is swept, never all devices' at once."""
    categories = _category_of_names(names, kernels["name_id"].unique().drop_nulls().to_list())
    return pl.concat([
        kernels.lazy().select("device_id", "start_ns", "end_ns",
                              pl.col("name_id").replace_strict(categories, default=COMPUTE, return_dtype=pl.Int8).alias("category")),
        graphs.lazy().select("device_id", "start_ns", "end_ns", pl.lit(COMPUTE, dtype=pl.Int8).alias("category")),
        memops.lazy().select("device_id", "start_ns", "end_ns",
                             pl.when(pl.col("copy_kind").is_in(UNIFIED_KINDS)).then(pl.lit(UNIFIED)).otherwise(pl.lit(COPY)).cast(pl.Int8).alias("category")),
    ])


def sweep_devices(intervals: pl.LazyFrame, migrations: bool) -> tuple[list[DeviceSweep], int]:
    """Return each device's sweep (by device id) and how many activities were left out for having no device or start,
    or an end before their start."""
    valid = _valid_interval()
    counts = intervals.select(pl.len().alias("rows"), valid.sum().alias("valid")).collect().row(0, named=True)
    devices = intervals.filter(valid).select(pl.col("device_id").unique().sort()).collect().to_series().to_list()
    sweeps = [_sweep(device, intervals.filter(valid & (pl.col("device_id") == device)), migrations) for device in devices]
    return sweeps, int(counts["rows"]) - int(counts["valid"])


_CODE_BITS = 3  # an event's code: twice its category's bit index, plus one at an end
_CODE_OF_BIT = np.array([0, 0, 2, 0, 4, 0, 0, 0, 6], dtype=np.int8)  # COMPUTE → 0, COMMUNICATION → 2, COPY → 4, UNIFIED → 6
_SWEEP_BATCH = 1 << 21  # events whose pieces are cut at a time: the per-piece arrays of a batch are a few tens of MB


def _sorted_events(own: pl.LazyFrame) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Return the times (ns) and codes of one device's interval starts and ends (start_ns, end_ns, category) in time
    order, with the first start and the span (ns). The order among events at one time does not matter: a piece
    starts only after the last of them. Only the events are held once they are made: the rows are dropped."""
    code_of_bit = {bit: int(_CODE_OF_BIT[bit]) for bit in (COMPUTE, COMMUNICATION, COPY, UNIFIED)}
    rows = own.select("start_ns", "end_ns", pl.col("category").replace_strict(code_of_bit, return_dtype=pl.Int8).alias("code")).collect()
    first, last = int(rows["start_ns"].min()), int(rows["end_ns"].max())  # type: ignore[arg-type]
    count = rows.height
    codes = np.empty(2 * count, dtype=np.int8)
    codes[:count] = rows["code"].to_numpy()
    codes[count:] = codes[:count] + 1
    if last - first < 2 ** (63 - _CODE_BITS):
        # Time (from the first start) and code packed in one integer and sorted in place: no permutation of millions
        # of events is held, and sorting integers is several times faster than ordering them by a key.
        packed = np.empty(2 * count, dtype=np.int64)
        np.subtract(rows["start_ns"].to_numpy(), first, out=packed[:count])
        np.subtract(rows["end_ns"].to_numpy(), first, out=packed[count:])
        del rows
        packed <<= _CODE_BITS
        packed |= codes
        # Timsort (numpy's stable sort for integers) merges the runs that starts and ends come in (each nearly in
        # time order, as nsys writes rows): this function took 0.24-0.31 s instead of 0.56-0.62 s on the 2 M-launch
        # export.
        packed.sort(kind="stable")
        np.bitwise_and(packed, (1 << _CODE_BITS) - 1, out=codes, casting="unsafe")
        packed >>= _CODE_BITS
        packed += first
        return packed, codes, first, last - first
    # Times too far apart to pack (a damaged export's stray timestamps).
    times = np.concatenate([rows["start_ns"].to_numpy(), rows["end_ns"].to_numpy()])
    del rows
    order = np.argsort(times, kind="stable")
    return times[order], codes[order], first, last - first


def _sweep(device_id: int, own: pl.LazyFrame, migrations: bool) -> DeviceSweep:
    """Return the sweep of one device's intervals (start_ns, end_ns, category bit each, end ≥ start)."""
    times, codes, first, span = _sorted_events(own)
    # The categories active after each event: per category, +1 where one of its intervals starts and -1 where one
    # ends; the running sum (carried from batch to batch) is how many are active.
    mask = np.zeros(len(times), dtype=np.int8)
    present = [bit for bit in (COMPUTE, COMMUNICATION, COPY, UNIFIED) if bool((codes == _CODE_OF_BIT[bit]).any())]
    for bit in present:
        code, active = _CODE_OF_BIT[bit], 0
        for at in range(0, len(times), _SWEEP_BATCH):
            part = codes[at:at + _SWEEP_BATCH]
            running = np.cumsum((part == code).view(np.int8) - (part == code + 1).view(np.int8), dtype=np.int64) + active
            active = int(running[-1])
            mask[at:at + _SWEEP_BATCH] |= (running > 0).view(np.int8) * np.int8(bit)
    del codes
    # A piece runs from one event to the next, where time passes; its categories are those active after the first.
    time_by_mask: dict[int, int] = {}
    gap_starts, gap_durations, piece_masks, gap_pieces = [], [], [], []
    pieces = 0
    for at in range(0, max(len(times) - 1, 0), _SWEEP_BATCH):
        upto = min(at + _SWEEP_BATCH, len(times) - 1)
        cut = np.flatnonzero(times[at + 1:upto + 1] > times[at:upto]) + at
        durations = times[cut + 1] - times[cut]
        masks = mask[cut]
        for m in np.flatnonzero(np.bincount(masks, minlength=16)).tolist():  # masks are 4 bits
            time_by_mask[m] = time_by_mask.get(m, 0) + int(durations[masks == m].sum())
        idle = np.flatnonzero(masks == 0)
        gap_starts.append(times[cut[idle]])
        gap_durations.append(durations[idle])
        if migrations:
            piece_masks.append(masks)
            gap_pieces.append(idle + pieces)
        pieces += len(cut)
    between = None
    if migrations:
        # The pieces either side of an idle one are what the GPU did around it.
        migrating = (np.concatenate(piece_masks or [np.zeros(0, dtype=np.int8)]) & UNIFIED) != 0
        idle = np.concatenate(gap_pieces or [np.zeros(0, dtype=np.int64)])
        before = np.zeros(len(idle), dtype=bool)
        after = np.zeros(len(idle), dtype=bool)
        inside = idle > 0
        after[inside] = migrating[idle[inside] - 1]
        inside = idle < pieces - 1
        before[inside] = migrating[idle[inside] + 1]
        between = after & before
    gaps = pl.DataFrame({"start_ns": np.concatenate(gap_starts or [np.zeros(0, dtype=np.int64)]),
                         "duration_ns": np.concatenate(gap_durations or [np.zeros(0, dtype=np.int64)])},
                        schema={"start_ns": pl.Int64, "duration_ns": pl.Int64})
    return DeviceSweep(device_id, first, span, dict(sorted(time_by_mask.items())), gaps, between)


def _pct(part: float, whole: float) -> float | None:
    return 100.0 * part / whole if whole else None


def _mask_label(mask: int) -> str:
    return "+".join(name for bit, name in enumerate(CATEGORIES) if mask & (1 << bit))


def device_breakdown(sweeps: list[DeviceSweep]) -> list[dict[str, Any]]:
    """Return per device: span, union share of each category, the overlaps, idle, exposed shares and the verdict."""
    devices = []
    for sweep in sweeps:
        device, span, times = sweep.device_id, sweep.span_ns, sweep.time_by_mask
        union = {name: sum(t for m, t in times.items() if m & (1 << bit)) for bit, name in enumerate(CATEGORIES)}
        idle = times.get(0, 0)
        exposed = {
            "compute": union["compute"],
            "communication": sum(t for m, t in times.items() if m & COMMUNICATION and not m & COMPUTE),
            "copy": sum(t for m, t in times.items() if m & (COPY | UNIFIED) and not m & (COMPUTE | COMMUNICATION)),
            "host": idle,
        }
        verdict = max(exposed, key=lambda k: exposed[k])
        breakdown: dict[str, Any] = {f"{name}_pct": _pct(union[name], span) for name in CATEGORIES}
        breakdown["idle_pct"] = _pct(idle, span)
        breakdown["overlaps"] = {_mask_label(m): _pct(t, span) for m, t in times.items() if m.bit_count() > 1}
        breakdown["exclusive"] = {f"{_mask_label(m)}_only_pct": _pct(t, span) for m, t in times.items() if m.bit_count() == 1}
        devices.append({
            "device_id": device,
            "span_ns": span,
            "first_ns": sweep.first_ns,
            "busy_ns": span - idle,
            "idle_ns": idle,
            "busy_pct": _pct(span - idle, span),
            "verdict": verdict if span else None,
            "verdict_share_pct": _pct(exposed[verdict], span),
            "exposed_pct": {k: _pct(v, span) for k, v in exposed.items()},
            "breakdown": breakdown,
        })
    return devices


_EXPOSED_WORDS = {"compute": "kernels", "communication": "communication alone", "copy": "copies alone", "host": "idle"}
_EXPOSED_VERBS = {"compute": "take", "communication": "takes", "copy": "take", "host": "takes"}
# What idle time is, by the causes of most of it: the host's (the verdict is host-bound), the GPU's own with its next
# work queued already (launch latency, or a wait the trace does not show: the host was ahead), or unknown where the
# input has no CUDA API calls to tell (nsys stats' cuda_gpu_trace). Each with its verdict words and its rule's name.
IDLE_KINDS = {
    "host": ("host-bound (GPU idle)", "host_bound"),
    "queued": ("GPU idle with its work queued (not host-bound)", "gpu_idle_queued"),
    "untraced": ("GPU idle, for reasons this input does not show", "gpu_idle_untraced"),
}
_CAUSES_OF_KIND = {"queued": ("gpu_launch_latency", "queued_waiting"), "untraced": ("not_traced",)}
VERDICT_WORDS = {"compute": "compute-bound", "communication": "communication-bound", "copy": "copy-bound", "host": IDLE_KINDS["host"][0]}
IDLE_MAJORITY = 0.5  # the share of the idle time whose causes decide its kind


def idle_kind(idle_by_cause: dict[str, int]) -> tuple[str, float]:
    """Return the kind of the idle time (an IDLE_KINDS key) from its ns per gap cause, and the share (0-1) of the idle
    time that makes it that kind (1.0 for host)."""
    idle = sum(idle_by_cause.values())
    for kind, causes in _CAUSES_OF_KIND.items():
        share = sum(idle_by_cause.get(cause, 0) for cause in causes) / idle if idle else 0.0
        if share > IDLE_MAJORITY:
            return kind, share
    return "host", 1.0


def verdict_sentence(exposed_pct: dict[str, float | None], verdict: str, subject: str, idle_by_cause: dict[str, int] | None = None) -> str:
    """Return e.g. `copy-bound: copies alone take 97.0% of GPU 0's span (kernels 2.3%, idle 0.7%)`. An idle verdict
    is worded by idle_kind of `idle_by_cause` (ns per gap cause): host-bound only where the host kept the GPU waiting."""
    others = ", ".join(f"{_EXPOSED_WORDS[k]} {v:.1f}%" for k, v in exposed_pct.items() if k != verdict and v is not None and v >= 0.05)
    share = exposed_pct.get(verdict) or 0.0
    words, kind, kind_share = VERDICT_WORDS[verdict], None, 1.0
    if verdict == "host":
        kind, kind_share = idle_kind(idle_by_cause or {})
        words = IDLE_KINDS[kind][0]
    sentence = f"{words}: {_EXPOSED_WORDS[verdict]} {_EXPOSED_VERBS[verdict]} {share:.1f}% of {subject}" + (f" ({others})" if others else "")
    if kind == "queued":
        sentence += (f"; in {kind_share * 100:.0f}% of the idle time the next kernel or copy was already queued: the GPU's own "
                     "launch latency, or a wait the trace does not show")
    elif kind == "untraced":
        sentence += "; the input holds no trace of CUDA API calls to tell whether the host or the GPU kept it waiting"
    return sentence


def run_verdict(devices: list[dict[str, Any]], idle_by_cause: dict[str, int] | None = None) -> dict[str, Any] | None:
    """Return the verdict over all devices (each device's exposed shares weighted by its span); `idle_by_cause` (ns per
    gap cause, all devices) words an idle verdict."""
    total = sum(d["span_ns"] for d in devices)
    if not total:
        return None
    exposed = {k: sum((d["exposed_pct"][k] or 0.0) * d["span_ns"] for d in devices) / total for k in VERDICT_WORDS}
    verdict = max(exposed, key=lambda k: exposed[k])
    subject = "the GPU's span" if len(devices) == 1 else f"the {len(devices)} GPUs' spans"
    message = verdict_sentence(exposed, verdict, subject, idle_by_cause)
    return {"verdict": verdict, "share_pct": exposed[verdict], "exposed_pct": exposed, "message": message}


def copy_summary(memops: pl.DataFrame, link_peaks: dict[int, tuple[float | None, str | None]]) -> list[dict[str, Any]]:
    """Return per device and direction: count, bytes, time, achieved GB/s, pageable count and the host link's peak."""
    if memops.height == 0:
        return []
    frame = memops.filter(pl.col("end_ns") >= pl.col("start_ns")).with_columns(
        pl.when(pl.col("operation") == "memset").then(pl.lit("memset"))
        .otherwise(pl.col("copy_kind").replace_strict(DIRECTIONS, default="unknown", return_dtype=pl.String)).alias("direction"),
        ((pl.col("src_kind") == "Pageable") | (pl.col("dst_kind") == "Pageable")).fill_null(False).alias("pageable"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("d"),
    )
    grouped = frame.group_by("device_id", "direction").agg(
        pl.len().alias("count"), pl.col("bytes").sum().alias("bytes"), pl.col("d").sum().alias("duration_ns"),
        pl.col("pageable").sum().alias("pageable_count"), pl.col("bytes").filter(pl.col("pageable")).sum().alias("pageable_bytes"),
        # Copies of unknown size (nsys stats prints sizes in MB to three decimals: a few hundred bytes read 0.000)
        # take no part in the rate.
        pl.col("bytes").count().alias("_sized"), pl.col("d").filter(pl.col("bytes").is_not_null()).sum().alias("_sized_ns"),
    ).sort("device_id", "duration_ns", descending=[False, True])
    rows = []
    for row in grouped.iter_rows(named=True):
        sized, sized_ns = row.pop("_sized"), row.pop("_sized_ns")
        if not sized:
            row["bytes"] = row["pageable_bytes"] = None
        size = row["bytes"] or 0
        peak, link = link_peaks.get(row["device_id"], (None, None)) if row["direction"] in HOST_LINK_DIRECTIONS else (None, None)
        rate = size / sized_ns if sized and sized_ns and row["direction"] != "memset" else None  # bytes per ns = GB/s
        rows.append({**row, "gb_per_s": rate, "link_gb_per_s": peak / 1e9 if peak else None, "link": link,
                     "link_pct": _pct(rate, peak / 1e9) if rate is not None and peak else None})
    return rows


class Coverage:
    """The union of a set of intervals, answering how much of [a, b) it covers for many (a, b) at once."""

    _BATCH = 1 << 20  # starts looked up at a time, so the lookup holds a few MB whatever the intervals

    def __init__(self, starts: np.ndarray, ends: np.ndarray, presorted: bool = False, in_place: bool = False) -> None:
        # The union's blocks come from the starts and the ends each sorted on their own, so no permutation of millions
        # of intervals is held: a block begins at a start before which every interval with an earlier start has ended
        # (the ends before it are as many as the starts before it), and ends at the latest end before the next
        # block's start, which is the j-th smallest end when j intervals start before that block. Touching intervals
        # are one block. `presorted`: the starts are in order already; `in_place`: the arrays are the caller's to sort.
        # Stable (timsort): starts and ends come nearly in order, which it exploits and numpy's quicksort does not
        # (_coverage, which builds these unions, took 0.23-0.27 s instead of 0.66-0.70 s on the 2 M-launch export).
        if in_place:
            ends.sort(kind="stable")
            if not presorted:
                starts.sort(kind="stable")
        else:
            starts = starts if presorted else np.sort(starts, kind="stable")
            ends = np.sort(ends, kind="stable")
        count = len(starts)
        # Flags, not indices: a block's first interval, and its last (the one before the next block's first).
        first = np.zeros(count, dtype=bool)
        for at in range(0, count, self._BATCH):
            first[at:at + self._BATCH] = np.searchsorted(ends, starts[at:at + self._BATCH], side="left") == np.arange(at, min(at + self._BATCH, count))
        last = np.ones(count, dtype=bool)
        last[:-1] = first[1:]
        blocks = int(np.count_nonzero(first))
        if in_place and blocks > count // 2:
            # The blocks are written over the caller's arrays, which are the union's own: launch calls barely overlap,
            # so the union has nearly as many blocks as intervals, and a second pair of arrays would be held beside
            # them. A batch at a time, front to back: a batch's blocks go where none is left to read.
            for values, flags in ((starts, first), (ends, last)):
                written = 0
                for at in range(0, count, self._BATCH):
                    kept = values[at:at + self._BATCH][flags[at:at + self._BATCH]]
                    values[written:written + len(kept)] = kept
                    written += len(kept)
            starts, ends = starts[:blocks], ends[:blocks]
        else:
            starts, ends = starts[first], ends[last]
        del first, last
        self.starts, self.ends = starts.astype(np.int64, copy=False), ends.astype(np.int64, copy=False)
        self.before = np.zeros(blocks + 1, dtype=np.int64)
        np.subtract(self.ends, self.starts, out=self.before[1:])
        np.cumsum(self.before[1:], out=self.before[1:])

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Return the covered time (ns) from the first interval up to each t."""
        index = np.searchsorted(self.starts, t, side="right") - 1
        safe = np.clip(index, 0, None)
        if not len(self.starts):
            return np.zeros(len(t), dtype=np.int64)
        inside = np.clip(t - self.starts[safe], 0, self.ends[safe] - self.starts[safe])
        return np.where(index >= 0, self.before[safe] + inside, 0)

    def overlap(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Return the covered time (ns) inside each [a, b), a batch of windows at a time: a window's lookup makes
        several arrays of its own, which millions of gaps at once held by the hundred MB."""
        covered = np.empty(len(a), dtype=np.int64)
        for at in range(0, len(a), self._BATCH):
            covered[at:at + self._BATCH] = self.upto(b[at:at + self._BATCH]) - self.upto(a[at:at + self._BATCH])
        return covered


def distinct_names(column: pl.Series) -> list[str]:
    """Return the distinct names of a name column (CUDA calls, NVTX texts): millions of rows, a few distinct names,
    each matched against patterns once rather than row by row."""
    return column.unique().drop_nulls().cast(pl.String).to_list()


def launch_calls(api: pl.DataFrame) -> int:
    """Return how many kernel and graph launch calls the CUDA API trace holds."""
    if api.height == 0:
        return 0
    launch = dict(_API_CLASSES)["launch"]
    launching = [name for name in distinct_names(api["name"]) if launch.search(name)]
    return int(api.select(pl.col("name").cast(pl.String).is_in(launching).sum()).item())


def _api_class(name: str) -> str:
    for label, pattern in _API_CLASSES:
        if pattern.search(name):
            return label
    return "other_cuda_api"


API_CLASS = pl.Enum(["module_load", "synchronization", "synchronous_copy", "memory_allocation", "launch", "other_cuda_api"])


def api_classes(api: pl.DataFrame, first_launches: pl.DataFrame | None = None) -> pl.DataFrame:
    """Return each CUDA API call's start_ns, end_ns, pid and `class` (API_CLASS): module_load, synchronization,
    synchronous_copy, memory_allocation, launch or other_cuda_api. A kernel's first launch call that takes a
    millisecond or more counts as module loading (`first_launches`: pid, correlation_id of each kernel's first
    launch); later slow launches are a full queue. The times and processes are the calls' own columns, not copies:
    only the class (an Enum) is new, for the millions of calls held through the gap analysis."""
    if api.height == 0:
        return api.select("start_ns", "end_ns", "pid", pl.lit(None, dtype=API_CLASS).alias("class"))
    names = distinct_names(api["name"])
    mapping = {name: _api_class(name) for name in names}
    # A graph launch replays kernels whose modules were loaded when the graph was instantiated: a slow one is the
    # graph's own launch cost (HIP launches a graph's nodes one by one from the host), never a module being loaded.
    graph_launches = [name for name in names if GRAPH_LAUNCH_API.search(name)]
    # Replaced on the categorical itself: cast to strings first, the realistic 2 M export's 3.4 M call names were
    # written out only to be replaced (0.12 s, where the whole of api_classes now takes 0.09 s).
    named = pl.col("name").replace_strict(mapping, default="other_cuda_api", return_dtype=API_CLASS)
    # A first launch is found by its (process, correlation id) in the few first launches, as one number: a join
    # would hash millions of calls to mark a few hundred.
    key = _call_number()
    firsts = first_launches.select(key).to_series().drop_nulls() if first_launches is not None and first_launches.height else pl.Series([], dtype=pl.Int64)
    slow_launch = ((named == "launch") & ~pl.col("name").cast(pl.String).is_in(graph_launches)
                   & ((pl.col("end_ns") - pl.col("start_ns")) >= SLOW_LAUNCH_CALL_NS) & key.is_in(firsts.implode()).fill_null(False))
    return api.select("start_ns", "end_ns", "pid", pl.when(slow_launch).then(pl.lit("module_load", dtype=API_CLASS)).otherwise(named).alias("class"))


def _host_rows(frame: pl.DataFrame, pids: set[int], ids_known: bool | None = None) -> pl.Expr:
    """A filter for the rows of a host-side frame from the processes that own a device (every row where the export
    has no pids). A filter, not the rows: each device would otherwise copy millions of NVTX and API rows.
    `ids_known`: whether any row of the whole table has its process or thread, where `frame` holds only some rows."""
    by_thread = "pid" not in frame.columns  # NVTX ranges carry their process in the thread id
    if ids_known is None:
        ids_known = frame["tid" if by_thread else "pid"].null_count() < frame.height
    if not pids or frame.height == 0 or not ids_known:
        return pl.lit(True)
    return pl.col("tid").is_in(threads_of(frame["tid"], pids).implode()) if by_thread else pl.col("pid").is_in(list(pids))


def _coverage(frame: pl.DataFrame, rows: pl.Expr | None = None) -> Coverage:
    """Return the union of the frame's rows that `rows` keeps (all where None) and that have an end at or after their
    start. The kept times are taken out once, into arrays the union sorts in place: a filtered frame, then arrays
    sorted from it, copied millions of launch calls three times per device."""
    keep = (pl.col("end_ns") >= pl.col("start_ns")).fill_null(False)
    wanted = frame.select(keep if rows is None else keep & rows).to_series().to_numpy()
    return Coverage(_taken(frame["start_ns"], wanted), _taken(frame["end_ns"], wanted), in_place=True)


def _taken(times: pl.Series, wanted: np.ndarray) -> np.ndarray:
    """Return the values (int64 ns) of `times` where `wanted` is true, copied a chunk of the column at a time: a column
    read in chunks made whole for numpy first was a second copy of ten million calls' times."""
    taken = np.empty(int(np.count_nonzero(wanted)), dtype=np.int64)
    read = written = 0
    for chunk in times.get_chunks():
        # Nulls (never wanted) filled first: a column with nulls would come out as floats, inexact beyond 2**53 ns.
        values = (chunk.fill_null(0) if chunk.null_count() else chunk).to_numpy()
        kept = values[wanted[read:read + len(values)]]
        taken[written:written + len(kept)] = kept
        read, written = read + len(values), written + len(kept)
    return taken


_GAP_API_CLASSES = ("synchronization", "synchronous_copy", "memory_allocation", "launch")
_CAUSE_OF_CLASS = {"synchronization": "synchronization", "synchronous_copy": "synchronous_copy", "memory_allocation": "memory_allocation",
                   "launch": "launch_overhead"}


_JIT_OR_DATA = f"(?i)(?:{JIT_RANGE.pattern})|(?:{DATA_RANGE.pattern})"


def range_names_matching(texts: pl.Series) -> tuple[list[str], list[str]]:
    """Return, of the distinct NVTX texts, those that say JIT/module loading and those that say data loading. Names
    repeat millions of times but are few: each distinct one is matched once, for every device."""
    texts = texts.cast(pl.String)
    either = texts.filter(texts.str.contains(_JIT_OR_DATA))
    return [either.filter(either.str.contains("(?i)" + pattern.pattern)).sort().to_list() for pattern in (JIT_RANGE, DATA_RANGE)]  # type: ignore[return-value]


def gap_causes(gaps: pl.DataFrame, classes: pl.DataFrame, jit_ranges: pl.DataFrame, data_ranges: pl.DataFrame, queued_before: np.ndarray,
               calls_host: pl.Expr | None = None, between_migrations: np.ndarray | None = None, host_traced: bool = True) -> np.ndarray:
    """Return a cause for each gap of one device (int8: its index in CAUSE_CODES), from the host activity of its
    processes.

    `classes` is api_classes' frame, `calls_host` (_host_rows) keeps the device's processes in it; `jit_ranges` and
    `data_ranges` are the NVTX ranges of those processes that say JIT/module loading and data loading
    (range_names_matching); `between_migrations` marks the gaps with a unified-memory migration on each side. In order: the kernel,
    copy or graph that ends the gap was already queued when it began (GPU launch latency; `queued_waiting` beyond
    QUEUED_LATENCY_NS); JIT/module loading covers half the gap; one class of CUDA call covers half of it; a
    data-loading NVTX range does; other CUDA calls do; a module is loaded in it (the host code before the load
    compiles it); migrations on both sides (the host faulting managed memory back); else host code. Where no CUDA API
    call was traced at all (`host_traced` false) the host rules cannot run: those gaps are `not_traced`.
    """
    if gaps.height == 0:
        return np.zeros(0, dtype=np.int8)
    code = CAUSE_CODES.index
    # Codes, not names: a run of ten million launches has millions of gaps, and only the listed ones are named.
    codes = np.full(gaps.height, code("gpu_launch_latency"), dtype=np.int8)
    codes[gaps["duration_ns"].to_numpy() > QUEUED_LATENCY_NS] = code("queued_waiting")
    # A gap before already queued work is the GPU's whatever the host did: only the others are looked into
    # (most gaps between millions of kernels are queued ones).
    open_gaps = np.flatnonzero(~np.asarray(queued_before, dtype=bool))
    if len(open_gaps):
        starts, durations = gaps["start_ns"].to_numpy(), gaps["duration_ns"].to_numpy()
        a = starts[open_gaps]
        b = a + durations[open_gaps]
        codes[open_gaps] = _host_cause(a, b, classes, jit_ranges, data_ranges, calls_host) if host_traced else code("not_traced")
    if between_migrations is not None:
        # Host code between page migrations is the host touching managed memory: each fault moves the next pages.
        codes[np.isin(codes, [code("host_code"), code("not_traced")]) & np.asarray(between_migrations, dtype=bool)] = code("unified_memory")
    return codes


def _host_cause(a: np.ndarray, b: np.ndarray, classes: pl.DataFrame, jit_ranges: pl.DataFrame, data_ranges: pl.DataFrame,
                calls_host: pl.Expr | None) -> np.ndarray:
    """Return the CAUSE_CODES index of each gap [a, b) that no queued kernel explains, from gap_causes' host rules."""
    half = (b - a) / 2
    host = pl.lit(True) if calls_host is None else calls_host
    present = set(classes.select(pl.col("class").filter(host).unique().cast(pl.String)).to_series().to_list())

    def covered(label: str) -> np.ndarray:
        # One class's calls at a time (launch calls are most of millions): never every class's copy at once.
        if label not in present:
            return np.zeros(len(a), dtype=np.int64)
        return _coverage(classes, host & (pl.col("class") == label)).overlap(a, b)

    code = CAUSE_CODES.index
    # Each coverage is turned at once into the flags the choice below needs: millions of open gaps, and an array of
    # times per class kept until the end held several hundred MB at 10 M launches.
    loading = covered("module_load")
    loads = loading > 0
    jit = (loading >= half) | (_coverage(jit_ranges).overlap(a, b) >= half)  # the larger of the two covers half
    del loading
    # The class of CUDA call that covers most of each gap (the first in _GAP_API_CLASSES on ties); a class with no
    # calls covers nothing and can win no gap.
    most = np.zeros(len(a), dtype=np.int64)
    best_cause = np.full(len(a), code(_CAUSE_OF_CLASS[_GAP_API_CLASSES[0]]), dtype=np.int8)
    for label in _GAP_API_CLASSES:
        if label in present:
            overlap = covered(label)
            best_cause[overlap > most] = code(_CAUSE_OF_CLASS[label])
            np.maximum(most, overlap, out=most)
            del overlap
    mostly = most >= half
    del most
    other = covered("other_cuda_api") >= half
    data = _coverage(data_ranges).overlap(a, b) >= half
    # The same order as gap_causes' docstring, one vectorised choice per gap.
    # Host code in a gap that also loads a module is, all but always, compiling that module first (CuPy and Numba
    # through NVRTC, Triton, torch.compile): the compiler is no CUDA call, the load that follows it is.
    chosen: np.ndarray = np.select(
        [jit, mostly, data, other, loads],
        [code("jit_compile"), best_cause, code("data_loading"), code("other_cuda_api"), code("jit_compile")],
        default=code("host_code"),
    ).astype(np.int8)
    return chosen


def _overlapping_any(frame: pl.DataFrame, starts: np.ndarray, ends: np.ndarray, rows: pl.Expr | None = None) -> pl.DataFrame:
    """Return the rows of a timed frame (those `rows` keeps) that overlap at least one of the (few) intervals; a row
    without an end counts as an instant."""
    if frame.height == 0 or len(starts) == 0:
        return frame.head(0)
    row_start, row_end = pl.col("start_ns"), pl.coalesce("end_ns", "start_ns")
    # One comparison per interval (at most LISTED_GAPS of them) over bit masks: ten million NVTX rows are scanned
    # without an index or a copy of their times.
    hit = pl.any_horizontal([(row_start < int(b)) & (row_end > int(a)) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)])
    return frame.filter(hit & (pl.lit(True) if rows is None else rows))


@dataclass(frozen=True)
class NvtxPass:
    """What the whole-run analysis takes from the NVTX rows, in one pass over them (read_nvtx).

    `ranges`: nested and summed per group; `texts`: the distinct texts; `named`: the ranges whose text says JIT/module
    loading or data loading (range_names_matching); `near`: the rows (marks too) that overlap one of the gaps listed;
    `threads_known`: whether any row has a thread id.
    """

    ranges: NvtxRanges
    texts: pl.Series
    named: pl.DataFrame
    near: pl.DataFrame
    threads_known: bool


def read_nvtx(chunks: Callable[[], Iterable[pl.DataFrame]], launches: pl.DataFrame | LaunchCalls, starts: np.ndarray, ends: np.ndarray) -> NvtxPass:
    """Return the NvtxPass of the NVTX rows that `chunks()` yields in the input's row order (NSYS_NVTX frames),
    `starts` and `ends` being the listed gaps of every device, `launches` launch_records' frame or its LaunchCalls.
    Only the per-group sums and the few rows the gaps need are kept. Rows not in start order per thread (RangesOutOfOrder) are read again and nested as one chunk."""
    try:
        return _read_nvtx(chunks(), launches, starts, ends)
    except RangesOutOfOrder:
        return _read_nvtx([pl.concat(list(chunks()), rechunk=False)], launches, starts, ends)


def _read_nvtx(chunks: Iterable[pl.DataFrame], launches: pl.DataFrame | LaunchCalls, starts: np.ndarray, ends: np.ndarray) -> NvtxPass:
    nester = RangeNester(launches)
    texts: list[pl.Series] = []
    named: list[pl.DataFrame] = []
    near: list[pl.DataFrame] = []
    says: dict[str, bool] = {}  # text → whether it says JIT or data loading
    threads_known = False
    for chunk in chunks:
        nester.add(chunk)
        distinct = chunk["text"].unique().drop_nulls().cast(pl.String)
        texts.append(distinct)
        distinct_texts = distinct.to_list()
        new = [text for text in distinct_texts if text not in says]
        if new:
            says.update(zip(new, pl.Series(new, dtype=pl.String).str.contains(_JIT_OR_DATA).to_list(), strict=True))
        matching = [text for text in distinct_texts if says[text]]
        if matching:
            named.append(chunk.filter((pl.col("kind") != "Mark") & pl.col("text").cast(pl.String).is_in(matching)))
        near.append(_overlapping_any(chunk, starts, ends))
        threads_known = threads_known or chunk["tid"].null_count() < chunk.height
        del chunk
    empty = near[0].head(0) if near else pl.DataFrame(schema=NSYS_NVTX)
    return NvtxPass(nester.finish(), pl.concat(texts).unique().sort() if texts else pl.Series("text", [], dtype=pl.String),
                    pl.concat(named) if named else empty, pl.concat(near) if near else empty, threads_known)


def _gap_evidence(start: int, end: int, api: pl.DataFrame, nvtx: pl.DataFrame) -> dict[str, Any]:
    """Return what the host did during one gap: the NVTX ranges around it and the CUDA calls in it, by time."""
    length = end - start
    overlapping = nvtx.filter((pl.col("kind") != "Mark") & (pl.col("start_ns") < end) & (pl.col("end_ns") > start)).with_columns(
        (pl.min_horizontal(pl.col("end_ns"), pl.lit(end)) - pl.max_horizontal(pl.col("start_ns"), pl.lit(start))).alias("overlap"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("length"),
    )
    covering = overlapping.filter(pl.col("overlap") * 2 >= length).sort("length")
    innermost = covering.row(0, named=True) if covering.height else None
    outermost = overlapping.sort("length", descending=True).row(0, named=True) if overlapping.height else None
    calls = api.filter((pl.col("start_ns") < end) & (pl.col("end_ns") > start)).with_columns(
        (pl.min_horizontal(pl.col("end_ns"), pl.lit(end)) - pl.max_horizontal(pl.col("start_ns"), pl.lit(start))).alias("overlap"))
    top_calls = calls.group_by(pl.col("name").cast(pl.String)).agg(pl.len().alias("count"), pl.col("overlap").sum().alias("overlap_ns")).sort(
        ["overlap_ns", "name"], descending=[True, False]).head(3)

    def describe(row: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if row is None else {"name": row["text"] or "<unnamed>", "duration_ns": int(row["length"]), "overlap_ns": int(row["overlap"])}

    return {
        "nvtx_innermost": describe(innermost),
        "nvtx_outermost": describe(outermost) if outermost is not None and (innermost is None or outermost["text"] != innermost["text"]) else None,
        "cuda_calls": [{"name": r["name"], "count": r["count"], "overlap_ns": int(r["overlap_ns"])} for r in top_calls.iter_rows(named=True)],
    }


_CALL_BATCH = 1 << 20  # calls looked up at a time


def launching_calls(work: pl.DataFrame, api: pl.DataFrame) -> tuple[pl.Series, np.ndarray]:
    """Return which rows of `work` (kernels, copies, graph executions) have their launching call in `api`, as a mask,
    and the row of that call in `api` for each such row, in order: the same process and correlation id, or the
    correlation id alone where a side has no process ids (then a row lacking its process matches nothing). Where
    calls repeat a number the work asks for, each row takes the latest call with its number that started at or
    before it (_latest_calls_before)."""
    if api.height == 0 or work.height == 0 or work["correlation_id"].null_count() == work.height:
        return pl.Series(np.zeros(work.height, dtype=bool)), np.zeros(0, dtype=np.int64)
    by_pid = work["pid"].null_count() < work.height and api["pid"].null_count() < api.height
    # The numbers the work asks for, sorted, and each call looked up among them by binary search, a batch of calls at
    # a time, its numbers computed for that batch alone: neither every call's number nor a permutation of the calls
    # (millions more than the copies, and more than the kernels) is held, which an argsort or a hash join of them
    # did (the 10 M-launch export's copies: +0.63 GB).
    wanted = _call_numbers(work, by_pid)
    asked = np.sort(wanted[wanted >= 0], kind="stable")
    # The work's own numbers are made again at the end, a batch at a time, rather than held through the pass over the
    # calls: with the lookups of the end done whole, the 10 M-launch export's kernels took 0.4 GB here.
    del wanted
    if len(asked) > 1:
        # Sorted, then one of each (numpy's unique hashes first: seconds for millions of kernels).
        asked = asked[np.concatenate([[True], asked[1:] != asked[:-1]])]
    call_of: npt.NDArray[np.signedinteger[Any]] = np.full(len(asked), -1, dtype=np.int32 if api.height < 2**31 else np.int64)
    hits = 0
    for at in range(0, api.height, _CALL_BATCH):
        part = _call_numbers(api.slice(at, _CALL_BATCH), by_pid)
        index = np.searchsorted(asked, part)
        hit = index < len(asked)
        hit[hit] = asked[index[hit]] == part[hit]
        rows = np.flatnonzero(hit)
        call_of[index[rows]] = rows + at
        hits += len(rows)
    if hits > np.count_nonzero(call_of >= 0):
        # Some number the work asks for has several calls (a merged or damaged export): which one launched each row
        # depends on time. Numbers no work asks for may repeat without changing any match.
        del call_of
        numbers = _call_numbers(api, by_pid)
        return _latest_calls_before(work, api, _call_numbers(work, by_pid), numbers, np.flatnonzero(numbers >= 0))
    found_parts, call_parts = [], []
    for at in range(0, work.height, _CALL_BATCH):
        part = _call_numbers(work.slice(at, _CALL_BATCH), by_pid)
        found = part >= 0  # every usable number the work asks for is in `asked`
        calls = call_of[np.searchsorted(asked, part[found])]
        found[found] = calls >= 0
        found_parts.append(found)
        call_parts.append(calls[calls >= 0])
    return pl.Series(np.concatenate(found_parts)), np.concatenate(call_parts)


def _call_numbers(frame: pl.DataFrame, by_pid: bool) -> npt.NDArray[np.int64]:
    """Return each row's _call_number (int64), -1 where it has none or, `by_pid`, where its process is missing."""
    key = pl.when(pl.col("pid").is_not_null() if by_pid else pl.lit(True)).then(_call_number(by_pid)).fill_null(-1)
    return frame.select(key).to_series().to_numpy()


def _latest_calls_before(work: pl.DataFrame, api: pl.DataFrame, wanted: np.ndarray, numbers: np.ndarray,
                         usable: np.ndarray) -> tuple[pl.Series, np.ndarray]:
    """launching_calls where calls repeat their (process, correlation id), as in a merged or damaged export: each row
    of `work` is matched to the latest call with its number that started at or before it (a launch precedes its work),
    in one as-of join per number, so no number matches more than one call and nothing grows with the repeats."""
    calls = pl.DataFrame({"key": numbers[usable], "call_start": api["start_ns"].to_numpy()[usable], "call": usable}).drop_nulls().sort("call_start")
    rows = pl.DataFrame({"key": wanted, "start": work["start_ns"], "row": np.arange(work.height)}).filter(
        (pl.col("key") >= 0) & pl.col("start").is_not_null()).sort("start")
    matched = rows.join_asof(calls, left_on="start", right_on="call_start", by="key", strategy="backward", check_sortedness=False).filter(
        pl.col("call").is_not_null()).sort("row")
    found = np.zeros(work.height, dtype=bool)
    found[matched["row"].to_numpy()] = True
    return pl.Series(found), matched["call"].to_numpy().astype(np.int64)


def repeated_call_numbers(api: pl.DataFrame) -> int:
    """Return how many CUDA calls share their (process, correlation id) with an earlier call: 0 in an export as nsys
    writes it, where the ids are unique within a process."""
    if api.height == 0 or api["correlation_id"].null_count() == api.height:
        return 0
    numbers = api.select(_call_number(api["pid"].null_count() < api.height)).to_series().drop_nulls().to_numpy()
    if len(numbers) < 2:
        return 0
    numbers = np.sort(numbers, kind="stable")
    return int((numbers[1:] == numbers[:-1]).sum())


def first_launch_of_each_kernel(kernels: pl.DataFrame) -> pl.DataFrame:
    """Return the pid and correlation id of each kernel name's first launch (its earliest start; the first such row
    where several start at once), among kernels with a correlation id."""
    # Kernels of no known name are one more name, as in a group_by (a join matches no null).
    launched = kernels.lazy().filter(pl.col("correlation_id").is_not_null()).with_row_index("row").with_columns(pl.col("name_id").fill_null(-1))
    # Each name's first start (a few hundred names), then the rows that start then: a group_by gathering from every
    # row held the row indices of every group, 0.3 GB over ten million kernels (the 10 M-launch export's peak).
    firsts = launched.group_by("name_id").agg(pl.col("start_ns").min())
    return (launched.join(firsts, on=["name_id", "start_ns"], how="semi").select("name_id", "row", "pid", "correlation_id").collect()
            .sort("row").group_by("name_id", maintain_order=True).first().select("pid", "correlation_id"))


def launch_records(kernels: pl.DataFrame, api: pl.DataFrame) -> pl.DataFrame:
    """Return kernels joined to the API call that launched them (launching_calls): device_id, start_ns, end_ns,
    graph_node_id, name_id, call_start_ns, call_end_ns, tid, in kernel order."""
    columns = schema_of({**{name: NSYS_KERNELS[name] for name in ("device_id", "start_ns", "end_ns", "graph_node_id", "name_id")},
                         "call_start_ns": pl.Int64, "call_end_ns": pl.Int64, "tid": pl.Int64})
    found, call = launching_calls(kernels, api)
    if len(call) == 0:
        return pl.DataFrame(schema=columns)
    frame = kernels.select("device_id", "start_ns", "end_ns", "graph_node_id", "name_id").filter(found)
    return frame.with_columns(
        api["start_ns"].gather(call).alias("call_start_ns"), api["end_ns"].gather(call).alias("call_end_ns"), api["tid"].gather(call).alias("tid"),
    ).select(list(columns))


def queued_starts(launches: pl.DataFrame, memops: pl.DataFrame, graphs: pl.DataFrame, api: pl.DataFrame) -> list[pl.DataFrame]:
    """Return (device_id, start_ns, call_end_ns) of the GPU work whose launching call is known, as frames of kernels
    (launch_records' frame itself, not a copy of its ten million rows), copies and memsets, whole-graph executions,
    each matched to its call as kernels are (launching_calls). A gap before work whose call had returned by the gap's
    start is the GPU's own: the work was queued."""
    parts = [launches.select("device_id", "start_ns", "call_end_ns")]
    for work in (memops, graphs):
        found, call = launching_calls(work, api)
        if len(call):
            parts.append(work.select("device_id", "start_ns").filter(found).with_columns(api["end_ns"].gather(call).alias("call_end_ns")))
    return parts


def _call_number(by_pid: bool = True) -> pl.Expr:
    """A CUDA call's (process, correlation id) as one Int64: the process id, offset by one (a missing one as 0) and
    clipped into 31 bits, above CUPTI's 32-bit correlation id; null where the id is missing or outside 32 bits (a
    damaged cell). Process ids clipped together belong to damaged rows only."""
    correlation = pl.col("correlation_id").cast(pl.Int64)
    process = (pl.col("pid").fill_null(-1).clip(-1, 2**31 - 2).cast(pl.Int64) + 1) if by_pid else pl.lit(0, dtype=pl.Int64)
    return pl.when(correlation.is_between(0, 2**32 - 1)).then(process * 2**32 + correlation)


def _quantile(series: pl.Series, q: float) -> float | None:
    """The q-quantile of the known values, or None when there are none (a damaged or trimmed column)."""
    known = series.drop_nulls()
    return float(known.quantile(q)) if known.len() else None  # type: ignore[arg-type]


def launch_statistics(launches: pl.DataFrame, kernels: pl.DataFrame, api: pl.DataFrame) -> dict[str, Any]:
    """Return CPU launch → GPU start latency (median, p99 ns) of kernels launched one by one, the launch calls' own
    cost, and how many kernels were replayed from CUDA graphs."""
    direct = launches.filter(pl.col("graph_node_id").is_null())
    latency = (direct["start_ns"] - direct["call_start_ns"]).filter((direct["start_ns"] - direct["call_start_ns"]) >= 0)
    call = direct["call_end_ns"] - direct["call_start_ns"]
    graph_calls = int(api["name"].is_in([n for n in distinct_names(api["name"]) if GRAPH_LAUNCH_API.search(n)]).sum()) if api.height else 0
    return {
        "kernels_joined": launches.height,
        "median_latency_ns": _quantile(latency, 0.5),
        "p99_latency_ns": _quantile(latency, 0.99),
        "median_launch_call_ns": _quantile(call, 0.5),
        "graph_launched_kernels": int(kernels["graph_node_id"].is_not_null().sum()) if kernels.height else 0,
        "graph_launches": graph_calls,
    }


def tiny_kernel_stretches(kernels: pl.DataFrame) -> dict[str, Any]:
    """Return launch-bound evidence: runs of ≥ LAUNCH_BOUND_STRETCH consecutive kernels (per device, in start order)
    each under 10 us that wait longer before they start than they run, never counting kernels replayed from a CUDA
    graph. Kernels without a start or an end are not in any run. One device's kernels are held at a time."""
    if kernels.height == 0:
        return {"launches": 0, "stretches": 0, "stretch_ns": 0, "idle_in_stretches_ns": 0, "share_of_launches_pct": None}
    tiny_total = int(kernels.select(((pl.col("end_ns") - pl.col("start_ns")) < TINY_KERNEL_NS).sum()).item())
    timed = kernels.lazy().filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
    stretches = kernels_in = stretch_ns = idle_ns = 0
    for device in kernels["device_id"].unique().to_list():
        own = timed.filter(pl.col("device_id").is_null() if device is None else pl.col("device_id") == device).select(
            "start_ns", "end_ns", pl.col("graph_node_id").is_null().alias("plain")).collect()
        runs = _tiny_runs(own["start_ns"].to_numpy(), own["end_ns"].to_numpy(), own["plain"].to_numpy())
        del own
        stretches += len(runs[0])
        kernels_in += int(runs[0].sum())
        stretch_ns += int((runs[2] - runs[1]).sum())
        idle_ns += int(runs[3].sum())
    return {
        "launches": tiny_total,
        "share_of_launches_pct": _pct(tiny_total, kernels.height),
        "stretches": stretches,
        "kernels_in_stretches": kernels_in,
        "stretch_ns": stretch_ns,
        "idle_in_stretches_ns": idle_ns,
    }


def _tiny_runs(starts: np.ndarray, ends: np.ndarray, plain: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return, for each run of ≥ LAUNCH_BOUND_STRETCH consecutive tiny kernels of one device (tiny_kernel_stretches),
    its kernel count, first start, last end and the idle time before its kernels (ns); `plain`: not from a graph."""
    order = time_order(starts, None)
    if order is not None:
        starts, ends, plain = starts[order], ends[order], plain[order]
        del order
    # The idle time before each kernel: from the latest end of the kernels before it (none before the first).
    waited = np.empty(len(starts), dtype=np.int64)
    np.maximum.accumulate(ends, out=waited)
    waited[1:] = starts[1:] - waited[:-1]
    np.clip(waited, 0, None, out=waited)
    durations = ends - starts
    tiny = (durations < TINY_KERNEL_NS) & plain & (waited >= durations)
    del durations
    tiny[:1] = False
    edges = np.flatnonzero(np.diff(tiny.view(np.int8), prepend=0, append=0))
    first, after = edges[0::2], edges[1::2]  # each run of tiny kernels: its first and one past its last
    long = (after - first) >= LAUNCH_BOUND_STRETCH
    first, after = first[long], after[long]
    if not len(first):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    # The runs' last ends and idle sums by reduceat over [first, after) pairs; the odd slots span the kernels between runs.
    bounds = np.column_stack([first, after]).ravel()
    last_end = np.maximum.reduceat(np.append(ends, 0), bounds)[0::2]
    idle = np.add.reduceat(np.append(waited, 0), bounds)[0::2]
    return after - first, starts[first], last_end, idle


def launch_bound_finding(tiny: dict[str, Any], median_launch_call_ns: float | None) -> dict[str, Any] | None:
    """Return the launch_bound finding for tiny_kernel_stretches' evidence (its cost: the idle time inside the
    stretches), or None when no stretch is long enough."""
    if not tiny["stretches"]:
        return None
    return _finding(
        "launch_bound", tiny["idle_in_stretches_ns"],
        f"{counted(tiny['stretches'], 'stretch', 'stretches')} of {LAUNCH_BOUND_STRETCH}+ back-to-back kernels under 10 us ({counted(tiny['kernels_in_stretches'], 'kernel')}, "
        f"{_duration(tiny['stretch_ns'])}) wait longer between launches than they run: launch-bound"
        + (f"; a launch call takes {median_launch_call_ns / 1e3:.1f} us (median)" if median_launch_call_ns else ""),
        CAUSES["launch_overhead"][1], tiny)


def _where(gap: dict[str, Any]) -> str:
    """Return `inside NVTX range 'outer' (392.9 ms; innermost 'inner', 351.6 ms)` for a gap's evidence."""
    inner, outer = gap["evidence"]["nvtx_innermost"], gap["evidence"]["nvtx_outermost"]
    if outer and inner:
        return f"inside NVTX range {outer['name']!r} ({_duration(outer['duration_ns'])}; innermost {inner['name']!r}, {_duration(inner['duration_ns'])})"
    only = inner or outer
    return f"inside NVTX range {only['name']!r} ({_duration(only['duration_ns'])})" if only else ""


def _finding(rule: str, cost_ns: float, message: str, advice: str, evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"rule": rule, "cost_ns": int(cost_ns), "message": message, "advice": advice, "evidence": evidence or {}}


def _duration(ns: float) -> str:
    """Return a duration given in ns for a finding's text: `25.73 s`, `0.24 ms` (from 100 us on), `12.3 us`."""
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    return f"{ns / 1e6:.2f} ms" if ns >= 1e5 else f"{ns / 1e3:.1f} us"


# Where a blocking call waited for work the GPU was still running: (rule, device_id or None, pid, from_ns, until_ns).
WAIT_WINDOWS = pl.Schema({"rule": pl.String, "device_id": pl.Int64, "pid": pl.Int64, "from_ns": pl.Int64, "until_ns": pl.Int64})


def discount_waits(findings: list[dict[str, Any]], windows: pl.DataFrame, busy: dict[int, BusyTime], devices_of_pid: dict[int, set[int]]) -> None:
    """Take out of each blocking-call finding (synchronous copies and memsets, synchronize calls) the time its calls
    waited while the GPU still ran the work queued before them: a synchronous copy starts after that work and a
    synchronize returns after it, so that wait is the work's own time (kernels, copies), not the call's. The finding
    keeps its blocked time in the message and the evidence; its cost becomes the rest. `windows` (WAIT_WINDOWS) name
    the device a copy ran on, or for a synchronize only its process, whose devices' busy time is taken (the most of
    them: a synchronize waits for one device's work at a time)."""
    by_rule = {f["rule"]: f for f in findings}
    busy = {device: time for device, time in busy.items() if time.busy_ns > 0}
    if not busy:
        # No kernel or copy in the export (its GPU side was not traced): what the calls waited for is unknown.
        for rule in windows["rule"].unique().to_list():
            if rule in by_rule:
                by_rule[rule]["evidence"]["waiting_for_gpu_ns"] = None
                by_rule[rule]["message"] += "; the export has no GPU activity, so how much of it was waiting for GPU work is unknown"
        return
    for (rule,), calls in windows.filter(pl.col("until_ns") > pl.col("from_ns")).group_by("rule"):
        finding = by_rule.get(rule)
        if finding is None:
            continue
        waited = 0
        for (device, pid), part in calls.group_by("device_id", "pid"):
            a, b = part["from_ns"].to_numpy(), part["until_ns"].to_numpy()
            owned = [device] if device is not None else sorted(devices_of_pid.get(pid, set()) if pid is not None else busy)
            overlaps = [busy[d].overlap(a, b) for d in owned if d in busy]
            if overlaps:
                waited += int(np.max(np.vstack(overlaps), axis=0).sum())
        blocked = int(finding["evidence"]["blocked_ns"])
        waited = min(waited, blocked)
        copying = min(int(finding["evidence"].get("copying_ns") or 0), blocked - waited)
        finding["evidence"]["waiting_for_gpu_ns"] = waited
        finding["cost_ns"] = blocked - waited - copying
        parts = []
        if waited >= 0.1 * blocked:
            parts.append(f"{_duration(waited)} of it while the GPU still ran the work queued before (the call waits for it: that is the work's own time)")
        if copying >= 0.1 * blocked:
            parts.append(f"{_duration(copying)} while its own {'memset' if rule == 'cuda_memset_sync' else 'copy'} ran (an asynchronous one takes that "
                         "too: it counts with the copies)")
        if parts:
            finding["message"] += ", " + ", ".join(parts) + f" and {_duration(blocked - waited - copying)} beyond that"


def _blocking_finding(rule: str, blocked_ns: int, message: str, advice: str, evidence: dict[str, Any]) -> dict[str, Any]:
    """A blocking-call finding whose cost is its blocked time until discount_waits takes out the waits for the GPU."""
    return _finding(rule, blocked_ns, message, advice, {**evidence, "blocked_ns": blocked_ns, "waiting_for_gpu_ns": 0})


def api_rules(memops: pl.DataFrame, api: pl.DataFrame) -> tuple[list[dict[str, Any]], pl.DataFrame]:
    """Return the `nsys analyze` host-API rules (cuda_memcpy_async, cuda_memcpy_sync, cuda_memset_sync, cuda_api_sync)
    and the windows in which the blocking calls may have waited for the GPU (WAIT_WINDOWS, for discount_waits)."""
    found: list[dict[str, Any]] = []
    windows = [pl.DataFrame(schema=WAIT_WINDOWS)]
    if api.height == 0:
        return found, windows[0]
    names = distinct_names(api["name"])
    # Only calls that can make a copy rule (the patterns the filters below test) are joined to the copies: millions
    # of launch calls are not copied with their names to be dropped again. Names stay categorical: each rule's names
    # are picked from the few distinct ones.
    asynchronous = [n for n in names if _ASYNC.search(n)]
    memcpy_calls = [n for n in names if _MEMCPY_API.search(n) and not _ASYNC.search(n)]
    memset_calls = [n for n in names if _MEMSET_API.search(n) and not _ASYNC.search(n)]
    calls = api.filter(pl.col("name").is_in(asynchronous + memcpy_calls + memset_calls)).select(
        "pid", "correlation_id", pl.col("name").alias("call"), pl.col("start_ns").alias("call_start_ns"), pl.col("end_ns").alias("call_end_ns"), "start_ns")
    # Each copy's own call, found as kernels find theirs: a join on the ids would multiply rows where ids repeat. Of
    # the copies only what the rules read is kept, the kinds as flags: their strings were most of a copy's bytes.
    ops = pl.DataFrame(schema={"device_id": pl.Int64, "pid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "bytes": pl.Int64, "memset": pl.Boolean,
                               "pageable": pl.Boolean, "call": calls["call"].dtype, "call_start_ns": pl.Int64, "call_end_ns": pl.Int64})
    if memops.height and calls.height:
        matched, call = launching_calls(memops, calls)
        ops = memops.filter(matched).select(
            "device_id", "pid", "start_ns", "end_ns", "bytes", (pl.col("operation") == "memset").alias("memset"),
            ((pl.col("src_kind") == "Pageable") | (pl.col("dst_kind") == "Pageable")).fill_null(False).alias("pageable"),
        ).with_columns(calls.select("call", "call_start_ns", "call_end_ns")[call])
    del calls
    call_ns = pl.col("call_end_ns") - pl.col("call_start_ns")
    if ops.height:
        async_pageable = ops.filter(~pl.col("memset") & pl.col("call").is_in(asynchronous) & pl.col("pageable")).select(
            pl.len().alias("copies"), call_ns.sum().alias("call_ns"), pl.col("bytes").sum()).row(0, named=True)
        if async_pageable["copies"]:
            found.append(_finding(
                "cuda_memcpy_async", reduced(async_pageable["call_ns"]) or 0.0,
                f"{async_pageable['copies']} asynchronous copies use pageable host memory, so they run synchronously "
                f"({_duration(reduced(async_pageable['call_ns']) or 0.0)} of host time in the calls)",
                PAGEABLE_ADVICE,
                {"copies": async_pageable["copies"], "bytes": int(async_pageable["bytes"] or 0)}))
        sync_copies = ops.filter(~pl.col("memset") & pl.col("call").is_in(memcpy_calls))
        # A synchronous copy waits, before it starts, for the work queued ahead of it on its device.
        before_copy = [pl.col("device_id"), pl.col("pid"), pl.col("call_start_ns").alias("from_ns"), pl.min_horizontal("start_ns", "call_end_ns").alias("until_ns")]
        # Then it blocks while the copy itself runs: the copy's own time, which an asynchronous copy takes as well and
        # the copy findings count; only the rest of the blocked time is the call's.
        copying = (pl.min_horizontal("end_ns", "call_end_ns") - pl.max_horizontal("start_ns", "call_start_ns")).clip(lower_bound=0).sum()
        if sync_copies.height:
            blocked = int(sync_copies.select(call_ns.sum()).item())
            found.append(_blocking_finding(
                "cuda_memcpy_sync", blocked,
                f"{counted(sync_copies.height, 'synchronous memcpy call')} ({', '.join(sorted(sync_copies['call'].unique().cast(pl.String).to_list()))[:80]}) "
                f"blocked the host for {_duration(blocked)}", CAUSES["synchronous_copy"][1],
                {"copies": sync_copies.height, "pageable": int(sync_copies["pageable"].sum()),
                 "copying_ns": int(sync_copies.select(copying).item() or 0)}))
            windows.append(sync_copies.select(pl.lit("cuda_memcpy_sync").alias("rule"), *before_copy))
        sync_sets = ops.filter(pl.col("memset") & pl.col("call").is_in(memset_calls))
        if sync_sets.height:
            blocked = int(sync_sets.select(call_ns.sum()).item())
            found.append(_blocking_finding("cuda_memset_sync", blocked, f"{counted(sync_sets.height, 'synchronous memset call')} blocked the host for {_duration(blocked)}",
                                           "use cudaMemsetAsync on the work's stream", {"calls": sync_sets.height, "copying_ns": int(sync_sets.select(copying).item() or 0)}))
            windows.append(sync_sets.select(pl.lit("cuda_memset_sync").alias("rule"), *before_copy))
    syncs = api.filter(pl.col("name").is_in([n for n in names if dict(_API_CLASSES)["synchronization"].search(n)]))
    if syncs.height:
        durations = syncs.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("d"))
        by_name = durations.group_by(pl.col("name").cast(pl.String)).agg(pl.len().alias("count"), pl.col("d").sum().alias("ns")).sort(
            ["ns", "name"], descending=[True, False])
        # A handful of synchronize calls in a whole run is the host waiting for results it needs, not a loop to fix.
        advice = CAUSES["synchronization"][1] if syncs.height >= FEW_SYNC_CALLS else (
            f"only {counted(syncs.height, 'synchronize call')} in the run: the host waits for results it needs; "
            "move one later only if more work could be queued before it")
        found.append(_blocking_finding(
            "cuda_api_sync", int(reduced(durations["d"].sum()) or 0),
            f"{counted(syncs.height, 'synchronization call')} blocked the host for {_duration(reduced(durations['d'].sum()) or 0.0)} "
            f"(most: {by_name['name'][0]} ×{by_name['count'][0]}, {_duration(by_name['ns'][0])})",
            advice, {"calls": [{"name": r["name"], "count": r["count"], "duration_ns": int(r["ns"])} for r in by_name.head(5).iter_rows(named=True)]}))
        # A synchronize names no device: the devices its process used are looked at.
        windows.append(syncs.select(pl.lit("cuda_api_sync").alias("rule"), pl.lit(None, pl.Int64).alias("device_id"), "pid",
                                    pl.col("start_ns").alias("from_ns"), pl.col("end_ns").alias("until_ns")))
    return found, pl.concat(windows, how="vertical_relaxed").cast(dict(WAIT_WINDOWS))  # type: ignore[arg-type]


def _launches_onto_idle(launches: pl.DataFrame, sweeps: list[DeviceSweep]) -> dict[str, Any]:
    """Return how many kernels were launched onto an idle GPU, and the median and p99 of their launch latency (ns)."""
    # A kernel launched onto an idle GPU ends an idle stretch and was launched during it: one launched before the GPU
    # went idle waited for something else (a copy, an event) and says nothing of the launch latency (the real 2×H100
    # export: 1,628 of 1,632 kernels after idle stretches were launched ~0.42 s before, behind host-to-device copies).
    latencies: list[np.ndarray] = []
    for sweep in sweeps:
        own = launches.lazy().filter((pl.col("device_id") == sweep.device_id) & pl.col("graph_node_id").is_null()
                                     & pl.col("call_start_ns").is_not_null()).select("start_ns", "call_start_ns").collect()
        starts, calls = own["start_ns"].to_numpy(), own["call_start_ns"].to_numpy()
        del own
        gap_starts = sweep.gaps["start_ns"].to_numpy()
        for at, gap in _gaps_ended_by(sweep.gaps, starts):
            ended = gap >= 0
            during = np.zeros(len(gap), dtype=bool)
            during[ended] = calls[at:at + len(gap)][ended] >= gap_starts[gap[ended]]
            latencies.append(starts[at:at + len(gap)][during] - calls[at:at + len(gap)][during])
    latency = pl.Series("latency", np.concatenate(latencies) if latencies else np.zeros(0, dtype=np.int64))
    return {"kernels": latency.len(), "median_latency_ns": _quantile(latency, 0.5), "p99_latency_ns": _quantile(latency, 0.99)}


def _gaps_ended_by(gaps: pl.DataFrame, starts: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Yield, a batch of `starts` (ns) at a time, the batch's first index and for each start the row of the gap it
    ends (the gap's start plus its duration is that start), or -1. A device's gaps are in time order and never touch,
    so their ends are sorted and distinct: a binary search each, where a join hashed millions of gaps and launches."""
    gap_ends = gaps["start_ns"].to_numpy() + gaps["duration_ns"].to_numpy()
    for at in range(0, len(starts), _CALL_BATCH):
        part = starts[at:at + _CALL_BATCH]
        index = np.searchsorted(gap_ends, part)
        hit = index < len(gap_ends)
        hit[hit] = gap_ends[index[hit]] == part[hit]
        yield at, np.where(hit, index, -1)


def time_util_rule(busy_of: dict[int, BusyTime], devices: list[dict[str, Any]]) -> dict[str, Any] | None:
    """nsys analyze's gpu_time_util: each device's span in 30 chunks; chunks under 50% busy (all GPU work counts);
    `busy_of` is each device's DeviceSweep.busy_of()."""
    low_chunks = []
    cost = 0.0
    for device in devices:
        busy = busy_of[device["device_id"]]
        edges = np.linspace(device["first_ns"], device["first_ns"] + device["span_ns"], TIME_UTIL_CHUNKS + 1).astype(np.int64)
        used = busy.overlap(edges[:-1], edges[1:])
        for i, (a, b) in enumerate(itertools.pairwise(edges)):
            if b > a and 100.0 * used[i] / (b - a) < TIME_UTIL_THRESHOLD_PCT:
                low_chunks.append({"device_id": device["device_id"], "chunk": i, "start_ns": int(a - device["first_ns"]), "duration_ns": int(b - a),
                                   "busy_pct": 100.0 * used[i] / (b - a)})
                cost += (b - a) - used[i]
    if not low_chunks:
        return None
    per_device: dict[int, int] = {}
    for chunk in low_chunks:
        per_device[chunk["device_id"]] = per_device.get(chunk["device_id"], 0) + 1
    summary = "; ".join(f"GPU {d}: {n} of {TIME_UTIL_CHUNKS}" for d, n in per_device.items())
    return _finding("gpu_time_util", cost, f"low GPU utilization: chunks of the span under {TIME_UTIL_THRESHOLD_PCT:.0f}% busy — {summary}",
                    "see the idle gaps and their causes for those stretches", {"chunks": low_chunks[:60]})


@dataclass(frozen=True)
class _IdleGaps:
    """One device's idle gaps (start_ns, duration_ns), whether each lies between two unified-memory migrations, and the
    LISTED_GAPS longest of them with their row in `gaps` (of equal ones the earliest, so that the list is the same on
    every run)."""

    gaps: pl.DataFrame
    between: np.ndarray | None
    listed: pl.DataFrame
    queued: np.ndarray  # whether the work that ends each gap had been launched before it began (queued_starts)


def _idle_gaps(sweep: DeviceSweep, queued_work: list[pl.DataFrame]) -> _IdleGaps:
    """Return the device's idle gaps; `queued_work` is queued_starts'."""
    gaps, device_id = sweep.gaps, sweep.device_id
    # The longest of millions of gaps: those as long as the LISTED_GAPS-th longest are the only candidates (a top_k
    # by two keys over every gap encoded every row's keys first).
    shortest_listed = gaps["duration_ns"].top_k(LISTED_GAPS).min() if gaps.height > LISTED_GAPS else None
    candidates = gaps.with_row_index("gap") if shortest_listed is None else gaps.lazy().with_row_index("gap").filter(
        pl.col("duration_ns") >= shortest_listed).collect()
    listed = candidates.top_k(LISTED_GAPS, by=["duration_ns", "start_ns"], reverse=[False, True]).sort(
        ["duration_ns", "start_ns"], descending=[True, False])
    # The work that ends each gap (a kernel, copy or graph starting as it ends): was its launch call already over
    # when the gap began? Of several starting at once, any one queued is work the GPU had.
    queued = np.zeros(gaps.height, dtype=bool)
    gap_starts = gaps["start_ns"].to_numpy()
    for work in queued_work:
        own = work.lazy().filter((pl.col("device_id") == device_id) & pl.col("call_end_ns").is_not_null()).select("start_ns", "call_end_ns").collect()
        starts, call_ends = own["start_ns"].to_numpy(), own["call_end_ns"].to_numpy()
        del own
        for at, gap in _gaps_ended_by(gaps, starts):
            ended = np.flatnonzero(gap >= 0)
            ended = ended[call_ends[at + ended] <= gap_starts[gap[ended]]]
            queued[gap[ended]] = True
    return _IdleGaps(gaps, sweep.between_migrations, listed, queued)


def _device_gaps(device: dict[str, Any], idle: _IdleGaps, pids: set[int], api: pl.DataFrame, classified: pl.DataFrame,
                 nvtx: NvtxPass, matching: tuple[list[str], list[str]]) -> list[dict[str, Any]]:
    """Return the device's largest idle gaps with their causes and evidence; add gap_count, idle_by_cause (ns per
    cause, largest first) and largest_gap_ns to `device`."""
    device_id = device["device_id"]
    gaps = idle.gaps
    api_rows = _host_rows(api, pids)
    jit_names, data_names = matching
    named = nvtx.named.filter(_host_rows(nvtx.named, pids, nvtx.threads_known))
    jit_ranges, data_ranges = (named.filter(pl.col("text").cast(pl.String).is_in(names)) for names in (jit_names, data_names))
    causes = gap_causes(gaps, classified, jit_ranges, data_ranges, idle.queued, _host_rows(classified, pids), idle.between, host_traced=api.height > 0)
    device["gap_count"] = gaps.height
    totals = pl.DataFrame({"code": causes, "duration_ns": gaps["duration_ns"]}).group_by("code").agg(pl.col("duration_ns").sum()).with_columns(
        pl.col("code").cast(pl.Int64).replace_strict(dict(enumerate(CAUSE_CODES)), return_dtype=pl.String).alias("cause"))
    totals = totals.sort(["duration_ns", "cause"], descending=[True, False])
    device["idle_by_cause"] = {row["cause"]: int(row["duration_ns"]) for row in totals.iter_rows(named=True)}
    del totals
    names = np.array(CAUSE_CODES)
    ranked = idle.listed.with_columns(pl.Series("cause", names[causes[idle.listed["gap"].to_numpy()]] if len(causes) else [], dtype=pl.String))
    # Only the rows around the listed gaps, found in one pass, are searched gap by gap.
    gap_starts = ranked["start_ns"].to_numpy()
    gap_ends = gap_starts + ranked["duration_ns"].to_numpy()
    near_api = _overlapping_any(api, gap_starts, gap_ends, api_rows)
    near_nvtx = _overlapping_any(nvtx.near, gap_starts, gap_ends, _host_rows(nvtx.near, pids, nvtx.threads_known))
    listed = []
    first_kernel = device.get("first_kernel_ns")
    for gap in ranked.iter_rows(named=True):
        start, end = gap["start_ns"], gap["start_ns"] + gap["duration_ns"]
        listed.append({"device_id": device_id, "start_ns": int(start - device["first_ns"]), "duration_ns": int(gap["duration_ns"]),
                       "cause": gap["cause"], "cause_text": CAUSES[gap["cause"]][0], "evidence": _gap_evidence(start, end, near_api, near_nvtx),
                       # Before the device's first kernel: setup (allocation, copies in, loading), paid once per run.
                       "before_first_kernel": first_kernel is not None and end <= first_kernel})
    device["largest_gap_ns"] = int(ranked["duration_ns"][0]) if ranked.height else 0
    return listed


def analyze_whole_run(
    kernels: pl.DataFrame,
    names: dict[int, str],
    memops: pl.DataFrame,
    api: pl.DataFrame,
    nvtx: Callable[[], Iterable[pl.DataFrame]],
    graphs: pl.DataFrame,
    link_peaks: dict[int, tuple[float | None, str | None]],
    gap_threshold_ns: int = DEFAULT_GAP_THRESHOLD_NS,
    graph_trace_mode: str | None = None,
    phase: Callable[[str], None] | None = None,
) -> WholeRun:
    """Return the time breakdown, verdicts, copies, gaps with causes, launch statistics and findings of one export.

    `nvtx()` yields the NVTX rows in chunks in the input's row order (NsysExport.nvtx_chunks): they are read once,
    after the sweep has found the gaps, and never held whole. `graph_trace_mode` is the capture's CUDA graph trace mode
    (`Graph`, nsys's default, or `Node`), which matters only where graphs were launched. `phase(name)` is told each
    step as it starts (a progress display for large exports)."""
    say = phase or (lambda name: None)
    # In the export's types (a no-op for an export's own frames): frames joined or concatenated below must agree.
    kernels, memops, api, graphs = (conform(frame, schema) if frame.schema != schema else frame
                                    for frame, schema in ((kernels, NSYS_KERNELS), (memops, NSYS_MEMOPS), (api, NSYS_API), (graphs, NSYS_GRAPHS)))
    migrations = bool(memops.height) and bool(memops.select(pl.col("copy_kind").is_in(UNIFIED_KINDS).any()).item())
    steps = _Steps(runs_two_steps_at_once(kernels, api, memops))

    def device_side() -> tuple[dict[str, Any], list[dict[str, Any]], pl.DataFrame, list[DeviceSweep], int]:
        tiny = tiny_kernel_stretches(kernels)
        found_by_api, wait_windows = api_rules(memops, api)
        return tiny, found_by_api, wait_windows, *sweep_devices(activity_intervals(kernels, memops, graphs, names), migrations)

    def launch_side() -> tuple[pl.DataFrame, pl.DataFrame, list[pl.DataFrame]]:
        # The launches are made here, not by the caller, so that they can be dropped once used.
        launches = launch_records(kernels, api)
        return launches, api_classes(api, first_launch_of_each_kernel(kernels)), queued_starts(launches, memops, graphs, api)

    say("where the time went, and idle gaps")
    # The sweep first where they run one after the other: the launches' frame, held through it, was 0.05 GB of the
    # 10 M-launch export's peak.
    (tiny, found_by_api, wait_windows, sweeps, dropped), (launches, classified, queued_work) = steps.both(device_side, launch_side)
    notes: list[str] = []
    if dropped:
        notes.append(f"{dropped} GPU activity row(s) with no device or an end before their start were left out")
    devices = device_breakdown(sweeps)
    first_kernel = dict(kernels.group_by("device_id").agg(pl.col("start_ns").min()).iter_rows()) if kernels.height else {}
    for device in devices:
        device["first_kernel_ns"] = first_kernel.get(device["device_id"])
        device["verdict_message"] = None  # worded once its gaps have their causes, below

    # Gaps: the idle pieces of the sweep, with a cause from the host activity of the device's own processes.
    owners = pl.concat([kernels.lazy().select("device_id", "pid"), memops.lazy().select("device_id", "pid")]).drop_nulls().unique().collect()
    pids_of = {device: set(group["pid"].to_list()) for (device,), group in owners.group_by("device_id")}
    idle = steps.each(functools.partial(_idle_gaps, queued_work=queued_work), sweeps)
    del queued_work
    # Everything else that needs the sweep's pieces, so that they (two or three per launch) are not held through the
    # NVTX pass and the gaps' causes.
    devices_of_pid: dict[int, set[int]] = {}
    for device, pids in pids_of.items():
        for pid in pids:
            devices_of_pid.setdefault(pid, set()).add(device)
    busy = {sweep.device_id: sweep.busy_of() for sweep in sweeps}
    discount_waits(found_by_api, wait_windows, busy, devices_of_pid)
    utilisation = time_util_rule(busy, devices)
    del busy
    launch = launch_statistics(launches, kernels, api)
    launch["onto_idle_gpu"] = _launches_onto_idle(launches, sweeps)
    del sweeps
    # The NVTX rows, read once now that the gaps they are evidence for are known. Of the launches (ten million
    # rows) only what projects their calls onto the ranges is kept through the pass.
    listed = pl.concat([gaps.listed for gaps in idle]) if idle else pl.DataFrame(schema={"start_ns": pl.Int64, "duration_ns": pl.Int64})
    calls = LaunchCalls.of_launches(launches)
    del launches
    nvtx_pass = read_nvtx(nvtx, calls, listed["start_ns"].to_numpy(), (listed["start_ns"] + listed["duration_ns"]).to_numpy())
    del calls
    matching = range_names_matching(nvtx_pass.texts) if devices else ([], [])
    def gaps_of(device_and_gaps: tuple[dict[str, Any], _IdleGaps]) -> list[dict[str, Any]]:
        device, gaps = device_and_gaps
        return _device_gaps(device, gaps, pids_of.get(device["device_id"], set()), api, classified, nvtx_pass, matching)

    per_device = steps.each(gaps_of, list(zip(devices, idle, strict=True)))
    del idle
    all_gaps: list[dict[str, Any]] = []
    idle_by_cause: dict[str, int] = {}
    for device, gaps in zip(devices, per_device, strict=True):
        for cause, duration in device["idle_by_cause"].items():
            idle_by_cause[cause] = idle_by_cause.get(cause, 0) + duration
        all_gaps += gaps
        if device["verdict"]:
            device["verdict_message"] = verdict_sentence(device["exposed_pct"], device["verdict"], f"GPU {device['device_id']}'s span",
                                                         device["idle_by_cause"])
    all_gaps.sort(key=lambda g: -g["duration_ns"])
    total_idle = sum(idle_by_cause.values())
    # A run with a handful of synchronize calls waits for results it needs: its idle time in them gets that advice,
    # the one its synchronize finding gives, not "take the synchronize out of the loop".
    sync_advice = next((f["advice"] for f in found_by_api if f["rule"] == "cuda_api_sync"), CAUSES["synchronization"][1])

    def advice_for(cause: str) -> str:
        return sync_advice if cause == "synchronization" else CAUSES[cause][1]

    causes_list = [{"cause": cause, "idle_ns": ns, "share_of_idle_pct": _pct(ns, total_idle), "description": CAUSES[cause][0], "advice": advice_for(cause)}
                   for cause, ns in sorted(idle_by_cause.items(), key=lambda kv: -kv[1])]

    findings: list[dict[str, Any]] = []
    verdict = run_verdict(devices, idle_by_cause)
    copies = copy_summary(memops, link_peaks)
    findings += _breakdown_findings(devices, copies, causes_list)
    if migrations:
        findings += unified_memory_findings(memops, kernels, devices)
    big = [g for g in all_gaps if g["duration_ns"] >= gap_threshold_ns]
    if big:
        top = big[0]
        where = top["evidence"]["nvtx_innermost"] or top["evidence"]["nvtx_outermost"]
        advice = advice_for(top["cause"])
        if top["before_first_kernel"]:
            advice = ("it comes before the GPU's first kernel: setup, paid once per run — worth cutting for short jobs and restarts (" + advice
                      + "); to look at the steady state, start the capture after it (nsys --capture-range=cudaProfilerApi, or --delay)")
        findings.append(_finding(
            "gpu_gaps", sum(g["duration_ns"] for g in big),
            f"{len(big)} GPU idle gap(s) of {gap_threshold_ns / 1e6:.0f} ms or more; the largest, {_duration(top['duration_ns'])} on GPU {top['device_id']} "
            f"at {_duration(top['start_ns'])}" + (" (before its first kernel)" if top["before_first_kernel"] else "") + f", is {top['cause_text']}"
            + (f", {_where(top)}" if where else ""), advice, {"gaps": big[:10]}))
    jit = idle_by_cause.get("jit_compile", 0)
    if jit:
        jit_gap = next((g for g in all_gaps if g["cause"] == "jit_compile"), None)
        where = (jit_gap["evidence"]["nvtx_innermost"] or jit_gap["evidence"]["nvtx_outermost"]) if jit_gap else None
        findings.append(_finding(
            "jit_compile", jit, f"{_duration(jit)} of GPU idle time is JIT compilation or module loading on the host"
            + (f", e.g. a {_duration(jit_gap['duration_ns'])} gap {_where(jit_gap)}" if jit_gap and where else ""),
            CAUSES["jit_compile"][1]))
    if utilisation:
        if causes_list and causes_list[0]["idle_ns"] and not any(f["rule"] in {rule for _, rule in IDLE_KINDS.values()} for f in findings):
            # The run is not host-bound overall, but its idle stretches still have a cause the gaps name: say it here.
            top = causes_list[0]
            utilisation["message"] += f"; {top['share_of_idle_pct']:.0f}% of the idle time is {top['description']}"
            utilisation["advice"] = f"{top['advice']}; {utilisation['advice']}"
        findings.append(utilisation)
    findings += found_by_api
    launch["tiny_kernels"] = tiny
    bound = launch_bound_finding(tiny, launch["median_launch_call_ns"])
    if bound is not None:
        findings.append(bound)
    graphs_whole = graphs.height > 0 or (graph_trace_mode == "Graph" and launch["graph_launches"] > 0 and not launch["graph_launched_kernels"])
    if graphs_whole:
        notes.append("CUDA graphs were traced as whole graphs (nsys --cuda-graph-trace=graph): the kernels inside them are not in the export, "
                     "and each graph execution counts as compute; re-profile with --cuda-graph-trace=node to see them")
        findings.append(_finding("cuda_graph_trace", 0, notes[-1], "nsys profile --cuda-graph-trace=node", {"graph_executions": graphs.height}))
    elif launch["graph_launches"] and not launch["graph_launched_kernels"] and kernels.height:
        notes.append(f"{launch['graph_launches']} cudaGraphLaunch calls but no kernel carries a graph node id: the graphs' kernels may be missing "
                     "from the export; profile with --cuda-graph-trace=node")
    findings.sort(key=lambda f: -f["cost_ns"])
    return WholeRun(verdict, devices, copies, all_gaps, causes_list, launch, findings, notes, nvtx_pass.ranges)


# Faults move managed memory in pages of 4-64 kB (up to a few hundred kB when the driver groups them); prefetches and
# evictions move 2 MB blocks. Many small migrations are demand paging.
DEMAND_PAGING_MIN_MIGRATIONS = 32
DEMAND_PAGING_MAX_MEAN_BYTES = 256 * 1024


def _size(count: float) -> str:
    return f"{count / 1e9:.2f} GB" if count >= 1e9 else f"{count / 1e6:.1f} MB" if count >= 1e6 else f"{count / 1e3:.1f} kB"


def unified_memory_findings(memops: pl.DataFrame, kernels: pl.DataFrame, devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return a finding per device whose managed memory moved on demand: many small unified-memory migrations to the
    GPU while its kernels ran (the kernels stalled on page faults) or back to the host with the GPU idle between them.

    Its cost is the kernel time with migrations running plus the idle time put down to the host faulting pages back:
    what prefetching would mostly give back (the bytes still move, in far fewer and larger transfers)."""
    migrations = memops.filter(pl.col("copy_kind").is_in(UNIFIED_KINDS) & (pl.col("end_ns") >= pl.col("start_ns")))
    found = []
    for device in devices:
        own = migrations.filter(pl.col("device_id") == device["device_id"])
        to_gpu, to_host = (own.filter(pl.col("copy_kind") == kind) for kind in (11, 12))

        def paged(frame: pl.DataFrame) -> bool:
            return frame.height >= DEMAND_PAGING_MIN_MIGRATIONS and (reduced(frame["bytes"].mean()) or 0.0) < DEMAND_PAGING_MAX_MEAN_BYTES

        if not (paged(to_gpu) or paged(to_host)):
            continue
        parts, evidence, stalled = [], {}, 0
        idle = device.get("idle_by_cause", {}).get("unified_memory", 0)
        if paged(to_gpu):
            ran = kernels.filter(pl.col("device_id") == device["device_id"])
            stalled = int(_coverage(ran).overlap(to_gpu["start_ns"].to_numpy(), to_gpu["end_ns"].to_numpy()).sum()) if ran.height else 0
            size = int(to_gpu["bytes"].sum() or 0)
            parts.append(f"{to_gpu.height:,} page migrations to the GPU ({_size(size)}, {_size(size / to_gpu.height)} each)"
                         + (f" ran while its kernels did, for {_duration(stalled)}: the kernels stalled on page faults" if stalled else ""))
            evidence["to_gpu"] = {"migrations": to_gpu.height, "bytes": size, "during_kernels_ns": stalled}
        # Once paging is found, the migrations back to the host are part of it whenever the GPU idled on them, even
        # too few to count as paging alone (a real run: 48 to the GPU, 24 back with 7.5 ms of idle between them).
        back = paged(to_host) or (to_host.height > 0 and idle > 0)
        if back:
            size = int(to_host["bytes"].sum() or 0)
            parts.append(f"{to_host.height:,} back to the host ({_size(size)}, {_size(size / to_host.height)} each)"
                         + (f", the GPU idle {_duration(idle)} between them while the host touched the data" if idle else ""))
            evidence["to_host"] = {"migrations": to_host.height, "bytes": size, "idle_between_ns": idle}
        found.append(_finding(
            "unified_memory_paging", stalled + (idle if back else 0), f"GPU {device['device_id']} moves managed memory on demand: " + "; ".join(parts),
            CAUSES["unified_memory"][1] + "; cudaMemAdvise (SetPreferredLocation, SetReadMostly) for data that stays where it is", evidence))
    return found


def _breakdown_findings(devices: list[dict[str, Any]], copies: list[dict[str, Any]], causes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings from the breakdown itself: copy-bound devices (with the copies' throughput against the link),
    communication-bound devices, and host-bound time summed by cause."""
    found = []
    for device in devices:
        span, verdict = device["span_ns"], device["verdict"]
        exposed = device["exposed_pct"]
        own = [c for c in copies if c["device_id"] == device["device_id"] and c["direction"] != "memset"]
        if verdict == "copy":
            top = max(own, key=lambda c: c["duration_ns"]) if own else None
            detail = ""
            advice = "keep the data on the GPU between steps, overlap the copies with compute on another stream, or move fewer bytes"
            if top:
                size = top["bytes"] or 0
                detail = (f"; {top['direction']}: {counted(top['count'], 'copy', 'copies')}, " + (f"{size / 1e9:.2f} GB" if size >= 1e8 else f"{size / 1e6:.2f} MB")
                          + (f" at {top['gb_per_s']:.1f} GB/s" if top["gb_per_s"] is not None else "")
                          + (f" of {top['link_gb_per_s']:.0f} ({top['link']})" if top["link_gb_per_s"] and top["gb_per_s"] is not None else ""))
                if top["pageable_bytes"] and top["bytes"] and top["pageable_bytes"] * 2 >= top["bytes"]:
                    advice = "pin the host memory (cudaHostAlloc; PyTorch pin_memory=True): pageable copies are staged and slow; " + advice
                elif top["link_pct"] is not None and top["link_pct"] < 60:
                    advice = (f"the copies are pinned but reach {top['link_pct']:.0f}% of the link: check the link (nvidia-smi -q: PCIe generation and width), "
                              "the NUMA node of the host buffer, and copy sizes; better still, " + advice)
                elif top["link_pct"] is None and top["direction"] in HOST_LINK_DIRECTIONS:
                    advice += " (pass --gpu to compare the copies' GB/s with the PCIe link's peak)"
            found.append(_finding("copy_bound", (exposed["copy"] or 0) * span / 100,
                                  f"GPU {device['device_id']} is copy-bound: copies with no kernel beside them take {exposed['copy']:.1f}% of its span" + detail,
                                  advice, {"breakdown": device["breakdown"]}))
        elif verdict == "communication":
            found.append(_finding("communication_bound", (exposed["communication"] or 0) * span / 100,
                                  f"GPU {device['device_id']} is communication-bound: collectives with no compute beside them take {exposed['communication']:.1f}% of its span",
                                  "overlap communication with compute (bucketed all-reduce, async collectives), or communicate less (gradient accumulation, compression)",
                                  {"breakdown": device["breakdown"]}))
    idle = sum(c["idle_ns"] for c in causes)
    if idle and any(d["verdict"] == "host" for d in devices):
        top = causes[0]
        idle_by_cause = {c["cause"]: c["idle_ns"] for c in causes}
        # Idle time with the work already queued is the GPU's, not the host's; without CUDA API calls nobody's: the
        # rule's name says which (idle_kind).
        rule = IDLE_KINDS[idle_kind(idle_by_cause)[0]][1]
        found.append(_finding(rule, idle, f"the GPU sat idle for {_duration(idle)}; the largest cause: {top['description']} "
                                                  f"({top['share_of_idle_pct']:.0f}% of idle time)", top["advice"],
                              {"idle_by_cause": idle_by_cause}))
    return found
