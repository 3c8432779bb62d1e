"""Nsight Systems SQLite exports → typed frames: kernels, memory operations, synchronisation, CUDA API calls, NVTX.

Every schema seen (formats.md §3): metadata in META_DATA_EXPORT, EXPORT_META_DATA or neither; GPUs in
TARGET_INFO_GPU (Hz, B/s) or TARGET_INFO_CUDA_GPU (kHz, kB/s) or neither; kernel tables with or without
`mangledName` and with columns added by newer versions; non-UTF-8 bytes in StringIds. Columns are selected by name;
a missing optional table gives an empty frame, never an error. The kernel table is read in bulk into Arrow through
ADBC, in row-id chunks so a progress callback can report long reads.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import math
import queue
import re
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from traceview.errors import TooLargeError, TraceFormatError
from traceview.parsers.base import Format, Parsed, ReadOptions
from traceview.parsers.schema import conform, schema_of, widened
from traceview.parsers.sqlite_files import SQLITE_MAGIC, open_read_only, read_only_uri
from traceview.resources import MEMORY_ENV, memory_budget_bytes
from traceview.wording import counted

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
GRAPH_TRACE_TABLE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
_CHUNK_ROWS = 500_000  # rows per query at most, and per ADBC record batch (the driver's default is 1,024): see _Reader.chunk
_CONNECTIONS = 2  # tables are read on this many connections at once
_SPLIT_ROWS = 50_000  # a table with fewer rows is one query: a second connection would cost more than it gives
# The analysis's peak memory per row read (the kernels, calls and copies are held, and the launch join and the gaps'
# causes take a few more bytes per kernel at their peaks; NVTX ranges are streamed, only their per-group sums and
# step ranges kept, and the NVTX chunks in flight a fixed 0.2 GB), from benchmarks/bench_nsys_realistic.py on this
# machine (2026-12-07): the realistic exports of 2 M and 10 M launches peak at 0.63 GB and 1.96 GB (these figures give
# 0.64 and 2.19 GB), kernels alone (2 M) at about 0.4 GB. Used to refuse, before reading, an export the machine cannot
# hold.
_PEAK_BYTES_PER_KERNEL = 130
_PEAK_BYTES_PER_ROW = 26  # any other timed row held: runtime calls, copies, synchronisation
_PEAK_BYTES_PER_NVTX_ROW = 2
_PEAK_BASE_BYTES = 250_000_000
# Beyond this many row ids (a damaged page can make max(rowid) ~2**62) a table is read as one range, counted first.
_MAX_ROWID_SPAN = 256 * _CHUNK_ROWS
MAX_NAME_CHARS = 65_536  # kernel names of generated code reach tens of kilobytes, never megabytes
MAX_API_NAME_CHARS = 256
MAX_NVTX_TEXT_CHARS = 4096
# The numbers PyTorch gives every op range (`aten::linear, seq = 7, op_id = 317126`), then addresses: they change on
# every call, so the texts are kept without them, as the names the ranges are shown and grouped by.
PER_CALL_NUMBERS = ((r"\s*(?:,\s*)?\b(?:op_id|seq|sequence_number|seq_id|fwd_seq|bwd_seq)\s*[=:]\s*-?\d+", ""), (r"0x[0-9a-fA-F]+", "0x…"))
_ASCII_DIGITS = "0123456789"

# globalPid / globalTid pack the process id as (value >> 24) & 0xFFFFFF (Nsight Systems export documentation).
_PID = "(({column} / 16777216) % 16777216)"

# Ids in the narrowest type that holds every value nsys writes, since millions of rows are held through the analysis
# (10 M kernels, 17 M runtime calls): a device in 32 bits, a process id in the 24 bits globalPid packs it in, a
# StringIds id in 32, a CUPTI correlation id in its own unsigned 32 bits. A value that does not fit (a damaged cell)
# is null, as a missing one is. Copy and synchronisation kinds and call names repeat millions of times and are few:
# categorical. Thread ids stay 64-bit: globalTid packs the process id above a 24-bit thread id.
_DEVICE, _PROCESS, _STRING_ID, _CORRELATION = pl.Int32, pl.Int32, pl.Int32, pl.UInt32
NSYS_KERNELS = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": _DEVICE, "name_id": _STRING_ID,
                          "correlation_id": _CORRELATION, "pid": _PROCESS, "graph_node_id": pl.Int64})
NSYS_MEMOPS = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": _DEVICE, "operation": pl.Categorical(),
                         "copy_kind": pl.Int64, "bytes": pl.Int64, "src_kind": pl.Categorical(), "dst_kind": pl.Categorical(),
                         "correlation_id": _CORRELATION, "pid": _PROCESS})
NSYS_SYNC = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": _DEVICE, "sync_type": pl.Categorical(),
                       "correlation_id": _CORRELATION, "pid": _PROCESS})
NSYS_API = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.Categorical(), "correlation_id": _CORRELATION,
                      "tid": pl.Int64, "pid": _PROCESS})
# `text` is the range's name without the numbers that change on every call (PER_CALL_NUMBERS): PyTorch numbers every
# op range, so the raw texts are about as many as the ranges; without the numbers they are a few hundred, and a
# categorical holds ten million of them in 4 bytes each, where the strings took about 30.
# The process of a range is in its thread id: pid_of_thread().
NSYS_NVTX = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "text": pl.Categorical(), "kind": pl.Categorical(),
                       "tid": pl.Int64})
# Whole-graph executions (`nsys profile --cuda-graph-trace=graph`, the default): the nodes are not in the kernel table.
NSYS_GRAPHS = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": _DEVICE, "correlation_id": _CORRELATION,
                         "pid": _PROCESS})
# `integrated`: the GPU shares the host's memory (a Jetson; TARGET_INFO_GPU.isDiscrete = 0), null where not recorded.
NSYS_GPUS = schema_of({"device_id": pl.Int64, "name": pl.String, "sm_count": pl.Int64, "clock_hz": pl.Float64,
                       "memory_bandwidth_bytes_per_s": pl.Float64, "compute_capability": pl.String, "memory_bytes": pl.Int64,
                       "integrated": pl.Boolean})

# Fallbacks for exports without ENUM_* tables (nsys ≤ 2022.1); the values match the later enum tables.
COPY_KINDS = {0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
               5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device", 9: "Host-to-Host",
               10: "Peer-to-Peer", 11: "Unified Host-to-Device", 12: "Unified Device-to-Host", 13: "Unified Device-to-Device"}
_MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static", 6: "Managed Static", 7: "Unknown"}
_SYNC_TYPES = {0: "Unknown", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync"}
_NVTX_KINDS = {59: "PushPop", 60: "StartEnd", 34: "Mark"}


class TableStream:
    """One table of an export, read again chunk by chunk in row order each time `chunks()` is called: the next chunks
    are read (one per connection) while the caller works on this one, and no more than those are held.

    Its connections are opened with it and kept open until it is dropped, so the export can still be read after the
    file is removed (the dashboard removes an upload once it is analysed; its timeline reads the ranges later)."""

    def __init__(self, reader: _Reader, table: str, select: str, schema: pl.Schema, where: str | None,
                 finish: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
        self.table, self.rows, self._ranges = table, reader.rows.get(table, 0), reader.ranges(table)
        condition = f" AND ({where})" if where else ""
        self._queries = [f'SELECT {select} FROM "{table}" WHERE rowid BETWEEN {low} AND {high}{condition}' for low, high in self._ranges]
        self._schema, self._finish, self._reader = schema, finish, reader
        self._free: queue.SimpleQueue[object] = queue.SimpleQueue()
        opened: list[Any] = []
        if reader.driver is not None and reader.manager is not None:
            for _ in range(_CONNECTIONS):
                database = reader.driver.connect(read_only_uri(reader.path))
                connection = reader.manager.AdbcConnection(database)
                opened += [connection, database]  # closed in this order
                self._free.put(connection)
        # For the chunks whose cells defeat ADBC's type inference (_Reader.chunk), one at a time.
        self._typed = sqlite3.connect(read_only_uri(reader.path), uri=True, check_same_thread=False)
        self._typed.text_factory = bytes
        self._typed_lock = threading.Lock()
        self._started: tuple[ThreadPoolExecutor, collections.deque[Future[pl.DataFrame]]] | None = None
        weakref.finalize(self, _close_all, [*opened, self._typed])

    def read_ahead(self) -> None:
        """Start reading the first chunk now, for the next `chunks()` to begin with: the read then uses a core that the
        caller's work leaves idle before it comes to this table."""
        # One chunk, not one per connection: on the realistic 2 M export two took as long, and 40 MB more at the peak.
        if self._started is None and self._queries:
            pool = ThreadPoolExecutor(max_workers=_CONNECTIONS)
            self._started = pool, collections.deque([pool.submit(self._chunk, self._queries[0])])

    def chunks(self) -> Iterator[pl.DataFrame]:
        """Yield the table's rows as frames of the schema, after `finish`, in row order."""
        if not self._queries:
            yield self._finish(pl.DataFrame(schema=self._schema))
            return
        started, self._started = self._started, None
        # As many chunks read ahead as there are connections: the caller's work on one chunk is shorter than a read.
        pool = started[0] if started is not None else ThreadPoolExecutor(max_workers=_CONNECTIONS)
        with pool:
            ahead = started[1] if started is not None else collections.deque()
            queries = itertools.islice(self._queries, len(ahead), None)
            ahead += (pool.submit(self._chunk, sql) for sql in itertools.islice(queries, _CONNECTIONS - len(ahead)))
            while ahead:
                part = ahead.popleft().result()
                following = next(queries, None)
                if following is not None:
                    ahead.append(pool.submit(self._chunk, following))
                yield part
                del part

    def rows_at(self, part: int, offset: int, count: int) -> pl.DataFrame:
        """Return rows `offset` to `offset + count` of chunk `part` of `chunks()`, after `finish`: SQLite steps over the
        rows before them without decoding them, so a few thousand rows from the middle of a table take milliseconds."""
        if not self._queries:
            return self._finish(pl.DataFrame(schema=self._schema))
        return self._chunk(f"{self._queries[part]} LIMIT {int(count)} OFFSET {int(offset)}")

    def _chunk(self, sql: str) -> pl.DataFrame:
        connection = self._free.get() if self._reader.driver is not None else None
        try:
            return self._finish(self._reader.chunk(sql, self._schema, connection, (self._typed, self._typed_lock)))
        except _read_errors() as error:
            raise TraceFormatError(self._reader.path, f"the table {self.table} cannot be read ({error}); the export may be truncated or changed since it was opened",
                                   "re-export it with nsys export --type sqlite") from error
        finally:
            if connection is not None:
                self._free.put(connection)


