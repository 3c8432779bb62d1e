"""A text export cut inside one of its own lines (a table row, a header or title, a timestamp) says so, or refuses
with one line when nothing before the cut could be read (issue 32: an nsys stats file cut at 39% reported 0 kernels
as if complete; llama-bench tables, llama.cpp timing blocks and tegrastats samples cut mid-row said nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app
from traceview.parsers import FORMATS_BY_NAME, detect_format

FOUND = Path(__file__).resolve().parent / "fixtures" / "found"
REALDATA = Path(__file__).resolve().parent.parent.parent / "shared" / "realdata"
TEXT_FILES = [FOUND / name for name in (
    "nsys2026.3_stats_console_vector_add_16m_launches.txt", "nsys_2025.3_stats_then_analyze_console.txt",
    "nvprof_new_layout_vectoradd_streams_pinned.txt", "nvprof_metrics_gtx1070_particle_filter_dram_throughput_999_invocations.txt",
    "llama_bench_vulkan_depth_sweep.md", "llama_completion_b8925_common_perf_print.txt", "llama_speculative_issue10594_metal_summary.txt",
    "ncu2025_console_rtx4090_cublas_sgemm_full_set.txt", "tegrastats_orin_nano_jetson_clocks_nonroot.log",
)] + [REALDATA / name for name in (
    "nsys_stats/cuda_gpu_kern_sum_rtx5090_llmperfopt_allstage.csv", "tegrastats/agx_orin64_jp6_ts_Hanner123_a.log",
    "llama_cpp/timings_server_rtx3060_issue12237.txt", "llama_cpp/llama_bench_md_rtx3090ti_nkvo_pr4812.txt",
)]
FRACTIONS = (0.2, 0.39, 0.5, 0.75, 0.9)


def _cut_inside_a_line(text: str, fraction: float) -> tuple[str, str] | None:
    """Return (the text cut in the middle of the line at `fraction` of it, that line) — None for an empty line."""
    lines = text.splitlines(keepends=True)
    index = min(int(len(lines) * fraction), len(lines) - 1)
    line = lines[index].rstrip("\r\n")
    if len(line.strip()) < 4:
        return None
    return "".join(lines[:index]) + line[: len(line) // 2], line


@pytest.mark.parametrize("path", TEXT_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("fraction", FRACTIONS)
def test_a_cut_inside_a_line_of_the_format_is_noted_or_refused(tmp_path, path, fraction):
    if not path.exists():
        pytest.skip(f"{path} is absent")
    fmt = detect_format(path)
    cut = _cut_inside_a_line(path.read_text(encoding="utf-8"), fraction)
    if cut is None:
        pytest.skip("the cut falls on an empty line")
    text, line = cut
    pattern = FORMATS_BY_NAME[fmt].data_line
    if pattern is None or not pattern.search(line[: len(line) // 2]):
        pytest.skip("the cut falls inside prose, which no answer depends on")
    damaged = tmp_path / path.name
    damaged.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["analyze", str(damaged), "--format", "json"])
    if result.exit_code == 1:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
        return
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert any("cut short" in note for note in notes), notes


def test_a_timing_block_cut_between_its_prompt_eval_and_its_eval_says_the_decode_is_missing(tmp_path):
    text = (FOUND / "llama_completion_b8925_common_perf_print.txt").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    prompt = next(i for i, line in enumerate(lines) if "prompt eval time" in line)
    damaged = tmp_path / "no_eval.txt"
    damaged.write_text("".join(lines[: prompt + 1]), encoding="utf-8")
    data = json.loads(CliRunner().invoke(app, ["analyze", str(damaged), "--format", "json"]).stdout)
    assert [run["phase"] for run in data["runs"]] == ["prefill"]
    assert any("decode is missing" in note for note in data["notes"])


def test_a_bench_row_without_its_closing_bar_is_left_out_with_a_note(tmp_path):
    text = (FOUND / "llama_bench_vulkan_depth_sweep.md").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    last_row = max(i for i, line in enumerate(lines) if line.lstrip().startswith("|") and "±" in line)
    # Cut inside the rate, then a newline: the rate would read as a shorter number.
    damaged = tmp_path / "cut_row.md"
    damaged.write_text("".join(lines[:last_row]) + lines[last_row].split("±")[0].rstrip()[:-2] + "\n", encoding="utf-8")
    data = json.loads(CliRunner().invoke(app, ["analyze", str(damaged), "--format", "json"]).stdout)
    assert len(data["runs"]) == sum(1 for line in lines[:last_row] if line.lstrip().startswith("|") and "±" in line)
    assert any("lacks its closing `|`" in note for note in data["notes"])


def test_an_nsys_stats_file_cut_before_any_rows_is_refused_not_zero_kernels(tmp_path):
    text = (FOUND / "nsys2026.3_stats_console_vector_add_16m_launches.txt").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    rule = next(i for i, line in enumerate(lines) if line.lstrip().startswith("--------"))  # under the first table's header
    damaged = tmp_path / "cut.txt"
    damaged.write_text("".join(lines[: rule + 1]) + lines[rule + 1][:12], encoding="utf-8")
    result = CliRunner().invoke(app, ["analyze", str(damaged)])
    assert result.exit_code == 1 and "cut short" in result.stderr, result.output


@pytest.mark.parametrize("cut_at", ["n_accep", "n_predi", "draft acceptance rat", "0.00.064.609 I llama_perf_context_pr"])
def test_a_cut_inside_the_first_word_of_a_line_is_noted(tmp_path, cut_at):
    # The campaign of issue 32 (seed 31) cut `n_accept  = 44` to `n_accep`: no word of the data line was left whole.
    source = FOUND / "llama_speculative_issue10594_metal_summary.txt"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    text = source.read_text(encoding="utf-8")
    damaged = tmp_path / "cut.txt"
    damaged.write_text(text[: text.index("\nn_accept") + 1] + cut_at, encoding="utf-8")
    result = CliRunner().invoke(app, ["analyze", str(damaged), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert any("cut short" in note for note in json.loads(result.stdout)["notes"])


def test_an_nvprof_output_cut_inside_its_device_line_is_noted(tmp_path):
    # `Device "GeForce 840M (0)"` cut to `Device "GeFo` (no digit left) names the GPU of every table after it.
    source = FOUND / "nvprof_cuda10.1_geforce840m_unified_memory_demand_paging.txt"
    text = source.read_text(encoding="utf-8")
    damaged = tmp_path / "cut.txt"
    damaged.write_text(text[: text.index('\nDevice "GeForce') + 1] + 'Device "GeFo', encoding="utf-8")
    result = CliRunner().invoke(app, ["analyze", str(damaged), "--format", "json"])
    if result.exit_code == 1:  # nothing before the cut could be read: one line
        assert result.stderr.strip().startswith("Error: ") and len(result.stderr.strip().splitlines()) == 1
        return
    assert result.exit_code == 0, result.output
    assert any("cut short" in note for note in json.loads(result.stdout)["notes"])
