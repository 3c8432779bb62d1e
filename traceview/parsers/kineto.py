"""PyTorch profiler traces (Kineto's Chrome-trace JSON, `*.pt.trace.json[.gz]`): what torch.profiler, vLLM, SGLang,
TensorRT-LLM's PyTorch backend and Hugging Face write.

The grammar (Kineto's output_json.cpp, every schema since PyTorch 1.8): one JSON object whose `traceEvents` array
holds complete events (`"ph": "X"`: `ts` and `dur` in microseconds) of categories `kernel`, `gpu_memcpy`,
`gpu_memset` (2021: `Kernel`, `Memcpy`, `Memset`) on GPU "processes" (the device) and "threads" (the stream; a string
"stream 7" in 2021); `cuda_runtime` / `cuda_driver` (2021: `Runtime`; ROCm keeps the name with `hip*` calls) and
`cpu_op` / `user_annotation` (2021: `Operator`) on host threads; flow events (`ac2g`, 2021 `async`) and instants
(memory) that traceview does not need. A GPU event's `args.correlation` names the runtime call that launched it;
`External id` (2021: `external id`) names the op. Header keys (`deviceProperties`, `distributedInfo`, versions) may
come before or after `traceEvents`, and harnesses add objects of their own (`metadata`).

The file is read as a stream (ijson; gzip decompressed as it is read), in chunks of typed frames: a gigabyte trace is
never one Python object. GPU activity becomes the same frames an Nsight Systems export gives (nsys_sqlite's
schemas), so the whole-run analysis is one code for both; the ops, their shapes and the NCCL arguments are kept
beside them.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import ijson
import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers.base import GZIP_MAGIC, Format, Head, Parsed, ReadOptions, gunzip_prefix
from traceview.parsers.nsys_sqlite import (
    NSYS_API,
    NSYS_GPUS,
    NSYS_GRAPHS,
    NSYS_KERNELS,
    NSYS_MEMOPS,
    NSYS_SYNC,
    NsysExport,
    without_per_call_numbers,
)
from traceview.parsers.schema import schema_of

# Events turned into frames at a time: bounds the Python objects held while reading.
CHUNK_EVENTS = 100_000
# A host thread id as nsys packs a global one (process id in bits 24-47): the whole-run code finds the process in it.
_PID_SHIFT = 1 << 24

# One row per op (cpu_op, user_annotation): its shapes as the trace wrote them (JSON text; null without record_shapes).
TORCH_OPS = schema_of({"op_id": pl.Int64, "name": pl.String, "category": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64,
                       "pid": pl.Int64, "tid": pl.Int64, "external_id": pl.Int64, "input_dims": pl.String, "input_types": pl.String})
# One row per kernel and the op that launched it (op_id of TORCH_OPS; null where nothing says, as for kernels replayed
# from a graph): by the kernel's External id, else its launch call's, else the innermost op around the launch call.
TORCH_KERNEL_LINKS = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "name_id": pl.Int64,
                                "correlation_id": pl.Int64, "op_id": pl.Int64})
# One row per collective kernel whose arguments say what it moved (PyTorch 2.1+ with NCCL).
TORCH_COLLECTIVES = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "name_id": pl.Int64,
                               "collective": pl.String, "in_nelems": pl.Int64, "out_nelems": pl.Int64, "group_size": pl.Int64,
                               "dtype": pl.String})

_KERNEL = {"kernel"}
_MEMCPY = {"gpu_memcpy", "memcpy"}
_MEMSET = {"gpu_memset", "memset"}
_RUNTIME = {"cuda_runtime", "runtime", "cuda_driver"}
_OPS = {"cpu_op", "operator", "user_annotation", "python_function"}
# Complete events that are not activity of their own: the profiled window, the GPU-side copies of annotations, and
# the profiler's own overhead.
_NOT_ACTIVITY = {"trace", "gpu_user_annotation", "overhead", "cuda_profiler_range"}
# `vllm/v1/worker/gpu_model_runner.py(1002): execute_model`: Python functions whose calls are steps.
_MODULE_INDEX = re.compile(r"_\d+$")
# Named module.function: a worker's execute_model calls the model runner's, and the two are told apart.
# Found by its tail (`.py(1002): execute_model`), the module's name then cut from what stands before: a pattern that
# began with the name would try every position of a long damaged name.
_STEP_FUNCTION = re.compile(r"\.py\(\d{1,9}\):\s{0,8}(execute_model|train_step|training_step|eval_step|decode_step|prefill_step|step)$")
# "Memcpy HtoD (Pageable -> Device)": the direction, then the memory kinds (CUPTI's names).
_COPY = re.compile(r"Memcpy\s+(?P<direction>\w+)(?:\s*\((?P<src>[^)>]*?)\s*->\s*(?P<dst>[^)]*?)\))?")
_COPY_KINDS = {"HtoD": 1, "DtoH": 2, "HtoA": 3, "AtoH": 4, "AtoA": 5, "AtoD": 6, "DtoA": 7, "DtoD": 8, "HtoH": 9, "PtoP": 10}
_STREAM = re.compile(r"(\d+)")


@dataclass(frozen=True)
class TorchTrace:
    """A PyTorch profiler trace: the GPU and host activity as an Nsight Systems export's frames (`export`), the ops,
    what links each kernel to its op, the collectives' arguments, and the trace's header facts."""

    export: NsysExport
    ops: pl.DataFrame
    kernel_links: pl.DataFrame
    collectives: pl.DataFrame
    schema_version: str | None = None
    rocm: bool = False
    rank: int | None = None
    world_size: int | None = None
    record_shapes: bool = False
    python_functions: int = 0
    notes: list[str] = field(default_factory=list)
    # Complete events of categories no reader here takes (an MTIA trace's `mtia_ccp_events`), most frequent first:
    # what a trace without CUDA or ROCm activity holds instead.
    unread_categories: tuple[tuple[str, int], ...] = ()


def _open(path: Path) -> IO[bytes]:
    with path.open("rb") as probe:
        compressed = probe.read(2) == GZIP_MAGIC
    # The caller closes it (a `with` around the stream of events).
    handle: IO[bytes] = gzip.open(path, "rb") if compressed else path.open("rb")  # type: ignore[assignment]  # noqa: SIM115
    return handle


def _sniff(head: Head) -> bool:
    raw = head.raw
    if raw.startswith(GZIP_MAGIC):
        raw = gunzip_prefix(raw, 256 * 1024)
    text = raw.decode("utf-8", errors="replace").lstrip()
    return text.startswith("{") and '"traceEvents"' in text[:1 << 20] or (
        text.startswith("{") and '"schemaVersion"' in text and '"deviceProperties"' in text)


def _int(value: object) -> int | None:
    """An integer id from an event (int, float or digits in a string); None when absent or not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) < 2**62 else None
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and abs(value) < 2**62 else None
    if isinstance(value, str):
        found = _STREAM.search(value)
        return int(found.group(1)) if found and len(found.group(1)) <= 18 else None
    return None


