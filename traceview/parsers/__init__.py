"""Parsers: trace file → typed polars frame with a fixed schema. Imports nothing from analyzer or app."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers import ncu_csv
from traceview.parsers.sniff import TraceFormat, detect_format, unsupported


@dataclass(frozen=True)
class Trace:
    """A parsed input: its detected format and its kernel launches (schema.KERNELS)."""

    path: Path
    format: TraceFormat
    kernels: pl.DataFrame
    profiler: str | None = None  # which profiler (and version, where known) wrote it


def load_trace(path: str | Path) -> Trace:
    """Return the parsed trace; raises TraceFormatError with a fix for anything unreadable."""
    path = Path(path)
    fmt = detect_format(path)
    if fmt in (TraceFormat.NCU_DETAILS, TraceFormat.NCU_RAW):
        header = ncu_csv.find_header(path)
        if header is None:  # detect_format found one, so the file changed underneath us
            raise TraceFormatError(path, "the file changed while it was being read", "run the command again")
        return Trace(path, fmt, ncu_csv.parse(path, header), ncu_csv.profiler_hint(header))
    raise unsupported(path, fmt)


__all__ = ["Trace", "TraceFormat", "detect_format", "load_trace"]
