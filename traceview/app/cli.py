"""The `traceview` command line. User-fixable errors become one `Error: …` line on stderr (exit 1) here only."""

from __future__ import annotations

import dataclasses
import errno
import functools
import io
import os
import re
import shlex
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from traceview import __version__
from traceview.allocators import freed_blocks_given_back_after, reuse_freed_blocks
from traceview.analyzer.analysis import NVTX_PASS, Analysis
from traceview.analyzer.decode import decode_ceiling, kv_cache_bytes, parse_bytes, parse_count
from traceview.analyzer.devices import GPUS, find_by_name, lookup_gpu
from traceview.analyzer.diff import compare
from traceview.analyzer.jetson import BOARDS, Board, find_board
from traceview.analyzer.kinds import AnalysisOptions
from traceview.analyzer.pipeline import _joined_ncu, analyze_file
from traceview.app.formatting import format_rate, terminal_safe
from traceview.app.reporters import REPORTERS, ReportOptions
from traceview.app.reporters.decode_report import decode_record, decode_report
from traceview.app.reporters.diff_report import diff_report
from traceview.errors import TraceviewError, UsageError
from traceview.wording import counted

app = typer.Typer(
    name="traceview",
    help="GPU profiling trace analyzer: roofline verdicts and ranked bottlenecks from Nsight Compute and Nsight Systems exports, "
    "PyTorch profiler traces, nvprof, tegrastats logs, llama.cpp output and serving benchmarks; reports, run-vs-run diffs, "
    "projections onto other GPUs, LLM decode ceilings and an MCP server for coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(function: F) -> F:
    """Turn TraceviewError into `Error: …` on stderr and its exit code; anything else keeps its traceback."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except TraceviewError as error:
            stderr.print(f"Error: {terminal_safe(error)}", markup=False)
            raise typer.Exit(error.exit_code) from None

    return wrapper  # type: ignore[return-value]


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    md = "md"
    html = "html"


class _ProgressBar:
    """A progress bar on stderr for large inputs (a million rows or more): rows read, then each analysis phase by name.
    Small inputs print nothing; the bar disappears when the command ends."""

    def __init__(self) -> None:
        self.progress: Progress | None = None
        self.task: Any = None

    def rows(self, done: int, total: int) -> None:
        if total < 1_000_000:
            return
        if self.progress is None:
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} rows"),
                                     TimeElapsedColumn(), console=stderr, transient=True)
            self.progress.start()
            self.task = self.progress.add_task("reading the export", total=total)
        # A second count (the NVTX rows the analysis streams) sets its own total.
        self.progress.update(self.task, completed=done, total=total)

    def phase(self, name: str) -> None:
        """Name the analysis step under way (only once the read showed a bar: small inputs finish before it matters)."""
        if self.progress is not None:
            self.progress.update(self.task, description=name)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def run_analysis(
    path: Path,
    gpu: str | None,
    interval_s: float = 1.0,
    tokens: int | None = None,
    weights: str | None = None,
    bandwidth: str | None = None,
    ncu: list[Path] | None = None,
    gap_threshold: str | None = None,
    step_kernels: int | None = None,
    kv_bytes_per_token: str | None = None,
    what_if: str | None = None,
    timeline: bool = False,
) -> Analysis:
    """Parse and analyze one trace file with a progress bar on stderr for large inputs (analyze_file, as every command
    that reads a trace runs it); `timeline` for an analysis whose timeline will be drawn (AnalysisOptions.timeline)."""
    bar = _ProgressBar()

    def phase(name: str) -> None:
        bar.phase(name)
        # Where this command gives freed memory back at once (a large input), the NVTX pass keeps freed blocks for
        # reuse: it comes after the analysis' peak. Not with a timeline: its lanes are built in that pass.
        reuse_freed_blocks(name == NVTX_PASS and not timeline)

    try:
        options = AnalysisOptions(gpu, interval_s, tokens, weights, bandwidth, None, gap_threshold, step_kernels, kv_bytes_per_token,
                                  what_if, phase, bar.rows, timeline)
        with freed_blocks_given_back_after():
            return analyze_file(path, options, ncu)
    finally:
        bar.close()


def _weights_from(weights: str | None, params: str | None, bits: float | None) -> str | None:
    """Return the weights size as --weights takes it: given, or parameters × bits per weight."""
    if params is None and bits is None:
        return weights
    if weights is not None or params is None or bits is None:
        raise UsageError("give the weights as --weights 4.2GB, or as --params 8B with --bits 4.5 (not both)")
    return f"{parse_count(params) * bits / 8:.0f}B"


def _infer_format(output: Path | None, chosen: OutputFormat | None) -> OutputFormat:
    if chosen is not None:
        return chosen
    if output is not None:
        for fmt in OutputFormat:
            if REPORTERS[fmt.value].file_extension == output.suffix.lower():
                return fmt
    return OutputFormat.table


def _refuse_overwrite(output: Path | None, force: bool) -> None:
    """Fail before any work when -o exists and --force is absent, so nothing is overwritten; and whatever --force
    says, never write through a symbolic link or onto a directory, FIFO or device node."""
    if output is None:
        return
    if output.is_symlink():
        raise UsageError(f"{output} is a symbolic link — give the path of a regular file for -o")
    if output.exists() and not output.is_file():
        raise UsageError(f"{output} is not a regular file (a directory or a device) — give the path of a file for -o")
    if output.exists() and not force:
        raise UsageError(f"{output} already exists — pass --force to overwrite it, or choose another -o path")


def _commit_point() -> None:
    """From here on Ctrl-C is ignored: the output is about to be renamed into place, and once it is the command's work
    is done, so an interrupt can no longer leave the promised state (the whole output, exit 0, or nothing, exit 130).
    A Ctrl-C that came just before is raised here, by signal.signal itself, while nothing has been written yet."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interruptible() -> None:
    """Ctrl-C ends the command again (after _commit_point), for work that follows one written output."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def write_output(text: str, output: Path | None, force: bool) -> None:
    """Write to stdout, or atomically to `output` (refusing to overwrite without force)."""
    if output is None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
        except OSError as error:
            if error.errno == errno.EBADF:
                raise UsageError("standard output is closed — redirect it to a file (> report.txt) or write the report with -o FILE") from None
            raise UsageError(f"cannot write to standard output ({error.strerror or error}) — redirect it to a file with space") from None
        return
    _refuse_overwrite(output, force)  # again at the last moment: the file may have appeared during the analysis
    if output.parent and not output.parent.is_dir():
        raise UsageError(f"{output.parent} is not an existing folder — create it first")
    try:
        # Closed (and renamed over the output) once written, or removed on failure: a `with` would close it too early.
        handle = tempfile.NamedTemporaryFile("w", dir=output.parent, prefix=f".{output.name}.", delete=False, encoding="utf-8")  # noqa: SIM115
    except OSError as error:
        raise UsageError(f"cannot write in {output.parent} ({error.strerror or error}) — check its permissions or choose another -o") from None
    try:
        with handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(handle.name, 0o666 & ~umask)  # NamedTemporaryFile creates 0600; a report is an ordinary file
        _commit_point()
        os.replace(handle.name, output)
    except OSError as error:
        Path(handle.name).unlink(missing_ok=True)
        raise UsageError(f"cannot write {output} ({error.strerror or error}) — check the free space and permissions; nothing was written") from None
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    stderr.print(f"wrote {terminal_safe(output)}", markup=False)


# Options shared by every command that reads a trace.
FileArgument = Annotated[Path, typer.Argument(help="An Nsight Compute export (CSV, console text or .ncu-rep), an Nsight Systems SQLite export or "
                                                    "`nsys stats` output, a tegrastats log, or llama-bench / llama.cpp output; detected from content.")]
GpuOption = Annotated[str | None, typer.Option("--gpu", "--device", help="GPU or Jetson board for peaks (see `traceview gpus`); default: from the profile or log.")]
TopOption = Annotated[int | None, typer.Option("--top", min=1, help="Show only the N kernels with the most recoverable time.")]
OutputOption = Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout; the format follows its extension.")]
ForceOption = Annotated[bool, typer.Option("--force", help="Overwrite -o if it exists.")]
IntervalOption = Annotated[float, typer.Option("--interval", min=0.001, help="tegrastats: seconds between samples when the log has no timestamps.")]
TokensOption = Annotated[int | None, typer.Option("--tokens", min=1, help="tegrastats: tokens generated during the log, for energy per token.")]
WeightsOption = Annotated[str | None, typer.Option("--weights", help="Bytes read per decoded token, e.g. 4.2GB: llama.cpp (default: the model size it reports); Nsight Systems: decode tokens/s and MBU from the step time.")]
BandwidthOption = Annotated[str | None, typer.Option("--bandwidth", help="llama.cpp: memory bandwidth for MBU, e.g. 1008GB/s (default: the device's).")]
NcuOption = Annotated[list[Path] | None, typer.Option("--ncu", help="Nsight Systems or nvprof input: join this Nsight Compute export (CSV or .ncu-rep), or nvprof --metrics output, by kernel name; repeat for one file per kernel.")]
StepKernelsOption = Annotated[int | None, typer.Option("--step-kernels", min=1, help="Nsight Compute: launches per decode step (default: found from the repeating kernel sequence); with --weights, bytes beyond the weights and MBU per step.")]
KvPerTokenOption = Annotated[str | None, typer.Option("--kv-bytes-per-token", help="Serving benchmarks: KV-cache bytes per token (layers × KV heads × head dim × 2 × dtype bytes, e.g. 512KiB); default: from the model's config where its name says.")]
WhatIfOption = Annotated[str | None, typer.Option("--what-if", help="Project the run onto other GPUs, e.g. h100-sxm,a100-80gb: every kernel moved along its own roof (see `traceview gpus`).")]
ParamsOption = Annotated[str | None, typer.Option("--params", help="Nsight Systems decode loop: parameter count, e.g. 8B (with --bits, instead of --weights).")]
BitsOption = Annotated[float | None, typer.Option("--bits", min=0.1, help="Bits per weight, e.g. 4.5 for Q4_K_M (with --params).")]
GapOption = Annotated[str | None, typer.Option("--gap-threshold", help="Nsight Systems: idle gaps at least this long are gpu_gaps findings, e.g. 100ms (default 500ms, as nsys analyze).")]


def _options(top: int | None, color: bool = False, per_launch: bool = False) -> ReportOptions:
    return ReportOptions(
        top=top, per_launch=per_launch, color=color, width=Console().width if color else 160,
        command_line=shlex.join(["traceview", *sys.argv[1:]]),
        generated_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
    )


@app.command("analyze")
@user_errors
def analyze_command(
    file: FileArgument,
    gpu: GpuOption = None,
    top: TopOption = None,
    output_format: Annotated[OutputFormat | None, typer.Option("--format", "-f", help="table (terminal), json, md or html; default from -o's extension, else table.")] = None,
    output: OutputOption = None,
    force: ForceOption = False,
    per_launch: Annotated[bool, typer.Option("--per-launch", help="JSON: also list every launch with its verdict.")] = False,
    interval: IntervalOption = 1.0,
    tokens: TokensOption = None,
    weights: WeightsOption = None,
    bandwidth: BandwidthOption = None,
    ncu: NcuOption = None,
    gap_threshold: GapOption = None,
    params: ParamsOption = None,
    bits: BitsOption = None,
    step_kernels: StepKernelsOption = None,
    kv_bytes_per_token: KvPerTokenOption = None,
    what_if: WhatIfOption = None,
) -> None:
    """Label every kernel compute-, memory- or latency-bound and rank them by recoverable time; for an Nsight Systems
    export, say first where each GPU's time went and why it waited."""
    fmt = _infer_format(output, output_format)
    _refuse_overwrite(output, force)
    analysis = run_analysis(file, gpu, interval, tokens, _weights_from(weights, params, bits), bandwidth, ncu, gap_threshold, step_kernels,
                            kv_bytes_per_token, what_if)
    color = fmt is OutputFormat.table and output is None and sys.stdout.isatty()
    write_output(render_analysis(analysis, fmt.value, _options(top, color, per_launch)), output, force)


@app.command("report")
@user_errors
def report_command(
    file: FileArgument,
    output: Annotated[Path, typer.Option("--output", "-o", help="report.html, report.md or report.json: the format follows the extension.")],
    output_format: Annotated[OutputFormat | None, typer.Option("--format", "-f", help="html, md or json, when -o has another extension.")] = None,
    gpu: GpuOption = None,
    top: Annotated[int | None, typer.Option("--top", min=1, help="Kernels in the Markdown table (default 10; HTML and JSON list all).")] = None,
    force: ForceOption = False,
    png: Annotated[bool, typer.Option("--png", help="Also write the main figure as a PNG beside the report (needs kaleido and Chromium).")] = False,
    interval: IntervalOption = 1.0,
    tokens: TokensOption = None,
    weights: WeightsOption = None,
    bandwidth: BandwidthOption = None,
    ncu: NcuOption = None,
    gap_threshold: GapOption = None,
    params: ParamsOption = None,
    bits: BitsOption = None,
    step_kernels: StepKernelsOption = None,
    kv_bytes_per_token: KvPerTokenOption = None,
    what_if: WhatIfOption = None,
) -> None:
    """Write a report for a ticket: self-contained HTML, Markdown or JSON, with provenance."""
    fmt = output_format or _infer_format(output, None)
    if fmt is OutputFormat.table:
        raise UsageError(f"cannot tell the report format from {output.name!r} — use .html, .md or .json, or --format")
    _refuse_overwrite(output, force)
    png_path = output.with_suffix(".png")
    if png:
        _refuse_overwrite(png_path, force)
        _require_kaleido()
    # An HTML report draws the whole-run timeline: its lanes are built in the analysis' own pass over the NVTX ranges
    # rather than by a second one.
    analysis = run_analysis(file, gpu, interval, tokens, _weights_from(weights, params, bits), bandwidth, ncu, gap_threshold, step_kernels,
                            kv_bytes_per_token, what_if, timeline=fmt is OutputFormat.html)
    text = render_analysis(analysis, fmt.value, _options(top))
    if png and fmt is OutputFormat.md:
        text += f"\n![main figure]({png_path.name})\n"
    write_output(text, output, force)
    if png:
        _interruptible()  # the report is whole; Ctrl-C during the PNG leaves it and no PNG
        write_png(analysis, png_path)


def render_analysis(analysis: Analysis, fmt: str, options: ReportOptions) -> str:
    """Return the analysis rendered by the `fmt` reporter: its view's document (brief for the terminal) and record."""
    from traceview.app.views import report_of

    reporter = REPORTERS[fmt]()
    return reporter.render(report_of(analysis, dataclasses.replace(options, brief=reporter.brief)), options)


def _require_kaleido() -> None:
    try:
        import kaleido  # noqa: F401
    except ImportError:
        raise UsageError("--png needs kaleido: pip install 'traceview[png]' (it drives a system Chromium, e.g. apt install chromium)") from None


def write_png(analysis: Analysis, path: Path) -> None:
    """Write the main figure as PNG through Plotly's kaleido export (it drives a system Chromium)."""
    from traceview.app.views import view_for

    _require_kaleido()
    try:
        view_for(analysis).figure(analysis).write_image(str(path), format="png", width=1200, height=600)
    except Exception as error:  # noqa: BLE001 — kaleido raises several types when no browser can start
        raise UsageError(f"could not render the PNG ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}) — "
                         "install Chromium (apt install chromium) or drop --png") from None
    stderr.print(f"wrote {terminal_safe(path)}", markup=False)


class DiffFormat(str, Enum):
    table = "table"
    json = "json"
    md = "md"
    html = "html"


REGRESSION_EXIT_CODE = 3


@app.command("diff")
@user_errors
def diff_command(
    before: Annotated[Path, typer.Argument(help="The baseline run (any input analyze reads).")],
    after: Annotated[Path, typer.Argument(help="The run to compare with it (same kind of input).")],
    gpu: GpuOption = None,
    output_format: Annotated[DiffFormat, typer.Option("--format", "-f", help="table, json, md or html.")] = DiffFormat.table,
    fail_on_regression: Annotated[float | None, typer.Option("--fail-on-regression", min=0.0, help=f"Exit {REGRESSION_EXIT_CODE} when total GPU time, a kernel with at least --min-share of it, or a llama.cpp test's tokens/s regresses by more than PCT %.")] = None,
    min_share: Annotated[float, typer.Option("--min-share", min=0.0, help="Kernels below this share of GPU time (%) never fail the gate.")] = 1.0,
    top: Annotated[int | None, typer.Option("--top", min=1, help="Kernels to list (default all in json, 15 otherwise).")] = None,
    interval: IntervalOption = 1.0,
    weights: WeightsOption = None,
    bandwidth: BandwidthOption = None,
) -> None:
    """Compare two runs kernel by kernel (time, verdict, % of roof); optionally fail CI on a regression."""
    first = run_analysis(before, gpu, interval, None, weights, bandwidth)
    second = run_analysis(after, gpu, interval, None, weights, bandwidth)
    result = compare(first, second, fail_on_regression, min_share)
    reporter = REPORTERS[output_format.value]()
    color = output_format is DiffFormat.table and sys.stdout.isatty()
    write_output(reporter.render(diff_report(result, top, reporter.brief), _options(top, color)), None, False)
    for warning in result.warnings:
        stderr.print(f"warning: {terminal_safe(warning)}", markup=False)
    if result.regressions:
        for regression in result.regressions:
            stderr.print(f"regression: {terminal_safe(regression)}", markup=False)
        raise typer.Exit(REGRESSION_EXIT_CODE)


def bundled_samples() -> list[Path]:
    """Return the real sample exports shipped with traceview (in the wheel, or in the source checkout)."""
    package = Path(__file__).resolve().parent.parent
    for folder in (package / "sample_traces", package.parent / "sample_traces"):
        if folder.is_dir():
            return [folder / "ncu" / "v100_cfd_details_ncu2019.5.csv", folder / "ncu" / "gtx1650_calc_energy_raw.csv",
                    folder / "nsys" / "h100x2_copy_bound_nsys2026.2.sqlite"]
    return []


LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1"}


def allowed_hosts(bound: str, extra: list[str]) -> set[str] | None:
    """Return the Host header names the dashboard answers for: the bound address (and its loopback names), plus
    --allow-host; None (any) when bound to every interface without --allow-host, or with --allow-host '*'.

    A page on 127.0.0.1 that answers any Host name can be read by a web page through DNS rebinding."""
    if "*" in extra:
        return None
    names = {name.lower().strip("[]") for name in extra}
    if bound in ("0.0.0.0", "::", ""):
        return (names | LOOPBACK_NAMES) if names else None
    names.add(bound.lower().strip("[]"))
    return names | LOOPBACK_NAMES if bound in LOOPBACK_NAMES else names


@app.command("serve")
@user_errors
def serve_command(
    files: Annotated[list[Path] | None, typer.Argument(help="Exports to load (any input analyze reads); default: bundled samples.")] = None,
    gpu: GpuOption = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind; only 127.0.0.1 is reachable from this machine alone.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8050,
    max_upload_mb: Annotated[int, typer.Option("--max-upload-mb", min=1, help="Largest file the page accepts for upload.")] = 512,
    allow_host: Annotated[list[str] | None, typer.Option("--allow-host", help="Another host name the page may be opened as (repeat; '*' for any).")] = None,
    what_if: WhatIfOption = None,
) -> None:
    """Open the dashboard in the browser: roofline, ranked bottlenecks, details, uploads and run comparison."""
    from traceview.app.dashboard import RunStore, create_app

    paths = files or bundled_samples()
    if not paths:
        raise UsageError("no file given and no bundled sample found — pass an export: traceview serve run.csv")
    store = RunStore()
    for path in paths:
        store.add(run_analysis(path, gpu, what_if=what_if, timeline=True), path.name)
    dashboard = create_app(store, lambda path: run_analysis(path, gpu, what_if=what_if, timeline=True), max_upload_mb * 2**20,
                           allowed_hosts(host, allow_host or []))
    typer.echo(f"traceview dashboard: http://{host}:{port}/  (Ctrl+C to stop)")
    dashboard.run(host=host, port=port, debug=False)


@app.command("gpus")
@user_errors
def gpus_command() -> None:
    """List the built-in GPU table (datasheet peaks, dense) that --gpu chooses from."""
    table = Table(header_style="bold")
    for title in ("--gpu", "name", "CC", "SMs", "DRAM", "FP64", "FP32", "FP16/BF16 TC", "TF32 TC", "FP8 TC", "INT8 TC"):
        table.add_column(title, justify="left" if title in ("--gpu", "name") else "right")
    for spec in GPUS:
        table.add_row(
            spec.key, spec.name, spec.compute_capability, str(spec.sm_count or "?"),
            format_rate(spec.dram_bytes_per_s, "B/s"),
            *(format_rate(v, "FLOP/s") if v else "—" for v in (spec.fp64_flop_per_s, spec.fp32_flop_per_s,
              spec.tensor_fp16_flop_per_s, spec.tensor_tf32_flop_per_s, spec.tensor_fp8_flop_per_s)),
            format_rate(spec.tensor_int8_op_per_s, "OP/s") if spec.tensor_int8_op_per_s else "—",
        )
    Console(width=max(160, Console().width)).print(table)
    boards = Table(header_style="bold", title="Jetson boards (--device, for tegrastats logs)")
    for title in ("--device", "name", "bus", "EMC max", "GPU max", "peak bandwidth"):
        boards.add_column(title)
    for board in BOARDS:
        boards.add_row(board.key, board.name, f"{board.bus_bytes * 8}-bit", f"{board.emc_max_mhz:.0f} MHz", f"{board.gpu_max_mhz:.0f} MHz",
                       f"{board.peak_bytes_per_s / 1e9:.1f} GB/s")
    Console(width=max(160, Console().width)).print(boards)


def _bandwidth_for(gpu: str | None, bandwidth: str | None, telemetry_board: Board | None) -> tuple[float, str]:
    """Return (bytes/s, where it came from) for decode: --bandwidth, else --gpu/--device, else the log's board."""
    if bandwidth:
        return parse_bytes(bandwidth, "bandwidth"), "--bandwidth"
    if gpu:
        # A Jetson board name first (its bandwidth comes with the board's notes), else the GPU table, which refuses
        # unknown and ambiguous names (`a100`) with the candidates.
        try:
            board = find_board(gpu)
            return board.peak_bytes_per_s, f"{board.name} ({board.source})"
        except UsageError:
            spec = lookup_gpu(gpu)
            return spec.dram_bytes_per_s, f"{spec.name} datasheet ({spec.dram_bytes_per_s / 1e9:.1f} GB/s)"
    if telemetry_board is not None:
        return telemetry_board.peak_bytes_per_s, f"{telemetry_board.name}, inferred from the tegrastats log"
    raise UsageError("no bandwidth: pass --gpu NAME (see `traceview gpus`), --device BOARD or --bandwidth 3.35TB/s")


STRAGGLER_EXIT_CODE = 3


class FleetEngine(str, Enum):
    local = "local"
    dask = "dask"


@app.command("fleet")
@user_errors
def fleet_command(
    inputs: Annotated[list[str], typer.Argument(help="Exports: files, directories (searched recursively), globs, or a text file listing paths.")],
    engine: Annotated[FleetEngine, typer.Option("--engine", help="local: a process pool on this machine; dask: a Dask cluster (pip install 'traceview[dask]').")] = FleetEngine.local,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Processes (local) or LocalCluster workers (dask); default: the CPU count.")] = None,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler address, e.g. tcp://head:8786 (default: DASK_SCHEDULER_ADDRESS, else a LocalCluster).")] = None,
    scheduler_file: Annotated[Path | None, typer.Option("--scheduler-file", help="Dask scheduler file (e.g. from dask-jobqueue or dask-mpi).")] = None,
    cache: Annotated[Path | None, typer.Option("--cache", help="Directory of per-file summaries (Parquet, keyed by sha256): a rerun reads only new files.")] = None,
    rank_from: Annotated[str | None, typer.Option("--rank-from", help="Regex whose first group is the rank in the file name (default: rank/proc/worker/gpu/node + a number).")] = None,
    k: Annotated[float, typer.Option("--k", min=0.0, help="Straggler: above median + k·MAD of the ranks' step time (or kernel time).")] = 3.0,
    fail_on_straggler: Annotated[float | None, typer.Option("--fail-on-straggler", min=0.0, help=f"Exit {STRAGGLER_EXIT_CODE} when a straggler is more than PCT % slower than the median rank.")] = None,
    gpu: GpuOption = None,
    output_format: Annotated[OutputFormat | None, typer.Option("--format", "-f", help="table, json, md or html; default from -o's extension, else table.")] = None,
    output: OutputOption = None,
    force: ForceOption = False,
    top: Annotated[int | None, typer.Option("--top", min=1, help="Kernels to list (default 15; JSON: all).")] = None,
    fail_on_regression: Annotated[float | None, typer.Option("--fail-on-regression", min=0.0, help=f"fleet diff: exit {REGRESSION_EXIT_CODE} when the median kernel time per rank, or a kernel with at least --min-share of it, grows by more than PCT %.")] = None,
    min_share: Annotated[float, typer.Option("--min-share", min=0.0, help="fleet diff: kernels below this share (%) of the new fleet's kernel time never fail the gate.")] = 1.0,
    ncu: NcuOption = None,
) -> None:
    """Analyse many ranks or runs at once: per-kernel totals across ranks, per-rank breakdowns, straggler ranks and the
    files that failed (each with its one-line error); locally or on a Dask cluster.

    `traceview fleet diff BASE NEW` compares two sets (each a directory, glob or list), kernel by kernel."""
    from traceview.analyzer.fleet import compare_fleets, join_ncu_verdicts
    from traceview.app.fleet import MapOptions, expand_inputs, run_fleet
    from traceview.app.reporters.fleet_report import fleet_diff_report, fleet_report

    fmt = _infer_format(output, output_format)
    _refuse_overwrite(output, force)
    if rank_from is not None:
        try:
            if re.compile(rank_from).groups < 1:
                raise UsageError("--rank-from needs a group around the rank, e.g. 'rank(\\d+)'")
        except re.error as error:
            raise UsageError(f"--rank-from is not a regular expression: {error}") from None
    diffing = bool(inputs) and inputs[0] == "diff" and not Path("diff").exists()
    if diffing and len(inputs) != 3:
        raise UsageError("fleet diff takes two sets: traceview fleet diff BASE NEW (each a directory, glob or list of files)")
    if not diffing and (fail_on_regression is not None):
        raise UsageError("--fail-on-regression applies to `traceview fleet diff BASE NEW`")
    sets = [expand_inputs([inputs[1]]), expand_inputs([inputs[2]])] if diffing else [expand_inputs(inputs)]
    if not all(sets):
        raise UsageError("no files found in the given inputs")
    bar = _ProgressBar()

    def progress(done: int, total: int) -> None:
        if total >= 2 and bar.progress is None:
            bar.progress = Progress(TextColumn("summarising"), BarColumn(), TextColumn("{task.completed}/{task.total} files"), TimeElapsedColumn(),
                                    console=stderr, transient=True)
            bar.progress.start()
            bar.task = bar.progress.add_task("fleet", total=total)
        if bar.progress is not None:
            bar.progress.update(bar.task, completed=done)

    def internal(path: str, trace: str) -> None:
        stderr.print(f"internal error on {terminal_safe(path)} (the file is listed as failed; please report this):\n{trace}", markup=False)

    runs = []
    try:
        for paths in sets:
            runs.append(run_fleet(paths, MapOptions(gpu, rank_from), engine.value, workers, scheduler,
                                  str(scheduler_file) if scheduler_file else None, cache, k, progress, internal))
            bar.close()
            bar = _ProgressBar()
    finally:
        bar.close()
    if cache is not None:
        for run in runs:
            stderr.print(f"{run.read} file(s) read, {run.cached} from the cache ({cache})", markup=False, highlight=False)
    if diffing:
        compared = compare_fleets(runs[0].result, runs[1].result, fail_on_regression, min_share)
        reporter = REPORTERS[fmt.value]()
        write_output(reporter.render(fleet_diff_report(compared, top, reporter.brief), _options(top)), output, force)
        for failure in runs[0].result.failures + runs[1].result.failures:
            stderr.print(f"failed: {terminal_safe(failure['path'])}: {terminal_safe(failure['error'])}", markup=False, highlight=False)
        if compared.regressions:
            for regression in compared.regressions:
                stderr.print(f"regression: {terminal_safe(regression)}", markup=False, highlight=False)
            raise typer.Exit(REGRESSION_EXIT_CODE)
        return
    run = runs[0]
    result = run.result
    if ncu:
        # Once for the fleet, on the driver: the verdicts do not depend on the rank.
        result, matched = join_ncu_verdicts(result, _joined_ncu(ncu, gpu))
        stderr.print(f"Nsight Compute verdicts joined onto {matched} of {counted(result.kernels.height, 'kernel')}", markup=False, highlight=False)
    reporter = REPORTERS[fmt.value]()
    write_output(reporter.render(fleet_report(result, top, reporter.brief), _options(top)), output, force)
    slow = [s for s in result.stragglers if fail_on_straggler is not None and (s["excess_pct"] or 0) > fail_on_straggler]
    if slow:
        for s in slow:
            stderr.print(f"straggler: rank {s['rank']} is {s['excess_pct']:.1f}% slower than the median rank", markup=False, highlight=False)
        raise typer.Exit(STRAGGLER_EXIT_CODE)


