"""Nsight Compute `.ncu-rep` reports → the same KERNELS frame as the CSV path, read with NVIDIA's `ncu-report` wheel.

The wheel (an optional extra: `pip install traceview[ncu-rep]`) reads reports without a GPU or an Nsight install.
Values come unscaled in base units, so they go through the CSV parser's metric table unchanged. The report is read in
a separate process: one flipped bit makes NVIDIA's reader abort the whole process, which must not take traceview (or
the dashboard serving other users) down with it.
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
import multiprocessing
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers.base import Format, Parsed, ReadOptions
from traceview.parsers.ncu_csv import _RAW_STRING_METRICS, _assemble, is_wanted_metric, rule_frame

INSTALL_HINT = (
    "reading .ncu-rep needs NVIDIA's ncu-report wheel: pip install 'traceview[ncu-rep]' — "
    "or export CSV with `ncu -i report.ncu-rep --csv --page raw > run.csv` and analyze that"
)


READ_TIMEOUT_S = 600


def _require_wheel(path: Path) -> None:
    try:
        import ncu_report  # noqa: F401
    except ImportError:
        raise TraceFormatError(path, "this is a binary Nsight Compute report (.ncu-rep)", INSTALL_HINT) from None


def _load(path: Path) -> Any:
    import ncu_report

    try:
        return ncu_report, ncu_report.load_report(str(path))
    except Exception as error:  # noqa: BLE001 — the wheel raises plain exceptions for unreadable reports
        raise TraceFormatError(path, f"ncu-report cannot read it ({str(error).splitlines()[0] if str(error) else type(error).__name__})",
                               "is the report complete? re-copy it, or open it in Nsight Compute") from None


def _metric(action: Any, names: set[str], metric: str, as_string: bool) -> Any:
    """Return one metric of an ncu-report action as text or a number, None when the report lacks it."""
    if metric not in names:
        return None
    value = action.metric_by_name(metric)
    return value.as_string() if as_string else value.as_double()


def parse(path: str | Path, extractor: Callable[[Path], tuple[list[dict[str, Any]], list[dict[str, Any]]]] | None = None) -> pl.DataFrame:
    """Return one row per profiled kernel launch (KERNELS schema), like ncu_csv.parse on a raw-page export.

    `extractor` reads the report in the worker process (default: the ncu-report wheel); tests pass one that aborts."""
    path = Path(path)
    _require_wheel(path)
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet) as pool:
        future = pool.submit(extractor or _extract, path)
        try:
            long_rows, identity_rows, *rest = future.result(timeout=READ_TIMEOUT_S)
        except concurrent.futures.process.BrokenProcessPool:
            raise TraceFormatError(path, "NVIDIA's report reader crashed on this file (a damaged or truncated report)",
                                   "re-copy the report, or export CSV where it was made: ncu -i report.ncu-rep --csv --page raw") from None
        except concurrent.futures.TimeoutError:
            for process in list(getattr(pool, "_processes", {}).values()):
                process.kill()
            raise TraceFormatError(path, f"NVIDIA's report reader gave no result within {READ_TIMEOUT_S} s",
                                   "export CSV instead: ncu -i report.ncu-rep --csv --page raw") from None
    if not identity_rows:
        raise TraceFormatError(path, "the report holds no profiled kernel launches", "was any kernel profiled? check the ncu filters (-k, -c)")
    long_rows, identity_rows = _valid_text(long_rows), _valid_text(identity_rows)
    rest = [_valid_text(rows) for rows in rest]
    long = pl.DataFrame(long_rows, schema={"launch_id": pl.String, "metric": pl.String, "unit": pl.String, "value": pl.String})
    return _assemble(long, pl.DataFrame(identity_rows, infer_schema_length=None), rule_frame(rest[0] if rest else []))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_text(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the rows with every string valid UTF-8: the reader hands the bytes of a damaged report's names and rule
    texts over as lone surrogates, which no frame can hold; each becomes U+FFFD."""
    def valid(value: Any) -> Any:
        return _SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value
    return [{key: valid(value) for key, value in row.items()} for row in rows]


def _whole_number(value: float | None) -> int | None:
    """A launch dimension as an integer; None for a missing, NaN or infinite one (a damaged report)."""
    return int(value) if value is not None and math.isfinite(value) and abs(value) < 2**53 else None


# The reader's message types (ncu_report.MsgType_*) as the CSV and console spell them.
_MESSAGE_TYPES = {0: "INF", 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}


