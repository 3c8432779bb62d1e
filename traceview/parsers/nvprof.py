"""nvprof's summary (the legacy CUDA profiler's default output, and pgprof's) → the `nsys stats` reports it matches.

nvprof is the profiler of GPUs that Nsight Compute does not support (Maxwell, Pascal; the Jetson Nano, TX1 and TX2), so
old tickets and Jetson work carry its output. Its summary is read into nsys_stats.StatsReports: GPU activities become
the kernel summary (`cuda_gpu_kern_sum`) and the memory-operation summary (`[CUDA memcpy HtoD]` rows,
`cuda_gpu_mem_time_sum`), API calls the CUDA API summary (`cuda_api_sum`), and the `Unified Memory profiling result`
the unified-memory migrations (`[CUDA Unified Memory memcpy HtoD]`, with their sizes). Both layouts are read: CUDA 9+'s
`Type` column (`GPU activities:`, `API calls:`) and the earlier one with an `==PID== API calls:` heading; the console's
unit-suffixed times (`1.3887ms`, `985ns`) and `--csv` with its units row (`,%,ms,,us,us,ms,`). A `Device "NAME (N)"`
line names the GPU. The per-launch GPU trace (`--print-gpu-trace`, console or `--csv`) is read as nsys's
`cuda_gpu_trace` is: every kernel and copy with its start, so the whole-run view (busy %, breakdown, idle gaps) holds.
An `NVTX result` section gives each range's own time (its `Range:` row) as nsys's `nvtx_sum` does. Metric and event
results (`--metrics`, `--events`) and the API trace (`--print-api-trace`) are not read, and say so.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.numbers import float_or_none
from traceview.parsers.base import Format, Parsed, ReadOptions, cut_notes, line_of
from traceview.parsers.nsys_stats import SPACED_CELL, StatsReports, stats_frame, store_per_launch

# `==12345== Profiling result:` (nvprof), `======== API calls:` (nvprof -i FILE, pgprof): a section's heading.
# Indented where the output was pasted into a Markdown list.
HEADING = re.compile(r"^\s*(?:==\d+==|={4,}) (?P<title>[A-Za-z][^:]*):\s*$")
_ANNOUNCE = re.compile(r"^\s*(?:==\d+==|={4,}) (NVPROF is profiling process|Profiling application:|Profiling result:|API calls:)", re.MULTILINE)
# Times and sizes carry their unit (`85.106ms`, `2.4e+03s`, `128.00MB`) except in --csv, whose units row names it.
_TIME = re.compile(r"^(?P<value>[\d.]+(?:e[+-]?\d+)?)(?P<unit>ns|us|\u00b5s|ms|s)$")
_NS_PER = {"ns": 1.0, "us": 1e3, "\u00b5s": 1e3, "ms": 1e6, "s": 1e9}
_SIZE = re.compile(r"^(?P<value>[\d.]+(?:e[+-]?\d+)?)(?P<unit>B|KB|MB|GB)$")
# nvprof's sizes are binary (8.000000MB is 8 MiB: its 48 migrations average 170.67KB); nsys's MB is 10^6 bytes.
_BYTES_PER = {"B": 1.0, "KB": 2.0**10, "MB": 2.0**20, "GB": 2.0**30}
# A console summary row: `[Type:]  Time(%)  Time  Calls  Avg  Min  Max  Name`, times with their unit.
_T = r"[\d.]+(?:e[+-]?\d+)?(?:ns|us|\u00b5s|ms|s)"
# One quantifier per run of spaces, and a name that ends at its last non-space: two quantifiers sharing a run, or a
# lazy name before `\s*$`, take the square of the line's length on a long damaged line.
SUMMARY_ROW = re.compile(rf"^(?:\s*(?P<type>[A-Za-z][A-Za-z ()/]*?):)?\s+(?P<pct>[\d.]+)%\s+(?P<time>{_T})\s+(?P<calls>\d{{1,18}})\s+"
                  rf"(?P<avg>{_T})\s+(?P<min>{_T})\s+(?P<max>{_T})\s+(?P<name>\S(?:.*\S)?)\s*$")
_UM_ROW = re.compile(r"^\s*(?P<count>\d{1,18})\s+(?P<avg>\S+)\s+(?P<min>\S+)\s+(?P<max>\S+)\s+(?P<total>\S+)\s+(?P<time>\S+)\s+(?P<name>\S(?:.*\S)?)\s*$")
_RANGE = re.compile(r'^\s*(?:==\d+==|={4,})\s+Range\b')
_DEVICE = re.compile(r'^\s*Device "(?P<name>.+) \((?P<index>\d{1,18})\)"\s*$')
_UNREAD_SECTIONS = {"metric result": "metric results (--metrics)", "event result": "event results (--events)"}
_UM_DIRECTIONS = {"host to device": "[CUDA Unified Memory memcpy HtoD]", "device to host": "[CUDA Unified Memory memcpy DtoH]",
                  "device to device": "[CUDA Unified Memory memcpy DtoD]"}


# --print-gpu-trace: a console header whose columns (`Start`, `Duration`, `Grid Size`, ..., `Name`) each end where
# their right-aligned values end, or the --csv header `"Start","Duration",...` with a units row below it.
TRACE_HEADER = re.compile(r'^\s*"?Start"?(\s{2,}|,)"?Duration"?(\s|,)')
CORRELATION = re.compile(r"\s\[(\d+)\]\s*$")  # `vectorAdd(float const *, ...) [112]`: the launch's correlation id
# nvprof's unified-memory rows, as nsys names them (`[CUDA Unified Memory memcpy HtoD]`).
_UNIFIED = re.compile(r"^\[Unified Memory Memcpy (\w+)\]$", re.IGNORECASE)


# What nvprof says when a run does not end cleanly: `======== Error: Application received signal 11`, `==PID== Warning:
# Some profiling data are not recorded. ...`.
_TROUBLE = re.compile(r"^\s*(?:==\d+==|={4,}) (?:Error: (?P<error>\S(?:.*\S)?)|Warning: (?P<warning>Some profiling data are not recorded)\b(?:.*\S)?)\s*$")


def run_trouble(lines: list[str]) -> list[str]:
    """Return what nvprof said went wrong in the run (its Error lines, and its warning that data were not recorded),
    each once, in order."""
    said = []
    for line in lines:
        match = _TROUBLE.match(line)
        if match:
            text = (match.group("error") or match.group("warning")).strip().rstrip(".")
            if text not in said:
                said.append(text)
    return said


def trouble_note(lines: list[str]) -> str | None:
    """Return a note on what nvprof said went wrong, where it said anything: the results may be partial."""
    said = run_trouble(lines)
    return f"nvprof reported trouble in the run ({'; '.join(said)}): what it measured may be partial" if said else None


def looks_like_nvprof(head: str) -> bool:
    """True when the text holds nvprof's (or pgprof's) output."""
    return bool(_ANNOUNCE.search(head))


def _record(section: str, pct: float | None, total: float | None, calls: int | None, avg: float | None, low: float | None,
            high: float | None, name: str) -> tuple[str, dict[str, object]]:
    """Return the report a summary row belongs to and the row as a STATS record (times in ns)."""
    kind = section.lower()
    if kind.startswith("api"):
        report = "cuda_api_sum"
    elif kind.startswith("gpu activities") or kind == "profiling result":
        report = "cuda_gpu_mem_time_sum" if name.startswith("[CUDA ") else "cuda_gpu_kern_sum"
        pct = None  # a share of kernels and copies together, where nsys's summaries give each its own: recomputed
    else:
        report = kind  # OpenACC, OpenMP, ...: not read
    return report, {"time_pct": pct, "total_ns": total, "count": calls, "avg_ns": avg, "min_ns": low, "max_ns": high, "name": name}


def parse(path: str | Path) -> StatsReports:
    """Return nvprof's summary in the form of the `nsys stats` reports it matches (see the module's docstring)."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    result = StatsReports(producer="nvprof")
    records: dict[str, list[dict[str, object]]] = {}
    migrations: list[dict[str, object]] = []
    unread: set[str] = set()
    processes: list[str] = []
    faults: list[tuple[int, float | None]] = []  # GPU page fault groups: count, time (ns)
    trace_at: int | None = None
    section: str | None = None
    csv_units: list[str] | None = None
    csv_header: list[str] | None = None
    for number, line in enumerate(lines, start=1):
        heading = HEADING.match(line)
        if heading:
            section = heading.group("title").strip()
            csv_header = csv_units = None
            if section.lower() == "profiling result":
                processes.append(line.split("==")[1] if line.lstrip().startswith("==") else "")
            if section.lower() in _UNREAD_SECTIONS:
                unread.add(_UNREAD_SECTIONS[section.lower()])
            continue
        if _RANGE.match(line):
            # A range's own table (`NVTX result`): its `Range:` row is the range's CPU time, as nvtx_sum has it; the GPU
            # activities and API calls under it repeat the whole run's and are not added twice.
            section, csv_header, csv_units = "nvtx range", None, None
            continue
        if section == "nvtx range":
            row = SUMMARY_ROW.match(line)
            if row and (row.group("type") or "").lower() == "range":
                records.setdefault("nvtx_sum", []).append(
                    {"time_pct": None, "total_ns": time_ns(row.group("time")), "count": int(row.group("calls")), "avg_ns": time_ns(row.group("avg")),
                     "min_ns": time_ns(row.group("min")), "max_ns": time_ns(row.group("max")), "name": row.group("name"), "style": "PushPop"})
            continue
        if section is None:
            continue
        text = line.strip()
        if text in ("...", "…"):
            result.notes.append(f"line {number}: a literal '...' row (the table was cut by hand) was skipped")
            continue
        device = _DEVICE.match(line)
        if device and device.group("index").isdigit():
            result.device_names.setdefault(int(device.group("index")), device.group("name").strip())
            continue
        if section.lower() == "unified memory profiling result":
            row = _UM_ROW.match(line)
            direction = _UM_DIRECTIONS.get(row.group("name").lower()) if row else None
            if row and row.group("name").lower() == "gpu page fault groups":
                faults.append((int(row.group("count")), time_ns(row.group("time"))))
            elif row and direction:
                size = _bytes(row.group("total"))
                migrations.append({"count": int(row.group("count")), "total_ns": time_ns(row.group("time")), "name": direction,
                                   "total_mb": size / 1e6 if size is not None else None})
            continue
        if TRACE_HEADER.match(line) and section.lower() == "profiling result":
            if "Grid" in line or "Device" in line:
                trace_at = number
                break
            # --print-api-trace: the host's calls alone, with no GPU work to place them against.
            unread.add("API trace (--print-api-trace)")
            section = None
            continue
        if text.startswith('"') and ("Time(%)" in text or "Time (%)" in text):  # --csv: a header, then the units row
            csv_header = next(csv.reader([text]))
            continue
        if csv_header is not None and csv_units is None and re.match(r'^[^"]*%,', text):
            csv_units = next(csv.reader([text]))
            continue
        if csv_header is not None and csv_units is not None and text:
            cells = next(csv.reader(io.StringIO(text)))
            if len(cells) != len(csv_header):
                raise TraceFormatError(path, f"an nvprof CSV row has {len(cells)} fields for {len(csv_header)} columns",
                                       "pass the output as nvprof --csv printed it", line=number)
            _add_csv_row(path, number, section, csv_header, csv_units, cells, records)
            continue
        row = SUMMARY_ROW.match(line)
        if row and float_or_none(row.group("pct")) is not None:
            if row.group("type"):
                section = row.group("type")
            report, record = _record(section, float_or_none(row.group("pct")) or 0.0, time_ns(row.group("time")), int(row.group("calls")),
                                     time_ns(row.group("avg")), time_ns(row.group("min")), time_ns(row.group("max")), row.group("name"))
            records.setdefault(report, []).append(record)
    if trace_at is not None:
        _read_gpu_trace(path, lines, trace_at, result)
        if unread:
            result.notes.append(f"not read from nvprof's output: {', '.join(sorted(unread))}")
        trouble = trouble_note(lines)
        if trouble:
            result.notes.append(trouble)
        return result
    for report in ("cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_api_sum", "nvtx_sum"):
        if report in records:
            frame = stats_frame(records[report])
            result.reports[report] = _added_up(frame) if len(processes) > 1 else frame
    if migrations:
        _add_migrations(result, migrations)
    if faults:
        count, took = sum(c for c, _ in faults), sum(t or 0.0 for _, t in faults)
        result.notes.append(f"nvprof counted {count:,} GPU page fault groups ({took / 1e6:.2f} ms): the GPU touched managed memory "
                            "that was not on it")
    skipped = sorted(set(records) - set(result.reports))
    if skipped:
        result.notes.append(f"nvprof sections not read: {', '.join(skipped)}")
    if unread:
        result.notes.append(f"not read from nvprof's output: {', '.join(sorted(unread))}"
                            + ("; per-kernel metrics need Nsight Compute (Volta and later)" if any("result" in u for u in unread) else ""))
    if len(processes) > 1:
        result.notes.append(f"nvprof profiled {len(processes)} processes (--profile-child-processes): their summaries are added up by name")
    if not result.reports and any(line.strip() == "No kernels were profiled." for line in lines):
        said = run_trouble(lines)
        raise TraceFormatError(path, "nvprof profiled no kernels ('No kernels were profiled.'" + (f"; it also says: {'; '.join(said)}" if said else "")
                               + "): the application launched none while it was profiled",
                               "check that it runs and reaches its GPU work (a crash, an early exit, cudaProfilerStart never called with "
                               "--profile-from-start off), then profile it again")
    trouble = trouble_note(lines)
    if trouble:
        result.notes.append(trouble)
    if not result.reports:
        raise TraceFormatError(path, "nvprof output with no summary traceview reads (GPU activities or API calls)"
                               + (f"; it holds {' and '.join(sorted(unread))}" if unread else ""),
                               "run nvprof without --print-gpu-trace or --metrics (its default summary), or profile with nsys and pass the SQLite export")
    return result


