"""Nsight Compute summaries (`ncu --print-summary per-kernel|per-gpu`, console or `--csv`) → KERNELS rows.

A summary has one block per kernel shape (name, grid, block, device) with the Minimum, Maximum and Average of each
metric over its invocations, not one block per launch. The grammar, from the real outputs named in
tests/fixtures/found/PROVENANCE.md:

- CSV (2025): `"Process ID","Process Name","Host Name","Kernel Name","Block Size","Grid Size","Device","CC",
  "Invocations","Section Name","Metric Name","Metric Unit","Minimum","Maximum","Average"`, one row per metric.
- Console, after `[PID] process@host` (and, per GPU, a `Device N` line): a kernel line, repeated before each section
  in some versions —
  2022-2023 `name, Block Size 256, Grid Size 32[, Device 0], 1 invocations` (raw metric names in the tables);
  2025 `name (4096, 1, 1)x(256, 1, 1), Device 0, CC 11.0, Invocations 14` (display labels) —
  then `Section: <name>` blocks whose tables have five columns (name, unit, minimum, maximum, average) between dashed
  rules, with the `Metric Name … Average` header above or between them.

Each kernel shape becomes as many KERNELS rows as it had invocations, each with the shape's averages: the ranking's
launch counts and time sums then come out right; the per-launch spread is not in a summary, and a note says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers.base import Format, Parsed, ReadOptions, cut_notes
from traceview.parsers.ncu_console import (
    PROCESS_LINE,
    SECTION_LINE,
    clean_value,
    console_further_in,
    lines_use_decimal_comma,
    row_columns,
    table_columns,
)
from traceview.parsers.ncu_csv import (
    DECIMAL_COMMA_NOTE,
    LOCALE_SAMPLE_ROWS,
    _assemble,
    cells_use_decimal_comma,
    point_decimal,
)

SUMMARY_HEADER_PREFIX = b'"Process ID",'
_CSV_REQUIRED = ("Kernel Name", "Invocations", "Metric Name", "Metric Unit", "Average")
_CSV_IDENTITY = {"Process ID": "process_id", "Process Name": "process_name", "Host Name": "host_name", "Kernel Name": "kernel_name",
                 "Block Size": "block_size", "Grid Size": "grid_size", "Device": "device_index", "CC": "compute_capability"}
# ncu replays every launch tens of times; no summary of a real run counts more launches than this.
MAX_INVOCATIONS = 250_000
_HINT = "pass the summary exactly as `ncu --print-summary per-kernel` printed it (or export the launches: ncu -i report.ncu-rep --csv --page details)"

_SHAPE = r"\(\d+, \d+, \d+\)|\d+"
_KERNEL_2022 = re.compile(
    rf"^\s*(?P<name>\S.*?), Block Size (?P<block>{_SHAPE}), Grid Size (?P<grid>{_SHAPE})(?:, Device (?P<device>\d{{1,18}}))?, (?P<count>\d{{1,18}}) invocations\s*$")
_KERNEL_2025 = re.compile(
    r"^\s*(?P<name>\S.*?) \((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\)(?:, Device (?P<device>\d{1,18}))?(?:, CC (?P<cc>\d+\.\d+))?,"
    r" Invocations (?P<count>\d{1,18})\s*$")
# `Device 0` (2022-2023), `Device 0, CC 9.0` (2024+), above each GPU's kernels in a per-gpu summary.
_DEVICE = re.compile(r"^\s*Device (?P<device>\d{1,18})(?:, CC (?P<cc>\d+\.\d+))?\s*$")
_DASHES = re.compile(r"^\s*-{3,}( +-{3,}){4,}\s*$")  # five columns
_HEADER = re.compile(r"^\s*Metric Name\s+Metric Unit\s+Minimum\s+Maximum\s+Average\s*$")


def _kernel_line(line: str) -> re.Match[str] | None:
    if "nvocations" not in line:
        return None
    return _KERNEL_2022.match(line) or _KERNEL_2025.match(line)


def looks_like_summary_console(text: str) -> bool:
    """True when the text holds an ncu summary kernel line (`…, N invocations` or `…, Invocations N`) followed by a
    `Section:` block."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if _kernel_line(line):
            return any(SECTION_LINE.match(following) for following in lines[index + 1:index + 8])
    return False


def find_summary_header(path: Path) -> int | None:
    """Return the 0-based line of a `--csv --print-summary` header (`"Process ID",…,"Invocations",…,"Average"`), or None."""
    with path.open("rb") as handle:
        for index, line in enumerate(handle):
            if index > 10_000:
                return None
            if line.startswith(SUMMARY_HEADER_PREFIX) and b'"Invocations"' in line and b'"Average"' in line:
                return index
    return None


