"""nvprof's metric results (`nvprof --metrics NAME,...`, console or `--csv`) → KERNELS rows.

nvprof is the only profiler with per-kernel metrics on Kepler, Maxwell and Pascal GPUs (the Jetson Nano, TX1 and TX2
among them), where Nsight Compute does not run. The grammar, from the real outputs named in
tests/fixtures/found/PROVENANCE.md and the CUDA Profiler User's Guide:

- Console: `==PID== Metric result:`, the header `Invocations  Metric Name  Metric Description  Min  Max  Avg`, then per
  GPU a `Device "NAME (N)"` line (pasted copies sometimes lose the `(N)`), per kernel a `Kernel: NAME` line, and one
  row per metric: invocations, metric name, description (words; cut to 30 characters by early versions), Min, Max,
  Avg. A value is a number (`2096640`, `1.5576e+10`, `0.914255`), a percentage (`36.98%`), a rate with a binary
  unit (`704.77MB/s`: nvprof's KB, MB and GB are 2^10, 2^20 and 2^30 bytes, as its sizes are), or a utilisation
  level (`High (7)`, sometimes the word alone).
- CSV: `"Device","Kernel","Invocations","Metric Name","Metric Description","Min","Max","Avg"`, one row per metric,
  values as in the console.

The Avg column is read. Metrics that the KERNELS schema holds: `flop_count_sp/dp/hp` (CUDA 5: `flops_sp/dp`; FLOP, FMA
counted twice as ncu counts it), DRAM bytes (`dram_read_bytes` + `dram_write_bytes`, else 32 × `dram_read_transactions` +
`dram_write_transactions`), DRAM bytes/s (`dram_read_throughput` + `dram_write_throughput`), `achieved_occupancy`
(a fraction, kept as %), and the `stall_*` reasons (% of stalls). DRAM traffic needs both directions: reads alone
would understate it, and a note names what is missing.

nvprof prints no kernel durations with metrics. A launch's duration is its DRAM bytes ÷ its DRAM bytes/s (nvprof
computes the rate from the same bytes and the launch's time), else the kernel's time in a summary (`GPU activities`)
or `--print-gpu-trace` of another run in the same file, when every run that timed it agrees within 10%.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.numbers import float_or_none
from traceview.parsers.base import Format, Parsed, ReadOptions, cut_notes
from traceview.parsers.ncu_csv import short_kernel_name
from traceview.parsers.ncu_summary import MAX_INVOCATIONS, repeat_invocations
from traceview.parsers.nvprof import HEADING, SUMMARY_ROW, TRACE_HEADER, time_ns, trace_name, trace_table, trouble_note
from traceview.parsers.schema import KERNELS, STALL, conform

_CONSOLE_HEADER = re.compile(r"^\s*Invocations\s+Metric Name\s+Metric Description\s+Min\s+Max\s+Avg\s*$", re.MULTILINE)
_CSV_COLUMNS = ["Device", "Kernel", "Invocations", "Metric Name", "Metric Description", "Min", "Max", "Avg"]
_CSV_HEADER = re.compile(r'^\s*"Device","Kernel","Invocations","Metric Name","Metric Description","Min","Max","Avg"\s*$', re.MULTILINE)
_PID = re.compile(r"^\s*==(?P<pid>\d{1,18})==")
# `Device "Tesla K20c (0)"`; copies pasted by hand can lose the index: `Device "TITAN X "`.
_DEVICE = re.compile(r'^\s*Device "(?P<name>.*?)\s*(?:\((?P<index>\d{1,18})\))?\s*"\s*$')
# Inside a metric table only; one real copy has stray keystrokes before it (`LK    Kernel: ...`).
_KERNEL = re.compile(r"(?:^|(?<=\s))Kernel: (?P<name>\S(?:.*\S)?)\s*$")
_LEVEL = r"(?:Idle|Low|Mid|High|Max) \(\d+\)"
_METRIC_ROW = re.compile(rf"^\s*(?P<count>\d{{1,18}})\s+(?P<metric>[a-z][a-z0-9_]*)\s+(?P<description>\S.*?)\s+"
                         rf"(?P<min>{_LEVEL}|\S+)\s+(?P<max>{_LEVEL}|\S+)\s+(?P<avg>{_LEVEL}|\S+)\s*$")
_VALUE = re.compile(r"^(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)(?P<unit>%|B/s|KB/s|MB/s|GB/s|TB/s)?$")
_BYTES_PER_S = {"B/s": 1.0, "KB/s": 2.0**10, "MB/s": 2.0**20, "GB/s": 2.0**30, "TB/s": 2.0**40}
_DRAM_TRANSACTION_BYTES = 32.0  # nvprof's DRAM transactions are 32-byte sectors (dram_read_bytes = 32 × dram_read_transactions)
# CUDA 6+ names, then CUDA 5's (`flops_dp` = add + mul + 2 × fma, as the real K20m output in the tests adds up).
_FLOPS = {"flop_count_dp": "fp64_flop", "flop_count_sp": "fp32_flop", "flop_count_hp": "fp16_flop",
          "flops_dp": "fp64_flop", "flops_sp": "fp32_flop"}
# nvprof's stall reasons (CUDA 6+ names); CUDA 5 called memory_dependency `data_request`, and early versions cut a
# metric name to 30 characters (`stall_constant_memory_dependen`).
_STALL_REASONS = ("memory_dependency", "exec_dependency", "inst_fetch", "texture", "sync", "other", "constant_memory_dependency",
                  "pipe_busy", "memory_throttle", "not_selected", "sleeping")
_STALL_ALIASES = {"data_request": "memory_dependency"}
_NAME_WIDTH = 30
# Two runs of one program that time a kernel this far apart are not the same work (another input size, another build).
_TIMING_AGREEMENT = 1.10
# nvprof's stall metrics are % of the stalls already (they add up to about 100), not counts to be shared out.
STALL_UNIT = "nvprof, % of stalls"
_HINT = "pass nvprof's output as it printed it (`nvprof --metrics flop_count_sp,dram_read_transactions,... ./app`, console or --csv)"


def looks_like_nvprof_metrics(head: str) -> bool:
    """True when the text holds an nvprof metric table (its console header or its --csv header)."""
    return bool(_CONSOLE_HEADER.search(head) or _CSV_HEADER.search(head))


@dataclass
class _Kernel:
    """One kernel's metric rows in one process on one device: metric name → Avg value (rates in bytes/s)."""

    process: str | None
    device_name: str | None
    device_index: int | None
    name: str
    invocations: int = 1
    values: dict[str, float] = field(default_factory=dict)


