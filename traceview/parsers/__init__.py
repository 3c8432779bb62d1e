"""Parsers: trace file → typed polars frame with a fixed schema. Imports nothing from analyzer or app."""

from __future__ import annotations

import codecs
import contextlib
import csv
import dataclasses
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from traceview.errors import TraceFormatError, UnknownFormatError
from traceview.parsers import (
    fleet_result,
    kineto,
    llama_cpp,
    metrics_csv,
    ncu_console,
    ncu_csv,
    ncu_rep,
    ncu_summary,
    nsys_sqlite,
    nsys_stats,
    nvprof,
    nvprof_metrics,
    nvprof_sqlite,
    serving_bench,
    tegrastats,
)
from traceview.parsers.base import Format, ReadOptions, Trace
from traceview.parsers.sniff import TraceFormat, check_readable, detected

# Real exports carry kernel names of hundreds of kilobytes (generated code, long template lists); the csv module's
# default 128 KiB field limit would refuse them. 2**31 - 1 is the largest limit every platform's C long accepts.
csv.field_size_limit(2**31 - 1)


# One line per family: each parser module declares its formats.
FORMATS: tuple[Format, ...] = (
    *fleet_result.FORMATS,
    *kineto.FORMATS,
    *serving_bench.FORMATS,
    *metrics_csv.FORMATS,
    *llama_cpp.FORMATS,
    *nvprof_sqlite.FORMATS,
    *nsys_sqlite.FORMATS,
    *ncu_rep.FORMATS,
    *tegrastats.FORMATS,
    *ncu_console.FORMATS,
    *ncu_summary.FORMATS,
    *nsys_stats.FORMATS,
    *nvprof_metrics.FORMATS,
    *nvprof.FORMATS,
    *ncu_csv.FORMATS,
)
FORMATS_BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}


def joinable_formats() -> set[str]:
    """The formats of per-kernel metrics that --ncu may join onto a whole-run trace."""
    return {f.name for f in FORMATS if f.joinable}


def _cut_short(path: Path, fmt: Format) -> int | None:
    """Return the number of the last line when a text file ends inside a line of its format's own (Format.data_line)
    without a newline (a copy cut short), else None."""
    if fmt.data_line is None:
        return None
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - 65536))
        tail = handle.read()
        if size == 0 or tail.endswith((b"\n", b"\r")):
            return None
        last = tail.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
        if not fmt.data_line.search(last):
            return None
        handle.seek(0)
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b"")) + 1


# Text saved on Windows often starts with a byte-order mark: UTF-16 from Windows PowerShell's `>` (`ncu --csv > out.csv`),
# UTF-8 with a BOM from Notepad or Excel. UTF-32 first: its little-endian mark begins with UTF-16's.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_ENCODING_NAMES = {"utf-32": "UTF-32 text", "utf-8-sig": "UTF-8 text with a byte-order mark", "utf-16": "UTF-16 text"}


@contextlib.contextmanager
def _as_utf8(path: Path) -> Iterator[tuple[Path, str | None]]:
    """Yield (a UTF-8 path to read, a note): the file itself, or for text that starts with a byte-order mark a
    temporary UTF-8 copy without it, removed afterwards."""
    with path.open("rb") as handle:
        head = handle.read(4)
    encoding = next((name for bom, name in _BOMS if head.startswith(bom)), None)
    if encoding is None:
        yield path, None
        return
    descriptor, name = tempfile.mkstemp(prefix="traceview-", suffix=path.suffix)
    copy = Path(name)
    try:
        with path.open("r", encoding=encoding, errors="replace", newline="") as source, os.fdopen(descriptor, "w", encoding="utf-8", newline="") as target:
            for block in iter(lambda: source.read(1 << 20), ""):
                target.write(block)
        yield copy, f"the file is {_ENCODING_NAMES[encoding]} (as Windows tools write it): read as UTF-8"
    finally:
        copy.unlink(missing_ok=True)


# Output pasted into source or chat as comments: `// ` in C/C++ (after the code that made it), `# ` in Python and
# shell, `> ` in Markdown quotes, ` * ` inside a block comment.
_COMMENT_MARKERS = ("//", "#", ">", "--", ";", "%", "*")
_MIN_COMMENTED_LINES = 3


@contextlib.contextmanager
def _uncommented(path: Path) -> Iterator[tuple[Path, str] | None]:
    """Yield (a temporary copy with the comment marker taken off every line that starts with it, a note), or None
    for a binary file or text where no marker starts at least three lines. The copy keeps every line, so line
    numbers in errors still point into the user's file; it is removed afterwards."""
    with path.open("rb") as handle:
        head = handle.read(64 * 1024)
    if b"\x00" in head:
        yield None
        return
    starts = [line.lstrip(" \t") for line in head.decode("utf-8", errors="replace").splitlines()]
    counts = {marker: sum(line.startswith(marker) for line in starts) for marker in _COMMENT_MARKERS}
    marker = max(counts, key=lambda m: (counts[m], len(m)))
    if counts[marker] < _MIN_COMMENTED_LINES:
        yield None
        return
    pattern = re.compile(rf"^[ \t]*{re.escape(marker)} ?")
    descriptor, name = tempfile.mkstemp(prefix="traceview-", suffix=path.suffix)
    copy = Path(name)
    try:
        with path.open("r", encoding="utf-8", errors="replace", newline="") as source, os.fdopen(descriptor, "w", encoding="utf-8", newline="") as target:
            for line in source:
                target.write(pattern.sub("", line, count=1))
        yield copy, f"each line starts with '{marker}' (output pasted as comments): read without it"
    finally:
        copy.unlink(missing_ok=True)


def load_trace(path: str | Path, interval_s: float = 1.0, progress: Callable[[int, int], None] | None = None) -> Trace:
    """Return the parsed trace; raises TraceFormatError with a fix for anything unreadable.

    interval_s is the tegrastats sampling interval, used where the log has no timestamps; progress(done, total)
    is called while a large Nsight Systems kernel table is read.
    """
    path = Path(path)
    check_readable(path)
    with contextlib.ExitStack() as copies:
        readable, note = copies.enter_context(_as_utf8(path))
        notes = [note] if note else []
        try:
            try:
                fmt, found = detected(readable, FORMATS)
            except UnknownFormatError as unknown:
                uncommented = copies.enter_context(_uncommented(readable))
                if uncommented is None:
                    raise
                try:
                    fmt, found = detected(uncommented[0], FORMATS)
                except UnknownFormatError:
                    raise unknown from None
                readable = uncommented[0]
                notes.append(uncommented[1])
            options = ReadOptions(interval_s, progress, _cut_short(readable, fmt))
            parsed = fmt.read(readable, found, options)
            trace = Trace(readable, fmt.name, fmt.kind, parsed.data, parsed.profiler, parsed.notes)
        except TraceFormatError as error:
            if readable == path:
                raise
            # Errors name the file the user gave, not the temporary copy.
            raise type(error)(path, error.problem, error.fix, error.line) from None
    return dataclasses.replace(trace, path=path, notes=(*trace.notes, *notes))


def detect_format(path: str | Path) -> str:
    """Return the name of a trace file's format, judged from its content (never its name)."""
    return detected(Path(path), FORMATS)[0].name


__all__ = ["FORMATS", "FORMATS_BY_NAME", "Format", "ReadOptions", "Trace", "TraceFormat", "detect_format", "joinable_formats", "load_trace"]
