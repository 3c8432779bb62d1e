"""Unit and number normalisation: every spelling ncu has used maps to base units."""

from __future__ import annotations

import polars as pl
import pytest

from traceview.parsers.units import base_unit, parse_number, unit_factor


@pytest.mark.parametrize(
    ("unit", "base", "factor"),
    [
        ("nsecond", "ns", 1), ("ns", "ns", 1), ("us", "ns", 1e3), ("usecond", "ns", 1e3), ("msecond", "ns", 1e6),
        ("byte", "byte", 1), ("Kbyte", "byte", 1e3), ("Mbyte", "byte", 1e6), ("Gbyte", "byte", 1e9),
        ("Ghz", "hz", 1e9), ("hz", "hz", 1), ("cycle/second", "hz", 1), ("cycle/nsecond", "hz", 1e9),
        ("cycle/usecond", "hz", 1e6), ("Gbyte/s", "byte/s", 1e9), ("Gbyte/second", "byte/s", 1e9),
        ("byte/s", "byte/s", 1), ("byte/cycle", "byte/cycle", 1), ("%", "%", 1), ("", "", 1),
    ],
)
def test_unit_table(unit, base, factor):
    frame = pl.DataFrame({"u": [unit]}).select(base_unit(pl.col("u")).alias("b"), unit_factor(pl.col("u")).alias("f"))
    assert frame.row(0) == (base, factor)


def test_unknown_units_pass_through():
    frame = pl.DataFrame({"u": ["warp/cycle"]}).select(base_unit(pl.col("u")).alias("b"), unit_factor(pl.col("u")).alias("f"))
    assert frame.row(0) == ("warp/cycle", 1.0)


@pytest.mark.parametrize(
    ("text", "value"),
    [("13,485", 13485.0), ("9,495.42", 9495.42), ("768683274.02", 768683274.02), ("2.508.800", 2508800.0),
     ("n/a", None), ("no data", None), ("", None), ("CachePreferNone", None), (" 42 ", 42.0)],
)
def test_parse_number(text, value):
    assert pl.DataFrame({"v": [text]}).select(parse_number(pl.col("v"))).item() == value


def test_parse_number_columns_reads_each_column_as_parse_number_does():
    # Each column takes the cheapest reading that reads all of it; the result must not depend on which it took.
    from traceview.parsers.units import parse_number_columns

    frame = pl.DataFrame({
        "plain": ["1.5", "2", None, "nan", "inf"],
        "grouped": ["13,485", "9,495.42", "7", None, ""],
        "dotted": ["2.508.800", "1.5", "3", None, "1,234"],
        "words": ["n/a", "no data", "CachePreferNone", " 42 ", "1e400"],
    })
    expected = frame.select([parse_number(pl.col(c)).alias(c) for c in frame.columns])
    assert parse_number_columns(frame, frame.columns).equals(expected)
    assert parse_number_columns(frame, []).width == 0
