"""nvprof's SQLite export (`nvprof -o FILE`: `.nvvp`, `.nvprof`, `.sql`, `.sqlite`) → NsysExport, the frames an Nsight
Systems export is read into, so the whole-run view is the same.

nvprof writes CUPTI's activity records as they come, one table per kind (the grammar is CUPTI's activity structures;
NVIDIA's own pyprof reads the same tables):

- `StringTable(_id_, value)` holds every name; `Version(version)` the format version (11 in CUDA 9-10).
- Kernels are in `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL` (and `..._KERNEL` when concurrent kernels were off): `start`
  and `end` in ns, `deviceId`, `correlationId`, and `name`, a StringTable id of the kernel's mangled name.
- Copies and memsets: `CUPTI_ACTIVITY_KIND_MEMCPY` (`copyKind`, `srcKind`, `dstKind`, `bytes`) and `..._MEMSET`
  (`memoryKind`). Memory kinds are CUPTI's numbering (1 pageable, 2 pinned, 3 device, ...), which is not nsys's.
- Host calls: `CUPTI_ACTIVITY_KIND_RUNTIME` (and `..._DRIVER`): a CUPTI callback id (`cbid`) instead of a name,
  `processId`, `threadId`. The calls traceview classes (synchronize, copy, memset, allocation, launch) and the common
  set-up calls are named from CUPTI's callback-id enums; any other call keeps its number (`CUDA runtime call 159`).
- `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION` (`type`: CUPTI's, which nsys kept) and `CUPTI_ACTIVITY_KIND_DEVICE` (name as a
  StringTable id, `numMultiprocessors`, `coreClockRate` in kHz, `globalMemoryBandwidth` in kB/s).

NVTX markers (`CUPTI_ACTIVITY_KIND_MARKER`) are not read yet, and a note says so where the export has some.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers.base import Format, Head, Parsed, ReadOptions
from traceview.parsers.nsys_sqlite import (
    COPY_KINDS,
    MAX_NAME_CHARS,
    NSYS_API,
    NSYS_GPUS,
    NSYS_GRAPHS,
    NSYS_KERNELS,
    NSYS_MEMOPS,
    NSYS_NVTX,
    NSYS_SYNC,
    NsysExport,
    optional_column,
    table_columns,
    typed_frame,
)
from traceview.parsers.sqlite_files import open_read_only, sqlite_tables

_KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL")
# CUpti_ActivityMemoryKind.
_MEMORY_KINDS = {0: "Unknown", 1: "Pageable", 2: "Pinned", 3: "Device", 4: "Array", 5: "Managed", 6: "Device Static", 7: "Managed Static"}
# CUpti_ActivitySynchronizationType.
_SYNC_TYPES = {0: "Unknown", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync"}
# CUpti_runtime_api_trace_cbid (NVIDIA's generated cupti_runtime_cbid.h): the calls the whole-run analysis tells apart
# (synchronize, copy, memset, allocation, launch) and the set-up calls that show in its evidence.
RUNTIME_CALLS = {
    1: "cudaDriverGetVersion", 2: "cudaRuntimeGetVersion", 3: "cudaGetDeviceCount", 4: "cudaGetDeviceProperties", 8: "cudaConfigureCall",
    9: "cudaSetupArgument", 10: "cudaGetLastError", 11: "cudaPeekAtLastError", 13: "cudaLaunch", 14: "cudaFuncSetCacheConfig",
    15: "cudaFuncGetAttributes", 16: "cudaSetDevice", 17: "cudaGetDevice", 19: "cudaSetDeviceFlags", 20: "cudaMalloc", 21: "cudaMallocPitch",
    22: "cudaFree", 23: "cudaMallocArray", 24: "cudaFreeArray", 25: "cudaMallocHost", 26: "cudaFreeHost", 27: "cudaHostAlloc",
    28: "cudaHostGetDevicePointer", 30: "cudaMemGetInfo", 31: "cudaMemcpy", 32: "cudaMemcpy2D", 33: "cudaMemcpyToArray",
    34: "cudaMemcpy2DToArray", 35: "cudaMemcpyFromArray", 36: "cudaMemcpy2DFromArray", 37: "cudaMemcpyArrayToArray",
    38: "cudaMemcpy2DArrayToArray", 39: "cudaMemcpyToSymbol", 40: "cudaMemcpyFromSymbol", 41: "cudaMemcpyAsync",
    42: "cudaMemcpyToArrayAsync", 43: "cudaMemcpyFromArrayAsync", 44: "cudaMemcpy2DAsync", 45: "cudaMemcpy2DToArrayAsync",
    46: "cudaMemcpy2DFromArrayAsync", 47: "cudaMemcpyToSymbolAsync", 48: "cudaMemcpyFromSymbolAsync", 49: "cudaMemset",
    50: "cudaMemset2D", 51: "cudaMemsetAsync", 52: "cudaMemset2DAsync", 53: "cudaGetSymbolAddress", 123: "cudaThreadExit",
    126: "cudaThreadSynchronize", 129: "cudaStreamCreate", 130: "cudaStreamDestroy", 131: "cudaStreamSynchronize", 132: "cudaStreamQuery",
    133: "cudaEventCreate", 134: "cudaEventCreateWithFlags", 135: "cudaEventRecord", 136: "cudaEventDestroy", 137: "cudaEventSynchronize",
    138: "cudaEventQuery", 139: "cudaEventElapsedTime", 140: "cudaMalloc3D", 141: "cudaMalloc3DArray", 142: "cudaMemset3D",
    143: "cudaMemset3DAsync", 144: "cudaMemcpy3D", 145: "cudaMemcpy3DAsync", 147: "cudaStreamWaitEvent", 151: "cudaPointerGetAttributes",
    152: "cudaHostRegister", 153: "cudaHostUnregister", 154: "cudaDeviceCanAccessPeer", 155: "cudaDeviceEnablePeerAccess",
    160: "cudaMemcpyPeer", 161: "cudaMemcpyPeerAsync", 162: "cudaMemcpy3DPeer", 163: "cudaMemcpy3DPeerAsync", 164: "cudaDeviceReset",
    165: "cudaDeviceSynchronize", 166: "cudaDeviceGetLimit", 167: "cudaDeviceSetLimit", 170: "cudaProfilerInitialize",
    171: "cudaProfilerStart", 172: "cudaProfilerStop", 185: "cudaCreateTextureObject", 186: "cudaDestroyTextureObject",
    197: "cudaStreamAddCallback", 198: "cudaStreamCreateWithFlags", 200: "cudaDeviceGetAttribute", 201: "cudaStreamDestroy",
    202: "cudaStreamCreateWithPriority", 206: "cudaMallocManaged", 207: "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    209: "cudaGetErrorName", 211: "cudaLaunchKernel", 212: "cudaGetDeviceFlags", 213: "cudaLaunch_ptsz", 214: "cudaLaunchKernel_ptsz",
    215: "cudaMemcpy_ptds", 216: "cudaMemcpy2D_ptds", 223: "cudaMemcpyToSymbol_ptds", 224: "cudaMemcpyFromSymbol_ptds",
    225: "cudaMemcpyAsync_ptsz", 228: "cudaMemcpy2DAsync_ptsz", 231: "cudaMemcpyToSymbolAsync_ptsz", 232: "cudaMemcpyFromSymbolAsync_ptsz",
    233: "cudaMemset_ptds", 234: "cudaMemset2D_ptds", 235: "cudaMemsetAsync_ptsz", 236: "cudaMemset2DAsync_ptsz",
    239: "cudaStreamSynchronize_ptsz", 240: "cudaStreamQuery_ptsz", 242: "cudaEventRecord_ptsz", 245: "cudaMemcpy3D_ptds",
    246: "cudaMemcpy3DAsync_ptsz", 247: "cudaStreamWaitEvent_ptsz", 248: "cudaStreamAddCallback_ptsz", 252: "cudaMemPrefetchAsync",
    253: "cudaMemPrefetchAsync_ptsz", 254: "cudaMemAdvise", 269: "cudaLaunchCooperativeKernel", 270: "cudaLaunchCooperativeKernel_ptsz",
    272: "cudaLaunchCooperativeKernelMultiDevice", 273: "cudaFuncSetAttribute", 284: "cudaLaunchHostFunc", 285: "cudaLaunchHostFunc_ptsz",
    310: "cudaGraphInstantiate", 311: "cudaGraphLaunch", 312: "cudaGraphLaunch_ptsz", 315: "cudaStreamBeginCapture",
    317: "cudaStreamIsCapturing", 319: "cudaStreamEndCapture",
}
# CUpti_driver_api_trace_cbid, read where the export has driver calls and no runtime calls (a driver-API program).
DRIVER_CALLS = {
    17: "cuCtxSynchronize", 115: "cuLaunch", 116: "cuLaunchGrid", 117: "cuLaunchGridAsync", 121: "cuEventSynchronize",
    126: "cuStreamSynchronize", 276: "cuMemcpyHtoD_v2", 277: "cuMemcpyHtoDAsync_v2", 278: "cuMemcpyDtoH_v2", 279: "cuMemcpyDtoHAsync_v2",
    280: "cuMemcpyDtoD_v2", 281: "cuMemcpyDtoDAsync_v2", 305: "cuMemcpy", 306: "cuMemcpyAsync", 307: "cuLaunchKernel",
    440: "cuStreamSynchronize_ptsz", 442: "cuLaunchKernel_ptsz",
}
_FIX = "pass the file `nvprof -o FILE` wrote (or export the run with Nsight Systems: nsys export --type sqlite)"


def looks_like_nvprof_export(tables: set[str]) -> bool:
    """True for the tables of an nvprof export: CUPTI's activity tables named through a StringTable (nsys names
    through StringIds)."""
    return "StringTable" in tables and "StringIds" not in tables and any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables)


def parse(path: str | Path) -> NsysExport:
    """Return the export's kernels, copies, synchronizations, host calls and GPUs in the frames of an Nsight Systems
    export (times in ns)."""
    path = Path(path)
    try:
        connection = open_read_only(path)
        connection.text_factory = bytes
        tables = {_text(row[0]) for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except (sqlite3.Error, UnicodeError) as error:
        raise TraceFormatError(path, f"not a readable SQLite database ({error})", _FIX) from error
    try:
        return _read(path, connection, tables)
    except (sqlite3.Error, UnicodeError, pl.exceptions.PolarsError, OverflowError) as error:
        raise TraceFormatError(path, f"the nvprof export cannot be read ({error}); it may be truncated", _FIX) from error
    finally:
        connection.close()


def _text(value: object) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _read(path: Path, connection: sqlite3.Connection, tables: set[str]) -> NsysExport:
    names = {int(key): _text(value)[:MAX_NAME_CHARS] for key, value in connection.execute('SELECT _id_, value FROM "StringTable"')
             if isinstance(key, int) and value is not None}
    version = connection.execute('SELECT version FROM "Version"').fetchone() if "Version" in tables else None
    notes: list[str] = []
    kernels = pl.concat([_kernels(connection, tables, table) for table in _KERNEL_TABLES] or [pl.DataFrame(schema=NSYS_KERNELS)])
    memops = pl.concat([_copies(connection, tables), _memsets(connection, tables)])
    api = _calls(connection, tables, "CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_CALLS, "CUDA runtime call")
    if api.height == 0:
        api = _calls(connection, tables, "CUPTI_ACTIVITY_KIND_DRIVER", DRIVER_CALLS, "CUDA driver call")
    markers = _count(connection, tables, "CUPTI_ACTIVITY_KIND_MARKER")
    if markers:
        notes.append(f"nvprof's NVTX markers ({markers:,} records) are not read: the whole-run view has no NVTX ranges")
    metrics = _count(connection, tables, "CUPTI_ACTIVITY_KIND_METRIC")
    if metrics:
        # Metric values are stored under CUPTI's numeric metric ids, which only CUPTI (the Visual Profiler) turns into names.
        notes.append(f"the export holds {metrics:,} metric values (--analysis-metrics or --metrics with -o) under CUPTI's numeric metric "
                     "ids, which only the Visual Profiler resolves: not read — for a roofline verdict print them instead "
                     "(nvprof --metrics flop_count_sp,flop_count_dp,dram_read_transactions,... ./app) and pass that output")
    return NsysExport(path, f"nvprof (export format {_text(version[0])})" if version else "nvprof", None, _gpus(connection, tables, names),
                      kernels, names, memops, _syncs(connection, tables), api, pl.DataFrame(schema=NSYS_NVTX), tables,
                      pl.DataFrame(schema=NSYS_GRAPHS), {}, notes)


def _count(connection: sqlite3.Connection, tables: set[str], table: str) -> int:
    return int(connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]) if table in tables else 0


def _timed(connection: sqlite3.Connection, tables: set[str], table: str) -> set[str] | None:
    """The table's columns, or None when the export lacks it or it lacks start and end (it cannot be placed in time)."""
    if table not in tables:
        return None
    columns = set(table_columns(connection, table))
    return columns if {"start", "end"} <= columns else None