def _close_all(handles: list[Any]) -> None:
    for handle in handles:
        with contextlib.suppress(Exception):  # closing at exit or after a failed read: nothing left to do about it
            handle.close()


@dataclass
class NsysExport:
    """Everything traceview reads from one export; frames are empty where the export lacks the table."""

    path: Path
    product_version: str | None
    schema_version: str | None
    gpus: pl.DataFrame
    kernels: pl.DataFrame
    names: dict[int, str]
    memops: pl.DataFrame
    sync: pl.DataFrame
    api: pl.DataFrame
    held_nvtx: pl.DataFrame  # the NVTX rows where the input's are held (a PyTorch trace); empty where they are streamed
    tables: set[str] = field(default_factory=set)
    graphs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=NSYS_GRAPHS))
    capture_options: dict[str, str] = field(default_factory=dict)  # META_DATA_CAPTURE (nsys 2024+)
    notes: list[str] = field(default_factory=list)  # optional columns or tables the export lacks
    kernel_release: str | None = None  # the profiled host's Linux kernel release (`5.15.90.1-microsoft-standard-WSL2`)
    nvtx_stream: TableStream | None = None  # NVTX_EVENTS of an Nsight Systems export: read again chunk by chunk, never held

    def __post_init__(self) -> None:
        # Every reader's frames in the schemas' types (narrow ids, categorical kinds): a frame already in them is
        # left as it is, without a copy.
        for name, schema in (("kernels", NSYS_KERNELS), ("memops", NSYS_MEMOPS), ("sync", NSYS_SYNC), ("api", NSYS_API), ("graphs", NSYS_GRAPHS),
                             ("held_nvtx", NSYS_NVTX)):
            frame = getattr(self, name)
            if frame.schema != schema:
                setattr(self, name, conform(frame, schema))

    def nvtx_chunks(self) -> Iterator[pl.DataFrame]:
        """Yield the NVTX rows (NSYS_NVTX) in the input's row order: streamed from the export in chunks of at most
        _CHUNK_ROWS rows, or the held frame as one chunk."""
        if self.nvtx_stream is None:
            yield self.held_nvtx
        else:
            yield from self.nvtx_stream.chunks()

    @property
    def nvtx(self) -> pl.DataFrame:
        """Return every NVTX row (NSYS_NVTX) at once, read from the export on first use and then kept: for a caller
        that wants them whole (tests, a notebook); neither the analysis nor the timeline's lanes use it, since they
        stream them (nvtx_chunks)."""
        if self.nvtx_stream is not None:
            self.held_nvtx = pl.concat(list(self.nvtx_stream.chunks()), rechunk=False)
            self.nvtx_stream = None
        return self.held_nvtx