@app.command("decode")
@user_errors
def decode_command(
    weights: Annotated[str | None, typer.Option("--weights", help="Weight bytes read per token, e.g. 4.2GB or 3.56GiB.")] = None,
    params: Annotated[str | None, typer.Option("--params", help="Parameter count, e.g. 7B (with --bits).")] = None,
    bits: Annotated[float | None, typer.Option("--bits", min=0.1, help="Bits per weight, e.g. 4.5 for Q4_K_M (with --params).")] = None,
    layers: Annotated[int | None, typer.Option("--layers", min=1, help="KV cache: transformer layers.")] = None,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", min=1, help="KV cache: key/value heads (GQA).")] = None,
    head_dim: Annotated[int | None, typer.Option("--head-dim", min=1, help="KV cache: dimension per head.")] = None,
    context: Annotated[int | None, typer.Option("--context", min=0, help="KV cache: tokens in context.")] = None,
    kv_bits: Annotated[float, typer.Option("--kv-bits", min=1, help="KV cache: bits per element.")] = 16,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Sequences decoded together (weights read once per step).")] = 1,
    gpu: Annotated[str | None, typer.Option("--gpu", "--device", help="GPU or Jetson board whose bandwidth bounds decode.")] = None,
    bandwidth: Annotated[str | None, typer.Option("--bandwidth", help="Memory bandwidth, e.g. 3.35TB/s (overrides --gpu).")] = None,
    measured: Annotated[float | None, typer.Option("--measured", min=0.0, help="Measured decode tokens/s (aggregate) for MBU.")] = None,
    tegrastats_log: Annotated[Path | None, typer.Option("--tegrastats", help="tegrastats log of the same run: measured EMC bandwidth.")] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f", help="table, json, md or html.")] = OutputFormat.table,
) -> None:
    """Decode tokens/s ceiling from bytes per token and memory bandwidth; MBU of a measured run."""
    if weights is not None:
        weight_bytes = parse_bytes(weights, "weights")
    elif params is not None and bits is not None:
        weight_bytes = parse_count(params) * bits / 8
    else:
        raise UsageError("say how many bytes the weights are: --weights 4.2GB, or --params 7B --bits 4.5")
    kv_args = {"--layers": layers, "--kv-heads": kv_heads, "--head-dim": head_dim, "--context": context}
    missing = [name for name, value in kv_args.items() if value is None]
    if len(missing) not in (0, len(kv_args)):
        raise UsageError(f"the KV cache needs all of --layers --kv-heads --head-dim --context; missing {' '.join(missing)}")
    kv = kv_cache_bytes(layers, kv_heads, head_dim, context, kv_bits) if not missing else 0.0  # type: ignore[arg-type]
    telemetry = None
    if tegrastats_log is not None:
        telemetry = run_analysis(tegrastats_log, gpu if gpu and find_by_name(gpu) is None else None).telemetry
        if telemetry is None:
            raise UsageError(f"{tegrastats_log} is not a tegrastats log")
    peak, peak_source = _bandwidth_for(gpu, bandwidth, telemetry.board if telemetry else None)
    result = decode_ceiling(weight_bytes, peak, kv, batch, measured)
    data = decode_record(result, peak_source, telemetry)
    write_output(REPORTERS[output_format.value]().render(decode_report(data), _options(None)), None, False)