def repeat_invocations(frame: pl.DataFrame, invocations: pl.Series, path: Path, notes: list[str] | None,
                       summary: str = "an ncu --print-summary output", hint: str = _HINT) -> pl.DataFrame:
    """Return one row per invocation (the shape's averages each time), numbered from 0 as ncu numbers launches;
    `summary` names the output in the note, `hint` is the fix when the counts look damaged."""
    counts = invocations.fill_null(1).clip(lower_bound=1).to_numpy()
    total = int(counts.sum())
    if total > MAX_INVOCATIONS:
        raise TraceFormatError(path, f"the summary counts {total:,} invocations, more than any profiler replays in one run: the counts look damaged",
                               hint)
    rows = frame.select(pl.all().gather(np.repeat(np.arange(frame.height), counts)))
    if notes is not None:
        notes.append(f"{summary}: {frame.height} kernel shape(s) over {total} invocation(s); each invocation is given its "
                     "shape's averages (the summary has no per-launch values, so medians and spreads per kernel are those of the averages)")
    return rows.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("launch_id"))


def _kernels(long: pl.DataFrame, identity: pl.DataFrame, path: Path, notes: list[str] | None) -> pl.DataFrame:
    """Return KERNELS rows from metric rows (shape, metric, unit, average) and one identity row per shape."""
    if identity.height == 0:
        raise TraceFormatError(path, "no kernel in this Nsight Compute summary", _HINT)
    if long.height == 0:
        raise TraceFormatError(path, f"{identity.height} kernel line(s) but no metric tables under them: the output looks cut or filtered", _HINT)
    counts = identity.select("launch_id", pl.col("invocations").cast(pl.Int64, strict=False))
    identity = identity.drop("invocations")
    if "process_id" in identity.columns:
        # Shapes are keyed by (launch_id, process_id) as launches are; a shape before any `[PID]` line has process "".
        identity = identity.with_columns(pl.col("process_id").fill_null(""))
        long = long.join(identity.select("launch_id", "process_id"), on="launch_id", how="left")
    frame = _assemble(long, identity, None, notes)
    invocations = frame.select(pl.col("launch_id").cast(pl.String)).join(counts, on="launch_id", how="left")["invocations"]
    return repeat_invocations(frame, invocations, path, notes)


