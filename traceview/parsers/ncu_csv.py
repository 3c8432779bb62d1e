"""Nsight Compute CSV (details page, long; raw page, wide) → one row per kernel launch (schema.KERNELS).

Every header variant seen in the wild is accepted: 2019.5 (12 columns, `Kernel Time`), 2022+ (Block/Grid/
Device/CC), rule and speedup columns, per-section exports with `Body Item Label`, ragged rows, the raw page's
units row, any preamble before the `"ID",` header and `==PROF==`-style lines. Columns are found by name.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.numbers import reduced
from traceview.parsers.base import Format, Head, Parsed, ReadOptions
from traceview.parsers.schema import KERNELS, MEMORY_LEVELS, NCU_RULE, PRECISIONS, conform
from traceview.parsers.units import base_unit, parse_number, parse_number_columns, unit_factor, unit_of
from traceview.wording import counted

HEADER_PREFIX = b'"ID",'
_DETAILS_REQUIRED = ("ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
_MAX_PREAMBLE_BYTES = 64 * 1024 * 1024
_MAX_COLUMN_NAME = 4096  # ncu's longest metric names are a few hundred characters
_EXPORT_HINT = "export it with `ncu -i report.ncu-rep --csv --page details > run.csv` (or --page raw)"

# (metric name | base unit) → canonical quantity. Display labels from the details page of each ncu version,
# and raw metric names (`--metrics` rows on the details page, columns on the raw page).
_ALIASES: dict[str, str] = {
    "Duration|ns": "duration_ns",
    "gpu__time_duration.sum|ns": "duration_ns",
    "Compute (SM) Throughput|%": "sm_throughput_pct",
    "SM [%]|%": "sm_throughput_pct",
    "Compute (SM) [%]|%": "sm_throughput_pct",  # 2020-2022 label
    "sm__throughput.avg.pct_of_peak_sustained_elapsed|%": "sm_throughput_pct",
    "Memory Throughput|%": "memory_throughput_pct",
    "Memory [%]|%": "memory_throughput_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed|%": "memory_throughput_pct",
    "DRAM Throughput|%": "dram_throughput_pct",
    "SOL FB|%": "dram_throughput_pct",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed|%": "dram_throughput_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed|%": "dram_throughput_pct",
    "L2 Cache Throughput|%": "l2_throughput_pct",
    "SOL L2|%": "l2_throughput_pct",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed|%": "l2_throughput_pct",
    "L1/TEX Cache Throughput|%": "l1_throughput_pct",
    "SOL TEX|%": "l1_throughput_pct",
    "l1tex__throughput.avg.pct_of_peak_sustained_active|%": "l1_throughput_pct",
    "SM Frequency|hz": "sm_clock_hz",
    "sm__cycles_elapsed.avg.per_second|hz": "sm_clock_hz",
    "smsp__cycles_elapsed.avg.per_second|hz": "smsp_clock_hz",
    "DRAM Frequency|hz": "dram_clock_hz",
    "Memory Frequency|hz": "dram_clock_hz",
    "dram__cycles_elapsed.avg.per_second|hz": "dram_clock_hz",
    "lts__cycles_elapsed.avg.per_second|hz": "l2_clock_hz",
    "l1tex__cycles_elapsed.avg.per_second|hz": "l1_clock_hz",
    "Waves Per SM|": "waves_per_sm",
    "launch__waves_per_multiprocessor|": "waves_per_sm",
    "Block Size|": "block_threads",
    "launch__block_size|": "block_threads",
    "Grid Size|": "grid_blocks",
    "launch__grid_size|": "grid_blocks",
    "device__attribute_multiprocessor_count|": "sm_count",
    "launch__sm_count|sm": "sm_count",
    # Traffic.
    "dram__bytes.sum|byte": "dram_bytes",
    "dram__bytes_read.sum|byte": "dram_read_bytes",
    "dram__bytes_write.sum|byte": "dram_write_bytes",
    "dram__bytes.sum.per_second|byte/s": "dram_bytes_per_s",
    "Memory Throughput|byte/s": "dram_bytes_per_s",  # Memory Workload Analysis: DRAM bytes per second
    "DRAM Bandwidth|byte/s": "dram_bytes_per_s",  # roofline chart body, achieved value
    "dram__bytes.sum.peak_sustained|byte/cycle": "peak_dram_bytes_per_cycle",
    "Theoretical DRAM Bytes Accessible|byte/cycle": "peak_dram_bytes_per_cycle",
    # Work: instruction counts (2·FMA + ADD + MUL, ncu's convention) or per-cycle rates.
    "Theoretical Predicated-On FFMA Operations|inst": "peak_fp32_flop_per_cycle",
    "Theoretical Predicated-On DFMA Operations|inst": "peak_fp64_flop_per_cycle",
    "Predicated-On FFMA Operations Per Cycle|inst": "ffma_ops_per_cycle",
    "Predicated-On DFMA Operations Per Cycle|inst": "dfma_ops_per_cycle",
    "Predicated-On FFMA Thread Instructions Executed Per Cycle|inst/cycle": "ffma_per_cycle",
    "Predicated-On FADD Thread Instructions Executed Per Cycle|inst/cycle": "fadd_per_cycle",
    "Predicated-On FMUL Thread Instructions Executed Per Cycle|inst/cycle": "fmul_per_cycle",
    "Predicated-On DFMA Thread Instructions Executed Per Cycle|inst/cycle": "dfma_per_cycle",
    "Predicated-On DADD Thread Instructions Executed Per Cycle|inst/cycle": "dadd_per_cycle",
    "Predicated-On DMUL Thread Instructions Executed Per Cycle|inst/cycle": "dmul_per_cycle",
}

# Raw metric names whose unit varies between versions (or is plainly wrong, e.g. `byte` on a per-second
# metric in the muDock raw export): matched by name alone.
_ANY_UNIT_ALIASES: dict[str, str] = {
    "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2": "peak_fp32_flop_per_cycle",
    "derived__sm__sass_thread_inst_executed_op_dfma_pred_on_x2": "peak_fp64_flop_per_cycle",
    "derived__sm__sass_thread_inst_executed_op_hfma_pred_on_x4": "peak_fp16_flop_per_cycle",
    "derived__lts__lts2xbar_bytes.sum.per_second": "l2_bytes_per_s",
    "derived__lts__lts2xbar_bytes.sum.peak_sustained": "peak_l2_bytes_per_cycle",
    "derived__l1tex__lsu_writeback_bytes_mem_lg.sum.per_second": "l1_bytes_per_s",
    "derived__l1tex__lsu_writeback_bytes_mem_lg.sum.peak_sustained": "peak_l1_bytes_per_cycle",
    "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second": "l1_bytes_per_s",
    "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.peak_sustained": "peak_l1_bytes_per_cycle",
    "derived__l1tex__lsu_writeback_bytes.sum.per_second": "l1_bytes_per_s",
    "derived__l1tex__lsu_writeback_bytes.sum.peak_sustained": "peak_l1_bytes_per_cycle",
}
# Launch statistics and occupancy: display labels (details page, console) and raw names (raw page, --metrics, .ncu-rep).
# Their units differ between versions (`warp/cycle` in 2019.5, `warp` later), so they are matched by name alone.
for _names, _key in (
    (("Registers Per Thread", "launch__registers_per_thread"), "registers_per_thread"),
    (("Static Shared Memory Per Block", "launch__shared_mem_per_block_static"), "static_shared_bytes_per_block"),
    (("Dynamic Shared Memory Per Block", "launch__shared_mem_per_block_dynamic"), "dynamic_shared_bytes_per_block"),
    (("Threads", "launch__thread_count"), "threads"),
    (("# SMs",), "sm_count"),
    (("Block Limit SM", "launch__occupancy_limit_blocks"), "block_limit_sm"),
    (("Block Limit Registers", "launch__occupancy_limit_registers"), "block_limit_registers"),
    (("Block Limit Shared Mem", "launch__occupancy_limit_shared_mem"), "block_limit_shared_mem"),
    (("Block Limit Warps", "launch__occupancy_limit_warps"), "block_limit_warps"),
    (("Block Limit Barriers", "launch__occupancy_limit_barriers"), "block_limit_barriers"),
    (("Theoretical Occupancy", "sm__maximum_warps_per_active_cycle_pct"), "theoretical_occupancy_pct"),
    (("Achieved Occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active"), "achieved_occupancy_pct"),
    (("Theoretical Active Warps per SM", "sm__maximum_warps_avg_per_active_cycle"), "theoretical_warps_per_sm"),
    (("Achieved Active Warps Per SM", "sm__warps_active.avg.per_cycle_active"), "achieved_warps_per_sm"),
    (("Warp Cycles Per Issued Instruction", "smsp__average_warp_latency_per_inst_issued.ratio"), "warp_cycles_per_issue"),
    # Cycles, for a duration when `gpu__time_duration` was not collected: cycles ÷ cycles per second.
    (("sm__cycles_elapsed.avg",), "sm_cycles_elapsed"),
    (("Elapsed Cycles", "gpc__cycles_elapsed.max"), "elapsed_cycles"),
    (("sm__inst_executed_pipe_tensor.sum", "sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_imma.sum",
      "sm__inst_executed_pipe_tensor_op_gmma.sum", "smsp__inst_executed_pipe_tensor.sum"), "tensor_inst"),
):
    for _name in _names:
        _ANY_UNIT_ALIASES[_name] = _key

# Tensor pipe utilisation (% of peak); the pipe's name changed across architectures (hmma, imma, gmma, plain tensor).
_TENSOR_PIPE_PATTERN = r"^sm__(inst_executed_)?pipe_tensor[a-z_]*?(_cycles_active)?\.avg\.pct_of_peak_sustained_(active|elapsed)$"
# Warp stall reasons, most precise first: cycles per issued instruction (WarpStateStats), the older latency form, then
# PC-sampling counts (SourceCounters). `selected` is the issuing state, kept so that shares are of all warp cycles.
_STALL_PATTERNS = (
    ("cycles per issued instruction", r"^smsp__average_warps_issue_stalled_(?P<reason>[a-z_]+)_per_issue_active\.ratio$"),
    ("cycles per issued instruction", r"^smsp__average_warp_latency_issue_stalled_(?P<reason>[a-z_]+)\.ratio$"),
    ("PC samples", r"^smsp__pcsamp_warps_issue_stalled_(?P<reason>[a-z_]+?)$"),
)
# The same breakdown as a body table (`--print-details body`, table "Warp State (All Cycles)"): labels `Stall Long
# Scoreboard`, `Selected`, whose words are the raw metrics' reason names (long_scoreboard, selected).
_STALL_LABEL = re.compile(r"^(?:Stall (?P<reason>[A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*)*)|(?P<selected>Selected))$")
_STALL_ANY = "|".join(f"(?:{pattern.replace('?P<reason>', '')})" for _, pattern in _STALL_PATTERNS)


def is_wanted_metric(name: str) -> bool:
    """True for a raw metric name that the KERNELS schema uses (the raw page and .ncu-rep read only these)."""
    return (name in _WANTED_EXACT or re.match(_TENSOR_PATTERN, name) is not None or re.match(_TENSOR_PIPE_PATTERN, name) is not None
            or (re.match(_STALL_ANY, name) is not None and not name.endswith("_not_issued")))


_SASS = "sass_thread_inst_executed_op_"
for _op in ("ffma", "fadd", "fmul", "dfma", "dadd", "dmul", "hfma", "hadd", "hmul"):
    for _unit in ("sm", "smsp"):
        _ANY_UNIT_ALIASES[f"{_unit}__{_SASS}{_op}_pred_on.sum"] = f"{_op}_count"
    _ANY_UNIT_ALIASES[f"smsp__{_SASS}{_op}_pred_on.sum.per_cycle_elapsed"] = f"{_op}_per_cycle"

# NERSC's hierarchical roofline (and most hand-picked `--metrics` lists) count all traffic at each cache level:
# `lts__t_bytes.sum`, `l1tex__t_bytes.sum`. ncu's own charts use L2→SM and L1 writeback bytes instead (above), which
# win where both were collected; these fill in where only NERSC's were.
_NERSC_BYTES = (("l2", "lts__t_bytes.sum"), ("l1", "l1tex__t_bytes.sum"))
for _level, _metric in _NERSC_BYTES:
    _ANY_UNIT_ALIASES[_metric] = f"{_level}_all_bytes"
    _ANY_UNIT_ALIASES[f"{_metric}.per_second"] = f"{_level}_all_bytes_per_s"

_WANTED_EXACT = {key.split("|", 1)[0] for key in _ALIASES} | set(_ANY_UNIT_ALIASES)

_TENSOR_COUNT = re.compile(r"^sm__ops_path_tensor_src_(?P<dtype>.+)\.sum$")
_TENSOR_PEAK = re.compile(r"^sm__ops_path_tensor_src_(?P<dtype>.+)\.sum\.peak_sustained$")
_TENSOR_PATTERN = r"^sm__ops_path_tensor_src_.+\.sum(\.peak_sustained)?$"

# Identifier columns (details and raw); everything else on the raw page is a metric.
_ID_COLUMNS = {
    "ID": "launch_id",
    "Process ID": "process_id",
    "Process Name": "process_name",
    "Host Name": "host_name",
    "Kernel Name": "kernel_name",
    "Kernel Time": "kernel_time",
    "Context": "context_id",
    "Stream": "stream_id",
    "Block Size": "block_size",
    "Grid Size": "grid_size",
    "Device": "device_index",
    "CC": "compute_capability",
}
_RULE_COLUMNS = {
    "Rule Name": "rule_name",
    "Rule Type": "rule_type",
    "Rule Description": "rule_message",
    "Estimated Speedup Type": "speedup_type",
    "Estimated Speedup": "speedup_pct",
}
_RAW_STRING_METRICS = {
    "device__attribute_display_name": "device_name",
    "device__attribute_compute_capability_major": "cc_major",
    "device__attribute_compute_capability_minor": "cc_minor",
}


@dataclass(frozen=True)
class NcuHeader:
    """Where the CSV header is and what it says."""

    line_index: int  # 0-based line number of the `"ID",` header
    columns: list[str]
    page: str  # "details" or "raw"


def _split_line(path: Path, text: str, line: int | None) -> list[str]:
    """Return one CSV line's fields; a line the csv module cannot split is a damaged export."""
    try:
        return next(csv.reader([text]), [])
    except csv.Error as error:
        raise TraceFormatError(path, f"a line cannot be split into CSV fields ({error})", "pass the CSV exactly as `ncu --csv` wrote it", line=line) from error