def _kernels(connection: sqlite3.Connection, tables: set[str], table: str) -> pl.DataFrame:
    columns = _timed(connection, tables, table)
    if columns is None:
        return pl.DataFrame(schema=NSYS_KERNELS)
    sql = (f'SELECT start, "end", {optional_column(columns, "deviceId", missing="0")}, {optional_column(columns, "name")}, '
           f'{optional_column(columns, "correlationId")}, NULL, NULL FROM "{table}"')
    return typed_frame(connection, sql, NSYS_KERNELS)


def _copies(connection: sqlite3.Connection, tables: set[str]) -> pl.DataFrame:
    table = "CUPTI_ACTIVITY_KIND_MEMCPY"
    columns = _timed(connection, tables, table)
    if columns is None:
        return pl.DataFrame(schema=NSYS_MEMOPS)
    sql = (f'SELECT start, "end", {optional_column(columns, "deviceId", missing="0")}, {optional_column(columns, "copyKind")}, '
           f'{optional_column(columns, "bytes")}, {optional_column(columns, "srcKind")}, {optional_column(columns, "dstKind")}, '
           f'{optional_column(columns, "correlationId")} FROM "{table}"')
    raw = typed_frame(connection, sql, pl.Schema({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "copy_kind": pl.Int64,
                                                  "bytes": pl.Int64, "src": pl.Int64, "dst": pl.Int64, "correlation_id": pl.Int64}))
    return raw.select(
        "start_ns", "end_ns", "device_id",
        ("memcpy " + pl.col("copy_kind").replace_strict(COPY_KINDS, default="Unknown", return_dtype=pl.String)).fill_null("memcpy Unknown")
        .alias("operation"),
        "copy_kind", "bytes",
        pl.col("src").replace_strict(_MEMORY_KINDS, default=None, return_dtype=pl.String).alias("src_kind"),
        pl.col("dst").replace_strict(_MEMORY_KINDS, default=None, return_dtype=pl.String).alias("dst_kind"),
        "correlation_id", pl.lit(None, dtype=pl.Int64).alias("pid"),
    )