def _connect(path: Path) -> sqlite3.Connection:
    # A path is a path: open it, then hand SQLite the open file's name through a read-only URI with every
    # character that means something in a URI percent-encoded.
    connection = open_read_only(path)
    connection.text_factory = bytes  # StringIds may hold Latin-1 bytes (a Windows capture)
    return connection


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def table_columns(connection: sqlite3.Connection, table: str) -> list[str]:
    return [_text(row[1]) or "" for row in connection.execute(f'PRAGMA table_info("{table}")')]


def _enum(connection: sqlite3.Connection, tables: set[str], table: str, fallback: dict[int, str]) -> dict[int, str]:
    if table not in tables:
        return fallback
    rows = connection.execute(f'SELECT id, name, label FROM "{table}"')
    return {key: _text(row[2]) or _text(row[1]) or str(key) for row in rows if (key := _as_int(row[0])) is not None} or fallback


_INT64 = (-(2**63), 2**63 - 1)


def _as_int(value: object) -> int | None:
    """An integer cell (a whole REAL too, as tools that write nsys-compatible SQLite may store one), or None for NULL,
    text, fractions and values beyond 64 bits (a damaged export)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if _INT64[0] <= value <= _INT64[1] else None


def _as_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _as_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _as_flag(value: object) -> bool | None:
    """A 0/1 cell (SQLite has no booleans) as a boolean, or None for NULL and anything that is not an integer."""
    number = _as_int(value)
    return None if number is None else number != 0


_CONVERTERS: dict[type[pl.DataType], Callable[[object], object]] = {pl.Int64: _as_int, pl.Float64: _as_float, pl.String: _as_text,
                                                                   pl.Categorical: _as_text, pl.Boolean: _as_flag}


def typed_frame(connection: sqlite3.Connection, sql: str, schema: pl.Schema) -> pl.DataFrame:
    """Return the query's rows as a frame with the given schema: each cell converted to its column's declared type,
    never inferred from the first rows; a cell that is not of that type (text in an id column) becomes null."""
    # Integers are read as 64-bit and then narrowed to the schema's type, a value it cannot hold becoming null.
    wide = widened(schema)
    converters = [_CONVERTERS[type(dtype)] for dtype in wide.values()]
    rows = [tuple(convert(v) for convert, v in zip(converters, row, strict=True)) for row in connection.execute(sql)]
    return conform(pl.DataFrame(rows, schema=wide, orient="row"), schema)


def optional_column(columns: set[str], name: str, expression: str | None = None, missing: str = "NULL") -> str:
    """The column (or an expression over it) when the table has it, else `missing` (NULL): a missing column means
    fewer findings, never an error."""
    return (expression or f'"{name}"') if name in columns else missing


def pid_of_thread() -> pl.Expr:
    """The process id inside a global thread id (`tid`), as _PID takes it out of a global process id: computed rather
    than read as a second column, which would cost a tenth of the read of ten million NVTX rows (and, for NVTX,
    computed where it is needed rather than kept: 78 MB over ten million ranges)."""
    return ((pl.col("tid") // 16777216) % 16777216).alias("pid")


def threads_of(tids: pl.Series, pids: Iterable[int]) -> pl.Series:
    """Return the distinct thread ids among `tids` whose process (pid_of_thread) is one of `pids`: threads are few, so
    rows are matched by thread without computing a process id per row."""
    threads = tids.unique().drop_nulls()
    return threads.filter(threads.to_frame("tid").select(pid_of_thread().is_in(list(pids))).to_series())


def _device(columns: set[str]) -> str:
    # Tools that write nsys-compatible SQLite for one GPU may leave the device out: that is device 0.
    return optional_column(columns, "deviceId", missing="0")


def parse(path: str | Path, progress: Callable[[int, int], None] | None = None) -> NsysExport:
    """Return the export's frames; `progress(rows_read, rows_total)` is called while the kernel table is read."""
    path = Path(path)
    try:
        connection = _connect(path)
        tables = {_text(row[0]) or "" for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except (sqlite3.Error, UnicodeError) as error:
        raise TraceFormatError(path, f"not a readable SQLite database ({error})", "pass the .sqlite that `nsys export --type sqlite` wrote") from error
    if not tables & {KERNEL_TABLE, "StringIds", "NVTX_EVENTS", "TARGET_INFO_GPU", "META_DATA_EXPORT", "EXPORT_META_DATA"}:
        raise TraceFormatError(path, "an SQLite database, but not an Nsight Systems export (no CUPTI_ACTIVITY_KIND_*, StringIds or NVTX tables)",
                               "pass the .sqlite that `nsys export --type sqlite` wrote (or the database `llama-bench -o sql` was piped into)")
    try:
        return _read(path, connection, tables, progress)
    except _read_errors() as error:
        raise TraceFormatError(path, f"the database cannot be read ({error}); the export may be truncated", "re-export it with nsys export --type sqlite") from error
    finally:
        connection.close()


def _read_errors() -> tuple[type[BaseException], ...]:
    """What a damaged database raises while it is read: SQLite's errors, bad text, and the ADBC driver's errors (which
    include a plain OSError for a malformed page)."""
    errors: list[type[BaseException]] = [sqlite3.Error, UnicodeError, pl.exceptions.PolarsError, OSError]
    try:
        import adbc_driver_manager

        errors.append(adbc_driver_manager.Error)
    except (ImportError, AttributeError):
        pass
    return tuple(errors)


def _read(path: Path, connection: sqlite3.Connection, tables: set[str], progress: Callable[[int, int], None] | None) -> NsysExport:
    meta: dict[str, str] = {}
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables:
            meta = {_text(k) or "": _text(v) or "" for k, v in connection.execute(f'SELECT name, value FROM "{table}"')}
            break
    capture: dict[str, str] = {}
    if "META_DATA_CAPTURE" in tables:
        capture = {_text(k) or "": _text(v) or "" for k, v in connection.execute("SELECT name, value FROM META_DATA_CAPTURE")}
    names = {}
    if "StringIds" in tables:
        names = {key: _text(row[1]) or "" for row in connection.execute("SELECT id, value FROM StringIds") if (key := _as_int(row[0])) is not None}
    long_names = [key for key, value in names.items() if len(value) > MAX_NAME_CHARS]
    for key in long_names:  # a damaged export can hold megabytes in one string; no real name is that long
        names[key] = names[key][:MAX_NAME_CHARS] + "…"
    copy_kinds = _enum(connection, tables, "ENUM_CUDA_MEMCPY_OPER", COPY_KINDS)
    mem_kinds = _enum(connection, tables, "ENUM_CUDA_MEM_KIND", _MEM_KINDS)
    sync_types = _enum(connection, tables, "ENUM_CUPTI_SYNC_TYPE", _SYNC_TYPES)
    notes: list[str] = []
    if "DIAGNOSTIC_EVENT" in tables:
        notes += _trace_warnings(connection, names)

    memops = pl.DataFrame(schema=NSYS_MEMOPS)
    untimed = [t for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                           "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", GRAPH_TRACE_TABLE)
               if t in tables and not {"start", "end"} <= set(table_columns(connection, t))]
    if untimed:
        notes.append(f"left out for lack of start/end columns: {', '.join(untimed)}")
        tables = tables - set(untimed)
    timed = [t for t in (KERNEL_TABLE, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                         "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", GRAPH_TRACE_TABLE) if t in tables]
    reader = _Reader(path, connection, progress, timed)
    # NVTX ranges are streamed by the analysis (TableStream), not read here: the progress count is of the rest.
    reader.total -= reader.rows.get("NVTX_EVENTS", 0)
    _check_memory(path, reader.rows)
    kernels = _read_kernels(path, connection, tables, reader)
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        columns = set(table_columns(connection, "CUPTI_ACTIVITY_KIND_MEMCPY"))
        if not {"srcKind", "dstKind"} <= columns:
            notes.append("the memcpy table has no srcKind/dstKind columns: pageable host copies cannot be told apart")
        sql = (f'start, "end", {_device(columns)}, {optional_column(columns, "copyKind")}, {optional_column(columns, "bytes")}, '
               f'{optional_column(columns, "srcKind")}, {optional_column(columns, "dstKind")}, {optional_column(columns, "correlationId")}, '
               f'{optional_column(columns, "globalPid", _PID.format(column="globalPid"))}')
        operations = {kind: f"memcpy {name}" for kind, name in copy_kinds.items()}
        memops = reader.read("CUPTI_ACTIVITY_KIND_MEMCPY", sql, schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "copy_kind": pl.Int64,
                                                      "bytes": pl.Int64, "src": pl.Int64, "dst": pl.Int64, "correlation_id": pl.Int64, "pid": pl.Int64}),
                             finish=lambda chunk: held(chunk.with_columns(
                                 pl.col("copy_kind").replace_strict(operations, default="memcpy Unknown", return_dtype=pl.String).fill_null("memcpy Unknown")
                                 .alias("operation"),
                                 pl.col("src").replace_strict(mem_kinds, default=None, return_dtype=pl.String).alias("src_kind"),
                                 pl.col("dst").replace_strict(mem_kinds, default=None, return_dtype=pl.String).alias("dst_kind")), NSYS_MEMOPS))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        columns = set(table_columns(connection, "CUPTI_ACTIVITY_KIND_MEMSET"))
        sql = (f'start, "end", {_device(columns)}, {optional_column(columns, "bytes")}, {optional_column(columns, "memKind")}, '
               f'{optional_column(columns, "correlationId")}, {optional_column(columns, "globalPid", _PID.format(column="globalPid"))}')
        memset = reader.read("CUPTI_ACTIVITY_KIND_MEMSET", sql, schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "bytes": pl.Int64,
                                                      "kind": pl.Int64, "correlation_id": pl.Int64, "pid": pl.Int64}),
                             finish=lambda chunk: held(chunk.with_columns(
                                 pl.lit("memset").alias("operation"), pl.lit(None, dtype=pl.Int64).alias("copy_kind"), pl.lit(None, dtype=pl.String).alias("src_kind"),
                                 pl.col("kind").replace_strict(mem_kinds, default=None, return_dtype=pl.String).alias("dst_kind")), NSYS_MEMOPS))
        # The memsets' constant columns come out of the concatenation of their chunks as one chunk, the others as
        # several: with its columns chunked differently, every later operation on the copies re-laid the whole frame
        # out first (0.15 GB for a moment on the 10 M-launch export, polars 2.1 and 2.2). In one chunk each, they agree.
        memops = pl.concat([memops, memset.rechunk()], rechunk=False)
    sync = pl.DataFrame(schema=NSYS_SYNC)
    if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in tables:
        columns = set(table_columns(connection, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"))
        sql = (f'start, "end", {_device(columns)}, {optional_column(columns, "syncType")}, {optional_column(columns, "correlationId")}, '
               f'{optional_column(columns, "globalPid", _PID.format(column="globalPid"))}')
        sync = reader.read("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", sql, schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "device_id": pl.Int64, "type": pl.Int64,
                                                      "correlation_id": pl.Int64, "pid": pl.Int64}),
                           finish=lambda chunk: held(chunk.with_columns(
                               pl.col("type").replace_strict(sync_types, default="Unknown", return_dtype=pl.String).alias("sync_type")), NSYS_SYNC))
    api = pl.DataFrame(schema=NSYS_API)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        columns = set(table_columns(connection, "CUPTI_ACTIVITY_KIND_RUNTIME"))
        sql = f'start, "end", {optional_column(columns, "nameId")}, {optional_column(columns, "correlationId")}, {optional_column(columns, "globalTid")}'
        api = reader.read("CUPTI_ACTIVITY_KIND_RUNTIME", sql, schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "name_id": pl.Int64, "correlation_id": pl.Int64,
                                                      "tid": pl.Int64}), finish=lambda chunk: _api_rows(chunk, names))
    nvtx_stream = None
    if "NVTX_EVENTS" in tables:
        columns = set(table_columns(connection, "NVTX_EVENTS"))
        # Without eventType (a trimmed export) a row with an end is a push/pop range and one without an end a mark.
        kind = optional_column(columns, "eventType", missing='CASE WHEN "end" IS NULL THEN 34 ELSE 59 END')
        sql = f'start, "end", {kind}, {optional_column(columns, "text")}, {optional_column(columns, "textId")}, {optional_column(columns, "globalTid")}'
        raw = schema_of({"start_ns": pl.Int64, "end_ns": pl.Int64, "type": pl.Int64, "text": pl.String, "text_id": pl.Int64, "tid": pl.Int64})
        # Read again chunk by chunk when the analysis comes to it, never whole: ten million launches come with
        # fifty million ranges.
        nvtx_stream = TableStream(reader, "NVTX_EVENTS", sql, raw, where=f"{kind} IN (59, 60, 34)", finish=lambda chunk: _nvtx_rows(chunk, names))
    graphs = pl.DataFrame(schema=NSYS_GRAPHS)
    if GRAPH_TRACE_TABLE in tables:
        columns = set(table_columns(connection, GRAPH_TRACE_TABLE))
        sql = (f'start, "end", {optional_column(columns, "deviceId")}, {optional_column(columns, "correlationId")}, '
               f'{optional_column(columns, "globalPid", _PID.format(column="globalPid"))}')
        graphs = reader.read(GRAPH_TRACE_TABLE, sql, schema_of({**NSYS_GRAPHS, "device_id": pl.Int64, "correlation_id": pl.Int64, "pid": pl.Int64}),
                             where="start > 0", finish=lambda chunk: held(chunk, NSYS_GRAPHS))
    # StringIds also holds what nsys captured besides names (a program's printed output, tens of kilobytes): a cut
    # string is only worth a note where a kernel is named by it.
    cut_names = set(long_names) & set(kernels["name_id"].unique().drop_nulls().to_list()) if long_names else set()
    if cut_names:
        notes.append(f"{counted(len(cut_names), 'kernel name')} longer than {MAX_NAME_CHARS:,} characters cut (a damaged export?)")
    return NsysExport(path, meta.get("EXPORT_PRODUCT_VERSION"), meta.get("EXPORT_SCHEMA_VERSION"), _read_gpus(connection, tables),
                      kernels, names, memops, sync, api, pl.DataFrame(schema=NSYS_NVTX), tables, graphs, capture, notes,
                      _kernel_release(connection, tables), nvtx_stream)


