"""The Nsight Compute console reader against the real captures in ../shared/realdata/ncu_console.

The cross-check converts each capture into the details-page CSV that `ncu --csv` would have printed for the same
numbers (a deliberately naive conversion: metric rows split on runs of spaces) and compares the two readings."""

from __future__ import annotations

import csv
import io
import re

import polars as pl
import pytest

from traceview.analyzer.analysis import Source, analyze
from traceview.parsers import TraceFormat, detect_format, load_trace
from traceview.parsers.schema import KERNELS

L4 = "ncu_console/ncu2024plus_l4_cc89_unfused_attention_qkT_softmax_pv_quantizedmha.txt"
A100 = "ncu_console/ncu2022_a100_80gb_pytorch_layernorm_x17_nvfuser_x13_liqiangxl.log"


def test_both_generations_are_detected_by_content(realdata_file):
    for relative in (L4, A100):
        assert detect_format(realdata_file(relative)) == TraceFormat.NCU_CONSOLE


def test_l4_capture_gives_its_three_kernels_with_sections_and_rules(realdata_file):
    trace = load_trace(realdata_file(L4))
    frame = trace.data
    assert frame.schema == KERNELS
    assert frame["short_name"].to_list() == ["mma_A_Bt", "softmax", "mma_A_B"]
    assert frame["duration_ns"].to_list() == pytest.approx([6.14e6, 2.20e6, 5.30e6])
    assert frame["grid_size"][1] == "(8192, 1, 1)" and frame["block_size"][1] == "(256, 1, 1)"
    assert frame["compute_capability"].unique().to_list() == ["8.9"]
    softmax = frame.row(1, named=True)
    assert softmax["memory_throughput_pct"] == pytest.approx(89.61) and softmax["dram_throughput_pct"] == pytest.approx(89.61)
    assert softmax["dram_bytes_per_s"] == pytest.approx(268.60e9)
    first = frame.row(0, named=True)
    assert first["registers_per_thread"] == 37 and first["theoretical_occupancy_pct"] == 100 and first["achieved_occupancy_pct"] == pytest.approx(96.68)
    assert first["shared_bytes_per_block"] == pytest.approx(2050.0)  # static 2.05 Kbyte + dynamic 0
    rules = {(r["section"], r["name"]): r for r in first["ncu_rules"]}
    uncoalesced = rules[("SourceCounters", "UncoalescedGlobalAccess")]
    assert uncoalesced["type"] == "OPT" and uncoalesced["speedup_pct"] == pytest.approx(48.12) and uncoalesced["speedup_type"] == "global"
    assert uncoalesced["message"].startswith("This kernel has uncoalesced global accesses resulting in a total of 50331648 excessive sectors")
    assert rules[("SchedulerStats", "IssueSlotUtilization")]["speedup_type"] == "local"
    assert "Est." not in " ".join(r["message"] for r in first["ncu_rules"])


def test_2022_capture_with_timestamps_and_wrapped_warnings(realdata_file):
    trace = load_trace(realdata_file(A100))
    frame = trace.data
    assert frame.height == 31
    counts = dict(frame.group_by("short_name").len().iter_rows())
    assert counts == {"distribution_elementwise_grid_stride_kernel": 1, "vectorized_layer_norm_kernel": 17, "kernel1": 13}
    layer_norm = frame.row(1, named=True)
    assert layer_norm["duration_ns"] == pytest.approx(23_680)
    assert layer_norm["memory_throughput_pct"] == pytest.approx(37.79) and layer_norm["sm_throughput_pct"] == pytest.approx(55.40)
    assert layer_norm["registers_per_thread"] == 33 and layer_norm["theoretical_occupancy_pct"] == 75
    assert layer_norm["achieved_occupancy_pct"] == pytest.approx(57.99)
    assert layer_norm["process_id"] == 395991 and layer_norm["block_size"] == "128"
    # The 1.5 K-character name with `, ` inside its template arguments stays whole.
    assert len(frame["kernel_name"][0]) > 1000 and frame["kernel_name"][0].endswith(")")
    warning = next(r for r in layer_norm["ncu_rules"] if r["name"] == "LaunchConfiguration")
    assert warning["type"] == "WRN" and "partial wave of 751 thread blocks" in warning["message"]


