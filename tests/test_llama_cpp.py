"""llama.cpp outputs: every real file parses, numbers match the files, MBU is right, the three bench forms agree."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.analyzer.analysis import Source, analyze_llama
from traceview.app.cli import app
from traceview.parsers import TraceFormat, detect_format, load_trace
from traceview.parsers.schema import LLAMA_RUNS

FILES = {
    "llama_bench_md_readme_ngl_sweep_and_o_md.txt": (TraceFormat.LLAMA_BENCH_MD, 18),
    "llama_bench_md_rtx3090ti_nkvo_pr4812.txt": (TraceFormat.LLAMA_BENCH_MD, 4),
    "llama_bench_readme_rtx3090ti_i9-13900k.csv": (TraceFormat.LLAMA_BENCH_CSV, 2),
    "timings_new_cpu_orangepi3b_i5-13400f_issue34.txt": (TraceFormat.LLAMA_TIMINGS, 4),
    "timings_old_m2ultra_metal_gpu_offload_issue8263.txt": (TraceFormat.LLAMA_TIMINGS, 1),  # the empty prompt eval is no measurement
    "timings_server_rtx3060_issue12237.txt": (TraceFormat.LLAMA_TIMINGS, 2),
    "timings_veryold_rtx3070ti_issue1786.txt": (TraceFormat.LLAMA_TIMINGS, 2),
}


def analysis_of(path, **kwargs):
    trace = load_trace(path)
    return analyze_llama(trace.data, Source(str(path), trace.format, "", 0), **kwargs)


def rows(path):
    return list(load_trace(path).data.iter_rows(named=True))


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_file_parses(realdata_file, name):
    path = realdata_file(f"llama_cpp/{name}")
    fmt, count = FILES[name]
    assert detect_format(path) == fmt
    runs = load_trace(path).data
    assert dict(runs.schema) == dict(LLAMA_RUNS)
    assert runs.height == count
    result = CliRunner().invoke(app, ["analyze", str(path), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    assert len(json.loads(result.stdout)["runs"]) == count


def test_rtx3090ti_bench_markdown(realdata_file):
    path = realdata_file("llama_cpp/llama_bench_md_rtx3090ti_nkvo_pr4812.txt")
    decode = rows(path)[1]
    assert (decode["model"], decode["test"], decode["phase"]) == ("llama 7B Q4_0", "tg128", "decode")
    assert decode["tokens_per_s"] == 127.43 and decode["tokens_per_s_stddev"] == 0.18
    assert decode["model_size_bytes"] == pytest.approx(3.56 * 2**30)
    assert decode["model_params"] == pytest.approx(6.74e9)
    assert decode["device_name"] == "NVIDIA GeForce RTX 3090 Ti" and decode["compute_capability"] == "8.6"
    assert decode["build"] == "32d9f7d9 (1786)" and decode["options"] == "nkvo=0"
    run = analysis_of(path).llm.runs.row(1, named=True)
    # 127.43 t/s × 3.56 GiB ≈ 487 GB/s, about 48 % of the card's 1,008 GB/s.
    assert run["bandwidth_bytes_per_s"] == pytest.approx(487e9, rel=0.005)
    assert run["mbu_pct"] == pytest.approx(48.3, abs=0.1)
    assert run["device_bandwidth_bytes_per_s"] == 1008e9
    nkvo = analysis_of(path).llm.runs.row(3, named=True)
    assert "nkvo=1" in nkvo["note"]
    prefill = analysis_of(path).llm.runs.row(0, named=True)
    assert prefill["achieved_flop_per_s"] == pytest.approx(2 * 6.74e9 * 4035.47)
    assert prefill["compute_pct"] == pytest.approx(100 * 2 * 6.74e9 * 4035.47 / 80e12)


def test_readme_csv_with_the_extra_field(realdata_file):
    pp, tg = rows(realdata_file("llama_cpp/llama_bench_readme_rtx3090ti_i9-13900k.csv"))
    assert (pp["test"], pp["tokens_per_s"], pp["tokens_per_s_stddev"]) == ("pp512", 2413.341687, 8.305961)
    assert (tg["test"], tg["tokens_per_s"]) == ("tg128", 132.052051)
    assert tg["model_size_bytes"] == 3825065984 and tg["model_params"] == 6738415616
    assert tg["n_gpu_layers"] == 99 and tg["backend"] == "CUDA"
    assert tg["device_name"] == "NVIDIA GeForce RTX 3090 Ti" and tg["cpu_info"] == "13th Gen Intel(R) Core(TM) i9-13900K"
    assert tg["build"] == "3469684 (1275)"


def test_ngl_sweep_is_partial_offload_until_the_end(realdata_file):
    path = realdata_file("llama_cpp/llama_bench_md_readme_ngl_sweep_and_o_md.txt")
    analysis = analysis_of(path, gpu="rtx3090ti")
    runs = analysis.llm.runs
    decode = runs.filter(runs["phase"] == "decode")
    assert decode["n_gpu_layers"].to_list() == [10, 20, 30, 31, 32, 33, 34, 35, 99]
    assert decode["tokens_per_s"].to_list() == [13.45, 21.36, 40.04, 48.19, 54.78, 60.62, 71.76, 131.66, 131.42]
    assert decode["offload"].to_list() == ["partial"] * 7 + ["full", "full"]
    assert decode.filter(decode["offload"] == "partial")["mbu_pct"].null_count() == 7  # host memory bounds those
    assert decode["mbu_pct"][-1] == pytest.approx(100 * 131.42 * 3.56 * 2**30 / 1008e9)
    ngl = next(f for f in analysis.llm.findings if f["kind"] == "ngl_scaling")
    assert "13.4 tokens/s at ngl 10" in ngl["message"] and "131.7 at ngl 35" in ngl["message"]


def test_timing_lines(realdata_file):
    server = rows(realdata_file("llama_cpp/timings_server_rtx3060_issue12237.txt"))
    assert [(r["phase"], r["n_prompt"] or r["n_gen"]) for r in server] == [("prefill", 971), ("decode", 19)]
    assert server[1]["tokens_per_s"] == pytest.approx(19 / 1.07576)
    veryold = rows(realdata_file("llama_cpp/timings_veryold_rtx3070ti_issue1786.txt"))
    assert veryold[1]["tokens_per_s"] == pytest.approx(64 / 15.89638)  # no t/s printed: computed
    old = rows(realdata_file("llama_cpp/timings_old_m2ultra_metal_gpu_offload_issue8263.txt"))
    assert [(r["phase"], r["n_gen"]) for r in old] == [("decode", 128)]
    new = rows(realdata_file("llama_cpp/timings_new_cpu_orangepi3b_i5-13400f_issue34.txt"))
    assert [r["run"] for r in new] == [0, 0, 1, 1]
    assert new[3]["tokens_per_s"] == pytest.approx(57.04, abs=0.01)


def test_weights_and_bandwidth_for_timings(realdata_file):
    path = realdata_file("llama_cpp/timings_new_cpu_orangepi3b_i5-13400f_issue34.txt")
    analysis = analysis_of(path, bandwidth_bytes_per_s=89.6e9, weight_bytes=0.81e9)
    decode = analysis.llm.runs.filter(analysis.llm.runs["phase"] == "decode").row(1, named=True)
    assert decode["bytes_per_token"] == 0.81e9
    assert decode["mbu_pct"] == pytest.approx(100 * 57.0428 * 0.81e9 / 89.6e9, rel=1e-3)
    # The bandwidth was given: the device line says MBU is measured against it, not that it should be passed.
    assert analysis.device.how_identified == "the output names no device; MBU against --bandwidth"
    assert analysis_of(path).device.how_identified == "the output names no device; use --gpu NAME or --bandwidth for MBU"


def _three_forms(tmp_path, csv_path):
    """Write the md and json forms of the real CSV run, as llama-bench would print them."""
    with open(csv_path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        records = [dict(zip(header, row[:6] + row[7:], strict=True)) for row in reader]
    json_path = tmp_path / "bench.json"
    json_path.write_text(json.dumps([{**r, "samples_ts": [float(r["avg_ts"])]} for r in records], indent=2))
    md_path = tmp_path / "bench.md"
    lines = ["| model | size | params | backend | ngl | test | t/s |", "| --- | ---: | ---: | --- | --: | --- | ---: |"]
    for r in records:
        test = f"pp {r['n_prompt']}" if r["n_prompt"] != "0" else f"tg {r['n_gen']}"
        lines.append(f"| {r['model_type']} | {int(r['model_size']) / 2**30:.2f} GiB | {int(r['model_n_params']) / 1e9:.2f} B | CUDA | "
                     f"{r['n_gpu_layers']} | {test} | {float(r['avg_ts']):.2f} ± {float(r['stddev_ts']):.2f} |")
    md_path.write_text(f"  Device 0: {records[0]['gpu_info']}, compute capability 8.6, VMM: yes\n" + "\n".join(lines) + "\n")
    # -o jsonl: the same objects as -o json, one per line (llama-bench's README).
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps({**r, "samples_ts": [float(r["avg_ts"])]}) + "\n" for r in records))
    # -o sql as llama-bench's sql_printer writes it (every value quoted), and the database it is piped into.
    fields = list(records[0])
    sql = ("CREATE TABLE IF NOT EXISTS llama_bench (\n" + ",\n".join(f"  {f} TEXT" for f in fields) + "\n);\n\n"
           + "".join(f"INSERT INTO llama_bench ({', '.join(fields)}) VALUES ({', '.join(repr(str(r[f])) for f in fields)});\n" for r in records))
    (tmp_path / "bench.sql").write_text(sql)
    with sqlite3.connect(tmp_path / "bench.sqlite") as database:
        database.executescript(sql)
    return md_path, json_path


def test_the_bench_forms_of_one_run_agree(tmp_path, realdata_file):
    csv_path = realdata_file("llama_cpp/llama_bench_readme_rtx3090ti_i9-13900k.csv")
    md_path, json_path = _three_forms(tmp_path, csv_path)
    assert detect_format(json_path) == TraceFormat.LLAMA_BENCH_JSON
    jsonl_path, sql_path, sqlite_path = (tmp_path / name for name in ("bench.jsonl", "bench.sql", "bench.sqlite"))
    assert detect_format(jsonl_path) == TraceFormat.LLAMA_BENCH_JSONL
    assert detect_format(sql_path) == TraceFormat.LLAMA_BENCH_SQL
    assert detect_format(sqlite_path) == TraceFormat.LLAMA_BENCH_SQLITE
    results = [analysis_of(p).llm.runs for p in (csv_path, md_path, json_path, jsonl_path, sql_path, sqlite_path)]
    for runs in results:
        assert runs["test"].to_list() == ["pp512", "tg128"]
        assert runs["device"].to_list() == ["GeForce RTX 3090 Ti"] * 2
    reference = results[0]
    for runs in results[1:]:  # the md form rounds to 2 decimals (GiB, t/s), hence 0.5 %
        assert runs["tokens_per_s"].to_list() == pytest.approx(reference["tokens_per_s"].to_list(), rel=0.005)
        for column in ("bytes_per_token", "bandwidth_bytes_per_s", "mbu_pct"):
            assert runs[column][1] == pytest.approx(reference[column][1], rel=0.005)
    assert reference["mbu_pct"][1] == pytest.approx(100 * 132.052051 * 3825065984 / 1008e9)


def test_size_scaling_says_bandwidth_bound(tmp_path):
    path = tmp_path / "q8_q4.md"
    path.write_text(
        "| model | size | params | backend | ngl | test | t/s |\n| --- | ---: | ---: | --- | --: | --- | ---: |\n"
        "| llama 8B Q8_0 | 7.95 GiB | 8.03 B | CUDA | 99 | tg128 | 60.00 ± 0.10 |\n"
        "| llama 8B Q4_K_M | 4.58 GiB | 8.03 B | CUDA | 99 | tg128 | 101.00 ± 0.20 |\n"
    )
    finding = next(f for f in analysis_of(path, gpu="rtx4090").llm.findings if f["kind"] == "size_scaling")
    assert finding["bandwidth_bound"] is True
    assert finding["evidence"]["byte_ratio"] == pytest.approx(7.95 / 4.58)


def test_mbu_above_100_is_flagged(tmp_path):
    path = tmp_path / "fast.md"
    path.write_text("| model | size | params | backend | ngl | test | t/s |\n|---|---:|---:|---|--:|---|---:|\n"
                    "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | tg 128 | 400.00 ± 1.00 |\n")
    run = analysis_of(path, gpu="rtx3090").llm.runs.row(0, named=True)
    assert run["mbu_pct"] > 100 and "above 100%" in run["note"]


def test_decode_far_below_the_bandwidth_roof_says_where_to_look(realdata_file, tmp_path):
    # The oldest timing lines (an RTX 3070 Ti, llama.cpp issue #1786): 248 ms a token for a 3.8 GB model is 15 GB/s,
    # 2.5% of the card's 608 GB/s, and the output does not say how many layers were offloaded.
    path = realdata_file("llama_cpp/timings_veryold_rtx3070ti_issue1786.txt")
    decode = analysis_of(path, gpu="rtx3070ti", weight_bytes=3.8e9).llm.runs.filter(phase="decode").row(0, named=True)
    assert decode["offload"] == "unknown" and decode["mbu_pct"] == pytest.approx(100 * 64 / 15.89638 * 3.8e9 / 608e9)
    assert "not read from the GPU's memory" in decode["note"] and "-ngl" in decode["note"]
    # Every layer on the GPU (ngl 99) and still 3.8% of the bandwidth: the time per token goes elsewhere.
    slow = tmp_path / "slow.md"
    slow.write_text("| model | size | params | backend | ngl | test | t/s |\n|---|---:|---:|---|--:|---|---:|\n"
                    "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | tg 128 | 10.00 ± 0.10 |\n")
    run = analysis_of(slow, gpu="rtx3090").llm.runs.row(0, named=True)
    assert run["mbu_pct"] < 10 and "every layer on the GPU" in run["note"] and "nsys" in run["note"]
    # On ROCm Nsight Systems sees nothing: the note names the backend's own profiler (two RX 7900 XTX with -sm none, a
    # tg128 of 11.28 tokens/s for 4.58 GiB reported in a llama.cpp issue; the card's 960 GB/s given with --bandwidth).
    rocm = tmp_path / "rocm.md"
    rocm.write_text("| model | size | params | backend | ngl | sm | test | t/s |\n|---|---:|---:|---|--:|--:|---|---:|\n"
                    "| llama 8B Q4_K - Medium | 4.58 GiB | 8.03 B | ROCm | 99 | none | tg128 | 11.28 ± 0.00 |\n")
    run = analysis_of(rocm, bandwidth_bytes_per_s=960e9).llm.runs.row(0, named=True)
    assert run["mbu_pct"] < 10 and "ROCm backend's own profiler" in run["note"] and "nsys" not in run["note"]
    # Real runs at 22-81% of their roof get no such note.
    runs = analysis_of(FOUND / "llama_bench_rtx_pro_6000_power_limits_moe.md").llm.runs.filter(phase="decode")
    assert runs["mbu_pct"].drop_nulls().min() > 10
    assert not any("where decode reaches" in (note or "") or "GPU decode reaches" in (note or "") for note in runs["note"])


def test_broken_table_row_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.md"
    path.write_text("| model | size | params | backend | ngl | test | t/s |\n|---|---:|---:|---|--:|---|---:|\n| llama 7B | 3.56 GiB |\n")
    result = CliRunner().invoke(app, ["analyze", str(path)])
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and ":3:" in result.stderr


def test_european_locale_timing_lines_inside_a_full_log(realdata_file, tmp_path):
    """Timing lines with decimal commas, after a model-loader dump and generated text, beyond the first 64 KB."""
    import re

    real = realdata_file("llama_cpp/timings_new_cpu_orangepi3b_i5-13400f_issue34.txt").read_text()
    european = "\n".join(re.sub(r"(\d)\.(\d)", r"\1,\2", line) if " time =" in line else line for line in real.splitlines())
    loader = "llm_load_print_meta: model size       = 636,18 MiB (4,85 BPW)\nllm_load_print_meta: general.name     = Llama 3.2 1B Instruct\n"
    story = "The road ran 12,700 miles, and prompt eval time was not what anyone measured. " * 1200  # generated text
    path = tmp_path / "main.log"
    path.write_text(loader + story + "\n" + european + "\n")
    assert path.stat().st_size > 64 * 1024
    result = CliRunner().invoke(app, ["analyze", str(path), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    decode = [r for r in json.loads(result.stdout)["runs"] if r["phase"] == "decode"]
    assert [round(r["tokens_per_s"], 2) for r in decode] == [round(127 / 124.97360, 2), round(127 / 2.22640, 2)]
    assert decode[0]["model_size_bytes"] == pytest.approx(636.18 * 2**20)


def test_size_scaling_needs_one_model_fully_offloaded(tmp_path):
    """A 32B Q4_K_M and a 671B IQ1_S at 27 of 61 layers are not a quantization pair: no bandwidth verdict."""
    path = tmp_path / "two_models.md"
    path.write_text(
        "| model | size | params | backend | ngl | test | t/s |\n| --- | ---: | ---: | --- | --: | --- | ---: |\n"
        "| qwen2 32B Q4_K_M | 18.48 GiB | 32.76 B | CUDA | 99 | tg128 | 40.00 ± 0.10 |\n"
        "| deepseek2 671B IQ1_S - 1.5625 bpw | 130.60 GiB | 671.03 B | CUDA | 27 | tg128 | 3.10 ± 0.20 |\n"
    )
    finding = next(f for f in analysis_of(path, gpu="rtx4090").llm.findings if f["kind"] == "size_scaling")
    assert finding["bandwidth_bound"] is None and "different models" in finding["message"]


def test_diff_matches_whole_configurations_never_averages(realdata_file):
    """PR #4812's table has nkvo 0 and 1; the README CSV states no nkvo (llama-bench's default 0). tg128 must compare
    127.43 with 132.05 (+3.6%), not the mean of both nkvo rows, and the nkvo=1 rows stay unmatched and ungated."""
    before = realdata_file("llama_cpp/llama_bench_md_rtx3090ti_nkvo_pr4812.txt")
    after = realdata_file("llama_cpp/llama_bench_readme_rtx3090ti_i9-13900k.csv")
    result = CliRunner().invoke(app, ["diff", str(before), str(after), "-f", "json", "--fail-on-regression", "50"])
    assert result.exit_code == 0, result.stderr  # the -40% pp512 is within 50%; the vanished nkvo=1 rows never gate
    runs = json.loads(result.stdout)["runs"]
    tg = next(r for r in runs if r["test"] == "tg128" and r["status"] == "changed")
    assert (tg["tokens_per_s"], round(tg["tokens_per_s_after"], 2), round(tg["change_pct"], 1)) == (127.43, 132.05, 3.6)
    assert sorted((r["test"], r["status"]) for r in runs if r["status"] != "changed") == [("pp512", "vanished"), ("tg128", "vanished")]


def test_a_depth_sweep_reads_prefill_and_decode_at_each_context_depth():
    # llama-bench -d 0,4096,8192 -ngl -1 on Vulkan (tests/fixtures/found/PROVENANCE.md).
    path = Path(__file__).parent / "fixtures" / "found" / "llama_bench_vulkan_depth_sweep.md"
    runs = load_trace(path).data
    assert runs["n_depth"].to_list() == [0, 0, 4096, 4096, 8192, 8192]
    assert runs["phase"].to_list() == ["prefill", "decode"] * 3
    assert runs["test"].to_list()[2:4] == ["pp512@d4096", "tg128@d4096"]
    assert runs["n_gpu_layers"].unique().to_list() == [-1]  # llama.h: negative means every layer
    result = CliRunner().invoke(app, ["analyze", str(path), "--bandwidth", "640GB/s", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    decode = [run for run in data["runs"] if run["phase"] == "decode"]
    assert {run["offload"] for run in decode} == {"full"}
    assert decode[0]["mbu_pct"] == pytest.approx(100 * 15.07 * 13.34 * 2**30 / 640e9)
    assert "lower bound" in decode[2]["note"] and decode[0]["note"] is None
    depth = {f["evidence"]["phase"]: f for f in data["findings"] if f["kind"] == "depth_scaling"}
    assert depth["decode"]["evidence"] == {"table": 0, "phase": "decode", "depth": [0, 4096, 8192], "tokens_per_s": [15.07, 14.42, 13.81]}
    assert "-8%" in depth["decode"]["message"] and "-29%" in depth["prefill"]["message"]


def test_a_damaged_jsonl_line_is_one_clear_line(tmp_path):
    path = tmp_path / "bench.jsonl"
    path.write_text('{"model_type": "llama 7B", "n_prompt": 512, "n_gen": 0, "avg_ts": 100.0}\n{"model_type": "llama 7B", "avg_ts": \n')
    result = CliRunner().invoke(app, ["analyze", str(path)])
    assert result.exit_code == 1 and "bench.jsonl:2:" in result.stderr and "Traceback" not in result.stderr


FOUND = Path(__file__).parent / "fixtures" / "found"


def test_batched_bench_reads_prefill_and_decode_of_each_batch_size():
    # llama.cpp's batched-bench README sample (LLaMA 7B F16, tests/fixtures/found/PROVENANCE.md): 12 rows, B 1 to 32.
    path = FOUND / "llama_batched_bench_readme_llama7b_f16.md"
    assert detect_format(path) == TraceFormat.LLAMA_BATCHED_BENCH
    runs = load_trace(path).data
    assert runs.height == 24 and runs["phase"].to_list() == ["prefill", "decode"] * 12
    decode = runs.filter(runs["phase"] == "decode")
    assert decode["n_sequences"].to_list() == [1, 2, 4, 8, 16, 32] * 2
    assert decode["n_depth"].unique().to_list() == [128]  # each sequence decodes after its 128-token prompt
    assert decode["tokens_per_s"].to_list()[:6] == [41.57, 50.90, 74.44, 139.43, 242.23, 465.40]
    assert decode["duration_ms"].to_list()[0] == pytest.approx(3079.0)
    result = CliRunner().invoke(app, ["analyze", str(path), "--weights", "13.5GB", "--bandwidth", "1000GB/s", "-f", "json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    b32 = next(r for r in data["runs"] if r["test"] == "tg128@d128 B=32")
    # 32 sequences share each read of the 13.5 GB of weights.
    assert b32["bytes_per_token"] == pytest.approx(13.5e9 / 32)
    assert b32["mbu_pct"] == pytest.approx(100 * 465.40 * 13.5e9 / 32 / 1000e9)
    assert "32 sequences share each read" in b32["note"]
    [tg128, tg256] = [f for f in data["findings"] if f["kind"] == "batch_scaling"]
    assert tg128["evidence"]["sequences"] == [1, 2, 4, 8, 16, 32]
    assert tg128["memory_bound"] is False and "11.2× for 32×" in tg128["message"]
    assert not [f for f in data["findings"] if f["kind"] in ("depth_scaling", "size_scaling")]


def test_batched_bench_jsonl_and_its_log_lines(tmp_path):
    # `--output-format jsonl` as the README shows it, among the loader's log lines (`Device 0:` names the GPU).
    path = tmp_path / "batched.jsonl"
    path.write_text(
        "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes\n"
        '{"n_kv_max": 2048, "n_batch": 2048, "n_ubatch": 512, "flash_attn": 0, "is_pp_shared": 0, "n_gpu_layers": 99, "n_threads": 8, '
        '"n_threads_batch": 8, "pp": 128, "tg": 128, "pl": 1, "n_kv": 256, "t_pp": 0.233810, "speed_pp": 547.453064, "t_tg": 3.503684, '
        '"speed_tg": 36.532974, "t": 3.737494, "speed": 68.495094}\n'
        '{"n_kv_max": 2048, "n_batch": 2048, "n_ubatch": 512, "flash_attn": 0, "is_pp_shared": 0, "n_gpu_layers": 99, "n_threads": 8, '
        '"n_threads_batch": 8, "pp": 128, "tg": 128, "pl": 2, "n_kv": 512, "t_pp": 0.422602, "speed_pp": 605.770935, "t_tg": 11.106112, '
        '"speed_tg": 23.050371, "t": 11.528713, "speed": 44.410854}\n'
        "llama_perf_context_print:        load time =    1000.00 ms\n")
    assert detect_format(path) == TraceFormat.LLAMA_BATCHED_BENCH_JSONL
    runs = load_trace(path).data
    assert runs["test"].to_list() == ["pp128 B=1", "tg128@d128 B=1", "pp128 B=2", "tg128@d128 B=2"]
    assert runs["tokens_per_s"].to_list() == [547.453064, 36.532974, 605.770935, 23.050371]
    assert runs["device_name"].unique().to_list() == ["NVIDIA GeForce RTX 4090"] and runs["n_gpu_layers"].unique().to_list() == [99]


def test_a_batched_bench_log_is_not_read_as_its_timing_lines(tmp_path):
    # batched-bench prints llama_perf_context_print after its table; the table is the measurement.
    table = (FOUND / "llama_batched_bench_readme_llama7b_f16.md").read_text().split("## Sample results")[1]
    path = tmp_path / "batched.log"
    path.write_text("main: n_kv_max = 16384, n_batch = 2048, n_ubatch = 512, flash_attn = 0, is_pp_shared = 1, n_gpu_layers = 99, "
                    "n_threads = 8, n_threads_batch = 8\n" + table +
                    "\nllama_perf_context_print:        load time =    2019.19 ms\n"
                    "llama_perf_context_print: prompt eval time =  103224.39 ms / 57984 tokens (    1.78 ms per token,   561.72 tokens per second)\n"
                    "llama_perf_context_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token,      inf tokens per second)\n")
    assert detect_format(path) == TraceFormat.LLAMA_BATCHED_BENCH
    runs = load_trace(path).data
    prefill = runs.filter(runs["phase"] == "prefill")
    assert prefill["n_sequences"].unique().to_list() == [1]  # is_pp_shared = 1: one prompt serves every sequence
    assert "is_pp_shared=1" in runs["options"][0]


@pytest.mark.parametrize(("name", "tables", "rows_per_table"), [
    ("ik_llama_sweep_bench_readme.md", 1, 17), ("ik_llama_pr518_sweep_bench_two_tables.md", 2, 5)])
def test_sweep_bench_reads_each_row_at_its_depth(name, tables, rows_per_table):
    # ik_llama.cpp's llama-sweep-bench: one sequence, PP and TG measured at depth N_KV (PROVENANCE.md).
    path = FOUND / name
    assert detect_format(path) == TraceFormat.LLAMA_SWEEP_BENCH
    runs = load_trace(path).data
    assert runs.height == 2 * tables * rows_per_table
    assert runs["table"].unique().sort().to_list() == list(range(tables))
    assert runs["n_sequences"].unique().to_list() == [1]
    first = runs.filter(runs["table"] == 0)
    assert first["n_depth"].to_list() == [depth for depth in range(0, 512 * rows_per_table, 512) for _ in (0, 1)]
    data = json.loads(CliRunner().invoke(app, ["analyze", str(path), "-f", "json"]).stdout)
    decode = [f for f in data["findings"] if f["kind"] == "depth_scaling" and f["evidence"]["phase"] == "decode"]
    assert [f["evidence"]["table"] for f in decode] == list(range(tables))
    if name == "ik_llama_sweep_bench_readme.md":
        assert decode[0]["evidence"]["tokens_per_s"][0] == 55.38 and decode[0]["evidence"]["tokens_per_s"][-1] == 33.21
    else:  # the PR's build against mainline llama.cpp: prefill 295.36 against 28.04 tokens/s at depth 0
        prefill = runs.filter((runs["phase"] == "prefill") & (runs["n_depth"] == 0))
        assert prefill["tokens_per_s"].to_list() == [295.36, 28.04]


def test_sweep_bench_jsonl_line_of_its_readme(tmp_path):
    line = next(x for x in (FOUND / "ik_llama_sweep_bench_readme.md").read_text().splitlines() if x.startswith('{"n_kv_max"'))
    path = tmp_path / "sweep.jsonl"
    path.write_text(line + "\n")
    assert detect_format(path) == TraceFormat.LLAMA_SWEEP_BENCH_JSONL
    runs = load_trace(path).data
    assert runs["test"].to_list() == ["pp512", "tg128"] and runs["tokens_per_s"].to_list() == [468.086884, 71.897514]
    assert runs["n_gpu_layers"].to_list() == [-1, -1]


def test_diff_matches_outputs_that_name_no_model(realdata_file, tmp_path):
    # Timing lines, batched-bench and sweep-bench name no model: two runs of one such output are one configuration.
    for source, old, new in ((FOUND / "llama_batched_bench_readme_llama7b_f16.md", "|    41.57 |", "|    45.00 |"),
                             (realdata_file("llama_cpp/timings_server_rtx3060_issue12237.txt"), None, None)):
        text = source.read_text()
        after = tmp_path / f"after_{source.name}"
        after.write_text(text.replace(old, new) if old else text)
        result = CliRunner().invoke(app, ["diff", str(source), str(after), "-f", "json"])
        assert result.exit_code == 0, result.stderr
        runs = json.loads(result.stdout)["runs"]
        assert runs and {r["status"] for r in runs} == {"changed"}
        if old:
            changed = next(r for r in runs if r["test"] == "tg128@d128 B=1")
            assert changed["change_pct"] == pytest.approx(100 * (45.00 / 41.57 - 1))


def test_a_named_gpu_the_table_lacks_is_said_so_not_called_unnamed(realdata_file, tmp_path):
    # The real README CSV with its gpu_info rewritten to a card the table does not hold.
    text = realdata_file("llama_cpp/llama_bench_readme_rtx3090ti_i9-13900k.csv").read_text()
    path = tmp_path / "bench.csv"
    path.write_text(text.replace("RTX 3090 Ti", "RTX 4070 SUPER"))
    decode = analysis_of(path).llm.runs.filter(phase="decode").row(0, named=True)
    assert decode["mbu_pct"] is None and decode["bandwidth_bytes_per_s"] == pytest.approx(132.052051 * 3825065984)
    assert decode["note"] == "NVIDIA GeForce RTX 4070 SUPER is not in the GPU table: pass --gpu NAME or --bandwidth to get MBU"


def test_several_gpus_of_one_kind_bound_decode_by_how_the_model_is_split(realdata_file, tmp_path):
    # The real markdown capture with a second GPU's loader line, as ggml_cuda_init prints it on a two-card machine.
    text = realdata_file("llama_cpp/llama_bench_md_rtx3090ti_nkvo_pr4812.txt").read_text()
    device_line = text.splitlines()[0]
    two = tmp_path / "two.md"
    two.write_text(text.replace(device_line, f"{device_line}\n{device_line.replace('Device 0', 'Device 1')}", 1))
    assert rows(two)[1]["device_name"] == "NVIDIA GeForce RTX 3090 Ti, NVIDIA GeForce RTX 3090 Ti"
    analysis = analysis_of(two)
    assert analysis.device.spec.key == "rtx3090ti" and "2 GPUs" in analysis.device.how_identified
    prefill, decode = analysis.llm.runs.row(0, named=True), analysis.llm.runs.row(1, named=True)
    # Layer split (the default): the token passes through the cards one after another; one card's 1,008 GB/s bounds it.
    assert decode["device_bandwidth_bytes_per_s"] == 1008e9 and decode["mbu_pct"] == pytest.approx(48.3, abs=0.1)
    assert "2 GPUs, layer split" in decode["note"]
    assert prefill["compute_pct"] is None and "2 GPUs: no compute share" in prefill["note"]
    # Row split: every card reads its share of each layer at once; their bandwidths add up.
    row_split = tmp_path / "row.csv"
    csv_text = realdata_file("llama_cpp/llama_bench_readme_rtx3090ti_i9-13900k.csv").read_text()
    csv_text = csv_text.replace('"NVIDIA GeForce RTX 3090 Ti"', '"NVIDIA GeForce RTX 3090 Ti, NVIDIA GeForce RTX 3090 Ti"')
    row_split.write_text(csv_text.replace("test_time,", "split_mode,test_time,").replace(',"2023-09-23', ',"row","2023-09-23'))
    decode = analysis_of(row_split).llm.runs.filter(phase="decode").row(0, named=True)
    assert decode["device_bandwidth_bytes_per_s"] == 2 * 1008e9 and "row split" in decode["note"]
    # Two different cards: no single bandwidth to divide by.
    mixed = tmp_path / "mixed.csv"
    mixed.write_text(csv_text.replace("Ti, NVIDIA GeForce RTX 3090 Ti", "Ti, NVIDIA GeForce RTX 3060"))
    decode = analysis_of(mixed).llm.runs.filter(phase="decode").row(0, named=True)
    assert decode["mbu_pct"] is None and decode["note"].startswith("2 different GPUs")


# Vulkan's device list as ggml-vulkan prints it: a discrete card and the CPU's integrated graphics, quoted whole in a
# public test of whisper.cpp's Vulkan engine (search index id 70128888817), and a name with parentheses of its own.
VULKAN_TWO_DEVICES = """ggml_vulkan: Found 2 Vulkan devices:
ggml_vulkan: 0 = NVIDIA GeForce RTX 4070 SUPER (NVIDIA) | uma: 0 | fp16: 1 | bf16: 1 | fp4: 0 | warp size: 32 | shared memory: 49152 | int dot: 1 | matrix cores: NV_coopmat2
ggml_vulkan: 1 = AMD Ryzen 7 7800X3D 8-Core Processor (RADV RAPHAEL_MENDOCINO) (radv) | uma: 1 | fp16: dot2 | bf16: 0 | fp4: 0 | warp size: 32 | shared memory: 65536 | int dot: 1 | matrix cores: none
"""


@pytest.mark.parametrize(("log", "device"), [
    # ggml-vulkan uses the discrete GPUs when there are any: the integrated one is not a second device of the run.
    (VULKAN_TWO_DEVICES, "NVIDIA GeForce RTX 4070 SUPER"),
    ("ggml_vulkan: 0 = AMD Radeon(TM) Graphics (AMD proprietary driver) | uma: 1 | fp16: 1 | warp size: 32\n", "AMD Radeon(TM) Graphics"),
    ("ggml_vulkan: Using AMD Radeon RX 7900 XTX (RADV NAVI31) | uma: 0 | fp16: 1 | warp size: 64\n", "AMD Radeon RX 7900 XTX"),
    ("ggml_metal_init: GPU name:   Apple M2 Ultra\n", "Apple M2 Ultra"),
    ("ggml_metal_device_init: GPU name:   MTL0 (Apple M4 Max)\n", "Apple M4 Max"),
    ("ggml_vulkan: 0 = NVIDIA GeForce RTX 3090 (NVIDIA) | uma: 0 | fp16: 1 | warp size: 32 | matrix cores: NV_coopmat2\n", "NVIDIA GeForce RTX 3090"),
])
def test_vulkan_and_metal_device_lines_name_the_gpu(tmp_path, log, device):
    # The real Vulkan depth sweep (tests/fixtures/found) with the backend's device lines above it, as in a full log.
    path = tmp_path / "bench.md"
    path.write_text(log + (FOUND / "llama_bench_vulkan_depth_sweep.md").read_text())
    runs = analysis_of(path).llm.runs
    assert set(runs["device_name"]) == {device}
    decode = runs.filter(test="tg128").row(0, named=True)
    if device == "NVIDIA GeForce RTX 3090":
        # 15.07 t/s × 13.34 GiB = 216 GB/s of the card's 936 GB/s.
        assert decode["mbu_pct"] == pytest.approx(100 * 15.07 * 13.34 * 2**30 / 936e9, rel=1e-3)
    else:
        assert decode["mbu_pct"] is None and decode["note"].startswith(f"{device} is not in the GPU table")


def test_mixtures_of_experts_a_405b_and_an_rtx_pro_6000():
    # llama-bench on an RTX PRO 6000 Blackwell (tests/fixtures/found/PROVENANCE.md).
    runs = analysis_of(FOUND / "llama_bench_rtx_pro_6000_power_limits_moe.md").llm.runs
    decode = {(r["model"], r["table"]): r for r in runs.filter(phase="decode").iter_rows(named=True)}
    first = decode[("llama 7B Q4_0", 0)]
    # 278.95 t/s × 3.56 GiB against the card's 1,792 GB/s.
    assert first["device"] == "RTX PRO 6000 Blackwell" and first["mbu_pct"] == pytest.approx(100 * 278.95 * 3.56 * 2**30 / 1792e9)
    # `llama ?B` with 405.85 B parameters is the 405B, 126 layers: -ngl 116 leaves ten on the host.
    big = next(r for (model, _), r in decode.items() if model.startswith("llama ?B"))
    assert big["offload"] == "partial" and big["mbu_pct"] is None and "ngl 116 of 126 layers" in big["note"]
    # A mixture of experts reads only its active experts: 3B of 30.53B parameters by its name.
    qwen = next(r for (model, _), r in decode.items() if model.startswith("qwen3moe"))
    assert qwen["bytes_per_token"] == pytest.approx(17.28 * 2**30 * 3 / 30.53) and "mixture of experts" in qwen["note"]
    assert qwen["mbu_pct"] == pytest.approx(100 * 251.04 * 17.28 * 2**30 * 3 / 30.53 / 1792e9)
    # gpt-oss names no active count: no bytes/token is guessed (the whole 60 GiB would give 12 TB/s).
    oss = next(r for (model, _), r in decode.items() if model.startswith("gpt-oss"))
    assert oss["bytes_per_token"] is None and oss["mbu_pct"] is None and "--weights" in oss["note"]
    prefill = runs.filter(phase="prefill", model="qwen3moe 30B.A3B Q4_K - Medium").row(0, named=True)
    assert prefill["achieved_flop_per_s"] == pytest.approx(2 * 3e9 * 7432.36)


def test_a_one_token_prompt_is_a_decode_step():
    # A llama-bench prompt sweep quoted in an ik_llama.cpp discussion (tests/fixtures/found/PROVENANCE.md), every line
    # behind the `> ` of a blockquote: gpt-oss 120B on ROCm from pp1 to pp4096, then tg16. `pp1` is one forward pass of
    # one token, as a decode step is: it gets bandwidth and MBU, and matches tg16's (45.2 against 45.43 tokens/s).
    path = Path(__file__).parent / "fixtures" / "found" / "llama_bench_quoted_rocm_gpt_oss_pp_sweep.md"
    runs = rows(path)
    assert len(runs) == 26 and [r["phase"] for r in runs[:3]] == ["decode", "decode", "prefill"] and runs[-2]["phase"] == "decode"
    llm = analysis_of(path, weight_bytes=2.9e9, bandwidth_bytes_per_s=256e9).llm.runs
    pp1, tg16 = llm.row(0, named=True), llm.row(24, named=True)
    assert (pp1["test"], tg16["test"]) == ("pp1", "tg16") and pp1["mbu_pct"] == pytest.approx(tg16["mbu_pct"], rel=0.01)


def test_a_dgx_spark_is_named_by_its_device_line_and_gets_its_bandwidth():
    # llama-bench on a DGX Spark (tests/fixtures/found/PROVENANCE.md): `Device 0: NVIDIA GB10, compute capability 12.1,
    # VMM: yes, VRAM: 122572 MiB`, and a 235B mixture of experts with 22B active parameters by its name.
    runs = analysis_of(FOUND / "llama_bench_gb10_dgx_spark_qwen3moe_235b_q2k.txt").llm.runs
    decode = runs.filter(phase="decode").row(0, named=True)
    assert decode["device"] == "GB10 (DGX Spark)" and decode["test"] == "tg256"
    bytes_per_token = 79.80 * 2**30 * 22 / 235.09
    assert decode["bytes_per_token"] == pytest.approx(bytes_per_token)
    # 17.54 tokens/s × 8.0 GB against the 273 GB/s of its LPDDR5X: about half, as decode on unified memory goes.
    assert decode["mbu_pct"] == pytest.approx(100 * 17.54 * bytes_per_token / 273e9)


@pytest.mark.parametrize(("name", "expected"), [
    # 2026 builds print `common_perf_print:` where 2024-2025 printed `llama_perf_context_print:`.
    ("llama_completion_b8925_common_perf_print.txt", [("pp82", 95.38), ("tg21", 15.50)]),
    # llama.cpp's own `2.09.086.551 I ` timestamps behind a wrapper's `date [INFO] logger: [model] `, and the server's
    # `slot print_timing: id  0 | task 180 |` before each timing on the same line; progress lines are not timings.
    ("llama_server_2026_mtp_wrapped_log_timestamps.txt", [("pp299", 188.30), ("tg381", 17.85)]),
    # A logger's `date | ` before each line, the slot's header on a line of its own, two slots one after the other.
    ("llama_server_2026_mtp_two_slots_piped_log.txt", [("pp11756", 1371.48), ("tg40", 26.11), ("pp867", 472.70), ("tg565", 50.75),
                                                       ("pp561", 839.09), ("tg262", 53.90)]),
])
def test_2026_timing_lines_behind_any_log_decoration(name, expected):
    path = FOUND / name
    assert detect_format(path) == TraceFormat.LLAMA_TIMINGS
    runs = rows(path)
    assert [(r["test"], round(r["tokens_per_s"], 2)) for r in runs] == expected


def test_speculative_decoding_reads_the_weights_once_per_pass_not_per_token():
    # llama-server with multi-token prediction (tests/fixtures/found/PROVENANCE.md): each task's timings are followed by
    # `draft acceptance rate = 0.95570 (  302 accepted /   316 generated)`. Each forward pass verifies the drafts and
    # adds a token of its own, so 565 tokens with 302 accepted took 263 passes, each reading the weights once.
    path = FOUND / "llama_server_2026_mtp_two_slots_piped_log.txt"
    decode = analysis_of(path, weight_bytes=16e9, gpu="rtx5090").llm.runs.filter(phase="decode")
    second = decode.row(1, named=True)
    assert (second["draft_accepted"], second["draft_generated"], second["n_gen"]) == (302, 316, 565)
    assert second["bytes_per_token"] == pytest.approx(16e9 * 263 / 565)
    assert second["mbu_pct"] == pytest.approx(100 * 50.75 * 16e9 * 263 / 565 / 1792e9, rel=1e-3)
    assert "speculative decoding: 302 of 316 drafted tokens accepted" in second["note"]
    # The newer wording (`draft acceptance = … , mean len = …`) behind a wrapper's log prefix.
    wrapped = rows(FOUND / "llama_server_2026_mtp_wrapped_log_timestamps.txt")
    assert [(r["draft_accepted"], r["draft_generated"]) for r in wrapped if r["phase"] == "decode"] == [(181, 202)]
    # Runs without speculation keep one read of the weights per token.
    plain = analysis_of(FOUND / "llama_completion_b8925_common_perf_print.txt", weight_bytes=1e9).llm.runs.filter(phase="decode").row(0, named=True)
    assert plain["bytes_per_token"] == 1e9 and "speculative" not in (plain["note"] or "")


def test_experts_or_tensors_kept_in_host_memory_are_a_partial_offload(tmp_path):
    # `-ngl 99 -ncmoe 99` on a 6 GB RTX 3050 (the header and device lines of a llama-bench run posted in 2026, the row
    # written in the markdown printer's layout): every layer is "offloaded", yet the experts stay in host memory, so the
    # GPU's bandwidth does not bound decode and no GPU MBU is given.
    table = tmp_path / "ncmoe.md"
    table.write_text(
        "  Device 0: NVIDIA GeForce RTX 3050, compute capability 8.6, VMM: yes, VRAM: 5803 MiB\n"
        "| model                          |       size |     params | backend    | ngl | n_cpu_moe | n_ubatch | type_k | type_v | mmap |"
        "            test |                  t/s |\n"
        "| ------------------------------ | ---------: | ---------: | ---------- | --: | ---------: | -------: | -----: | -----: | ---: |"
        " --------------: | -------------------: |\n"
        "| qwen35moe 35B.A3B Q4_K - Medium |  20.62 GiB |    34.66 B | CUDA       |  99 |         99 |     1024 |   q4_0 |   q4_0 |    0 |"
        "           tg128 |         24.24 ± 1.31 |\n")
    decode = analysis_of(table, gpu="rtx3060").llm.runs.row(0, named=True)
    assert decode["offload"] == "partial" and decode["mbu_pct"] is None and decode["note"].startswith("n_cpu_moe 99:")
    # -o csv names the same settings by their fields: `tensor_buft_overrides` for -ot (llama-bench.cpp's get_fields).
    fields = ["model_type", "model_size", "model_n_params", "backends", "gpu_info", "n_gpu_layers", "n_cpu_moe", "tensor_buft_overrides",
              "n_prompt", "n_gen", "n_depth", "avg_ts", "stddev_ts"]
    values = ["gpt-oss 20B MXFP4 MoE", "12109565632", "20914757184", "CUDA", "NVIDIA GeForce RTX 3060", "999", "0", ".ffn_.*_exps.=CPU",
              "0", "128", "0", "25.0", "0.1"]
    (tmp_path / "ot.csv").write_text(",".join(fields) + "\n" + ",".join(f'"{v}"' for v in values) + "\n")
    decode = analysis_of(tmp_path / "ot.csv").llm.runs.row(0, named=True)
    assert decode["offload"] == "partial" and "-ot .ffn_.*_exps.=CPU)" in decode["note"]
    # The pattern alone is quoted, not the fields after it; an override to another GPU is no host memory.
    table.write_text(table.read_text().replace("| n_cpu_moe |", "| ot        |").replace("|         99 |", "|   exps=CPU |"))
    assert "(-ot exps=CPU)" in analysis_of(table).llm.runs.row(0, named=True)["note"]
    table.write_text(table.read_text().replace("|   exps=CPU |", "| exps=CUDA1 |"))
    assert analysis_of(table).llm.runs.row(0, named=True)["offload"] == "full"


def test_an_ot_pattern_holding_pipes_is_one_cell_and_a_partial_offload():
    # llama-bench prints `-ot` patterns unescaped (tests/fixtures/found/PROVENANCE.md): `blk\.([0-9]|10)\.…=ROCm0;…;
    # exps=CPU` splits each row into 19 cells under 15 columns. The surplus belongs to the one column that may hold `|`.
    path = FOUND / "llama_bench_rocm_4x_v620_ot_regex_with_pipes.md"
    runs = rows(path)
    assert [(r["test"], r["tokens_per_s"], r["n_gpu_layers"]) for r in runs] == [("pp512", 154.93, 42), ("tg128", 17.37, 42)]
    assert "ot=blk\\.([0-9]|10)\\.ffn_.*_exps\\.=ROCm0;" in runs[0]["options"] and runs[0]["options"].endswith("exps=CPU; mmap=0; nopo=1")
    # The experts that no card holds stay in host memory: a partial offload whatever the ngl.
    decode = analysis_of(path).llm.runs.filter(phase="decode").row(0, named=True)
    assert decode["offload"] == "partial" and "tensors kept in host memory" in decode["note"]
    # Four cards of one kind the table lacks are not "4 different GPUs".
    assert "4 different GPUs" not in decode["note"] and "4× AMD Radeon Pro V620, not in the GPU table" in decode["note"]


@pytest.mark.parametrize(("mangle", "encoding"), [
    (lambda text: text.replace("±", "Â±"), "utf-8"),  # UTF-8 shown as cp1252 in a Windows console, then copied
    (lambda text: text, "cp1252"),  # saved in the Windows code page: the ± byte is not UTF-8
    (lambda text: text.replace("±", "+/-"), "utf-8"),  # retyped
])
def test_a_mangled_plus_minus_still_separates_mean_and_stddev(realdata_file, tmp_path, mangle, encoding):
    original = realdata_file("llama_cpp/llama_bench_md_rtx3090ti_nkvo_pr4812.txt")
    copy = tmp_path / "bench.md"
    copy.write_bytes(mangle(original.read_text(encoding="utf-8")).encode(encoding))
    assert [(r["tokens_per_s"], r["tokens_per_s_stddev"]) for r in rows(copy)] == [
        (r["tokens_per_s"], r["tokens_per_s_stddev"]) for r in rows(original)]


def test_an_eval_that_generated_nothing_is_no_decode_row():
    # llama-embedding in llama.cpp's CI (tests/fixtures/found/PROVENANCE.md), behind `0.00.064.607 I ` timestamps:
    # `eval time = 0.00 ms / 1 runs (… inf tokens per second)` measured nothing, like an empty prompt eval.
    runs = rows(FOUND / "llama_embedding_ci_timestamped_zero_eval.txt")
    assert [(r["test"], r["phase"]) for r in runs] == [("pp9", "prefill")]
    assert runs[0]["tokens_per_s"] == pytest.approx(9 / 0.00371)


FOUND = Path(__file__).parent / "fixtures" / "found"
SPECULATIVE = FOUND / "llama_speculative_issue10594_metal_summary.txt"


def test_llama_speculative_reads_its_decode_speed_and_acceptance_not_the_targets_verification_as_prefill():
    # Issue 31: the target's `prompt eval` (163 tokens: the prompt and every verification batch) was the only row, a
    # "pp163 (prefill)", and the decode, printed as `decoded … speed:`, was not read at all.
    runs = rows(SPECULATIVE)
    assert [(r["test"], r["phase"]) for r in runs] == [("pp19", "prefill"), ("tg69", "decode")]
    prefill, decode = runs
    assert prefill["tokens_per_s"] == pytest.approx(102.365) and prefill["duration_ms"] == pytest.approx(186.0)
    assert decode["tokens_per_s"] == pytest.approx(26.848) and decode["n_gen"] == 69
    assert (decode["draft_accepted"], decode["draft_generated"]) == (44, 120)
    assert (decode["draft_eval_ms"], decode["draft_eval_tokens"]) == (pytest.approx(182.85), 96)
    assert (decode["verify_ms"], decode["verify_tokens"]) == (pytest.approx(2457.71), 163)
    assert "draft_max=5" in decode["options"]

    analysis = analysis_of(SPECULATIVE, bandwidth_bytes_per_s=800e9, weight_bytes=4.2e9)
    decode = next(r for r in analysis.llm.runs.iter_rows(named=True) if r["phase"] == "decode")
    # 69 tokens in 69 - 44 = 25 target passes: the weights are read 25 times, not 69.
    assert decode["bytes_per_token"] == pytest.approx(4.2e9 * 25 / 69)
    assert decode["mbu_pct"] == pytest.approx(100 * 26.848 * 4.2e9 * 25 / 69 / 800e9)
    assert "44 of 120 drafted tokens accepted (36.7%), 2.76 tokens a target pass" in decode["note"]


def test_speculative_numbers_are_never_inf_or_nan_and_drafting_off_is_an_ordinary_decode(tmp_path):
    text = SPECULATIVE.read_text()
    off = (text.replace("n_draft   = 5", "n_draft   = 0").replace("n_drafted = 120", "n_drafted = 0").replace("n_accept  = 44", "n_accept  = 0")
           .replace("accept    = 36.667%", "accept    = nan%"))
    path = tmp_path / "no_drafting.txt"
    path.write_text(off)
    decode = next(r for r in rows(path) if r["phase"] == "decode")
    assert decode["tokens_per_s"] == pytest.approx(26.848)
    assert decode["draft_accepted"] is None and decode["draft_generated"] is None
    result = CliRunner().invoke(app, ["analyze", str(SPECULATIVE), "-f", "json"])
    json.loads(result.stdout, parse_constant=lambda constant: pytest.fail(f"{constant} in the JSON"))
    assert "inf" not in result.stdout.replace("info", "")


def test_a_speculative_summary_cut_inside_its_draft_block_still_gives_its_decode():
    runs = rows(FOUND / "llama_speculative_pr10455_m4pro_qwen_coder_cut.txt")
    decode = next(r for r in runs if r["phase"] == "decode")
    assert (decode["n_gen"], decode["tokens_per_s"], decode["draft_accepted"], decode["draft_generated"]) == (371, pytest.approx(10.781), 313, 912)
    assert decode["verify_ms"] is None  # the copy ends before the target's block
