"""Per-kernel diagnosis on real exports: occupancy limiters, ncu's rules, tensor cores, advice that fits the evidence,
and a reason that quotes the same numbers as the JSON."""

from __future__ import annotations

import csv
import json
import re

import polars as pl
import pytest
from typer.testing import CliRunner

from traceview.analyzer.analysis import Source, analyze
from traceview.analyzer.diagnosis import occupancy, tensor_core_columns, tensor_core_evidence
from traceview.app.cli import app
from traceview.parsers import load_trace

V100_CFD = "ncu_details/ncu2019.5_v100_aws_cfd_stdout_mixed_xplacer.log"
GEMM = "ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv"
GEMM_ROOFLINE_ONLY = "ncu_details/ncu2025.1_cc120_cutlass_gemm_rooflinechart_section_llmperfopt.csv"
GEMV = "ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv"
RAW = "ncu_raw/mudock_gtx1650_full_raw.csv"
L4_CONSOLE = "ncu_console/ncu2024plus_l4_cc89_unfused_attention_qkT_softmax_pv_quantizedmha.txt"


def kernels_json(path, *options: str) -> list[dict]:
    result = CliRunner().invoke(app, ["analyze", str(path), "--format", "json", *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["kernels"]


def by_short_name(kernels: list[dict]) -> dict[str, dict]:
    return {k["short_name"]: k for k in kernels}


def test_v100_flux_kernel_is_limited_by_registers_with_a_concrete_fix(realdata_file):
    flux = by_short_name(kernels_json(realdata_file(V100_CFD)))["cuda_compute_flux"]
    occ = flux["occupancy"]
    assert occ["limiter"] == "registers"
    assert occ["registers_per_thread"] == 60 and occ["block_threads"] == 192
    assert occ["block_limits"] == {"registers": 5, "shared_memory": 32, "warps": 10, "blocks_per_sm": 32, "barriers": None}
    assert occ["theoretical_pct"] == pytest.approx(46.88, abs=0.01)
    assert occ["achieved_pct"] == pytest.approx(38.5, abs=0.1)  # duration-weighted over 43 launches (one launch: 39.1 %)
    assert occ["waves_per_sm"] == pytest.approx(1.27, abs=0.01)
    assert occ["tail"]["full_waves"] == 1 and occ["tail"]["last_wave_full_pct"] == pytest.approx(27, abs=1)
    # 65536 registers / (6 blocks × 6 warps × 32 threads) = 56.9 → 56 in units of 8.
    assert "-maxrregcount=56" in flux["recommendation"] and "6 blocks/SM" in flux["recommendation"]
    assert "(60/thread allow 5 blocks of 192 threads per SM)" in flux["recommendation"]


def test_advice_fits_the_kernel_not_the_verdict_alone(realdata_file):
    every = kernels_json(realdata_file(V100_CFD)) + kernels_json(realdata_file(RAW))
    for kernel in every:
        advice = " ".join(kernel["advice"])
        # No CFD stencil or docking kernel holds weights or a KV cache.
        assert "quantiz" not in advice, kernel["short_name"]
        if kernel["median_duration_ns"] >= 20_000:
            assert "CUDA graph" not in advice, kernel["short_name"]
    calc_energy = by_short_name(every)["calc_energy"]
    assert calc_energy["occupancy"]["limiter"] == "block size"
    assert calc_energy["recommendation"].startswith("blocks of 32 threads: an SM holds at most 16 blocks, so occupancy caps at 50%")
    # The raw page's stall metrics: waiting on global memory dominates.
    assert calc_energy["stalls"][0]["reason"] == "long_scoreboard" and calc_energy["stalls"][0]["share_pct"] > 80
    assert calc_energy["stall_source"] == "cycles per issued instruction"
    # A short kernel does get the launch-overhead advice.
    step_factor = by_short_name(every)["cuda_compute_step_factor"]
    assert step_factor["median_duration_ns"] < 20_000 and any("CUDA graph" in a for a in step_factor["advice"])


@pytest.mark.parametrize(("relative", "speedup"), [(GEMM, 67.9), (GEMV, 80.34)])
def test_rtx5090_exports_carry_ncu_rule_text_and_speedups(realdata_file, relative, speedup):
    kernel = kernels_json(realdata_file(relative))[0]
    occupancy_rule = next(r for r in kernel["rules"] if r["name"] == "TheoreticalOccupancy")
    assert occupancy_rule["section"] == "Occupancy" and occupancy_rule["type"] == "OPT"
    assert occupancy_rule["speedup_pct"] == pytest.approx(speedup) and occupancy_rule["speedup_type"] == "global"
    assert "is limited by the number of required registers" in occupancy_rule["message"]
    assert [r["speedup_pct"] or 0 for r in kernel["rules"]] == sorted((r["speedup_pct"] or 0 for r in kernel["rules"]), reverse=True)
    assert kernel["occupancy"]["limiter"] == "registers"
    assert f"ncu estimates {speedup:.0f}% speedup" in kernel["recommendation"]


def test_gemv_without_launch_statistics_takes_its_waves_from_ncu_text(realdata_file):
    kernel = kernels_json(realdata_file(GEMV))[0]
    assert kernel["occupancy"]["waves_per_sm"] == pytest.approx(0.7)
    assert any(a.startswith("the grid of 224 blocks fills 70% of one wave (about 320 blocks)") for a in kernel["advice"])
    assert kernel["tensor_core"] is False and kernel["tensor_core_source"] == "tensor-pipe metrics"


def test_ffma_only_roofline_of_a_tensor_kernel_is_called_out(realdata_file):
    path = realdata_file(GEMM_ROOFLINE_ONLY)
    result = CliRunner().invoke(app, ["analyze", str(path), "--format", "json"])
    data = json.loads(result.stdout)
    kernel = data["kernels"][0]
    assert kernel["tensor_core"] is True and kernel["tensor_core_source"] == "kernel name"
    assert kernel["precision"] == "unknown" and kernel["bound"] == "unknown"
    assert "measured only by FMA counts" in kernel["reason"] and "SpeedOfLight_HierarchicalTensorRooflineChart" in kernel["recommendation"]
    assert any("tensor-core kernels measured only by FMA counts" in note for note in data["notes"])
    # The details export of the same kernel measures the tensor work: a confident tensor verdict there, against the
    # RTX 5090's tensor peak (the CSV names no GPU, and an RTX PRO 6000 Blackwell would fit it as well).
    details = kernels_json(realdata_file(GEMM), "--gpu", "rtx5090")[0]
    assert details["precision"] == "tensor" and details["tensor_core"] is True and details["tensor_core_source"] == "tensor-pipe metrics"


@pytest.mark.parametrize("relative", [V100_CFD, RAW, GEMM, GEMV, L4_CONSOLE])
def test_reason_quotes_the_numbers_the_json_carries(realdata_file, relative):
    for kernel in kernels_json(realdata_file(relative)):
        launches = kernel["launches"]
        assert ("per launch" if launches == 1 else f"duration-weighted over {launches} launches") in kernel["reason"]
        sol = re.search(r"Compute \(SM\) ([0-9.]+)%, Memory ([0-9.]+)%", kernel["reason"])
        if sol:
            assert float(sol.group(1)) == pytest.approx(kernel["compute_pct"], abs=0.05)
            assert float(sol.group(2)) == pytest.approx(kernel["memory_pct"], abs=0.05)
        occ = re.search(r"occupancy ([0-9.]+)% achieved of ([0-9.]+)% theoretical", kernel["reason"])
        if occ:
            assert float(occ.group(1)) == pytest.approx(kernel["occupancy"]["achieved_pct"], abs=0.05)
        for field in ("median_duration_ns", "min_duration_ns", "max_duration_ns"):
            assert kernel[field] is not None


def _metrics_only(path, tmp_path, replace: dict[str, tuple[str, str, str]]):
    """Return a copy of a real details export with only its `ncu --metrics` rows (what `ncu --metrics a,b,c` alone
    writes), some metric rows replaced by (name, unit, value)."""
    rows = list(csv.reader(path.open()))
    header, body = rows[0], rows[1:]
    section, name, unit, value = (header.index(c) for c in ("Section Name", "Metric Name", "Metric Unit", "Metric Value"))
    kept = []
    for row in body:
        if row[section] != "Command line profiler metrics":
            continue
        if row[name] in replace:
            new_name, new_unit, new_value = replace[row[name]]
            if new_name is None:
                continue
            row = [*row]
            row[name], row[unit], row[value] = new_name, new_unit, new_value
        kept.append(row[: len(header) - 5])  # the rule columns belong to sections, not to --metrics rows
    out = tmp_path / "metrics_only.csv"
    with out.open("w", newline="") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL)
        writer.writerow(header[: len(header) - 5])
        writer.writerows(kept)
    return out


def test_metrics_only_gemv_at_high_dram_throughput_is_memory_bound(realdata_file, tmp_path):
    """The real GEMV's --metrics rows with the DRAM figure of a bandwidth-bound run (82.9 %) and the duration as cycles."""
    path = _metrics_only(realdata_file(GEMV), tmp_path, {
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%", "82.9"),
        "gpu__time_duration.sum": ("sm__cycles_elapsed.avg", "cycle", "13,485"),
        "flop_count_hp.sum": ("sm__cycles_elapsed.avg.per_second", "Ghz", "1.99"),
    })
    frame = load_trace(path).data
    assert frame["duration_ns"][0] == pytest.approx(13_485 / 1.99e9 * 1e9)
    analysis = analyze(frame, Source(str(path), "ncu-csv-details", "", 0))
    kernel = analysis.kernels.row(0, named=True)
    assert kernel["bound"] == "memory" and kernel["label"].startswith("High Throughput")
    assert "Memory (busiest of DRAM)" in analysis.launches["reason"][0]


def test_occupancy_limiter_prefers_the_cause_that_can_be_fixed():
    launch = {"duration_ns": 1.0, "block_size": "(32, 1, 1)", "theoretical_occupancy_pct": 50.0, "theoretical_warps_per_sm": 16.0,
              "block_limit_sm": 16.0, "block_limit_shared_mem": 16.0, "block_limit_registers": 40.0, "block_limit_warps": 32.0,
              "shared_bytes_per_block": 0.0}
    assert occupancy([launch])["limiter"] == "block size"  # ties with unused shared memory: small blocks are the cause
    assert occupancy([{**launch, "block_limit_sm": 32.0}])["limiter"] == "shared memory"
    assert occupancy([{**launch, "theoretical_occupancy_pct": 100.0}])["limiter"] is None


@pytest.mark.parametrize(("name", "expected"), [
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(T1::Params)", True),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", True),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", True),
    ("void mma_A_Bt<16>(const float *, const float *, float *, int, int, int, float)", None),  # a hand-written FFMA matmul
    # cuBLAS's xmma kernels name their math instruction: FP32 FMA (the real H100 export's top kernels) or tensor MMA.
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", False),
    ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize256x64x32_stage3_warpsize4x1x1_g1_tensor16x8x16_t1r3s3_execute_kernel_trt", True),
    ("ampere_sgemm_128x64_tn", False),
    ("sm50_xmma_pooling_coalescedC_NHWC_kMAX_3_False_execute_kernel_trt", None),  # xmma names a library, not tensor cores
    ("sm80_xmma_fprop_implicit_gemm_indexed_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1", True),
    ("cutlass_80_simt_sgemm_256x128_8x4_nn_align1", False),
    ("volta_scudnn_128x32_relu_interior_nn_v1", False),
    ("void gemmk1_kernel<int, float, (int)256, (int)5, (bool)1, (bool)0, (bool)0, (bool)0, cublasGemvTensorStridedBatched<const float>, "
     "float, (int)0>(cublasGemmk1Params<T2, T9, T10, T11, T12, biasType<T11::value_type, T12>::type>)", None),  # "sGemm" inside a word
    ("volta_h884gemm_64x64_ldg8_nn", True),
    ("void sgemm_wmma_kernel(const half *, const half *, float *)", True),  # tensor instructions named: they win
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", None),
])
def test_tensor_core_names(name, expected):
    assert tensor_core_evidence({"kernel_name": name})[0] is expected