@app.command("mcp")
@user_errors
def mcp_command(
    root: Annotated[list[Path] | None, typer.Option("--root", help="A folder whose files the server may read (repeat; default: the working directory).")] = None,
    max_file_gb: Annotated[float, typer.Option("--max-file-gb", min=0.001, help="Largest file the server analyses for one answer.")] = 8.0,
) -> None:
    """Run a Model Context Protocol server over stdio for coding agents: analyze, kernel, window, diff, fleet, formats."""
    try:
        from traceview.app.mcp_server import serve
    except ImportError:
        raise UsageError("traceview mcp needs the MCP SDK: pip install 'traceview[mcp]'") from None
    folders = root or [Path.cwd()]
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"--root {folder} is not a folder")
    stderr.print(f"traceview MCP server on stdio, reading under {', '.join(str(f.resolve()) for f in folders)}", markup=False, highlight=False)
    serve(folders, max_file_gb)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"traceview {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version)] = False,
) -> None:
    """GPU profiling trace analyzer."""


class _ClosedOutput(io.TextIOBase):
    """Standard output of a process started with it closed (`traceview analyze F >&-`), where Python leaves it None:
    writing fails as on a closed descriptor, so the report's writer says so in one line (-o still works)."""

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def main() -> None:
    if sys.stdout is None:
        sys.stdout = _ClosedOutput()
    app()


if __name__ == "__main__":
    main()