def _check_memory(path: Path, rows: dict[str, int]) -> None:
    """Raise TooLargeError when reading and analysing tables of these row counts would need more memory than this
    process may take (traceview.resources): one line before anything is read, not the OOM killer an hour in."""
    budget = memory_budget_bytes()
    if budget is None:
        return
    kernels, ranges = rows.get(KERNEL_TABLE, 0), rows.get("NVTX_EVENTS", 0)
    others = sum(rows.values()) - kernels
    needed = _PEAK_BASE_BYTES + kernels * _PEAK_BYTES_PER_KERNEL + (others - ranges) * _PEAK_BYTES_PER_ROW + ranges * _PEAK_BYTES_PER_NVTX_ROW
    if needed > budget:
        raise TooLargeError(path, f"analysing this export needs about {needed / 1e9:.3g} GB of memory ({kernels:,} kernels and {others:,} other timed rows), "
                                  f"more than the {budget / 1e9:.3g} GB this process may take",
                            f"run it where more memory is free, capture a shorter stretch (nsys profile --duration, or --capture-range=cudaProfilerApi), "
                            f"or set {MEMORY_ENV} to the GB it may use to try anyway")


def _kernel_release(connection: sqlite3.Connection, tables: set[str]) -> str | None:
    """Return the profiled host's kernel release as nsys recorded it (TARGET_INFO_SYSTEM_ENV), or None."""
    if "TARGET_INFO_SYSTEM_ENV" not in tables or not {"name", "value"} <= set(table_columns(connection, "TARGET_INFO_SYSTEM_ENV")):
        return None
    try:  # a damaged table only loses this remark, never the export
        row = connection.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'SoftwareReleaseVersion' LIMIT 1").fetchone()
    except sqlite3.DatabaseError:
        return None
    return (_text(row[0]) or None) if row else None


