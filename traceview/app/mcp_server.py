"""`traceview mcp`: a Model Context Protocol server over stdio (the official `mcp` SDK) so that a coding agent can ask
what bound a run, why, and what changed — answered from the file by the same analyses as the CLI.

Every answer is a piece of the JSON contract, bounded in size (the top N, with the count of what was left out and
how to ask for more). Only files under the `--root` folders can be read (symlinks out of them are refused), nothing
is written, and bad input is a tool error with the CLI's one line while the server keeps answering. Analyses are
kept per file (its resolved path, size and modification time) for the server's life, so a follow-up question on a
large export does not read it again.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.diff import compare
from traceview.analyzer.kinds import AnalysisOptions
from traceview.analyzer.pipeline import analyze_file
from traceview.app.producing import HOW_TO_PRODUCE
from traceview.app.reporters.base import ReportOptions, diagnosis_lines, json_safe, kernel_records
from traceview.app.reporters.diff_report import diff_data
from traceview.app.views import report_of
from traceview.errors import TraceviewError
from traceview.parsers import FORMATS

DEFAULT_TOP = 10
MAX_TOP = 200
# The most an answer may hold once serialised; lists are cut (and say so) to stay under it.
MAX_ANSWER_CHARS = 200_000
CACHED_ANALYSES = 16
# The kernel fields an overview lists (a kernel's own tool gives the rest).
_KERNEL_SUMMARY = ("rank", "short_name", "launches", "duration_ns", "share_pct", "bound", "label", "likely_bound", "roof_pct",
                   "recoverable_ns", "reason", "recommendation")


@dataclass(frozen=True)
class Roots:
    """The folders the server may read under (resolved); relative paths are taken from the first."""

    folders: tuple[Path, ...]

    def resolve(self, path: str) -> Path:
        """The file `path` names, resolved; ToolError when it is outside every root (a symlink out counts) or absent."""
        given = Path(path).expanduser()
        candidate = given if given.is_absolute() else self.folders[0] / given
        try:
            resolved = candidate.resolve(strict=True)
        except (OSError, RuntimeError):
            raise ToolError(f"{path}: no such file under the server's roots ({', '.join(map(str, self.folders))})") from None
        if not any(resolved.is_relative_to(root) for root in self.folders):
            raise ToolError(f"{path}: outside the folders this server may read ({', '.join(map(str, self.folders))}); "
                            "start it with --root for that folder") from None
        if not resolved.is_file():
            raise ToolError(f"{path}: not a file")
        return resolved


class AnalysisCache:
    """Analyses by (path, size, modification time, options), the least recently used dropped past CACHED_ANALYSES."""

    def __init__(self, max_file_bytes: int) -> None:
        self.max_file_bytes = max_file_bytes
        self._entries: OrderedDict[tuple[Any, ...], Analysis] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: Path, options: AnalysisOptions) -> Analysis:
        stat = path.stat()
        if stat.st_size > self.max_file_bytes:
            raise ToolError(f"{path.name} is {stat.st_size / 1e9:.2f} GB, above what this server reads for a bounded answer "
                            f"({self.max_file_bytes / 1e9:.1f} GB); run `traceview analyze` on it, or restart the server with a larger --max-file-gb")
        key = (str(path), stat.st_size, stat.st_mtime_ns, options)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        try:
            analysis = analyze_file(path, options)
        except TraceviewError as error:
            raise ToolError(" ".join(str(error).split())) from None
        with self._lock:
            self._entries[key] = analysis
            while len(self._entries) > CACHED_ANALYSES:
                self._entries.popitem(last=False)
        return analysis


def _bounded(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer, its longest lists cut until it serialises under MAX_ANSWER_CHARS (a `truncated` key says which)."""
    answer = json_safe(answer)
    cut: list[str] = []
    while len(json.dumps(answer, default=str)) > MAX_ANSWER_CHARS:
        lists = [(len(json.dumps(value, default=str)), key) for key, value in answer.items() if isinstance(value, list) and len(value) > 1]
        if not lists:
            break
        _, key = max(lists)
        answer[key] = answer[key][: max(1, len(answer[key]) // 2)]
        cut.append(key)
    if cut:
        answer["truncated"] = sorted(set(cut))
    return dict(answer)


def _top(top: int | None) -> int:
    return max(1, min(int(top or DEFAULT_TOP), MAX_TOP))


def overview(analysis: Analysis, top: int) -> dict[str, Any]:
    """The JSON contract's summary pieces: source, device, summary, verdict, findings, the top kernels, notes."""
    record = report_of(analysis, ReportOptions(top=top)).record
    timeline = record.get("timeline") or {}
    findings = timeline.get("findings") or (record.get("telemetry") or {}).get("findings") or record.get("findings") or []
    kernels = [{field: kernel.get(field) for field in _KERNEL_SUMMARY} for kernel in record["kernels"]]
    answer: dict[str, Any] = {
        "source": record["source"], "kind": analysis.kind, "device": {k: record["device"].get(k) for k in ("name", "compute_capability", "identified")},
        "summary": record["summary"], "verdict": (timeline.get("verdict") or {}).get("message"),
        "findings": findings[:top], "kernels": kernels, "more_kernels": max(0, analysis.kernels.height - len(kernels)),
        "notes": record["notes"],
    }
    if timeline.get("steps"):
        answer["steps"] = {k: v for k, v in timeline["steps"].items() if k != "durations_ns"}
    if "runs" in record:
        answer["runs"] = record["runs"][:top]
    if "torch" in record:
        answer["ops"] = record["torch"]["ops"][:top]
        answer["collectives"] = record["torch"]["collectives"]
    if answer["more_kernels"]:
        answer["ask_for_more"] = f"call again with top={min(MAX_TOP, top * 2)} (at most {MAX_TOP}), or kernel(path, name) for one kernel"
    return _bounded(answer)


def kernel_answer(analysis: Analysis, name: str) -> dict[str, Any]:
    """One kernel's diagnosis: its record (verdict, reason, occupancy, stalls, rules, advice) and the explanation."""
    records = kernel_records(analysis)
    wanted = name.strip()
    exact = [k for k in records if wanted in (k["name"], k["short_name"])]
    matches = exact or [k for k in records if wanted.lower() in (k["name"] or "").lower()]
    if not matches:
        raise ToolError(f"no kernel named {wanted!r} in {Path(analysis.source.path).name}; "
                        "analyze(path) lists the kernels (short_name), any part of a name matches")
    if len(matches) > 1 and not exact:
        return _bounded({"matches": [k["short_name"] for k in matches[:DEFAULT_TOP * 5]],
                         "hint": "more than one kernel matches: call again with one of these names"})
    kernel = matches[0]
    return _bounded({"kernel": kernel, "explanation": diagnosis_lines(kernel)})


def window_answer(analysis: Analysis, start_ms: float, end_ms: float, top: int) -> dict[str, Any]:
    """What ran in [start_ms, end_ms] (ms from the first GPU activity, as the dashboard's timeline): per GPU, the
    kernels' busy time and the heaviest kernels; per host thread, the CUDA calls; the idle gaps there, with causes."""
    timeline = analysis.timeline
    export = timeline.export if timeline is not None else None
    if export is None:
        raise ToolError(f"{Path(analysis.source.path).name} is a {analysis.kind} input with no timeline: window() needs an Nsight Systems "
                        "SQLite export or a PyTorch profiler trace")
    if end_ms <= start_ms:
        raise ToolError("end_ms must be after start_ms")
    import polars as pl

    starts = [frame["start_ns"].min() for frame in (export.kernels, export.memops) if frame.height]
    origin = min(int(s) for s in starts if s is not None) if starts else 0
    low, high = origin + int(start_ms * 1e6), origin + int(end_ms * 1e6)
    inside = (pl.col("end_ns") > low) & (pl.col("start_ns") < high)
    clipped = (pl.min_horizontal("end_ns", pl.lit(high)) - pl.max_horizontal("start_ns", pl.lit(low))).alias("in_window_ns")
    kernels = export.kernels.filter(inside).with_columns(clipped)
    gpus = []
    for (device,), rows in sorted(kernels.partition_by("device_id", as_dict=True).items(), key=lambda item: item[0][0] or 0):
        heaviest = rows.group_by("name_id").agg(pl.col("in_window_ns").sum(), pl.len().alias("launches")).sort("in_window_ns", descending=True).head(top)
        gpus.append({"device_id": device, "kernels": rows.height, "kernel_ns": int(rows["in_window_ns"].sum()),
                     "top_kernels": [{"name": export.names.get(r["name_id"], "?"), "launches": r["launches"], "ns": int(r["in_window_ns"])}
                                     for r in heaviest.iter_rows(named=True)]})
    calls = export.api.filter(inside).with_columns(clipped, pl.col("name").cast(pl.String))
    threads = []
    for (tid,), rows in calls.partition_by("tid", as_dict=True).items():
        busiest = rows.group_by("name").agg(pl.col("in_window_ns").sum(), pl.len().alias("calls")).sort("in_window_ns", descending=True).head(top)
        threads.append({"thread": int(tid) % (1 << 24), "process": int(tid) >> 24, "calls": rows.height,
                        "top_calls": [{"name": r["name"], "calls": r["calls"], "ns": int(r["in_window_ns"])} for r in busiest.iter_rows(named=True)]})
    gaps = [g for g in (timeline.gaps if timeline is not None else [])
            if g["start_ns"] < (high - origin) and g["start_ns"] + g["duration_ns"] > (low - origin)]
    return _bounded({"window_ms": [start_ms, end_ms], "origin": "ms from the first GPU activity", "gpus": gpus,
                     "host_threads": sorted(threads, key=lambda t: -sum(c["ns"] for c in t["top_calls"]))[:top], "idle_gaps": gaps[:top]})


def formats_answer() -> dict[str, Any]:
    """What traceview reads, by format: its kind, and how to produce it."""
    listed = []
    for fmt in FORMATS:
        how = next((text for prefix, text in HOW_TO_PRODUCE.items() if fmt.name.startswith(prefix)), None)
        listed.append({"format": fmt.name, "kind": fmt.kind, "how_to_produce": how})
    return {"formats": listed, "detected_from": "the file's content, never its name"}


def build_server(roots: list[Path], max_file_gb: float = 8.0) -> MCPServer:
    """The MCP server with its six tools, reading only under `roots`."""
    allowed = Roots(tuple(root.expanduser().resolve() for root in roots))
    cache = AnalysisCache(int(max_file_gb * 1e9))
    server = MCPServer("traceview", instructions=(
        "GPU profiling trace analysis: which kernels bound a run (compute, memory, latency against a roofline), why, and what to do; "
        "where each GPU's time went; what changed between two runs. Start with analyze(path); formats() says what can be read."))

    def load(path: str, gpu: str | None = None, weights: str | None = None) -> Analysis:
        return cache.get(allowed.resolve(path), AnalysisOptions(gpu=gpu, weights=weights))

    @server.tool()
    def analyze(path: str, gpu: str | None = None, weights: str | None = None, top: int = DEFAULT_TOP) -> dict[str, Any]:
        """Analyze a trace (Nsight Compute, Nsight Systems, PyTorch profiler, nvprof, tegrastats, llama.cpp): source, device,
        summary, the whole-run verdict and findings, the top kernels ranked by recoverable time, notes. `gpu` names the GPU
        when the file does not (see formats()); `weights` is the model's weight bytes for decode MBU ("4.2GB")."""
        return overview(load(path, gpu, weights), _top(top))

    @server.tool()
    def kernel(path: str, name: str, gpu: str | None = None) -> dict[str, Any]:
        """One kernel's diagnosis: verdict, reason, occupancy and its limiter, warp stalls, Nsight Compute's rules and the
        advice. `name` is its full or short name, or any part of it."""
        return kernel_answer(load(path, gpu), name)

    @server.tool()
    def window(path: str, start_ms: float, end_ms: float, top: int = DEFAULT_TOP) -> dict[str, Any]:
        """What ran in a time window (ms from the first GPU activity) of an Nsight Systems export or PyTorch trace: per GPU the
        kernels and their time, per host thread the CUDA calls, and the idle gaps in it with their causes."""
        return window_answer(load(path), start_ms, end_ms, _top(top))

    @server.tool()
    def diff(before: str, after: str, fail_on_regression: float | None = None, top: int = DEFAULT_TOP) -> dict[str, Any]:
        """Compare two runs kernel by kernel (time, verdict, % of roof), whole runs by GPU shares and step time: the regression
        table, and whether `traceview diff --fail-on-regression PCT` would fail (gate_fails)."""
        first, second = load(before), load(after)
        try:
            result = compare(first, second, fail_on_regression)
        except TraceviewError as error:
            raise ToolError(" ".join(str(error).split())) from None
        answer = diff_data(result, _top(top))
        answer["gate_fails"] = bool(result.regressions) if fail_on_regression is not None else None
        return _bounded(answer)

    @server.tool()
    def fleet(paths: list[str], top: int = DEFAULT_TOP) -> dict[str, Any]:
        """Many ranks or runs at once: per-rank breakdown, the straggler ranks (median + 3·MAD), the heaviest kernels across
        ranks, and the files that failed with their one-line errors. Ranks come from the files' order."""
        from traceview.app.fleet import MapOptions, run_fleet
        from traceview.app.reporters.fleet_report import fleet_record

        resolved = [allowed.resolve(path) for path in paths]
        if not resolved:
            raise ToolError("fleet needs at least one file")
        record = fleet_record(run_fleet(resolved, MapOptions()).result, _top(top))["fleet"]
        return _bounded({key: record[key] for key in ("ranks", "stragglers", "straggler_metric", "kernels", "failures", "notes")})

    @server.tool()
    def formats() -> dict[str, Any]:
        """What traceview reads (detected from content) and how to produce each input: the nsys export, ncu --csv,
        torch.profiler and other commands."""
        return formats_answer()

    return server


def serve(roots: list[Path], max_file_gb: float = 8.0) -> None:
    """Run the server over stdio until the client closes it."""
    build_server(roots, max_file_gb).run("stdio")