def _memsets(connection: sqlite3.Connection, tables: set[str]) -> pl.DataFrame:
    table = "CUPTI_ACTIVITY_KIND_MEMSET"
    columns = _timed(connection, tables, table)
    if columns is None:
        return pl.DataFrame(schema=NSYS_MEMOPS)
    sql = (f'SELECT start, "end", {optional_column(columns, "deviceId", missing="0")}, {optional_column(columns, "bytes")}, '
           f'{optional_column(columns, "memoryKind")}, {optional_column(columns, "correlationId")} FROM "{table}"')
    raw = typed_frame(connection, sql, pl.Schema({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "bytes": pl.Int64,
                                                  "kind": pl.Int64, "correlation_id": pl.Int64}))
    return raw.select("start_ns", "end_ns", "device_id", pl.lit("memset").alias("operation"), pl.lit(None, dtype=pl.Int64).alias("copy_kind"),
                      "bytes", pl.lit(None, dtype=pl.String).alias("src_kind"),
                      pl.col("kind").replace_strict(_MEMORY_KINDS, default=None, return_dtype=pl.String).alias("dst_kind"),
                      "correlation_id", pl.lit(None, dtype=pl.Int64).alias("pid"))


def _syncs(connection: sqlite3.Connection, tables: set[str]) -> pl.DataFrame:
    table = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    columns = _timed(connection, tables, table)
    if columns is None:
        return pl.DataFrame(schema=NSYS_SYNC)
    # Synchronizations name a context, not a device: device 0 is assumed, as for a one-GPU run.
    sql = f'SELECT start, "end", 0, {optional_column(columns, "type")}, {optional_column(columns, "correlationId")} FROM "{table}"'
    raw = typed_frame(connection, sql, pl.Schema({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "type": pl.Int64,
                                                  "correlation_id": pl.Int64}))
    return raw.select("start_ns", "end_ns", "device_id",
                      pl.col("type").replace_strict(_SYNC_TYPES, default="Unknown", return_dtype=pl.String).alias("sync_type"),
                      "correlation_id", pl.lit(None, dtype=pl.Int64).alias("pid"))