# What nsys says about the GPU side of the capture (CUDA, CUPTI, NVTX, unified memory): events it lost or could not
# trace explain an export that looks idle or empty. Not its notes about other APIs (OpenGL, OS runtime, CPU sampling).
_TRACE_WARNING = re.compile(r"CUDA|CUPTI|Unified Memory|\bGPU\b|NVTX|NCCL|cuBLAS|cuDNN")
_NOT_USED = re.compile(r"Does the process use (?!CUDA)")


def _trace_warnings(connection: sqlite3.Connection, names: dict[int, str]) -> list[str]:
    """Return one note with nsys's own warnings and errors about the GPU trace (DIAGNOSTIC_EVENT, severity 2-3), each
    distinct text once with how often it came; none when it had nothing to say."""
    columns = set(table_columns(connection, "DIAGNOSTIC_EVENT"))
    if not {"severity", "text"} <= columns:
        return []
    counts: dict[str, int] = {}
    errors: set[str] = set()
    # Grouped in SQL (a damaged export can repeat one warning millions of times); a damaged table only loses the note.
    query = "SELECT severity, text, count(*) FROM DIAGNOSTIC_EVENT WHERE severity IN (2, 3) GROUP BY severity, text ORDER BY min(rowid) LIMIT 1000"
    try:
        grouped = connection.execute(query).fetchall()
    except sqlite3.DatabaseError:
        return []
    for severity, text, count in grouped:
        message = names.get(text, "") if isinstance(text, int) else _text(text) or ""
        message = " ".join(message.split())[:200]
        if message and _TRACE_WARNING.search(message) and not _NOT_USED.search(message):
            counts[message] = counts.get(message, 0) + int(count)
            if severity == 3:
                errors.add(message)
    if not counts:
        return []
    first = sorted(counts, key=lambda message: message not in errors)  # errors first, then in the order nsys wrote them
    listed = [f"“{message}”" + (f" ({counts[message]}×)" if counts[message] > 1 else "") for message in first[:5]]
    more = f" and {len(counts) - 5} more" if len(counts) > 5 else ""
    return ["nsys warned about the GPU trace: " + "; ".join(listed) + more]


