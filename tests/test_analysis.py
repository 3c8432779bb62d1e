"""analyze() on real exports: device resolution, verdicts and ranking."""

from __future__ import annotations

import json

import polars as pl
import pytest

from traceview.analyzer.analysis import Source, analyze
from traceview.analyzer.devices import find_by_compute_capability, find_by_name, find_module, host_link, lookup_gpu
from traceview.errors import UsageError
from traceview.parsers import load_trace


def run(path, gpu=None):
    trace = load_trace(path)
    return analyze(trace.data, Source(str(path), trace.format, "0" * 64, 0), gpu=gpu)


def test_elementwise_kernel_is_memory_bound(realdata_file):
    analysis = run(realdata_file("ncu_details/ncu2025.1_cc120_elementwise_membound_details_llmperfopt.csv"))
    kernel = analysis.kernels.row(0, named=True)
    assert kernel["bound"] == "memory"
    assert kernel["label"] == "High Throughput (L2)"
    assert kernel["roof_pct"] == pytest.approx(93.99)
    # ncu's own estimate (6.015 %) of 94.91 us.
    assert kernel["recoverable_ns"] == pytest.approx(94_910 * 0.06015)
    # The CSV gives CC 12.0 and a 1,764 GB/s DRAM peak: the RTX 5090 and the RTX PRO 6000 Blackwell both have
    # 1,792 GB/s, so that peak is known and the compute peaks are not (the file is an RTX 5090's, MANIFEST.md).
    assert analysis.device.spec is None and "rtx5090, rtx-pro-6000-blackwell, all 1,792 GB/s" in analysis.device.how_identified
    assert analysis.device.peaks["peak_dram_bytes_per_s"].value == 1792e9 and analysis.device.peaks["peak_fp32_flop_per_s"].value is None


def test_gemm_is_latency_bound_as_ncu_says_with_tensor_roofline(realdata_file):
    analysis = run(realdata_file("ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv"), gpu="rtx5090")
    kernel = analysis.kernels.row(0, named=True)
    assert kernel["bound"] == "latency" and kernel["label"] == "Latency Issue"
    assert kernel["precision"] == "tensor"
    # 12,532,580,352 tensor ops / 17.50 MB of DRAM traffic.
    assert kernel["arithmetic_intensity"] == pytest.approx(12_532_580_352 / 17.50e6)
    # 112 TOP/s of the RTX 5090's 209.5 TFLOP/s BF16 dense peak.
    assert kernel["roof_pct"] == pytest.approx(100 * 12_532_580_352 / 111.81e-6 / 209.5e12, rel=1e-3)


def test_gemv_is_a_small_grid(realdata_file):
    kernel = run(realdata_file("ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv")).kernels.row(0, named=True)
    assert kernel["bound"] == "latency" and kernel["label"] == "Small Grid"


def test_v100_cfd_ranked_by_recoverable_time(realdata_file):
    analysis = run(realdata_file("ncu_details/ncu2019.5_v100_aws_cfd_thousands_sep_xplacer.log"))
    kernels = analysis.kernels
    assert kernels["rank"].to_list() == [1, 2, 3]
    assert kernels["recoverable_ns"].is_sorted(descending=True)
    assert kernels["launches"].sum() == 100
    assert kernels["duration_ns"].sum() == pytest.approx(analysis.launches["duration_ns"].sum())
    by_name = {row["short_name"]: row for row in kernels.iter_rows(named=True)}
    assert by_name["cuda_time_step"]["bound"] == "memory"
    assert by_name["cuda_compute_flux"]["bound"] == "latency"
    assert analysis.device.name is None
    assert all(p.value is None for p in analysis.device.peaks.values())


def test_raw_page_uses_profile_peaks(realdata_file):
    analysis = run(realdata_file("ncu_raw/mudock_gtx1650_full_raw.csv"))
    assert analysis.device.name == "NVIDIA GeForce GTX 1650"
    assert analysis.device.peaks["peak_dram_bytes_per_s"].source == "profile"
    assert analysis.device.peaks["peak_l2_bytes_per_s"].source == "profile"
    kernel = analysis.kernels.row(0, named=True)
    assert kernel["launches"] == 6
    assert kernel["arithmetic_intensity"] is not None and kernel["arithmetic_intensity"] > 0


