"""Nsight Compute outputs found through the search index (tests/fixtures/found, PROVENANCE.md there): console rows
printed right of their rules, a decimal-comma locale, and `--print-summary` in its console and CSV forms."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from traceview.app.cli import app
from traceview.parsers import TraceFormat, detect_format, load_trace
from traceview.parsers.ncu_console import clean_value
from traceview.parsers.schema import KERNELS

FOUND = Path(__file__).parent / "fixtures" / "found"
REALDATA = Path(__file__).resolve().parent.parent.parent / "shared" / "realdata"
SHIFTED = FOUND / "ncu2022_console_rtx3070_shifted_rows_reductions.txt"
SPANISH = FOUND / "ncu2023_console_es_locale_transpose.txt"
PER_KERNEL = FOUND / "ncu2023_console_summary_per_kernel_transpose.txt"
PER_GPU = FOUND / "ncu2023_console_summary_per_gpu_raytrace_excerpt.txt"
THOR_CONSOLE = FOUND / "ncu2025_console_summary_per_kernel_thor_excerpt.txt"
THOR_CSV = FOUND / "ncu2025_csv_summary_per_kernel_thor_excerpt.csv"
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
    assert clean_value("13.490.336", True) == "13490336" and clean_value("9.420.231,80", True) == "9420231.80"
    # Without a decimal comma a dot is the decimal point, and commas group thousands.
    assert clean_value("13.490", False) == "13.490" and clean_value("13,485", False) == "13,485"


@pytest.mark.parametrize(("path", "fmt"), [(PER_KERNEL, TraceFormat.NCU_SUMMARY_CONSOLE), (PER_GPU, TraceFormat.NCU_SUMMARY_CONSOLE),
                                           (THOR_CONSOLE, TraceFormat.NCU_SUMMARY_CONSOLE), (THOR_CSV, TraceFormat.NCU_SUMMARY_CSV)])
def test_summaries_are_detected_by_content(path, fmt):
    assert detect_format(path) == fmt


def test_a_2023_per_kernel_summary_reads_its_raw_metric_averages():
    trace = load_trace(PER_KERNEL)
    frame = trace.data
    assert frame.schema == KERNELS and frame.height == 1
    row = frame.row(0, named=True)
    assert (row["process_id"], row["kernel_name"], row["grid_size"], row["block_size"], row["device_index"]) == (
        69642, "transpose_device(float *, float *, int, int)", "32", "256", 0)
    assert row["duration_ns"] == pytest.approx(9_989_888)  # gpu__time_duration.sum  msecond  9.989888
    assert row["sm_throughput_pct"] == pytest.approx(4.181825) and row["memory_throughput_pct"] == pytest.approx(44.233118)
    assert any("--print-summary" in note for note in trace.notes)
    assert "2022-2023" in (trace.profiler or "")


def test_a_per_gpu_summary_takes_the_device_from_its_own_line():
    row = load_trace(PER_GPU).data.row(0, named=True)
    assert row["device_index"] == 0 and row["kernel_name"] == "PathTracer(int, Pixel *, int)"
    assert row["duration_ns"] == pytest.approx(11.865617e9)  # `second`
    assert row["sm_throughput_pct"] == pytest.approx(56.52006) and row["waves_per_sm"] == pytest.approx(25.283951)


@pytest.mark.parametrize("path", [THOR_CONSOLE, THOR_CSV])
def test_each_invocation_of_a_launch_shape_gets_the_shapes_averages(path):
    frame = load_trace(path).data
    assert frame.height == 28  # two shapes × 14 invocations
    assert frame["launch_id"].to_list() == list(range(28))
    by_shape = frame.group_by("block_size", maintain_order=True).agg("theoretical_occupancy_pct", "achieved_occupancy_pct")
    assert by_shape["block_size"].to_list() == ["(256, 1, 1)", "(1, 1, 1)"]
    achieved = (76.66, 29.84) if path == THOR_CONSOLE else (74.92, 28.52)
    for (theoretical, measured), expected_theoretical, expected_achieved in zip(
            by_shape.select("theoretical_occupancy_pct", "achieved_occupancy_pct").iter_rows(), (100.0, 50.0), achieved, strict=True):
        assert theoretical == [expected_theoretical] * 14 and measured == pytest.approx([expected_achieved] * 14)
    assert frame["compute_capability"].unique().to_list() == ["11.0"]


def test_the_summary_analyses_and_says_what_it_is(tmp_path):
    result = runner.invoke(app, ["analyze", str(PER_KERNEL), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["source"]["format"] == "ncu-console-summary"
    kernel = data["kernels"][0]
    assert kernel["launches"] == 1 and kernel["bound"] == "latency"


def test_a_damaged_invocation_count_is_one_clear_line(tmp_path):
    damaged = tmp_path / "summary.txt"
    damaged.write_text(PER_KERNEL.read_text().replace(", 1 invocations", ", 99999999999 invocations"))
    result = runner.invoke(app, ["analyze", str(damaged)])
    assert result.exit_code == 1
    assert "invocations" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_summary_cut_before_its_tables_is_one_clear_line(tmp_path):
    cut = tmp_path / "summary.txt"
    lines = PER_KERNEL.read_text().splitlines()
    cut.write_text("\n".join(lines[:lines.index(next(line for line in lines if "Section:" in line)) + 1]) + "\n")
    result = runner.invoke(app, ["analyze", str(cut)])
    assert result.exit_code == 1
    assert "no metric tables" in result.stderr and "Traceback" not in result.stderr


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


def test_without_an_occupancy_section_the_report_says_no_n_a_occupancy():
    # The per-GPU summary excerpt has the SOL section only: waves per SM are known, occupancy is not.
    result = runner.invoke(app, ["analyze", str(PER_GPU)])
    assert result.exit_code == 0, result.stderr
    occupancy = next(line for line in result.stdout.splitlines() if "Occupancy:" in line)
    assert "n/a" not in occupancy and "waves per SM" in occupancy


@pytest.mark.parametrize("path", [THOR_CONSOLE, THOR_CSV])
def test_two_launch_shapes_of_one_kernel_are_not_blended_into_one_occupancy(path):
    # saxpy with 256-thread blocks (100% theoretical) and with 1-thread blocks (50%): a 75% blend describes neither.
    result = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    occupancy = json.loads(result.stdout)["kernels"][0]["occupancy"]
    assert occupancy["theoretical_pct"] == 100.0 and occupancy["block_sizes"] == ["256", "1"]
    assert "256-thread blocks" in occupancy["weighting"] and "2 block sizes" in occupancy["weighting"]


def test_a_csv_summary_in_a_decimal_comma_locale_reads_the_same(tmp_path):
    text = THOR_CSV.read_text()
    for number in ("100.00", "73.56", "79.38", "74.92", "50.00", "27.46", "30.08", "28.52", "11.0"):
        text = text.replace(f'"{number}"', f'"{number.replace(".", ",")}"')
    localised = tmp_path / "de.csv"
    localised.write_text(text)
    assert load_trace(localised).data.equals(load_trace(THOR_CSV).data)


def test_a_gb10_csv_with_an_unmeasured_metric_and_grouped_thousands():
    # `ncu --csv` on a CC 12.1 GPU (tests/fixtures/found/PROVENANCE.md): the DRAM throughput is `n/a` (GB10 has no DRAM
    # counters) and one duration is `1,205.00` us.
    trace = load_trace(FOUND / "ncu_csv_cc121_gb10_saxpy_na_thousands_trimmed.csv")
    frame = trace.data
    assert frame["duration_ns"].to_list() == pytest.approx([211_940, 203_020, 1_205_000])
    assert frame["dram_throughput_pct"].null_count() == frame.height
    result = runner.invoke(app, ["analyze", str(FOUND / "ncu_csv_cc121_gb10_saxpy_na_thousands_trimmed.csv"), "--format", "json"])
    assert result.exit_code == 0, result.output
    device = json.loads(result.stdout)["device"]
    assert device["name"] == "GB10 (DGX Spark)" and "compute capability 12.1" in device["identified"]


def test_a_paste_without_the_tables_rules_is_read_by_its_spacing():
    # ncu console lines from a DGX Spark as a chapter on LLM decode quotes them (tests/fixtures/found/PROVENANCE.md):
    # sections and rows, but no dashed rules or header above the rows.
    trace = load_trace(FOUND / "ncu_console_gb10_llm_decode_mmvq_rules_stripped.txt")
    row = trace.data.row(0, named=True)
    assert row["short_name"] == "q8_0_p32_q8_mmvq" and row["compute_capability"] == "12.1"
    assert row["duration_ns"] == pytest.approx(22_780) and row["sm_clock_hz"] == pytest.approx(2.14e9)
    assert row["sm_throughput_pct"] == pytest.approx(8.31) and row["memory_throughput_pct"] == pytest.approx(8.31)
    assert row["registers_per_thread"] == 40 and any("no dashed rules" in note for note in trace.notes)


@pytest.mark.parametrize("path", [FOUND / "ncu2025_console_rtx4090_cublas_sgemm_full_set.txt", FOUND / "ncu2022_console_rtx3070_shifted_rows_reductions.txt",
                                  REALDATA / "ncu_console" / "ncu2024plus_l4_cc89_unfused_attention_qkT_softmax_pv_quantizedmha.txt",
                                  REALDATA / "ncu_console" / "ncu2022_a100_80gb_pytorch_layernorm_x17_nvfuser_x13_liqiangxl.log"], ids=lambda p: p.name[:24])
def test_real_consoles_read_the_same_with_their_tables_rules_stripped(path, tmp_path):
    if not path.exists():
        pytest.skip("../shared/realdata is not here")
    lines = path.read_text(errors="replace").split("\n")
    kept = [line for line in lines if not (re.match(r"^\s*-{3,}( +-{3,})+\s*$", line) and not re.match(r"^\s*-{5} -{5,}\s*$", line))
            and not re.match(r"^\s*Metric Name\s+Metric Unit\s+Metric Value\s*$", line)]
    assert len(kept) < len(lines)
    stripped = tmp_path / path.name
    stripped.write_text("\n".join(kept))
    assert_frame_equal(load_trace(stripped).data, load_trace(path).data)


def test_one_side_of_the_roofline_measured_low_gives_no_latency_verdict():
    # `ncu --metrics dram__bytes.sum.per_second` on an RTX 5090 (tests/fixtures/found/PROVENANCE.md): 2.40 GB/s of
    # 1,792 is 0.1% of the DRAM roof, but nothing was measured of the SMs: a naive SGEMM may well be compute-bound.
    # "Under 60% of both" cannot be said; one side alone decides only at 80%+, as ncu's SOL rule does.
    result = runner.invoke(app, ["analyze", str(FOUND / "ncu_console_rtx5090_dram_bytes_metric_only.txt"), "--gpu", "rtx5090", "-f", "json"])
    assert result.exit_code == 0, result.output
    kernels = json.loads(result.stdout)["kernels"]
    assert [k["bound"] for k in kernels] == ["unknown", "unknown"]
    assert {k["label"] for k in kernels} == {"Compute Not Measured"}
    assert kernels[0]["memory_pct"] == pytest.approx(100 * 2.40e9 / 1792e9) and kernels[0]["compute_pct"] is None


def test_a_console_quoted_in_markdown_with_the_2024_launch_statistics():
    # An H100 ncu console behind `> ` in a README (tests/fixtures/found/PROVENANCE.md).
    path = FOUND / "ncu_console_h100_quoted_markdown_scaling_elections.txt"
    trace = load_trace(path)
    row = trace.data.row(0, named=True)
    assert row["short_name"] == "_cuda_independent" and row["sm_count"] == 132 and row["waves_per_sm"] == pytest.approx(62.06)
    assert row["memory_throughput_pct"] == pytest.approx(78.65) and row["achieved_occupancy_pct"] == pytest.approx(92.97)
    assert any("starts with '>'" in note for note in trace.notes)
    result = runner.invoke(app, ["analyze", str(path), "--gpu", "h100-sxm", "-f", "json"])
    kernel = json.loads(result.stdout)["kernels"][0]
    assert kernel["bound"] == "memory" and kernel["label"] == "High Memory Throughput (L1/TEX)"


def test_a_2024_per_gpu_summary_reads_its_device_line_and_a_memory_only_sol():
    # `ncu --print-summary per-gpu` on an H100 (tests/fixtures/found/PROVENANCE.md): `Device 0, CC 9.0` heads the GPU's
    # kernels; only gpu__compute_memory_throughput (Memory SOL) and sm__warps_active were collected.
    path = FOUND / "ncu2024_console_summary_per_gpu_h100_bitonic_sort.txt"
    frame = load_trace(path).data
    assert set(frame["compute_capability"].to_list()) == {"9.0"} and frame.height == 66 + 11 + 1 + 1
    result = runner.invoke(app, ["analyze", str(path), "--gpu", "h100-sxm", "-f", "json"])
    kernels = {k["short_name"]: k for k in json.loads(result.stdout)["kernels"]}
    merge = kernels["bitonic_merge"]
    # 62.69% of memory throughput and nothing of the SMs: under 80% one side decides nothing (ncu's rule).
    assert merge["bound"] == "unknown" and merge["label"] == "SM Throughput Not Collected" and merge["memory_pct"] == pytest.approx(62.69)
