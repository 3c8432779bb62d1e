"""nvprof's summary (real outputs in tests/fixtures/found, PROVENANCE.md) read as the nsys stats reports it matches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app
from traceview.parsers import TraceFormat, detect_format, load_trace

FOUND = Path(__file__).parent / "fixtures" / "found"
runner = CliRunner()


def analyze_json(path):
    result = runner.invoke(app, ["analyze", str(path), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_cuda_9_and_later_layout_with_its_type_column():
    path = FOUND / "nvprof_new_layout_vectoradd_streams_pinned.txt"
    assert detect_format(path) == TraceFormat.NVPROF
    stats = load_trace(path).data
    kernels, copies, api = (stats.reports[k] for k in ("cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_api_sum"))
    assert kernels.row(0, named=True)["name"] == "vectorAddOnDevice(float*, float*, float*, int)"
    assert kernels.row(0, named=True)["total_ns"] == pytest.approx(99_587) and kernels.row(0, named=True)["count"] == 16
    assert copies["name"].to_list() == ["[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]"]
    assert copies["total_ns"].to_list() == pytest.approx([1.3887e6, 757_500])
    # `56ns`, `37ns`, `262ns`: the units are read row by row.
    last_error = api.filter(api["name"] == "cudaGetLastError").row(0, named=True)
    assert (last_error["avg_ns"], last_error["min_ns"], last_error["max_ns"], last_error["count"]) == (56, 37, 262, 16)
    assert api.height == 20 and api["time_pct"][0] == 59.04
    result = analyze_json(path)
    # 2.15 ms of copies against 99.6 us of kernels: the copies are the GPU's work, and the finding says a trace is
    # needed to tell whether they overlapped the kernels.
    top = result["timeline"]["findings"][0]
    assert top["rule"] == "copy_dominated" and top["evidence"]["copy_share_pct"] == pytest.approx(100 * 2.14620 / 2.245787, abs=0.01)
    assert result["kernels"][0]["share_pct"] == 100.0  # of kernel time, as nsys's summary has it, not of kernels and copies
    assert any(note.startswith("nvprof's summary carries no timeline") for note in result["notes"])


def test_the_earlier_layout_with_an_api_calls_heading():
    stats = load_trace(FOUND / "nvprof_cuda9_old_layout_rgb2gray_aws.txt").data
    assert stats.reports["cuda_gpu_kern_sum"]["name"].to_list() == ["rgb2grayGPU_kernel(uchar3 const *, unsigned char*, int, int)"]
    assert stats.reports["cuda_gpu_mem_time_sum"]["name"].to_list() == ["[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]", "[CUDA memset]"]
    malloc = stats.reports["cuda_api_sum"].row(0, named=True)
    assert malloc["name"] == "cudaMalloc" and malloc["total_ns"] == pytest.approx(1.35782e9) and malloc["max_ns"] == pytest.approx(1.35774e9)


def test_unified_memory_migrations_and_the_device_line():
    # A real GeForce 840M run of the managed-memory `add` example: 102 device-to-host migrations of 120 KB on average.
    result = analyze_json(FOUND / "nvprof_cuda10.1_geforce840m_unified_memory_demand_paging.txt")
    assert result["device"]["name"] == "GeForce 840M" and "nvprof's output" in result["device"]["identified"]
    copies = {c["direction"]: c for c in result["timeline"]["copies"]}
    # nvprof's MB is 2^20 bytes: 12.00000MB is 12 MiB.
    assert copies["[CUDA Unified Memory memcpy DtoH]"]["bytes"] == pytest.approx(12 * 2**20)
    assert copies["[CUDA Unified Memory memcpy DtoH]"]["count"] == 102
    paging = result["timeline"]["findings"][0]
    assert paging["rule"] == "unified_memory_paging" and paging["evidence"]["migrations"] == 102


def test_csv_with_its_units_row(tmp_path):
    # A real `nvprof --print-gpu-summary -i ... --csv` excerpt: times in the unit the second row names (us here).
    stats = load_trace(FOUND / "nvprof_csv_gpu_summary_volta_cudnn_excerpt.txt").data
    sgemm = stats.reports["cuda_gpu_kern_sum"].row(0, named=True)
    assert sgemm["name"] == "volta_sgemm_128x64_nn" and sgemm["total_ns"] == pytest.approx(6_659_683) and sgemm["count"] == 510
    assert any("literal '...' row" in note for note in stats.notes)
    assert [f["rule"] for f in analyze_json(FOUND / "nvprof_csv_gpu_summary_volta_cudnn_excerpt.txt")["timeline"]["findings"]] == ["fp32_matrix_math"]


def test_two_processes_are_added_up_and_metrics_without_a_roofline_metric_say_what_to_collect(tmp_path):
    text = (FOUND / "nvprof_cuda9_old_layout_rgb2gray_aws.txt").read_text()
    twice = tmp_path / "children.txt"
    twice.write_text(text + "\n" + text.replace("==2268==", "==2269=="))
    stats = load_trace(twice).data
    kernel = stats.reports["cuda_gpu_kern_sum"].row(0, named=True)
    assert kernel["count"] == 2 and kernel["total_ns"] == pytest.approx(2 * 32_351)
    assert any("2 processes" in note for note in stats.notes)
    metrics = tmp_path / "metrics.txt"
    metrics.write_text("==32934== Profiling application: ./a.out\n==32934== Profiling result:\n==32934== Metric result:\n"
                       "Invocations                               Metric Name                        Metric Description         Min         Max         Avg\n"
                       'Device "NVIDIA GeForce GT 1030 (0)"\n   Kernel: k(void)\n         1    branch_efficiency    Branch Efficiency     100.00%     100.00%     100.00%\n')
    # Metric results are their own input (tests/test_nvprof_metrics.py): branch efficiency alone gives no verdict, and
    # the notes name the nvprof metrics a roofline needs.
    result = analyze_json(metrics)
    assert result["source"]["format"] == "nvprof-metrics" and result["kernels"][0]["bound"] == "unknown"
    assert any("flop_count_sp, flop_count_dp" in note for note in result["notes"])


def test_gpu_trace_gives_the_whole_run_view():
    # `nvprof --print-gpu-trace` on a GeForce GT 650M (CUDA 9.0): three pageable copies of 38.147 MB (nvprof's binary
    # MB: 40,000,000 bytes) around one vector add. Each column's values end where its name ends; `(39063 1 1)` holds
    # spaces; `[112]` after the name is the correlation id.
    result = analyze_json(FOUND / "nvprof_cuda9.0_print_gpu_trace_gt650m_pageable_vectoradd.txt")
    device = result["timeline"]["devices"][0]
    assert device["span_ns"] == pytest.approx(199.30e6 + 14.872e6 - 182.96e6)
    assert result["timeline"]["verdict"]["verdict"] == "copy"
    copies = {c["direction"]: c for c in result["timeline"]["copies"]}
    assert copies["HtoD"]["count"] == 2 and copies["HtoD"]["bytes"] == pytest.approx(2 * 40_000_000, rel=1e-4)
    assert copies["DtoH"]["pageable_count"] == 1
    assert [k["name"] for k in result["kernels"]] == ["vectorAdd(float const *, float const *, float*, int)"]
    assert result["timeline"]["findings"][0]["rule"] == "copy_bound" and "pin the host memory" in result["timeline"]["findings"][0]["advice"]


def test_gpu_trace_indented_in_markdown_with_a_2400_s_kernel():
    # A Windows nvprof trace pasted into a Markdown list (every line indented): `2.4e+03s`, a device name cut to the
    # column (`GeForce GTX 107`), and the `Regs:` legend after the table.
    result = analyze_json(FOUND / "nvprof_windows_print_gpu_trace_indented_gtx1070_2400s_kernel.txt")
    kernels = {k["short_name"]: k for k in result["kernels"]}
    assert kernels["render"]["duration_ns"] == pytest.approx(2.4e12) and len(kernels) == 4
    assert result["device"]["name"] == "GeForce GTX 107"


def test_gpu_trace_unified_memory_rows():
    # Page-fault rows are not GPU work (the GPU's are handled while the kernel runs); migrations take their size from
    # the `Unified Memory` column.
    result = analyze_json(FOUND / "nvprof_print_gpu_trace_t4_unified_memory_prefetch.txt")
    assert [k["short_name"] for k in result["kernels"]] == ["vectorAdd"]
    assert result["device"]["table_entry"] == "t4"
    copies = {c["direction"]: c for c in result["timeline"]["copies"]}
    assert copies["unified HtoD"]["count"] == 2 and copies["unified HtoD"]["bytes"] == 2 * 256 * 1024


def test_csv_gpu_trace_and_an_api_trace_beside_it():
    stats = load_trace(FOUND / "nvprof_csv_api_and_gpu_trace_rtx2080ti_excerpt.txt").data
    assert stats.whole_timeline and stats.device_names == {0: "GeForce RTX 2080 Ti"}
    copies = stats.copy_launches.sort("start_ns")
    assert copies["start_ns"].to_list() == [0, 4_643_346] and copies["bytes"].to_list() == [1028, 128]
    assert copies["src_kind"].to_list() == ["Device", "Pinned"]
    assert any("API trace (--print-api-trace)" in note for note in stats.notes)


def test_nvtx_result_ranges_are_read_and_their_kernels_not_counted_twice():
    # A real summary followed by an `NVTX result` section: the range's own 1.22693 s is an NVTX range, and the kernel
    # its table repeats (with its name cut) is not a third launch of another kernel.
    result = analyze_json(FOUND / "nvprof_nvtx_result_after_summary_nvtx3_issue.txt")
    assert [(k["name"], k["launches"]) for k in result["kernels"]] == [("kernel(float*, unsigned long)", 2)]
    assert [(g["name"], g["count"], g["cpu_ns"]) for g in result["timeline"]["nvtx"]] == [("function_my_domain", 1, pytest.approx(1.22693e9))]
