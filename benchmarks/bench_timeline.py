"""Benchmark: the dashboard's timeline on the realistic 2 M-launch export (every timed table replicated; see
realistic_nsys.py): the first render (lanes built, the whole run in 1,000 bins) and a zoom re-query (a 1 % window
re-binned), beside the analysis time measured in the same run, and the payload sent to the browser.

Targets (issue 14): first render under 2 s, zoom under 300 ms. Usage: python benchmarks/bench_timeline.py [--factor 581]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import plotly

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realistic_nsys import build  # noqa: E402

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
    analysis = run_analysis(path, None)
    analyzed = time.perf_counter()
    page = json.dumps({"figure": figure_for(analysis, None, False).to_plotly_json(), "table": table_rows(analysis),
                       "side": [str(c) for c in side_panel(analysis)]}, cls=plotly.utils.PlotlyJSONEncoder)
    page_done = time.perf_counter()
    figure = timeline_figure(analysis)
    payload = json.dumps(figure.to_plotly_json(), cls=plotly.utils.PlotlyJSONEncoder)
    first = time.perf_counter()
    lanes = analysis.timeline.lanes()
    span_ms = max(int(lane.ends.max()) for lane in lanes) / 1e6 - min(int(lane.starts.min()) for lane in lanes) / 1e6
    zooms = []
    for position in (0.1, 0.5, 0.9):
        begin = time.perf_counter()
        zoomed = timeline_figure(analysis, span_ms * position, span_ms * (position + 0.01))
        json.dumps(zoomed.to_plotly_json(), cls=plotly.utils.PlotlyJSONEncoder)
        zooms.append(time.perf_counter() - begin)
    events = sum(len(lane.starts) for lane in lanes)
    print(f"{path.name}: {events:,} events in {len(lanes)} lanes; analysis {analyzed - start:.2f} s")
    print(f"main page first render (breakdown, ranked table, side panel): {page_done - analyzed:.2f} s, {len(page) / 1e3:.0f} kB")
    print(f"timeline first render: {first - page_done:.2f} s (target < 2 s), {len(payload) / 1e3:.0f} kB to the browser")
    print(f"zoom re-query (1 % window): worst {max(zooms) * 1e3:.0f} ms of {len(zooms)} (target < 300 ms)")


if __name__ == "__main__":
    main()
