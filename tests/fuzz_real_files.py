"""Mutate the real profiler files in ../shared/realdata and check traceview's guarantee on each mutant: a result, or
the typed TraceviewError with one line — never another exception, never a hang, never NaN in JSON.

The mutations are the damage real files suffer: cut at any byte, bytes flipped, inserted or deleted, lines duplicated,
dropped or swapped, re-encoded (UTF-16, Latin-1, a BOM, CRLF or CR-only line ends), NUL bytes, very long lines,
numbers replaced by huge, negative, NaN, infinite, empty or non-ASCII digits; for SQLite exports: the file cut,
pages overwritten, tables and columns dropped, key columns set to NULL, start and end swapped, huge strings.

Used by tests/test_fuzz.py (a bounded number of examples in CI) and on its own for long runs:
    python tests/fuzz_real_files.py --per-format 10000 [--format ncu-details] [--seed 1]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import random
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REALDATA = Path(__file__).resolve().parent.parent.parent / "shared" / "realdata"
FORMATS = {
    "ncu-details": "ncu_details/*",
    "ncu-raw": "ncu_raw/*",
    "nsys-stats": "nsys_stats/*",
    "tegrastats": "tegrastats/*",
    "llama-cpp": "llama_cpp/*",
    "nsys-sqlite": "nsys_sqlite/*.sqlite",
    "ncu-console": "ncu_console/*",
    # Outputs found through the search index (console layouts, a decimal-comma locale, --print-summary), kept with the tests.
    "ncu-found": "found:*.[ct][sx][vt]",
    # llama-bench depth sweep, llama-batched-bench and llama-sweep-bench tables found the same way.
    "llama-found": "found:*.md",
    # Exports of other nsys versions (2020, 2022.1, 2023.1, 2023.2, 2025.1, 2025.5) from public repositories.
    "nsys-found": "found:*.sqlite",
    # nvprof's SQLite exports (`nvprof -o`), which traceview reads into the same frames.
    "nvprof-export-found": "found:*.nv[vp]*",
    # PyTorch profiler traces written as plain JSON (the gzip ones would mostly test gzip's own checks).
    "pytorch-trace": "kineto/*.json",
}
FOUND = Path(__file__).resolve().parent / "fixtures" / "found"
DEADLINE_S = 30
_NUMBER = re.compile(rb"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
_REPLACEMENTS = (b"nan", b"NaN", b"inf", b"-inf", b"-1", b"-5", b"0", b"0.0", b"1.8e308", b"1e400", b"1e-320", b"", b"-0", "\uff11".encode(),
                 b"99999999999999999999999", b"1.2.3", b"1..5", "\u0661\u0662\u0663".encode(), b"1" * 6000)
# Names a hostile or broken tool could write: terminal escapes, bidirectional overrides, line separators, 1 MB.
_HOSTILE = ("\x1b[31mred\x1b[0m", "\x07bell", "\u202eevil", "a\u2028b\u2029c", "\x00nul", "\x85next", "<script>x</script>", "|pipe|*md*",
            "x" * 1_000_000)


def real_files(fmt: str) -> list[Path]:
    """Return the real files of one format (empty when ../shared/realdata is absent)."""
    pattern = FORMATS[fmt]
    base, pattern = (FOUND, pattern.removeprefix("found:")) if pattern.startswith("found:") else (REALDATA, pattern)
    return sorted(p for p in base.glob(pattern) if p.is_file())


def mutate_text(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """Return (what was done, the mutated bytes) for a text export."""
    kind = rng.choice(["truncate", "flip", "insert", "delete", "dup_line", "drop_line", "swap_lines", "encoding", "nul",
                       "long_line", "number", "number", "number", "cut_in_row", "repeat_line", "hostile_name", "digits_line"])
    if kind == "truncate":
        return kind, data[: rng.randrange(len(data) + 1)]
    if kind == "cut_in_row":
        # Cut in the middle of a line that carries a number (a table row, a timestamp, a sample): the file then ends
        # there, without a newline, as a copy cut short does.
        rows = [m.start() for m in re.finditer(rb"(?m)^[^\n]*\d[^\n]*$", data)]
        if rows:
            start = rng.choice(rows)
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            return kind, data[: start + max(1, (end - start) // 2)]
        return kind, data[: rng.randrange(len(data) + 1)]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return kind, bytes(out)
    if kind == "insert":
        at = rng.randrange(len(data) + 1)
        return kind, data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + data[at:]
    if kind == "delete":
        at = rng.randrange(len(data) + 1)
        return kind, data[:at] + data[at + rng.randint(1, 4096):]
    lines = data.split(b"\n")
    if kind == "dup_line":
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif kind == "drop_line":
        del lines[rng.randrange(len(lines))]
    elif kind == "swap_lines":
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "encoding":
        text = data.decode("utf-8", errors="replace")
        choice = rng.choice(["utf-16", "latin-1", "bom", "crlf", "cr"])
        if choice == "utf-16":
            return "utf-16", text.encode("utf-16")
        if choice == "latin-1":
            return "latin-1", text.encode("latin-1", errors="replace")
        if choice == "bom":
            return "bom", b"\xef\xbb\xbf" + data
        return choice, data.replace(b"\n", b"\r\n" if choice == "crlf" else b"\r")
    elif kind == "nul":
        at = rng.randrange(len(data) + 1)
        return kind, data[:at] + b"\x00" * rng.randint(1, 16) + data[at:]
    elif kind == "long_line":
        i = rng.randrange(len(lines))
        lines[i] = lines[i] + rng.choice([b"x", b"1", b" ", b"1.", b"\t", b"a "]) * rng.choice([200_000, 1_000_000])
    elif kind == "digits_line":  # a file that ends in a run of digits, without a newline
        return kind, data.rstrip(b"\n") + b"1" * rng.choice([60_000, 1_000_000])
    elif kind == "repeat_line":  # one line (a launch, a row) repeated: repeated ids
        i = rng.randrange(len(lines))
        lines[i + 1: i + 1] = [lines[i]] * rng.choice([2, 30, 300])
    elif kind == "hostile_name":
        i = rng.randrange(len(lines))
        at = rng.randrange(len(lines[i]) + 1)
        lines[i] = lines[i][:at] + rng.choice(_HOSTILE).encode("utf-8") + lines[i][at:]
    elif kind == "number":
        matches = list(_NUMBER.finditer(data))
        if matches:
            out = data
            for match in sorted(rng.sample(matches, min(len(matches), rng.randint(1, 20))), key=lambda m: -m.start()):
                out = out[: match.start()] + rng.choice(_REPLACEMENTS) + out[match.end():]
            return kind, out
    return kind, b"\n".join(lines)


def mutate_sqlite(source: Path, target: Path, rng: random.Random) -> str:
    """Write a damaged copy of an Nsight Systems export to `target`; return what was done."""
    shutil.copy(source, target)
    kind = rng.choice(["truncate", "pages", "drop_table", "drop_column", "null_column", "swap", "huge_string", "text_in_int"])
    if kind in ("truncate", "pages"):
        data = bytearray(target.read_bytes())
        if kind == "truncate":
            target.write_bytes(bytes(data[: rng.randrange(len(data) + 1)]))
        else:
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(data))
                data[at: at + 64] = bytes(rng.randrange(256) for _ in range(64))
            target.write_bytes(bytes(data))
        return kind
    connection = sqlite3.connect(target)
    try:
        tables = [r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        table = rng.choice([t for t in tables if t.startswith(("CUPTI", "NVTX", "TARGET", "StringIds", "StringTable", "Version", "ENUM", "META"))] or tables)
        columns = [r[1] for r in connection.execute(f'PRAGMA table_info("{table}")')]
        if kind == "drop_table":
            connection.execute(f'DROP TABLE "{table}"')
        elif kind == "drop_column" and len(columns) > 1:
            connection.execute(f'ALTER TABLE "{table}" DROP COLUMN "{rng.choice(columns)}"')
        else:
            # A copy without the export's NOT NULL constraints, so the damage can be planted.
            connection.execute(f'CREATE TABLE damaged AS SELECT * FROM "{table}"')
            connection.execute(f'DROP TABLE "{table}"')
            connection.execute(f'ALTER TABLE damaged RENAME TO "{table}"')
            column = rng.choice(columns)
            if kind == "null_column":
                connection.execute(f'UPDATE "{table}" SET "{column}" = NULL WHERE rowid % ? = 0', (rng.randint(1, 3),))
            elif kind == "swap" and {"start", "end"} <= set(columns):
                connection.execute(f'UPDATE "{table}" SET start = "end", "end" = start')
            elif kind == "huge_string":
                connection.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid % 7 = 0', ("<script>" + "x" * 500_000,))
            else:
                connection.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid % 5 = 0', (rng.choice(["abc", "", "1e400", "-1", "nan"]),))
        connection.commit()
    except sqlite3.DatabaseError:
        pass
    finally:
        connection.close()
    return kind


class Hang(Exception):
    """The example gave no result within DEADLINE_S (the worker process was killed)."""


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"{name} in the JSON output")


def exercise(path: Path) -> str:
    """Run parse → analysis → every reporter on one file; return 'ok' or 'error' (a TraceviewError), raise otherwise."""
    from traceview.app.cli import render_analysis, run_analysis
    from traceview.app.reporters import REPORTERS, ReportOptions
    from traceview.errors import TraceviewError

    try:
        analysis = run_analysis(path, None)
    except TraceviewError as error:
        if "\n" in str(error):
            raise AssertionError(f"a multi-line error message: {error!r}") from error
        return "error"
    for name in REPORTERS:
        text = render_analysis(analysis, name, ReportOptions(per_launch=True))
        if name == "json":
            json.loads(text, parse_constant=_refuse_constant)
    return "ok"


class Worker:
    """Runs `exercise` in a separate process, so that a hang inside native code (polars, SQLite) can be stopped: the
    process is killed after DEADLINE_S and a new one started for the next example."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def run(self, path: Path) -> str:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        future = self._pool.submit(exercise, path)
        try:
            return future.result(timeout=DEADLINE_S)
        except concurrent.futures.TimeoutError:
            self.close()
            raise Hang(f"no result within {DEADLINE_S} s") from None
        except concurrent.futures.process.BrokenProcessPool:
            self.close()
            raise AssertionError("the process died (a native abort or out of memory)") from None

    def close(self) -> None:
        if self._pool is not None:
            for process in list(getattr(self._pool, "_processes", {}).values()):
                process.kill()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def make_mutant(fmt: str, rng: random.Random, folder: Path) -> tuple[Path, str, str]:
    """Write a mutant of one real file of the format into `folder`; return (its path, the source name, the mutation)."""
    source = rng.choice(real_files(fmt))
    target = folder / f"mutant{source.suffix}"
    if fmt in ("nsys-sqlite", "nsys-found", "nvprof-export-found"):
        kind = mutate_sqlite(source, target, rng)
    else:
        kind, data = mutate_text(source.read_bytes(), rng)
        target.write_bytes(data)
    return target, source.name, kind


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-format", type=int, default=1000)
    parser.add_argument("--format", choices=sorted(FORMATS), action="append")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    failures = 0
    for fmt in args.format or sorted(FORMATS):
        if not real_files(fmt):
            print(f"{fmt}: no real files under {REALDATA}", file=sys.stderr)
            continue
        rng = random.Random(f"{args.seed}-{fmt}")
        outcomes: Counter[str] = Counter()
        crashes: Counter[str] = Counter()
        started = time.perf_counter()
        worker = Worker()
        with tempfile.TemporaryDirectory() as folder:
            for example in range(args.per_format):
                path, source, kind = make_mutant(fmt, rng, Path(folder))
                try:
                    outcomes[worker.run(path)] += 1
                except Exception as error:  # noqa: BLE001 - every other exception is what this script looks for
                    remote = str(error.__cause__ or "")  # the worker's traceback, as text
                    frames = re.findall(r'File "([^"]*traceview[^"]*)", line (\d+)', remote)
                    where = f"{Path(frames[-1][0]).name}:{frames[-1][1]}" if frames else None
                    key = f"{type(error).__name__}: {' '.join(str(error).split())[:160]}"
                    if not crashes[key]:
                        kept = Path(tempfile.gettempdir()) / f"traceview-fuzz-{fmt}-{example}{path.suffix}"
                        shutil.copy(path, kept)
                        print(f"{fmt}: {key} [{kind} of {source}; kept as {kept}]" + (f" at {where}" if where else ""),
                              file=sys.stderr)
                    crashes[key] += 1
                    outcomes["crash"] += 1
        worker.close()
        failures += outcomes["crash"]
        print(f"{fmt}: {args.per_format} mutants in {time.perf_counter() - started:.0f} s — {outcomes['ok']} analyzed, "
              f"{outcomes['error']} refused with a one-line error, {outcomes['crash']} crashes ({len(crashes)} kinds)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
