"""detect_format(path) → TraceFormat, from the file's content (never its name)."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from enum import Enum
from pathlib import Path

from traceview.errors import TraceFormatError, UnknownFormatError
from traceview.parsers.llama_cpp import detect as detect_llama
from traceview.parsers.ncu_console import looks_like_console
from traceview.parsers.ncu_csv import find_header
from traceview.parsers.ncu_summary import find_summary_header, looks_like_summary_console
from traceview.parsers.nsys_stats import looks_like_stats
from traceview.parsers.nvprof import looks_like_nvprof
from traceview.parsers.nvprof_metrics import looks_like_nvprof_metrics
from traceview.parsers.nvprof_sqlite import looks_like_nvprof_export
from traceview.parsers.sqlite_files import open_read_only
from traceview.parsers.tegrastats import looks_like_tegrastats

_SNIFF_BYTES = 64 * 1024
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"
# ncu prints one `==PROF== Profiling …` line per launch before any result: with thousands of launches the first kernel
# block comes megabytes in.
_CONSOLE_SNIFF_BYTES = 16 * 1024 * 1024


class TraceFormat(str, Enum):
    NCU_DETAILS = "ncu-csv-details"
    NCU_RAW = "ncu-csv-raw"
    NCU_CONSOLE = "ncu-console"
    NCU_SUMMARY_CSV = "ncu-csv-summary"
    NCU_SUMMARY_CONSOLE = "ncu-console-summary"
    NCU_REP = "ncu-rep"
    NSYS_SQLITE = "nsys-sqlite"
    NSYS_STATS = "nsys-stats"
    NVPROF = "nvprof"
    NVPROF_METRICS = "nvprof-metrics"
    NVPROF_SQLITE = "nvprof-sqlite"
    TEGRASTATS = "tegrastats"
    LLAMA_BENCH_MD = "llama-bench-md"
    LLAMA_BENCH_CSV = "llama-bench-csv"
    LLAMA_BENCH_JSON = "llama-bench-json"
    LLAMA_BENCH_JSONL = "llama-bench-jsonl"
    LLAMA_BATCHED_BENCH = "llama-batched-bench"
    LLAMA_BATCHED_BENCH_JSONL = "llama-batched-bench-jsonl"
    LLAMA_SWEEP_BENCH = "llama-sweep-bench"
    LLAMA_SWEEP_BENCH_JSONL = "llama-sweep-bench-jsonl"
    LLAMA_BENCH_SQL = "llama-bench-sql"
    LLAMA_BENCH_SQLITE = "llama-bench-sqlite"
    LLAMA_TIMINGS = "llama-timings"


def check_readable(path: Path) -> None:
    """Raise a TraceFormatError for a missing, unreadable or empty input."""
    if not path.exists():
        raise TraceFormatError(path, "no such file", "check the path")
    if path.is_dir():
        raise TraceFormatError(path, "is a directory, not a trace file", "pass one exported file")
    if not path.is_file():  # reading a FIFO with no writer would block forever
        raise TraceFormatError(path, "is not a regular file (a FIFO, socket or device)", "save the export to a file and pass that file")
    try:
        size = path.stat().st_size
        with path.open("rb"):
            pass
    except OSError as error:
        raise TraceFormatError(path, f"cannot be read ({error.strerror})", "check its permissions") from error
    if size == 0:
        raise TraceFormatError(path, "the file is empty", "re-export the profile; the capture may have failed")


def _tail_has_llama_timings(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - _SNIFF_BYTES))
        tail = handle.read()
    return b"\x00" not in tail and detect_llama(tail.decode("utf-8", errors="replace")) == TraceFormat.LLAMA_TIMINGS.value


def _sqlite_format(path: Path) -> TraceFormat:
    """Return which tool wrote a SQLite database: `llama-bench -o sql` piped into sqlite3 (a `llama_bench` table, no
    profiler tables), nvprof's export (CUPTI tables named through a StringTable), else Nsight Systems."""
    try:
        with closing(open_read_only(path)) as connection:
            names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        return TraceFormat.NSYS_SQLITE  # a damaged database (its schema page too): the nsys reader says what is wrong with it
    if "llama_bench" in names and not any(name.startswith(("CUPTI_", "NVTX_", "TARGET_INFO")) for name in names):
        return TraceFormat.LLAMA_BENCH_SQLITE
    return TraceFormat.NVPROF_SQLITE if looks_like_nvprof_export(names) else TraceFormat.NSYS_SQLITE


