"""Parsers: trace file → typed polars frame with a fixed schema. Imports nothing from analyzer or app."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers import llama_cpp, ncu_console, ncu_csv, ncu_rep, nsys_sqlite, nsys_stats, tegrastats
from traceview.parsers.sniff import TraceFormat, detect_format

# Real exports carry kernel names of hundreds of kilobytes (generated code, long template lists); the csv module's
# default 128 KiB field limit would refuse them. 2**31 - 1 is the largest limit every platform's C long accepts.
csv.field_size_limit(2**31 - 1)


@dataclass(frozen=True)
class Trace:
    """A parsed input: its detected format and its kernel launches (KERNELS) or telemetry samples (TELEMETRY)."""

    path: Path
    format: TraceFormat
    kernels: pl.DataFrame | None = None
    profiler: str | None = None  # which profiler (and version, where known) wrote it
    samples: pl.DataFrame | None = None
    skipped: tegrastats.ParseReport | None = None
    runs: pl.DataFrame | None = None  # llama.cpp measurements (LLAMA_RUNS)
    nsys: nsys_sqlite.NsysExport | None = None  # Nsight Systems SQLite export
    stats: nsys_stats.StatsReports | None = None  # nsys stats reports
    notes: tuple[str, ...] = ()  # what the reader noticed about the file itself (cut short, rows left out)


# What a data line of each text format looks like: a cut inside anything else (prose after a pasted table, a shell
# prompt) loses nothing, and a file saved without its final newline is common.
_DATA_LINE = {
    TraceFormat.NCU_DETAILS: re.compile(r'^"'),
    TraceFormat.NCU_RAW: re.compile(r'^"'),
    TraceFormat.NCU_CONSOLE: re.compile(r"\S"),
    TraceFormat.NSYS_STATS: re.compile(r"\d[\d,.]*\s*[,|]|^\s*\d[\d,.]*\s+\d"),
    TraceFormat.TEGRASTATS: re.compile(r"\bRAM \d"),
}
_LLAMA_DATA_LINE = re.compile(r"^\s*\||\btime\s*=|^[^,]*(,[^,]*){5,}|\{|\}")


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
    return f"the file ends inside line {line} without a newline: it looks cut short, and that last line may be incomplete"


def load_trace(path: str | Path, interval_s: float = 1.0, progress: Callable[[int, int], None] | None = None) -> Trace:
    """Return the parsed trace; raises TraceFormatError with a fix for anything unreadable.

    interval_s is the tegrastats sampling interval, used where the log has no timestamps; progress(done, total)
    is called while a large Nsight Systems kernel table is read.
    """
    path = Path(path)
    fmt = detect_format(path)
    if fmt is TraceFormat.NSYS_SQLITE:
        export = nsys_sqlite.parse(path, progress)
        version = " ".join(v for v in (export.product_version, f"(schema {export.schema_version})" if export.schema_version else None) if v)
        return Trace(path, fmt, profiler=f"Nsight Systems {version}".strip(), nsys=export)
    cut = None if fmt in (TraceFormat.NSYS_SQLITE, TraceFormat.NCU_REP) else _cut_short(path, fmt)
    if fmt is TraceFormat.NSYS_STATS:
        return Trace(path, fmt, profiler="nsys stats", stats=nsys_stats.parse(path), notes=(_cut_note(cut),) if cut else ())
    if fmt is TraceFormat.TEGRASTATS:
        samples, report = tegrastats.parse(path, interval_s)
        notes: tuple[str, ...] = ()
        if cut and samples.height and samples["line_number"][-1] == cut:
            # A sample cut mid-line would report its missing fields (EMC, rails) as absent: it is left out.
            samples = samples.head(samples.height - 1)
            notes = (f"the log ends inside line {cut} without a newline: it looks cut short, and that partial sample was left out",)
        elif cut:
            notes = (_cut_note(cut),)
        return Trace(path, fmt, profiler="tegrastats", samples=samples, skipped=report, notes=notes)
    if fmt is TraceFormat.NCU_REP:
        return Trace(path, fmt, ncu_rep.parse(path), "Nsight Compute report (.ncu-rep, read with ncu-report)")
    if fmt.value.startswith("llama-"):
        return Trace(path, fmt, profiler="llama.cpp", runs=llama_cpp.parse(path), notes=(_cut_note(cut),) if cut else ())
    if fmt is TraceFormat.NCU_CONSOLE:
        console_notes = [_cut_note(cut)] if cut else []
        return Trace(path, fmt, ncu_console.parse(path, console_notes), ncu_console.profiler_hint(path), notes=tuple(console_notes))
    if fmt in (TraceFormat.NCU_DETAILS, TraceFormat.NCU_RAW):
        header = ncu_csv.find_header(path)
        if header is None:  # detect_format found one, so the file changed underneath us
            raise TraceFormatError(path, "the file changed while it was being read", "run the command again")
        notes: list[str] = []
        kernels = ncu_csv.parse(path, header, notes, cut_at_line=cut)
        return Trace(path, fmt, kernels, ncu_csv.profiler_hint(header), notes=tuple(notes))
    raise TraceFormatError(path, f"no reader for {fmt.value}", "this is a bug: please report it")


__all__ = ["Trace", "TraceFormat", "detect_format", "load_trace"]
