"""Jetson `tegrastats` logs → one row per sample (schema.TELEMETRY), streamed in batches.

Every variant seen (formats.md §4): Nano, TX1, TX2 (L4T 28/32), Xavier, Xavier NX, AGX Orin JetPack 5/6/7; root and
non-root runs; rails with or without `mW`, two or three values; one- or two-value temperatures in either case;
optional timestamp prefix; format changes mid-file. Lines without `RAM n/nMB` (shell prompts, `date` output) are
skipped and counted. Tokens are found by anchored regexes, never by position.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers.base import Format, Parsed, ReadOptions, cut_note
from traceview.parsers.schema import TELEMETRY, conform
from traceview.wording import counted

SAMPLE_MARKER = re.compile(rb"\bRAM [0-9]+/[0-9]+MB")
_BATCH_LINES = 100_000
_DATE_LINE = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} +[0-9]{1,2} [0-9]{2}:[0-9]{2}:[0-9]{2} \w+ [0-9]{4}$")

_TIMESTAMP = r"(?:^|\s)([0-9]{2}-[0-9]{2}-[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2})\s+RAM\b"
_RAM = r"\bRAM ([0-9]+)/([0-9]+)MB"
_SWAP = r"\bSWAP ([0-9]+)/([0-9]+)MB"
# `CPU [12%@1189,off,...]`, or before L4T 28.2 (TX1) `cpu [12%,0%,0%,0%]@408`: lower case, one clock for all cores.
_CPU = r"\b(?:CPU|cpu) \[([^\]]*)\](?:@([0-9]+))?"
# `EMC 1%@1600` before L4T 28.2; `EMC_FREQ @4266` (the clock alone) on Thor, JetPack 7.
_EMC = r"\bEMC(?:_FREQ)? (?:([0-9]+)%)?(?:@([0-9]+))?"
_GR3D = r"\bGR3D(?:_FREQ)? (?:([0-9]+)%)?(?:@\[?([0-9,]+)\]?)?"  # `GR3D 39%@76` before L4T 28.2
# NAME@41.5C or name@52.968C/52.968C (JetPack 7 adds a second value, which is left out).
_TEMP = r"(?:^|\s)[A-Za-z][A-Za-z0-9_]*@-?[0-9]+(?:\.[0-9]+)?C"
# NAME cur/avg[/max], in mW whether or not the unit is printed. `RAM 1/2MB` fails on the trailing "MB".
_RAIL = r"\b([A-Z][A-Z0-9_]*) ([0-9]+)(?:mW)?/([0-9]+)(?:mW)?(?:/([0-9]+)(?:mW)?)?(?:\s|$)"

# What the splits above yield, cast in one step (strings that are not numbers become null).
_CORE_STRINGS = pl.List(pl.Struct({"load": pl.Float64, "mhz": pl.Float64}))
_TEMPERATURE_STRINGS = pl.List(pl.Struct({"name": pl.String, "celsius": pl.Float64}))
_RAIL_STRINGS = pl.List(pl.Struct({"name": pl.String, "current_mw": pl.Float64, "average_mw": pl.Float64, "max_mw": pl.Float64}))


@dataclass
class ParseReport:
    """What the parser skipped: stray lines (with a few examples) and the date header if any."""

    total_lines: int = 0
    blank_lines: int = 0
    stray_lines: int = 0
    stray_examples: list[tuple[int, str]] = field(default_factory=list)
    date_header: datetime | None = None
    total_samples: int = 0


def _line_blocks(path: Path) -> Iterator[pl.DataFrame]:
    """Yield (line_number, line) frames of the file's lines, blank lines null, in batches, read by polars' CSV reader
    as one column with no quoting: a Python loop over a day-long log costs several times the parse itself."""
    # The one column is declared, not inferred: a stray \x1f (damage) in the first line would otherwise make two, and
    # ends a line there (the rest of such a line is not read).
    lines = pl.scan_csv(path, has_header=False, separator="\x1f", quote_char=None, schema={"line": pl.String}, extra_columns="ignore",
                        encoding="utf8-lossy", raise_if_empty=False, truncate_ragged_lines=True, glob=False)
    yield from lines.with_row_index("line_number", offset=1).collect_batches(chunk_size=_BATCH_LINES)


def _batches(path: Path, report: ParseReport) -> Iterator[tuple[pl.Series, pl.Series]]:
    """Yield (line numbers, sample lines) per block; other lines are counted (and a date header kept) in `report`."""
    for block in _line_blocks(path):
        # Sample lines are read by patterns that allow surrounding blanks, so only the few other lines are stripped.
        frame = block.select(pl.col("line_number").cast(pl.Int64), "line")
        sample = frame["line"].str.contains(SAMPLE_MARKER.pattern.decode()).fill_null(False)
        report.total_lines = int(frame["line_number"][-1]) if frame.height else report.total_lines
        samples = frame.filter(sample)
        # A `date` line counts as the header only before the first sample of the log.
        header_before = (samples["line_number"].first() or report.total_lines + 1) if report.total_samples == 0 else 0
        for number, line in frame.filter(~sample).iter_rows():
            text = (line or "").strip()
            if not text:
                report.blank_lines += 1
                continue
            if "\x00" in text:
                raise TraceFormatError(path, "binary data in a tegrastats log", "pass the text log that tegrastats --logfile wrote", line=number)
            report.stray_lines += 1
            if len(report.stray_examples) < 5:
                report.stray_examples.append((number, text[:120]))
            if report.date_header is None and number < header_before and _DATE_LINE.match(text):
                with contextlib.suppress(ValueError):  # a date-like line that is not a `date` output
                    report.date_header = datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Z %Y")
        report.total_samples += samples.height
        if samples.height:
            yield samples["line_number"], samples["line"]


def _parse_batch(numbers: pl.Series, lines: pl.Series) -> pl.DataFrame:
    text = pl.col("line")
    frame = pl.DataFrame({"line_number": numbers, "line": lines})

    def numbers_of(pattern: str, names: list[str]) -> pl.Expr:
        """The pattern's groups as floats named `names`, null where absent or not a number; one regex pass for all."""
        groups = text.str.extract_groups(pattern).struct.rename_fields(names)
        return groups.cast(pl.Struct(dict.fromkeys(names, pl.Float64)), strict=False).struct.unnest()

    # Lists are split into struct fields of strings and cast once as a whole: the same reads done field by field inside
    # list.eval, or on exploded rows gathered again, cost two to three times as much on a day-long log.
    cpu = frame.select(text.str.extract_groups(_CPU).struct.rename_fields(["cores", "clock"]).struct.unnest())
    # `7%@1728`, `12%` (TX1: one clock for all cores, after the list) or `off`, which reads as (null, null).
    cores = (cpu["cores"].str.replace_all("%", "", literal=True).str.split(",")
             .list.eval(pl.element().str.split_exact("@", 1).struct.rename_fields(["load", "mhz"])).cast(_CORE_STRINGS, strict=False))
    load = cores.list.eval(pl.element().struct.field("load"))
    clock = cpu["clock"].cast(pl.Float64, strict=False)
    mhz = pl.when(clock.is_not_null()).then(pl.lit(clock).repeat_by(load.list.len())).otherwise(cores.list.eval(pl.element().struct.field("mhz")))
    gr3d = text.str.extract_groups(_GR3D).struct
    gr3d_clocks = gr3d.field("2").str.split(",").cast(pl.List(pl.Float64), strict=False)
    temps = text.str.extract_all(_TEMP).list.eval(
        pl.element().str.strip_chars().str.strip_chars_end("C").str.split_exact("@", 1).struct.rename_fields(["name", "celsius"]))
    # `VDD_GPU_SOC 2798mW/2798mW[/3000mW]` → VDD_GPU_SOC/2798/2798[/3000], four fields
    rails = text.str.extract_all(_RAIL).list.eval(
        pl.element().str.strip_chars().str.replace_all("mW", "", literal=True).str.replace(" ", "/", literal=True)
        .str.split_exact("/", 3).struct.rename_fields(["name", "current_mw", "average_mw", "max_mw"]))
    return frame.select(
        "line_number",
        text.str.extract(_TIMESTAMP, 1).str.strptime(pl.Datetime("ms"), "%m-%d-%Y %H:%M:%S", strict=False).alias("timestamp"),
        numbers_of(_RAM, ["ram_used_mb", "ram_total_mb"]),
        numbers_of(_SWAP, ["swap_used_mb", "swap_total_mb"]),
        pl.lit(load).alias("cpu_load_pct"),
        mhz.alias("cpu_mhz"),
        numbers_of(_EMC, ["emc_pct", "emc_mhz"]),
        gr3d.field("1").cast(pl.Float64, strict=False).alias("gpu_pct"),
        gr3d_clocks.alias("gpu_mhz_per_gpc"),
        gr3d_clocks.list.max().alias("gpu_mhz"),
        # Names become categorical on the whole column at once: inside each list it is the slowest step.
        temps.cast(_TEMPERATURE_STRINGS, strict=False).cast(TELEMETRY["temperatures"]).alias("temperatures"),
        rails.cast(_RAIL_STRINGS, strict=False).cast(TELEMETRY["rails"]).alias("rails"),
    )


