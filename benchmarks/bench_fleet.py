"""Benchmark: `traceview fleet` over 64 rank files (the real 2×H100 export copied, one per rank): the serial loop,
`--engine local` (a process pool) and `--engine dask` (a LocalCluster), in the same run; speed-ups over serial and
the driver's own peak memory (workers excluded), also for 16 files, to show it does not grow with the file count.

Goal (issue 15, on 2 cores): ≥ 1.8× over serial; the driver's memory independent of the number of files.
Usage: python benchmarks/bench_fleet.py [--files 64]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT.parent / "shared" / "realdata" / "nsys_sqlite" / "nsys2026.2_h100x2_sliced_nsys-ai.sqlite"
DATA = ROOT / "benchmarks" / ".data"

MEASURE = r"""
import json, resource, sys, time
from pathlib import Path
from traceview.app.fleet import MapOptions, expand_inputs, run_fleet
folder, engine, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
paths = expand_inputs([folder])
start = time.perf_counter()
run = run_fleet(paths, MapOptions(), engine=engine, workers=workers)
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "ranks": run.result.ranks.height, "driver_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def ranks(count: int) -> Path:
    folder = DATA / f"fleet_{count}"
    if not folder.exists():
        folder.mkdir(parents=True)
        for rank in range(count):
            target = folder / f"job_rank{rank}.sqlite"
            shutil.copy(SOURCE, target)
            target.chmod(0o644)
    return folder


def measure(folder: Path, engine: str, workers: int) -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE, str(folder), engine, str(workers)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if not SOURCE.exists():
        sys.exit(f"needs the real export {SOURCE} (../shared beside the checkout)")
    for count in (max(1, args.files // 4), args.files):
        folder = ranks(count)
        serial = measure(folder, "local", 1)
        local = measure(folder, "local", args.workers)
        dask = measure(folder, "dask", args.workers)
        print(f"\n{count} rank files ({SOURCE.name}, {SOURCE.stat().st_size / 1e6:.1f} MB each), {args.workers} workers")
        for name, m in (("serial loop", serial), ("--engine local", local), ("--engine dask", dask)):
            print(f"  {name:15s}: {m['seconds']:6.2f} s  ({serial['seconds'] / m['seconds']:.2f}× serial)  driver peak {m['driver_peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
