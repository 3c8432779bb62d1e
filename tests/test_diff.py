"""`traceview diff`: per-kernel changes checked against the files, comparability, and the CI gate's exit codes."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from typer.testing import CliRunner

from ncu_truth import details_truth, read_rows
from traceview.analyzer.names import normalise_kernel_name
from traceview.app.cli import REGRESSION_EXIT_CODE, app

runner = CliRunner()
BEFORE = "ncu_details/ncu2019.5_v100_aws_cfd_stdout_mixed_xplacer.log"
AFTER = "ncu_details/ncu2019.5_v100_aws_cfd_thousands_sep_xplacer.log"


def per_kernel_ns(path):
    truth = details_truth(path)
    header, rows = read_rows(path)
    names = {}
    for row in rows:
        if row[0]:
            names[row[0]] = row[header.index("Kernel Name")]
    totals = defaultdict(float)
    for launch, ns in truth["durations"].items():
        totals[names[launch]] += ns
    return totals


def diff_json(before, after, *args):
    result = runner.invoke(app, ["diff", str(before), str(after), "-f", "json", *args])
    return result, json.loads(result.stdout) if result.stdout else None


def test_per_kernel_changes_match_the_files(realdata_file):
    before, after = realdata_file(BEFORE), realdata_file(AFTER)
    result, data = diff_json(before, after)
    assert result.exit_code == 0, result.stderr
    truth_before, truth_after = per_kernel_ns(before), per_kernel_ns(after)
    assert len(data["kernels"]) == 3 and {k["status"] for k in data["kernels"]} == {"changed"}
    for kernel in data["kernels"]:
        b, a = truth_before[kernel["name"]], truth_after[kernel["name"]]
        assert kernel["before_ns"] == pytest.approx(b) and kernel["after_ns"] == pytest.approx(a)
        assert kernel["change_pct"] == pytest.approx(100 * (a - b) / b)
    assert data["total"]["before_ns"] == pytest.approx(sum(truth_before.values()))
    assert data["total"]["change_pct"] == pytest.approx(100 * (sum(truth_after.values()) - sum(truth_before.values())) / sum(truth_before.values()))
    assert data["top_regressions"][0] == "cuda_compute_step_factor"  # +3.1 %, the largest relative change


def test_fail_on_regression_exit_codes(realdata_file):
    before, after = realdata_file(BEFORE), realdata_file(AFTER)
    strict = runner.invoke(app, ["diff", str(before), str(after), "--fail-on-regression", "2"])
    assert strict.exit_code == REGRESSION_EXIT_CODE == 3
    assert "regression: cuda_compute_step_factor +3.1%" in strict.stderr
    lenient = runner.invoke(app, ["diff", str(before), str(after), "--fail-on-regression", "5"])
    assert lenient.exit_code == 0 and "regression" not in lenient.stderr
    # The kernel at +3.1 % holds 6 % of GPU time: above a 10 % minimum share it no longer fails the gate.
    shared = runner.invoke(app, ["diff", str(before), str(after), "--fail-on-regression", "2", "--min-share", "10"])
    assert shared.exit_code == 0
    # Swapped, every kernel got faster: nothing regresses.
    assert runner.invoke(app, ["diff", str(after), str(before), "--fail-on-regression", "0.5"]).exit_code == 0


def test_new_and_vanished_kernels_and_comparability(realdata_file):
    gemv = realdata_file("ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv")
    add = realdata_file("ncu_details/ncu2025.1_cc120_elementwise_membound_details_llmperfopt.csv")
    result, data = diff_json(gemv, add)
    assert data["new"] == ["elementwise_kernel"] and data["vanished"] == ["kernel<…cublasGemvParamsEx…>"]
    assert any("kernel mix" in w for w in data["warnings"])
    assert "warning: different kernel mix" in result.stderr


def test_markdown_diff_renders(realdata_file):
    from markdown_it import MarkdownIt

    result = runner.invoke(app, ["diff", str(realdata_file(BEFORE)), str(realdata_file(AFTER)), "-f", "md"])
    tokens = MarkdownIt("commonmark").enable("table").parse(result.stdout)
    assert sum(t.type == "tr_open" for t in tokens) == 4


def test_llama_runs_diff_and_the_bytes_test(tmp_path):
    table = "| model | size | params | backend | ngl | test | t/s |\n| --- | ---: | ---: | --- | --: | --- | ---: |\n"
    q8 = tmp_path / "q8.md"
    q8.write_text(table + "| llama 8B Q8_0 | 7.95 GiB | 8.03 B | CUDA | 99 | tg128 | 60.00 ± 0.10 |\n")
    q4 = tmp_path / "q4.md"
    q4.write_text(table + "| llama 8B Q4_K_M | 4.58 GiB | 8.03 B | CUDA | 99 | tg128 | 98.00 ± 0.20 |\n")
    result, data = diff_json(q8, q4, "--gpu", "rtx4090")
    assert data["kind"] == "llama" and data["runs"][0]["change_pct"] == pytest.approx(100 * (98 - 60) / 60)
    assert "memory-bandwidth-bound" in data["findings"][0]
    slower = runner.invoke(app, ["diff", str(q4), str(q8), "--fail-on-regression", "10", "--gpu", "rtx4090"])
    assert slower.exit_code == 3 and "tg128" in slower.stderr


def test_tegrastats_diff(realdata_file):
    result, data = diff_json(realdata_file("tegrastats/tx2_nosudo_vddin_plain_log_project.log"),
                             realdata_file("tegrastats/tx2_l4t32_vddsys_dateheader_ssaraff98.txt"))
    assert result.exit_code == 0
    assert data["telemetry"]["duration_s"] == {"before": 600.0, "after": 432.0, "change_pct": pytest.approx(-28.0), "change_pts": None}
    # A utilisation is a share: it changes by points, not by a percentage of itself.
    util = data["telemetry"]["gpu_util_pct_mean"]
    assert util["change_pct"] is None and util["change_pts"] == pytest.approx(util["after"] - util["before"])


def test_different_kinds_cannot_be_compared(realdata_file):
    result = runner.invoke(app, ["diff", str(realdata_file(BEFORE)), str(realdata_file("tegrastats/tx2_nosudo_vddin_plain_log_project.log"))])
    assert result.exit_code == 1 and result.stderr.startswith("Error: cannot compare")


@pytest.mark.parametrize(
    ("ncu", "nsys"),
    [
        ("void Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>(Params)",
         "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>(T1::Params)"),
        ("enable_if<!T7, void>::type kernel<int, int, __nv_bfloat16, 0, 1, 1, 0, 7, 0>(T13)",
         "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, (bool)0, (bool)1, (bool)1, (bool)0, (int)7, (bool)0>(T13)"),
    ],
)
def test_ncu_and_nsys_spellings_normalise_alike(ncu, nsys):
    assert normalise_kernel_name(ncu) == normalise_kernel_name(nsys)


def test_nsys_diff_puts_timeline_findings_side_by_side(realdata_file):
    before = realdata_file("nsys_sqlite/dlprof_pytorch_cnn_RTX2070S_nsys2022.1.3.sqlite")
    after = realdata_file("nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite")
    result, data = diff_json(before, after)
    first = json.loads(runner.invoke(app, ["analyze", str(before), "-f", "json"]).stdout)["timeline"]["devices"][0]
    second = json.loads(runner.invoke(app, ["analyze", str(after), "-f", "json"]).stdout)["timeline"]["devices"][0]
    assert data["timeline"]["gpu0_busy_pct"]["before"] == pytest.approx(first["busy_pct"])
    assert data["timeline"]["gpu0_busy_pct"]["after"] == pytest.approx(second["busy_pct"])
    assert data["timeline"]["gpu0_idle_ns"] == {"before": first["idle_ns"], "after": second["idle_ns"],
                                                "change_pct": pytest.approx(100 * (second["idle_ns"] - first["idle_ns"]) / first["idle_ns"]),
                                                "change_pts": None}
    # Shares of the span change by percentage points (compute 3% → 76% is +73 pts, not +2,288%).
    compute = data["timeline"]["gpu0_compute_pct"]
    assert compute["change_pct"] is None and compute["change_pts"] == pytest.approx(compute["after"] - compute["before"])
    table = runner.invoke(app, ["diff", str(before), str(after)]).stdout
    assert f"{compute['change_pts']:+.1f} pts" in table
    assert "different devices" in result.stderr