def _console_further_in(path: Path) -> TraceFormat | None:
    """Return the console format when Nsight Compute console results start after the first 64 KB (a long
    `==PROF==` preamble), else None."""
    with path.open("rb") as handle:
        text = handle.read(_CONSOLE_SNIFF_BYTES).decode("utf-8", errors="replace")
    start = max(0, text.rfind("==PROF==") - 1)
    results = text[start:start + _SNIFF_BYTES * 4]
    if looks_like_console(results):
        return TraceFormat.NCU_CONSOLE
    return TraceFormat.NCU_SUMMARY_CONSOLE if looks_like_summary_console(results) else None


# What ncu prints when asked what it can measure rather than to measure: people save it beside their results.
_QUERY_METRICS = "ncu --query-metrics output (the metrics a GPU has)"
_PROFILE_FIX = "profile the application (ncu --set full -o report ./app) and pass the .ncu-rep, or the output of ncu --csv --page details"
_NCU_LISTINGS = (
    (re.compile(r"^Identifier\s+Display Name\s+Enabled\s+Filename\s*$", re.MULTILINE), "ncu --list-sections output (the sections ncu can collect)"),
    (re.compile(r"^Identifier\s+Sections\s+Enabled\s+Estimated Metrics\s*$", re.MULTILINE), "ncu --list-sets output (the section sets ncu offers)"),
    (re.compile(r"^Metric Name\s+Metric Type\s+Metric Unit\s+Metric Description\s*$", re.MULTILINE), _QUERY_METRICS),
)
_QUERY_METRIC_ROW = re.compile(r"^[a-z0-9]+__[a-z0-9_.]+\s+(Counter|Ratio|Throughput)\s+\S", re.MULTILINE)
# `nsys export --type json` (one JSON object a line, `--separate-strings` puts the strings on lines of their own):
# `{"Type":79,"CudaEvent":{"startNs":"...",...}}`, `{"type":"String","id":"7","value":"..."}`, as scripts that read
# it match them.
_NSYS_JSON_EXPORT = re.compile(r'^\{\s*"(?:Type"\s*:\s*\d+\s*,\s*"\w+Event"\s*:|type"\s*:\s*"String"\s*,\s*"id"\s*:)', re.MULTILINE)
# `ncu -i R --csv --page source`: one row per SASS instruction or source line (`"Address","Source","Warp Stall
# Sampling (All Cycles)",...`, newer versions with a leading `"#"`), after a `"Kernel Name","..."` line.
_SOURCE_PAGE = re.compile(r'^(?:"#",)?"Address","Source",', re.MULTILINE)


# nvprof's last words when it profiled nothing: `======== Error: Application received signal 139`, `==8542== Error: ...`,
# `======== Warning: No CUDA application was profiled, exiting`.
_NVPROF_FAILURE = re.compile(r"^\s*(?:==\d+==|={4,}) (?:Error: (?P<error>.+?)|Warning: (?P<warning>No CUDA application was profiled.*?))\s*$",
                             re.MULTILINE)