def _calls(connection: sqlite3.Connection, tables: set[str], table: str, known: dict[int, str], other: str) -> pl.DataFrame:
    """Return the table's API calls with their names (known callback ids), and the thread id packed as nsys packs it
    (process id in bits 24-47), so that the process is found the same way."""
    columns = _timed(connection, tables, table)
    if columns is None:
        return pl.DataFrame(schema=NSYS_API)
    sql = (f'SELECT start, "end", {optional_column(columns, "cbid")}, {optional_column(columns, "correlationId")}, '
           f'{optional_column(columns, "processId")}, {optional_column(columns, "threadId")} FROM "{table}"')
    raw = typed_frame(connection, sql, pl.Schema({"start_ns": pl.Int64, "end_ns": pl.Int64, "cbid": pl.Int64, "correlation_id": pl.Int64,
                                                  "pid": pl.Int64, "thread": pl.Int64}))
    ids = raw["cbid"].unique().drop_nulls().to_list()
    named = {cbid: known.get(cbid, f"{other} {cbid}") for cbid in ids}
    pid = pl.col("pid") % 16777216
    return raw.select(
        "start_ns", "end_ns",
        pl.col("cbid").replace_strict(named, default=other, return_dtype=pl.String).cast(pl.Categorical).alias("name"),
        "correlation_id", (pid * 16777216 + pl.col("thread") % 16777216).alias("tid"), pid.alias("pid"),
    )


