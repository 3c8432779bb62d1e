"""LLM serving benchmark results: what `vllm bench serve` / `benchmark_serving.py` and SGLang's `bench_serving` write.

Three layouts of one set of metrics (vLLM's benchmarks/benchmark_serving.py, SGLang's bench_serving.py):
- the result JSON (`--save-result`): one object, keys `completed`, `duration`, `total_input_tokens`,
  `total_output_tokens`, `request_throughput`, `output_throughput`, `mean_/median_/std_/pNN_` + `ttft_ms`,
  `tpot_ms`, `itl_ms`, `e2el_ms`; `request_rate` a number or the string "inf"; newer versions add
  `max_concurrency` and per-request arrays (`ttfts`, `itls`, `input_lens`, `output_lens`);
- JSONL, one such object per line (SGLang's `--output-file`, or results appended run after run);
- the console block `============ Serving Benchmark Result ============` with `Label (unit): value` lines, after the
  argparse `Namespace(...)` line that holds the server arguments (`--max-num-seqs=64`).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import polars as pl

from traceview.errors import TraceFormatError
from traceview.numbers import float_or_none
from traceview.parsers.base import Format, Head, Parsed, ReadOptions
from traceview.parsers.schema import schema_of

_LATENCIES = ("ttft", "tpot", "itl", "e2el")
_STATS = ("mean", "median", "std", "p90", "p95", "p99")
# One row per benchmark result; times in ms as the tools print them (the column names say so), rates per second.
SERVING = schema_of({
    "result": pl.Int64, "line_number": pl.Int64, "layout": pl.String, "model": pl.String, "backend": pl.String,
    "num_prompts": pl.Int64, "completed": pl.Int64, "max_concurrency": pl.Int64, "max_num_seqs": pl.Int64,
    "request_rate_per_s": pl.Float64, "duration_s": pl.Float64, "total_input_tokens": pl.Int64, "total_output_tokens": pl.Int64,
    "request_throughput_per_s": pl.Float64, "output_tokens_per_s": pl.Float64, "total_tokens_per_s": pl.Float64,
    **{f"{stat}_{latency}_ms": pl.Float64 for latency in _LATENCIES for stat in _STATS},
})
_METRIC_KEYS = {"request_throughput", "output_throughput", "median_tpot_ms", "mean_tpot_ms", "median_ttft_ms", "mean_ttft_ms"}
_CONSOLE_TITLE = re.compile(r"^=+\s*Serving Benchmark Result\s*=+\s*$", re.MULTILINE)
# `Median TPOT (ms):   21.11`: a label, an optional unit in parentheses, a colon, a number.
_CONSOLE_LINE = re.compile(r"^\s*(?P<label>[A-Za-z][A-Za-z0-9 ./-]{0,60}?)\s*(?:\((?P<unit>[^)]{1,20})\))?:\s*(?P<value>[-+0-9.eEinfa]{1,40})\s*$")
_CONSOLE_KEYS = {
    "successful requests": "completed", "benchmark duration": "duration", "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens", "request throughput": "request_throughput",
    "output token throughput": "output_throughput", "total token throughput": "total_token_throughput",
    "maximum request concurrency": "max_concurrency", "traffic request rate": "request_rate",
}
_CONSOLE_LATENCY = re.compile(r"^(?P<stat>mean|median|std|p\d{2}(?:\.\d+)?)\s+(?P<latency>ttft|tpot|itl|e2el)$", re.IGNORECASE)
_MAX_NUM_SEQS = re.compile(r"--max[-_]num[-_]seqs[= ](\d{1,9})")
_NAMESPACE_MODEL = re.compile(r"\bmodel='([^']{1,500})'")
_DATA_LINE = re.compile(r":\s*[-+0-9.]+\s*$|^\{.*\}?$")


def _is_result(value: object) -> bool:
    return isinstance(value, dict) and len(_METRIC_KEYS & set(value)) >= 2


def _sniff_json(head: Head) -> bool:
    # One result object, or one per line (JSONL): either way it opens with `{` and names the serving metrics.
    text = head.text.lstrip()
    return head.is_text and text.startswith("{") and '"request_throughput"' in text and ('"median_tpot_ms"' in text or '"mean_tpot_ms"' in text)


def _sniff_console(head: Head) -> bool:
    return head.is_text and _CONSOLE_TITLE.search(head.text) is not None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return float_or_none(value.strip())
    return None


def _whole(value: object) -> int | None:
    number = _number(value)
    return int(number) if number is not None and abs(number) < 2**62 else None


def _row(data: dict[str, Any], index: int, line: int, layout: str, max_num_seqs: int | None = None, model: str | None = None) -> dict[str, Any]:
    rate = data.get("request_rate")
    row: dict[str, Any] = {
        "result": index, "line_number": line, "layout": layout, "model": str(data.get("model_id") or data.get("model") or model or "") or None,
        "backend": str(data["backend"]) if data.get("backend") is not None else None, "num_prompts": _whole(data.get("num_prompts")),
        "completed": _whole(data.get("completed")), "max_concurrency": _whole(data.get("max_concurrency")), "max_num_seqs": max_num_seqs,
        # "inf" (every request at once) is no rate: null, and the concurrency comes from elsewhere.
        "request_rate_per_s": _number(rate) if not (isinstance(rate, str) and rate.strip().lower() == "inf") else None,
        "duration_s": _number(data.get("duration")), "total_input_tokens": _whole(data.get("total_input_tokens") or data.get("total_input")),
        "total_output_tokens": _whole(data.get("total_output_tokens") or data.get("total_output")),
        "request_throughput_per_s": _number(data.get("request_throughput")), "output_tokens_per_s": _number(data.get("output_throughput")),
        "total_tokens_per_s": _number(data.get("total_token_throughput")),
    }
    for latency in _LATENCIES:
        for stat in _STATS:
            row[f"{stat}_{latency}_ms"] = _number(data.get(f"{stat}_{latency}_ms"))
        samples = data.get(f"{latency}s")  # per-request arrays of newer versions, in seconds
        if row[f"median_{latency}_ms"] is None and isinstance(samples, list):
            flat = sorted(1000 * x for x in _flatten(samples) if isinstance(x, (int, float)) and math.isfinite(x))
            if flat:
                row[f"median_{latency}_ms"] = flat[len(flat) // 2]
                row[f"p99_{latency}_ms"] = flat[min(len(flat) - 1, int(0.99 * len(flat)))]
                row[f"mean_{latency}_ms"] = sum(flat) / len(flat)
    return row


def _flatten(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        out += _flatten(value) if isinstance(value, list) else [value]
    return out


def _read_json(path: Path, found: object, options: ReadOptions) -> Parsed:
    text = path.read_text(encoding="utf-8", errors="replace")
    rows, notes = [], []
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if _is_result(whole):
        rows.append(_row(whole, 0, 1, "json"))
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                notes.append(f"line {number} is not a JSON object and was left out")
                continue
            if _is_result(value):
                rows.append(_row(value, len(rows), number, "jsonl"))
    if not rows:
        raise TraceFormatError(path, "a JSON file with serving metric keys but no complete benchmark result in it",
                               "pass the file `benchmark_serving.py --save-result` (or bench_serving --output-file) wrote")
    return Parsed(pl.DataFrame(rows, schema=SERVING), "vLLM / SGLang serving benchmark (result JSON)", tuple(notes[:3]))


def _read_console(path: Path, found: object, options: ReadOptions) -> Parsed:
    text = path.read_text(encoding="utf-8", errors="replace")
    rows: list[dict[str, Any]] = []
    namespace_seqs, namespace_model = None, None
    for match in _CONSOLE_TITLE.finditer(text):
        before = text[:match.start()]
        seqs = _MAX_NUM_SEQS.findall(before[-20000:])
        namespace_seqs = int(seqs[-1]) if seqs else namespace_seqs
        models = _NAMESPACE_MODEL.findall(before[-20000:])
        namespace_model = models[-1] if models else namespace_model
        data: dict[str, Any] = {}
        for line in text[match.end():].splitlines():
            if line.startswith("=" * 10):
                break
            found_line = _CONSOLE_LINE.match(line)
            if not found_line:
                continue
            label = " ".join(found_line.group("label").lower().split())
            latency = _CONSOLE_LATENCY.match(label)
            key = f"{latency.group('stat').lower()}_{latency.group('latency').lower()}_ms" if latency else _CONSOLE_KEYS.get(label)
            if key:
                data[key] = found_line.group("value")
        rate = re.findall(r"Traffic request rate:\s*(\S+)", before[-2000:])
        if rate:
            data.setdefault("request_rate", rate[-1])
        if _is_result(data):
            rows.append(_row(data, len(rows), text[:match.start()].count("\n") + 1, "console", namespace_seqs, namespace_model))
    if not rows:
        raise TraceFormatError(path, "a 'Serving Benchmark Result' block with no metric lines under it (cut short?)",
                               "pass the whole console output of benchmark_serving.py / vllm bench serve")
    return Parsed(pl.DataFrame(rows, schema=SERVING), "vLLM / SGLang serving benchmark (console)")


FORMATS = (
    Format("serving-bench-json", "serving-bench", _read_json, _sniff_json, order=7, whole=True),
    Format("serving-bench-console", "serving-bench", _read_console, _sniff_console, order=15, data_line=_DATA_LINE),
)