def test_ncu_rep_rule_results_come_through(realdata_file):
    pytest.importorskip("ncu_report", reason="the optional ncu-report wheel is not installed")
    kernels = by_short_name(kernels_json(realdata_file("ncu_rep/manual_nvtx.ncu-rep")))
    daxpy = kernels["daxpy_kernel"]
    rules = {rule["name"]: rule for rule in daxpy["rules"]}
    assert rules["SOLBottleneck"]["section"] == "SpeedOfLight"
    assert rules["Occupancy"]["type"] == "WRN" and "achieved occupancy" in rules["Occupancy"]["message"]
    # The report's link markup (`@section:Id:Title@`, `@url:Title:URL@`) is gone from the text.
    assert not any("@section:" in r["message"] or "@url:" in r["message"] for k in kernels.values() for r in k["rules"])


def test_a_tensor_pipe_busy_a_hundredth_of_a_percent_is_not_tensor_core_use():
    # A real .ncu-rep of an OpenACC matmul on an H100 PCIe (tests/fixtures/found/PROVENANCE.md): its tensor pipe is
    # busy 0.013% of the time, a handful of instructions; it had been reported as "Tensor cores: used".
    pytest.importorskip("ncu_report", reason="the optional ncu-report wheel is not installed")
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "ncu_rep_h100pcie_openacc_matmul.ncu-rep"
    launches = load_trace(path).data
    matmul = launches.filter(pl.col("kernel_name").str.starts_with("nvkernel_matmult")).row(0, named=True)
    assert 0 < matmul["tensor_pipe_pct"] < 0.1
    assert launches.filter(pl.col("kernel_name").str.starts_with("nvkernel_matmult")).select(tensor_core_columns(launches)).row(0) == (False, "tensor-pipe metrics")
    # One percent of the pipe is use.
    busy = launches.with_columns(pl.lit(1.0).alias("tensor_pipe_pct")).head(1)
    assert busy.select(tensor_core_columns(busy)).row(0) == (True, "tensor-pipe metrics")


