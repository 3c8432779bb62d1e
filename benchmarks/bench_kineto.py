"""PyTorch profiler traces at scale: traceview against a plain `json.load` of the same file and against Meta's
Holistic Trace Analysis (HTA, `pip install traceinsight`) computing its temporal and idle-time breakdowns, as whole
processes in one run, with peak RSS.

The large trace is built deterministically from the real vLLM 4×H100 trace (rank 0, CUDA graphs, NCCL): its events
replicated FACTOR times, copy k shifted by k × (the trace's span + 1 µs) in time and by k × (the largest id + 1) in
correlation ids, External ids and flow ids, so every copy's launches still find their kernels. Written as plain JSON
with one event per line, as Kineto writes it.

Usage: python benchmarks/bench_kineto.py FACTOR [--keep OUT.json]   (FACTOR 135 → about 2 GB, 24 M events)
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT.parent / "shared" / "realdata" / "kineto" / "vllm_h100x4_tp4_rank0_cudagraphs_nccl_tracemap.pt.trace.json.gz"
ID_KEYS = ("correlation", "External id", "external id")


def build(factor: int, out: Path) -> int:
    """Write the replicated trace; return its event count."""
    with gzip.open(SOURCE, "rt", encoding="utf-8") as handle:
        trace = json.load(handle)
    events = trace.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + (e.get("dur") or 0) for e in timed) - min(e["ts"] for e in timed) + 1.0
    largest = max([int(e["args"][k]) for e in events for k in ID_KEYS if isinstance(e.get("args"), dict) and isinstance(e["args"].get(k), int)]
                  + [int(e["id"]) for e in events if isinstance(e.get("id"), int)] + [0])
    count = 0
    with out.open("w", encoding="utf-8") as handle:
        handle.write("{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in trace.items()) + '  "traceEvents": [\n')
        first = True
        for copy in range(factor):
            shift, offset = copy * span, copy * (largest + 1)
            for event in events:
                if copy and event.get("ph") == "M":
                    continue  # process and thread names once
                moved = dict(event)
                if isinstance(moved.get("ts"), (int, float)):
                    moved["ts"] = moved["ts"] + shift
                if isinstance(moved.get("id"), int):
                    moved["id"] = moved["id"] + offset
                if isinstance(moved.get("args"), dict):
                    args = dict(moved["args"])
                    for key in ID_KEYS:
                        if isinstance(args.get(key), int) and args[key] >= 0:
                            args[key] += offset
                    moved["args"] = args
                handle.write(("" if first else ",\n") + "  " + json.dumps(moved))
                first = False
                count += 1
        handle.write("\n  ]\n}\n")
    return count


def measure(command: list[str]) -> tuple[float, float, int]:
    """Run a whole process; return (wall s, peak RSS MB, exit code)."""
    started = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-f", "MAXRSS %M", *command], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    rss = next((int(line.split()[1]) / 1024 for line in result.stderr.splitlines() if line.startswith("MAXRSS")), float("nan"))
    if result.returncode:
        print(f"  ({command[0]} … exited {result.returncode}: {result.stderr.strip().splitlines()[-2:]})", file=sys.stderr)
    return wall, rss, result.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("factor", type=int)
    parser.add_argument("--keep", type=Path, help="write the trace here and keep it")
    args = parser.parse_args()
    if not SOURCE.exists():
        sys.exit(f"the source trace is not here: {SOURCE}")
    if shutil.which("/usr/bin/time") is None:
        sys.exit("needs /usr/bin/time (Debian: apt install time) for peak RSS")
    folder = Path(tempfile.mkdtemp(prefix="bench_kineto_"))
    out = args.keep or folder / "rank-0.pt.trace.json"
    events = build(args.factor, out)
    size = out.stat().st_size
    print(f"trace: {events:,} events, {size / 1e9:.2f} GB (×{args.factor} of the real vLLM H100 rank-0 trace)")
    runs = {
        "json.load (baseline)": [sys.executable, "-c", f"import json; json.load(open({str(out)!r}, 'rb'))"],
        "traceview analyze": [sys.executable, "-m", "traceview", "analyze", str(out), "--format", "json", "-o", str(folder / "answer.json"), "--force"],
    }
    if importlib.util.find_spec("hta") is not None:
        runs["HTA temporal + idle breakdown"] = [sys.executable, "-c", (
            "from hta.trace_analysis import TraceAnalysis; "
            f"a = TraceAnalysis(trace_dir={str(out.parent)!r}); a.get_temporal_breakdown(visualize=False); a.get_idle_time_breakdown(visualize=False)")]
    else:
        print("HTA is not installed (pip install traceinsight): its column is left out")
    results = {name: measure(command) for name, command in runs.items()}
    base_wall, base_rss, _ = results["json.load (baseline)"]
    for name, (wall, rss, code) in results.items():
        status = "" if code == 0 else f"  (exit {code})"
        print(f"{name:32s} {wall:7.2f} s {rss:8.0f} MB   {wall / base_wall:5.2f}× the baseline's time, {rss / base_rss:5.2f}× its memory{status}")
    print(f"traceview per million events: {results['traceview analyze'][0] / (events / 1e6):.2f} s")
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