def _nvtx_rows(frame: pl.DataFrame, names: dict[int, str]) -> pl.DataFrame:
    """Return one chunk of NVTX_EVENTS rows as NSYS_NVTX rows: texts checked, cut, looked up by id and stripped of
    PER_CALL_NUMBERS, kinds named."""
    text = pl.col("text")
    try:
        # Through bytes and back, which polars validates: a damaged page can leave invalid UTF-8 in an inline text.
        frame = frame.with_columns(pl.col("text").cast(pl.Binary).cast(pl.String))
    except pl.exceptions.ComputeError:
        inline = frame["text"].unique().drop_nulls()
        decoded = [value.decode("utf-8", errors="replace") for value in inline.cast(pl.Binary).to_list()]
        repaired = pl.DataFrame({"text": inline.cast(pl.Binary), "name": decoded}, schema={"text": pl.Binary, "name": pl.String})
        frame = (frame.with_columns(pl.col("text").cast(pl.Binary)).join(repaired, on="text", how="left", maintain_order="left")
                 .drop("text").rename({"name": "text"}))
    if not frame.select((text.str.len_bytes() < MAX_NVTX_TEXT_CHARS).all()).item():
        text = text.str.slice(0, MAX_NVTX_TEXT_CHARS)
    by_id = frame["text_id"].unique().drop_nulls()
    if by_id.len():
        id_map = pl.DataFrame({"text_id": by_id, "id_name": [names.get(i, "")[:MAX_NVTX_TEXT_CHARS] for i in by_id.to_list()]},
                              schema={"text_id": pl.Int64, "id_name": pl.String})
        frame = frame.join(id_map, on="text_id", how="left", maintain_order="left")  # rows stay in the table's order
        text = pl.coalesce(text, "id_name")
    named = without_per_call_numbers(frame.select(text).to_series())
    # Named straight into the categorical: through strings, ten million kinds were written out and hashed again.
    kind = pl.col("type").replace_strict(_NVTX_KINDS, default="Other", return_dtype=pl.Categorical).fill_null("Other")
    # The columns kept as read are copied: a column as it came from Arrow keeps its whole record batch alive, the raw
    # texts of half a million ranges with it (0.45 GB over the realistic 2 M export).
    return frame.select(_copied("start_ns"), _copied("end_ns"), pl.lit(named).alias("text"), kind.alias("kind"),
                        _copied("tid"))


def without_per_call_numbers(texts: pl.Series) -> pl.Series:
    """Return the texts (String) without PER_CALL_NUMBERS, as a Categorical; a null stays null."""
    (numbering, no_number), (address, no_address) = PER_CALL_NUMBERS
    # PyTorch ends each op's text with a number of its own (`aten::mm, op_id = 317126`): nearly every text is
    # distinct, and the regex went over each one (a tenth of the realistic 2 M export's CPU time). Without their
    # trailing digits the texts of a chunk are a few hundred stems, and the regex runs once per stem with one digit
    # put back. That gives the text's own answer whenever a per-call number takes in those digits: a match ends with
    # `\d+`, which runs to the end of the text whatever the digits are. Whether it does is told by putting back "0"
    # and "1": the answers are equal only if the digit was taken. Texts whose digits stay (`step 12`) go through the
    # regex one by one, as before.
    stems = texts.str.strip_chars_end(_ASCII_DIGITS)
    cut = (stems.str.len_bytes() < texts.str.len_bytes()).fill_null(False).to_numpy()
    # One key per stem and cut: the stem's categorical code (0 for no text), twice, plus whether digits were cut.
    stem_codes = (stems.cast(pl.Categorical).to_physical().cast(pl.Int64) + 1).fill_null(0).to_numpy()
    keys = stem_codes * 2 + cut
    distinct_keys, key_index = _distinct(keys)
    first_row = np.empty(len(distinct_keys), dtype=np.int64)
    first_row[key_index[::-1]] = np.arange(len(keys) - 1, -1, -1)  # the last write of each is its first row
    distinct = pl.DataFrame({"stem": stems.gather(first_row), "cut": (distinct_keys & 1).astype(bool)})
    answers = distinct.select(*(pl.when("cut").then(pl.col("stem") + digit).otherwise("stem").str.replace_all(numbering, no_number).alias(digit)
                                for digit in ("0", "1")), "cut")
    taken = answers.select((pl.col("0") == pl.col("1")) | ~pl.col("cut")).to_series().fill_null(True).to_numpy()
    names = answers["0"].str.replace_all(address, no_address)
    one_by_one = np.flatnonzero(~taken[key_index])
    if len(one_by_one):
        names = pl.concat([names, texts.gather(one_by_one).str.replace_all(numbering, no_number).str.replace_all(address, no_address)])
        key_index[one_by_one] = len(distinct_keys) + np.arange(len(one_by_one))
    return names.cast(pl.Categorical).gather(key_index).rename(texts.name)


def _distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the distinct keys (non-negative int64) in ascending order and each row's position among them."""
    # Categorical codes are small next to a chunk's rows, unless the process has built many categoricals: a lookup
    # table then (4 ms for half a million rows, where np.unique's sort took 55 ms), and the sort only where the
    # table would be large.
    size = int(keys.max(initial=-1)) + 1
    if size > 4 * len(keys) + 1024:
        distinct, index = np.unique(keys, return_inverse=True)
        return distinct, index.astype(np.int64)
    present = np.zeros(size, dtype=bool)
    present[keys] = True
    distinct = np.flatnonzero(present)
    lookup = np.zeros(size, dtype=np.int64)
    lookup[distinct] = np.arange(len(distinct))
    return distinct, lookup[keys]


def _api_rows(chunk: pl.DataFrame, names: dict[int, str]) -> pl.DataFrame:
    """Return one chunk of CUPTI_ACTIVITY_KIND_RUNTIME rows (start_ns, end_ns, name_id, correlation_id, tid) as NSYS_API
    rows: each call named, its process taken out of its thread id."""
    # Mapped once per row, so only the ids in use, and at API-name length: one huge string would be copied per call.
    api_names = {i: names.get(i, "?")[:MAX_API_NAME_CHARS] for i in chunk["name_id"].unique().drop_nulls().to_list()}
    return held(chunk.with_columns(pl.col("name_id").replace_strict(api_names, default="?", return_dtype=pl.Categorical).alias("name"), pid_of_thread()),
                NSYS_API)