@dataclass(frozen=True)
class TegrastatsLog:
    """A parsed log: one row per sample (TELEMETRY) and what the parser skipped."""

    samples: pl.DataFrame
    report: ParseReport


def _parse_batches(batches: Iterator[tuple[pl.Series, pl.Series]]) -> list[pl.DataFrame]:
    """Parse the batches in order, a few at a time on threads (polars releases the GIL, and one batch keeps fewer
    than two cores busy); one more than the workers is in flight, so memory stays flat in the log's length."""
    workers = min(4, os.cpu_count() or 1)
    parts: list[pl.DataFrame] = []
    with ThreadPoolExecutor(workers) as pool:
        pending: deque[Future[pl.DataFrame]] = deque()
        for numbers, lines in batches:
            pending.append(pool.submit(_parse_batch, numbers, lines))
            if len(pending) > workers:
                parts.append(pending.popleft().result())
        parts.extend(future.result() for future in pending)
    return parts


def parse(path: str | Path, interval_s: float = 1.0) -> TegrastatsLog:
    """Return the log: one row per sample (TELEMETRY schema; time_s from the timestamps, else index × interval_s) and
    what was skipped."""
    path = Path(path)
    report = ParseReport()
    parts = _parse_batches(_batches(path, report))
    if not parts:
        raise TraceFormatError(
            path,
            f"no tegrastats samples (no line with `RAM used/totalMB`) in {counted(report.total_lines, 'line')}",
            "pass the log that `tegrastats --logfile FILE` wrote",
        )
    frame = pl.concat(parts, rechunk=False).with_row_index("sample", offset=0)
    first = frame["timestamp"].drop_nulls().first()
    if frame["timestamp"].null_count() == 0 and first is not None:
        time_s = (pl.col("timestamp") - pl.lit(first)).dt.total_milliseconds() / 1000.0
    else:
        time_s = pl.col("sample").cast(pl.Float64) * interval_s
        if report.date_header is not None:
            frame = frame.with_columns(timestamp=pl.lit(report.date_header) + pl.duration(milliseconds=pl.col("sample") * int(interval_s * 1000)))
    frame = frame.with_columns(time_s.alias("time_s"), pl.col("sample").cast(pl.Int64))
    return TegrastatsLog(conform(frame, TELEMETRY), report)


def looks_like_tegrastats(head: bytes) -> bool:
    """Return True when the first bytes of a file hold a tegrastats sample line."""
    return bool(SAMPLE_MARKER.search(head)) and (b"CPU [" in head or b"cpu [" in head)


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    log = parse(path, options.interval_s)
    cut = options.cut_line
    notes: tuple[str, ...] = ()
    if cut and log.samples.height and log.samples["line_number"][-1] == cut:
        # A sample cut mid-line would report its missing fields (EMC, rails) as absent: it is left out.
        log = dataclasses.replace(log, samples=log.samples.head(log.samples.height - 1))
        notes = (f"the log ends inside line {cut} without a newline: it looks cut short, and that partial sample was left out",)
    elif cut:
        notes = (cut_note(cut),)
    return Parsed(log, "tegrastats", notes)


FORMATS = (
    Format("tegrastats", "telemetry", _read, lambda head: head.is_text and looks_like_tegrastats(head.raw), order=10,
           data_line=re.compile(r"\d")),  # a sample, or the timestamp it starts with
)
