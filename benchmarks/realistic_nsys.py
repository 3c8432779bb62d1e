"""Build a realistic large Nsight Systems export from the real 2×H100 one: every table with start/end columns
replicated by the same factor, so the mix of kernels, runtime calls, NVTX ranges and copies per launch stays real
(per launch: 1.7 runtime calls, 4.9 NVTX events, 0.26 copies).

Copy k of every row has its times shifted by k × (the export's span + 1 µs) and its correlationId by k × (the largest
correlationId + 1), so copies follow each other in time and launch calls still find their own kernels; primary keys
are left to SQLite. PyTorch numbers every op range (`aten::mul, op_id = 322567`) through the whole run, so a real long
export has about as many distinct NVTX texts as ranges (16,582 of 16,782 in the source): each copy's op ids get a
prefix of their own, so they stay distinct in the replica too (replicated as they are, they would repeat, and hide
the cost of millions of distinct texts). Deterministic: the same factor gives the same file. Built by doubling (INSERT … SELECT of every
copy so far), about ten statements per table for a factor of 581.

Usage: python benchmarks/realistic_nsys.py FACTOR OUT.sqlite [--same-correlation-ids]   (581 → 2.0 M kernel launches, about 1.15 GB)
"""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT.parent / "shared" / "realdata" / "nsys_sqlite" / "nsys2026.2_h100x2_sliced_nsys-ai.sqlite"
GAP_NS = 1_000
KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"


def require_baseline_reader() -> None:
    """Exit with one line when pyarrow is missing: the baselines read through polars.read_database_uri(engine="adbc"),
    which needs it, while traceview itself does not."""
    if importlib.util.find_spec("pyarrow") is None:
        sys.exit("the baselines read through polars.read_database_uri(engine='adbc'), which needs pyarrow: pip install -e '.[bench]'")


def timed_tables(connection: sqlite3.Connection) -> dict[str, list[str]]:
    """Return every table that has start and end columns, with its columns."""
    tables = {}
    for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        columns = [row[1] for row in connection.execute(f'PRAGMA table_info("{name}")')]
        if {"start", "end"} <= set(columns):
            tables[name] = columns
    return tables


def build(factor: int, out: Path, source: Path = SOURCE, shift_correlation_ids: bool = True) -> Path:
    """Write the export replicated `factor` times to `out` (replaced if present) and return it. With
    `shift_correlation_ids` False every copy keeps the source's correlationIds, as a merged or damaged export does."""
    if factor < 1:
        raise ValueError("factor must be at least 1")
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    shutil.copy(source, out)
    out.chmod(0o644)
    connection = sqlite3.connect(out)
    connection.execute("PRAGMA journal_mode = OFF")
    connection.execute("PRAGMA synchronous = OFF")
    tables = timed_tables(connection)
    starts, ends, correlations = [], [], []
    for name, columns in tables.items():
        low, high = connection.execute(f'SELECT min(start), max("end") FROM "{name}"').fetchone()
        starts += [low] if low is not None else []
        ends += [high] if high is not None else []
        if "correlationId" in columns:
            correlations.append(connection.execute(f'SELECT max(correlationId) FROM "{name}"').fetchone()[0] or 0)
    low, span = min(starts), max(ends) - min(starts) + GAP_NS
    correlation_step = max(correlations, default=0) + 1
    for name, columns in tables.items():
        copies = 1
        while copies < factor:
            add = min(copies, factor - copies)  # copies [0, add) are shifted by `copies` steps
            shifted = ", ".join(
                f'"{c}" + {copies * span}' if c in ("start", "end")
                else f'"{c}" + {copies * correlation_step}' if c == "correlationId" and shift_correlation_ids
                else f"""replace("{c}", 'op_id = ', 'op_id = {copies}')""" if (name, c) == ("NVTX_EVENTS", "text")
                else f'"{c}"' for c in columns)
            names = ", ".join(f'"{c}"' for c in columns)
            connection.execute(f'INSERT INTO "{name}" ({names}) SELECT {shifted} FROM "{name}" '
                               f'WHERE start < {low + add * span} OR start IS NULL AND {add} = {copies}')
            copies += add
    connection.commit()
    connection.execute("VACUUM") if out.stat().st_size < 50_000_000 else None
    connection.close()
    return out


def counts(path: Path) -> dict[str, int]:
    """Return the row count of every timed table."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        return {name: connection.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in timed_tables(connection)}


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "--same-correlation-ids"):
        sys.exit(__doc__.rsplit("Usage: ", 1)[1])
    built = build(int(sys.argv[1]), Path(sys.argv[2]), shift_correlation_ids=len(sys.argv) == 3)
    print(f"{built}: {built.stat().st_size / 1e6:.0f} MB; " + ", ".join(f"{k} {v:,}" for k, v in counts(built).items()))
