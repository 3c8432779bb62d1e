"""Parsers: trace file → typed polars frame with a fixed schema. Imports nothing from analyzer or app."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers import llama_cpp, ncu_csv, tegrastats
from traceview.parsers.sniff import TraceFormat, detect_format, unsupported


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


def load_trace(path: str | Path, interval_s: float = 1.0) -> Trace:
    """Return the parsed trace; raises TraceFormatError with a fix for anything unreadable.

    interval_s is the tegrastats sampling interval, used where the log has no timestamps.
    """
    path = Path(path)
    fmt = detect_format(path)
    if fmt is TraceFormat.TEGRASTATS:
        samples, report = tegrastats.parse(path, interval_s)
        return Trace(path, fmt, profiler="tegrastats", samples=samples, skipped=report)
    if fmt.value.startswith("llama-"):
        return Trace(path, fmt, profiler="llama.cpp", runs=llama_cpp.parse(path))
    if fmt in (TraceFormat.NCU_DETAILS, TraceFormat.NCU_RAW):
        header = ncu_csv.find_header(path)
        if header is None:  # detect_format found one, so the file changed underneath us
            raise TraceFormatError(path, "the file changed while it was being read", "run the command again")
        return Trace(path, fmt, ncu_csv.parse(path, header), ncu_csv.profiler_hint(header))
    raise unsupported(path, fmt)


__all__ = ["Trace", "TraceFormat", "detect_format", "load_trace"]