def parse_csv(path: str | Path, notes: list[str] | None = None) -> pl.DataFrame:
    """Return the KERNELS rows of a `ncu --csv --print-summary` export (durations in ns, bytes, Hz)."""
    path = Path(path)
    line = find_summary_header(path)
    if line is None:
        raise TraceFormatError(path, "no `ncu --csv --print-summary` header (\"Process ID\",…,\"Invocations\",…,\"Average\")", _HINT)
    try:
        frame = pl.read_csv(path, skip_lines=line, infer_schema=False, truncate_ragged_lines=True, comment_prefix="==",
                            encoding="utf8-lossy", glob=False)
    except (pl.exceptions.PolarsError, OSError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TraceFormatError(path, f"cannot read the CSV after the header: {first}", _HINT) from error
    missing = [c for c in _CSV_REQUIRED if c not in frame.columns]
    if missing:
        raise TraceFormatError(path, f"the header lacks the column(s) {', '.join(repr(m) for m in missing)}", _HINT, line=line + 1)
    frame = frame.filter(pl.col("Kernel Name").is_not_null() & pl.col("Metric Name").is_not_null())
    shape = [name for name in _CSV_IDENTITY if name in frame.columns and name not in ("Process Name", "Host Name", "CC")]
    numbered = frame.select(shape).unique(maintain_order=True).with_row_index("launch_id").with_columns(pl.col("launch_id").cast(pl.String))
    frame = frame.join(numbered, on=shape, how="left", nulls_equal=True)
    identity = frame.group_by("launch_id", maintain_order=True).agg(
        *[(pl.col(name).str.replace(",", ".", literal=True) if name == "CC" else pl.col(name)).first().alias(alias)  # `11,0` in some locales
          for name, alias in _CSV_IDENTITY.items() if name in frame.columns],
        pl.col("Invocations").str.replace_all(r"[,. ]", "").cast(pl.Int64, strict=False).max().alias("invocations"))
    long = frame.select("launch_id", pl.col("Metric Name").alias("metric"), pl.col("Metric Unit").fill_null("").alias("unit"),
                        pl.col("Average").alias("value"))
    if long.height and cells_use_decimal_comma(long.head(LOCALE_SAMPLE_ROWS).select("value")):
        long = long.with_columns(point_decimal(pl.col("value")))
        if notes is not None:
            notes.append(DECIMAL_COMMA_NOTE)
    return _kernels(long, identity, path, notes)


def _row(line: str, spans: list[tuple[int, int]]) -> tuple[str, str, str] | None:
    """Return (name, unit, average) of a five-column table row."""
    spans = row_columns(line, spans)
    name = line[:spans[1][0]].strip()
    unit = line[spans[1][0]:spans[2][0]].strip()
    average = line[spans[4][0]:].strip()
    return (name, unit, average) if name and average else None


def parse_console(path: str | Path, notes: list[str] | None = None) -> pl.DataFrame:
    """Return the KERNELS rows of a console `ncu --print-summary per-kernel|per-gpu` output."""
    path = Path(path)
    lines = [line.rstrip("\r") for line in path.read_text(encoding="utf-8", errors="replace").split("\n")]
    decimal_comma = lines_use_decimal_comma(lines)
    shapes: dict[tuple[object, ...], dict[str, object]] = {}
    metrics: list[dict[str, str]] = []
    process: dict[str, str] = {}
    device: str | None = None
    device_cc: str | None = None
    current: str | None = None
    spans: list[tuple[int, int]] = []
    for line in lines:
        kernel = _kernel_line(line)
        if kernel:
            groups = kernel.groupdict()
            grid, block = (f"({g})" if "," in g and not g.startswith("(") else g for g in (groups["grid"], groups["block"]))
            shape_device = groups.get("device") or device
            key = (process.get("pid"), shape_device, groups["name"].strip(), grid, block)
            shape = shapes.setdefault(key, {
                "launch_id": str(len(shapes)), "process_id": process.get("pid"), "process_name": process.get("process"),
                "host_name": process.get("host"), "kernel_name": groups["name"].strip(), "grid_size": grid, "block_size": block,
                "device_index": shape_device, "compute_capability": groups.get("cc") or device_cc, "invocations": groups["count"]})
            current, spans = str(shape["launch_id"]), []
            continue
        owner = PROCESS_LINE.match(line)
        if owner:
            process, device, device_cc, current = owner.groupdict(), None, None, None
            continue
        on_device = _DEVICE.match(line)
        if on_device:
            device, device_cc, current = on_device.group("device"), on_device.group("cc"), None
            continue
        if current is None or _HEADER.match(line):
            continue
        if SECTION_LINE.match(line) or not line.strip():
            spans = []
            continue
        if _DASHES.match(line):
            spans = table_columns(line)
            continue
        row = _row(line, spans) if spans else None
        if row:
            name, unit, average = row
            metrics.append({"launch_id": current, "metric": name, "unit": unit, "value": clean_value(average, decimal_comma)})
    if decimal_comma and notes is not None:
        notes.append(DECIMAL_COMMA_NOTE)
    identity = pl.DataFrame(list(shapes.values()), schema={key: pl.String for key in (
        "launch_id", "process_id", "process_name", "host_name", "kernel_name", "grid_size", "block_size", "device_index", "compute_capability",
        "invocations")})
    if identity["process_id"].null_count() == identity.height:
        identity = identity.drop("process_id", "process_name", "host_name")
    long = pl.DataFrame(metrics, schema={"launch_id": pl.String, "metric": pl.String, "unit": pl.String, "value": pl.String})
    return _kernels(long, identity, path, notes)


def profiler_hint(path: str | Path, csv: bool) -> str:
    """Return which Nsight Compute generation printed this summary."""
    if csv:
        return "Nsight Compute 2023 or newer, --print-summary CSV"
    with Path(path).open("rb") as handle:
        head = handle.read(1 << 20).decode("utf-8", errors="replace")
    era = "2024 or newer" if re.search(r", Invocations \d+", head) else "2022-2023"
    return f"Nsight Compute {era}, --print-summary console output"


def _read_csv(path: Path, found: object, options: ReadOptions) -> Parsed:
    notes = cut_notes(options)
    kernels = parse_csv(path, notes)
    return Parsed(kernels, profiler_hint(path, True), tuple(notes))


def _read_console(path: Path, found: object, options: ReadOptions) -> Parsed:
    notes = cut_notes(options)
    kernels = parse_console(path, notes)
    return Parsed(kernels, profiler_hint(path, False), tuple(notes))


FORMATS = (
    Format("ncu-console-summary", "kernels", _read_console, lambda head: head.is_text and looks_like_summary_console(head.text), order=40,
           late_sniff=lambda head: console_further_in(head) == "ncu-console-summary", data_line=re.compile(r"\S"), joinable=True),
    Format("ncu-csv-summary", "kernels", _read_csv, lambda head: head.is_text and find_summary_header(head.path) is not None, order=90,
           data_line=re.compile(r'^"'), joinable=True),
)
