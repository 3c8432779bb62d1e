"""GPU and server metrics polled over time into CSV: `nvidia-smi --query-gpu=… --format=csv` (with nounits or not)
and a serving engine's Prometheus metrics scraped to CSV (vLLM's `/metrics`: `num_requests_running`,
`gpu_cache_usage_perc`, cumulative `*_total` counters).

nvidia-smi's CSV grammar (`nvidia-smi --help-query-gpu`): a header of the queried field names, each with its unit in
brackets unless `nounits` (`memory.used [MiB]`, `utilization.gpu [%]`), then one row per GPU per sample, cells with
a space after each comma and the unit after the number (`59362 MiB`, `81 %`), `[N/A]` or `[Not Supported]` for
what the GPU cannot say, and `Active` / `Not Active` for the clock event reasons. The time is nvidia-smi's own
`timestamp` field (`2024/05/01 12:00:00.123`) or a column the polling script added (`time [s]`).
"""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.numbers import float_or_none
from traceview.parsers.base import Format, Head, Parsed, ReadOptions
from traceview.parsers.schema import schema_of

# One row per sample of one metric: seconds from the first sample, the device (a GPU's uuid or index; "" for the
# server), the metric as the header names it, its unit, the value.
METRICS = schema_of({"time_s": pl.Float64, "device": pl.String, "metric": pl.String, "unit": pl.String, "value": pl.Float64})

_NVIDIA_SMI_FIELDS = re.compile(r"(?:^|,)\s*(?:utilization\.gpu|utilization\.memory|memory\.used|memory\.total|power\.draw|"
                                r"clocks\.(?:sm|mem|current\.sm)|temperature\.gpu|clocks_event_reasons\.|clocks_throttle_reasons\.|pstate)\b")
# vLLM's engine metrics (vllm/engine/metrics.py, `vllm:` prefixed on /metrics), as a scraper writes them to CSV.
_ENGINE_FIELDS = re.compile(r"(?:^|,)\s*(?:vllm:)?(?:num_requests_running|num_requests_waiting|gpu_cache_usage_perc|num_preemptions_total|"
                            r"generation_tokens_total|prompt_tokens_total|time_to_first_token_seconds|time_per_output_token_seconds)\b")
# A cell after strip(): `59362 MiB`, `81 %`, `0.5` (bounded gaps: an unbounded one backtracks on a long damaged cell).
_VALUE_UNIT = re.compile(r"(?P<number>[-+]?[0-9][0-9.,eE+-]{0,40})\s{0,4}(?P<unit>[A-Za-z%/]{1,10})?")
_ACTIVE = {"active": 1.0, "not active": 0.0}
_TIME_COLUMNS = ("time [s]", "time", "timestamp", "time_s", "seconds")
_DEVICE_COLUMNS = ("uuid", "index", "pci.bus_id", "name")
_DATA_LINE = re.compile(r"^[^,]{0,200},")


def _header(head: Head) -> str:
    return head.text.lstrip("\ufeff").split("\n", 1)[0] if head.is_text else ""


def _sniff_smi(head: Head) -> bool:
    return _NVIDIA_SMI_FIELDS.search(_header(head)) is not None


def _sniff_engine(head: Head) -> bool:
    header = _header(head)
    return header.count(",") >= 2 and len(_ENGINE_FIELDS.findall(header)) >= 2


def _moment(cell: str) -> float | datetime | None:
    """A sample's time: seconds as a number, or nvidia-smi's `YYYY/MM/DD HH:MM:SS.fff`; None when neither."""
    number = float_or_none(cell.strip()) if cell.strip() else None
    if number is not None:
        return number
    for layout in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(cell.strip(), layout)
        except ValueError:
            continue
    return None


def _seconds(moment: float | datetime, origin: float | datetime) -> float | None:
    if isinstance(moment, datetime) and isinstance(origin, datetime):
        return (moment - origin).total_seconds()
    if isinstance(moment, float) and isinstance(origin, float):
        return moment - origin
    return None


def _value(cell: str) -> tuple[float | None, str | None]:
    text = cell.strip()
    if text.lower() in _ACTIVE:
        return _ACTIVE[text.lower()], "active"
    match = _VALUE_UNIT.fullmatch(text)
    if not match:
        return None, None  # [N/A], [Not Supported], text
    return float_or_none(match.group("number").replace(",", "")), match.group("unit")


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    text = path.read_text(encoding="utf-8", errors="replace").lstrip("\ufeff")
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 2:
        raise TraceFormatError(path, "a metrics CSV with a header but no samples", "poll longer, or pass the file the polling wrote")
    header = [cell.strip() for cell in rows[0]]
    names: list[str] = []
    units: list[str | None] = []
    for title in header:
        # `memory.used [MiB]`: the unit in the last brackets.
        opening = title.rfind("[")
        bracketed = title.endswith("]") and 0 < opening and len(title) - opening <= 22
        names.append(title[:opening].rstrip() if bracketed else title)
        units.append(title[opening + 1:-1] if bracketed else None)
    lowered = [n.lower() for n in names]
    time_column = next((lowered.index(c) for c in _TIME_COLUMNS if c in lowered), None)
    time_column = next((i for i, t in enumerate(header) if t.lower() in _TIME_COLUMNS), time_column)
    device_column = next((lowered.index(c) for c in _DEVICE_COLUMNS if c in lowered), None)
    origin: float | datetime | None = None
    out: list[tuple[float, str, str, str | None, float | None]] = []
    skipped = 0
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            skipped += 1
            continue
        stamp = _moment(row[time_column]) if time_column is not None else float(number - 2)
        origin = stamp if origin is None else origin
        moment = _seconds(stamp, origin) if stamp is not None and origin is not None else None
        if moment is None:
            skipped += 1
            continue
        device = row[device_column].strip() if device_column is not None else ""
        for index, cell in enumerate(row):
            if index in (time_column, device_column) or lowered[index] in ("name", "pci.bus_id", "driver_version"):
                continue
            value, unit = _value(cell)
            out.append((moment, device, names[index], units[index] or unit, value))
    if not out:
        raise TraceFormatError(path, "a metrics CSV whose rows hold no numbers under its header", "pass the CSV the polling wrote (nvidia-smi --format=csv)")
    notes = (f"{skipped} row(s) with another number of cells than the header, or no time, were left out",) if skipped else ()
    return Parsed(pl.DataFrame(out, schema=METRICS, orient="row"), None, notes)


def _read_smi(path: Path, found: object, options: ReadOptions) -> Parsed:
    parsed = _read(path, found, options)
    return Parsed(parsed.data, "nvidia-smi --query-gpu (CSV)", parsed.notes)


def _read_engine(path: Path, found: object, options: ReadOptions) -> Parsed:
    parsed = _read(path, found, options)
    return Parsed(parsed.data, "serving engine metrics (Prometheus, as CSV)", parsed.notes)


FORMATS = (
    Format("nvidia-smi-csv", "gpu-metrics", _read_smi, _sniff_smi, order=45, data_line=_DATA_LINE),
    Format("engine-metrics-csv", "gpu-metrics", _read_engine, _sniff_engine, order=46, data_line=_DATA_LINE),
)