def _value(text: str) -> float | None:
    """Return a metric cell as a number (rates in bytes/s, percentages as 0-100), or None (a level, `n/a`)."""
    match = _VALUE.match(text.strip())
    if match is None:
        return None
    number = float_or_none(match.group("number"))
    if number is None:
        return None
    unit = match.group("unit")
    value = number * _BYTES_PER_S[unit] if unit and unit != "%" else number
    return value if math.isfinite(value) and value >= 0 else None


def _device(text: str) -> tuple[str | None, int | None]:
    """Return (name, index) of a device cell or line body: `Tesla K20c (0)`, or a name without its index."""
    text = text.strip()
    match = re.search(r"\((?P<index>\d{1,9})\)$", text)
    name = text[:match.start()].strip() if match else text
    return name or None, int(match.group("index")) if match else None


def _walk(lines: list[str]) -> Iterator[tuple[int, str, str | None, str | None]]:
    """Yield each line with its number, the nvprof process whose output it is (the last `==PID==` above it), and its
    section title in lower case where the line is a heading (`==PID== Metric result:`), else None."""
    process: str | None = None
    for number, line in enumerate(lines, start=1):
        owner = _PID.match(line)
        if owner:
            process = owner.group("pid")
        heading = HEADING.match(line)
        yield number, line, process, heading.group("title").strip().lower() if heading else None