def _unread_profiler_output(text: str) -> tuple[str, str] | None:
    """Return what is wrong with a text that is profiler output traceview does not read (an ncu listing of sections,
    sets or metrics, ncu's source page, an nsys JSON export, nvprof's report of a run that failed) and how to get what
    it reads instead, or None."""
    failure = _NVPROF_FAILURE.search(text)
    if failure:
        said = (failure.group("error") or failure.group("warning")).strip().rstrip(".")
        return (f"nvprof's output of a run it could not profile (it says: {said}): nothing was measured",
                "fix what stopped the run (a crash or signal in the application, a wrong path, a missing libcuinj or driver), "
                "check that it runs without nvprof, then profile it again")
    if _NSYS_JSON_EXPORT.search(text):
        return ("this is an Nsight Systems JSON export (nsys export --type json), which traceview does not read",
                "export the same report as SQLite, which holds the same events in tables: nsys export --type sqlite REPORT.nsys-rep")
    if _SOURCE_PAGE.search(text):
        return ("this is ncu's source page (--page source: samples per instruction or source line), not results per kernel",
                "export the report's per-kernel pages instead: ncu -i report.ncu-rep --csv --page raw (or --page details), or pass the .ncu-rep")
    for pattern, kind in _NCU_LISTINGS:
        if pattern.search(text):
            return f"this is {kind}, not profiling results", _PROFILE_FIX
    # A copy of --query-metrics cut above its header still has its rows: name, type, unit, description.
    return (f"this is {_QUERY_METRICS}, not profiling results", _PROFILE_FIX) if len(_QUERY_METRIC_ROW.findall(text)) >= 20 else None


def detect_format(path: str | Path) -> TraceFormat:
    """Return the format of a trace file, judged from its first bytes and its header line."""
    path = Path(path)
    check_readable(path)
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if head.startswith(_LFS_POINTER):
        # A repository cloned without Git LFS holds these few lines in place of each large file.
        size = re.search(rb"^size (\d+)", head, re.MULTILINE)
        raise UnknownFormatError(path, "a Git LFS pointer, not the file itself" + (f" (the file is {int(size.group(1)):,} bytes)" if size else ""),
                                 "fetch the file with `git lfs pull` (or download it from the repository's web page) and pass that")
    if head.startswith(b"SQLite format 3\x00"):
        return _sqlite_format(path)
    if head.startswith(b"NVR\x00"):
        return TraceFormat.NCU_REP
    if b"\x00" not in head:
        if looks_like_tegrastats(head):
            return TraceFormat.TEGRASTATS
        text = head.decode("utf-8", errors="replace")
        llama = detect_llama(text)
        if llama is not None:
            return TraceFormat(llama)
        if looks_like_console(text):
            return TraceFormat.NCU_CONSOLE
        if looks_like_summary_console(text):
            return TraceFormat.NCU_SUMMARY_CONSOLE
        if looks_like_stats(text):
            return TraceFormat.NSYS_STATS
        # Metric results first: a file that holds them and a timing run's summary is read for the metrics.
        if looks_like_nvprof_metrics(text):
            return TraceFormat.NVPROF_METRICS
        if looks_like_nvprof(text):
            return TraceFormat.NVPROF
        header = find_header(path)
        if header is not None:
            return TraceFormat.NCU_RAW if header.page == "raw" else TraceFormat.NCU_DETAILS
        if find_summary_header(path) is not None:
            return TraceFormat.NCU_SUMMARY_CSV
        console = _console_further_in(path) if "==PROF==" in text else None
        if console is not None:
            return console
        # A full llama.cpp log prints its timing lines last, after the model dump and the generated text.
        if _tail_has_llama_timings(path):
            return TraceFormat.LLAMA_TIMINGS
        listing = _unread_profiler_output(text)
        if listing is not None:
            raise UnknownFormatError(path, *listing)
        raise UnknownFormatError(
            path,
            "not a supported trace: no Nsight Compute CSV header (\"ID\",\"Process ID\",...), nsys stats table, tegrastats sample or llama.cpp output found",
            "pass an `ncu --csv` export, an nsys SQLite export or `nsys stats` CSV, a `tegrastats --logfile` log, or llama-bench / llama.cpp output",
        )
    if path.suffix.lower() in (".nsys-rep", ".qdrep"):
        raise UnknownFormatError(path, "an Nsight Systems report (.nsys-rep) is a binary format only nsys reads",
                                 f"export it first: nsys export --type sqlite {path.name} (or run nsys stats on it) and pass the .sqlite")
    raise UnknownFormatError(path, "binary file of an unknown kind", "pass an ncu CSV or .ncu-rep, an nsys .sqlite export, a tegrastats log or llama.cpp output")
