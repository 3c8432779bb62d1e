"""--what-if: a run projected onto other GPUs, every kernel along its own roof; onto its own GPU it keeps its times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.analyzer.devices import lookup_gpu
from traceview.app.cli import app, run_analysis

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
ELEMENTWISE = SAMPLES / "ncu" / "rtx5090_elementwise_details_ncu2025.1.csv"
NSYS = SAMPLES / "nsys" / "h100x2_copy_bound_nsys2026.2.sqlite"
LLAMA = SAMPLES / "llama_cpp" / "rtx3090ti_llama7b_q4_0_bench.md.txt"
TORCH = SAMPLES / "pytorch" / "hf_qwen1.5-0.5b_h100_recordshapes.pt.trace.json.gz"


def _projection(path: Path, gpu: str | None, targets: str) -> dict:
    analysis = run_analysis(path, gpu, what_if=targets)
    return {p.target: p for p in analysis.projections}


@pytest.mark.parametrize(("path", "gpu", "own"), [(ELEMENTWISE, "rtx5090", "rtx5090"), (NSYS, "h100-sxm", "h100-sxm"),
                                                  (LLAMA, None, "rtx3090ti"), (TORCH, None, "h100-sxm")])
def test_a_run_projected_onto_its_own_gpu_keeps_its_times(path, gpu, own):
    projection = _projection(path, gpu, own)[own]
    assert projection.speedup == pytest.approx(1.0)
    if projection.measured_ns is not None:
        assert projection.projected_ns == pytest.approx(projection.measured_ns)
    if projection.projected_tokens_per_s is not None:
        assert projection.projected_tokens_per_s == pytest.approx(projection.tokens_per_s)


def test_a_memory_bound_kernel_moves_by_the_bandwidth_ratio():
    analysis = run_analysis(ELEMENTWISE, "rtx5090", what_if="h100-sxm")
    assert analysis.kernels["bound"].to_list() == ["memory"]
    projection = analysis.projections[0]
    ratio = lookup_gpu("rtx5090").dram_bytes_per_s / lookup_gpu("h100-sxm").dram_bytes_per_s
    assert projection.projected_ns == pytest.approx(projection.measured_ns * ratio)


def test_compute_bound_kernels_move_by_their_precisions_peak_and_latency_bound_ones_stay():
    analysis = run_analysis(NSYS, "h100-sxm", what_if="a100-80gb")
    projection = analysis.projections[0]
    h100, a100 = lookup_gpu("h100-sxm"), lookup_gpu("a100-80gb")
    expected = 0.0
    for row in analysis.kernels.iter_rows(named=True):
        bound = row["likely_bound"] if row["bound"] == "unknown" and row["likely_bound"] in ("memory", "compute") else row["bound"]
        ratio = (h100.dram_bytes_per_s / a100.dram_bytes_per_s if bound == "memory" else
                 (h100.tensor_fp16_flop_per_s / a100.tensor_fp16_flop_per_s if row["tensor_core"] else h100.fp32_flop_per_s / a100.fp32_flop_per_s)
                 if bound == "compute" else 1.0)
        expected += row["duration_ns"] * ratio
    assert projection.projected_ns == pytest.approx(expected)
    assert projection.projected_ns > projection.measured_ns  # an A100 is slower than an H100
    assert any("name suggests" in a for a in projection.assumptions)


def test_llama_decode_moves_with_bandwidth_at_the_measured_mbu():
    projection = _projection(LLAMA, None, "h100-sxm")["h100-sxm"]
    assert projection.projected_tokens_per_s == pytest.approx(projection.tokens_per_s * 3350e9 / lookup_gpu("rtx3090ti").dram_bytes_per_s)


def test_the_projection_is_in_every_output(tmp_path):
    result = CliRunner().invoke(app, ["analyze", str(ELEMENTWISE), "--gpu", "rtx5090", "--what-if", "h100-sxm,a100-80gb", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert [p["target"] for p in json.loads(result.stdout)["projection"]] == ["h100-sxm", "a100-80gb"]
    text = CliRunner().invoke(app, ["analyze", str(ELEMENTWISE), "--gpu", "rtx5090", "--what-if", "h100-sxm"]).stdout
    assert "Projected onto other GPUs (from GeForce RTX 5090)" in text and "H100 SXM5 (h100-sxm)" in text
    page = tmp_path / "r.html"
    assert CliRunner().invoke(app, ["report", str(ELEMENTWISE), "--gpu", "rtx5090", "--what-if", "h100-sxm", "-o", str(page)]).exit_code == 0
    assert 'id="traceview-projection"' in page.read_text()
    from traceview.app.dashboard import side_panel

    assert "Projected onto other GPUs" in str(side_panel(run_analysis(ELEMENTWISE, "rtx5090", what_if="h100-sxm")))


def test_an_unknown_target_is_one_line_before_the_file_is_read():
    result = CliRunner().invoke(app, ["analyze", str(ELEMENTWISE), "--what-if", "h100-sxm,no-such-gpu"])
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1 and "no-such-gpu" in result.stderr


def test_an_h800_run_has_its_peaks_and_projects():
    """DeepSeek's published traces ran on H800s (the export-market H100 SXM5): the name alone gave no peaks, and every
    projection from it was n/a."""
    from traceview.analyzer.devices import find_by_name, lookup_gpu

    h800, h100 = find_by_name("NVIDIA H800"), lookup_gpu("h100-sxm")
    assert h800 is not None and h800.key == "h800" and find_by_name("NVIDIA H800 PCIe") is None
    assert (h800.dram_bytes_per_s, h800.tensor_fp16_flop_per_s, h800.fp32_flop_per_s) == (h100.dram_bytes_per_s, h100.tensor_fp16_flop_per_s,
                                                                                           h100.fp32_flop_per_s)
    assert h800.fp64_flop_per_s == 1e12
