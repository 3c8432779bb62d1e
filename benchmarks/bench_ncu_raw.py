"""Benchmark: `traceview analyze` on a 10,000-launch Nsight Compute raw-page export vs a bare polars.read_csv.

The export is built by repeating the six real launches of sample_traces/ncu/gtx1650_calc_energy_raw.csv
(IDs renumbered), so it has the real 1,212 columns, units row, quoting and thousands separators.
Prints both times, measured in the same run, and their ratio. Usage: python benchmarks/bench_ncu_raw.py [--launches N]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import polars as pl

from traceview.analyzer.analysis import Source, analyze
from traceview.parsers import load_trace

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "ncu" / "gtx1650_calc_energy_raw.csv"
DATA = ROOT / "benchmarks" / ".data"


def build_export(launches: int) -> tuple[Path, int]:
    """Write (once) an export with `launches` data rows; return its path and the header's line index."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    header_index = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    preamble, header, units, rows = lines[:header_index], lines[header_index], lines[header_index + 1], lines[header_index + 2 :]
    path = DATA / f"ncu_raw_{launches}.csv"
    if path.exists():
        return path, header_index
    DATA.mkdir(parents=True, exist_ok=True)
    parsed = [next(csv.reader([row])) for row in rows]
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.writelines([*preamble, header, units])
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n")
        for launch in range(launches):
            fields = list(parsed[launch % len(parsed)])
            fields[0] = str(launch)
            writer.writerow(fields)
    return path, header_index


def timed(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    path, header_index = build_export(args.launches)
    size_mb = path.stat().st_size / 1e6

    def baseline() -> None:
        pl.read_csv(path, skip_lines=header_index, infer_schema=False)

    def traceview() -> None:
        trace = load_trace(path)
        analyze(trace.data, Source(str(path), trace.format.value, "", 0))

    base = timed(baseline, args.repeats)
    ours = timed(traceview, args.repeats)
    print(f"export: {args.launches} launches, {size_mb:.0f} MB ({path})")
    print(f"bare polars.read_csv : {base:.3f} s")
    print(f"traceview analyze    : {ours:.3f} s (parse + roofline + ranking)")
    print(f"ratio traceview/bare : {ours / base:.2f}x")


if __name__ == "__main__":
    main()
