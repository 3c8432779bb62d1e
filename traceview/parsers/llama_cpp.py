"""llama.cpp output → one row per measurement (schema.LLAMA_RUNS): prefill or decode tokens/s of a run.

Inputs: `llama-bench` markdown tables (any extra columns, `pp 512`/`pp512`, `pp512 @ d4096`, `mean ± stddev`, GiB/MiB
sizes, `build:` and `Device N:` lines around them), `llama-bench -o csv` (rows may carry more fields than the header,
as in the published README sample), `-o json`, `-o jsonl` and `-o sql` (as text, or the SQLite database it was piped
into); `llama-batched-bench` (its `| PP | TG | B | N_KV | …` table or `--output-format jsonl`) and the
`llama-sweep-bench` of ik_llama.cpp (`| PP | TG | N_KV | …`), each row one prefill and one decode measurement; and the
timing lines of a run: `llama_print_timings:` (old, with or without tokens per second, `nan` for an empty prompt),
`llama_perf_context_print:` (2024-2025), `common_perf_print:` (2026) and the server's `prompt eval time = … / eval
time = …` lines, bare (old) or after `slot print_timing: id N | task M |` on the same line, mixed with any other
console text and behind any log decoration (llama.cpp's own `0.03.201.688 I ` timestamps, a logger's `date | `).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceview.errors import TraceFormatError
from traceview.parsers.base import SNIFF_BYTES, Format, Head, Parsed, ReadOptions, cut_notes, line_of
from traceview.parsers.schema import LLAMA_RUNS, conform
from traceview.parsers.sqlite_files import open_read_only, sqlite_tables

_MD_HEADER = re.compile(r"^\s*\|\s*model\s*\|.*\|\s*test\s*\|\s*t/s\s*\|\s*$")
# The backends' device lines: CUDA and ROCm `Device 0: NAME, compute capability 8.6, ...`; Vulkan
# `ggml_vulkan: 0 = NAME (DRIVER) | uma: 0 | ...` (older builds: `ggml_vulkan: Using NAME | uma: ...`), whose NAME may
# hold parentheses of its own; Metal `ggml_metal_init: GPU name:   Apple M2 Ultra` (2025+ `MTL0 (Apple M4 Max)`, from
# ggml_metal_device_init and the like).
_DEVICE = re.compile(r"^\s*Device (\d+): ([^,]+)(?:, compute capability ([\d.]+))?")
_VULKAN_DEVICE = re.compile(r"^\s*ggml_vulkan: (?:(\d+) =|Using) (.+?)(?: \([^()]*\))? \| uma: (\d)")
_METAL_DEVICE = re.compile(r"^\s*\w*metal\w*: GPU name:\s+(?:MTL\d+ \((.+)\)|(.+?))\s*$")
_BUILD = re.compile(r"^\s*build: (\S+) \((\d+)\)")
# Searched for in each line, from the start of the line or a word boundary: what comes before it is log decoration.
_TIMING = re.compile(
    r"(?:^|(?<=[\s|\]]))"
    r"(?:(?P<prefix>llama_print_timings|llama_perf_context_print|llama_perf_sampler_print|common_perf_print)\s*:\s*"
    r"|slot print_timing: id\s+\d+\s*\|\s*task\s+-?\d+\s*\|\s*)?"
    r"(?P<what>load|sample|sampling|prompt eval|eval|total) time\s*=\s*(?P<ms>[0-9]+(?:[.,][0-9]+)?) ms"
    r"(?:\s*/\s*(?P<count>\d{1,18}) (?P<unit>tokens|runs))?"
)
# Speculative decoding, after a server task's timings: `draft acceptance rate = 0.95570 (  302 accepted /   316 generated)`
# (2025-2026), `draft acceptance = 0.89604 (  181 accepted /   202 generated), mean len =  2.45` (2026).
_DRAFT = re.compile(r"(?:^|(?<=[\s|\]]))draft acceptance(?: rate)? = [0-9.]+ \(\s*(?P<accepted>\d{1,18}) accepted /\s*(?P<generated>\d{1,18}) generated\)")
# llama-speculative (and -simple) print their own summary before the draft's and the target's timing blocks:
# `encoded   19 tokens in    0.186 seconds, speed:  102.365 t/s`, `decoded   69 tokens in    2.570 seconds, speed: …`,
# then `n_draft   = 5`, `n_predict = 69`, `n_drafted = 120`, `n_accept  = 44`, `accept    = 36.667%`, `draft:`, `target:`.
_SPECULATIVE_SPEED = re.compile(r"(?:^|(?<=[\s|\]]))(?P<what>encoded|decoded)\s+(?P<tokens>\d{1,18}) tokens in\s+(?P<seconds>\d+(?:[.,]\d+)?) seconds"
                                r"(?:, speed:\s+(?P<rate>\d+(?:[.,]\d+)?) t/s)?")
_SPECULATIVE_COUNT = re.compile(r"(?:^|(?<=[\s|\]]))(?P<key>n_draft|n_predict|n_drafted|n_accept)\s*=\s*(?P<value>\d{1,18})\s*$")
_SPECULATIVE_BLOCK = re.compile(r"(?:^|(?<=[\s|\]]))(?P<model>draft|target):\s*$")
# The loader's dump in a full log: `model size = 636,18 MiB (4,85 BPW)` (a comma under a European locale).
_LOG_MODEL_SIZE = re.compile(r"\bmodel size\s*=\s*([0-9]+(?:[.,][0-9]+)?)\s*(GiB|MiB|KiB|GB|MB|B)\b")
# One number: digits with at most one decimal point (`1.2.3` is damage, not a size).
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
# Cells are stripped before these match: a `\s*` on each side of an optional part is quadratic on a long damaged cell.
_SIZE = re.compile(rf"^{_NUMBER}\s*(GiB|MiB|KiB|GB|MB|B)$")
_PARAMS = re.compile(rf"^{_NUMBER}\s*([KMBT]?)$")
# `pp512`, `tg128`, `pp512+tg128` (-pg), each `@ d4096` when run at a context depth (-d, 2025+).
# Matched with every space taken out (`pp 512` and `pp512 @ d4096` as `pp512@d4096`).
_TEST = re.compile(r"^(?:pp(?P<pp>\d{1,9}))?\+?(?:tg(?P<tg>\d{1,9}))?(?:@d(?P<depth>\d{1,9}))?$")
# `mean ± stddev`; a ± that a Windows console or editor mangled on the way into the file (`Â±` read as cp1252, `�`
# from a cp1252 file read as UTF-8) or that the user typed as `+/-` is the same separator.
_VALUE_PM = re.compile(rf"^{_NUMBER}(?:\s*(?:±|Â±|\ufffd|\+/-|\+-)\s*{_NUMBER})?$")
BENCH_CSV_MARKERS = ("model_size", "avg_ts")


def _size_bytes(text: str) -> float | None:
    match = _SIZE.match(text.strip())
    if not match:
        return None
    number, unit = match.groups()
    return float(number) * {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "GB": 1e9, "MB": 1e6, "B": 1}[unit]


def _params(text: str) -> float | None:
    match = _PARAMS.match(text.strip())
    if not match:
        return None
    return float(match.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[match.group(2)]


def _phase(n_prompt: int | None, n_gen: int | None) -> str:
    # A one-token prompt (llama-bench `pp1`) is one forward pass of one token, as a decode step is: bound by reading
    # the weights, so it is judged by bandwidth, not by compute.
    if (n_gen and not n_prompt) or (n_prompt == 1 and not n_gen):
        return "decode"
    if n_prompt and not n_gen:
        return "prefill"
    return "mixed"


@dataclass
class _Context:
    device: str | None = None
    compute_capability: str | None = None
    build: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    vulkan: list[tuple[str, bool]] = field(default_factory=list)  # (name, shares system memory) per Vulkan device

    def take_device_line(self, line: str) -> bool:
        """Take a backend's device line into `device` (True if it was one). Device 0 starts the list (a new start of
        the backend); later ones join it as llama-bench's gpu_info does ("A, B"). Vulkan uses the discrete GPUs it
        lists, an integrated one only when there is no other (ggml-vulkan's default device choice)."""
        cuda = _DEVICE.match(line)
        if cuda:
            name = cuda.group(2).strip()
            if cuda.group(1) == "0" or self.device is None:
                self.device, self.compute_capability = name, cuda.group(3)
            else:
                self.device = f"{self.device}, {name}"
            return True
        vulkan = _VULKAN_DEVICE.match(line)
        if vulkan:
            if vulkan.group(1) in (None, "0"):
                self.vulkan = []
            self.vulkan.append((vulkan.group(2).strip(), vulkan.group(3) == "1"))
            used = [name for name, shared in self.vulkan if not shared] or [self.vulkan[0][0]]
            self.device, self.compute_capability = ", ".join(used), None
            return True
        metal = _METAL_DEVICE.match(line)
        if metal:
            self.device, self.compute_capability = (metal.group(1) or metal.group(2)).strip(), None
            return True
        return False


def detect(head: str) -> str | None:
    """Return which llama.cpp output this text is (bench-md, bench-csv, bench-json, timings), or None."""
    stripped = head.lstrip()
    # Before the timing lines: batched-bench prints llama_perf_context_print after its table.
    for line in head.splitlines():
        if _BATCHED_HEADER.match(line):
            return "llama-batched-bench"
        if _SWEEP_HEADER.match(line):
            return "llama-sweep-bench"
        if line.startswith("{") and '"speed_tg"' in line:
            return "llama-batched-bench-jsonl" if '"pl"' in line else "llama-sweep-bench-jsonl"
    if stripped.startswith("[") and '"avg_ts"' in head:
        return "llama-bench-json"
    if stripped.startswith("{") and '"avg_ts"' in stripped.splitlines()[0]:
        return "llama-bench-jsonl"  # -o jsonl: the JSON objects, one per line
    if _SQL_TABLE.search(head) or _SQL_INSERT.search(head):
        return "llama-bench-sql"
    first = stripped.splitlines()[0] if stripped else ""
    if all(marker in first for marker in BENCH_CSV_MARKERS):
        return "llama-bench-csv"
    if any(_MD_HEADER.match(line) for line in head.splitlines()):
        return "llama-bench-md"
    for line in head.splitlines():
        match = _TIMING.search(line)
        if match and match.group("what") in ("prompt eval", "eval") and match.group("prefix") != "llama_perf_sampler_print":
            return "llama-timings"
        speculative = _SPECULATIVE_SPEED.search(line)
        if speculative and speculative.group("what") == "decoded":
            return "llama-timings"
    return None


def parse(path: str | Path, notes: list[str] | None = None) -> pl.DataFrame:
    """Return one row per measurement (LLAMA_RUNS): tokens/s of prefill or decode, with model and device; what looks
    cut short (a table row without its closing `|`, a timing block without its decode) goes to `notes`."""
    path = Path(path)
    with path.open("rb") as handle:
        is_database = handle.read(16) == b"SQLite format 3\x00"
    text = "" if is_database else path.read_text(encoding="utf-8", errors="replace")
    kind = "llama-bench-sqlite" if is_database else detect(text)
    if kind == "llama-bench-sqlite":
        rows = bench_sqlite_rows(path)
    elif kind == "llama-bench-json":
        rows = _bench_json(path, text)
    elif kind == "llama-bench-jsonl":
        rows = _bench_jsonl(path, text)
    elif kind == "llama-bench-sql":
        rows = _bench_sql(path, text)
    elif kind == "llama-bench-csv":
        rows = _bench_csv(path, text)
    elif kind == "llama-bench-md":
        rows = _bench_markdown(path, text, notes)
    elif kind in ("llama-batched-bench", "llama-sweep-bench"):
        rows = _batched_markdown(path, text)
    elif kind in ("llama-batched-bench-jsonl", "llama-sweep-bench-jsonl"):
        rows = _batched_jsonl(path, text)
    elif kind == "llama-timings":
        rows = _timings(text, notes)
    else:
        raise TraceFormatError(path, "no llama-bench table or llama.cpp timing lines",
                               "pass llama-bench output (md, csv or json), llama-batched-bench output, or a log with `eval time =` lines")
    if not rows:
        raise TraceFormatError(path, f"found a {kind} header but no measurements", "was the output cut short?")
    for row in rows:
        row["format"] = kind
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return conform(frame, LLAMA_RUNS)


# llama-bench prints `-ot` patterns as given, unescaped: `blk\.([0-9]|10)\.ffn_.*_exps\.=ROCm0;exps=CPU` splits its
# row into more cells than the header has columns.
_FREE_TEXT_COLUMNS = ("ot",)


def _table_row(path: Path, line: str, number: int, header: list[str], tool: str) -> list[str] | None:
    """Return the cells of a markdown table row, or None for its alignment row. A row with more cells than columns is
    rejoined where the header has one column whose values may hold `|` (an `ot` regex); any other width is an error."""
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    if all(set(cell) <= set("-: ") for cell in cells):
        return None
    free = [index for index, name in enumerate(header) if name in _FREE_TEXT_COLUMNS]
    if len(cells) > len(header) and len(free) == 1:
        start, surplus = free[0], len(cells) - len(header)
        cells = cells[:start] + ["|".join(cells[start:start + surplus + 1])] + cells[start + surplus + 1:]
    if len(cells) != len(header):
        raise TraceFormatError(path, f"table row has {len(cells)} cells for {len(header)} columns", f"pass the table as {tool} printed it", line=number)
    return cells


def _bench_markdown(path: Path, text: str, notes: list[str] | None = None) -> list[dict[str, Any]]:
    context = _Context()
    header: list[str] | None = None
    table = -1
    for number, line in enumerate(text.splitlines(), start=1):
        if context.take_device_line(line):
            continue
        build = _BUILD.match(line)
        if build:
            context.build = f"{build.group(1)} ({build.group(2)})"
            for row in context.rows:  # the build line follows the table it belongs to
                if row["build"] is None:
                    row["build"] = context.build
            continue
        if _MD_HEADER.match(line):
            header = [cell.strip() for cell in line.strip().strip("|").split("|")]
            table += 1
            continue
        if header is None or not line.strip().startswith("|"):
            header = None if not line.strip() else header
            continue
        if not line.rstrip().endswith("|"):
            # llama-bench closes every row with `|`: a row without it was cut, and its last cell (the rate) with it.
            if notes is not None:
                notes.append(f"table row {number} lacks its closing `|`: it looks cut short, and it was left out")
            continue
        cells = _table_row(path, line, number, header, "llama-bench")
        if cells is None:
            continue
        values = dict(zip(header, cells, strict=True))
        test = _TEST.match("".join(values.get("test", "").split()))
        if test and not (test.group("pp") or test.group("tg")):
            test = None
        rate = _VALUE_PM.match(values.get("t/s", "").strip())
        if rate is None:
            raise TraceFormatError(path, f"cannot read t/s {values.get('t/s')!r}", "expected `mean ± stddev`", line=number)
        n_prompt = int(test.group("pp")) if test and test.group("pp") else 0
        n_gen = int(test.group("tg")) if test and test.group("tg") else 0
        n_depth = int(test.group("depth")) if test and test.group("depth") else 0
        known = {"model", "size", "params", "backend", "ngl", "test", "t/s"}
        ngl = values.get("ngl") or values.get("n_gpu_layers")
        context.rows.append({
            "run": len(context.rows),
            "table": table,
            "line_number": number,
            "model": values.get("model"),
            "model_size_bytes": _size_bytes(values.get("size", "")),
            "model_params": _params(values.get("params", "")),
            "backend": values.get("backend"),
            "n_gpu_layers": int(ngl) if ngl and re.fullmatch(r"-?\d{1,9}", ngl) else None,
            "test": values.get("test", "").replace(" ", ""),
            "phase": _phase(n_prompt, n_gen) if test else "mixed",
            "n_prompt": n_prompt,
            "n_gen": n_gen,
            "n_depth": n_depth,
            "tokens_per_s": float(rate.group(1)),
            "tokens_per_s_stddev": float(rate.group(2)) if rate.group(2) else None,
            "device_name": context.device,
            "compute_capability": context.compute_capability,
            "build": context.build,
            "options": "; ".join(f"{k}={v}" for k, v in values.items() if k not in known and k != "n_gpu_layers") or None,
        })
    return context.rows


def _whole(number: float | None) -> int | None:
    """A count from a number cell: None when unknown or beyond any real count (a damaged file)."""
    return int(number) if number is not None and abs(number) < 2**53 else None


def _finite(values: dict[str, Any], key: str) -> float | None:
    """A finite number, or None for a missing cell, text, NaN or infinity (a damaged file)."""
    try:
        number = float(values[key])
    except (KeyError, TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _bench_record(values: dict[str, Any], index: int, number: int | None) -> dict[str, Any]:
    def number_or_none(key: str) -> float | None:
        return _finite(values, key)

    n_prompt = _whole(number_or_none("n_prompt")) or 0
    n_gen = _whole(number_or_none("n_gen")) or 0
    n_depth = _whole(number_or_none("n_depth")) or 0
    ngl = number_or_none("n_gpu_layers")
    known = {"model_type", "model_size", "model_n_params", "n_gpu_layers", "n_prompt", "n_gen", "n_depth", "avg_ts", "stddev_ts",
             "gpu_info", "cpu_info", "build_commit", "build_number", "samples_ts", "samples_ns", "avg_ns", "stddev_ns",
             "test_time", "model_filename", "backends"}
    backend = values.get("backends") or ", ".join(
        name.upper() for name in ("cuda", "metal", "vulkan", "sycl", "kompute", "opencl") if str(values.get(name)) in ("1", "true", "True")
    ) or None
    build = f"{values.get('build_commit')} ({values.get('build_number')})" if values.get("build_commit") else None
    test = (("pp" + str(n_prompt) if n_prompt else "") + ("+" if n_prompt and n_gen else "") + ("tg" + str(n_gen) if n_gen else "")
            + (f"@d{n_depth}" if n_depth else ""))
    return {
        "run": index,
        "table": 0,
        "line_number": number,
        "model": values.get("model_type"),
        "model_size_bytes": number_or_none("model_size"),
        "model_params": number_or_none("model_n_params"),
        "backend": backend,
        "n_gpu_layers": _whole(ngl),
        "test": test,
        "phase": _phase(n_prompt, n_gen),
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": n_depth,
        "tokens_per_s": number_or_none("avg_ts"),
        "tokens_per_s_stddev": number_or_none("stddev_ts"),
        "device_name": values.get("gpu_info") or None,
        "cpu_info": values.get("cpu_info") or None,
        "build": build,
        "options": "; ".join(f"{k}={v}" for k, v in values.items() if k not in known and not isinstance(v, list)) or None,
    }


# The llama-bench README's CSV block has 27 fields per row under a 26-column header: one more boolean in the
# backend flags group (cuda, metal, gpu_blas, blas) than the header names — llama-bench of that time also printed
# `opencl`. Dropping one flag realigns everything after the group, which the published numbers confirm
# (model_size 3825065984, avg_ts 2413.34). Which flag is surplus cannot be told; only `cuda`, first, is used.
_BACKEND_FLAGS = ("cuda", "metal", "gpu_blas", "blas")


def _bench_csv(path: Path, text: str) -> list[dict[str, Any]]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader)
    rows: list[dict[str, Any]] = []
    for index, fields in enumerate(reader):
        if not fields:
            continue
        number = index + 2
        if len(fields) == len(header) + 1 and all(f in header for f in _BACKEND_FLAGS):
            last_flag = max(header.index(f) for f in _BACKEND_FLAGS)
            fields = fields[: last_flag + 1] + fields[last_flag + 2 :]
        if len(fields) != len(header):
            raise TraceFormatError(path, f"row has {len(fields)} fields for {len(header)} columns", "pass the CSV that `llama-bench -o csv` wrote", line=number)
        rows.append(_bench_record(dict(zip(header, fields, strict=True)), len(rows), number))
    return rows


def _bench_json(path: Path, text: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TraceFormatError(path, f"invalid JSON ({error.msg})", "pass the output of `llama-bench -o json` whole", line=error.lineno) from error
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise TraceFormatError(path, "llama-bench JSON should be a list of objects", "pass the output of `llama-bench -o json`")
    return [_bench_record(item, index, None) for index, item in enumerate(data)]


# -o sql: `CREATE TABLE IF NOT EXISTS llama_bench (...)`, then one `INSERT INTO llama_bench (f1, f2) VALUES ('v1', 'v2');`
# per result, every value in single quotes and none escaped. Read as text, never executed.
_SQL_TABLE = re.compile(r"^CREATE TABLE IF NOT EXISTS llama_bench \($", re.MULTILINE)
_SQL_INSERT = re.compile(r"^INSERT INTO llama_bench \((?P<fields>[^)]*)\) VALUES \('(?P<values>.*)'\);\s*$", re.MULTILINE)


def _bench_sql(path: Path, text: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        insert = _SQL_INSERT.match(line)
        if not insert:
            continue
        fields = [field.strip() for field in insert.group("fields").split(",")]
        values = insert.group("values").split("', '")
        if len(values) != len(fields):
            raise TraceFormatError(path, f"an INSERT with {len(values)} values for {len(fields)} fields (a quote inside a value?)",
                                   "pass the output of `llama-bench -o sql` whole", line=number)
        rows.append(_bench_record(dict(zip(fields, values, strict=True)), len(rows), number))
    return rows


def bench_sqlite_rows(path: Path) -> list[dict[str, Any]]:
    """Return the rows of the `llama_bench` table of a SQLite database (`llama-bench -o sql | sqlite3 bench.sqlite`)."""
    with closing(open_read_only(path)) as connection:
        connection.row_factory = sqlite3.Row
        try:
            rows = [dict(row) for row in connection.execute("SELECT * FROM llama_bench")]
        except (sqlite3.DatabaseError, UnicodeDecodeError) as error:
            raise TraceFormatError(path, f"cannot read its llama_bench table ({error})", "pass the database `llama-bench -o sql | sqlite3` wrote") from error
    return [_bench_record(row, index, None) for index, row in enumerate(rows)]


def _bench_jsonl(path: Path, text: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise TraceFormatError(path, f"invalid JSON on this line ({error.msg})", "pass the output of `llama-bench -o jsonl` whole, one object per line",
                                   line=number) from error
        if not isinstance(item, dict):
            raise TraceFormatError(path, "each line of llama-bench JSONL should be an object", "pass the output of `llama-bench -o jsonl`", line=number)
        rows.append(_bench_record(item, len(rows), number))
    return rows


def _timings(text: str, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """Group timing lines into runs (a run ends at its `total time` line) and emit prefill and decode rows."""
    rows: list[dict[str, Any]] = []
    run: dict[str, Any] = {}
    run_index = 0

    def flush() -> None:
        nonlocal run, run_index
        for what, phase in (("prompt eval", "prefill"), ("eval", "decode")):
            if what not in run:
                continue
            ms, count, number = run[what]
            # An empty prompt eval ("0 tokens", nan per token) measured nothing, and neither did an eval of "0.00 ms / 1
            # runs" (inf tokens per second: llama-embedding and other runs that generate nothing).
            if not count or ms <= 0:
                continue
            rows.append({
                "run": run_index,
                "table": run_index,
                "line_number": number,
                "test": f"{'pp' if phase == 'prefill' else 'tg'}{count}",
                "phase": phase,
                "n_prompt": count if phase == "prefill" else 0,
                "n_gen": count if phase == "decode" else 0,
                "duration_ms": ms,
                # Computed from tokens and time, not read: the oldest format prints no tokens per second.
                "tokens_per_s": count / (ms / 1000) if ms > 0 and count else None,
                **({"draft_accepted": run["draft"][0], "draft_generated": run["draft"][1]} if phase == "decode" and "draft" in run else {}),
                "options": f"format={run.get('prefix') or 'llama-server'}",
                "model_size_bytes": run.get("model_size", model_size),
            })
        if any(k in run for k in ("prompt eval", "eval")):
            run_index += 1
        run = {}

    def draft(accepted: int, generated: int) -> None:
        """Give the decode row of the run the speculation counts belong to: the open one, else the one just closed
        (llama-server prints them after its `total time` line)."""
        if "eval" in run:
            run["draft"] = (accepted, generated)
        elif rows and rows[-1]["phase"] == "decode" and rows[-1]["run"] == run_index - 1 and "draft_accepted" not in rows[-1]:
            rows[-1].update(draft_accepted=accepted, draft_generated=generated)

    speculative = _Speculative()

    def speculative_rows() -> None:
        nonlocal run_index
        made = speculative.rows(run_index, model_size)
        if made:
            rows.extend(made)
            run_index += 1
        speculative.reset()

    model_size: float | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        size = _LOG_MODEL_SIZE.search(line)
        if size:
            model_size = _size_bytes(f"{size.group(1).replace(',', '.')} {size.group(2)}")
            run["model_size"] = model_size
        taken = speculative.take(line, number)
        if speculative.done:
            speculative_rows()
            taken = taken or speculative.take(line, number)  # the next run's summary starts on this line
        if taken:
            continue
        speculation = _DRAFT.search(line)
        if speculation:
            draft(int(speculation.group("accepted")), int(speculation.group("generated")))
            continue
        match = _TIMING.search(line)
        if not match or match.group("prefix") == "llama_perf_sampler_print":
            continue
        what = match.group("what")
        if what in ("prompt eval", "eval"):
            if what in run:  # a new run without a total line in between
                flush()
            count = int(match.group("count")) if match.group("count") else 0
            # llama.cpp prints %.2f with no thousands separator, so a comma is a decimal comma (a European locale).
            run[what] = (float(match.group("ms").replace(",", ".")), count, number)
            run["prefix"] = match.group("prefix")
        elif what == "total":
            flush()
    if "prompt eval" in run and "eval" not in run and notes is not None:
        # llama.cpp prints the decode's `eval time` right after the prompt's: a file that ends between them was cut.
        notes.append(f"the last run's timings end after its prompt eval (line {run['prompt eval'][2]}), before its decode's `eval time`: "
                     "the file looks cut short, and that decode is missing")
    flush()
    speculative_rows()
    return rows


def _decimal(text: str) -> float:
    # llama.cpp prints %.3f with no thousands separator, so a comma is a decimal comma (a European locale).
    return float(text.replace(",", "."))


class _Speculative:
    """The summary llama-speculative prints, and the draft's and the target's timing blocks after it.

    The target's `prompt eval` counts the prompt and every verification batch, and its `eval time = 0.00 ms / 1 runs`
    measures nothing: they are the verification cost of the run, never a prefill or decode figure. The draft's `eval`
    is the draft model generating its tokens one at a time."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.speeds: dict[str, tuple[int, float, float | None, int]] = {}  # encoded/decoded: tokens, seconds, t/s, line
        self.counts: dict[str, int] = {}
        self.timings: dict[tuple[str, str], tuple[float, int]] = {}  # (draft|target, prompt eval|eval): ms, tokens
        self.block: str | None = None
        self.done = False

    def take(self, line: str, number: int) -> bool:
        """Read the line if it belongs to a speculative summary (True), else leave it to the other timing readers."""
        speed = _SPECULATIVE_SPEED.search(line)
        if speed:
            if speed.group("what") in self.speeds or self.block is not None:
                self.done = True  # a new run's summary: the last one ends here, and this line is read again after it
                return False
            rate = speed.group("rate")
            self.speeds[speed.group("what")] = (int(speed.group("tokens")), _decimal(speed.group("seconds")),
                                                _decimal(rate) if rate else None, number)
            return True
        if not self.speeds:
            return False
        count = _SPECULATIVE_COUNT.search(line)
        if count:
            self.counts[count.group("key")] = int(count.group("value"))
            return True
        if re.search(r"(?:^|(?<=[\s|\]]))accept\s*=", line):
            return True  # the rate is n_accept / n_drafted, computed again from the counts (it is `nan%` with no drafts)
        block = _SPECULATIVE_BLOCK.search(line)
        if block:
            self.block = block.group("model")
            return True
        if self.block is None:
            return False
        timing = _TIMING.search(line)
        if timing:
            what = timing.group("what")
            if what in ("prompt eval", "eval") and timing.group("count"):
                self.timings[(self.block, what)] = (_decimal(timing.group("ms")), int(timing.group("count")))
            self.done = self.block == "target" and what == "total"
            return True
        return False

    def rows(self, run: int, model_size: float | None) -> list[dict[str, Any]]:
        """Return the run's prefill and decode rows (LLAMA_RUNS fields)."""
        drafted, accepted, most = self.counts.get("n_drafted"), self.counts.get("n_accept"), self.counts.get("n_draft")
        drafting = bool(drafted and most)  # `n_draft = 0`: drafting off, an ordinary decode
        made = []
        for what, phase in (("encoded", "prefill"), ("decoded", "decode")):
            if what not in self.speeds:
                continue
            tokens, seconds, rate, number = self.speeds[what]
            if not tokens or seconds <= 0:
                continue
            record: dict[str, Any] = {
                "run": run, "table": run, "line_number": number, "phase": phase,
                "test": f"{'pp' if phase == 'prefill' else 'tg'}{tokens}",
                "n_prompt": tokens if phase == "prefill" else 0, "n_gen": tokens if phase == "decode" else 0,
                "duration_ms": seconds * 1000.0,
                "tokens_per_s": rate if rate and math.isfinite(rate) else tokens / seconds,
                "options": "format=llama-speculative" + (f"; draft_max={most}" if most is not None else ""),
                "model_size_bytes": model_size,
            }
            if phase == "decode" and drafting:
                record.update(draft_accepted=accepted or 0, draft_generated=drafted)
                for (model, timed), column in ((("draft", "eval"), "draft_eval"), (("target", "prompt eval"), "verify")):
                    if (model, timed) in self.timings:
                        ms, count = self.timings[(model, timed)]
                        record.update({f"{column}_ms": ms, f"{column}_tokens": count})
            made.append(record)
        return made


# llama-batched-bench: `|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |`
# after `main: n_kv_max = …, is_pp_shared = 0, n_gpu_layers = 99, …` (the function is `llama_batched_bench` in later
# builds). ik_llama.cpp's llama-sweep-bench prints the same columns without B, T and S: one sequence, N_KV the depth.
_BATCHED_HEADER = re.compile(r"^\s*\|\s*PP\s*\|\s*TG\s*\|\s*B\s*\|\s*N_KV\s*\|")
_SWEEP_HEADER = re.compile(r"^\s*\|\s*PP\s*\|\s*TG\s*\|\s*N_KV\s*\|\s*T_PP s\s*\|")
_BATCHED_SETTINGS = re.compile(r"^\s*\w+: (n_kv_max = \d+.*)$")
# From a word's start only (`\w+` retried inside a long word is quadratic); a number of more than 18 digits is no
# setting (and int() refuses one of over 4,300).
_SETTING = re.compile(r"(?<!\w)(\w+) = (-?\d{1,18})(?!\d)")
_BATCHED_COLUMNS = {"PP": "pp", "TG": "tg", "B": "pl", "N_KV": "n_kv", "T_PP s": "t_pp", "S_PP t/s": "speed_pp",
                    "T_TG s": "t_tg", "S_TG t/s": "speed_tg", "T s": "t", "S t/s": "speed"}


def _batched_records(values: dict[str, Any], settings: dict[str, int], sweep: bool, number: int | None, index: int, table: int,
                     context: _Context, model_size: float | None) -> list[dict[str, Any]]:
    """Return the prefill and the decode measurement of one batched-bench or sweep-bench row.

    Batched: B sequences of PP prompt tokens each (one shared prompt with -pps) from an empty cache, then TG tokens
    for each sequence, so decode runs at depth PP. S_PP and S_TG count the tokens of all sequences. Sweep: one
    sequence, PP prompt tokens and TG generated tokens, both at depth N_KV."""
    def number_or_none(key: str) -> float | None:
        return _finite(values, key)

    def count(key: str) -> int:
        """A token or sequence count; 0 for a missing, negative or damaged cell."""
        return max(0, _whole(number_or_none(key)) or 0)

    pp, tg = count("pp"), count("tg")
    sequences = 1 if sweep else (count("pl") or 1)
    depth = count("n_kv") if sweep else 0
    shared = bool(settings.get("is_pp_shared"))
    label = "" if sweep else f" B={sequences}"
    options = "; ".join(f"{k}={v}" for k, v in settings.items()) or None
    extra = "; ".join(f"{k}={v}" for k, v in values.items() if k not in _BATCHED_COLUMNS.values())
    options = "; ".join(part for part in (options, extra) if part) or None
    common = {"run": index, "table": table, "line_number": number, "model_size_bytes": model_size, "n_gpu_layers": settings.get("n_gpu_layers"),
              "device_name": context.device, "compute_capability": context.compute_capability, "build": context.build, "options": options}
    records: list[dict[str, Any]] = []
    for phase, tokens, seconds, rate in (("prefill", pp, number_or_none("t_pp"), number_or_none("speed_pp")),
                                         ("decode", tg, number_or_none("t_tg"), number_or_none("speed_tg"))):
        if not tokens:
            continue
        at = depth if sweep else (pp if phase == "decode" else 0)
        name = ("pp" if phase == "prefill" else "tg") + str(tokens) + (f"@d{at}" if at else "") + label
        records.append({**common, "run": index + len(records), "test": name, "phase": phase,
                        "n_prompt": tokens if phase == "prefill" else 0, "n_gen": tokens if phase == "decode" else 0, "n_depth": at,
                        "n_sequences": 1 if phase == "prefill" and shared else sequences,
                        "duration_ms": seconds * 1000 if seconds is not None else None, "tokens_per_s": rate})
    return records


def _batched_markdown(path: Path, text: str) -> list[dict[str, Any]]:
    context, settings, header, sweep, table = _Context(), {}, None, False, -1
    rows: list[dict[str, Any]] = []
    model_size: float | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if context.take_device_line(line):
            continue
        size = _LOG_MODEL_SIZE.search(line)
        if size:
            model_size = _size_bytes(f"{size.group(1).replace(',', '.')} {size.group(2)}")
            continue
        found = _BATCHED_SETTINGS.match(line)
        if found:
            settings = {key: int(value) for key, value in _SETTING.findall(found.group(1))}
            continue
        if _BATCHED_HEADER.match(line) or _SWEEP_HEADER.match(line):
            sweep = _BATCHED_HEADER.match(line) is None
            table += 1
            header = [_BATCHED_COLUMNS.get(cell.strip(), cell.strip()) for cell in line.strip().strip("|").split("|")]
            continue
        if header is None or not line.strip().startswith("|"):
            header = None if not line.strip() else header
            continue
        cells = _table_row(path, line, number, header, "the tool")
        if cells is None:
            continue
        rows += _batched_records(dict(zip(header, cells, strict=True)), settings, sweep, number, len(rows), table, context, model_size)
    return rows


def _batched_jsonl(path: Path, text: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    context = _Context()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("{"):
            context.take_device_line(line)
            continue  # the loader's log lines around the objects
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise TraceFormatError(path, f"invalid JSON on this line ({error.msg})", "pass the output of `llama-batched-bench --output-format jsonl` whole",
                                   line=number) from error
        if not isinstance(item, dict) or "speed_tg" not in item:
            continue
        settings = {k: v for k, v in item.items() if k not in _BATCHED_COLUMNS.values() and isinstance(v, int) and not isinstance(v, bool)}
        values = {k: v for k, v in item.items() if k in _BATCHED_COLUMNS.values()}
        # sweep-bench's objects have no `pl`: one sequence, at depth n_kv.
        rows += _batched_records(values, settings, "pl" not in item, number, len(rows), 0, context, None)
    return rows


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    notes = cut_notes(options)
    runs = parse(path, notes)
    return Parsed(runs, "llama.cpp", tuple(dict.fromkeys(notes)))


def _detected(name: str) -> Callable[[Head], bool]:
    return lambda head: head.is_text and head.once("llama_detect", lambda: detect(head.text)) == name


def _sqlite(head: Head) -> bool:
    """`llama-bench -o sql` piped into sqlite3: a `llama_bench` table, and no profiler tables."""
    tables = sqlite_tables(head)
    return tables is not None and "llama_bench" in tables and not any(name.startswith(("CUPTI_", "NVTX_", "TARGET_INFO")) for name in tables)


def _timings_at_the_end(head: Head) -> bool:
    """A full llama.cpp log prints its timing lines last, after the model dump and the generated text."""
    if not head.is_text:
        return False
    with head.path.open("rb") as handle:
        handle.seek(max(0, head.path.stat().st_size - SNIFF_BYTES))
        tail = handle.read()
    return b"\x00" not in tail and detect(tail.decode("utf-8", errors="replace")) == "llama-timings"


# A cut can fall anywhere in a line, its first word too (`n_accep`): line_of() finds the keyword or what is left of it.
# Log lines may start with a timestamp (`0.00.064.609 I llama_perf_context_print:`), so no keyword is anchored.
_DATA_LINE = re.compile(r"^\s*\||\btime\s*=|^[^,]*(,[^,]*){5,}|\{|\}|\b(?:llama|common|ggml)\w*:|" + line_of(
    "encoded", "decoded", "n_draft", "n_predict", "n_accept", "accept", "draft acceptance", "build", "Device", "model size",
    "Output generated in", "prompt eval time", "eval time", "load time", "sample time", "total time", "slot print_timing",
    "llama_", "common_", "ggml_"))
_TEXT_FORMATS = ("llama-bench-md", "llama-bench-csv", "llama-bench-json", "llama-bench-jsonl", "llama-batched-bench", "llama-batched-bench-jsonl",
                 "llama-sweep-bench", "llama-sweep-bench-jsonl", "llama-bench-sql")
FORMATS = (
    Format("llama-bench-sqlite", "llama-runs", _read, _sqlite, order=1, whole=True),
    *(Format(name, "llama-runs", _read, _detected(name), order=20, data_line=_DATA_LINE) for name in _TEXT_FORMATS),
    Format("llama-timings", "llama-runs", _read, _detected("llama-timings"), order=20, late_sniff=_timings_at_the_end, data_line=_DATA_LINE),
)
