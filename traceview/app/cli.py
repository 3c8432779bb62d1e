"""The `traceview` command line. User-fixable errors become one `Error: …` line on stderr (exit 1) here only."""

from __future__ import annotations

import functools
import hashlib
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
from traceview.analyzer.analysis import Analysis, Source, analyze
from traceview.analyzer.devices import GPUS
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


def run_analysis(path: Path, gpu: str | None) -> Analysis:
    """Parse and analyze one trace file (the main job, shared by every command that reads a trace)."""
    trace = load_trace(path)
    source = Source(str(path), trace.format.value, _sha256(path), path.stat().st_size, trace.profiler)
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
    file: Annotated[Path, typer.Argument(help="An Nsight Compute CSV export (details or raw page); format detected from content.")],
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU for datasheet peaks (see `traceview gpus`); default: from the profile.")] = None,
    top: Annotated[int | None, typer.Option("--top", min=1, help="Show only the N kernels with the most recoverable time.")] = None,
    output_format: Annotated[OutputFormat | None, typer.Option("--format", "-f", help="table (terminal), json or md; default from -o's extension, else table.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to this file instead of stdout.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite -o if it exists.")] = False,
    per_launch: Annotated[bool, typer.Option("--per-launch", help="JSON: also list every launch with its verdict.")] = False,
) -> None:
    """Label every kernel compute-, memory- or latency-bound and rank them by recoverable time."""
    fmt = _infer_format(output, output_format)
    if output is not None and output.exists() and not force:
        raise UsageError(f"{output} already exists — pass --force to overwrite it, or choose another -o path")
    analysis = run_analysis(file, gpu)
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