def _added_up(frame: pl.DataFrame) -> pl.DataFrame:
    """Return the rows of several processes' summaries as one row per name: times and calls add, the extremes are
    the extremes of all, and a share of one process's time no longer holds."""
    merged = frame.group_by("name", maintain_order=True).agg(
        pl.col("total_ns").sum(), pl.col("count").sum(), pl.col("min_ns").min(), pl.col("max_ns").max())
    merged = merged.with_columns(avg_ns=pl.col("total_ns") / pl.col("count"))
    return stats_frame(merged.sort("total_ns", descending=True).to_dicts())


def _add_csv_row(path: Path, number: int, section: str, header: list[str], units: list[str], cells: list[str],
                 records: dict[str, list[dict[str, object]]]) -> None:
    """Add one `nvprof --csv` summary row: numbers in the unit its units row names for their column."""
    values = dict(zip(header, cells, strict=True))
    unit_of = dict(zip(header, units, strict=False))

    def time(column: str) -> float | None:
        text = values.get(column, "").strip()
        try:
            return float(text) * _NS_PER[unit_of.get(column, "ns").strip() or "ns"]
        except (ValueError, KeyError):
            return None

    try:
        pct = float(values.get("Time(%)", "").strip())
        calls = int(float(values.get("Calls", "").strip()))
    except ValueError:
        raise TraceFormatError(path, "an nvprof CSV row without a number in Time(%) or Calls", "pass the output as nvprof --csv printed it",
                               line=number) from None
    report, record = _record(values.get("Type", section).strip() or section, pct, time("Time"), calls, time("Avg"), time("Min"),
                             time("Max"), values.get("Name", "").strip())
    records.setdefault(report, []).append(record)


