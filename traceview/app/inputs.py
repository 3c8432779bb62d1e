"""The analysis each kind of input gets, and which input-specific options apply to it: one registry entry per
parsers.InputKind, so a new input is a parser, an analysis and a line in READERS and here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
from traceview.analyzer.jetson import find_board
from traceview.analyzer.whole_run import DEFAULT_GAP_THRESHOLD_NS
from traceview.errors import UsageError
from traceview.parsers import InputKind, Trace


@dataclass(frozen=True)
class AnalysisOptions:
    """The command line's analysis options, as given (sizes and durations still text: each analysis reads its own)."""

    gpu: str | None = None
    interval_s: float = 1.0
    tokens: int | None = None
    weights: str | None = None
    bandwidth: str | None = None
    ncu: Analysis | None = None  # Nsight Compute results to join (--ncu), already analysed
    gap_threshold: str | None = None
    step_kernels: int | None = None
    phase: Callable[[str], None] | None = None  # told each analysis step as it starts (a progress display)


def _weight_bytes(options: AnalysisOptions) -> float | None:
    return parse_bytes(options.weights, "weights") if options.weights else None


def _nsys_export(trace: Trace, source: Source, options: AnalysisOptions) -> Analysis:
    gap = parse_duration_ns(options.gap_threshold, "--gap-threshold") if options.gap_threshold else DEFAULT_GAP_THRESHOLD_NS
    return analyze_nsys(trace.data, source, options.gpu, options.ncu, gap, _weight_bytes(options), options.phase)  # type: ignore[arg-type]


def _nsys_stats(trace: Trace, source: Source, options: AnalysisOptions) -> Analysis:
    return analyze_stats(trace.data, source, options.gpu, options.ncu)  # type: ignore[arg-type]


def _telemetry(trace: Trace, source: Source, options: AnalysisOptions) -> Analysis:
    log = trace.data
    board = find_board(options.gpu) if options.gpu else None
    return analyze_samples(log.samples, source, board, options.interval_s, options.tokens,  # type: ignore[union-attr]
                           log.report.stray_lines, log.report.stray_examples)  # type: ignore[union-attr]


def _llama_runs(trace: Trace, source: Source, options: AnalysisOptions) -> Analysis:
    bandwidth = parse_bytes(options.bandwidth, "bandwidth") if options.bandwidth else None
    return analyze_llama(trace.data, source, options.gpu, bandwidth, _weight_bytes(options))  # type: ignore[arg-type]


def _kernels(trace: Trace, source: Source, options: AnalysisOptions) -> Analysis:
    return analyze(trace.data, source, gpu=options.gpu, weight_bytes=_weight_bytes(options), step_kernels=options.step_kernels)  # type: ignore[arg-type]


@dataclass(frozen=True)
class InputAnalysis:
    analyze: Callable[[Trace, Source, AnalysisOptions], Analysis]
    options: frozenset[str] = frozenset()  # the input-specific options (OPTION_USE) that apply to this kind


ANALYSES: dict[InputKind, InputAnalysis] = {
    InputKind.NSYS_EXPORT: InputAnalysis(_nsys_export, frozenset({"ncu", "gap_threshold"})),
    InputKind.NSYS_STATS: InputAnalysis(_nsys_stats, frozenset({"ncu"})),
    InputKind.TELEMETRY: InputAnalysis(_telemetry),
    InputKind.LLAMA_RUNS: InputAnalysis(_llama_runs),
    InputKind.KERNELS: InputAnalysis(_kernels, frozenset({"step_kernels"})),
}

# What each input-specific option is for, said when it is given for an input it does not apply to.
OPTION_USE = {
    "ncu": "--ncu joins Nsight Compute results onto an Nsight Systems input (.sqlite or nsys stats CSV); this input is not one",
    "gap_threshold": "--gap-threshold applies to Nsight Systems SQLite exports; this input has no timeline",
    "step_kernels": "--step-kernels applies to Nsight Compute exports (kernels profiled one by one); this input is not one",
}


def check_options(trace: Trace, given: set[str]) -> None:
    """Raise UsageError for the first given input-specific option (an OPTION_USE key) that this input cannot use."""
    for name in OPTION_USE:
        if name in given and name not in ANALYSES[trace.kind].options:
            raise UsageError(OPTION_USE[name])


def analyze_trace(trace: Trace, source: Source, options: AnalysisOptions) -> Analysis:
    """Return the analysis that fits the parsed input."""
    return ANALYSES[trace.kind].analyze(trace, source, options)
