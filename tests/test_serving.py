"""Serving benchmark results: every real file reads the numbers it holds, the console block and the JSON of one run
read the same, and the TPOT floor holds against a hand calculation (Llama-2-7B fp16 on an H100, 64 sequences)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app, run_analysis
from traceview.parsers import detect_format, load_trace

JSON_RUNS = ["vllm0.5.2dev_benchmark_serving_llama2-7b_h100-64gb_maxseqs64_2000req_ferran.json",
             "vllm0.5.2dev_benchmark_serving_opt-2.7b_h100-64gb_maxseqs128_2000req_ferran.json"]
CONSOLE = "vllm0.5.2dev_benchmark_serving_console_llama2-7b_h100-64gb_maxseqs64_ferran.log"
# The JSON keys and the columns they are read into.
KEYS = {"completed": "completed", "duration": "duration_s", "total_input_tokens": "total_input_tokens", "total_output_tokens": "total_output_tokens",
        "request_throughput": "request_throughput_per_s", "output_throughput": "output_tokens_per_s", "median_ttft_ms": "median_ttft_ms",
        "p99_ttft_ms": "p99_ttft_ms", "mean_tpot_ms": "mean_tpot_ms", "median_tpot_ms": "median_tpot_ms", "p99_tpot_ms": "p99_tpot_ms",
        "median_itl_ms": "median_itl_ms", "p99_itl_ms": "p99_itl_ms"}


@pytest.mark.parametrize("name", JSON_RUNS)
def test_a_result_json_reads_every_number_it_holds(realdata_file, name):
    path = realdata_file(f"serving_bench/{name}")
    assert detect_format(path) == "serving-bench-json"
    row = load_trace(path).data.row(0, named=True)
    raw = json.loads(path.read_text())
    for key, column in KEYS.items():
        assert row[column] == pytest.approx(raw[key]), key
    assert row["request_rate_per_s"] is None  # "inf": every request at once


def test_the_console_block_reads_as_the_json_of_the_same_run(realdata_file):
    console = load_trace(realdata_file(f"serving_bench/{CONSOLE}")).data.row(0, named=True)
    saved = load_trace(realdata_file(f"serving_bench/{JSON_RUNS[0]}")).data.row(0, named=True)
    for column in KEYS.values():
        # The console rounds to two decimals.
        assert console[column] == pytest.approx(saved[column], abs=0.006), column
    assert console["max_num_seqs"] == 64 and console["model"].endswith("llama-2-7b")


def test_the_floor_holds_against_a_hand_calculation(realdata_file):
    analysis = run_analysis(realdata_file(f"serving_bench/{CONSOLE}"), "h100-sxm")
    result = analysis.detail.results[0]
    weights = 6.74e9 * 2  # Llama-2-7B, fp16
    kv_per_token = 32 * 32 * 128 * 2 * 2  # layers × KV heads × head dim × (K, V) × 2 bytes = 512 KiB
    context = (500_000 + 262_000 / 2) / 2000  # mean prompt + half the output, per request
    step = weights + 64 * context * kv_per_token
    floor_ms = 1000 * step / 3.35e12
    assert result["concurrency"] == 64 and result["bytes_per_step"] == pytest.approx(step)
    assert result["tpot_floor_ms"] == pytest.approx(floor_ms) and floor_ms == pytest.approx(7.18, abs=0.01)
    assert result["mbu_median_pct"] == pytest.approx(100 * floor_ms / 21.11)
    rules = {f["rule"] for f in analysis.detail.findings}
    assert {"queueing_or_prefill", "low_bandwidth_use"} <= rules


def test_without_a_stated_concurrency_littles_law_estimates_it(realdata_file):
    analysis = run_analysis(realdata_file(f"serving_bench/{JSON_RUNS[0]}"), "h100-sxm")
    result = analysis.detail.results[0]
    assert result["concurrency"] == pytest.approx(2912.37058353858 * 21.107237722473936 / 1000)
    assert result["concurrency_source"].startswith("Little's law")


def test_jsonl_results_and_the_options(realdata_file, tmp_path):
    raw = realdata_file(f"serving_bench/{JSON_RUNS[0]}").read_text()
    second = json.loads(raw) | {"max_concurrency": 32, "median_tpot_ms": 15.0}
    lines = tmp_path / "results.jsonl"
    lines.write_text(raw + "\n" + json.dumps(second) + "\n")
    result = CliRunner().invoke(app, ["analyze", str(lines), "--format", "json", "--gpu", "h100-sxm", "--weights", "3.9GB",
                                      "--kv-bytes-per-token", "128KiB"])
    assert result.exit_code == 0, result.stderr
    serving = json.loads(result.stdout)["serving"]["results"]
    assert [r["concurrency"] for r in serving][1] == 32
    assert serving[1]["bytes_per_step"] == pytest.approx(3.9e9 + 32 * 315.5 * 128 * 1024)
    misuse = CliRunner().invoke(app, ["analyze", str(realdata_file("kineto/EDGE_a100pcie_x8_no_gpu_activity_events_zoology.json")),
                                      "--kv-bytes-per-token", "1KiB"])
    assert misuse.exit_code == 1 and "applies to serving benchmark results" in misuse.stderr


def test_a_console_block_cut_before_its_numbers_gets_one_line(tmp_path):
    cut = tmp_path / "cut.log"
    cut.write_text("============ Serving Benchmark Result ============\n")
    result = CliRunner().invoke(app, ["analyze", str(cut)])
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1 and "no metric lines" in result.stderr
