"""Steps in an Nsight Compute export: bytes per step (per token for a decode step), beyond the weights, MBU.

No real export here covers whole decode steps, so the fixture strings the three real RTX 5090 kernel exports (a GEMV,
an elementwise kernel, a GEMM) into three identical steps, renumbering the launch IDs as ncu would."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from traceview.analyzer.ncu_steps import find_period
from traceview.app.cli import app

PARTS = ["ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv",
         "ncu_details/ncu2025.1_cc120_elementwise_membound_details_llmperfopt.csv",
         "ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv"]
STEP_BYTES = 2.33e6 + 17.23e6 + 1.28e3 + 17.50e6  # dram__bytes_read.sum + dram__bytes_write.sum of the three
STEP_NS = 6_750 + 94_910 + 111_810  # gpu__time_duration.sum of the three


@pytest.fixture
def three_steps(realdata_file, tmp_path):
    tables = [list(csv.reader(realdata_file(part).open())) for part in PARTS]
    header = tables[0][0]
    out = tmp_path / "three_steps.csv"
    with out.open("w", newline="") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL)
        writer.writerow(header)
        launch = 0
        for _ in range(3):
            for table in tables:
                for row in table[1:]:
                    writer.writerow([str(launch), *row[1:]])
                launch += 1
    return out


def analyze_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["analyze", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_repeating_kernels_are_found_as_steps_with_their_traffic(three_steps):
    steps = analyze_json(str(three_steps))["steps"]
    assert steps["source"] == "repeating kernel sequence" and steps["kernels_per_step"] == 3 and steps["steps"] == 3
    assert steps["dram_bytes_per_step"] == pytest.approx(STEP_BYTES, rel=1e-6)
    assert steps["median_duration_ns"] == pytest.approx(STEP_NS)
    assert steps["bandwidth_bytes_per_s"] == pytest.approx(STEP_BYTES / (STEP_NS / 1e9), rel=1e-6)
    assert steps["beyond_weights_bytes"] is None  # no --weights
    assert steps["peak_bytes_per_s"] and steps["mbu_pct"] is not None  # the table peak of the GPU its CC 12.0 names


def test_weights_give_traffic_beyond_them_and_mbu(three_steps):
    data = analyze_json(str(three_steps), "--weights", "30MB", "--step-kernels", "3", "--gpu", "rtx5090")
    steps = data["steps"]
    assert steps["source"] == "--step-kernels 3"
    assert steps["beyond_weights_bytes"] == pytest.approx(STEP_BYTES - 30e6, rel=1e-6)
    peak = data["device"]["peaks"]["dram_bytes_per_s"]["value"]
    assert steps["mbu_pct"] == pytest.approx(100 * STEP_BYTES / (STEP_NS / 1e9) / peak, rel=1e-6)


def test_weights_larger_than_a_step_reads_are_called_out(three_steps):
    steps = analyze_json(str(three_steps), "--weights", "4.2GB")["steps"]
    assert "does not cover whole steps" in steps["note"]


def test_step_kernels_on_a_timeline_input_is_refused(realdata_file):
    result = CliRunner().invoke(app, ["analyze", str(realdata_file("nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite")), "--step-kernels", "3"])
    assert result.exit_code == 1 and "--step-kernels applies to Nsight Compute exports" in result.output


@pytest.mark.parametrize(("names", "period"), [
    (["a", "b", "c"] * 4, 3),
    (["warmup", *(["a", "b"] * 5)], None),  # the period must start the export: a stray first launch hides it
    (["a", "b", "a", "b", "a", "b", "x"], 2),
    (["a"] * 8, None),  # one kernel repeated is not a step of several kernels
    (["a", "b", "c"], None),
])
def test_find_period(names, period):
    assert find_period(names) == period