def find_header(path: Path) -> NcuHeader | None:
    """Return the ncu CSV header of the file, or None when there is none in the first 64 MB."""
    seen = 0
    with path.open("rb") as handle:
        for index, line in enumerate(handle):
            if line.startswith(HEADER_PREFIX):
                text = line.decode("utf-8", errors="replace").rstrip("\r\n")
                if "\r" in text:
                    raise TraceFormatError(path, "lines end in a carriage return alone (old Mac line endings), which no CSV reader here splits",
                                           "convert them first: tr '\\r' '\\n' < in.csv > out.csv", line=index + 1)
                columns = _split_line(path, text, index + 1)
                if "Kernel Name" not in columns:
                    return None
                page = "details" if "Metric Name" in columns else "raw"
                return NcuHeader(index, columns, page)
            seen += len(line)
            if seen > _MAX_PREAMBLE_BYTES:
                return None
    return None


def parse(path: str | Path, header: NcuHeader | None = None, notes: list[str] | None = None, cut_at_line: int | None = None) -> pl.DataFrame:
    """Return one row per profiled kernel launch, in the KERNELS schema (durations in ns, bytes, Hz).

    `cut_at_line`: the file ends inside this line without a newline; its last launch may lack metrics, so it is left
    out and a sentence saying so is appended to `notes`."""
    path = Path(path)
    header = header or find_header(path)
    if header is None:
        raise TraceFormatError(path, "no Nsight Compute CSV header (a line starting with \"ID\",\"Process ID\")", _EXPORT_HINT)
    longest = max(header.columns, key=len, default="")
    if len(longest) > _MAX_COLUMN_NAME:
        raise TraceFormatError(path, f"header column {header.columns.index(longest) + 1} is {len(longest):,} characters long: the header is damaged",
                               "pass the CSV exactly as `ncu --csv` wrote it", line=header.line_index + 1)
    missing = [c for c in (_DETAILS_REQUIRED if header.page == "details" else ("ID", "Kernel Name")) if c not in header.columns]
    if missing:
        raise TraceFormatError(path, f"the header lacks the column(s) {', '.join(repr(m) for m in missing)}",
                               "pass the CSV exactly as `ncu --csv` wrote it (a damaged or hand-edited header?)", line=header.line_index + 1)
    # After the header checks: the cut-short test counts the fields a row needs by the header's columns.
    _check_not_truncated(path, header)
    wide = None
    if header.page == "details":
        long, identity, rules = _read_details(path, header, notes)
    else:
        long, identity, wide = _read_raw(path, header, notes)
        rules = None
    if identity.height == 0:
        raise TraceFormatError(path, "the export has a header but no kernel launches", "was any kernel profiled? check the ncu filters (-k, -c)")
    frame = _assemble(long, identity, rules, notes, wide)
    if cut_at_line is not None and frame.height:
        last = int(reduced(frame["launch_id"].max()) or 0)
        frame = frame.filter(pl.col("launch_id") != last)
        if notes is not None:
            notes.append(f"the file ends inside line {cut_at_line} without a newline, within launch {last}: it looks cut short; "
                         f"launch {last} was left out and {frame.height} complete launch(es) were read")
        if frame.height == 0:
            raise TraceFormatError(path, "the file is cut short inside its only launch", "re-export the full report", line=cut_at_line)
    return frame