def _add_migrations(result: StatsReports, migrations: list[dict[str, object]]) -> None:
    """Add the unified-memory migrations to the memory summaries, as nsys names them, with their sizes."""
    times = [{"count": m["count"], "total_ns": m["total_ns"], "name": m["name"],
              "avg_ns": m["total_ns"] / m["count"] if m["total_ns"] is not None and m["count"] else None}  # type: ignore[operator]
             for m in migrations]
    sizes = [{"count": m["count"], "name": m["name"], "total_mb": m["total_mb"]} for m in migrations]
    for report, rows in (("cuda_gpu_mem_time_sum", times), ("cuda_gpu_mem_size_sum", sizes)):
        extra = stats_frame(rows)
        result.reports[report] = pl.concat([result.reports[report], extra]) if report in result.reports else extra
    result.notes.append("nvprof's unified-memory migrations are read as the copies `[CUDA Unified Memory memcpy HtoD]`/`DtoH`; "
                        "their sizes are nvprof's binary MB")


def _scaled(text: str, pattern: re.Pattern[str], per_unit: dict[str, float], unit: str | None) -> float | None:
    """A number with its unit suffix (`pattern`), or bare in the CSV units row's `unit`, times that unit's factor;
    `-` and anything else is none."""
    text = text.strip()
    match = pattern.match(text)
    if match:
        value = float_or_none(match.group("value"))
        return value * per_unit[match.group("unit")] if value is not None else None
    try:
        return float(text) * per_unit[unit] if unit in per_unit else None
    except ValueError:
        return None