def _plain_message(text: str) -> str:
    """Return a rule message without the report's link markup: `@section:Id:Title@` → Title, `@url:Title:URL@` → Title (URL)."""
    text = re.sub(r"@url:([^:@]+):([^@]+)@", r"\1 (\2)", text)
    return re.sub(r"@[a-z]+:[^:@]*:([^@]+)@", r"\1", text)


def _rule_rows(action: Any, launch: int) -> list[dict[str, Any]]:
    """Return the action's rule results as plain rows; any speedup estimate the report version carries is kept."""
    rows: list[dict[str, Any]] = []
    try:
        results = action.rule_results_as_dicts()
    except (AttributeError, RuntimeError):  # wheels before rule results existed
        return rows
    for result in results or []:
        message = result.get("rule_message") or {}
        speedup = next((value for key, value in result.items() if "speedup" in key.lower()), None)
        value = speedup.get("value") if isinstance(speedup, dict) else speedup
        kind = speedup.get("type") if isinstance(speedup, dict) else None
        rows.append({
            "launch_id": str(launch), "section": result.get("section_identifier"), "name": result.get("rule_identifier"),
            "type": _MESSAGE_TYPES.get(int(message.get("type") or -1), "INF"), "message": _plain_message(message.get("message") or ""),
            "speedup_type": None if kind is None else str(kind).lower(), "speedup_pct": float(value) if isinstance(value, (int, float)) else None,
        })
    return rows


def _quiet() -> None:
    """In the worker: the reader's native logging (absl, protobuf) goes to stderr; the user gets one line from us."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)


def _extract(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Return (metric rows, identity rows, rule rows) of every launch in the report, as plain data (runs in the worker)."""
    ncu_report, context = _load(path)
    string_kind = ncu_report.IMetric.ValueKind_STRING
    long_rows: list[dict[str, Any]] = []
    identity_rows: list[dict[str, Any]] = []
    rule_rows: list[dict[str, Any]] = []
    launch = 0
    for range_index in range(context.num_ranges()):
        report_range = context.range_by_idx(range_index)
        for action_index in range(report_range.num_actions()):
            action = report_range.action_by_idx(action_index)
            names = set(action.metric_names())
            string = functools.partial(_metric, action, names, as_string=True)
            number = functools.partial(_metric, action, names, as_string=False)

            dims = [_whole_number(number(f"launch__{kind}_dim_{axis}")) for kind in ("grid", "block") for axis in "xyz"]
            stream = _whole_number(number("launch__stream_id"))
            identity = {
                "launch_id": str(launch),
                "kernel_name": action.name(ncu_report.IAction.NameBase_DEMANGLED) or action.name(),
                "grid_size": f"({dims[0]}, {dims[1]}, {dims[2]})" if None not in dims[:3] else None,
                "block_size": f"({dims[3]}, {dims[4]}, {dims[5]})" if None not in dims[3:] else None,
                "device_index": str(_whole_number(number("device__attribute_device_index")) or 0),
                "stream_id": str(stream) if stream is not None else None,
            }
            for metric, alias in _RAW_STRING_METRICS.items():
                metric_obj = action.metric_by_name(metric) if metric in names else None
                if metric_obj is not None:
                    value = metric_obj.as_string() if metric_obj.kind() == string_kind else metric_obj.as_double()
                    identity[alias] = (None if value is None else str(_whole_number(value)) if isinstance(value, float) and _whole_number(value) is not None
                                       else None if isinstance(value, float) else str(value))
            identity["device_name"] = string("device__attribute_display_name")
            identity_rows.append(identity)
            for metric in names:
                if not is_wanted_metric(metric):
                    continue
                metric_obj = action.metric_by_name(metric)
                if metric_obj.kind() == string_kind:
                    continue
                value = metric_obj.as_double()
                if value is not None:
                    long_rows.append({"launch_id": str(launch), "metric": metric, "unit": metric_obj.unit() or "", "value": repr(float(value))})
            rule_rows += _rule_rows(action, launch)
            launch += 1
    return long_rows, identity_rows, rule_rows


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    return Parsed(parse(path), "Nsight Compute report (.ncu-rep, read with ncu-report)")


FORMATS = (Format("ncu-rep", "kernels", _read, lambda head: head.raw.startswith(b"NVR\x00"), order=4, joinable=True, whole=True),)
