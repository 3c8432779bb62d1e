"""Unit normalisation for profiler exports: every auto-scaled unit maps to a base unit and a factor.

Base units: ns (time), byte, hz (clocks), byte/s, byte/cycle, % and plain counts.
"""

from __future__ import annotations

import polars as pl

_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}

# Time units as Nsight Compute prints them across versions: 2019.5 `nsecond`, 2025.1 `us`,
# 2020-2024 `usecond`/`msecond`, raw page `ns`.
_TIME_TO_NS = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
}

# Frequency-like units: 2019.5 `cycle/second`, 2025.1 `Ghz`, raw `hz`, in-between `cycle/nsecond`.
_PER_TIME_TO_PER_S = {"second": 1.0, "s": 1.0, "msecond": 1e3, "ms": 1e3, "usecond": 1e6, "us": 1e6, "nsecond": 1e9, "ns": 1e9}


def _build_table() -> dict[str, tuple[str, float]]:
    table: dict[str, tuple[str, float]] = {}
    for unit, factor in _TIME_TO_NS.items():
        table[unit] = ("ns", factor)
    for prefix, scale in _PREFIX.items():
        table[f"{prefix}byte"] = ("byte", scale)
        table[f"{prefix}hz"] = ("hz", scale)
        table[f"{prefix}cycle/second"] = ("hz", scale)
        for per, per_scale in _PER_TIME_TO_PER_S.items():
            table[f"{prefix}byte/{per}"] = ("byte/s", scale * per_scale)
            table[f"{prefix}cycle/{per}"] = ("hz", scale * per_scale)
        table[f"{prefix}byte/cycle"] = ("byte/cycle", scale)
        table[f"{prefix}byte/block"] = ("byte/block", scale)  # Launch Statistics: shared memory per block
        table[f"{prefix}inst"] = ("inst", scale)
        table[f"{prefix}inst/cycle"] = ("inst/cycle", scale)
        table[f"{prefix}sector"] = ("sector", scale)
        table[f"{prefix}cycle"] = ("cycle", scale)
    table["%"] = ("%", 1.0)
    table[""] = ("", 1.0)
    return table


UNIT_TABLE: dict[str, tuple[str, float]] = _build_table()


def unit_of(unit: str | None) -> tuple[str, float]:
    """Return (base unit, factor into it) for one unit string; an unknown unit is its own base, factor 1.0."""
    lowered = (unit or "").strip().lower()
    return UNIT_TABLE.get(lowered, (lowered, 1.0))


def base_unit(unit: pl.Expr) -> pl.Expr:
    """Return the base unit (lower-case) for an expression of unit strings; unknown units pass through."""
    lowered = unit.fill_null("").str.strip_chars().str.to_lowercase()
    mapping = {k: v[0] for k, v in UNIT_TABLE.items()}
    return lowered.replace(mapping)


def unit_factor(unit: pl.Expr) -> pl.Expr:
    """Return the factor that converts a value in this unit into its base unit (1.0 when unknown)."""
    lowered = unit.fill_null("").str.strip_chars().str.to_lowercase()
    mapping = {k: v[1] for k, v in UNIT_TABLE.items()}
    return lowered.replace_strict(mapping, default=1.0, return_dtype=pl.Float64)


_INSTANCE_LIST = r"\s*\(.*\)\s*$"


def parse_number(value: pl.Expr) -> pl.Expr:
    """Return Float64 from profiler number text: strips thousands separators; `n/a`, `no data` → null.

    A value with more than one '.' is taken as '.'-grouped (European locale), e.g. `2.508.800`. An instanced metric
    exported with `--print-metric-instances values|details` is its aggregate followed by the instances in parentheses,
    `783,531,628 (700,000,000;83,531,628)` or `... (FFMA: 700,000,000; ...)`: the aggregate is the value, and a list
    printed without one is unknown.
    """
    text = value.str.replace(_INSTANCE_LIST, "").str.strip_chars()
    dotted_groups = text.str.count_matches(r"\.") > 1
    cleaned = (
        pl.when(dotted_groups)
        .then(text.str.replace_all(r"\.", ""))
        .otherwise(text)
        .str.replace_all(",", "", literal=True)
    )
    number = cleaned.cast(pl.Float64, strict=False)
    return pl.when(number.is_finite()).then(number)  # `nan`, `inf` and overflowing values are unknown, not numbers


def parse_number_columns(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """Return the columns as Float64, read as parse_number reads them.

    Each column takes the cheapest reading that reads all its cells: a plain cast (most of a raw export), the cast
    after dropping `,` separators, else parse_number, which costs several times a cast on tens of thousands of rows."""
    if not columns:
        return pl.DataFrame()
    text_nulls = dict(zip(columns, frame.select(columns).null_count().row(0), strict=True))
    def as_is(column: str) -> pl.Expr:
        return pl.col(column).cast(pl.Float64, strict=False)

    def without_separators(column: str) -> pl.Expr:
        return pl.col(column).str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)

    readings = (as_is, without_separators)
    result: dict[str, pl.Series] = {}
    left = list(columns)
    for reading in readings:
        if not left:
            break
        attempt = frame.select([reading(c).alias(c) for c in left])
        # A cell this reading cannot read leaves one more null than the text had.
        counts = attempt.null_count().row(0)
        done = [c for c, nulls in zip(left, counts, strict=True) if nulls == text_nulls[c]]
        result.update(attempt.select([pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c) for c in done]).to_dict())
        left = [c for c in left if c not in set(done)]
    if left:
        result.update(frame.select([parse_number(pl.col(c)).alias(c) for c in left]).to_dict())
    return pl.DataFrame([result[c] for c in columns])
