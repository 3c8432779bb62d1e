"""Parsers: trace file → typed polars frame with a fixed schema. Imports nothing from analyzer or app."""

from __future__ import annotations

import codecs
import contextlib
import csv
import dataclasses
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError, UnknownFormatError
from traceview.parsers import (
    llama_cpp,
    ncu_console,
    ncu_csv,
    ncu_rep,
    ncu_summary,
    nsys_sqlite,
    nsys_stats,
    nvprof,
    nvprof_metrics,
    nvprof_sqlite,
    tegrastats,
)
from traceview.parsers.sniff import TraceFormat, check_readable, detect_format

# Real exports carry kernel names of hundreds of kilobytes (generated code, long template lists); the csv module's
# default 128 KiB field limit would refuse them. 2**31 - 1 is the largest limit every platform's C long accepts.
csv.field_size_limit(2**31 - 1)


class InputKind(str, Enum):
    """What a parsed input holds, which decides its analysis (one per kind, chosen by the app's registry)."""

    KERNELS = "kernels"  # profiled launches, KERNELS: every Nsight Compute format
    TELEMETRY = "telemetry"  # a tegrastats log: TegrastatsLog (TELEMETRY samples and what was skipped)
    LLAMA_RUNS = "llama-runs"  # llama.cpp measurements, LLAMA_RUNS
    NSYS_EXPORT = "nsys-export"  # an Nsight Systems SQLite export, or nvprof's in its form: NsysExport
    NSYS_STATS = "nsys-stats"  # `nsys stats` reports, or nvprof's summary in their form: StatsReports


TraceData = pl.DataFrame | tegrastats.TegrastatsLog | nsys_sqlite.NsysExport | nsys_stats.StatsReports


@dataclass(frozen=True)
class Trace:
    """A parsed input: its detected format, what kind of data it holds, and that data."""

    path: Path
    format: TraceFormat
    kind: InputKind
    data: TraceData
    profiler: str | None = None  # which profiler (and version, where known) wrote it
    notes: tuple[str, ...] = ()  # what the reader noticed about the file itself (cut short, rows left out)


# What a line of each text format's own looks like (data rows, table headers and titles, timestamps): a cut inside
# anything else (prose after a pasted table, a Markdown fence, a shell prompt) loses nothing, and a file saved without
# its final newline is common. A cut inside a header or a title loses the table after it, so they count too.
_DATA_LINE = {
    TraceFormat.NCU_DETAILS: re.compile(r'^"'),
    TraceFormat.NCU_RAW: re.compile(r'^"'),
    TraceFormat.NCU_CONSOLE: re.compile(r"\S"),
    TraceFormat.NCU_SUMMARY_CSV: re.compile(r'^"'),
    TraceFormat.NCU_SUMMARY_CONSOLE: re.compile(r"\S"),
    # From a number's first digit only: retried at every digit of a long run, `\d[\d,.]*` is quadratic.
    TraceFormat.NSYS_STATS: re.compile(r"\d|\*\* |Time|Name|Instances|-{3}|Processing \[|[,|]"),
    TraceFormat.NVPROF: re.compile(r"\d|==\d+==|Time|Name|Type|-{3}|^\""),
    TraceFormat.NVPROF_METRICS: re.compile(r'\d|Kernel:|Device|Metric|Invocations|^"'),
    TraceFormat.TEGRASTATS: re.compile(r"\d"),  # a sample, or the timestamp it starts with
}
_LLAMA_DATA_LINE = re.compile(r"^\s*\||\btime\s*=|^[^,]*(,[^,]*){5,}|\{|\}|\b(?:encoded|decoded|n_draft|n_predict|n_drafted|n_accept|accept|build|Device|model size)\b"
                              r"|^\s*(?:llama|common|ggml)\w*:")


def _cut_short(path: Path, fmt: TraceFormat) -> int | None:
    """Return the number of the last line when a text file ends inside a data line without a newline (a copy cut
    short), else None."""
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - 65536))
        tail = handle.read()
        if size == 0 or tail.endswith((b"\n", b"\r")):
            return None
        last = tail.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
        pattern = _DATA_LINE.get(fmt, _LLAMA_DATA_LINE)
        if not pattern.search(last):
            return None
        handle.seek(0)
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b"")) + 1