def _console_as_details_csv(text: str) -> str:
    """Return the details-page CSV holding the same numbers as a console capture (metric rows only)."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Section Name", "Metric Name", "Metric Unit", "Metric Value"])
    launch, name, section = -1, "", ""
    for line in text.splitlines():
        kernel = re.match(r"^\s*(\S.*?)(?: \([\d, ]+\)x\([\d, ]+\)|, \d{4}-\w{3}-\d\d [\d:]+), Context", line)
        if kernel:
            launch, name = launch + 1, kernel.group(1)
            continue
        heading = re.match(r"^\s+Section: (.+)$", line)
        if heading:
            section = heading.group(1).strip()
            continue
        parts = re.split(r"\s{2,}", line.strip())
        if launch < 0 or not section or set(line.strip()) <= {"-", " "} or parts[0] in ("OPT", "INF", "WRN", "ERR", "Metric Name"):
            continue
        if len(parts) in (2, 3) and re.fullmatch(r"[-\d.,]+|\w+", parts[-1]) and not line.startswith(" " * 10):
            unit = parts[1] if len(parts) == 3 else ""
            writer.writerow([launch, 1, "app", "host", name, 1, 7, section, parts[0], unit, parts[-1]])
    return out.getvalue()


@pytest.mark.parametrize("relative", [L4, A100])
def test_console_reads_as_the_csv_of_the_same_numbers(realdata_file, tmp_path, relative):
    path = realdata_file(relative)
    as_csv = tmp_path / "same_numbers.csv"
    as_csv.write_text(_console_as_details_csv(path.read_text()))
    from_console, from_csv = load_trace(path).data, load_trace(as_csv).data
    assert from_console.height == from_csv.height
    assert from_console["kernel_name"].to_list() == from_csv["kernel_name"].to_list()
    assert from_console["duration_ns"].to_list() == pytest.approx(from_csv["duration_ns"].to_list())
    source = Source(str(path), "x", "", 0)
    console_verdicts = analyze(from_console, source).launches.select("bound", "label").rows()
    csv_verdicts = analyze(from_csv, source).launches.select("bound", "label").rows()
    assert console_verdicts == csv_verdicts


def test_failed_launch_is_reported_as_failed(realdata_file, tmp_path):
    """ncu prints `(!) nan` for every metric of a launch that failed under profiling."""
    text = realdata_file(L4).read_text()
    start = text.index("  void softmax<16>")
    end = text.index("  void mma_A_B<16>")
    block = re.sub(r"(?m)^(    (?!Metric Name|Section:|OPT|INF|WRN|ERR)[A-Za-z#].*?\s{2,}\S*\s+)\S+$", r"\1(!) nan", text[start:end])
    damaged = tmp_path / "failed.txt"
    damaged.write_text(text[:start] + block + text[end:])
    frame = load_trace(damaged).data
    assert frame["launch_failed"].to_list() == [False, True, False]
    verdicts = analyze(frame, Source(str(damaged), "ncu-console", "", 0)).launches
    assert verdicts["label"][1] == "launch failed"


def test_output_with_no_metric_tables_is_a_clear_error(tmp_path):
    path = tmp_path / "cut.txt"
    path.write_text("==PROF== Disconnected from process 1\n[1] app@host\n  k(int) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 8.0\n"
                    "    Section: GPU Speed Of Light Throughput\n")
    from traceview.errors import TraceFormatError

    with pytest.raises(TraceFormatError, match="no metric tables"):
        load_trace(path)


def test_results_after_a_long_profiling_preamble_are_found(realdata_file, tmp_path):
    """ncu prints a `==PROF== Profiling` line per launch before any result: thousands of launches push the first
    kernel block past the first 64 KB."""
    preamble = "".join(f'==PROF== Profiling "softmax" - {i}: 0%....50%....100% - 38 passes\n' for i in range(3000))
    path = tmp_path / "long.txt"
    path.write_text(preamble + "==PROF== Disconnected from process 1\n" + realdata_file(L4).read_text())
    assert path.stat().st_size > 200_000
    assert detect_format(path) == TraceFormat.NCU_CONSOLE
    assert load_trace(path).data.height == 3


def test_console_pasted_without_its_indentation_reads_the_same_kernels(realdata_file, tmp_path):
    # Web pages and chat strip leading spaces: `Section:`, rule lines and `----- -----` separators arrive at column 0.
    original = realdata_file(L4)
    flush = tmp_path / "flush.txt"
    flush.write_text("".join(line.lstrip(" ") for line in original.read_text().splitlines(keepends=True)))
    ours, theirs = load_trace(flush).data, load_trace(original).data
    for column in ("kernel_name", "duration_ns", "sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct"):
        assert ours[column].to_list() == theirs[column].to_list()
    # Rule texts too: their continuation lines lost their indentation with them.
    assert [[rule["message"] for rule in rules] for rules in ours["ncu_rules"].to_list()] == [
        [rule["message"] for rule in rules] for rules in theirs["ncu_rules"].to_list()]


def test_a_section_of_rule_results_alone_gives_the_kernel_and_ncus_estimates():
    # ncu 2026.1, `--section MemoryWorkloadAnalysis_Tables` on an RTX 3080: no metric table, only WRN and OPT results
    # (tests/fixtures/found/PROVENANCE.md). It had been refused as "cut or filtered".
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "ncu2026.1_console_rtx3080_mwa_tables_rules_only.txt"
    assert detect_format(path) == TraceFormat.NCU_CONSOLE
    trace = load_trace(path)
    kernel = trace.data.row(0, named=True)
    assert trace.data.height == 1 and kernel["kernel_name"].startswith("swe2d_flux_kernel(int, const int *")
    assert kernel["duration_ns"] is None and kernel["compute_capability"] == "8.6"
    rules = sorted(kernel["ncu_rules"], key=lambda r: -(r["speedup_pct"] or 0))
    assert [r["speedup_pct"] for r in rules] == [29.84, 7.493, 4.94, 3.126, 1.193e-05, None]
    assert rules[0]["type"] == "OPT" and "accesses local memory" in rules[0]["message"]
    analysis = analyze(trace.data, Source(str(path), trace.format, "", 0))
    diagnosis = analysis.kernels.row(0, named=True)
    assert diagnosis["advice"][0].startswith("ncu MemoryWorkloadAnalysis_Tables: est. 30% speedup — This workload accesses local memory")
    assert "re-profile with `ncu --section SpeedOfLight`" in diagnosis["advice"][-1]
    assert any("no kernel durations" in note for note in analysis.notes)


def test_the_2023_estimated_speedup_form_of_a_rule_is_read():
    # ncu 2023.1 era output, pasted flush left (tests/fixtures/found/PROVENANCE.md): its rules say `Estimated Speedup:`,
    # which was not read, so ncu's 76% estimate was lost and the ranking fell back on roofline headroom.
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "ncu2023_console_t4_tiled_matmul_estimated_speedup.txt"
    trace = load_trace(path)
    speedups = {rule["name"]: rule["speedup_pct"] for rule in trace.data.row(0, named=True)["ncu_rules"] if rule["speedup_pct"]}
    assert speedups["IssueSlotUtilization"] == 76.25 and speedups["CPIStall"] == 51.86
    analysis = analyze(trace.data, Source(str(path), trace.format, "", 0))
    kernel = analysis.kernels.row(0, named=True)
    assert kernel["duration_ns"] == pytest.approx(46.31e6) and kernel["recoverable_ns"] == pytest.approx(46.31e6 * 0.7625)
    # No name in the output: CC 7.5 fits six table GPUs, and 93.57 GB/s at 29.27% of peak (319.7 GB/s) the T4 (320).
    assert analysis.device.spec.key == "t4" and "320 GB/s DRAM peak" in analysis.device.how_identified
    # Compute and memory both at 74.42%: ncu calls it balanced, and the advice says both must shrink, not math alone.
    assert kernel["label"] == "Balanced Throughput"
    assert any(line.startswith("compute (74.4%) and memory (74.4%) are within 10 points") for line in kernel["advice"])


def test_recoverable_time_follows_ncus_global_estimates_not_a_local_one():
    # ncu 2025 --set full on an RTX 4090 (tests/fixtures/found/PROVENANCE.md): "Est. Local Speedup: 83.33%" is the
    # occupancy section's own estimate; the largest estimate of the kernel's duration is the global 26.29%.
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "ncu2025_console_rtx4090_cublas_sgemm_full_set.txt"
    trace = load_trace(path)
    analysis = analyze(trace.data, Source(str(path), trace.format, "", 0))
    kernel = analysis.kernels.row(0, named=True)
    assert kernel["recoverable_source"] == "ncu estimated speedup"
    assert kernel["recoverable_ns"] == pytest.approx(2.63e6 * 0.2629)
    assert {(r["name"], r["speedup_type"], r["speedup_pct"]) for r in kernel["rules"]} >= {
        ("TheoreticalOccupancy", "local", 83.33), ("UncoalescedSharedAccess", "global", 26.29)}
    # No device name in the console output: CC 8.9 fits nine table GPUs, its 128 SMs only the RTX 4090.
    assert analysis.device.spec.key == "rtx4090" and "128 SMs" in analysis.device.how_identified
    # A CUTLASS simt SGEMM at 80% of the SM roof: FP32 FMA, not tensor cores, and on an RTX 4090 BF16 tensor cores do
    # twice its FP32 rate while TF32 does no better than FP32 (Ada whitepaper, FP32 accumulate).
    assert kernel["tensor_core"] is False and kernel["tensor_core_source"] == "kernel name"
    assert "on GeForce RTX 4090 they do BF16/FP16 at 2.0× the FP32 rate" in kernel["advice"][0] and "TF32" not in kernel["advice"][0]


def test_a_local_estimate_gives_way_to_the_roofs_headroom():
    from traceview.analyzer.roofline import classify_launches
    from traceview.parsers.schema import KERNELS, conform

    rule = {"section": "Occupancy", "name": "TheoreticalOccupancy", "type": "OPT", "message": "m", "speedup_type": "local", "speedup_pct": 40.0}
    frame = conform(pl.DataFrame({"launch_id": ["0"], "kernel_name": ["k"], "duration_ns": [1000.0], "sm_throughput_pct": [70.0],
                                  "memory_throughput_pct": [20.0], "ncu_rules": [[rule]]}), KERNELS)
    verdict = classify_launches(frame, {}).row(0, named=True)
    # The occupancy section's own 40% is no share of the kernel's time: the headroom under its 70% roof is used.
    assert verdict["recoverable_source"] == "roofline headroom" and verdict["recoverable_fraction"] == pytest.approx(0.3)


def test_body_tables_without_section_lines_and_interleaved_application_output():
    # `--print-details body` on a CC 10.0 GPU (tests/fixtures/found/PROVENANCE.md): `Table Name :` headings, and the
    # benchmark's own `Profiling k: ...` line printed between a table's rule and its header. It was "not a supported
    # trace"; the stall table's rows had no reader.
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "ncu_console_body_tables_cc100_fp4_gemv_excerpt.txt"
    assert detect_format(path) == TraceFormat.NCU_CONSOLE
    launches = load_trace(path).data
    assert launches.height == 2 and launches["compute_capability"].to_list() == ["10.0", "10.0"]
    assert launches["memory_throughput_pct"].to_list() == [4.37, 19.25] and launches["sm_throughput_pct"].to_list() == [10.09, 43.08]
    first = launches.row(0, named=True)
    stalls = {s["reason"]: s["value"] for s in first["stalls"]}
    assert first["stall_unit"] == "cycles per issued instruction" and len(stalls) == 17
    assert stalls["long_scoreboard"] == 10.24 and stalls["selected"] == 1 and stalls["mio_throttle"] == 0
    kernel = analyze(launches, Source(str(path), "ncu-console", "", 0)).kernels.row(0, named=True)
    assert kernel["bound"] == "latency" and "averaged over 2 launches (no durations)" in kernel["reason"]
    assert any(line.startswith("warps stall most on long_scoreboard (64% of warp cycles)") for line in kernel["advice"])
