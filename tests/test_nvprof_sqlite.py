"""nvprof's SQLite export (`nvprof -o`; real files in tests/fixtures/found, PROVENANCE.md) read into the frames of an
Nsight Systems export, so its whole-run view is the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app
from traceview.parsers import TraceFormat, detect_format, load_trace

FOUND = Path(__file__).parent / "fixtures" / "found"
TITAN = FOUND / "nvprof2021_export_titanx_pascal_square_matrix_pageable_copy.nvvp"
EMPTY = FOUND / "nvprof2022_export_empty_no_activity.nvvp"
runner = CliRunner()


def analyze_json(*args):
    result = runner.invoke(app, ["analyze", *map(str, args), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_an_nvprof_export_is_told_from_an_nsys_export():
    assert detect_format(TITAN) == TraceFormat.NVPROF_SQLITE
    assert detect_format(FOUND / "nsys2022.1_rtx3070_managed_memory_prefetched.sqlite") == TraceFormat.NSYS_SQLITE
    export = load_trace(TITAN).data
    assert export.kernels.height == 1 and export.names[export.kernels["name_id"][0]] == "_Z15squareMatrixGpuPdS_"
    # CUPTI's memory kinds (1 pageable, 3 device), not nsys's numbering, which would call them pinned and array.
    copy = export.memops.row(0, named=True)
    assert (copy["operation"], copy["src_kind"], copy["dst_kind"], copy["bytes"]) == ("memcpy Host-to-Device", "Pageable", "Device", 131072)
    assert set(export.api["name"].cast(str)) == {"cudaMalloc", "cudaMemcpy", "cudaLaunchKernel", "cudaEventCreate", "cudaEventRecord",
                                                  "cudaProfilerStart"}
    gpu = export.gpus.row(0, named=True)
    assert (gpu["name"], gpu["sm_count"], gpu["compute_capability"], gpu["memory_bandwidth_bytes_per_s"]) == ("TITAN X (Pascal)", 28, "6.1", 480.48e9)


def test_the_kernel_is_the_gpus_work_not_the_copy():
    # Read as an Nsight Systems export, its kernel table was not found and the run was "copy-bound: copies alone take
    # 100.0%" of a span that held a 4.87 ms kernel and a 12.5 us copy.
    result = analyze_json(TITAN)
    timeline = result["timeline"]
    assert timeline["verdict"]["verdict"] == "compute" and timeline["verdict"]["share_pct"] == pytest.approx(99.2, abs=0.1)
    kernel = result["kernels"][0]
    assert kernel["short_name"] == "squareMatrixGpu" and kernel["duration_ns"] == pytest.approx(4_868_167)
    # A Pascal GPU: Nsight Compute does not profile it, so the advice is nvprof's metrics.
    assert "nvprof --kernels NAME --metrics" in kernel["recommendation"] and "ncu --set" not in kernel["recommendation"]
    assert result["device"]["name"] == "TITAN X (Pascal)" and result["device"]["identified"] == "recorded in the export"
    assert result["source"]["profiler"] == "nvprof (export format 11), SQLite export (nvprof -o)"


def test_nvprof_metrics_join_the_export_with_ncu(tmp_path):
    metrics = tmp_path / "metrics.txt"
    metrics.write_text('==1== Metric result:\nInvocations  Metric Name  Metric Description  Min  Max  Avg\nDevice "TITAN X (Pascal) (0)"\n'
                       "    Kernel: squareMatrixGpu(double*, double*)\n"
                       "          1  dram_read_transactions  Device Memory Read Transactions  100  100  100\n")
    result = analyze_json(TITAN, "--ncu", metrics)
    # The export's mangled `_Z15squareMatrixGpuPdS_` and the metrics' demangled name are one kernel, by its bare name.
    assert result["timeline"]["ncu_join"] == {"matched_kernels": 1, "unmatched_ncu_kernels": []}
    assert "joined nvprof's metric results from" in result["notes"][-1]
    # Read transactions alone measure neither side: the verdict stays unknown, and says what nvprof should collect.
    assert "nvprof --metrics flop_count_sp" in result["kernels"][0]["recommendation"]


def test_an_export_that_recorded_nothing_says_so():
    result = analyze_json(EMPTY)
    assert result["kernels"] == []
    assert any("no CUDA kernel activity" in note and "cudaProfilerStop" in note for note in result["notes"])


def test_an_mxnet_run_waits_on_its_set_up_calls_which_are_named():
    # nvprof -o of an MXNet forward pass on a TITAN V: 27 launches of 10 kernels, 20 pageable host-to-device copies,
    # 1,130 runtime calls. The GPU idles 99.7% of the span, most of it before the first kernel, in
    # cudaStreamCreateWithFlags (callback id 198): named from CUPTI's enum, not "CUDA runtime call 198".
    result = analyze_json(FOUND / "nvprof_export_titanv_mxnet_forward_timeline.nvprof")
    timeline = result["timeline"]
    assert timeline["verdict"]["verdict"] == "host" and timeline["verdict"]["share_pct"] == pytest.approx(99.7, abs=0.1)
    first = timeline["gaps"][0]
    assert first["before_first_kernel"] and first["evidence"]["cuda_calls"][0]["name"] == "cudaStreamCreateWithFlags"
    assert (len(result["kernels"]), sum(k["launches"] for k in result["kernels"])) == (10, 27)
    htod = next(c for c in timeline["copies"] if c["direction"] == "HtoD")
    assert (htod["count"], htod["pageable_count"], htod["bytes"]) == (20, 20, 13_338_664)
    # Volta: Nsight Compute profiles it, so the advice for the unjudged kernels is ncu's.
    assert result["device"]["compute_capability"] == "7.0"
    assert "ncu --set full" in next(k for k in result["kernels"] if k["short_name"] == "forward_kernel")["recommendation"]


def test_metric_values_stored_under_cupti_ids_are_named_as_not_read(tmp_path):
    import shutil
    import sqlite3

    copy = tmp_path / "analysis.nvprof"
    shutil.copy(TITAN, copy)
    with sqlite3.connect(copy) as connection:
        # nvprof creates every activity table; this one is empty in the real export.
        connection.execute("INSERT INTO CUPTI_ACTIVITY_KIND_METRIC (id, value, correlationId, flags) VALUES (20971523, x'00', 112, 0)")
    assert any("1 metric values" in note and "Visual Profiler" in note for note in analyze_json(copy)["notes"])