def _read_metrics(path: Path, lines: list[str]) -> tuple[list[_Kernel], set[str]]:
    """Return the kernels of every metric table in the file, and the other nvprof sections seen (events)."""
    kernels: dict[tuple[object, ...], _Kernel] = {}
    other: set[str] = set()
    device: tuple[str | None, int | None] = (None, None)
    current: _Kernel | None = None
    in_table = False
    csv_rows = False
    for number, line, process, title in _walk(lines):
        if title is not None:
            in_table = title == "metric result"
            csv_rows = False
            if title == "event result":
                other.add("event results (--events)")
            continue
        if _CSV_HEADER.match(line):
            in_table, csv_rows, current = True, True, None
            continue
        if _CONSOLE_HEADER.match(line):
            in_table, csv_rows, current, device = True, False, None, (None, None)
            continue
        if not in_table:
            continue
        if csv_rows:
            if not line.strip():
                continue
            cells = next(csv.reader([line.strip()]))
            if len(cells) != len(_CSV_COLUMNS):
                if line.lstrip().startswith('"'):
                    raise TraceFormatError(path, f"an nvprof metric CSV row has {len(cells)} fields for {len(_CSV_COLUMNS)} columns", _HINT,
                                           line=number)
                in_table = False  # the table ended: prose or another tool's output follows
                continue
            row = dict(zip(_CSV_COLUMNS, cells, strict=True))
            name, index = _device(row["Device"])
            key = (process, name, index, row["Kernel"])
            kernel = kernels.setdefault(key, _Kernel(process, name, index, row["Kernel"]))
            _add(kernel, row["Invocations"], row["Metric Name"], row["Avg"])
            continue
        on_device = _DEVICE.match(line)
        if on_device:
            ordinal = on_device.group("index")
            device = (on_device.group("name").strip() or None, int(ordinal) if ordinal is not None else None)
            current = None
            continue
        named = _KERNEL.search(line)
        if named:
            key = (process, *device, named.group("name"))
            current = kernels.setdefault(key, _Kernel(process, *device, named.group("name")))
            continue
        row_match = _METRIC_ROW.match(line)
        if row_match and current is not None:
            _add(current, row_match.group("count"), row_match.group("metric"), row_match.group("avg"))
    return list(kernels.values()), other


def _add(kernel: _Kernel, count: str, metric: str, average: str) -> None:
    value = _value(average)
    if value is not None:
        kernel.values[metric.strip()] = value
    invocations = int(count) if count.strip().isdecimal() else None
    if invocations:
        # A damaged count of 10^23 is refused by repeat_invocations, which needs it to fit a 64-bit integer first.
        kernel.invocations = max(kernel.invocations, min(invocations, MAX_INVOCATIONS + 1))


def _timings(path: Path, lines: list[str]) -> dict[str, list[tuple[str | None, float, int]]]:
    """Return per kernel name its timings in the file's summaries and GPU traces: (process, mean duration ns, launches)."""
    found: dict[tuple[str | None, str], list[float]] = {}  # (process, name) → [total ns, launches]
    kind: str | None = None  # what the summary rows under this point are: "gpu activities", "api calls", ...
    for number, line, process, title in _walk(lines):
        if title is not None:
            kind = "gpu activities" if title == "profiling result" else title
            continue
        if kind == "gpu activities" and TRACE_HEADER.match(line) and "Grid" in line:
            try:
                _, body, unit_of = trace_table(path, lines, number)
            except TraceFormatError:
                continue  # a damaged timing run leaves the durations unknown; the metrics are still read
            for _, cells in body:
                name, _ = trace_name(cells)
                duration = time_ns(cells.get("Duration", ""), unit_of.get("Duration"))
                if name and not name.startswith("[") and duration:
                    total = found.setdefault((process, name), [0.0, 0])
                    total[0] += duration
                    total[1] += 1
            kind = None
            continue
        row = SUMMARY_ROW.match(line)
        if row is None:
            continue
        if row.group("type"):
            kind = row.group("type").strip().lower()
        average = time_ns(row.group("avg"))
        if kind == "gpu activities" and not row.group("name").startswith("[") and average and int(row.group("calls")):
            total = found.setdefault((process, row.group("name")), [0.0, 0])
            total[0] += average * int(row.group("calls"))
            total[1] += int(row.group("calls"))
    timings: dict[str, list[tuple[str | None, float, int]]] = {}
    for (owner, name), (total_ns, launches) in found.items():
        timings.setdefault(name, []).append((owner, total_ns / launches, int(launches)))
    return timings