def _ns(ts: object, dur: object) -> tuple[int, int] | None:
    """(start, end) in ns of an event's `ts` and `dur` (µs); None when either is missing, not finite or negative."""
    if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or isinstance(ts, bool):
        return None
    # 4e15 µs is 126 years: a start and a duration that large still add up inside 64 bits of ns.
    if not (math.isfinite(ts) and math.isfinite(dur)) or dur < 0 or abs(ts) > 4e15 or dur > 4e15:
        return None
    start = round(ts * 1000)
    return start, start + round(dur * 1000)


class _Reader:
    """Turns events into rows, and rows into frames every CHUNK_EVENTS events."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.kernels: list[tuple[Any, ...]] = []
        self.memops: list[tuple[Any, ...]] = []
        self.api: list[tuple[Any, ...]] = []
        self.ops: list[tuple[Any, ...]] = []
        self.collectives: list[tuple[Any, ...]] = []
        self.frames: dict[str, list[pl.DataFrame]] = {"kernels": [], "memops": [], "api": [], "ops": [], "collectives": []}
        self.op_count = 0  # ops read so far, flushed or not: the next op's op_id
        self.python_functions = 0
        self.unread: Counter[str] = Counter()
        self.hip = 0
        self.events = 0
        self.bad = 0

    def add(self, event: Any) -> None:
        self.events += 1
        if not isinstance(event, dict) or event.get("ph") != "X":
            return
        category = str(event.get("cat") or "").lower()
        if category == "python_function":
            self.python_functions += 1
            # Of the Python stack (with_stack) only the functions that mark steps are kept, as ranges named by the
            # function, and the modules (with_modules: `nn.Module: Qwen2MLP_3`), named by their class: time per module.
            function = str(event.get("name") or "")
            if function.startswith("nn.Module: "):
                event = {**event, "name": _MODULE_INDEX.sub("", function)}
            else:
                step = _STEP_FUNCTION.search(function) if "step" in function or "execute_model" in function else None
                if step is None:
                    return
                path = function[:step.start()].replace("\\", "/")
                # PyTorch's own step functions (prof.step(), an optimizer's or a scheduler's step) are not the
                # program's iterations: prof.step()'s frame, taken for one, hid the ProfilerStep ranges. The profiler
                # names frames relative to the sys.path entry they came from (`torch/profiler/profiler.py`).
                if path.startswith("torch/") or "-packages/torch/" in path:
                    return
                module = path.rsplit("/", 1)[-1][-200:]
                event = {**event, "name": f"{module}.{step.group(1)}"}
        if not (category in _KERNEL or category in _MEMCPY or category in _MEMSET or category in _RUNTIME or category in _OPS):
            key = category[:64]  # a damaged trace's categories are bounded in length and in number
            if category not in _NOT_ACTIVITY and (key in self.unread or len(self.unread) < 64):
                self.unread[key] += 1
            return
        times = _ns(event.get("ts"), event.get("dur"))
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if times is None:
            self.bad += 1
            return
        start, end = times
        name = str(event.get("name") or "")
        correlation = _int(args.get("correlation"))
        external = _int(args.get("External id", args.get("external id")))
        if category in _KERNEL or category in _MEMCPY or category in _MEMSET:
            device = _int(args.get("device"))
            device = device if device is not None else _int(event.get("pid"))
            if category in _KERNEL:
                name_id = self.names.setdefault(name, len(self.names))
                self.kernels.append((start, end, device, name_id, correlation, external))
                if "Collective name" in args or "In msg nelems" in args:
                    self.collectives.append((start, end, device, name_id, _text(args.get("Collective name")), _int(args.get("In msg nelems")),
                                             _int(args.get("Out msg nelems")), _int(args.get("Group size")), _text(args.get("dtype"))))
            else:
                copy = _COPY.match(name) if category in _MEMCPY else None
                direction = copy.group("direction") if copy else None
                self.memops.append((start, end, device, "memcpy" if category in _MEMCPY else "memset", _COPY_KINDS.get(direction or ""),
                                    _int(args.get("bytes")), (copy.group("src") or None) if copy else None,
                                    (copy.group("dst") or None) if copy else None, correlation))
        elif category in _RUNTIME:
            if name.startswith("hip"):
                self.hip += 1
            pid, tid = _int(event.get("pid")) or 0, _int(event.get("tid")) or 0
            self.api.append((start, end, name, correlation, (pid % _PID_SHIFT) * _PID_SHIFT + tid % _PID_SHIFT, pid, external))
        else:
            pid, tid = _int(event.get("pid")) or 0, _int(event.get("tid")) or 0
            dims, types = args.get("Input Dims", args.get("Input dims")), args.get("Input type")
            self.ops.append((self.op_count, name, category, start, end, pid,
                             (pid % _PID_SHIFT) * _PID_SHIFT + tid % _PID_SHIFT, external,
                             json.dumps(dims) if dims is not None else None, json.dumps(types) if types is not None else None))
            self.op_count += 1
        if self.events % CHUNK_EVENTS == 0:
            self.flush()

    def flush(self) -> None:
        for key, rows, schema in (("kernels", self.kernels, _KERNEL_ROWS), ("memops", self.memops, _MEMOP_ROWS), ("api", self.api, _API_ROWS),
                                  ("ops", self.ops, TORCH_OPS), ("collectives", self.collectives, TORCH_COLLECTIVES)):
            if rows:
                self.frames[key].append(pl.DataFrame(rows, schema=schema, orient="row"))
                rows.clear()

    def frame(self, key: str, schema: pl.Schema) -> pl.DataFrame:
        parts = self.frames[key]
        return pl.concat(parts, how="vertical") if parts else pl.DataFrame(schema=schema)


_KERNEL_ROWS = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "name_id": pl.Int64, "correlation_id": pl.Int64,
                          "external_id": pl.Int64})
_MEMOP_ROWS = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "operation": pl.String, "copy_kind": pl.Int64,
                         "bytes": pl.Int64, "src_kind": pl.String, "dst_kind": pl.String, "correlation_id": pl.Int64})
_API_ROWS = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.String, "correlation_id": pl.Int64, "tid": pl.Int64,
                       "pid": pl.Int64, "external_id": pl.Int64})


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _events(handle: IO[bytes]) -> Iterator[Any]:
    try:
        yield from ijson.items(handle, "traceEvents.item", use_float=True)
    except (ijson.JSONError, ijson.IncompleteJSONError, UnicodeDecodeError, EOFError, OSError, zlib.error) as error:
        raise _Cut(str(error).splitlines()[0] if str(error) else type(error).__name__) from None


class _Cut(Exception):
    """The event stream ended before the JSON did (a file cut short or damaged)."""


class _Ends:
    """A binary stream that keeps its first and last HEADER_BYTES as they are read: the header keys stand before the
    event array or after it, so the one pass over the events also sees them."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle, self.first, self.last = handle, bytearray(), bytearray()

    def read(self, size: int = -1) -> bytes:
        block = self.handle.read(size)
        if len(self.first) < HEADER_BYTES:
            self.first += block[:HEADER_BYTES - len(self.first)]
        self.last += block
        if len(self.last) > 2 * HEADER_BYTES:
            del self.last[:-HEADER_BYTES]
        return block


