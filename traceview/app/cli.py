"""The `traceview` command line. User-fixable errors become one `Error: …` line on stderr (exit 1) here only."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from traceview import __version__
from traceview.analyzer.analysis import Analysis, Source, analyze, analyze_llama, analyze_samples
from traceview.analyzer.decode import decode_ceiling, kv_cache_bytes, parse_bytes, parse_count
from traceview.analyzer.devices import GPUS, find_by_name
from traceview.analyzer.jetson import Board, find_board
from traceview.app.reporters.decode_report import decode_record, render_decode_text
from traceview.app.reporters import REPORTERS, ReportOptions
from traceview.app.reporters.base import format_rate
from traceview.errors import TraceviewError, UsageError
from traceview.parsers import load_trace

app = typer.Typer(
    name="traceview",
    help="GPU profiling trace analyzer: roofline verdicts and ranked bottlenecks from Nsight Compute exports.",
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
            stderr.print(f"Error: {error}", markup=False)
            raise typer.Exit(error.exit_code) from None

    return wrapper  # type: ignore[return-value]


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    md = "md"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_analysis(
    path: Path,
    gpu: str | None,
    interval_s: float = 1.0,
    tokens: int | None = None,
    weights: str | None = None,
    bandwidth: str | None = None,
) -> Analysis:
    """Parse and analyze one trace file (the main job, shared by every command that reads a trace)."""
    trace = load_trace(path, interval_s=interval_s)
    source = Source(str(path), trace.format.value, _sha256(path), path.stat().st_size, trace.profiler)
    if trace.samples is not None:
        board = find_board(gpu) if gpu else None
        skipped = trace.skipped
        return analyze_samples(
            trace.samples, source, board, interval_s, tokens,
            skipped.stray_lines if skipped else 0, skipped.stray_examples if skipped else None,
        )
    if trace.runs is not None:
        return analyze_llama(
            trace.runs, source, gpu,
            parse_bytes(bandwidth, "bandwidth") if bandwidth else None,
            parse_bytes(weights, "weights") if weights else None,
        )
    assert trace.kernels is not None
    return analyze(trace.kernels, source, gpu=gpu)


def _infer_format(output: Path | None, chosen: OutputFormat | None) -> OutputFormat:
    if chosen is not None:
        return chosen
    if output is not None:
        for fmt in OutputFormat:
            if REPORTERS[fmt.value].file_extension == output.suffix.lower():
                return fmt
    return OutputFormat.table


def write_output(text: str, output: Path | None, force: bool) -> None:
    """Write to stdout, or atomically to `output` (refusing to overwrite without force)."""
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if output.exists() and not force:
        raise UsageError(f"{output} already exists — pass --force to overwrite it, or choose another -o path")
    if output.parent and not output.parent.exists():
        raise UsageError(f"{output.parent} does not exist — create the folder first")
    handle = tempfile.NamedTemporaryFile("w", dir=output.parent, prefix=f".{output.name}.", delete=False, encoding="utf-8")
    try:
        with handle:
            handle.write(text)
        os.replace(handle.name, output)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    stderr.print(f"wrote {output}", markup=False)


@app.command("analyze")
@user_errors
def analyze_command(
    file: Annotated[Path, typer.Argument(help="An Nsight Compute CSV export, a tegrastats log, or llama-bench / llama.cpp timing output; detected from content.")],
    gpu: Annotated[str | None, typer.Option("--gpu", "--device", help="GPU or Jetson board for peaks (see `traceview gpus`); default: from the profile or log.")] = None,
    top: Annotated[int | None, typer.Option("--top", min=1, help="Show only the N kernels with the most recoverable time.")] = None,
    output_format: Annotated[OutputFormat | None, typer.Option("--format", "-f", help="table (terminal), json or md; default from -o's extension, else table.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to this file instead of stdout.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite -o if it exists.")] = False,
    per_launch: Annotated[bool, typer.Option("--per-launch", help="JSON: also list every launch with its verdict.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.001, help="tegrastats: seconds between samples when the log has no timestamps.")] = 1.0,
    tokens: Annotated[int | None, typer.Option("--tokens", min=1, help="tegrastats: tokens generated during the log, for energy per token.")] = None,
    weights: Annotated[str | None, typer.Option("--weights", help="llama.cpp: bytes read per decoded token (default: the model size the output reports).")] = None,
    bandwidth: Annotated[str | None, typer.Option("--bandwidth", help="llama.cpp: memory bandwidth for MBU, e.g. 1008GB/s (default: the device's).")] = None,
) -> None:
    """Label every kernel compute-, memory- or latency-bound and rank them by recoverable time."""
    fmt = _infer_format(output, output_format)
    if output is not None and output.exists() and not force:
        raise UsageError(f"{output} already exists — pass --force to overwrite it, or choose another -o path")
    analysis = run_analysis(file, gpu, interval, tokens, weights, bandwidth)
    color = fmt is OutputFormat.table and output is None and sys.stdout.isatty()
    width = Console().width if color else 160
    options = ReportOptions(top=top, per_launch=per_launch, color=color, width=width, command_line=shlex.join(["traceview", *sys.argv[1:]]))
    write_output(REPORTERS[fmt.value]().render(analysis, options), output, force)


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


def _bandwidth_for(gpu: str | None, bandwidth: str | None, telemetry_board: Board | None) -> tuple[float, str]:
    """Return (bytes/s, where it came from) for decode: --bandwidth, else --gpu/--device, else the log's board."""
    if bandwidth:
        return parse_bytes(bandwidth, "bandwidth"), "--bandwidth"
    if gpu:
        spec = find_by_name(gpu)
        if spec is not None:
            return spec.dram_bytes_per_s, f"{spec.name} datasheet ({spec.dram_bytes_per_s / 1e9:.1f} GB/s)"
        board = find_board(gpu)
        return board.peak_bytes_per_s, f"{board.name} ({board.source})"
    if telemetry_board is not None:
        return telemetry_board.peak_bytes_per_s, f"{telemetry_board.name}, inferred from the tegrastats log"
    raise UsageError("no bandwidth: pass --gpu NAME (see `traceview gpus`), --device BOARD or --bandwidth 3.35TB/s")


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
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f", help="table or json.")] = OutputFormat.table,
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
    if output_format is OutputFormat.json:
        write_output(json.dumps(data, indent=2, allow_nan=False) + "\n", None, False)
    else:
        write_output(render_decode_text(data), None, False)


@app.callback(invoke_without_command=False)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True)] = False,
) -> None:
    if version:
        typer.echo(f"traceview {__version__}")
        raise typer.Exit(0)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