def _read_csv(path: Path, header: NcuHeader, columns: list[str] | None = None) -> pl.DataFrame:
    try:
        frame = pl.read_csv(
            path,
            skip_lines=header.line_index,
            infer_schema=False,
            truncate_ragged_lines=True,
            comment_prefix="==",
            columns=columns,
            encoding="utf8-lossy",
            glob=False,  # a path is a path: `run[1].csv` or `run*.csv` name one file, not a pattern
        )
    except (pl.exceptions.PolarsError, OSError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TraceFormatError(path, f"cannot read the CSV after the header: {first_line}", _EXPORT_HINT) from error
    # A stray quote or control byte in the header makes the csv module and polars split it differently.
    required = _DETAILS_REQUIRED if header.page == "details" else ("ID", "Kernel Name")
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise TraceFormatError(path, f"the header cannot be split into columns consistently ({', '.join(missing)} not found): it looks damaged",
                               "pass the CSV exactly as `ncu --csv` wrote it", line=header.line_index + 1)
    return frame


def _check_not_truncated(path: Path, header: NcuHeader) -> None:
    """Raise when the file ends part-way through a row (a copy cut short, a crashed capture)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        handle.seek(max(0, size - 1_048_576))
        tail = handle.read()
    if tail.endswith(b"\n"):
        return
    last_line = tail.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
    if last_line.startswith("=="):
        return
    if last_line.startswith('"ID",'):
        raise TraceFormatError(path, "the file ends inside its header line: the export looks truncated",
                               "re-export the full report with ncu -i, or copy the whole file", line=header.line_index + 1)
    fields = _split_line(path, last_line.replace("\r", " "), None)
    needed = len(header.columns) if header.page == "raw" else header.columns.index("Metric Value") + 1
    if last_line.count('"') % 2 == 1 or len(fields) < needed:
        with path.open("rb") as handle:
            line_count = sum(1 for _ in handle)
        raise TraceFormatError(
            path,
            f"the last row has {len(fields)} of {needed} fields: the export looks truncated",
            "re-export the full report with ncu -i, or copy the whole file",
            line=line_count,
        )


# A number with one or two digits after a comma: a decimal comma, which no '.'-decimal locale writes (ncu groups
# thousands by three: `13,485`, `9,495.42`). In such a file dots group thousands (`2.508.800`, `9.495,42`).
_DECIMAL_COMMA = r"^\s*-?(?:\d{1,3}(?:\.\d{3})+|\d+),\d{1,2}\s*$"
LOCALE_SAMPLE_ROWS = 20_000
DECIMAL_COMMA_NOTE = "numbers use a decimal comma (the profiling machine's locale): read as decimals"


def cells_use_decimal_comma(sample: pl.DataFrame) -> bool:
    """True when number cells (a sample of the export's rows, text columns) are written with a decimal comma."""
    return bool(sample.unpivot(value_name="cell")["cell"].str.contains(_DECIMAL_COMMA).any())


def point_decimal(value: pl.Expr) -> pl.Expr:
    """Return decimal-comma number text in '.'-decimal form: `9.495,42` → `9495.42`."""
    return value.str.replace_all(".", "", literal=True).str.replace(",", ".", literal=True)


def _identity_expressions(columns: list[str]) -> list[pl.Expr]:
    # A compute capability is `major.minor` whatever the locale wrote (`12,0`).
    return [(pl.col(name).str.replace(",", ".", literal=True) if name == "CC" else pl.col(name)).alias(alias)
            for name, alias in _ID_COLUMNS.items() if name in columns]


def _read_details(path: Path, header: NcuHeader, notes: list[str] | None = None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
    frame = _read_csv(path, header)
    frame = frame.filter(pl.col("ID").is_not_null() & (pl.col("ID").str.strip_chars() != ""))
    ids = _identity_expressions(frame.columns)
    frame = frame.with_columns(ids)
    launch = ["launch_id", "process_id"] if "Process ID" in frame.columns else ["launch_id"]
    identity = frame.group_by(launch, maintain_order=True).agg(
        [pl.col(alias).first() for alias in (e.meta.output_name() for e in ids) if alias not in launch]
    )
    metric_rows = frame.filter(pl.col("Metric Name").is_not_null() & (pl.col("Metric Name") != ""))
    long = metric_rows.select(
        *[pl.col(c) for c in launch],
        pl.col("Metric Name").alias("metric"),
        pl.col("Metric Unit").fill_null("").alias("unit"),
        pl.col("Metric Value").alias("value"),
    )
    decimal_comma = long.height > 0 and cells_use_decimal_comma(long.head(LOCALE_SAMPLE_ROWS).select("value"))
    if decimal_comma:
        long = long.with_columns(point_decimal(pl.col("value")))
        if notes is not None:
            notes.append(DECIMAL_COMMA_NOTE)
    rules = None
    if "Rule Name" in frame.columns:
        rule_rows = frame.filter(pl.col("Rule Name").is_not_null() & (pl.col("Rule Name") != ""))
        fields = []
        for name, alias in _RULE_COLUMNS.items():
            if name == "Rule Name":
                continue
            value = pl.col(name) if name in frame.columns else pl.lit(None, dtype=pl.String)
            if alias == "speedup_pct":
                value = parse_number(point_decimal(value) if decimal_comma else value)
            fields.append(value.alias(alias.removeprefix("rule_")))
        rules = rule_rows.select(
            *[pl.col(c) for c in launch],
            pl.struct(
                pl.col("Section Name").alias("section"),
                pl.col("Rule Name").alias("name"),
                *fields,
            ).alias("rule"),
        )
    return long, identity, rules


def _read_raw(path: Path, header: NcuHeader, notes: list[str] | None = None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
    """Return (metric rows not keyed by KERNELS, identity per launch, keyed metrics and launch_failed per launch)."""
    metric_columns = [c for c in header.columns if c not in _ID_COLUMNS and (c in _RAW_STRING_METRICS or is_wanted_metric(c))]
    # Only the most precise stall form the page has is used: the others (dozens of PC-sampling columns) are not read.
    forms = [re.compile(pattern) for _, pattern in _STALL_PATTERNS]
    present = [i for i, form in enumerate(forms) if any(form.match(c) for c in metric_columns)]
    if present:
        metric_columns = [c for c in metric_columns if not any(form.match(c) for i, form in enumerate(forms) if i != present[0])]
    id_columns = [c for c in header.columns if c in _ID_COLUMNS]
    # The last column is read too: all raw fields are quoted, so a null there means a short (cut) row.
    last = header.columns[-1]
    selected = list(dict.fromkeys([*id_columns, *metric_columns, last]))
    frame = _read_csv(path, header, columns=selected)
    if frame.height == 0:
        return pl.DataFrame(), pl.DataFrame(), None
    units_row = frame.row(0, named=True)
    data = frame.slice(1).filter(pl.col("ID").is_not_null() & (pl.col("ID") != ""))
    if data.height and data[last].is_null().any():
        bad = data.with_row_index("row").filter(pl.col(last).is_null())["row"][0]
        raise TraceFormatError(
            path,
            f"data row {bad + 1} has fewer fields than the header: the raw export looks truncated",
            "re-export the full report with ncu -i --page raw --csv",
            line=header.line_index + 3 + int(bad),
        )
    ids = _identity_expressions(data.columns)
    data = data.with_columns(ids)
    launch = ["launch_id", "process_id"] if "Process ID" in data.columns else ["launch_id"]
    # ncu numbers each launch of a process once: a row that repeats an ID (a damaged or concatenated export) would
    # multiply rows in every join on the launch, with the square of its repeats. The first row of each ID is kept.
    first = data.select(pl.struct(launch).is_first_distinct()).to_series()
    if not first.all():
        repeated = int((~first).sum())
        data = data.filter(first)
        if notes is not None:
            notes.append(f"{counted(repeated, 'row')} repeat the launch ID of an earlier row (ncu numbers each launch once: a damaged or "
                         "concatenated export): only the first row of each ID was read")
    strings = [pl.col(c).alias(a) for c, a in _RAW_STRING_METRICS.items() if c in data.columns]
    identity = data.select(
        *[pl.col(alias) for alias in (e.meta.output_name() for e in ids)],
        *strings,
    )
    numeric = [c for c in metric_columns if c not in _RAW_STRING_METRICS]
    # Stall reasons go straight from their columns into one list per launch: as rows they would be a fifth of the long
    # frame, then regex-matched and gathered again.
    stall_columns = []
    if present:
        unit_name, form = _STALL_PATTERNS[present[0]]
        stall_columns = [(c, m.group("reason")) for c in numeric if (m := re.match(form, c)) and not c.endswith("_not_issued")]
    # A raw row holds hundreds of numbers: its first rows show the locale.
    if numeric and cells_use_decimal_comma(data.head(64).select(numeric)):
        data = data.with_columns([point_decimal(pl.col(c)) for c in numeric])
        if notes is not None:
            notes.append(DECIMAL_COMMA_NOTE)
    numbers = parse_number_columns(data, numeric)
    if stall_columns:
        numeric = [c for c in numeric if c not in {c for c, _ in stall_columns}]
        # Through rows and back: a list of structs built column by column costs ten times as much.
        stalls = (numbers.select([c for c, _ in stall_columns]).with_row_index("_row")
                  .unpivot(index="_row", variable_name="reason", value_name="value")
                  .with_columns(pl.col("reason").replace_strict(dict(stall_columns), return_dtype=pl.String))
                  .group_by("_row", maintain_order=True).agg(pl.struct("reason", "value").alias("stalls")).sort("_row"))
        identity = identity.with_columns(stalls["stalls"], pl.lit(unit_name).alias("stall_unit"))
    # Each column has one unit, so its schema key and scale are settled once per column, and the keyed columns go
    # straight into the per-launch frame: only the others (tensor datatypes, pipes) are reshaped into rows.
    keyed: dict[str, list[pl.Expr]] = {}
    unkeyed = []
    for column in numeric:
        key, factor = _key_and_factor(column, units_row.get(column) or "")
        if key is None:
            unkeyed.append(column)
        else:
            keyed.setdefault(key, []).append(pl.col(column) * factor)
    wide = pl.concat([data.select(launch), numbers.select(
        *[pl.coalesce(parts).alias(key) for key, parts in keyed.items()],
        _all_cells_empty(data, numbers, [c for c in numeric if is_measurement(c)]).alias("launch_failed"),
    )], how="horizontal")
    units = pl.DataFrame(
        {"metric": unkeyed, "unit": [units_row.get(c) or "" for c in unkeyed]},
        schema={"metric": pl.String, "unit": pl.String},
    )
    long = (
        data.select(*launch, *unkeyed)
        .unpivot(index=launch, on=unkeyed, variable_name="metric", value_name="value")
        .join(units, on="metric", how="left")
        # With no metric column (a damaged header), the value column would have no type at all.
        .with_columns(pl.col("metric").cast(pl.String), pl.col("value").cast(pl.String), pl.col("unit").cast(pl.String))
    )
    return long, identity, wide


def _key_and_factor(metric: str, unit: str) -> tuple[str | None, float]:
    """Return the KERNELS key a metric with this unit feeds (None if none) and the factor into the key's base unit."""
    base, factor = unit_of(unit)
    return _ALIASES.get(f"{metric}|{base}") or _ANY_UNIT_ALIASES.get(metric), factor


def is_measurement(metric: str) -> bool:
    """Whether a metric is measured while the launch runs. Device attributes, peak constants, derived counts and the
    launch configuration are not: ncu still fills them in for a launch whose every measurement is nan (a real GTX 1650
    raw page's failed launch keeps its `dram__bytes.avg.peak_sustained` of 8 and its `device__attribute_*`)."""
    return not (metric.startswith(("device__attribute_", "derived__", "launch__")) or ".peak_sustained" in metric)


def _measurement_expr(metric: pl.Expr) -> pl.Expr:
    """is_measurement as a polars expression over a column of metric names."""
    return ~(metric.str.starts_with("device__attribute_") | metric.str.starts_with("derived__") | metric.str.starts_with("launch__")
             | metric.str.contains(".peak_sustained", literal=True))


def _all_cells_empty(data: pl.DataFrame, numbers: pl.DataFrame, columns: list[str]) -> pl.Series:
    """Per launch (row), whether every one of its metric cells is empty (null when there are no metric columns)."""
    if not columns:
        return pl.Series([None] * data.height, dtype=pl.Boolean)
    # Only a launch with no number at all can be all empty: the text test runs on those rows alone.
    no_number = numbers.select(pl.all_horizontal([pl.col(c).is_null() for c in columns])).to_series()
    if not no_number.any():
        return no_number
    rows = data.select(columns).filter(no_number).select(pl.all_horizontal([_empty_cell(pl.col(c)) for c in columns])).to_series()
    return no_number.scatter(no_number.arg_true(), rows)


def _empty_cell(value: pl.Expr) -> pl.Expr:
    """True for a cell that holds no measurement: empty, `nan` or `n/a` (a launch that failed under profiling)."""
    return value.is_null() | value.str.strip_chars().str.to_lowercase().is_in(["", "nan", "-nan", "n/a"])


def _assemble(long: pl.DataFrame, identity: pl.DataFrame, rules: pl.DataFrame | None, notes: list[str] | None = None,
              wide: pl.DataFrame | None = None) -> pl.DataFrame:
    """Return the KERNELS frame from metric rows (launch, metric, unit, value), the identity per launch and the rule
    results; `wide` holds metrics already keyed per launch, with launch_failed (the raw page's)."""
    launch: list[str] = [c for c in ("launch_id", "process_id") if c in identity.columns]
    unit = base_unit(pl.col("unit"))
    long = long.with_columns(
        (parse_number(pl.col("value")) * unit_factor(pl.col("unit"))).alias("number"),
        pl.coalesce(
            pl.concat_str(pl.col("metric"), pl.lit("|"), unit).replace_strict(_ALIASES, default=None, return_dtype=pl.String),
            pl.col("metric").replace_strict(_ANY_UNIT_ALIASES, default=None, return_dtype=pl.String),
        ).alias("key"),
    )
    known = long.filter(pl.col("key").is_not_null() & pl.col("number").is_not_null())
    if known.height:
        pivoted = known.pivot(on="key", index=launch, values="number", aggregate_function="first")
    else:
        pivoted = identity.select(launch)
    if wide is None:
        # A real .ncu-rep holds a launch whose every measured metric is nan beside filled-in constants.
        failed = long.filter(_measurement_expr(pl.col("metric"))).group_by(launch).agg(_empty_cell(pl.col("value")).all().alias("launch_failed"))
        wide = identity.select(launch).unique(maintain_order=True).join(pivoted, on=launch, how="left").join(failed, on=launch, how="left")
    else:
        wide = wide.join(pivoted, on=launch, how="left")
    tensor = _tensor_columns(long, launch).join(_tensor_pipe(long, launch), on=launch, how="full", coalesce=True)
    # The raw page hands its stalls over already gathered per launch (identity); other inputs carry them as rows.
    stalls = _stall_columns(long, launch) if "stalls" not in identity.columns else identity.select(launch).head(0)
    frame = identity.join(wide, on=launch, how="left").join(tensor, on=launch, how="left").join(stalls, on=launch, how="left")
    if rules is not None and rules.height:
        grouped = rules.group_by(launch, maintain_order=True).agg(pl.col("rule").alias("ncu_rules"))
        frame = frame.join(grouped, on=launch, how="left")
    nersc = _levels_from_nersc_counts(frame)
    if nersc and notes is not None:
        notes.append(f"{' and '.join(level.upper() for level in nersc)} bytes are NERSC's all-traffic counts ("
                     f"{', '.join(metric for level, metric in _NERSC_BYTES if level in nersc)}), ncu's roofline-chart metrics "
                     "(L2→SM, L1 writeback) not being in the export: arithmetic intensity at that level follows NERSC's convention")
    frame = _derive(frame)
    if "grid_size" in frame.columns and "launch_failed" in frame.columns:
        # No launch runs a grid of (0, 0, 0): ncu records one for a launch that failed under profiling.
        empty_grid = pl.col("grid_size").cast(pl.String).str.contains(r"^\(\s*0\s*,\s*0\s*,\s*0\s*\)$|^0$").fill_null(False)
        frame = frame.with_columns(launch_failed=pl.when(empty_grid).then(True).otherwise(pl.col("launch_failed")))
    if "device_index" in frame.columns:
        # The Device column holds the device's index (`0`); a column that holds a name instead names the GPU.
        device = pl.col("device_index").cast(pl.String).str.strip_chars()
        named = pl.when(device.str.contains(r"[A-Za-z]")).then(device)
        frame = frame.with_columns(device_name=pl.coalesce(pl.col("device_name"), named) if "device_name" in frame.columns else named)
    frame = frame.with_columns(
        pl.col("launch_id").cast(pl.Int64, strict=False),
        *[pl.col(c).cast(pl.Int64, strict=False) for c in ("process_id", "context_id", "stream_id", "device_index") if c in frame.columns],
    )
    frame = frame.with_columns(short_name=pl.col("kernel_name").replace(
        {name: short_kernel_name(name) for name in frame["kernel_name"].unique().drop_nulls().to_list()}
    ))
    return _without_negatives(conform(frame, KERNELS), notes).sort("launch_id", "process_id", nulls_last=True)


# Times, counts, bytes, rates and percentages cannot be negative: a negative value is a damaged cell, not a quantity.
_NON_NEGATIVE = [name for name, dtype in KERNELS.items() if dtype == pl.Float64]


def _without_negatives(frame: pl.DataFrame, notes: list[str] | None = None) -> pl.DataFrame:
    """Return the frame with negative, NaN and infinite quantities as null; how many were negative goes to `notes`."""
    if notes is not None and frame.height:
        negative = int(frame.select(pl.sum_horizontal([(pl.col(c) < 0).fill_null(False) for c in _NON_NEGATIVE]).sum()).item())
        if negative:
            notes.append(f"{negative} negative metric value(s) (a time, count, byte or rate below zero: a damaged cell) were read as unknown")
    # Infinite too: a quantity derived from a damaged one (cycles over a clock of 1e-320 Hz) is not a number either.
    return frame.with_columns([pl.when((pl.col(c) >= 0) & pl.col(c).is_finite()).then(pl.col(c)).alias(c) for c in _NON_NEGATIVE])


def _tensor_columns(long: pl.DataFrame, launch: list[str]) -> pl.DataFrame:
    """Return per launch the tensor ops of the dominant datatype's family (sum of all), its dtype and peak/cycle."""
    counts = long.filter(pl.col("metric").str.contains(_TENSOR_COUNT.pattern) & pl.col("number").is_not_null())
    if counts.height == 0:
        return pl.DataFrame(schema={**{c: long.schema[c] for c in launch}, "tensor_flop": pl.Float64})
    counts = counts.with_columns(pl.col("metric").str.extract(_TENSOR_COUNT.pattern, 1).alias("dtype"))
    peaks = long.filter(pl.col("metric").str.contains(_TENSOR_PEAK.pattern) & pl.col("number").is_not_null()).select(
        *launch,
        pl.col("metric").str.extract(_TENSOR_PEAK.pattern, 1).alias("dtype"),
        pl.col("number").alias("peak_per_cycle"),
    )
    per_dtype = counts.group_by([*launch, "dtype"]).agg(pl.col("number").sum())
    if peaks.height:
        per_dtype = per_dtype.join(peaks, on=[*launch, "dtype"], how="left")
    else:
        per_dtype = per_dtype.with_columns(peak_per_cycle=pl.lit(None, dtype=pl.Float64))
    return per_dtype.group_by(launch).agg(
        pl.col("number").sum().alias("tensor_flop"),
        pl.when(pl.col("number").max() > 0).then(pl.col("dtype").sort_by("number").last()).alias("tensor_dtype"),
        pl.col("peak_per_cycle").sort_by("number").last().alias("peak_tensor_flop_per_cycle"),
    )


def _stall_columns(long: pl.DataFrame, launch: list[str]) -> pl.DataFrame:
    """Return per launch its warp stall reasons (`stalls`: reason, value) from the most precise form the export has,
    and that form's unit (`stall_unit`)."""
    frames = []
    # A prefix test first: the regexes then run on the few hundred stall rows, not on every metric of every launch.
    candidates = long.filter(pl.col("metric").str.starts_with("smsp__") & pl.col("number").is_not_null())
    for rank, (unit, pattern) in enumerate(_STALL_PATTERNS):
        found = candidates.filter(pl.col("metric").str.contains(pattern) & ~pl.col("metric").str.ends_with("_not_issued"))
        frames.append(found.select(*launch, pl.col("metric").str.extract(pattern, 1).alias("reason"), pl.col("number").alias("value"),
                                   pl.lit(rank).alias("form"), pl.lit(unit).alias("stall_unit")))
    labelled = long.filter(pl.col("metric").str.contains(_STALL_LABEL.pattern) & pl.col("number").is_not_null())
    if labelled.height:
        reason = pl.coalesce(pl.col("metric").str.extract(_STALL_LABEL.pattern, 1), pl.col("metric").str.extract(_STALL_LABEL.pattern, 2))
        frames.append(labelled.select(*launch, reason.str.to_lowercase().str.replace_all(" ", "_").alias("reason"), pl.col("number").alias("value"),
                                      pl.lit(len(_STALL_PATTERNS)).alias("form"), pl.lit("cycles per issued instruction").alias("stall_unit")))
    stalls = pl.concat(frames)
    key_schema = {c: long.schema[c] for c in launch}
    if stalls.height:
        best = stalls.group_by(launch).agg(pl.col("form").min().alias("best"))
        stalls = (stalls.join(best, on=launch).filter(pl.col("form") == pl.col("best"))
                  .group_by(launch, maintain_order=True)
                  .agg(pl.struct("reason", "value").alias("stalls"), pl.col("stall_unit").first()))
    else:
        stalls = pl.DataFrame(schema={**key_schema, "stalls": pl.List(pl.Struct({"reason": pl.String, "value": pl.Float64})), "stall_unit": pl.String})
    return stalls


def _tensor_pipe(long: pl.DataFrame, launch: list[str]) -> pl.DataFrame:
    """Return per launch the busiest tensor pipe's utilisation (`tensor_pipe_pct`)."""
    pipe = (long.filter(pl.col("metric").str.starts_with("sm__") & pl.col("metric").str.contains(_TENSOR_PIPE_PATTERN) & pl.col("number").is_not_null())
            .group_by(launch).agg(pl.col("number").max().alias("tensor_pipe_pct")))
    if pipe.height == 0:
        pipe = pl.DataFrame(schema={**{c: long.schema[c] for c in launch}, "tensor_pipe_pct": pl.Float64})
    return pipe


def rule_frame(rows: list[dict[str, object]]) -> pl.DataFrame | None:
    """Return rule results given as rows (launch_id, section, name, type, message, speedup_type, speedup_pct) as the
    per-launch `rule` struct frame that _assemble takes; None when there are none."""
    if not rows:
        return None
    return pl.DataFrame(rows, schema={"launch_id": pl.String, "section": pl.String, "name": pl.String, "type": pl.String,
                                      "message": pl.String, "speedup_type": pl.String, "speedup_pct": pl.Float64}).select(
        "launch_id", pl.struct("section", "name", "type", "message", "speedup_type", "speedup_pct").alias("rule"))


def _col(frame: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in frame.columns else pl.lit(None, dtype=pl.Float64)


def _levels_from_nersc_counts(frame: pl.DataFrame) -> list[str]:
    """Return the cache levels whose bytes will come from NERSC's counts: measured there, ncu's chart metric not."""
    levels = []
    for level, _ in _NERSC_BYTES:
        nersc = [pl.col(c).is_not_null() for c in (f"{level}_all_bytes", f"{level}_all_bytes_per_s") if c in frame.columns]
        if not nersc:
            continue
        chart = pl.col(f"{level}_bytes_per_s").is_null() if f"{level}_bytes_per_s" in frame.columns else pl.lit(True)
        if frame.select((pl.any_horizontal(nersc) & chart).any()).item():
            levels.append(level)
    return levels


def _derive(frame: pl.DataFrame) -> pl.DataFrame:
    """Turn the metric columns into the schema's quantities: counts, rates and profile peaks."""
    def c(name: str) -> pl.Expr:
        return _col(frame, name)

    sm_clock = c("sm_clock_hz")
    smsp_clock = pl.coalesce(c("smsp_clock_hz"), sm_clock)
    # `ncu --metrics` exports without gpu__time_duration still time the kernel in cycles: duration = cycles ÷ clock.
    frame = frame.with_columns(duration_ns=pl.coalesce(c("duration_ns"), c("sm_cycles_elapsed") / sm_clock * 1e9,
                                                       c("elapsed_cycles") / sm_clock * 1e9))
    duration_s = c("duration_ns") / 1e9

    def weighted(parts: list[tuple[float, str]]) -> pl.Expr:
        present = [c(name) for _, name in parts if name in frame.columns]
        if not present:
            return pl.lit(None, dtype=pl.Float64)
        return pl.sum_horizontal([c(name).fill_null(0) * weight for weight, name in parts if name in frame.columns])

    fma_ops = {
        "fp32": pl.coalesce(c("ffma_ops_per_cycle"), c("ffma_per_cycle") * 2),
        "fp64": pl.coalesce(c("dfma_ops_per_cycle"), c("dfma_per_cycle") * 2),
    }
    # FLOP counts follow ncu's roofline convention: FP64/FP32 = 2·FMA + ADD + MUL; FP16 = 4·HFMA + 2·HADD + 2·HMUL
    # (packed half2 instructions). NERSC/CARM count FP16 as 2·HFMA + HADD + HMUL, half of this.
    counts = {
        "fp64": weighted([(2, "dfma_count"), (1, "dadd_count"), (1, "dmul_count")]),
        "fp32": weighted([(2, "ffma_count"), (1, "fadd_count"), (1, "fmul_count")]),
        "fp16": weighted([(4, "hfma_count"), (2, "hadd_count"), (2, "hmul_count")]),
    }
    rates_per_cycle = {
        "fp64": pl.sum_horizontal(fma_ops["fp64"].fill_null(0), c("dadd_per_cycle").fill_null(0), c("dmul_per_cycle").fill_null(0))
        if any(n in frame.columns for n in ("dfma_ops_per_cycle", "dfma_per_cycle"))
        else pl.lit(None, dtype=pl.Float64),
        "fp32": pl.sum_horizontal(fma_ops["fp32"].fill_null(0), c("fadd_per_cycle").fill_null(0), c("fmul_per_cycle").fill_null(0))
        if any(n in frame.columns for n in ("ffma_ops_per_cycle", "ffma_per_cycle"))
        else pl.lit(None, dtype=pl.Float64),
        "fp16": weighted([(4, "hfma_per_cycle"), (2, "hadd_per_cycle"), (2, "hmul_per_cycle")]),
    }
    dram_bytes = pl.coalesce(
        c("dram_bytes"),
        pl.when(c("dram_read_bytes").is_not_null() | c("dram_write_bytes").is_not_null()).then(
            c("dram_read_bytes").fill_null(0) + c("dram_write_bytes").fill_null(0)
        ),
    )
    out = {}
    for p in ("fp64", "fp32", "fp16"):
        rate = pl.coalesce(counts[p] / duration_s, rates_per_cycle[p] * smsp_clock)
        out[f"{p}_flop_per_s"] = rate
        out[f"{p}_flop"] = pl.coalesce(counts[p], rate * duration_s)
    out["tensor_flop_per_s"] = c("tensor_flop") / duration_s
    out["dram_bytes"] = pl.coalesce(dram_bytes, c("dram_bytes_per_s") * duration_s)
    out["dram_bytes_per_s"] = pl.coalesce(dram_bytes / duration_s, c("dram_bytes_per_s"))
    for level in ("l2", "l1"):
        all_bytes = pl.coalesce(c(f"{level}_all_bytes"), c(f"{level}_all_bytes_per_s") * duration_s)
        out[f"{level}_bytes"] = pl.coalesce(c(f"{level}_bytes_per_s") * duration_s, all_bytes)
        out[f"{level}_bytes_per_s"] = pl.coalesce(c(f"{level}_bytes_per_s"), all_bytes / duration_s)
    out["peak_fp64_flop_per_s"] = c("peak_fp64_flop_per_cycle") * sm_clock
    out["peak_fp32_flop_per_s"] = c("peak_fp32_flop_per_cycle") * sm_clock
    out["peak_fp16_flop_per_s"] = c("peak_fp16_flop_per_cycle") * sm_clock
    out["peak_tensor_flop_per_s"] = c("peak_tensor_flop_per_cycle") * sm_clock
    out["peak_dram_bytes_per_s"] = c("peak_dram_bytes_per_cycle") * c("dram_clock_hz")
    out["peak_l2_bytes_per_s"] = c("peak_l2_bytes_per_cycle") * c("l2_clock_hz")
    out["peak_l1_bytes_per_s"] = c("peak_l1_bytes_per_cycle") * c("l1_clock_hz")
    shared = [c(name) for name in ("static_shared_bytes_per_block", "dynamic_shared_bytes_per_block") if name in frame.columns]
    out["shared_bytes_per_block"] = pl.when(pl.any_horizontal([e.is_not_null() for e in shared])).then(pl.sum_horizontal(shared)) if shared else pl.lit(None, dtype=pl.Float64)
    frame = frame.with_columns(**out)
    # 2019.5 has no Block/Grid columns: launch statistics rows carry flattened sizes instead.
    for column, scalar in (("block_size", "block_threads"), ("grid_size", "grid_blocks")):
        if scalar in frame.columns:
            as_text = pl.col(scalar).cast(pl.Int64, strict=False).cast(pl.String)
            frame = frame.with_columns(pl.coalesce(_col(frame, column).cast(pl.String), as_text).alias(column))
    if "cc_major" in frame.columns and "compute_capability" not in frame.columns:
        frame = frame.with_columns(
            compute_capability=pl.concat_str(pl.col("cc_major"), pl.lit("."), pl.col("cc_minor").fill_null("0"))
        )
    return frame


# An Itanium-mangled name (`ncu --print-kernel-base mangled`, nsys's `:mangled` reports): `_Z` then either one
# length-prefixed identifier or `N`, qualifiers and a nested list of them; the function is the last before the
# template arguments (`I`) or the end of the list (`E`). `St` is `std::`.
_MANGLED_START = re.compile(r"_Z(N[rVKRO]*)?")
_MANGLED_PART = re.compile(r"St|(\d{1,9})")


def _mangled_function_name(name: str) -> str | None:
    """Return the function identifier of an Itanium-mangled name, or None for anything else (or a form not read)."""
    start = _MANGLED_START.match(name)
    if start is None:
        return None
    position, last = start.end(), None
    while position < len(name):
        part = _MANGLED_PART.match(name, position)
        if part is None:
            break
        if part.group(1) is None:
            position = part.end()
            continue
        length = int(part.group(1))
        last = name[part.end():part.end() + length]
        position = part.end() + length
        if start.group(1) is None:  # not nested: one identifier
            break
    return last if last and last.isidentifier() else None


_CLOSERS = {"<": ">", "(": ")", "[": "]"}


def closed_if_cut(name: str) -> str:
    """Return a demangled name that a report cut short (nsys stats' console tables end long names at 100 characters
    with `…`) with its ellipsis dropped and its open brackets closed, so that it reads as a whole name; any other name
    unchanged."""
    text = name.rstrip()
    if not text.endswith(("…", "...")):
        return name
    text = text.removesuffix("…").removesuffix("...")
    open_brackets: list[str] = []
    for char in text:
        if char in _CLOSERS:
            open_brackets.append(char)
        elif char in ">)]" and open_brackets and _CLOSERS[open_brackets[-1]] == char:
            open_brackets.pop()
    return text + "".join(_CLOSERS[char] for char in reversed(open_brackets))


def short_kernel_name(name: str) -> str:
    """Return the bare function name: no return type, namespaces, template arguments or parameter list (of a
    demangled or an Itanium-mangled name, or one cut short by a report)."""
    text = closed_if_cut(name.strip())
    mangled = _mangled_function_name(text) if text.startswith("_Z") else None
    if mangled is not None:
        return mangled
    if text.endswith(")"):
        depth = 0
        for index in range(len(text) - 1, -1, -1):
            char = text[index]
            if char == ")":
                depth += 1
            elif char == "(":
                depth -= 1
                if depth == 0:
                    text = text[:index]
                    break
    pieces: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char in "<([":
            depth += 1
        elif char in ">)]" and depth > 0:
            depth -= 1
        if char == " " and depth == 0:
            pieces.append(current)
            current = ""
        else:
            current += char
    pieces.append(current)
    last = next((p for p in reversed(pieces) if p), text)
    depth = 0
    base = ""
    for char in last:
        if char == "<":
            depth += 1
        elif char == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            base += char
    base = base.rsplit("::", 1)[-1] if "::" in base and not base.endswith("::") else base
    return base.strip() or name.strip()


__all__ = ["MEMORY_LEVELS", "NCU_RULE", "PRECISIONS", "closed_if_cut", "find_header", "parse", "short_kernel_name"]


def profiler_hint(header: NcuHeader) -> str:
    """Return which Nsight Compute generation wrote this header (the CSV carries no version string)."""
    columns = set(header.columns)
    if "Kernel Time" in columns:
        era = "2019.x-2021.x"
    elif "Estimated Speedup" in columns:
        era = "2023 or newer"
    elif "Rule Name" in columns:
        era = "2022-2023"
    else:
        era = "2022 or newer"
    return f"Nsight Compute {era}, {header.page} page"


def _read(path: Path, header: NcuHeader, options: ReadOptions) -> Parsed:
    notes: list[str] = []
    kernels = parse(path, header, notes, cut_at_line=options.cut_line)
    return Parsed(kernels, profiler_hint(header), tuple(notes))


def _header_of(page: str) -> Callable[[Head], NcuHeader | None]:
    def sniff(head: Head) -> NcuHeader | None:
        header: NcuHeader | None = head.once("ncu_csv_header", lambda: find_header(head.path)) if head.is_text else None
        return header if header is not None and (header.page == "raw") == (page == "raw") else None
    return sniff


_CSV_ROW = re.compile(r'^"')
FORMATS = (
    Format("ncu-csv-details", "kernels", _read, _header_of("details"), order=80, data_line=_CSV_ROW, joinable=True),
    Format("ncu-csv-raw", "kernels", _read, _header_of("raw"), order=80, data_line=_CSV_ROW, joinable=True),
)