HEADER_BYTES = 1 << 20
_HEADER_KEYS = {"schemaVersion", "deviceProperties", "distributedInfo", "record_shapes", "cupti_version", "roctracer_version",
                "hip_runtime_version", "cuda_runtime_version"}
_AFTER_EVENTS = re.compile(rb"\]\s*,\s*\"(?=[A-Za-z_]\w*\"\s*:)")


def _header(ends: _Ends) -> dict[str, Any]:
    """The trace's header keys (deviceProperties, distributedInfo, versions) from the object's parts before and after
    its event array; {} where neither part parses (a cut or unusual file: the keys are then unknown)."""
    header: dict[str, Any] = {}
    first = bytes(ends.first)
    at = first.find(b'"traceEvents"')
    if at > 0:
        try:
            before = json.loads(first[:at].rstrip().rstrip(b",") + b"}")
            header.update(before if isinstance(before, dict) else {})
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
    last = bytes(ends.last)
    # The first `], "key":` after the last event (every event has a "ph") whose rest is the object's end.
    after_events = max(0, last.rfind(b'"ph"'))
    for match in list(_AFTER_EVENTS.finditer(last, after_events))[:8]:
        try:
            after = json.loads(b'{"' + last[match.end():])
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        header.update(after if isinstance(after, dict) else {})
        break
    return {key: value for key, value in header.items() if key in _HEADER_KEYS}


