"""Benchmark: the dashboard's timeline on the realistic 2 M-launch export (every timed table replicated; see
realistic_nsys.py): the first render (lanes built, the whole run in 1,000 bins) and a zoom re-query (a 1 % window
re-binned), beside the analysis time measured in the same run, and the payload sent to the browser.

Targets (issues 14 and 35): first render under 2 s, zoom under 300 ms, the process's peak RSS under 2 GB on the
10 M-launch file (--factor 2905). Usage: python benchmarks/bench_timeline.py [--factor 581]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

# As the `traceview` command runs (`traceview serve`): freed memory given back at once, set before polars loads.
from traceview.allocators import set_allocators  # imports neither polars nor numpy

set_allocators(at_once=True)

import plotly  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realistic_nsys import build  # noqa: E402

from traceview.analyzer.lanes import span_of  # noqa: E402
from traceview.app.cli import run_analysis  # noqa: E402
from traceview.app.dashboard import figure_for, side_panel, table_rows  # noqa: E402
from traceview.app.figures import timeline_figure  # noqa: E402

DATA = Path(__file__).resolve().parent / ".data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=int, default=581)
    args = parser.parse_args()
    path = DATA / f"realistic_ops_{args.factor}.sqlite"
    if not path.exists():
        build(args.factor, path)
    start = time.perf_counter()
    analysis = run_analysis(path, None, timeline=True)  # as `traceview serve` runs it
    analyzed = time.perf_counter()
    analysis_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    page = json.dumps({"figure": figure_for(analysis, None, False).to_plotly_json(), "table": table_rows(analysis),
                       "side": [str(c) for c in side_panel(analysis)]}, cls=plotly.utils.PlotlyJSONEncoder)
    page_done = time.perf_counter()
    figure = timeline_figure(analysis)
    payload = json.dumps(figure.to_plotly_json(), cls=plotly.utils.PlotlyJSONEncoder)
    first = time.perf_counter()
    rendered_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lanes = analysis.timeline.lanes()
    first_ns, last_ns = span_of(lanes) or (0, 0)
    span_ms = (last_ns - first_ns) / 1e6
    zooms = []
    for position in (0.1, 0.5, 0.9):
        begin = time.perf_counter()
        zoomed = timeline_figure(analysis, span_ms * position, span_ms * (position + 0.01))
        json.dumps(zoomed.to_plotly_json(), cls=plotly.utils.PlotlyJSONEncoder)
        zooms.append(time.perf_counter() - begin)
    events = sum(lane.count for lane in lanes)
    print(f"{path.name}: {events:,} events in {len(lanes)} lanes; analysis {analyzed - start:.2f} s, peak RSS {analysis_peak:.0f} MiB")
    print(f"main page first render (breakdown, ranked table, side panel): {page_done - analyzed:.2f} s, {len(page) / 1e3:.0f} kB")
    print(f"timeline first render: {first - page_done:.2f} s (target < 2 s), {len(payload) / 1e3:.0f} kB to the browser")
    # ru_maxrss is in KiB: the peak in MiB, against 2 GB = 2×10⁹ bytes (1,907 MiB) and, beside it, 2 GiB.
    print(f"peak RSS after the first render: {rendered_peak:.0f} MiB ({rendered_peak / analysis_peak:.2f}× the analysis'; "
          f"{rendered_peak * 2**20 / 2e9:.2f}× the 2 GB bound, target < 1; {rendered_peak / 2048:.2f}× of 2 GiB)")
    print(f"zoom re-query (1 % window): worst {max(zooms) * 1e3:.0f} ms of {len(zooms)} (target < 300 ms)")


if __name__ == "__main__":
    main()