def time_ns(text: str, unit: str | None = None) -> float | None:
    """A time in ns: `85.106ms`, `2.4e+03s`, or a bare number in `unit`."""
    return _scaled(text, _TIME, _NS_PER, unit)


def _bytes(text: str, unit: str | None = None) -> float | None:
    """A size in bytes (nvprof's KB and MB are binary): `128.00MB`, `0B`, or a bare number in `unit`."""
    return _scaled(text, _SIZE, _BYTES_PER, unit)


def trace_table(path: Path, lines: list[str], header_line: int) -> tuple[list[str], list[tuple[int, dict[str, str]]], dict[str, str]]:
    """Return a `--print-gpu-trace` table from its header (line `header_line`): its column names, its rows (line
    number, cells by column) up to the first blank line or heading, and the CSV units row's unit per column (none in
    the console, whose cells carry their units)."""
    header_text = lines[header_line - 1]
    if header_text.lstrip().startswith('"'):
        header = next(csv.reader([header_text.strip()]))
        units = next(csv.reader([lines[header_line].strip()])) if header_line < len(lines) else []
        units += [""] * (len(header) - len(units))
        body = []
        for number, line in enumerate(lines[header_line + 1:], start=header_line + 2):
            if not line.strip() or HEADING.match(line):
                break
            cells = next(csv.reader([line.strip()]))
            if len(cells) != len(header):
                raise TraceFormatError(path, f"an nvprof GPU-trace row has {len(cells)} fields for {len(header)} columns",
                                       "pass the output as nvprof --csv --print-gpu-trace printed it", line=number)
            body.append((number, dict(zip(header, cells, strict=True))))
        unit_of = dict(zip(header, units, strict=False))
    else:
        # Each column's values end where its name ends; the name column runs to the end of the line.
        names = [(m.group(0), m.end()) for m in SPACED_CELL.finditer(header_text)]
        header = [name for name, _ in names]
        body = []
        for number, line in enumerate(lines[header_line:], start=header_line + 1):
            if not line.strip() or HEADING.match(line) or line.lstrip().startswith("Regs:"):
                break
            fixed: dict[str, str] = {}
            begin = 0
            for position, (name, end) in enumerate(names):
                stop = end if position + 1 < len(names) else len(line)
                fixed[name] = line[begin:stop].strip()
                begin = stop
            body.append((number, fixed))
        unit_of = {}
    return header, body, unit_of


