"""detect_format(path) → TraceFormat, from the file's content (never its name)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from traceview.errors import TraceFormatError, UnknownFormatError

_SNIFF_BYTES = 64 * 1024


class TraceFormat(str, Enum):
    NCU_DETAILS = "ncu-csv-details"
    NCU_RAW = "ncu-csv-raw"
    NCU_REP = "ncu-rep"
    NSYS_SQLITE = "nsys-sqlite"
    TEGRASTATS = "tegrastats"
    LLAMA_BENCH_MD = "llama-bench-md"
    LLAMA_BENCH_CSV = "llama-bench-csv"
    LLAMA_BENCH_JSON = "llama-bench-json"
    LLAMA_TIMINGS = "llama-timings"


_NOT_YET = {
    TraceFormat.NCU_REP: "this is a binary Nsight Compute report (.ncu-rep); this version reads its CSV export",
    TraceFormat.NSYS_SQLITE: "this is an SQLite database (Nsight Systems export); this version reads Nsight Compute CSV",
}
_NOT_YET_FIX = {
    TraceFormat.NCU_REP: "export it with `ncu -i report.ncu-rep --csv --page raw > run.csv` and analyze that",
    TraceFormat.NSYS_SQLITE: "profile the kernels with Nsight Compute (`ncu --set full --csv ...`) and analyze that CSV",
}


def check_readable(path: Path) -> None:
    """Raise a TraceFormatError for a missing, unreadable or empty input."""
    if not path.exists():
        raise TraceFormatError(path, "no such file", "check the path")
    if path.is_dir():
        raise TraceFormatError(path, "is a directory, not a trace file", "pass one exported file")
    try:
        size = path.stat().st_size
        with path.open("rb"):
            pass
    except OSError as error:
        raise TraceFormatError(path, f"cannot be read ({error.strerror})", "check its permissions") from error
    if size == 0:
        raise TraceFormatError(path, "the file is empty", "re-export the profile; the capture may have failed")


def detect_format(path: str | Path) -> TraceFormat:
    """Return the format of a trace file, judged from its first bytes and its header line."""
    path = Path(path)
    check_readable(path)
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if head.startswith(b"SQLite format 3\x00"):
        return TraceFormat.NSYS_SQLITE
    if head.startswith(b"NVR\x00"):
        return TraceFormat.NCU_REP
    from traceview.parsers.ncu_csv import find_header  # local: sniff stays importable on its own

    if b"\x00" not in head:
        from traceview.parsers.tegrastats import looks_like_tegrastats

        if looks_like_tegrastats(head):
            return TraceFormat.TEGRASTATS
        from traceview.parsers.llama_cpp import detect as detect_llama

        llama = detect_llama(head.decode("utf-8", errors="replace"))
        if llama is not None:
            return TraceFormat(llama)
        header = find_header(path)
        if header is not None:
            return TraceFormat.NCU_RAW if header.page == "raw" else TraceFormat.NCU_DETAILS
        raise UnknownFormatError(
            path,
            "not a supported trace: no Nsight Compute CSV header (\"ID\",\"Process ID\",...), tegrastats sample or llama.cpp output found",
            "pass an `ncu --csv` export (details or raw page), a `tegrastats --logfile` log, or llama-bench / llama.cpp timing output",
        )
    raise UnknownFormatError(path, "binary file of an unknown kind", "pass an `ncu --csv` export (details or raw page)")


def unsupported(path: Path, fmt: TraceFormat) -> TraceFormatError:
    """Return the error for a recognised format that this version cannot analyze yet."""
    return TraceFormatError(path, _NOT_YET[fmt], _NOT_YET_FIX[fmt])
