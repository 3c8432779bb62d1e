"""`nsys stats` reports → one frame per report (schema STATS), from CSV files or the console table form.

Reports recognised by their columns: kernel summary (`cuda_gpu_kern_sum`, old `gpukernsum`), CUDA API summary
(`cuda_api_sum`), GPU memory time and size summaries (`cuda_gpu_mem_time_sum`, `cuda_gpu_mem_size_sum`), NVTX summary
(`nvtx_sum`), the per-launch GPU and kernel-execution traces (`cuda_gpu_trace`, `cuda_kern_exec_trace`), and the
by-shape and combined summaries (`cuda_gpu_kern_gb_sum`, `cuda_api_gpu_sum`). Header spellings of every era
(`Time (%)`/`Time(%)`, `Avg (ns)`/`Average`, `Instances`/`Num Calls`/`Calls`/`Count`/`Operations`) map onto one set
of column names. The console form (`nsys profile --stats=true`) is
split on the column boundaries its dashed underline gives, with thousands separators removed. `--format tsv` is read
like CSV, and `--format json` (a JSON array with one object per row, keyed by the same column headers) as the table
its keys make. Times printed in another unit (`--timeunit us|ms|sec`, header `Total Time (us)`) are converted to ns.

`nsys analyze` (the expert-system rules, alone or after the stats reports in one capture) is read too: each rule's table
(`cuda_memcpy_async`, `cuda_memcpy_sync`, `cuda_memset_sync`, `cuda_api_sync`, `gpu_gaps`, `gpu_time_util`) as rows of
RULE_ROWS, and a rule that found nothing (`There were no problems detected ...`) or was skipped (`SKIPPED: ...`) as
that outcome.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers.base import Format, Parsed, ReadOptions, cut_notes
from traceview.parsers.nsys_sqlite import COPY_KINDS, NSYS_MEMOPS
from traceview.parsers.schema import conform, widened

STATS = pl.Schema({
    "time_pct": pl.Float64, "total_ns": pl.Float64, "count": pl.Int64, "avg_ns": pl.Float64, "med_ns": pl.Float64,
    "min_ns": pl.Float64, "max_ns": pl.Float64, "stddev_ns": pl.Float64, "name": pl.String, "style": pl.String,
    # cuda_gpu_mem_size_sum: bytes moved per operation, in nsys's MB (10^6 bytes), three decimals.
    "total_mb": pl.Float64, "avg_mb": pl.Float64,
    # cuda_api_gpu_sum: which of API calls, kernels and memory operations a row is.
    "category": pl.String,
    # nvtx_gpu_proj_sum, whose times (total_ns, avg_ns, ...) are each range's projection onto the GPU: from the start
    # of its first GPU operation to the end of its last. `range_ns` is the ranges' own CPU time, `gpu_ops` the GPU
    # operations they launched, `avg_level` their mean nesting depth (0 = outermost).
    "range_ns": pl.Float64, "gpu_ops": pl.Float64, "avg_level": pl.Float64,
})
# Kernels one by one, from the per-launch reports (cuda_gpu_trace, cuda_kern_exec_trace): enough of a timeline for the
# launch-bound test. `call_start_ns` and `launch_call_ns` are the start and CPU time of the launch call (exec trace
# only); `graph_node_id` is set (to 0) for kernels a graph launch replayed, so they are not counted as launched one by one.
STATS_LAUNCHES = pl.Schema({
    "device_id": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.String, "call_start_ns": pl.Int64,
    "launch_call_ns": pl.Float64, "graph_node_id": pl.Int64,
})
# One row of an `nsys analyze` rule's table (the rule's query columns; a rule fills those it has): a copy, memset,
# synchronization call, idle gap or low-use stretch. `bytes` from `Bytes (MB)` (nsys's MB, 10^6 bytes).
RULE_ROWS = pl.Schema({
    "duration_ns": pl.Float64, "start_ns": pl.Float64, "in_use_pct": pl.Float64, "bytes": pl.Float64, "src_kind": pl.String,
    "dst_kind": pl.String, "memory_kind": pl.String, "pid": pl.Int64, "tid": pl.Int64, "device_id": pl.Int64, "stream_id": pl.Int64,
    "api_name": pl.String,
})
# The rules whose tables are read; nsys lists at most 50 rows of each by default (`--rule NAME:rows=-1` for all).
EXPERT_RULES = ("cuda_memcpy_async", "cuda_memcpy_sync", "cuda_memset_sync", "cuda_api_sync", "gpu_gaps", "gpu_time_util")
_RULE_KINDS = (*EXPERT_RULES, "cuda_memcpy")
RULE_ROW_LIMIT = 50
_RULE_COLUMNS = {
    "duration (ns)": "duration_ns", "start (ns)": "start_ns", "in-use (%)": "in_use_pct", "src kind": "src_kind", "dst kind": "dst_kind",
    "memory kind": "memory_kind", "pid": "pid", "tid": "tid", "device id": "device_id", "stream id": "stream_id", "api name": "api_name",
}
_BYTES_HEADER = re.compile(r"^bytes(?: \((b|kb|mb|gb|kib|mib|gib)\))?$")
_BYTES_PER_UNIT = {None: 1.0, "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30}
# What a rule prints when its table would be empty, or when the export lacks what it needs.
_NO_PROBLEM = re.compile(r"^There (were|was) no problems? detected")
_SKIPPED = re.compile(r"^SKIPPED: (.*)")
_COLUMNS = {
    "time (%)": "time_pct", "time(%)": "time_pct",
    "total time (ns)": "total_ns", "total time": "total_ns",
    "instances": "count", "num calls": "count", "calls": "count", "count": "count", "operations": "count",
    "avg (ns)": "avg_ns", "average (ns)": "avg_ns", "average": "avg_ns",
    "med (ns)": "med_ns", "median (ns)": "med_ns",
    "min (ns)": "min_ns", "minimum (ns)": "min_ns", "minimum": "min_ns",
    "max (ns)": "max_ns", "maximum (ns)": "max_ns", "maximum": "max_ns",
    "stddev (ns)": "stddev_ns", "stddev": "stddev_ns",
    "name": "name", "operation": "name", "range": "name", "style": "style",
    "total (mb)": "total_mb", "avg (mb)": "avg_mb", "category": "category",
    "total proj time (ns)": "total_ns", "proj avg (ns)": "avg_ns", "proj med (ns)": "med_ns", "proj min (ns)": "min_ns",
    "proj max (ns)": "max_ns", "proj stddev (ns)": "stddev_ns", "range instances": "count", "total range time (ns)": "range_ns",
    "total gpu ops": "gpu_ops", "avg range lvl": "avg_level",
}
_EXECUTING = re.compile(r"^\[\d+/\d+\] Executing '(\w+)' stats report")
# Lines that name the report printed next: `nsys profile --stats=true`'s `[5/8] Executing 'cuda_api_sum' stats report`,
# `nsys stats`'s `Processing [x.sqlite] with [.../reports/cuda_api_sum.py]...` and its title ` ** CUDA API Summary
# (cuda_api_sum):`. The name decides over the columns: osrt_sum has the very columns of cuda_api_sum.
# The script's name from a word's start only: `(\w+)` retried at each step of the lazy path is quadratic in a long name.
_PROCESSING = re.compile(r"^(?:Processing \[.*?\] with|Exporting) \[.*?(?<!\w)(\w+)\.py\b")
_TITLE = re.compile(r"^\*\* .*\((\w+)\):$")
# `nsys analyze` runs the scripts of its `rules` folder: `Processing [x.sqlite] with [.../rules/gpu_gaps.py]...`.
_RULE_NAMED = re.compile(r"^Processing \[.*?\] with \[.*?[/\\]rules[/\\](\w+)\.py\]")


# The earliest `--stats=true` (≈2019.5-2020) named its tables in prose (formats.md §2.1): `CUDA API Statistics
# (nanoseconds)`, `Operating System Runtime API Statistics (nanoseconds)`, ...
_OLD_TITLES = (("CUDA API Statistics", "cuda_api_sum"), ("CUDA Kernel Statistics", "cuda_gpu_kern_sum"),
               ("CUDA Memory Operation Statistics (by time", "cuda_gpu_mem_time_sum"),
               ("CUDA Memory Operation Statistics (by size", "cuda_gpu_mem_size_sum"),
               ("Operating System Runtime API Statistics", "osrt_sum"), ("NVTX Push-Pop Range Statistics", "nvtx_sum"))


def _report_named(line: str) -> str | None:
    """Return the report a line announces (see above), or None."""
    text = line.strip()
    match = _EXECUTING.match(text) or _PROCESSING.match(text) or _TITLE.match(text)
    if match:
        return match.group(1)
    return next((name for title, name in _OLD_TITLES if text.startswith(title)), None)
# `nsys stats --timeunit` prints times in the unit it names in each header: `Avg (us)`, `Total Time (ms)`.
# nsys 2020 spelled them `nsec`, `usec`, `msec` and `sec`, with no space before the bracket (`Duration(nsec)`).
_UNITS = r"ns|us|\u00b5s|\u03bcs|ms|s|sec|nsec|usec|msec"
_TIME_UNIT = re.compile(rf"\(({_UNITS})\)\s*$", re.IGNORECASE)
_NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "\u00b5s": 1e3, "\u03bcs": 1e3, "ms": 1e6, "s": 1e9, "sec": 1e9, "nsec": 1.0, "usec": 1e3, "msec": 1e6}


def _in_ns(column: str) -> tuple[str, float]:
    """Return a header spelled with `(ns)` and the factor that turns its values into ns (1 when already ns)."""
    match = _TIME_UNIT.search(column)
    if match is None:
        return column, 1.0
    return column[:match.start()].rstrip() + " (ns)", _NS_PER_UNIT[match.group(1).lower()]


@dataclass
class StatsReports:
    """The reports found in one file, by report name, and what was skipped."""

    reports: dict[str, pl.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # reports in the file that are not read
    launches: pl.DataFrame | None = None  # STATS_LAUNCHES, where a per-launch report was read
    # cuda_gpu_trace lists every kernel and copy of the run on each GPU: with its copies (nsys_sqlite.NSYS_MEMOPS), a
    # complete enough timeline for the export's busy %, breakdown and gaps (their causes need the CUDA API table).
    copy_launches: pl.DataFrame | None = None
    whole_timeline: bool = False
    device_names: dict[int, str] = field(default_factory=dict)  # cuda_gpu_trace's Device column: `NAME (N)` by N
    rules: dict[str, pl.DataFrame] = field(default_factory=dict)  # nsys analyze: RULE_ROWS by rule
    # nsys analyze rules that printed no table: "no problems" (with nsys's sentence) or "skipped: <its reason>".
    rule_outcomes: dict[str, str] = field(default_factory=dict)
    producer: str = "nsys stats"  # the tool whose summaries these are (nvprof's summary is read into this form too)


def report_kind(columns: list[str], hint: str | None = None) -> str | None:
    """Return the report name for a header (the console's `Executing` line wins when given)."""
    lowered = [_in_ns(c.strip().lower())[0] for c in columns]
    if hint:
        return {"gpukernsum": "cuda_gpu_kern_sum", "cudaapisum": "cuda_api_sum", "gpumemtimesum": "cuda_gpu_mem_time_sum",
                "gpumemsizesum": "cuda_gpu_mem_size_sum", "nvtxsum": "nvtx_sum", "gputrace": "cuda_gpu_trace",
                "kernexectrace": "cuda_kern_exec_trace", "osrtsum": "osrt_sum", "nvtxkernsum": "nvtx_kern_sum",
                "kernexecsum": "cuda_kern_exec_sum", "cudaapitrace": "cuda_api_trace", "gpusum": "cuda_gpu_sum"}.get(hint, hint)
    rule = _rule_of_columns(lowered)
    if rule is not None:
        return rule
    if "start (ns)" in lowered and "duration (ns)" in lowered:
        return "cuda_gpu_trace"
    if "kernel dur (ns)" in lowered and "kernel name" in lowered:
        return "cuda_kern_exec_trace"
    # Per-range projections of kernels onto NVTX ranges: they carry a Style column too but are not the range summary.
    if "kern inst" in lowered or ("nvtx range" in lowered and "kernel name" in lowered):
        return "nvtx_kern_sum"
    if any(c.startswith("total proj time") for c in lowered):
        return "nvtx_gpu_proj_sum"
    if "range" in lowered or "style" in lowered:
        return "nvtx_sum"
    if "category" in lowered and "operation" in lowered:
        return "cuda_api_gpu_sum"
    if "gridxyz" in lowered and "name" in lowered:
        return "cuda_gpu_kern_gb_sum"
    if "operation" in lowered and any(c.startswith("total time") for c in lowered):
        return "cuda_gpu_mem_time_sum"
    if "operation" in lowered and "total (mb)" in lowered:
        return "cuda_gpu_mem_size_sum"
    if "instances" in lowered and "name" in lowered:
        return "cuda_gpu_kern_sum"
    if ("num calls" in lowered or "calls" in lowered) and "name" in lowered:
        return "cuda_api_sum"
    return None


def _rule_of_columns(lowered: list[str]) -> str | None:
    """Return the `nsys analyze` rule a header (lower case, times as `(ns)`) belongs to, or None. The two memcpy rules
    share their columns: `cuda_memcpy` stands for either until the rows' API names tell (_store_rule)."""
    if lowered and lowered[0] == "row#":
        return "gpu_time_util" if "in-use (%)" in lowered else "gpu_gaps"
    if not lowered or lowered[0] != "duration (ns)" or "api name" not in lowered:
        return None
    if "src kind" in lowered:
        return "cuda_memcpy"
    return "cuda_memset_sync" if "memory kind" in lowered else "cuda_api_sync"


# The reports read; any other (osrt_sum, nvtx_kern_sum, um_sum, ...) in the same file is skipped with a note.
READ_REPORTS = ("cuda_gpu_kern_sum", "cuda_gpu_kern_gb_sum", "cuda_gpu_trace", "cuda_kern_exec_trace", "cuda_api_sum", "cuda_api_gpu_sum",
                "cuda_gpu_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "nvtx_sum", "nvtx_gpu_proj_sum")
# nvtx_gpu_proj_sum's header opens with the range's name, not with `Time (%)` as the other summaries do.
_PROJECTION_HEADER = re.compile(r'^"?Range"?\s*[,\t|]?\s*"?Style"?\s*[,\t|]?\s*"?Total Proj Time \(')


def looks_like_stats(head: str) -> bool:
    """True when the text holds an `nsys stats` CSV header or console table, or `nsys analyze` output."""
    for line in head.splitlines()[:200]:
        text = line.strip()
        if _EXECUTING.match(text) or _RULE_NAMED.match(text):
            return True
        cells = text.strip("|").strip().lstrip('"')  # `--format table` rows are framed by `|`; a quoted CSV header
        if cells.startswith(("Time (%)", "Time(%)")) and "Total Time" in cells:
            return True
        if cells.startswith("Total (MB)") and "Operation" in cells:
            return True
        if _TRACE_HEADER.match(text) or _PROJECTION_HEADER.match(cells) or _RULE_CSV_HEADER.match(text):
            return True
    return bool(_JSON_TABLE.search(head))


# `nsys stats --format json`: `[{"Time (%)": 45.2, "Total Time (ns)": 1234, ...}, ...]`, one object per row, keyed
# (in column order) by the headers the CSV form prints; indented or on one line.
_JSON_TABLE = re.compile(r'^\s*\[\s*\{\s*"(?:Time ?\(%\)|(?:API )?Start \(\w+\)|Total \(MB\)|Range)"\s*:', re.MULTILINE)


# The per-launch traces' header: CSV (`Start (ns),Duration (ns),...`) or the console's columns, as `nsys stats -r
# cuda_gpu_trace` and `nsys nvprof --print-gpu-trace` print them (2020's `Start(sec)  Duration(nsec)` too).
_TRACE_HEADER = re.compile(rf'^"?(API )?Start ?\(({_UNITS})\)"?([,\t]| {{2,}})"?(API )?Dur(ation)? ?\(')
# An `nsys analyze --format csv` table saved without nsys's banners: the copy and synchronization rules' header, or
# the gap and utilization rules' (`Row#` first).
_RULE_CSV_HEADER = re.compile(rf'^"?(Duration \(({_UNITS})\)"?[,\t].*API Name|Row#"?[,\t].*Duration \(({_UNITS})\))')


def _number(text: str) -> float | None:
    """A number cell (thousands separators allowed), or None for text, `nan`, `inf` and overflowing values."""
    cleaned = text.strip().replace(",", "")
    if not cleaned.isascii():  # float() also reads fullwidth and other Unicode digits
        return None
    try:
        number = float(cleaned)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def stats_frame(records: list[dict[str, object]]) -> pl.DataFrame:
    """Return the records as a STATS frame; columns a report lacks are null."""
    rows = [{name: record.get(name) for name in STATS} for record in records]
    for row in rows:  # a count beyond 64 bits (a damaged file) is unknown
        if row["count"] is not None:
            row["count"] = int(row["count"]) if abs(row["count"]) < 2**63 else None  # type: ignore[call-overload, arg-type]
    return pl.DataFrame(rows, schema=STATS)


def _frame(path: Path, columns: list[str], rows: list[list[str]], first_line: int, notes: list[str]) -> pl.DataFrame:
    in_ns = [_in_ns(c.strip().lower()) for c in columns]
    names = [_COLUMNS.get(header) for header, _ in in_ns]
    scales = [scale for _, scale in in_ns]
    _note_time_unit(columns, notes)
    if "name" not in names:
        raise TraceFormatError(path, "a stats table has no Name column: its header looks damaged", "pass the report as nsys stats wrote it",
                               line=max(1, first_line - 2))
    records = []
    for offset, row in enumerate(rows):
        if [cell.strip() for cell in row] in (["..."], ["…"]):
            notes.append(f"line {first_line + offset}: a literal '...' row (the table was cut by hand) was skipped")
            continue
        if len(row) < len(columns) and offset == len(rows) - 1 and offset:
            # A copy cut short (a report that quotes the table up to a character limit) ends inside its last row.
            notes.append(f"line {first_line + offset}: the table's last row has {len(row)} of its {len(columns)} fields "
                         "(cut short?) and was left out")
            continue
        if len(row) != len(columns):
            raise TraceFormatError(path, f"row has {len(row)} fields for {len(columns)} columns", "pass the report as nsys stats wrote it",
                                   line=first_line + offset)
        record: dict[str, object] = {}
        for name, scale, cell in zip(names, scales, row, strict=True):
            if name in ("name", "style", "category"):
                record[name] = cell.strip()
            elif name is not None:
                value = _number(cell)
                record[name] = value * scale if value is not None and name.endswith("_ns") else value
        records.append(record)
    return stats_frame(records)


def parse(path: str | Path) -> StatsReports:
    """Return every report in a `nsys stats` CSV file or console capture."""
    path = Path(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    result = StatsReports()
    lines = text.splitlines()
    console = any(_EXECUTING.match(line.strip()) for line in lines) or any(_DASHES.match(line) for line in lines)
    if _JSON_TABLE.search(text):
        _parse_json(path, text, result)
    elif any(_TABLE_BORDER.match(line) for line in lines):
        _parse_table(path, lines, result)
    elif console:
        _parse_console(path, lines, result)
    else:
        _parse_csv(path, lines, result)
    _read_rule_outcomes(lines, result)
    if not result.reports and not result.rules and not result.rule_outcomes:
        others = sorted(set(result.skipped))
        problem = f"no report traceview reads (found {', '.join(others)})" if others else "no nsys stats table found"
        raise TraceFormatError(path, problem, f"pass one of {', '.join(READ_REPORTS)}: nsys stats --format csv --report cuda_gpu_kern_sum")
    if result.skipped:
        result.notes.append(f"reports not read: {', '.join(sorted(set(result.skipped)))}")
    return result


_TABLE_BORDER = re.compile(r"^\s*\+-+(\+-+)+\+\s*$")
# The console's underline of a header: a run of dashes per column (two for a narrow `ID`, three for `Ctx`).
_DASHES = re.compile(r"^\s*-{2,}(\s+-{2,})+\s*$")


def _read_rule_outcomes(lines: list[str], result: StatsReports) -> None:
    """Record each `nsys analyze` rule that printed no table: what it found (nothing) or why it was skipped. nsys
    wraps its sentences at 80 columns; a rule's sentence runs to the next blank line."""
    rule: str | None = None
    for index, line in enumerate(lines):
        text = line.strip()
        named = _RULE_NAMED.match(text) or _TITLE.match(text)
        if named:
            rule = named.group(1)
            continue
        if rule not in EXPERT_RULES or rule in result.rules or rule in result.rule_outcomes:
            continue
        skipped = _SKIPPED.match(text)
        if skipped:
            result.rule_outcomes[rule] = f"skipped: {skipped.group(1).strip()}"
        elif _NO_PROBLEM.match(text):
            sentence = [text]
            for following in lines[index + 1:]:
                if not following.strip() or _RULE_NAMED.match(following.strip()):
                    break
                sentence.append(following.strip())
            result.rule_outcomes[rule] = "no problems: " + " ".join(sentence)


def _store_rule(path: Path, kind: str, rows: list[list[str]], first_line: int, result: StatsReports) -> None:
    """Keep an `nsys analyze` rule's table as RULE_ROWS; the first table of each rule in the file is read. A memcpy
    table whose rule was not named is the async rule's when its calls are cudaMemcpy*Async, else the sync rule's."""
    header = [_in_ns(c.strip().lower()) for c in rows[0]]
    _note_time_unit(rows[0], result.notes)
    records: list[dict[str, object]] = []
    for offset, row in enumerate(rows[1:]):
        if [cell.strip() for cell in row] in (["..."], ["…"]):
            result.notes.append(f"line {first_line + offset}: a literal '...' row (the table was cut by hand) was skipped")
            continue
        if len(row) != len(header):
            raise TraceFormatError(path, f"a {kind} row has {len(row)} fields for {len(header)} columns", "pass the output as nsys analyze printed it",
                                   line=first_line + offset)
        record: dict[str, object] = {}
        for (name, scale), cell in zip(header, row, strict=True):
            sized = _BYTES_HEADER.match(name)
            column = "bytes" if sized else _RULE_COLUMNS.get(name)
            if column in ("src_kind", "dst_kind", "memory_kind", "api_name"):
                record[column] = cell.strip() or None
            elif column is not None:
                value = _number(cell)
                if value is not None and column == "bytes":
                    value *= _BYTES_PER_UNIT[sized.group(1) if sized else None]
                elif value is not None and column.endswith("_ns"):
                    value *= scale
                elif value is not None and column not in ("in_use_pct",):
                    value = int(value) if abs(value) < 2**62 else None
                record[column] = value
        records.append(record)
    frame = pl.DataFrame([{name: record.get(name) for name in RULE_ROWS} for record in records], schema=RULE_ROWS)
    if kind == "cuda_memcpy":
        asynchronous = frame["api_name"].str.contains("Async").any()
        kind = "cuda_memcpy_async" if asynchronous else "cuda_memcpy_sync"
    result.rules.setdefault(kind, frame)


def _parse_table(path: Path, lines: list[str], result: StatsReports) -> None:
    """`nsys stats --format table`: rows framed by `|`, a `+---+` border above and below the header. A table ends
    at the first line that is not a `|` row (its closing border, or a `...` an author put there to cut it)."""
    index, hint = 0, None
    while index < len(lines):
        hint = _report_named(lines[index]) or hint
        if _TABLE_BORDER.match(lines[index]) and index + 2 < len(lines) and lines[index + 1].strip().startswith("|") \
                and _TABLE_BORDER.match(lines[index + 2]):
            header = [cell.strip() for cell in lines[index + 1].strip().strip("|").split("|")]
            cursor, rows = index + 3, []
            while cursor < len(lines) and lines[cursor].strip().startswith("|"):
                rows.append([cell for cell in lines[cursor].strip().strip("|").split("|")])
                cursor += 1
            if cursor < len(lines) and lines[cursor].strip() in ("...", "…"):
                result.notes.append(f"line {cursor + 1}: the table was cut by hand ('...' after its last row); only the rows shown were read")
            kind, hint = report_kind(header, hint), None
            if kind in _RULE_KINDS:
                _store_rule(path, kind, [header, *rows], index + 4, result)
            elif kind is not None and kind not in READ_REPORTS:
                result.skipped.append(kind)
            elif kind in _PER_LAUNCH:
                store_per_launch(path, kind, [header, *rows], index + 4, result)
            elif kind is not None and kind not in result.reports:
                _store(result, kind, _frame(path, header, rows, index + 4, result.notes))
            index = cursor
            continue
        index += 1


def _note_time_unit(columns: list[str], notes: list[str]) -> None:
    units = {match.group(1) for c in columns if (match := _TIME_UNIT.search(c.strip())) and match.group(1).lower() not in ("ns", "nsec")}
    # nsys stats --timeunit chooses the unit; nsys 2020 printed start times in seconds of its own accord.
    note = f"times were printed in {', '.join(sorted(units))} and are converted to ns"
    if units and note not in notes:
        notes.append(note)


# cuda_api_gpu_sum puts API calls, kernels and memory operations in one table, and cuda_gpu_sum (the report of
# nsys_easy and NVIDIA's introductory CUDA blog) kernels and memory operations; each category is the report of its own.
_BY_CATEGORY = ("cuda_api_gpu_sum", "cuda_gpu_sum")
_CATEGORY_REPORTS = {"CUDA_KERNEL": "cuda_gpu_kern_sum", "MEMORY_OPER": "cuda_gpu_mem_time_sum", "CUDA_API": "cuda_api_sum"}


def _by_kernel(frame: pl.DataFrame) -> pl.DataFrame:
    """Return a cuda_gpu_kern_gb_sum (one row per kernel and launch shape) as one row per kernel: totals and counts
    add, min/max are taken over the shapes, the spread is pooled; a median cannot be combined and is left unknown."""
    count = pl.col("count").cast(pl.Float64)
    merged = frame.group_by("name", maintain_order=True).agg(
        total_ns=pl.col("total_ns").sum(), count=pl.col("count").sum(), min_ns=pl.col("min_ns").min(),
        max_ns=pl.col("max_ns").max(), time_pct=pl.col("time_pct").sum(),
        med_ns=pl.when(pl.len() == 1).then(pl.col("med_ns").first()),
        # Σ n(σ² + μ²) / N over the shapes; less the squared mean, the variance of all launches together.
        second_moment=(count * (pl.col("stddev_ns") ** 2 + pl.col("avg_ns") ** 2)).sum() / count.sum(),
    ).with_columns(avg_ns=pl.col("total_ns") / pl.col("count"))
    merged = merged.with_columns(stddev_ns=(pl.col("second_moment") - pl.col("avg_ns") ** 2).clip(lower_bound=0).sqrt())
    return merged.select([pl.col(name).cast(dtype) if name in merged.columns else pl.lit(None, dtype).alias(name) for name, dtype in STATS.items()])


def _store(result: StatsReports, kind: str, frame: pl.DataFrame) -> None:
    """Keep a report; a cuda_api_gpu_sum or cuda_gpu_sum is split by category into the reports it holds, and a
    kernel summary by launch shape becomes the kernel summary (where either is not given alone)."""
    if kind == "cuda_gpu_kern_gb_sum":
        if "cuda_gpu_kern_sum" not in result.reports:
            merged = _by_kernel(frame)
            result.reports["cuda_gpu_kern_sum"] = merged
            result.notes.append(f"cuda_gpu_kern_gb_sum lists each launch shape apart: its {frame.height} rows are read as "
                                f"{merged.height} kernels (medians of kernels with several shapes cannot be combined)")
        return
    if kind not in _BY_CATEGORY:
        result.reports[kind] = frame
        return
    categories = frame["category"].str.strip_chars().str.to_uppercase()
    unknown = sorted(set(categories.drop_nulls().unique().to_list()) - set(_CATEGORY_REPORTS))
    if unknown:
        result.notes.append(f"{kind} rows of category {', '.join(unknown)} were not read")
    held = []
    for category, report in _CATEGORY_REPORTS.items():
        # Its Time (%) is a share of all the categories together, not of the kernels' or copies' own time.
        part = frame.filter(categories == category).with_columns(time_pct=pl.lit(None, pl.Float64))
        if part.height and report not in result.reports:
            result.reports[report] = part
        if part.height:
            held.append({"CUDA_KERNEL": "kernels", "MEMORY_OPER": "memory operations", "CUDA_API": "API calls"}[category])
    listed = " and ".join([", ".join(held[:-1]), held[-1]] if len(held) > 1 else held) or "rows"
    result.notes.append(f"{kind} is read as its {listed}")


_CSV_HEADER_STARTS = ("Time (%)", "Time(%)", "Start (", "API Start (", "Total (MB)", "Duration (", "Row#")
# What nsys prints on stdout between the CSV tables of `nsys stats --format csv -r a,b,c`: the report script it runs
# (`Processing [x.sqlite] with [/opt/nvidia/nsight-systems/.../reports/cuda_api_sum.py]...`), and SKIPPED/Generating lines.
_NSYS_NOTICE = re.compile(r"^(Processing \[|SKIPPED: |Generating |Generated:|NOTICE: |WARNING: |ERROR: |\s*\*\* )")


def _parse_csv(path: Path, lines: list[str], result: StatsReports) -> None:
    """`--format csv` or `--format tsv`, one report or several on stdout: each table runs from its header line to the
    next header or the next line nsys printed between reports; blank lines are skipped."""
    # Writers that quote every field (`"Time (%)","Total Time (ns)",...`) quote the header too.
    starts = [i for i, line in enumerate(lines) if line.lstrip('"').startswith(_CSV_HEADER_STARTS) or _PROJECTION_HEADER.match(line)]
    repeated: dict[str, int] = {}
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(lines)
        stop = next((i for i in range(start + 1, end) if _NSYS_NOTICE.match(lines[i])), end)
        block = [line for line in lines[start:stop] if line.strip()]
        previous = starts[number - 1] if number else -1
        hint = next((name for i in range(start - 1, previous, -1) if (name := _report_named(lines[i]))), None)
        kind = _csv_table(path, block, start, hint, result, _report_in_file_name(path) if len(starts) == 1 else None)
        if kind is not None and kind in repeated:
            repeated[kind] += 1
        elif kind is not None:
            repeated[kind] = 0
    for kind, count in repeated.items():
        if count:
            result.notes.append(f"{count} more '{kind}' table(s) in this file were not read; the first one was")


# `nsys stats --format csv -o base` writes one file per report, `base_<report>.csv` (the usage text): the name tells
# an OS runtime summary from a CUDA API summary with the same columns.
_FILE_REPORTS = (*READ_REPORTS, "osrt_sum", "nvtx_kern_sum", "nvtx_gpu_proj_sum", "nvtx_pushpop_sum", "nvtx_startend_sum", "um_sum",
                 "um_total_sum", "um_cpu_page_faults_sum", "cuda_kern_exec_sum", "cuda_api_trace", "openmp_sum", "mpi_event_sum",
                 "osrtsum", "cudaapisum", "gpukernsum", "gpumemtimesum", "gpumemsizesum", "nvtxsum", "gputrace", "kernexectrace")


def _report_in_file_name(path: Path) -> str | None:
    """Return the report a file's name ends with (`report1_osrt_sum.csv` → osrt_sum), or None."""
    stem = path.stem.lower()
    return next((name for name in sorted(_FILE_REPORTS, key=len, reverse=True) if stem == name or stem.endswith("_" + name)), None)


def _csv_table(path: Path, block: list[str], start: int, hint: str | None, result: StatsReports,
               file_hint: str | None = None) -> str | None:
    """Read one CSV (or TSV) table whose header is block[0], line start + 1 of the file; return its report name.
    `hint` is the report nsys said it ran; `file_hint` the one the file's name ends with, which only settles what the
    columns leave open (osrt_sum has the very columns of cuda_api_sum)."""
    delimiter = "\t" if "\t" in block[0] and "," not in block[0] else ","
    rows = list(csv.reader(io.StringIO("\n".join(block)), delimiter=delimiter))
    return _read_rows(path, rows, start, hint, result, file_hint)


def _read_rows(path: Path, rows: list[list[str]], start: int, hint: str | None, result: StatsReports,
               file_hint: str | None = None) -> str | None:
    """Read one table given as cells (its header first, on line start + 1 of the file); return its report name."""
    kind = report_kind(rows[0], hint) if hint else report_kind(rows[0])
    if hint is None and file_hint is not None and kind in (None, "cuda_api_sum"):
        kind = report_kind(rows[0], file_hint)
    if kind is None:
        raise TraceFormatError(path, f"unknown nsys stats report with columns {rows[0][:4]}", f"supported: {', '.join(READ_REPORTS)}",
                               line=start + 1)
    if kind in _RULE_KINDS:
        _store_rule(path, kind, rows, start + 2, result)
    elif kind not in READ_REPORTS:
        result.skipped.append(kind)
    elif kind in _PER_LAUNCH:
        store_per_launch(path, kind, rows, start + 2, result)
    elif kind not in result.reports:
        _store(result, kind, _frame(path, rows[0], rows[1:], start + 2, result.notes))
    return kind


def _json_cell(value: object) -> str:
    """A JSON value as the text the CSV form would hold: numbers as they are, null as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, bool | dict | list):
        return json.dumps(value)
    return str(value)


def _parse_json(path: Path, text: str, result: StatsReports) -> None:
    """`--format json`: each array of row objects is one table, whose header is the first row's keys (several
    reports on stdout are several arrays, between the notices nsys prints); a row lacking a key has that cell empty."""
    decoder = json.JSONDecoder()
    found, tables = 0, []
    for match in re.finditer(r"^\s*\[", text, re.MULTILINE):
        position = match.end() - 1
        if position < found:
            continue  # inside an array already read
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            if _JSON_TABLE.match(text, match.start()):
                raise TraceFormatError(path, f"the JSON table is cut or damaged ({error.msg})", "re-run nsys stats --format json and pass its whole output",
                                       line=error.lineno) from error
            continue
        found = end
        if not isinstance(value, list) or not value or not all(isinstance(row, dict) for row in value):
            continue
        header = [str(key) for key in value[0]]
        rows = [header, *([_json_cell(row.get(key)) for key in header] for row in value)]
        line = text.count("\n", 0, position)
        hint = next((name for previous in reversed(text[:position].splitlines()[-3:]) if (name := _report_named(previous))), None)
        tables.append((rows, line, hint))
    for rows, line, hint in tables:
        _read_rows(path, rows, line, hint, result, _report_in_file_name(path) if len(tables) == 1 else None)


# Per-launch reports: the column with each launch's GPU time, the one with its name, and the one with its start.
_PER_LAUNCH = {"cuda_gpu_trace": ("Duration (ns)", "Name", "Start (ns)"),
               "cuda_kern_exec_trace": ("Kernel Dur (ns)", "Kernel Name", "Kernel Start (ns)")}
# `NVIDIA A100-SXM4-80GB (0)` in cuda_gpu_trace's Device column; DevId in the exec trace is the number alone.
_DEVICE_INDEX = re.compile(r"\((\d{1,18})\)\s*$|^\s*(\d{1,18})\s*$")
_COPY_NAME = re.compile(r"^\[CUDA (memcpy|memset|Unified Memory)", re.IGNORECASE)


def store_per_launch(path: Path, kind: str, rows: list[list[str]], first_line: int, result: StatsReports, report_label: str | None = None) -> None:
    """Total a per-launch report per name: kernels become the kernel summary; the copies and memsets cuda_gpu_trace
    lists among them (`[CUDA memcpy Host-to-Device]`) become the memory time and size summaries. `report_label` names the
    report in the note where it is another tool's trace in cuda_gpu_trace's columns (nvprof's)."""
    header = [_in_ns(c.strip())[0] for c in rows[0]]
    duration_column, name_column, start_column = _PER_LAUNCH[kind]
    if duration_column not in header:
        raise TraceFormatError(path, f"a {kind} table without its {duration_column.removesuffix(' (ns)')} column: its header looks damaged",
                               "pass the report as nsys stats wrote it", line=max(1, first_line - 1))
    _note_time_unit(rows[0], result.notes)
    duration = header.index(duration_column)
    scale = _in_ns(rows[0][duration].strip())[1]
    name = header.index(name_column) if name_column in header else len(header) - 1
    # `Bytes (MB)` since 2021, nsys's MB of 10^6 bytes; nsys 2020 printed `Bytes` as a count.
    megabytes = header.index("Bytes (MB)") if "Bytes (MB)" in header else None
    raw_bytes = header.index("Bytes") if megabytes is None and "Bytes" in header else None
    def column(title: str) -> int | None:
        return header.index(title) if title in header else None

    device = column("Device") if "Device" in header else column("DevId")
    start, call, api = column(start_column), column("API Dur (ns)"), column("API Function")
    call_start = column("API Start (ns)")
    start_scale = _in_ns(rows[0][start].strip())[1] if start is not None else 1.0
    call_scale = _in_ns(rows[0][call].strip())[1] if call is not None else 1.0
    call_start_scale = _in_ns(rows[0][call_start].strip())[1] if call_start is not None else 1.0
    correlation, source_kind, target_kind = column("CorrId"), column("SrcMemKd"), column("DstMemKd")
    times: dict[str, list[float]] = {}
    sizes: dict[str, float] = {}
    launches: list[dict[str, object]] = []
    copy_launches: list[dict[str, object]] = []
    for offset, row in enumerate(rows[1:]):
        if len(row) < len(header):
            raise TraceFormatError(path, f"short row in {kind}", "pass the report as nsys stats wrote it", line=first_line + offset)
        value = _number(row[duration])
        if value is None:
            continue
        label = row[name].strip()
        times.setdefault(label, []).append(value * scale)
        moved = _number(row[megabytes]) if megabytes is not None else None
        if raw_bytes is not None and (counted_bytes := _number(row[raw_bytes])) is not None:
            moved = counted_bytes / 1e6
        if moved is not None:
            sizes[label] = sizes.get(label, 0.0) + moved
        began = _number(row[start]) if start is not None else None
        # Times beyond 2^62 ns (146 years) are damaged cells: such a launch is left out of the timeline.
        fits = began is not None and abs(began * start_scale) < 2**62 and abs(began * start_scale + value * scale) < 2**62
        index = _DEVICE_INDEX.search(row[device]) if device is not None and fits else None
        device_id = int(index.group(1) or index.group(2)) if index else None
        device_id = device_id if device_id is not None and device_id < 2**62 else None
        if device_id is not None and device_id not in result.device_names and index is not None and device is not None and index.group(1):
            named = row[device][:index.start()].strip()
            if named:
                result.device_names[device_id] = named
        if began is not None and fits and _COPY_NAME.match(label):
            copy_launches.append(_copy_launch(label, int(began * start_scale), int(began * start_scale + value * scale), device_id, moved,
                                              row[source_kind].strip() if source_kind is not None else None,
                                              row[target_kind].strip() if target_kind is not None else None,
                                              _number(row[correlation]) if correlation is not None else None))
        elif began is not None and fits:
            launch_call = _number(row[call]) if call is not None else None
            called = _number(row[call_start]) if call_start is not None else None
            launches.append({"device_id": device_id, "start_ns": int(began * start_scale),
                             "end_ns": int(began * start_scale + value * scale), "name": label,
                             "call_start_ns": int(called * call_start_scale) if called is not None and abs(called * call_start_scale) < 2**62 else None,
                             "launch_call_ns": launch_call * call_scale if launch_call is not None else None,
                             "graph_node_id": 0 if api is not None and "graph" in row[api].lower() else None})

    def totals(names: list[str]) -> pl.DataFrame:
        return stats_frame([{"total_ns": sum(times[k]), "count": len(times[k]), "avg_ns": sum(times[k]) / len(times[k]),
                              "min_ns": min(times[k]), "max_ns": max(times[k]), "name": k,
                              "total_mb": sizes.get(k), "avg_mb": sizes[k] / len(times[k]) if k in sizes else None} for k in names])

    copies = [k for k in times if _COPY_NAME.match(k)]
    kernels = [k for k in times if not _COPY_NAME.match(k)]
    result.reports.setdefault("cuda_gpu_kern_sum", totals(kernels))
    if (launches or copy_launches) and result.launches is None:  # a trace may hold copies alone
        result.launches = pl.DataFrame(launches, schema=STATS_LAUNCHES)
        result.copy_launches = conform(pl.DataFrame(copy_launches, schema=widened(NSYS_MEMOPS)), NSYS_MEMOPS)
        result.whole_timeline = kind == "cuda_gpu_trace"
    if copies:
        result.reports.setdefault("cuda_gpu_mem_time_sum", totals(copies))
        if any(k in sizes for k in copies):
            result.reports.setdefault("cuda_gpu_mem_size_sum", totals(copies))
    listed = "kernels and copies" if copies else "kernels"
    result.notes.append(f"{report_label or kind} is read as a per-launch list of {listed}: totals come from its {duration_column.removesuffix(' (ns)')} column")


# cuda_gpu_trace names its copies `[CUDA memcpy Host-to-Device]` (2023+) or `[CUDA memcpy HtoD]` (older), and unified
# memory `[CUDA Unified Memory memcpy HtoD]`: the CUPTI copy kinds of the export (nsys_sqlite's enum fallback).
# Names as the export's copy-kind enum spells them (longest first: `Unified Host-to-Device` before `Host-to-Device`),
# then the abbreviations of older nsys.
_COPY_KIND = {**{name.lower(): kind for kind, name in sorted(COPY_KINDS.items(), key=lambda item: -len(item[1])) if kind},
              "htod": 1, "dtoh": 2, "dtod": 8, "ptop": 10}


def _copy_launch(label: str, start_ns: int, end_ns: int, device_id: int | None, megabytes: float | None, source: str | None,
                 target: str | None, correlation: float | None) -> dict[str, object]:
    """Return one cuda_gpu_trace copy or memset as a row of the export's memory operations (NSYS_MEMOPS)."""
    text = label.lower()
    direction = next((kind for name, kind in _COPY_KIND.items() if name in text), None)
    # `[CUDA Unified Memory memcpy HtoD]`: unified-memory migrations are kinds 11-13.
    kind = {1: 11, 2: 12, 8: 13}.get(direction, direction) if direction is not None and "unified" in text else direction
    # nsys prints MB to three decimals: `0.000` is a copy of under 500 bytes whose size is not known.
    size = round(megabytes * 1e6) if megabytes is not None and 0 < megabytes < 1e12 else None
    return {"start_ns": start_ns, "end_ns": end_ns, "device_id": device_id, "operation": "memset" if "memset" in text else "memcpy",
            "copy_kind": kind, "bytes": size, "src_kind": source or None, "dst_kind": target or None,
            "correlation_id": int(correlation) if correlation is not None and 0 <= correlation < 2**62 else None, "pid": None}


# nsys 2020's `CUDA Memory Operation Statistics (by size in KiB):` heads a table whose bare `Total`, `Average`,
# `Minimum` and `Maximum` are in the unit its title names.
_OLD_SIZE_TITLE = re.compile(r"\(by size in (KiB|MiB|KB|MB)\)")
_MB_PER_UNIT = {"KiB": 1024 / 1e6, "MiB": 2**20 / 1e6, "KB": 1e-3, "MB": 1.0}


def _old_size_summary(path: Path, header: list[str], rows: list[list[str]], first_line: int, unit: str, notes: list[str]) -> pl.DataFrame:
    """Return an nsys 2020 size summary (sizes in the title's unit, bare column names) in nsys's MB, as the later
    `Total (MB)` report has them."""
    named = [{"Total": "Total (MB)", "Average": "Avg (MB)", "Minimum": "Min (MB)", "Maximum": "Max (MB)"}.get(h, h) for h in header]
    frame = _frame(path, named, rows, first_line, notes)
    return frame.with_columns(pl.col("total_mb") * _MB_PER_UNIT[unit], pl.col("avg_mb") * _MB_PER_UNIT[unit])


def _parse_console(path: Path, lines: list[str], result: StatsReports) -> None:
    hint: str | None = None
    size_unit: str | None = None
    index = 0
    skipped: dict[str, int] = {}
    while index < len(lines):
        line = lines[index]
        hint = _report_named(line) or hint
        size_unit = (sized.group(1) if (sized := _OLD_SIZE_TITLE.search(line)) else None) or size_unit
        dashes = lines[index + 1] if index + 1 < len(lines) else ""
        if _DASHES.match(dashes) and (hint is not None or "Time" in line or "Total" in line
                                      or line.lstrip().startswith(("Duration (", "Row#", "Start (", "Start(", "API Start ("))):
            spans = [(m.start(), m.end()) for m in re.finditer(r"-+", dashes)]
            header = _header_cells(line, spans)
            rows = []
            cursor = index + 2
            while cursor < len(lines) and lines[cursor].strip():
                raw = lines[cursor]
                rows.append([raw[a:b] for a, b in _widen(spans, raw)])
                cursor += 1
            kind = report_kind(header, hint)
            if kind in _RULE_KINDS:
                cells = [_rule_cells(raw, header, row) for raw, row in zip(lines[index + 2:cursor], rows, strict=True)]
                _store_rule(path, kind, [header, *cells], index + 3, result)
            elif kind is not None and kind not in READ_REPORTS:
                result.skipped.append(kind)
            elif kind is not None:
                if kind in result.reports:
                    skipped[kind] = skipped.get(kind, 0) + 1
                elif kind in _PER_LAUNCH:
                    store_per_launch(path, kind, [header, *rows], index + 3, result)
                elif kind == "cuda_gpu_mem_size_sum" and size_unit and "Total" in header:
                    _store(result, kind, _old_size_summary(path, header, rows, index + 3, size_unit, result.notes))
                else:
                    _store(result, kind, _frame(path, header, rows, index + 3, result.notes))
            hint = size_unit = None
            index = cursor
            continue
        index += 1
    for kind, count in skipped.items():
        result.notes.append(f"{count} more '{kind}' table(s) in this file (other runs) were not read; the first one was")


# A console cell: words one space apart; cells stand two or more spaces apart (nvprof's and nsys's column layouts).
SPACED_CELL = re.compile(r"\S+(?: \S+)*")
# The one column of an `nsys analyze` table that may be null (the query's NULLIF(greenContextId, 0)). nsys prints a
# null cell as nothing at all, not as a blank column, so the cells after it shift left under the wrong headers.
_NULLABLE_RULE_COLUMNS = ("Green Context ID",)


def _rule_cells(raw: str, header: list[str], sliced: list[str]) -> list[str]:
    """Return a console row of an `nsys analyze` table as cells: its values are two or more spaces apart (API names and
    memory kinds hold none), so a row with as many values as columns is read by them, and one short by its nullable
    columns has those empty; any other row is read by the dashes' columns (`sliced`)."""
    values = [match.group(0) for match in SPACED_CELL.finditer(raw)]
    if len(values) == len(header):
        return values
    nullable = [i for i, name in enumerate(header) if name in _NULLABLE_RULE_COLUMNS]
    if nullable and len(values) == len(header) - len(nullable):
        for position in nullable:
            values.insert(position, "")
        return values
    return sliced


def _header_cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    """Return a console header's column names. nsys centres each name over its dashes, and an odd spare column can
    push a name a character past them (`nsys analyze`'s `Src Kind` over `--------`); names hold single spaces only and
    are two or more apart, so where the line splits into as many names as there are columns, those are the names."""
    names = [match.group(0) for match in SPACED_CELL.finditer(line)]
    if len(names) == len(spans):
        return names
    return [line[a:b].strip() for a, b in _widen(spans, line)]


def _widen(spans: list[tuple[int, int]], line: str) -> list[tuple[int, int]]:
    """Column slices without overlap: each runs from the previous column's end to its own end (numbers are
    right-aligned to the dashes); the last runs to the end of the line (names are left-aligned and may be long)."""
    slices = []
    for position, (_, end) in enumerate(spans):
        begin = 0 if position == 0 else spans[position - 1][1]
        slices.append((begin, end if position + 1 < len(spans) else max(len(line), end)))
    return slices


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    cut = options.cut_line
    try:
        stats = parse(path)
    except TraceFormatError as error:
        if cut is None:
            raise
        raise TraceFormatError(path, f"the file is cut short (it ends inside line {cut} without a newline), and what is left holds no "
                               f"report traceview reads ({error.problem})", "copy or export the whole output again", line=cut) from None
    if cut and not any(report.height for report in stats.reports.values()) and not stats.rules:
        # An answer of zero kernels would read as a run with none: the file is cut before any report's rows.
        raise TraceFormatError(path, f"the file is cut short (it ends inside line {cut} without a newline) before any report's rows",
                               "copy or export the whole output again", line=cut)
    return Parsed(stats, "nsys stats", tuple(cut_notes(options)))


FORMATS = (
    Format("nsys-stats", "nsys-stats", _read, lambda head: head.is_text and looks_like_stats(head.text), order=50,
           data_line=re.compile(r"\d|\*\* |Time|Name|Instances|-{3}|Processing \[|[,|]")),
)