def held(chunk: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """Return the chunk's columns of `schema`, in its order and types, each in memory of its own: a column as it came
    from Arrow keeps its whole record batch alive (_copied), and an id narrowed to the schema's type is a new column
    anyway. A value the type cannot hold (a damaged cell) becomes null."""
    return chunk.select(_copied(name) if chunk.schema[name] == dtype and dtype.is_integer() else pl.col(name).cast(dtype, strict=False)
                        for name, dtype in schema.items())


def row_ranges(low: int, high: int) -> list[tuple[int, int]]:
    """Return the inclusive row-id ranges a table from `low` to `high` is read in: at most _CHUNK_ROWS each, of one
    size, and as many as keep every connection busy to the end (525 k copies read as 500 k and 25 k rows left the
    second connection idle through most of the table)."""
    if high < low:  # a damaged b-tree's min and max: the rows between them are read, whichever is which
        low, high = high, low
    span = high - low + 1
    if span > _MAX_ROWID_SPAN:
        # Row ids far sparser than any real export's rows: one range, not billions.
        return [(low, high)]
    count = math.ceil(span / _CHUNK_ROWS)
    if span >= _SPLIT_ROWS:
        count = _CONNECTIONS * math.ceil(count / _CONNECTIONS)
    size = math.ceil(span / count)
    return [(first, min(first + size - 1, high)) for first in range(low, high + 1, size)]


def _copied(column: str) -> pl.Expr:
    """The column in memory of its own (an arithmetic result; polars has no explicit deep copy)."""
    return pl.col(column) + 0


class _Reader:
    """Reads tables in bulk: row-id chunks decoded by SQLite on two connections at once, each into Arrow through ADBC
    (a chunk whose cells defeat ADBC's type inference is read again with declared types), with one progress count
    over every table read."""

    def __init__(self, path: Path, connection: sqlite3.Connection, progress: Callable[[int, int], None] | None, tables: list[str]):
        self.path, self.connection, self.progress, self.done = path, connection, progress, 0
        # min(rowid) and max(rowid) asked alone are one b-tree descent each, where count(*) (or both asked together)
        # scans the whole table: a second per ten million NVTX rows. Nsight Systems numbers rows densely, so the row
        # ids bound the row count well enough for progress; only a table whose ids are sparse is counted.
        self.bounds = {table: tuple(_as_int(connection.execute(f'SELECT {what} FROM "{table}"').fetchone()[0]) for what in ("min(rowid)", "max(rowid)"))
                       for table in tables}
        self.rows = {table: self._estimated_rows(table, low, high) for table, (low, high) in self.bounds.items()}
        self.total = sum(self.rows.values())
        try:
            # The driver's low-level API, not its DB-API module: that one imports pyarrow (0.3 s at every start) for
            # what polars reads straight from the Arrow C stream.
            import adbc_driver_manager
            import adbc_driver_sqlite
        except ImportError:  # the standard library gives the same result, several times slower
            self.driver = self.manager = None
        else:
            self.driver, self.manager = adbc_driver_sqlite, adbc_driver_manager

    def _estimated_rows(self, table: str, low: int | None, high: int | None) -> int:
        if low is None or high is None:
            return 0
        if high - low + 1 > _MAX_ROWID_SPAN:
            return int(self.connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
        return high - low + 1

    def ranges(self, table: str) -> list[tuple[int, int]]:
        low, high = self.bounds.get(table) or (None, None)
        if low is None or high is None:
            return []
        return row_ranges(low, high)

    def chunk(self, sql: str, schema: pl.Schema, held: object | None = None,
              typed: tuple[sqlite3.Connection, threading.Lock] | None = None) -> pl.DataFrame:
        """Return one query's rows as a frame of `schema`: on `held`, an open ADBC connection, or a new one; through
        `typed` (a connection and its lock), or a new connection, where ADBC cannot read them."""
        if self.driver is not None and self.manager is not None:
            try:
                with contextlib.ExitStack() as opened:
                    if held is None:
                        database = opened.enter_context(self.driver.connect(read_only_uri(self.path)))
                        held = opened.enter_context(self.manager.AdbcConnection(database))
                    statement = opened.enter_context(self.manager.AdbcStatement(held))
                    # ADBC hands over record batches of 1,024 rows by default; in larger batches it decodes a tenth
                    # faster and infers each column's type from more rows. The whole range in one batch: then the
                    # rechunk below (thousands of chunks per table would make every later operation pay per chunk)
                    # has nothing to copy. Two batches per range, copied into one, left the NVTX read of the realistic
                    # 2 M export 0.34 GB higher (polars 2.1; the freed batches stay with the allocator).
                    with contextlib.suppress(*_read_errors()):  # a driver without the option reads as before
                        statement.set_options(**{"adbc.sqlite.query.batch_rows": str(_CHUNK_ROWS)})
                    statement.set_sql_query(sql)
                    stream, _ = statement.execute_query()
                    part = pl.DataFrame(stream)
                part.columns = list(schema.keys())
                return part.cast(dict(schema)).rechunk()  # type: ignore[arg-type]
            except _read_errors():
                pass  # the driver infers a column's type from its first rows; read this range with declared types instead
        if typed is not None:
            connection, lock = typed
            with lock:
                return typed_frame(connection, sql, schema)
        with closing(_connect(self.path)) as own:
            return typed_frame(own, sql, schema)

    def read(self, table: str, select: str, schema: pl.Schema, where: str | None = None,
             finish: Callable[[pl.DataFrame], pl.DataFrame] | None = None) -> pl.DataFrame:
        """Return `SELECT {select} FROM table [WHERE where]` as a frame of `schema` (types declared, never inferred);
        `finish` turns each chunk into its final rows on the thread that read it, so only one raw chunk per thread is
        held at a time."""
        ranges = self.ranges(table)
        if not ranges:
            empty = pl.DataFrame(schema=schema)
            return empty if finish is None else finish(empty)
        condition = f" AND ({where})" if where else ""
        queries = [f'SELECT {select} FROM "{table}" WHERE rowid BETWEEN {low} AND {high}{condition}' for low, high in ranges]
        parts: list[pl.DataFrame] = []

        def chunk(sql: str) -> pl.DataFrame:
            part = self.chunk(sql, schema)
            return part if finish is None else finish(part)

        with ThreadPoolExecutor(max_workers=min(_CONNECTIONS, len(queries))) as pool:
            for (low, high), part in zip(ranges, pool.map(chunk, queries), strict=True):
                parts.append(part)
                self.done += high - low + 1 if len(ranges) > 1 else self.rows[table]
                if self.progress is not None:
                    self.progress(min(self.done, self.total), self.total)
        return pl.concat(parts, rechunk=False)


def _read_kernels(path: Path, connection: sqlite3.Connection, tables: set[str], reader: _Reader) -> pl.DataFrame:
    if KERNEL_TABLE not in tables:
        return pl.DataFrame(schema=NSYS_KERNELS)
    columns = set(table_columns(connection, KERNEL_TABLE))
    if not {"start", "end"} <= columns:
        raise TraceFormatError(path, f"the kernel table {KERNEL_TABLE} has no start and end columns: no kernel can be timed",
                               "re-export with nsys export --type sqlite (a tool that writes nsys-compatible SQLite must include them)")
    name = next((c for c in ("demangledName", "shortName", "mangledName") if c in columns), "NULL")
    # Only the columns the analysis uses: fewer columns is what makes the bulk read fast and small.
    # globalPid is unpacked into the pid after the read, vectorised, rather than per row in SQLite.
    select = (f'start, "end", {_device(columns)}, {name}, {optional_column(columns, "correlationId")}, {optional_column(columns, "globalPid")}, '
              f'{optional_column(columns, "graphNodeId")}')
    # graphNodeId is 0 or NULL for kernels not launched from a graph, depending on the nsys version.
    return reader.read(KERNEL_TABLE, select, schema_of({**NSYS_KERNELS, **dict.fromkeys(("device_id", "name_id", "correlation_id", "pid"), pl.Int64)}),
                       finish=lambda chunk: held(chunk.with_columns(((pl.col("pid") // 16777216) % 16777216).alias("pid"),
                                                                    pl.when(pl.col("graph_node_id") != 0).then(pl.col("graph_node_id")).alias("graph_node_id")),
                                                 NSYS_KERNELS))


def _read_gpus(connection: sqlite3.Connection, tables: set[str]) -> pl.DataFrame:
    """Return one row per CUDA device, keyed by the CUDA device id the activity tables use.

    TARGET_INFO_GPU.id is nsys's own GPU index: on a host with two GPU models (or with display adapters listed, as on
    Windows) it need not be the CUDA device id. `cuDevice`, or TARGET_INFO_CUDA_DEVICE's gpuId → cudaId, maps it.
    """
    if "TARGET_INFO_GPU" in tables and {"memoryBandwidth", "clockRate"} <= set(table_columns(connection, "TARGET_INFO_GPU")):
        columns = set(table_columns(connection, "TARGET_INFO_GPU"))
        cc = "computeMajor || '.' || computeMinor" if {"computeMajor", "computeMinor"} <= columns else "NULL"
        cuda_ids: dict[int, int] = {}
        if "TARGET_INFO_CUDA_DEVICE" in tables and {"gpuId", "cudaId"} <= set(table_columns(connection, "TARGET_INFO_CUDA_DEVICE")):
            # Through _as_int: a damaged export stores text such as 'NaN' in these integer columns.
            cuda_ids = {g: c for gpu, cuda in connection.execute("SELECT gpuId, cudaId FROM TARGET_INFO_CUDA_DEVICE")
                        if (g := _as_int(gpu)) is not None and (c := _as_int(cuda)) is not None}
        device = optional_column(columns, "cuDevice")
        integrated = optional_column(columns, "isDiscrete", "isDiscrete = 0")
        frame = typed_frame(connection, f"SELECT id, {device}, name, smCount, clockRate, memoryBandwidth, {cc}, {optional_column(columns, 'totalMemory')}, "
                                   f"{integrated} FROM TARGET_INFO_GPU",
                       schema_of({"gpu_id": pl.Int64, "cu_device": pl.Int64, **{k: v for k, v in NSYS_GPUS.items() if k != "device_id"}}))
        frame = frame.with_columns(pl.coalesce(pl.col("gpu_id").replace_strict(cuda_ids, default=None, return_dtype=pl.Int64),
                                               pl.col("cu_device"), pl.col("gpu_id")).alias("device_id"))
        # Windows captures list the display adapters too (Intel, "Microsoft Basic Render Driver") with zero bandwidth.
        frame = frame.filter((pl.col("sm_count") > 0) & (pl.col("memory_bandwidth_bytes_per_s") > 0))
        # nsys cuts long names to a fixed width, leaving a trailing blank ("NVIDIA GeForce RTX 3060 Laptop ").
        return frame.select(list(NSYS_GPUS.keys())).unique("device_id", keep="first", maintain_order=True).with_columns(pl.col("name").str.strip_chars())
    if "TARGET_INFO_CUDA_GPU" in tables:
        columns = set(table_columns(connection, "TARGET_INFO_CUDA_GPU"))
        name = "name" if "name" in columns else "NULL"
        cc = "computeCapabilityMajor || '.' || computeCapabilityMinor" if {"computeCapabilityMajor", "computeCapabilityMinor"} <= columns else "NULL"
        # The CUDA device id: `cudaId` (2021-2022), `deviceId` (2020-2021: every row was device 0 without it).
        device = next((c for c in ("cudaId", "deviceId", "id") if c in columns), "0")
        # Pre-2022 units: kHz and kB/s.
        # Neither the memory size (its unit in these versions is not documented) nor integration is taken here.
        frame = typed_frame(connection, f"SELECT {device}, {name}, numMultiprocessors, coreClockRate * 1000.0, globalMemoryBandwidth * 1000.0, {cc}, "
                                   "NULL, NULL FROM TARGET_INFO_CUDA_GPU", NSYS_GPUS)
        return frame.with_columns(pl.col("name").str.strip_chars())
    return pl.DataFrame(schema=NSYS_GPUS)


def _read_format(path: Path, found: object, options: ReadOptions) -> Parsed:
    export = parse(path, options.progress)
    version = " ".join(v for v in (export.product_version, f"(schema {export.schema_version})" if export.schema_version else None) if v)
    return Parsed(export, f"Nsight Systems {version}".strip())


# Any SQLite file the formats before it did not claim: a damaged database too, whose reader says what is wrong with it.
FORMATS = (Format("nsys-sqlite", "nsys-export", _read_format, lambda head: head.raw.startswith(SQLITE_MAGIC), order=3, whole=True),)