def test_a_launch_whose_every_measurement_is_nan_is_a_failed_launch_not_a_single_section_export():
    # A real .ncu-rep of ncu 2022.4 on an A100 (tests/fixtures/found/PROVENANCE.md): the one launch's every measured
    # metric is nan and every rule failed with "Metric ... not found", but ncu filled in the device attributes and 0
    # for derived counts and peak constants. It had been "No Data", with a guess at a single-section export.
    pytest.importorskip("ncu_report", reason="the optional ncu-report wheel is not installed")
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "ncu_rep2022.4_a100_every_metric_nan_launch.ncu-rep"
    assert load_trace(path).data["launch_failed"].to_list() == [True]
    result = CliRunner().invoke(app, ["analyze", str(path), "--format", "json"])
    data = json.loads(result.stdout)
    assert data["kernels"][0]["label"] == "launch failed" and data["kernels"][0]["failed_launches"] == 1
    assert data["notes"] == ["1 launch failed under profiling (every measurement nan or empty, as after ncu's `==ERROR== LaunchFailed`), "
                             "counted as failed, not measured: every launch of nodeByPoint5 failed: it has no time"]
    assert any("cut short" in advice for advice in data["kernels"][0]["advice"])


@pytest.mark.parametrize(("name", "says"), [
    # Real ncu console captures (tests/fixtures/found/PROVENANCE.md): one with the Occupancy and LaunchStats sections,
    # one with LaunchStats alone, one with SpeedOfLight alone. All three had been told to collect all three sections.
    ("ncu2022_console_rtx3070_shifted_rows_reductions.txt",
     "the export has occupancy (80.7% achieved) and 136.53 waves per SM; collect the WarpStateStats section (`ncu --set full`)"),
    ("ncu2023_console_summary_per_gpu_raytrace_excerpt.txt",
     "the export has 25.28 waves per SM; collect the Occupancy and WarpStateStats sections"),
    ("ncu2023_console_es_locale_transpose.txt", "the SMs wait — collect the Occupancy, LaunchStats and WarpStateStats sections"),
])
def test_a_latency_bound_kernel_is_told_to_collect_only_the_sections_its_export_lacks(name, says):
    from pathlib import Path

    kernels = kernels_json(Path(__file__).parent / "fixtures" / "found" / name)
    advice = [line for kernel in kernels for line in kernel["advice"] if "the SMs wait" in line]
    assert advice and all(says in line for line in advice), advice


def test_with_every_section_present_and_no_one_cause_the_advice_points_at_the_source_page():
    # The real RTX 3070 capture's atomic_red kernel (latency-bound, occupancy and waves present), given warp stalls
    # spread over ten reasons, none a quarter of the cycles: nothing names one cause, and no section is missing.
    from pathlib import Path

    from traceview.analyzer.diagnosis import diagnose

    path = Path(__file__).parent / "fixtures" / "found" / "ncu2022_console_rtx3070_shifted_rows_reductions.txt"
    launches = load_trace(path).data.filter(pl.col("short_name") == "atomic_red").to_dicts()
    kernel = {"kernel_name": launches[0]["kernel_name"], "bound": "latency", "label": "Latency Issue", "launches": len(launches)}
    reasons = ("long_scoreboard", "wait", "barrier", "math_pipe_throttle", "short_scoreboard", "not_selected", "mio_throttle",
               "lg_throttle", "no_instruction", "branch_resolving")
    advice = diagnose(launches, kernel, ({reason: 1.0 for reason in reasons}, "cycles per issued instruction"))["advice"]
    waiting = [line for line in advice if "the SMs wait" in line]
    assert len(waiting) == 1 and "ncu's Source page" in waiting[0] and "collect the" not in waiting[0]