def _gpus(header: dict[str, Any], rocm: bool) -> pl.DataFrame:
    rows = []
    for device in header.get("deviceProperties") or []:
        if not isinstance(device, dict) or _int(device.get("id")) is None:
            continue
        major, minor = _int(device.get("computeMajor")), _int(device.get("computeMinor"))
        # An AMD GPU's "compute capability" is its gfx version (9.4 is gfx942, an MI300X), not NVIDIA's: not kept.
        capability = f"{major}.{minor}" if major is not None and minor is not None and not rocm else None
        memory = _int(device.get("totalGlobalMem"))
        rows.append((_int(device.get("id")), str(device.get("name") or "") or None, _int(device.get("numSms")), None, None, capability, memory, None))
    return pl.DataFrame(rows, schema=NSYS_GPUS, orient="row")


def _innermost_ops(ops: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """Return (correlation_id, op_id): for each call (tid, start_ns, correlation_id), the innermost op on its thread
    that encloses it, found by one sweep per thread over ops and calls in time order (ops nest like a stack)."""
    found: list[tuple[int, int]] = []
    by_thread = ops.select("op_id", "tid", "start_ns", "end_ns").partition_by("tid", as_dict=True)
    for (tid,), thread_calls in calls.partition_by("tid", as_dict=True).items():
        thread_ops = by_thread.get((tid,))
        if thread_ops is None:
            continue
        # Ops before calls at one instant, and an outer op (ends later) before an inner one that starts with it.
        timeline = sorted([(start, 0, -end, op) for op, start, end in thread_ops.select("op_id", "start_ns", "end_ns").iter_rows()]
                          + [(start, 1, 0, correlation) for start, correlation in thread_calls.select("start_ns", "correlation_id").iter_rows()])
        stack: list[tuple[int, int]] = []  # (end_ns, op_id)
        for start, what, negative_end, key in timeline:
            while stack and stack[-1][0] < start:
                stack.pop()
            if what == 0:
                stack.append((-negative_end, key))
            elif stack:
                found.append((key, stack[-1][1]))
    return pl.DataFrame(found, schema={"correlation_id": pl.Int64, "op_id": pl.Int64}, orient="row")


def _without_nested_repeats(ops: pl.DataFrame) -> pl.DataFrame:
    """The ops without a module range directly inside one of the same name (torch.compile's GraphModule within
    GraphModule): grouped by name, each would count the same time twice."""
    modules = ops.filter(pl.col("name").str.starts_with("nn.Module: ")).sort(["tid", "start_ns", "end_ns"], descending=[False, False, True])
    repeated: list[int] = []
    stack: list[tuple[int, int, str]] = []  # (tid, end_ns, name)
    for op_id, tid, start, end, name in modules.select("op_id", "tid", "start_ns", "end_ns", "name").iter_rows():
        while stack and (stack[-1][0] != tid or stack[-1][1] < start):
            stack.pop()
        if stack and stack[-1][2] == name:
            repeated.append(op_id)
            continue
        stack.append((tid, end, name))
    return ops.filter(~pl.col("op_id").is_in(repeated)) if repeated else ops


def _kernel_ops(links: pl.DataFrame, api: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """The kernels with the op that launched each (TORCH_KERNEL_LINKS)."""
    if ops.height == 0 or links.height == 0:
        return links.with_columns(pl.lit(None, pl.Int64).alias("op_id")).select(list(TORCH_KERNEL_LINKS))
    by_external = ops.filter(pl.col("external_id").is_not_null()).unique("external_id", keep="first").select("external_id", "op_id")
    calls = api.filter(pl.col("correlation_id").is_not_null()).unique("correlation_id", keep="last")
    frame = links.join(calls.select("correlation_id", pl.col("external_id").alias("call_external")), on="correlation_id", how="left")
    frame = frame.with_columns(pl.coalesce("external_id", "call_external").alias("external")).join(
        by_external.rename({"external_id": "external"}), on="external", how="left")
    unlinked = frame.filter(pl.col("op_id").is_null() & pl.col("correlation_id").is_not_null())["correlation_id"]
    if unlinked.len():
        nested = _innermost_ops(ops.filter(pl.col("category") == "cpu_op"), calls.filter(pl.col("correlation_id").is_in(unlinked.implode())))
        frame = frame.join(nested.rename({"op_id": "nested_op"}), on="correlation_id", how="left").with_columns(
            pl.coalesce("op_id", "nested_op").alias("op_id"))
    return frame.select(list(TORCH_KERNEL_LINKS))


def parse(path: Path) -> TorchTrace:
    """Return the trace as frames; raises TraceFormatError when it holds no event array at all."""
    reader = _Reader()
    notes: list[str] = []
    try:
        with _open(path) as handle:
            ends = _Ends(handle)
            for event in _events(ends):  # type: ignore[arg-type]  # a reader of bytes is all ijson needs
                reader.add(event)
    except _Cut as cut:
        if reader.events == 0:
            raise TraceFormatError(path, f"a PyTorch profiler trace that cannot be read as JSON ({cut})",
                                   "is it complete? copy it again, or re-export it with prof.export_chrome_trace()") from None
        notes.append(f"the trace ends after {reader.events:,} events ({cut}): it looks cut short; the events before the cut were read")
    reader.flush()
    if reader.events == 0:
        raise TraceFormatError(path, "a JSON object with no traceEvents array in it",
                               "pass the trace torch.profiler wrote (prof.export_chrome_trace() or tensorboard_trace_handler)")
    header = _header(ends)
    rocm = reader.hip > 0 or any(key in header for key in ("roctracer_version", "hip_runtime_version"))
    links = reader.frame("kernels", _KERNEL_ROWS)
    api = reader.frame("api", _API_ROWS)
    memops = reader.frame("memops", _MEMOP_ROWS)
    # A GPU event belongs to the process whose runtime call has its correlation id (the GPU "process" is the device).
    callers = api.filter(pl.col("correlation_id").is_not_null()).unique("correlation_id", keep="last").select(
        "correlation_id", pl.col("pid").alias("caller_pid"), pl.col("name").alias("call"))
    main_pid = api["pid"].mode().first() if api.height else None
    kernels = links.join(callers, on="correlation_id", how="left").with_columns(
        pl.col("caller_pid").fill_null(pl.lit(main_pid, dtype=pl.Int64)).alias("pid"),
        # Replayed from a CUDA or HIP graph: launched by cudaGraphLaunch / hipGraphLaunch (no node ids in a trace).
        pl.when(pl.col("call").cast(pl.String).str.contains("GraphLaunch")).then(pl.lit(0)).otherwise(pl.lit(None)).cast(pl.Int64).alias("graph_node_id"),
    ).select(list(NSYS_KERNELS))
    memops = memops.join(callers.select("correlation_id", "caller_pid"), on="correlation_id", how="left").with_columns(
        pl.col("caller_pid").fill_null(pl.lit(main_pid, dtype=pl.Int64)).alias("pid")).select(list(NSYS_MEMOPS))
    ops = _without_nested_repeats(reader.frame("ops", TORCH_OPS))
    nvtx = ops.select("start_ns", "end_ns", pl.lit(without_per_call_numbers(ops["name"])).alias("text"),
                      pl.lit("PushPop").cast(pl.Categorical).alias("kind"), "tid")
    tables = {name for name, present in (("CUPTI_ACTIVITY_KIND_RUNTIME", api.height), ("CUPTI_ACTIVITY_KIND_KERNEL", kernels.height),
                                         ("NVTX_EVENTS", nvtx.height)) if present}
    if reader.bad:
        notes.append(f"{reader.bad:,} event(s) with no time, a negative duration or a time out of range were left out (a damaged trace?)")
    schema = header.get("schemaVersion")
    export = NsysExport(path, "PyTorch profiler (Kineto)", None if schema is None else str(schema), _gpus(header, rocm), kernels,
                        {i: name for name, i in reader.names.items()}, memops, pl.DataFrame(schema=NSYS_SYNC),
                        api.select(list(NSYS_API)).with_columns(pl.col("name").cast(pl.Categorical)), nvtx, tables,
                        pl.DataFrame(schema=NSYS_GRAPHS))
    distributed: dict[str, Any] = header["distributedInfo"] if isinstance(header.get("distributedInfo"), dict) else {}
    return TorchTrace(export, ops, _kernel_ops(links, api, ops), reader.frame("collectives", TORCH_COLLECTIVES),
                      None if schema is None else str(schema), rocm, _int(distributed.get("rank")), _int(distributed.get("world_size")),
                      bool(ops["input_dims"].is_not_null().any()) if ops.height else False, reader.python_functions, notes,
                      tuple(reader.unread.most_common()))


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    trace = parse(path)
    profiler = "PyTorch profiler (Kineto" + (", ROCm" if trace.rocm else "") + (f", schema {trace.schema_version})" if trace.schema_version else ")")
    return Parsed(trace, profiler, tuple(trace.notes))


FORMATS = (Format("pytorch-trace", "torch-trace", _read, _sniff, order=6, whole=True),)
