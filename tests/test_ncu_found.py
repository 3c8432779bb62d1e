"""Nsight Compute outputs found through the search index (tests/fixtures/found, PROVENANCE.md there): console rows
printed right of their rules and a decimal-comma locale."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app
from traceview.parsers import load_trace
from traceview.parsers.ncu_console import _clean_value

FOUND = Path(__file__).parent / "fixtures" / "found"
SHIFTED = FOUND / "ncu2022_console_rtx3070_shifted_rows_reductions.txt"
SPANISH = FOUND / "ncu2023_console_es_locale_transpose.txt"
runner = CliRunner()


def test_rows_printed_two_columns_right_of_their_rules_keep_their_units_and_values():
    trace = load_trace(SHIFTED)
    frame = trace.data
    assert frame["short_name"].to_list() == ["atomic_red", "reduce_a", "reduce_ws"]
    atomic = frame.row(0, named=True)
    # `Duration  msecond  30.51` and `SM Frequency  cycle/usecond  779.96`: the unit ends two past its rule.
    assert atomic["duration_ns"] == pytest.approx(30.51e6)
    assert atomic["sm_clock_hz"] == pytest.approx(779.96e6)
    assert atomic["sm_throughput_pct"] == pytest.approx(0.88) and atomic["memory_throughput_pct"] == pytest.approx(2.07)
    assert atomic["threads"] == 8_388_608 and atomic["achieved_occupancy_pct"] == pytest.approx(80.71)
    assert frame["duration_ns"].null_count() == 0


def test_a_decimal_comma_locale_with_dots_grouping_thousands():
    trace = load_trace(SPANISH)
    row = trace.data.row(0, named=True)
    assert row["duration_ns"] == pytest.approx(9.97e6)
    assert row["sm_throughput_pct"] == pytest.approx(4.17) and row["memory_throughput_pct"] == pytest.approx(44.19)
    assert row["sm_clock_hz"] == pytest.approx(1.35e9)
    assert any("decimal comma" in note for note in trace.notes)
    assert _clean_value("13.490.336", True) == "13490336" and _clean_value("9.420.231,80", True) == "9420231.80"
    # Without a decimal comma a dot is the decimal point, and commas group thousands.
    assert _clean_value("13.490", False) == "13.490" and _clean_value("13,485", False) == "13,485"


def test_a_duration_derived_from_a_damaged_clock_is_unknown_not_infinite(tmp_path):
    # Found by fuzzing this capture: `Duration nan` and `SM Frequency 1e-320` made cycles ÷ clock infinite, and the
    # HTML report's marker sizes failed on it.
    text = SHIFTED.read_text().splitlines()
    last = max(i for i, line in enumerate(text) if line.startswith("  reduce_ws"))
    for i in range(last, last + 12):
        if "SM Frequency" in text[i]:
            text[i] = text[i].replace("1.33", "1e-320") if "1.33" in text[i] else text[i][:-7] + " 1e-320"
        if text[i].strip().startswith("Duration"):
            text[i] = text[i].rsplit(" ", 1)[0] + " nan"
    damaged = tmp_path / "damaged.txt"
    damaged.write_text("\n".join(text) + "\n")
    frame = load_trace(damaged).data
    assert frame.filter(frame["short_name"] == "reduce_ws")["duration_ns"].to_list() == [None]
    result = runner.invoke(app, ["analyze", str(damaged), "-o", str(tmp_path / "report.html")])
    assert result.exit_code == 0, result.stderr
