"""Benchmark: time from a finished analysis of a 2-million-launch Nsight Systems export to the dashboard's first
render payload (the roofline figure, the ranked table and the side panel, serialised as Dash sends them).

Uses the export benchmarks/bench_nsys.py builds. Target: under 3 s. Usage: python benchmarks/bench_dashboard.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import plotly

from traceview.app.cli import run_analysis
from traceview.app.dashboard import figure_for, side_panel, table_rows

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    import bench_nsys  # builds the export if it is missing

    path = bench_nsys.build_export(2_000_000)
    start = time.perf_counter()
    analysis = run_analysis(path, None)
    analyzed = time.perf_counter()
    figure = figure_for(analysis, None, per_launch=False)
    payload = json.dumps({"figure": figure.to_plotly_json(), "table": table_rows(analysis), "side": [str(c) for c in side_panel(analysis)]},
                         cls=plotly.utils.PlotlyJSONEncoder)
    rendered = time.perf_counter()
    print(f"analysis of {path.name}: {analyzed - start:.2f} s")
    print(f"first render payload: {rendered - analyzed:.3f} s, {len(payload) / 1e3:.0f} kB sent to the browser "
          f"({analysis.kernels.height} kernel rows; target under 3 s)")


if __name__ == "__main__":
    main()
