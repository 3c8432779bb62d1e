"""What every parser module declares and returns: its Formats (how each on-disk format is recognised and read) and
the Parsed data; the Trace that load_trace makes of it. A new format is a Format in its parser module's FORMATS."""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SNIFF_BYTES = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"


def gunzip_prefix(raw: bytes, limit: int) -> bytes:
    """Return up to `limit` bytes of what the gzip stream starting `raw` holds (a file's head: the stream may be cut),
    or b"" where it is not a readable gzip stream."""
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, limit)
    except zlib.error:
        return b""


class Head:
    """The start of a file, read once for every format's sniff: its first 64 KiB, as text where it is text, and a
    memo in which sniffs share what they found (the table names of a SQLite file, llama.cpp's detection)."""

    def __init__(self, path: Path, raw: bytes) -> None:
        self.path = path
        self.raw = raw
        self.is_text = b"\x00" not in raw
        self.text = raw.decode("utf-8", errors="replace") if self.is_text else ""
        self.memo: dict[str, Any] = {}

    def once(self, key: str, compute: Callable[[], Any]) -> Any:
        """Return `compute()`, computed once per file whichever sniff asks first."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]


def line_of(*keywords: str) -> str:
    """Return a regex that finds a line holding one of `keywords` (anywhere, after a word boundary), or a line cut
    inside one: one that ends in the first two or more characters of a keyword (`n_accep`, `draft acceptance rat`).
    For a Format's data_line, where the cut check sees only what is left of the line."""
    def prefixes(word: str) -> str:
        rest = "".join(f"(?:{re.escape(char)}" for char in word[2:]) + ")?" * len(word[2:])
        return re.escape(word[:2]) + rest
    whole = "|".join(re.escape(word) for word in keywords)
    cut = "|".join(prefixes(word) for word in keywords)
    return rf"\b(?:{whole})|\b(?:{cut})$"


@dataclass(frozen=True)
class ReadOptions:
    """What some readers need besides the file: tegrastats' sampling interval where the log has no timestamps (s), a
    progress callback (rows done, rows in all) for large exports, and the line a text file ends inside without a
    newline (cut short), found from the format's data_line."""

    interval_s: float = 1.0
    progress: Callable[[int, int], None] | None = None
    cut_line: int | None = None


@dataclass(frozen=True)
class Parsed:
    """A reader's result: the data of its kind, which profiler wrote it (and its version where known), and what the
    reader noticed about the file (cut short, rows left out)."""

    data: Any
    profiler: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Format:
    """One on-disk format: its name (the `format` of every answer), the kind of data its reader returns (the key of
    analyzer.kinds.ANALYSES), how it is recognised and read.

    `sniff(head)` returns something truthy for this format (what it found, e.g. the CSV header, reaches `read`);
    formats are tried by `order`, and `late_sniff`s (a look past the first 64 KiB) only after every sniff failed.
    `data_line` says what a line of a text format's own looks like (a cut inside anything else loses nothing); None
    for a format read as one whole (`whole`: a database, or JSON that a cut makes invalid). `joinable`: per-kernel
    metrics that --ncu may join onto a whole-run trace."""

    name: str
    kind: str
    read: Callable[[Path, Any, ReadOptions], Parsed]
    sniff: Callable[[Head], Any] | None = None
    order: int = 100
    late_sniff: Callable[[Head], Any] | None = None
    data_line: re.Pattern[str] | None = None
    joinable: bool = False
    whole: bool = False


@dataclass(frozen=True)
class Trace:
    """A parsed input: its detected format, what kind of data it holds, and that data."""

    path: Path
    format: str
    kind: str
    data: Any
    profiler: str | None = None  # which profiler (and version, where known) wrote it
    notes: tuple[str, ...] = field(default_factory=tuple)  # what the reader noticed about the file itself


def cut_note(line: int) -> str:
    """The note of a text file that ends inside a line of its own without a newline."""
    return (f"the file ends inside line {line} without a newline: it looks cut short; that last line may be incomplete, and "
            "whatever came after it is missing")


def cut_notes(options: ReadOptions) -> list[str]:
    """The cut note as a list to add to, when the file is cut short."""
    return [cut_note(options.cut_line)] if options.cut_line else []