def _gpus(connection: sqlite3.Connection, tables: set[str], names: dict[int, str]) -> pl.DataFrame:
    table = "CUPTI_ACTIVITY_KIND_DEVICE"
    if table not in tables:
        return pl.DataFrame(schema=NSYS_GPUS)
    columns = set(table_columns(connection, table))
    cc = ("computeCapabilityMajor || '.' || computeCapabilityMinor" if {"computeCapabilityMajor", "computeCapabilityMinor"} <= columns
          else "NULL")
    sql = (f'SELECT {optional_column(columns, "id", missing="0")}, {optional_column(columns, "name")}, '
           f'{optional_column(columns, "numMultiprocessors")}, {optional_column(columns, "coreClockRate", "coreClockRate * 1000.0")}, '
           f'{optional_column(columns, "globalMemoryBandwidth", "globalMemoryBandwidth * 1000.0")}, {cc}, '
           f'{optional_column(columns, "globalMemorySize")} FROM "{table}"')
    raw = typed_frame(connection, sql, pl.Schema({"device_id": pl.Int64, "name_id": pl.Int64, "sm_count": pl.Int64, "clock_hz": pl.Float64,
                                                  "memory_bandwidth_bytes_per_s": pl.Float64, "compute_capability": pl.String,
                                                  "memory_bytes": pl.Int64}))
    gpu_names = {key: names.get(key, "").strip() or None for key in raw["name_id"].unique().drop_nulls().to_list()}
    return raw.select(
        "device_id", pl.col("name_id").replace_strict(gpu_names, default=None, return_dtype=pl.String).alias("name"),
        "sm_count", "clock_hz", "memory_bandwidth_bytes_per_s", "compute_capability", "memory_bytes", pl.lit(None, dtype=pl.Boolean).alias("integrated"),
    ).unique("device_id", keep="first", maintain_order=True)


def _read_format(path: Path, found: object, options: ReadOptions) -> Parsed:
    export = parse(path)
    return Parsed(export, f"{export.product_version}, SQLite export (nvprof -o)")


def _sniff(head: Head) -> bool:
    tables = sqlite_tables(head)
    return tables is not None and looks_like_nvprof_export(set(tables))


FORMATS = (Format("nvprof-sqlite", "nsys-export", _read_format, _sniff, order=2, whole=True),)
