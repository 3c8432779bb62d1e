"""traceview: GPU profiling trace analyzer (Nsight Compute, Nsight Systems, nvprof, tegrastats, llama.cpp).

The library call is `analyze_file`; the command line, the dashboard and the fleet are its users:

    >>> import traceview
    >>> analysis = traceview.analyze_file("run.sqlite", gpu="h100-sxm")
    >>> analysis.kernels.select("kernel_name", "duration_ns", "bound").head()

`analysis.kind` says what the input was ("kernels", "nsys-export", "nsys-stats", "telemetry", "llama-runs", "fleet")
and `analysis.detail` holds what only that kind has. Bad input raises `traceview.errors.TraceFormatError` (its
message says what is wrong and the fix); an option the input does not take raises `traceview.errors.UsageError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from traceview.analyzer.analysis import Analysis

__all__ = ["__version__", "analyze_file"]


def analyze_file(
    path: str | Path,
    *,
    gpu: str | None = None,
    weights: str | None = None,
    bandwidth: str | None = None,
    tokens: int | None = None,
    interval_s: float = 1.0,
    gap_threshold: str | None = None,
    step_kernels: int | None = None,
    ncu: list[str | Path] | None = None,
) -> Analysis:
    """Return the analysis of one trace file, its format detected from the content.

    gpu: a GPU or Jetson board name from `traceview gpus` (peaks for the roofline, bandwidth for MBU), when the
    file does not say. weights: bytes of weights read per decode token ("4.2GB"). bandwidth: memory bandwidth for
    llama.cpp MBU ("1TB/s"). tokens: tokens generated during a tegrastats log (energy per token). interval_s: the
    tegrastats sampling interval in seconds. gap_threshold: the shortest idle gap an Nsight Systems export reports
    ("100ms"; default 500ms, as nsys analyze). step_kernels: kernels per step of an Nsight Compute export. ncu: Nsight Compute (or nvprof --metrics)
    exports whose verdicts to join onto an Nsight Systems input by kernel name.
    """
    from traceview.analyzer.kinds import AnalysisOptions
    from traceview.analyzer.pipeline import analyze_file as analyze

    options = AnalysisOptions(gpu=gpu, interval_s=interval_s, tokens=tokens, weights=weights, bandwidth=bandwidth,
                              gap_threshold=gap_threshold, step_kernels=step_kernels)
    return analyze(path, options, [Path(p) for p in ncu] if ncu else None)
