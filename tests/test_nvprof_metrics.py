"""nvprof's metric results (real outputs in tests/fixtures/found, PROVENANCE.md) read into KERNELS and judged against
the roofline of GPUs that Nsight Compute does not profile."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from traceview.analyzer.roofline import NVPROF_COLLECTION, classify_launch, classify_launches
from traceview.app.cli import app
from traceview.parsers import TraceFormat, detect_format, load_trace
from traceview.parsers.schema import KERNELS

FOUND = Path(__file__).parent / "fixtures" / "found"
GTX1050 = FOUND / "nvprof_cuda10.2_windows_gtx1050_fp64_matmul_summary_metrics_trace.txt"
V100 = FOUND / "nvprof_metrics_v100_dram_bytes_and_throughput_with_timing_excerpt.md"
GTX1070 = FOUND / "nvprof_metrics_gtx1070_particle_filter_dram_throughput_999_invocations.txt"
GTX1080 = FOUND / "nvprof_metrics_gtx1080_three_matmul_builds_disagreeing_timings.md"
K20C = FOUND / "nvprof_metrics_csv_k20c_jacobi_stalls_occupancy_excerpt.txt"
runner = CliRunner()


def analyze_json(path):
    result = runner.invoke(app, ["analyze", str(path), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def by_short_name(frame):
    return {row["short_name"]: row for row in frame.unique("kernel_name", maintain_order=True).iter_rows(named=True)}


@pytest.mark.parametrize("path", [GTX1050, V100, GTX1070, GTX1080, K20C])
def test_metric_results_are_their_own_format_whatever_else_the_file_holds(path):
    assert detect_format(path) == TraceFormat.NVPROF_METRICS
    trace = load_trace(path)
    assert trace.kind == "kernels" and trace.data.schema == KERNELS


def test_an_nvprof_summary_without_metrics_stays_a_summary():
    assert detect_format(FOUND / "nvprof_new_layout_vectoradd_streams_pinned.txt") == TraceFormat.NVPROF


def test_fp64_matmul_on_a_geforce_is_against_its_one_thirty_second_rate_fp64_roof():
    # flop_count_dp and DRAM transactions from the metric run; the kernel's time from the two timing runs in the same
    # file (952.81 ms in the summary, 934.47 ms in the GPU trace: 2% apart, so their mean).
    kernel = load_trace(GTX1050).data.row(0, named=True)
    assert kernel["fp64_flop"] == 5.4e10
    assert kernel["dram_bytes"] == (758_691_589 + 2_572_521) * 32
    assert kernel["duration_ns"] == pytest.approx((952.81e6 + 934.47e6) / 2)
    top = analyze_json(GTX1050)["kernels"][0]
    # 57 GFLOP/s of the GTX 1050's 58 GFLOP/s FP64 (1.86 TFLOP/s FP32 / 32), 2.2 FLOP per DRAM byte: past the ridge.
    assert (top["bound"], top["precision"], top["binding_roof"]) == ("compute", "fp64", "fp64 compute")
    assert top["roof_pct"] == pytest.approx(98.7, abs=0.5) and top["arithmetic_intensity"] == pytest.approx(2.22, abs=0.01)
    assert "1/32 of the FP32 rate" in top["advice"][0]


def test_duration_is_dram_bytes_over_dram_throughput_in_nvprofs_binary_units():
    # The summary above the metric table timed each kernel in another run: bytes ÷ (read + write throughput, GB/s
    # read as 2^30 bytes/s) gives every one of them within 1%. Read as 10^9 they would all be 6-7% long.
    summary_avg_ms = {"compare": 0.26419, "dtopo_vel_111_unroll": 15.468, "dtopo_vel_111_blocks": 20.748,
                      "dtopo_vel_111_split1": 10.416, "dtopo_vel_111_split2": 5.2851}
    kernels = by_short_name(load_trace(V100).data)
    for name, avg_ms in summary_avg_ms.items():
        assert kernels[name]["duration_ns"] == pytest.approx(avg_ms * 1e6, rel=0.01), name
    compare = kernels["compare"]
    assert compare["dram_bytes"] == 226_494_976 + 1_513_376  # dram_read_bytes + dram_write_bytes, before the ×32 transactions
    result = analyze_json(V100)
    verdicts = {k["short_name"]: k for k in result["kernels"]}
    # 862 GB/s of the V100's 900: memory-bound; without FLOP counts the others, under 80%, get no verdict.
    assert verdicts["compare"]["bound"] == "memory" and verdicts["compare"]["roof_pct"] == pytest.approx(95.8, abs=0.3)
    assert verdicts["dtopo_vel_111_blocks"]["bound"] == "unknown"
    assert any("FLOP counts (flop_count_sp, flop_count_dp)" in note for note in result["notes"])


def test_throughputs_alone_give_bandwidth_but_no_time_and_the_advice_names_nvprof_metrics():
    frame = load_trace(GTX1070).data
    assert frame.height == 4 * 999  # each kernel's 999 invocations, each with its averages
    sum_kernel = by_short_name(frame)["sum_kernel"]
    assert sum_kernel["dram_bytes_per_s"] == pytest.approx(704.77 * 2**20)
    assert sum_kernel["duration_ns"] is None
    result = analyze_json(GTX1070)
    advice = " ".join(a for k in result["kernels"] for a in k["advice"])
    assert "nvprof --metrics flop_count_sp" in advice and "ncu" not in advice
    assert any("nvprof prints no kernel durations" in note for note in result["notes"])


def test_separate_runs_of_one_kernel_name_stay_apart_and_disagreeing_timings_are_not_guessed():
    frame = load_trace(GTX1080).data
    names = frame["kernel_name"].to_list()
    assert names == [f"block_mul_kernel(int, int, float*, float*, float*) [nvprof run {pid}]" for pid in (2939817, 2940490, 2940530)]
    # Their timing runs took 66.2, 14.9 and 14.9 ms: no one duration is theirs.
    assert frame["duration_ns"].null_count() == 3
    assert frame["achieved_occupancy_pct"].to_list() == pytest.approx([99.4573, 99.8754, 99.7830])
    result = analyze_json(GTX1080)
    first = next(k for k in result["kernels"] if k["name"].endswith("2939817]"))
    assert first["stalls"][0]["reason"] == "memory_dependency" and first["stalls"][0]["share_pct"] == pytest.approx(93.87)
    assert any("94% of stalls" in a for a in first["advice"])
    # One reason collected at 6.65% is 6.65% of the stalls, not all of them.
    second = next(k for k in result["kernels"] if k["name"].endswith("2940490]"))
    assert second["stalls"][0]["share_pct"] == pytest.approx(6.65)
    assert any("disagree by more than 10%" in note for note in result["notes"])
    assert any("only dram_read_throughput was collected" in note for note in result["notes"])


def test_csv_metric_results_with_stall_reasons_and_occupancy():
    frame = load_trace(K20C).data
    assert frame.height == 6 and frame["device_name"].unique().to_list() == ["Tesla K20c"]
    kernels = by_short_name(frame)
    assert kernels["__kernel___forma_kernel__0__"]["fp32_flop"] == 1_924_136_960
    assert kernels["__kernel___forma_kernel__1__"]["achieved_occupancy_pct"] == pytest.approx(91.4255)
    result = analyze_json(K20C)
    stalls = {k["short_name"]: [(s["reason"], round(s["share_pct"], 2)) for s in k["stalls"]] for k in result["kernels"]}
    assert stalls["__kernel___forma_kernel__0__"] == [("exec_dependency", 31.99), ("sync", 16.38), ("memory_dependency", 5.53)]
    assert result["device"]["name"] == "Tesla K20c"


def test_one_side_advice_speaks_the_inputs_profiler():
    row = {"dram_bytes_per_s": 100e9, "fp32_flop_per_s": None}
    peaks = {"peak_dram_bytes_per_s": 300e9, "peak_fp32_flop_per_s": 10e12}
    assert "ncu --section SpeedOfLight" in classify_launch(row, peaks).reason
    frame = pl.DataFrame([row], schema={"dram_bytes_per_s": pl.Float64, "fp32_flop_per_s": pl.Float64})
    reason = classify_launches(frame, peaks, NVPROF_COLLECTION)["reason"][0]
    assert "nvprof --metrics flop_count_sp" in reason and "ncu" not in reason


@pytest.mark.parametrize("text, problem", [
    ("==1== Metric result:\nInvocations  Metric Name  Metric Description  Min  Max  Avg\n", "without any `Kernel:` block"),
    ('==1== Metric result:\n"Device","Kernel","Invocations","Metric Name","Metric Description","Min","Max","Avg"\n'
     '"GPU (0)","k()",1,"flop_count_sp"\n', "has 4 fields for 8 columns"),
])
def test_damaged_metric_results_are_one_clear_line(tmp_path, text, problem):
    path = tmp_path / "metrics.txt"
    path.write_text(text)
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 1 and problem in result.stderr and "Traceback" not in result.stderr


def test_hostile_kernel_names_and_values_stay_data(tmp_path):
    path = tmp_path / "metrics.txt"
    path.write_text('==7== Metric result:\nInvocations  Metric Name  Metric Description  Min  Max  Avg\nDevice "GeForce GTX 1080 (0)"\n'
                    "    Kernel: <script>alert(1)</script>|x(float*)\n"
                    "          2  flop_count_sp  Floating Point Operations(Single Precision)  nan  inf  -5\n"
                    "          2  achieved_occupancy  Achieved Occupancy  0.5  0.5  0.5\n")
    result = analyze_json(path)
    kernel = result["kernels"][0]
    assert kernel["name"] == "<script>alert(1)</script>|x(float*)" and kernel["launches"] == 2
    html = runner.invoke(app, ["analyze", str(path), "-f", "html"])
    assert html.exit_code == 0 and "<script>alert(1)" not in html.stdout


def test_cuda_5_names_tab_indented_kernels_and_names_cut_to_30_characters(tmp_path):
    # nvprof of CUDA 5.x on a Tesla K20m: `flops_dp` (add + mul + 2 x fma: 356.4 M + 300.3 M + 2 x 886.0 M), the stall
    # reason `stall_data_request` that later versions call memory_dependency, `\tKernel:` lines.
    path = FOUND / "nvprof_cuda5_metrics_k20m_harm_flops_dp_truncated_names_excerpt.txt"
    assert detect_format(path) == TraceFormat.NVPROF_METRICS
    fixup = by_short_name(load_trace(path).data)["fixup"]
    assert fixup["fp64_flop"] == 2_428_783_027 == pytest.approx(356_411_600 + 300_348_978 + 2 * 886_011_224, abs=1)
    assert fixup["duration_ns"] == pytest.approx((2_863_305 + 2_599_131) * 32 / ((6.5924 + 5.9863) * 2**30) * 1e9)
    result = analyze_json(path)
    top = result["kernels"][0]
    # 16% of the K20's FP64 peak and 6.5% of its bandwidth: latency-bound, with 19% of the warps resident.
    assert (top["short_name"], top["bound"]) == ("fixup", "latency")
    assert [s["reason"] for s in top["stalls"]][:2] == ["exec_dependency", "inst_fetch"]
    assert top["advice"][0].startswith("achieved occupancy is 19%")
    boundprim = next(k for k in result["kernels"] if k["short_name"] == "boundprim2")
    assert "memory_dependency" in [s["reason"] for s in boundprim["stalls"]]
    cut = tmp_path / "cut.txt"
    cut.write_text('==9== Metric result:\nInvocations  Metric Name  Metric Description  Min  Max  Avg\nDevice "Tesla K40m (0)"\n\tKernel: k()\n'
                   "  1  stall_constant_memory_dependen  Issue Stall Reasons (Immediat  12.5%  12.5%  12.5%\n")
    assert load_trace(cut).data["stalls"][0][0]["reason"] == "constant_memory_dependency"


def test_a_hand_edited_kernel_line_is_still_a_kernel():
    # The real log has stray keystrokes before its first `Kernel:` (`LK    Kernel: ...`); its rows are that kernel's.
    path = FOUND / "nvprof_metrics_gtx1070_thrust2d_particle_filter_stray_keys_before_kernel.txt"
    frame = load_trace(path).data
    assert frame["kernel_name"][0].startswith("void thrust::for_each_kernel<thrust::detail::normal_iterator<thrust::device_ptr<int>>")
    # Three kernels of 1998 invocations, nine of 999, three of 1, 3 and 6: each invocation is a launch with its averages.
    assert frame.unique("kernel_name").height == 15 and frame.height == 3 * 1998 + 9 * 999 + 1 + 3 + 6


@pytest.mark.parametrize("name, says", [
    ("nvprof_failed_run_signal_139_thrust2d_blend.txt", "nvprof's output of a run it could not profile (it says: Application received signal 139)"),
    ("nvprof_no_kernels_profiled_then_signal_11_thrust2d_pyrup.txt",
     "nvprof profiled no kernels ('No kernels were profiled.'; it also says: Some profiling data are not recorded; Application received signal 11)"),
])
def test_nvprofs_report_of_a_failed_run_says_so(name, says):
    result = runner.invoke(app, ["analyze", str(FOUND / "refused" / name)])
    assert result.exit_code == 1 and says in result.stderr and "Traceback" not in result.stderr
    assert "not a supported trace" not in result.stderr


def test_trouble_at_the_end_of_a_run_is_a_note_beside_its_results(tmp_path):
    text = (FOUND / "nvprof_metrics_gtx1070_particle_filter_dram_throughput_999_invocations.txt").read_text()
    path = tmp_path / "crashed.txt"
    path.write_text(text + "======== Error: Application received signal 11\n")
    assert any("nvprof reported trouble in the run (Application received signal 11)" in note for note in analyze_json(path)["notes"])
