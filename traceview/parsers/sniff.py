"""Which Format a file is, from its content (never its name): every format's sniff in order, then the late sniffs,
then the profiler outputs traceview refuses with a reason of their own (a Git LFS pointer, an .nsys-rep, ncu's
listings, an nsys JSON export, nvprof's report of a failed run)."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

from traceview.errors import TraceFormatError, UnknownFormatError
from traceview.parsers.base import GZIP_MAGIC, SNIFF_BYTES, Format, Head, gunzip_prefix

_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


class TraceFormat(StrEnum):
    """The names of the formats read today, for code and tests that name one (parsers.FORMATS is the registry: a new
    format needs no member here)."""

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
# AMD's rocprofv3 (rocprofiler-sdk) writes its JSON under this key; TraceLens' tests keep one gzipped.
_ROCPROF_SDK_JSON = re.compile(r'^\s*\{\s*"rocprofiler-sdk-tool"\s*:')
# PyTorch's execution trace (ExecutionTraceObserver, the input of Chakra and et_replay): operators and tensors, no
# times. Its first node is the observer's thread root (`[pytorch|profiler|execution_trace|thread]`, earlier
# `…|execution_graph|…`).
_EXECUTION_TRACE = re.compile(r"\[pytorch\|profiler\|execution_(?:trace|graph)\|")


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
                ("fix what stopped the run (a crash or signal in the application, a wrong path, a missing libcuinj or driver), "
                "check that it runs without nvprof, then profile it again"))
    if _ROCPROF_SDK_JSON.match(text):
        return ("this is rocprofv3's JSON (rocprofiler-sdk), which traceview does not read",
                ("for a PyTorch program on ROCm, record a torch.profiler trace instead (its HIP kernels, copies and calls are read) and pass "
                 "the .pt.trace.json[.gz]"))
    if _EXECUTION_TRACE.search(text[:4096]):
        return ("this is a PyTorch execution trace (ExecutionTraceObserver: operators and tensors, without times), not a profiler trace",
                ("pass the torch.profiler trace recorded with it (the Kineto .pt.trace.json[.gz] from prof.export_chrome_trace or "
                 "tensorboard_trace_handler)"))
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


def detected(path: Path, formats: tuple[Format, ...]) -> tuple[Format, object]:
    """Return the format of a trace file and what its sniff found (the reader's starting point), trying `formats` by
    their order, then their late sniffs; raise UnknownFormatError with what to pass instead."""
    check_readable(path)
    with path.open("rb") as handle:
        head = Head(path, handle.read(SNIFF_BYTES))
    if head.raw.startswith(_LFS_POINTER):
        # A repository cloned without Git LFS holds these few lines in place of each large file.
        size = re.search(rb"^size (\d{1,18})", head.raw, re.MULTILINE)
        raise UnknownFormatError(path, "a Git LFS pointer, not the file itself" + (f" (the file is {int(size.group(1)):,} bytes)" if size else ""),
                                 "fetch the file with `git lfs pull` (or download it from the repository's web page) and pass that")
    ordered = sorted(formats, key=lambda f: f.order)  # stable: formats of one order keep their registry order
    for sniffs in ([(f, f.sniff) for f in ordered], [(f, f.late_sniff) for f in ordered]):
        for fmt, sniff in sniffs:
            found = sniff(head) if sniff is not None else None
            if found:
                return fmt, found
    if head.is_text:
        listing = _unread_profiler_output(head.text)
        if listing is not None:
            raise UnknownFormatError(path, *listing)
        raise UnknownFormatError(
            path,
            "not a supported trace: no Nsight Compute CSV header (\"ID\",\"Process ID\",...), nsys stats table, PyTorch profiler events, "
            "tegrastats sample or llama.cpp output found",
            "pass an `ncu --csv` export, an nsys SQLite export or `nsys stats` CSV, a torch.profiler trace (.pt.trace.json), "
            "a `tegrastats --logfile` log, or llama-bench / llama.cpp output",
        )
    if head.raw.startswith(GZIP_MAGIC):
        # A compressed file no reader took: what it holds, when that is profiler output traceview knows of.
        inside = gunzip_prefix(head.raw, SNIFF_BYTES)
        listing = _unread_profiler_output(inside.decode("utf-8", errors="replace")) if inside else None
        if listing is not None:
            raise UnknownFormatError(path, *listing)
    if path.suffix.lower() in (".nsys-rep", ".qdrep"):
        raise UnknownFormatError(path, "an Nsight Systems report (.nsys-rep) is a binary format only nsys reads",
                                 f"export it first: nsys export --type sqlite {path.name} (or run nsys stats on it) and pass the .sqlite")
    raise UnknownFormatError(path, "binary file of an unknown kind",
                             "pass an ncu CSV or .ncu-rep, an nsys .sqlite export, a torch.profiler trace (.pt.trace.json[.gz]), a tegrastats log or llama.cpp output")