def _cut_note(line: int) -> str:
    return (f"the file ends inside line {line} without a newline: it looks cut short; that last line may be incomplete, and "
            "whatever came after it is missing")


@dataclass(frozen=True)
class ReadOptions:
    """What some readers need besides the file: tegrastats' sampling interval where the log has no timestamps
    (seconds), and a progress callback (rows done, rows in all) for large Nsight Systems exports."""

    interval_s: float = 1.0
    progress: Callable[[int, int], None] | None = None


def _read_nsys_sqlite(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    export = nsys_sqlite.parse(path, options.progress)
    version = " ".join(v for v in (export.product_version, f"(schema {export.schema_version})" if export.schema_version else None) if v)
    return Trace(path, fmt, InputKind.NSYS_EXPORT, export, f"Nsight Systems {version}".strip())


def _read_nvprof_sqlite(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    export = nvprof_sqlite.parse(path)
    return Trace(path, fmt, InputKind.NSYS_EXPORT, export, f"{export.product_version}, SQLite export (nvprof -o)")


def _read_nsys_stats(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    cut = _cut_short(path, fmt)
    try:
        stats = nsys_stats.parse(path)
    except TraceFormatError as error:
        if cut is None:
            raise
        raise TraceFormatError(path, f"the file is cut short (it ends inside line {cut} without a newline), and what is left holds no "
                               f"report traceview reads ({error.problem})", "copy or export the whole output again", line=cut) from None
    if cut and not any(report.height for report in stats.reports.values()) and not stats.rules:
        # An answer of zero kernels would read as a run with none: the file is cut before any report's rows.
        raise TraceFormatError(path, f"the file is cut short (it ends inside line {cut} without a newline) before any report's rows",
                               "copy or export the whole output again", line=cut)
    return Trace(path, fmt, InputKind.NSYS_STATS, stats, "nsys stats", notes=(_cut_note(cut),) if cut else ())


def _read_nvprof(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    cut = _cut_short(path, fmt)
    return Trace(path, fmt, InputKind.NSYS_STATS, nvprof.parse(path), "nvprof", notes=(_cut_note(cut),) if cut else ())


def _read_nvprof_metrics(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    cut = _cut_short(path, fmt)
    notes = [_cut_note(cut)] if cut else []
    kernels = nvprof_metrics.parse(path, notes)
    return Trace(path, fmt, InputKind.KERNELS, kernels, "nvprof (--metrics)", notes=tuple(notes))


def _read_tegrastats(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    cut = _cut_short(path, fmt)
    log = tegrastats.parse(path, options.interval_s)
    notes: tuple[str, ...] = ()
    if cut and log.samples.height and log.samples["line_number"][-1] == cut:
        # A sample cut mid-line would report its missing fields (EMC, rails) as absent: it is left out.
        log = dataclasses.replace(log, samples=log.samples.head(log.samples.height - 1))
        notes = (f"the log ends inside line {cut} without a newline: it looks cut short, and that partial sample was left out",)
    elif cut:
        notes = (_cut_note(cut),)
    return Trace(path, fmt, InputKind.TELEMETRY, log, "tegrastats", notes=notes)


def _read_ncu_rep(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    return Trace(path, fmt, InputKind.KERNELS, ncu_rep.parse(path), "Nsight Compute report (.ncu-rep, read with ncu-report)")


def _read_llama(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    cut = None if fmt == TraceFormat.LLAMA_BENCH_SQLITE else _cut_short(path, fmt)
    notes = [_cut_note(cut)] if cut else []
    runs = llama_cpp.parse(path, notes)
    return Trace(path, fmt, InputKind.LLAMA_RUNS, runs, "llama.cpp", notes=tuple(dict.fromkeys(notes)))


def _read_ncu_console(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    cut = _cut_short(path, fmt)
    notes = [_cut_note(cut)] if cut else []
    kernels = ncu_console.parse(path, notes)
    return Trace(path, fmt, InputKind.KERNELS, kernels, ncu_console.profiler_hint(path), notes=tuple(notes))


def _read_ncu_csv(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    header = ncu_csv.find_header(path)
    if header is None:  # detect_format found one, so the file changed underneath us
        raise TraceFormatError(path, "the file changed while it was being read", "run the command again")
    notes: list[str] = []
    kernels = ncu_csv.parse(path, header, notes, cut_at_line=_cut_short(path, fmt))
    return Trace(path, fmt, InputKind.KERNELS, kernels, ncu_csv.profiler_hint(header), notes=tuple(notes))


def _read_ncu_summary(path: Path, fmt: TraceFormat, options: ReadOptions) -> Trace:
    cut = _cut_short(path, fmt)
    notes = [_cut_note(cut)] if cut else []
    csv_export = fmt == TraceFormat.NCU_SUMMARY_CSV
    kernels = ncu_summary.parse_csv(path, notes) if csv_export else ncu_summary.parse_console(path, notes)
    return Trace(path, fmt, InputKind.KERNELS, kernels, ncu_summary.profiler_hint(path, csv_export), notes=tuple(notes))


# One entry per format: a new input format is a parser module and a line here.
READERS: dict[TraceFormat, Callable[[Path, TraceFormat, ReadOptions], Trace]] = {
    TraceFormat.NCU_DETAILS: _read_ncu_csv,
    TraceFormat.NCU_RAW: _read_ncu_csv,
    TraceFormat.NCU_CONSOLE: _read_ncu_console,
    TraceFormat.NCU_SUMMARY_CSV: _read_ncu_summary,
    TraceFormat.NCU_SUMMARY_CONSOLE: _read_ncu_summary,
    TraceFormat.NCU_REP: _read_ncu_rep,
    TraceFormat.NSYS_SQLITE: _read_nsys_sqlite,
    TraceFormat.NVPROF_SQLITE: _read_nvprof_sqlite,
    TraceFormat.NSYS_STATS: _read_nsys_stats,
    TraceFormat.NVPROF: _read_nvprof,
    TraceFormat.NVPROF_METRICS: _read_nvprof_metrics,
    TraceFormat.TEGRASTATS: _read_tegrastats,
    TraceFormat.LLAMA_BENCH_MD: _read_llama,
    TraceFormat.LLAMA_BENCH_CSV: _read_llama,
    TraceFormat.LLAMA_BENCH_JSON: _read_llama,
    TraceFormat.LLAMA_BENCH_JSONL: _read_llama,
    TraceFormat.LLAMA_BATCHED_BENCH: _read_llama,
    TraceFormat.LLAMA_BATCHED_BENCH_JSONL: _read_llama,
    TraceFormat.LLAMA_SWEEP_BENCH: _read_llama,
    TraceFormat.LLAMA_SWEEP_BENCH_JSONL: _read_llama,
    TraceFormat.LLAMA_BENCH_SQL: _read_llama,
    TraceFormat.LLAMA_BENCH_SQLITE: _read_llama,
    TraceFormat.LLAMA_TIMINGS: _read_llama,
}


# Text saved on Windows often starts with a byte-order mark: UTF-16 from Windows PowerShell's `>` (`ncu --csv > out.csv`),
# UTF-8 with a BOM from Notepad or Excel. UTF-32 first: its little-endian mark begins with UTF-16's.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_ENCODING_NAMES = {"utf-32": "UTF-32 text", "utf-8-sig": "UTF-8 text with a byte-order mark", "utf-16": "UTF-16 text"}


@contextlib.contextmanager
def _as_utf8(path: Path) -> Iterator[tuple[Path, str | None]]:
    """Yield (a UTF-8 path to read, a note): the file itself, or for text that starts with a byte-order mark a
    temporary UTF-8 copy without it, removed afterwards."""
    with path.open("rb") as handle:
        head = handle.read(4)
    encoding = next((name for bom, name in _BOMS if head.startswith(bom)), None)
    if encoding is None:
        yield path, None
        return
    descriptor, name = tempfile.mkstemp(prefix="traceview-", suffix=path.suffix)
    copy = Path(name)
    try:
        with path.open("r", encoding=encoding, errors="replace", newline="") as source, os.fdopen(descriptor, "w", encoding="utf-8", newline="") as target:
            for block in iter(lambda: source.read(1 << 20), ""):
                target.write(block)
        yield copy, f"the file is {_ENCODING_NAMES[encoding]} (as Windows tools write it): read as UTF-8"
    finally:
        copy.unlink(missing_ok=True)


# Output pasted into source or chat as comments: `// ` in C/C++ (after the code that made it), `# ` in Python and
# shell, `> ` in Markdown quotes, ` * ` inside a block comment.
_COMMENT_MARKERS = ("//", "#", ">", "--", ";", "%", "*")
_MIN_COMMENTED_LINES = 3


@contextlib.contextmanager
def _uncommented(path: Path) -> Iterator[tuple[Path, str] | None]:
    """Yield (a temporary copy with the comment marker taken off every line that starts with it, a note), or None
    for a binary file or text where no marker starts at least three lines. The copy keeps every line, so line
    numbers in errors still point into the user's file; it is removed afterwards."""
    with path.open("rb") as handle:
        head = handle.read(64 * 1024)
    if b"\x00" in head:
        yield None
        return
    starts = [line.lstrip(" \t") for line in head.decode("utf-8", errors="replace").splitlines()]
    counts = {marker: sum(line.startswith(marker) for line in starts) for marker in _COMMENT_MARKERS}
    marker = max(counts, key=lambda m: (counts[m], len(m)))
    if counts[marker] < _MIN_COMMENTED_LINES:
        yield None
        return
    pattern = re.compile(rf"^[ \t]*{re.escape(marker)} ?")
    descriptor, name = tempfile.mkstemp(prefix="traceview-", suffix=path.suffix)
    copy = Path(name)
    try:
        with path.open("r", encoding="utf-8", errors="replace", newline="") as source, os.fdopen(descriptor, "w", encoding="utf-8", newline="") as target:
            for line in source:
                target.write(pattern.sub("", line, count=1))
        yield copy, f"each line starts with '{marker}' (output pasted as comments): read without it"
    finally:
        copy.unlink(missing_ok=True)


def load_trace(path: str | Path, interval_s: float = 1.0, progress: Callable[[int, int], None] | None = None) -> Trace:
    """Return the parsed trace; raises TraceFormatError with a fix for anything unreadable.

    interval_s is the tegrastats sampling interval, used where the log has no timestamps; progress(done, total)
    is called while a large Nsight Systems kernel table is read.
    """
    path = Path(path)
    check_readable(path)
    with contextlib.ExitStack() as copies:
        readable, note = copies.enter_context(_as_utf8(path))
        notes = [note] if note else []
        try:
            try:
                fmt = detect_format(readable)
            except UnknownFormatError as unknown:
                uncommented = copies.enter_context(_uncommented(readable))
                if uncommented is None:
                    raise
                try:
                    fmt = detect_format(uncommented[0])
                except UnknownFormatError:
                    raise unknown from None
                readable = uncommented[0]
                notes.append(uncommented[1])
            reader = READERS.get(fmt)
            if reader is None:
                raise TraceFormatError(path, f"no reader for {fmt.value}", "this is a bug: please report it")
            trace = reader(readable, fmt, ReadOptions(interval_s, progress))
        except TraceFormatError as error:
            if readable == path:
                raise
            # Errors name the file the user gave, not the temporary copy.
            raise type(error)(path, error.problem, error.fix, error.line) from None
    if not notes:
        return trace
    return dataclasses.replace(trace, path=path, notes=(*trace.notes, *notes))


__all__ = ["READERS", "InputKind", "ReadOptions", "Trace", "TraceData", "TraceFormat", "detect_format", "load_trace"]
