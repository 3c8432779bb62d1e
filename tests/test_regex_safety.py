"""No regular expression in the package backtracks super-linearly (issue 32: a 1 MB name hung the nsys stats reader,
6,000 digits took --weights 7.6 s), and no text input with a 1 MB damaged line hangs: both run as subprocesses under
a wall-clock guard, so a hang fails the test instead of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FOUND = TESTS / "fixtures" / "found"


def test_no_pattern_backtracks_on_long_adversarial_lines():
    # 30,000 characters: the plainest quadratic pattern (`\s*x` searched in spaces) takes 2.3 s there, over the limit,
    # and the audit of every pattern 50 s instead of 165 s at 100,000 (CI runs on two cores within 20 minutes).
    try:
        result = subprocess.run([sys.executable, str(TESTS / "regex_audit.py"), "--chars", "30000", "--limit", "1.0"],
                                capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as expired:
        stderr = expired.stderr.decode() if isinstance(expired.stderr, bytes) else (expired.stderr or "")
        pytest.fail(f"the audit hung on {stderr.strip().splitlines()[-1] if stderr.strip() else 'its first pattern'}")
    assert result.returncode == 0, f"slow patterns:\n{result.stdout}"


# One file of each text format: its first data line gets a 1 MB tail of the piece that drove each found hang.
TEXT_INPUTS = [
    "nsys2025.3_cuda_gpu_sum_nsys_easy_add.txt",
    "nsys2026.3_stats_console_vector_add_16m_launches.txt",
    "nvprof_new_layout_vectoradd_streams_pinned.txt",
    "nvprof_metrics_gtx1070_particle_filter_dram_throughput_999_invocations.txt",
    "ncu2025_console_rtx4090_cublas_sgemm_full_set.txt",
    "ncu2025_console_summary_per_kernel_thor_excerpt.txt",
    "llama_bench_vulkan_depth_sweep.md",
    "llama_completion_b8925_common_perf_print.txt",
    "llama_speculative_issue10594_metal_summary.txt",
    "tegrastats_orin_nano_jetson_clocks_nonroot.log",
]


@pytest.mark.parametrize("name", TEXT_INPUTS)
@pytest.mark.parametrize("piece", ["1", " ", "a", "1.", "\t"])
def test_a_one_megabyte_line_in_a_text_input_neither_hangs_nor_crashes(tmp_path, name, piece):
    lines = (FOUND / name).read_text(encoding="utf-8").splitlines(keepends=True)
    middle = len(lines) // 2
    damaged = tmp_path / name
    damaged.write_text("".join(lines[:middle]) + lines[middle].rstrip("\n") + piece * (1_000_000 // len(piece)) + "\n"
                       + "".join(lines[middle + 1:]), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "traceview", "analyze", str(damaged), "--format", "json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("name", TEXT_INPUTS[:4])
def test_a_text_input_ending_in_a_megabyte_of_digits_without_a_newline_does_not_hang(tmp_path, name):
    # The cut-short check reads the last line: 60 kB of digits there hung the nsys stats check.
    damaged = tmp_path / name
    damaged.write_text((FOUND / name).read_text(encoding="utf-8") + "1" * 1_000_000, encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "traceview", "analyze", str(damaged), "--format", "json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
