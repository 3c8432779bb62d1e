"""analyze_file(path, options) → Analysis: the one load → analyze pipeline, used by the CLI, the dashboard's uploads and
every fleet worker, so that each gives the same answer, with the same notes, for the same file."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from traceview.analyzer.analysis import Analysis, Source
from traceview.analyzer.kinds import ANALYSES, OPTION_USE, AnalysisOptions, check_options
from traceview.analyzer.projection import parse_targets, project
from traceview.errors import UsageError
from traceview.parsers import joinable_formats, load_trace


def sha256_of(path: Path, stop: threading.Event | None = None) -> str:
    """Return the file's sha256 (hex), read in 1 MiB blocks; "" when `stop` is set before the end."""
    digest = hashlib.sha256()
    # One buffer read into again and again: a new block per read is a fresh mapping wherever freed memory goes back
    # at once (traceview.allocators), and faulting its pages in (1.5 M of them for a 6.4 GB export) took seconds of
    # system time.
    block = bytearray(1 << 20)
    view = memoryview(block)
    with path.open("rb", buffering=0) as handle:
        while count := handle.readinto(block):
            if stop is not None and stop.is_set():
                return ""
            digest.update(view[:count])
    return digest.hexdigest()


def analyze_file(path: str | Path, options: AnalysisOptions | None = None, ncu: list[Path] | None = None) -> Analysis:
    """Return the analysis of one trace file, whatever its format (detected from its content).

    `options` are the analysis options (AnalysisOptions: --gpu, --weights, …); `ncu` lists per-kernel metric exports
    (Nsight Compute, or nvprof --metrics) to join onto a whole-run input by kernel name. Raises TraceFormatError with
    the fix for an unreadable file and UsageError for an option the input does not take."""
    path = Path(path)
    options = options or AnalysisOptions()
    targets = parse_targets(options.what_if) if options.what_if else []  # a misspelt GPU is said before the file is read
    # The file's hash (for the report's provenance) is taken on a thread while the file is read and analysed:
    # hashlib releases the GIL, and a gigabyte export takes a second to hash. A file that fails stops the hash. Only a
    # regular file is opened before the reader has looked at it (opening a FIFO would wait for a writer).
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        digest = pool.submit(sha256_of, path, stop) if path.is_file() else None
        trace = load_trace(path, interval_s=options.interval_s, progress=options.progress)
        # The input-specific options given: each must be one this input's kind takes.
        given = {name for name in OPTION_USE if getattr(options, name) is not None} | ({"ncu"} if ncu else set())
        check_options(trace.kind, given)
        if ncu:
            options = dataclasses.replace(options, ncu=_joined_ncu(ncu, options.gpu))
        source = Source(str(path), str(trace.format), "", path.stat().st_size, trace.profiler)
        analysis = ANALYSES[trace.kind].analyze(trace.data, source, options)
        sha256 = digest.result() if digest is not None else sha256_of(path)
    finally:
        stop.set()
        pool.shutdown(wait=False)
    analysis = dataclasses.replace(analysis, source=dataclasses.replace(analysis.source, sha256=sha256))
    if targets:
        analysis = dataclasses.replace(analysis, projections=tuple(project(analysis, targets)))
    # What the reader noticed about the file itself (cut short, rows left out) comes first among the notes.
    return dataclasses.replace(analysis, notes=[*trace.notes, *analysis.notes]) if trace.notes else analysis


def _joined_ncu(paths: list[Path], gpu: str | None) -> Analysis:
    """Analyze every --ncu export (people export one file per kernel) and return them as one analysis to join."""
    analyses = []
    for path in paths:
        analysis = analyze_file(path, AnalysisOptions(gpu=gpu))
        if analysis.source.format not in joinable_formats():
            raise UsageError(f"--ncu {path} is a {analysis.source.format} input, not per-kernel metrics (an Nsight Compute export, CSV or "
                             ".ncu-rep, or nvprof --metrics output)")
        analyses.append(analysis)
    if len(analyses) == 1:
        return analyses[0]
    first = analyses[0]
    kernels = pl.concat([a.kernels for a in analyses], how="diagonal_relaxed")
    source = dataclasses.replace(first.source, path=", ".join(a.source.path for a in analyses))
    return dataclasses.replace(first, source=source, kernels=kernels)