def trace_name(cells: dict[str, str]) -> tuple[str, str | None]:
    """Return a GPU-trace row's name without the ` [112]` the console puts after it, and that correlation id (None
    where the row has none)."""
    name = cells.get("Name", "").strip()
    correlation = CORRELATION.search(name)
    return (name[:correlation.start()].rstrip(), correlation.group(1)) if correlation else (name, None)


def _read_gpu_trace(path: Path, lines: list[str], header_line: int, result: StatsReports) -> None:
    """Read `--print-gpu-trace` from its header (line `header_line`) into cuda_gpu_trace's columns, and hand them to
    the reader of that report, so kernels and copies get the same timeline."""
    header, body, unit_of = trace_table(path, lines, header_line)
    if "Duration" not in header or "Name" not in header:
        raise TraceFormatError(path, "an nvprof GPU trace without its Duration or Name column: its header looks damaged",
                               "pass the output as nvprof --print-gpu-trace printed it", line=header_line)
    devices: dict[str, int] = {}
    rows = [["Start (ns)", "Duration (ns)", "CorrId", "Bytes (MB)", "SrcMemKd", "DstMemKd", "Device", "Name"]]
    for _, cells in body:
        name, correlation = trace_name(cells)
        unified = _UNIFIED.match(name)
        if unified:
            name = f"[CUDA Unified Memory memcpy {unified.group(1)}]"
        elif name.lower().startswith("[unified memory"):
            continue  # page faults: the GPU's are handled while its kernels run, the CPU's on the host; neither is GPU work
        start, duration = time_ns(cells.get("Start", ""), unit_of.get("Start")), time_ns(cells.get("Duration", ""), unit_of.get("Duration"))
        size = _bytes(cells.get("Size", ""), unit_of.get("Size"))
        if size is None and unified:  # a migration's size is in the `Unified Memory` column
            size = _bytes(cells.get("Unified Memory", ""), unit_of.get("Unified Memory"))
        device = cells.get("Device", "").strip()
        numbered = re.match(r"^(.*\S)\s+\((\d{1,18})\)$", device)  # `Tesla T4 (0)`; older nvprof cut it to `GeForce GTX 107`
        if numbered:
            device, index = numbered.group(1), int(numbered.group(2))
            devices.setdefault(device, index)
        else:
            index = devices.setdefault(device, len(devices)) if device and device != "-" else 0
        rows.append(["" if start is None else repr(start), "" if duration is None else repr(duration),
                     correlation or cells.get("Correlation_ID", ""),
                     "" if size is None else repr(size / 1e6), cells.get("SrcMemType", "").strip().strip("-"),
                     cells.get("DstMemType", "").strip().strip("-"), f"{device} ({index})" if device and device != "-" else "", name])
    store_per_launch(path, "cuda_gpu_trace", rows, header_line + 1, result, report_label="nvprof's GPU trace (--print-gpu-trace)")
    result.whole_timeline = True
    if len(devices) > 1:
        result.notes.append(f"nvprof's GPU trace names {len(devices)} devices; each is its own GPU in the timeline")


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    return Parsed(parse(path), "nvprof", tuple(cut_notes(options)))


FORMATS = (
    Format("nvprof", "nsys-stats", _read, lambda head: head.is_text and looks_like_nvprof(head.text), order=70,
           # `Device "GeForce 840M (0)"` names the GPU of the tables after it: a cut inside it loses that name.
           data_line=re.compile(r"\d|==\d+==|Time|Name|Type|-{3}|^\"|" + line_of("Device"))),
)
