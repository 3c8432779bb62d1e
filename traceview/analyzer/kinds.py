"""The analysis registry: one Kind per kind of input (a parser's Format names its kind), each with the function that
analyses it and the input-specific options it takes. A new kind is its analysis module and one line in ANALYSES."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from traceview.analyzer.analysis import (
    Analysis,
    Source,
    analyze,
    analyze_llama,
    analyze_nsys,
    analyze_samples,
    analyze_stats,
)
from traceview.analyzer.decode import parse_bytes, parse_duration_ns
from traceview.analyzer.gpu_metrics import analyze_metrics
from traceview.analyzer.jetson import find_board
from traceview.analyzer.serving import analyze_serving
from traceview.analyzer.torch_trace import analyze_torch
from traceview.analyzer.whole_run import DEFAULT_GAP_THRESHOLD_NS
from traceview.errors import TraceFormatError, UsageError


@dataclass(frozen=True)
class AnalysisOptions:
    """Everything an analysis may be given besides the file, as the user gave it (sizes and durations still text,
    read by the methods below when an analysis needs them). `ncu` holds Nsight Compute results to join, already analysed; `phase(name)` and
    `progress(done, total)` report on long inputs (a progress display)."""

    gpu: str | None = None
    interval_s: float = 1.0
    tokens: int | None = None
    weights: str | None = None
    bandwidth: str | None = None
    ncu: Analysis | None = None
    gap_threshold: str | None = None
    step_kernels: int | None = None
    kv_bytes_per_token: str | None = None
    what_if: str | None = None  # GPUs to project the run onto, comma-separated (every kind)
    phase: Callable[[str], None] | None = None
    progress: Callable[[int, int], None] | None = None
    # Build the zoomable timeline's lanes during the analysis, the NVTX ones in its own pass over the ranges (the
    # dashboard, which draws them): otherwise the first timeline reads every range of the export again.
    timeline: bool = False

    def weight_bytes(self) -> float | None:
        """--weights in bytes, or None; UsageError when it is no size."""
        return parse_bytes(self.weights, "weights") if self.weights else None

    def bandwidth_bytes_per_s(self) -> float | None:
        """--bandwidth in bytes/s, or None; UsageError when it is no rate."""
        return parse_bytes(self.bandwidth, "bandwidth") if self.bandwidth else None

    def gap_threshold_ns(self) -> int:
        """--gap-threshold in ns, or the default (nsys analyze's 500 ms)."""
        return parse_duration_ns(self.gap_threshold, "--gap-threshold") if self.gap_threshold else DEFAULT_GAP_THRESHOLD_NS

    def kv_token_bytes(self) -> float | None:
        """--kv-bytes-per-token in bytes, or None."""
        return parse_bytes(self.kv_bytes_per_token, "--kv-bytes-per-token") if self.kv_bytes_per_token else None


# The options that only some kinds take, and what each is for: said when one is given to a kind that does not take it.
OPTION_USE = {
    "ncu": "--ncu joins Nsight Compute results onto an Nsight Systems input (.sqlite or nsys stats CSV); this input is not one",
    "gap_threshold": "--gap-threshold applies to Nsight Systems SQLite exports; this input has no timeline",
    "step_kernels": "--step-kernels applies to Nsight Compute exports (kernels profiled one by one); this input is not one",
    "kv_bytes_per_token": "--kv-bytes-per-token applies to serving benchmark results (vllm bench serve, bench_serving); this input is not one",
}


@dataclass(frozen=True)
class Kind:
    """One kind of input: its name (a Format's `kind`), its analysis of the parser's data, and the OPTION_USE options
    it takes."""

    name: str
    analyze: Callable[[Any, Source, AnalysisOptions], Analysis]
    options: frozenset[str] = frozenset()


def _nsys_export(export: Any, source: Source, options: AnalysisOptions) -> Analysis:
    return analyze_nsys(export, source, options.gpu, options.ncu, options.gap_threshold_ns(), options.weight_bytes(), options.phase, options.progress,
                        lanes_too=options.timeline)


def _nsys_stats(stats: Any, source: Source, options: AnalysisOptions) -> Analysis:
    return analyze_stats(stats, source, options.gpu, options.ncu)


def _telemetry(log: Any, source: Source, options: AnalysisOptions) -> Analysis:
    board = find_board(options.gpu) if options.gpu else None
    return analyze_samples(log.samples, source, board, options.interval_s, options.tokens, log.report.stray_lines, log.report.stray_examples)


def _llama_runs(runs: Any, source: Source, options: AnalysisOptions) -> Analysis:
    return analyze_llama(runs, source, options.gpu, options.bandwidth_bytes_per_s(), options.weight_bytes())


def _kernels(kernels: Any, source: Source, options: AnalysisOptions) -> Analysis:
    return analyze(kernels, source, gpu=options.gpu, weight_bytes=options.weight_bytes(), step_kernels=options.step_kernels)


def _fleet(record: Any, source: Source, options: AnalysisOptions) -> Analysis:
    import polars as pl

    from traceview.analyzer.fleet import (  # analyzer.fleet builds on analyzer.analysis
        fleet_analysis,
        result_from_record,
    )

    try:
        result = result_from_record(record)
    except (KeyError, TypeError, pl.exceptions.PolarsError) as error:
        raise TraceFormatError(Path(source.path), f"a fleet result with missing or damaged fields ({type(error).__name__}: {error})",
                               "save it again with traceview fleet --format json -o fleet.json") from None
    return fleet_analysis(result, source)


# One line per kind.
ANALYSES: dict[str, Kind] = {kind.name: kind for kind in (
    Kind("kernels", _kernels, frozenset({"step_kernels"})),
    Kind("nsys-export", _nsys_export, frozenset({"ncu", "gap_threshold"})),
    Kind("nsys-stats", _nsys_stats, frozenset({"ncu"})),
    Kind("telemetry", _telemetry),
    Kind("llama-runs", _llama_runs),
    Kind("fleet", _fleet),
    Kind("torch-trace", analyze_torch, frozenset({"gap_threshold"})),
    Kind("serving-bench", analyze_serving, frozenset({"kv_bytes_per_token"})),
    Kind("gpu-metrics", analyze_metrics),
)}


def check_options(kind: str, given: set[str]) -> None:
    """Raise UsageError for the first given input-specific option (an OPTION_USE key) that this kind does not take."""
    for name, use in OPTION_USE.items():
        if name in given and name not in ANALYSES[kind].options:
            raise UsageError(use)


def option_names() -> set[str]:
    """The fields of AnalysisOptions: every Kind's options must be among them (a test holds the registry to it)."""
    return {f.name for f in fields(AnalysisOptions)}