def _timed(name: str, timings: dict[str, list[tuple[str | None, float, int]]]) -> float | None:
    """Return the kernel's mean duration (ns) over the runs that timed it, or None when they disagree by more than 10%."""
    runs = timings.get(name)
    if not runs:
        return None
    means = [mean for _, mean, _ in runs]
    if max(means) > _TIMING_AGREEMENT * min(means):
        return None
    launches = sum(count for _, _, count in runs)
    return sum(mean * count for _, mean, count in runs) / launches


def _pair(values: dict[str, float], read: str, write: str, scale: float = 1.0) -> float | None:
    if read in values and write in values:
        return (values[read] + values[write]) * scale
    return None


def _row(kernel: _Kernel, timings: dict[str, list[tuple[str | None, float, int]]], sources: dict[str, int]) -> dict[str, object]:
    """Return the KERNELS columns of one kernel; `sources` counts where durations came from."""
    values = kernel.values
    dram_bytes = _pair(values, "dram_read_bytes", "dram_write_bytes")
    if dram_bytes is None:
        dram_bytes = _pair(values, "dram_read_transactions", "dram_write_transactions", _DRAM_TRANSACTION_BYTES)
    dram_rate = _pair(values, "dram_read_throughput", "dram_write_throughput")
    duration = None
    if dram_bytes and dram_rate:
        duration = dram_bytes / dram_rate * 1e9
        sources["DRAM bytes ÷ DRAM throughput"] = sources.get("DRAM bytes ÷ DRAM throughput", 0) + 1
    else:
        duration = _timed(kernel.name, timings)
        if duration is not None:
            sources["the timing run(s) in the same file"] = sources.get("the timing run(s) in the same file", 0) + 1
    row: dict[str, object] = {
        "process_id": int(kernel.process) if kernel.process and len(kernel.process) < 19 else None,
        "kernel_name": kernel.name,
        "short_name": short_kernel_name(kernel.name),
        "device_name": kernel.device_name,
        "device_index": kernel.device_index,
        "duration_ns": duration,
        "dram_bytes": dram_bytes,
        "dram_bytes_per_s": dram_rate if dram_rate is not None else (dram_bytes / duration * 1e9 if dram_bytes is not None and duration else None),
        "achieved_occupancy_pct": 100.0 * values["achieved_occupancy"] if "achieved_occupancy" in values else None,
    }
    for metric, column in _FLOPS.items():
        flop = values.get(metric)
        if flop is None or row.get(column) is not None:
            continue
        row[column] = flop
        row[f"{column}_per_s"] = flop / duration * 1e9 if duration else None
    stalls = [{"reason": _stall_reason(metric), "value": value} for metric, value in values.items() if metric.startswith("stall_")]
    row["stalls"] = stalls or None
    row["stall_unit"] = STALL_UNIT if stalls else None
    return row


def _stall_reason(metric: str) -> str:
    """Return the stall reason of a `stall_*` metric in CUDA 6+'s words, also for CUDA 5's and for names cut short."""
    reason = metric.removeprefix("stall_")
    reason = _STALL_ALIASES.get(reason, reason)
    if len(metric) >= _NAME_WIDTH and reason not in _STALL_REASONS:
        whole = [name for name in _STALL_REASONS if name.startswith(reason)]
        if len(whole) == 1:
            return whole[0]
    return reason