def test_gpu_option_overrides_the_profile(realdata_file):
    analysis = run(realdata_file("ncu_details/ncu2019.5_v100_aws_bfs_small_xplacer.log"), gpu="v100-sxm2")
    assert analysis.device.spec is not None and analysis.device.spec.name == "Tesla V100 SXM2"
    assert analysis.device.peaks["peak_dram_bytes_per_s"].value == 900e9
    assert analysis.device.peaks["peak_dram_bytes_per_s"].source == "table"


def test_device_lookup():
    assert find_by_name("NVIDIA H100 80GB HBM3").key == "h100-sxm"
    assert find_by_name("NVIDIA H100 PCIe").key == "h100-pcie"
    assert find_by_name("NVIDIA H200").key == "h200"
    assert find_by_name("Tesla V100-SXM2-16GB").key == "v100-sxm2"
    assert find_by_name("NVIDIA A100-PCIE-40GB").key == "a100-40gb"
    assert find_by_name("NVIDIA A100-SXM4-80GB").key == "a100-80gb"
    assert find_by_name("NVIDIA GeForce RTX 3090 Ti").key == "rtx3090ti"
    assert find_by_name("NVIDIA GeForce RTX 3090").key == "rtx3090"
    assert find_by_name("NVIDIA GeForce GTX 1650") is None
    assert [g.key for g in find_by_compute_capability("12.0")] == ["rtx5090", "rtx-pro-6000-blackwell", "rtx5080", "rtx5070ti", "rtx5070", "rtx5060ti", "rtx5060"]
    assert len(find_by_compute_capability("9.0")) == 8  # H100 NVL, PCIe and SXM5, H800, both GH200s, H20, H200
    # The H20 (GH100 with 78 SMs, China market) is not an H200, though its name is that name's prefix.
    assert find_by_name("NVIDIA H20", 78).key == "h20" and find_by_name("NVIDIA H200", 132).key == "h200"
    assert find_by_name("NVIDIA H20").dram_bytes_per_s == 4.0e12 and find_by_name("NVIDIA H20", 132) is None
    assert find_by_name("NVIDIA GB10").key == "gb10" and [g.key for g in find_by_compute_capability("12.1")] == ["gb10"]
    # Names as nvidia-smi, nsys and ncu print them (the real exports' TARGET_INFO_GPU among them).
    assert find_by_name("NVIDIA TITAN RTX").key == "titan-rtx"
    assert find_by_name("Quadro RTX 8000").key == "quadro-rtx8000"
    assert find_by_name("NVIDIA GeForce RTX 2070 SUPER").key == "rtx2070super"
    assert find_by_name("NVIDIA GeForce RTX 3080").key == "rtx3080"
    assert find_by_name("NVIDIA A10G").key == "a10g" and find_by_name("NVIDIA A10").key == "a10"
    assert find_by_name("NVIDIA L40").key == "l40" and find_by_name("NVIDIA L40S").key == "l40s"
    assert find_by_name("NVIDIA H100 NVL").key == "h100-nvl"
    # "gh200" contains "h200": the Grace Hopper parts are not taken for an H200.
    assert find_by_name("NVIDIA B200").key == "b200" and find_by_name("NVIDIA GB200") is None
    assert find_by_name("NVIDIA GH200 480GB").key == "gh200-96gb" and find_by_name("NVIDIA GH200 144G HBM3e").key == "gh200-144gb"
    # Another product under a longer name, and laptop parts (their peaks are the maker's choice), match nothing.
    assert find_by_name("NVIDIA GeForce RTX 4070 SUPER") is None and find_by_name("NVIDIA GeForce RTX 4090 D") is None
    assert find_by_name("NVIDIA GeForce RTX 3070 Laptop GPU") is None
    assert find_by_name("GeForce GTX 1060 with Max-Q Design") is None
    with pytest.raises(UsageError, match="fits several GPUs"):
        lookup_gpu("gh200")
    # Every Orin module is "Orin (nvgpu)" to nsys: the SM count the export records picks the module; without one the
    # 64 GB AGX Orin is taken. An SM count no entry of that name has (a MIG slice, the 12 GB RTX 3080) matches none.
    assert [find_by_name("Orin (nvgpu)", sms).key for sms in (16, 14, 8)] == ["jetson-agx-orin-64gb", "jetson-agx-orin-32gb", "jetson-orin-nx-16gb"]
    assert find_by_name("Orin").key == "jetson-agx-orin-64gb" and find_by_name("Orin (nvgpu)", 6) is None
    # The Orin Nano 4GB (4 SMs, 64-bit bus) had no entry: a profile with 3.6 GB of memory was measured as an AGX Orin.
    assert find_by_name("Orin (nvgpu)", 4).key == "jetson-orin-nano-4gb"
    assert [find_module("Orin", 4, 3_600_000_000, True, clock)[0].key for clock in (1.02e9, 0.625e9)] == [
        "jetson-orin-nano-4gb", "jetson-orin-nano-4gb-pre-super"]
    # `orin nano` and `orin nx` are each two modules now: refused with both, never one guessed.
    with pytest.raises(UsageError, match="fits several GPUs: jetson-orin-nano-8gb, jetson-orin-nano-4gb"):
        lookup_gpu("orin nano")
    assert lookup_gpu("orin nx 8gb").key == "jetson-orin-nx-8gb" and lookup_gpu("orin nx 16gb").key == "jetson-orin-nx-16gb"
    # The names CUDA, nvidia-smi and Vulkan give the older Jetson GPUs (real ones from the search index: "Xavier (nvgpu)",
    # "NVIDIA Tegra Xavier (nvgpu)", "NVIDIA Tegra X1 (rev B) (nvgpu)", "NVIDIA Tegra X2 (nvgpu)"); the Nano and the TX1
    # are both a Tegra X1 and are told apart by SMs, as the two Xavier modules are.
    assert find_by_name("NVIDIA Tegra Orin (nvgpu)").key == "jetson-agx-orin-64gb"
    assert [find_by_name("Xavier (nvgpu)", sms).key for sms in (8, 6)] == ["jetson-agx-xavier", "jetson-xavier-nx"]
    assert find_by_name("NVIDIA Tegra Xavier (nvgpu)").key == "jetson-agx-xavier"
    assert [find_by_name("NVIDIA Tegra X1 (rev B) (nvgpu)", sms).key for sms in (1, 2)] == ["jetson-nano", "jetson-tx1"]
    assert find_by_name("NVIDIA Tegra X2 (nvgpu)").key == "jetson-tx2" and find_by_name("NVIDIA Tegra X2", 4) is None
    assert lookup_gpu("jetson-xavier-nx").dram_bytes_per_s == 51.2e9 and host_link(lookup_gpu("jetson-nano")) is None
    # Workstation parts that real exports name (an nsys export in the search index: "NVIDIA RTX A5000").
    assert find_by_name("NVIDIA RTX A5000").key == "rtx-a5000" and find_by_name("NVIDIA RTX 6000 Ada Generation").key == "rtx-6000-ada"
    assert find_by_name("Quadro RTX 6000").key == "quadro-rtx8000"
    # The RTX 5060 Ti of a real nsys 2025.1 export (lighttransport/gemm): a PCIe Gen5 x8 card.
    assert host_link(find_by_name("NVIDIA GeForce RTX 5060 Ti")) == (32e9, "PCIe Gen5 x8")
    assert find_by_name("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 14) is None and find_by_name("NVIDIA A100-SXM4-40GB", 108).key == "a100-40gb"
    assert find_by_name("NVIDIA GeForce RTX 3080", 70) is None
    with pytest.raises(UsageError, match="unknown GPU"):
        lookup_gpu("rtx9999")


def test_ambiguous_compute_capability_is_not_guessed():
    from traceview.parsers.schema import KERNELS, conform

    frame = conform(pl.DataFrame({"launch_id": [0], "kernel_name": ["k"], "compute_capability": ["9.0"],
                                  "sm_throughput_pct": [90.0], "memory_throughput_pct": [10.0], "duration_ns": [1.0]}), KERNELS)
    analysis = analyze(frame, Source("x", "ncu-csv-details", "0", 0))
    assert analysis.device.spec is None
    assert "use --gpu" in analysis.device.how_identified
    assert analysis.kernels["bound"][0] == "compute"


def test_a_compute_capability_shared_by_several_gpus_is_narrowed_by_the_profiles_own_evidence(realdata_file):
    # The L4 console capture names no device; CC 8.9 fits nine table GPUs, but its 58 SMs only the L4.
    device = run(realdata_file("ncu_console/ncu2024plus_l4_cc89_unfused_attention_qkT_softmax_pv_quantizedmha.txt")).device
    assert device.spec.key == "l4" and "58 SMs" in device.how_identified
    # The RTX 5090 details export has no SM count, but its DRAM bytes/s over DRAM throughput % implies the card's
    # peak at its clock (156.5 GB/s at 8.87% → 1,764 GB/s, the figure its roofline-chart export measures): of the
    # five CC 12.0 GPUs, two fit, both with 1,792 GB/s.
    device = run(realdata_file("ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv")).device
    assert device.spec is None and "1765 GB/s DRAM peak (DRAM bytes/s ÷ % of peak) matches rtx5090, rtx-pro-6000-blackwell" in device.how_identified
    device = run(realdata_file("ncu_details/ncu2025.1_cc120_cutlass_gemm_rooflinechart_section_llmperfopt.csv")).device
    assert device.spec is None and "1764 GB/s DRAM peak (measured)" in device.how_identified


def test_an_sm_count_no_table_gpu_has_is_not_given_a_neighbours_peaks():
    from traceview.parsers.schema import KERNELS, conform

    # An RTX 4070 SUPER (CC 8.9, 56 SMs) is not in the table: none of the nine CC 8.9 entries has 56 SMs.
    frame = conform(pl.DataFrame({"launch_id": [0], "kernel_name": ["k"], "compute_capability": ["8.9"], "sm_count": [56],
                                  "sm_throughput_pct": [90.0], "memory_throughput_pct": [10.0], "duration_ns": [1.0]}), KERNELS)
    device = analyze(frame, Source("x", "ncu-csv-details", "0", 0)).device
    assert device.spec is None and device.how_identified == "compute capability 8.9 and 56 SMs matches no GPU in the built-in table; use --gpu"


def test_a_name_several_jetson_modules_share_is_settled_by_the_profile_or_said_to_be_assumed(realdata_file, tmp_path):
    from traceview.parsers.schema import KERNELS, conform

    def device(**columns):
        frame = conform(pl.DataFrame({"launch_id": [0], "kernel_name": ["k"], "device_name": ["Orin"], "compute_capability": ["8.7"],
                                      "sm_throughput_pct": [10.0], "memory_throughput_pct": [80.0], "duration_ns": [1.0], **columns}), KERNELS)
        return analyze(frame, Source("x", "ncu-csv-details", "0", 0)).device

    # ncu measures a 102 GB/s DRAM peak: not the 204.8 GB/s AGX Orin the bare name would give.
    assert device(peak_dram_bytes_per_s=[101.9e9]).spec.dram_bytes_per_s < 103e9
    # An SM count settles it; with neither, the AGX Orin 64 GB is assumed and the output says so.
    assert device(sm_count=[14]).spec.key == "jetson-agx-orin-32gb"
    bare = device()
    assert bare.spec.key == "jetson-agx-orin-64gb" and "Jetson Orin NX 16GB 102.4 GB/s" in bare.how_identified and "--gpu" in bare.how_identified
    # llama.cpp prints CUDA's name alone (`Device 0: Orin, compute capability 8.7`): the real RTX 3090 Ti output with its
    # device line changed to an Orin's says which module its MBU assumes; --gpu settles it and drops the note.
    source = realdata_file("llama_cpp/llama_bench_md_rtx3090ti_nkvo_pr4812.txt").read_text()
    path = tmp_path / "orin.txt"
    path.write_text(source.replace("NVIDIA GeForce RTX 3090 Ti, compute capability 8.6", "Orin, compute capability 8.7"))
    from typer.testing import CliRunner

    from traceview.app.cli import app

    def identified(*options):
        return json.loads(CliRunner().invoke(app, ["analyze", "--format", "json", str(path), *options]).stdout)["device"]["identified"]

    assert "\"Orin\" is the name of several GPUs: Jetson AGX Orin 64GB (204.8 GB/s) was assumed" in identified()
    assert identified("--gpu", "jetson-orin-nano-8gb") == "chosen with --gpu jetson-orin-nano-8gb"