def _missing(kernels: list[_Kernel]) -> list[str]:
    """Return what the metric tables lack for a roofline verdict, in nvprof's metric names."""
    seen = set().union(*(k.values for k in kernels)) if kernels else set()
    lacks = []
    if not seen & set(_FLOPS):
        lacks.append("FLOP counts (flop_count_sp, flop_count_dp)")
    bytes_pairs = (("dram_read_bytes", "dram_write_bytes"), ("dram_read_transactions", "dram_write_transactions"))
    if not any(all(k in seen for k in pair) for pair in bytes_pairs) and not {"dram_read_throughput", "dram_write_throughput"} <= seen:
        one_side = sorted(seen & {m for pair in bytes_pairs for m in pair} | seen & {"dram_read_throughput", "dram_write_throughput"})
        lacks.append("DRAM traffic in both directions (dram_read_transactions and dram_write_transactions, or the two throughputs)"
                     + (f": only {', '.join(one_side)} was collected" if one_side else ""))
    return lacks


def parse(path: str | Path, notes: list[str] | None = None) -> pl.DataFrame:
    """Return the KERNELS rows of nvprof's metric results: one per kernel invocation, each with its kernel's averages
    (FLOP, bytes, bytes/s, ns, %)."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    kernels, other = _read_metrics(path, lines)
    if not kernels:
        raise TraceFormatError(path, "nvprof's metric header without any `Kernel:` block and metric rows under it: the output looks cut", _HINT)
    timings = _timings(path, lines)
    sources: dict[str, int] = {}
    rows = [_row(kernel, timings, sources) for kernel in kernels]
    # Several runs pasted into one file are usually several programs (another build, another input): a kernel
    # name that more than one run measured is kept apart by its run's process id.
    runs_of: dict[str, set[str | None]] = {}
    for kernel in kernels:
        runs_of.setdefault(kernel.name, set()).add(kernel.process)
    shared = {name for name, runs in runs_of.items() if len(runs) > 1}
    for kernel, row in zip(kernels, rows, strict=True):
        if kernel.name in shared:
            row["kernel_name"] = f"{kernel.name} [nvprof run {kernel.process or '?'}]"
            row["short_name"] = f"{short_kernel_name(kernel.name)} [run {kernel.process or '?'}]"
    frame = pl.DataFrame(rows, schema_overrides={"stalls": pl.List(STALL)}, strict=False, infer_schema_length=None)
    frame = conform(frame.with_row_index("launch_id").with_columns(pl.col("launch_id").cast(pl.Int64)), KERNELS)
    invocations = pl.Series([kernel.invocations for kernel in kernels], dtype=pl.Int64)
    frame = repeat_invocations(frame, invocations, path, notes, summary="nvprof's metric results",
                               hint="pass nvprof's output as it printed it")
    if notes is not None:
        if sources:
            notes.append("nvprof prints no durations with metrics: " + "; ".join(f"{count} of {len(kernels)} kernel(s) timed from {source}"
                                                                              for source, count in sources.items()))
        ambiguous = list(dict.fromkeys(k.name for k, row in zip(kernels, rows, strict=True)
                                       if row["duration_ns"] is None and k.name in timings and _timed(k.name, timings) is None))
        if shared:
            notes.append(f"{len(shared)} kernel name(s) were measured in more than one nvprof run in this file: each run's is its own row, "
                         "named with the run's process id (separate runs are usually separate programs or inputs)")
        if ambiguous:
            notes.append(f"{len(ambiguous)} kernel(s) were timed by runs in the file that disagree by more than 10% (other inputs?): "
                         f"their durations are left unknown ({short_kernel_name(ambiguous[0])}{', …' if len(ambiguous) > 1 else ''})")
        lacks = _missing(kernels)
        if lacks:
            notes.append(f"for a roofline verdict nvprof's metrics need {' and '.join(lacks)}")
        if other:
            notes.append(f"not read from nvprof's output: {', '.join(sorted(other))}")
        trouble = trouble_note(lines)
        if trouble:
            notes.append(trouble)
    return frame


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    notes = cut_notes(options)
    kernels = parse(path, notes)
    return Parsed(kernels, "nvprof (--metrics)", tuple(notes))


# Before nvprof's summary: a file that holds metric results and a timing run's summary is read for the metrics.
FORMATS = (
    Format("nvprof-metrics", "kernels", _read, lambda head: head.is_text and looks_like_nvprof_metrics(head.text), order=60,
           data_line=re.compile(r'\d|Kernel:|Device|Metric|Invocations|^"'), joinable=True),
)
