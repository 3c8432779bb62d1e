"""Nsight Systems inputs against the files themselves: SQL over each export, the stats CSVs, .ncu-rep, the ncu join."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from traceview.app.cli import app
from traceview.parsers import TraceFormat, detect_format, load_trace, nsys_sqlite
from traceview.parsers.ncu_csv import closed_if_cut

runner = CliRunner()
SQLITE = [
    "nsys2026.2_h100x2_sliced_nsys-ai.sqlite",
    "nsys2026.1_rtx3080_torch_zeros_nsys-ai.sqlite",
    "nvfuser_H200_nsys2024.6.2.sqlite",
    "nsys2022.1_gtx1060maxq_windows_extrap.sqlite",
    "dlprof_pytorch_cnn_RTX2070S_nsys2022.1.3.sqlite",
    "vecadd_streams_T4_nsys2022.4.2.sqlite",
    "EDGE_nvtx_only_TITANRTX_nsys2022.4.2.sqlite",
]
GPU_NAMES = {
    "nsys2026.1_rtx3080_torch_zeros_nsys-ai.sqlite": "NVIDIA GeForce RTX 3080",
    "nvfuser_H200_nsys2024.6.2.sqlite": "NVIDIA H200",
    "nsys2022.1_gtx1060maxq_windows_extrap.sqlite": "GeForce GTX 1060 with Max-Q Design",
    "vecadd_streams_T4_nsys2022.4.2.sqlite": "Tesla T4",
    "nsys2026.2_h100x2_sliced_nsys-ai.sqlite": None,  # the sliced export has no TARGET_INFO_GPU
}


def sql(path, query):
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    connection.text_factory = bytes
    try:
        return connection.execute(query).fetchall()
    finally:
        connection.close()


def analyze_json(*args):
    result = runner.invoke(app, ["analyze", *[str(a) for a in args], "-f", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", SQLITE)
def test_kernel_counts_and_time_per_device_match_sql(realdata_file, name):
    path = realdata_file(f"nsys_sqlite/{name}")
    assert detect_format(path) == TraceFormat.NSYS_SQLITE
    tables = {row[0].decode() for row in sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    expected = {}
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        expected = {d: (n, t) for d, n, t in sql(path, 'SELECT deviceId, count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId')}
    data = analyze_json(path)
    assert data["summary"]["launches"] == sum(n for n, _ in expected.values())
    assert data["summary"]["total_duration_ns"] == (pytest.approx(sum(t for _, t in expected.values())) if expected else None)
    per_device = {}
    for kernel in data["kernels"]:
        assert kernel["bound"] == "unknown" and "--ncu" in kernel["reason"]
    export = load_trace(path).data
    for device, group in export.kernels.group_by("device_id"):
        per_device[device[0]] = (group.height, int((group["end_ns"] - group["start_ns"]).sum()))
    assert per_device == expected
    if name in GPU_NAMES:
        assert data["device"]["name"] == GPU_NAMES[name]
    if not expected:
        # The NVTX-only export has no CUDA table at all: the note says so and how to capture one.
        assert data["kernels"] == [] and any("no CUDA trace at all" in n and "-t cuda,nvtx" in n for n in data["notes"])


def _idle_ns(intervals):
    """Idle time inside the busy span: the plain definition, computed without polars."""
    intervals = sorted(intervals)
    idle, covered = 0, intervals[0][1]
    for start, end in intervals[1:]:
        if start > covered:
            idle += start - covered
        covered = max(covered, end)
    return idle


@pytest.mark.parametrize("name", ["nsys2026.2_h100x2_sliced_nsys-ai.sqlite", "vecadd_streams_T4_nsys2022.4.2.sqlite", "dlprof_pytorch_cnn_RTX2070S_nsys2022.1.3.sqlite"])
def test_idle_gaps_match_the_export(realdata_file, name):
    path = realdata_file(f"nsys_sqlite/{name}")
    tables = {row[0].decode() for row in sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    parts = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET") if t in tables]
    rows = [r for t in parts for r in sql(path, f'SELECT deviceId, start, "end" FROM {t}')]
    data = analyze_json(path)
    for device in data["timeline"]["devices"]:
        intervals = [(s, e) for d, s, e in rows if d == device["device_id"]]
        assert device["idle_ns"] == _idle_ns(intervals)
        span = max(e for _, e in intervals) - min(s for s, _ in intervals)
        assert device["span_ns"] == span
        assert device["busy_pct"] == pytest.approx(100 * (span - _idle_ns(intervals)) / span)
    assert set(data["timeline"]["gpu_busy_pct"]) == {str(d["device_id"]) for d in data["timeline"]["devices"]}


def test_memcpy_directions_and_pageable_copies(realdata_file):
    path = realdata_file("nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite")
    expected = {k: (n, b) for k, n, b in sql(path, "SELECT copyKind, count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind")}
    pageable = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE srcKind = 0 OR dstKind = 0")[0][0]
    copies = {m["direction"]: m for m in analyze_json(path)["timeline"]["copies"]}
    assert copies["HtoD"]["count"] == expected[1][0] and copies["HtoD"]["bytes"] == expected[1][1]
    assert copies["DtoH"]["count"] == expected[2][0]
    assert sum(m["pageable_count"] for m in copies.values()) == pageable


def test_nvtx_ranges_and_latin1_strings(realdata_file):
    nvtx = analyze_json(realdata_file("nsys_sqlite/EDGE_nvtx_only_TITANRTX_nsys2022.4.2.sqlite"))["timeline"]["nvtx"]
    assert nvtx and nvtx[0]["cpu_ns"] >= nvtx[-1]["cpu_ns"]
    path = realdata_file("nsys_sqlite/nsys2022.1_gtx1060maxq_windows_extrap.sqlite")
    with pytest.raises(sqlite3.OperationalError, match="UTF-8"):  # the quirk is real: strict decoding fails
        sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("SELECT value FROM EXPORT_META_DATA").fetchall()
    windows = load_trace(path).data
    assert windows.product_version == "2022.1.1.61" and windows.schema_version == "2.9.1"


def test_an_inline_nvtx_text_of_invalid_utf8_is_read_with_replacement(realdata_file, tmp_path):
    # Found by fuzzing (a page of the real RTX 2070S export overwritten): invalid UTF-8 in NVTX_EVENTS.text passed into
    # polars and crashed its conversion to Python. The damaged bytes become U+FFFD; the other names stay.
    path = tmp_path / "damaged.sqlite"
    shutil.copy(realdata_file("nsys_sqlite/dlprof_pytorch_cnn_RTX2070S_nsys2022.1.3.sqlite"), path)
    connection = sqlite3.connect(path)
    [(rowid, text)] = connection.execute("SELECT rowid, text FROM NVTX_EVENTS WHERE text IS NOT NULL LIMIT 1").fetchall()
    connection.execute("UPDATE NVTX_EVENTS SET text = CAST(? AS TEXT) WHERE rowid = ?", (text.encode()[:3] + b"\xdc\xff" + text.encode()[3:], rowid))
    connection.commit()
    connection.close()
    names = {range_["name"] for range_ in load_trace(path).data.nvtx.select(pl.col("text").cast(pl.String).alias("name")).iter_rows(named=True)}
    assert any("\ufffd" in name for name in names)
    assert analyze_json(path)["timeline"]["nvtx"]


def test_nvtx_texts_are_read_without_the_numbers_pytorch_gives_every_call(realdata_file, tmp_path):
    # PyTorch numbers every op range (`aten::mm, op_id = 317126`): 16,582 distinct texts in the real export's 16,782
    # ranges. Read without the numbers, they are the op names, as a categorical of a few hundred values.
    path = tmp_path / "h100.sqlite"
    shutil.copy(realdata_file(H100), path)
    raw = [text.decode() for (text,) in sql(path, "SELECT text FROM NVTX_EVENTS WHERE text IS NOT NULL ORDER BY rowid")]
    assert len(set(raw)) > 16_000 and all(", op_id = " in text for text in raw[:100])
    nvtx = load_trace(path).data.nvtx
    assert nvtx.schema["text"] == pl.Categorical
    assert sorted(nvtx["text"].drop_nulls().cast(pl.String).to_list()) == sorted(text.split(", op_id = ")[0] for text in raw)
    assert nvtx["text"].n_unique() < 300
    # Sequence numbers and addresses change on every call too; the rest of the name stays.
    connection = sqlite3.connect(path)
    connection.execute("UPDATE NVTX_EVENTS SET text = 'aten::add, seq = 12, op_id = 7, at 0x7f00ab' WHERE rowid = "
                       "(SELECT min(rowid) FROM NVTX_EVENTS WHERE text IS NOT NULL)")
    connection.commit()
    connection.close()
    assert "aten::add, at 0x…" in load_trace(path).data.nvtx["text"].cast(pl.String).to_list()


# Texts made of the pieces that decide where the per-call-number regex matches: its keywords, separators, signs,
# ASCII and other digits, word characters next to a keyword, and addresses across the trailing digits.
_TEXT_PIECES = st.sampled_from(["op_id", "seq", "seq_id", "fwd_seq", "sequence_number", " ", ", ", ",", "=", ":", "-", "0", "7", "12",
                                "\u0663", "x", "_", "0x", "0xfF", "ab", "\u00e9", "\t", "aten::mm", "step "])


@given(st.lists(st.one_of(st.none(), st.lists(_TEXT_PIECES, max_size=10).map("".join)), max_size=60))
def test_per_call_numbers_come_out_as_the_regex_takes_them_out_of_each_text(texts):
    # The regex runs once per text stem (trailing digits cut) with a digit put back; that must answer for every text
    # as the regex over the text itself does, whether the digits end a per-call number (`op_id = 12`) or not (`step 12`).
    (numbering, no_number), (address, no_address) = nsys_sqlite.PER_CALL_NUMBERS
    series = pl.Series(texts, dtype=pl.String)
    expected = series.str.replace_all(numbering, no_number).str.replace_all(address, no_address)
    named = nsys_sqlite.without_per_call_numbers(series)
    assert named.dtype == pl.Categorical
    assert named.cast(pl.String).to_list() == expected.to_list()


@pytest.mark.parametrize("keys", [[5, 0, 5, 3, 0], [10**9, 7, 10**9, 0, 7]])
def test_distinct_keys_by_table_and_by_sort_agree(keys):
    # Small keys go through a lookup table, sparse ones (a process that built many categoricals) through a sort.
    distinct, index = nsys_sqlite._distinct(np.array(keys, dtype=np.int64))
    assert distinct.tolist() == sorted(set(keys))
    assert distinct[index].tolist() == keys


def test_gpu_peaks_from_the_export(realdata_file):
    data = analyze_json(realdata_file("nsys_sqlite/nvfuser_H200_nsys2024.6.2.sqlite"))
    assert data["device"]["peaks"]["dram_bytes_per_s"] == {"value": 4916736000000.0, "source": "profile"}
    assert data["device"]["peaks"]["tensor_flop_per_s"]["source"] == "table"


H100 = "nsys_sqlite/nsys2026.2_h100x2_sliced_nsys-ai.sqlite"
T4_STREAMS = "nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite"
STATS = {
    "cuda_gpu_kern_sum_rtx5090_llmperfopt_allstage.csv": 113,
    "cuda_gpu_kern_sum_mudock_adt_cuda_native.csv": 6,
    "dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv": 15,
    "nsys_console_stats_a100_vectoradd_README.txt": 1,
    "dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_api_sum_TRUNCATED.csv": 0,
    "nsys_stats_table_format_gpukernsum_nccl_allreduce_ddp_a100_awsdoeks_README.md": 11,
}


@pytest.mark.parametrize("name", sorted(STATS))
def test_stats_reports(realdata_file, name):
    path = realdata_file(f"nsys_stats/{name}")
    assert detect_format(path) == TraceFormat.NSYS_STATS
    data = analyze_json(path)
    assert len(data["kernels"]) == STATS[name]


def test_stats_kernel_totals_match_the_csv(realdata_file):
    import csv

    path = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv")
    rows = list(csv.DictReader(path.open()))
    data = analyze_json(path)
    assert data["summary"]["launches"] == sum(int(r["Instances"]) for r in rows)
    assert data["summary"]["total_duration_ns"] == sum(float(r["Total Time (ns)"]) for r in rows)
    assert data["kernels"][0]["short_name"] == "flash_attention_prefill_f16"


def test_standalone_dequantization_is_a_finding_with_its_share_of_kernel_time(realdata_file):
    # A real Llama 3.1 8B Q4_K_M prefill on an RTX 4090: the weights are expanded to FP16 by their own kernels before
    # cuBLAS reads them, a quarter of the kernel time; a GEMV that dequantizes in place is no such kernel.
    import csv

    path = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv")
    rows = list(csv.DictReader(path.open()))
    dequant = [r for r in rows if r["Name"].startswith("dequant")]
    assert {r["Name"] for r in dequant} == {"dequant_q4_k_f16", "dequant_q6_k_f16"}
    finding = next(f for f in analyze_json(path)["timeline"]["findings"] if f["rule"] == "standalone_dequantize")
    time_ns = sum(float(r["Total Time (ns)"]) for r in dequant)
    assert finding["cost_ns"] == int(time_ns) and {k["name"] for k in finding["evidence"]["kernels"]} == {r["Name"] for r in dequant}
    assert f"{100 * time_ns / sum(float(r['Total Time (ns)']) for r in rows):.1f}% of kernel time" in finding["message"]
    assert "quantized_gemv_q6_k" not in finding["message"]



def test_advice_follows_what_the_kernel_names_say_they_already_are(realdata_file):
    # The same prefill: its attention is FlashAttention already, its GEMMs run FP16 on tensor cores (s1688), its
    # dequant kernels expand weights. "Use a fused attention kernel" and "check it runs on tensor cores" were no advice.
    path = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv")
    kernels = {k["short_name"]: k for k in analyze_json(path, "--gpu", "rtx4090")["kernels"]}
    assert kernels["flash_attention_prefill_f16"]["recommendation"].startswith("a fused attention kernel already")
    gemm = kernels["ampere_fp16_s1688gemm_fp16_64x128_sliced1x2_ldg8_f2f_tn"]
    assert gemm["tensor_core"] is True and "FP8 at 2.0× the BF16/FP16 rate on GeForce RTX 4090" in gemm["recommendation"]
    assert kernels["dequant_q4_k_f16"]["recommendation"].startswith("expands quantized weights")
    # A kernel at 8 bits already is told what is left besides precision.
    from traceview.analyzer.diagnosis import tensor_math_advice

    assert "at 8 bits or fewer" in tensor_math_advice("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1", None)


@pytest.mark.parametrize(("unit", "ns_per_unit"), [("us", 1e3), ("ms", 1e6), ("sec", 1e9)])
def test_stats_printed_in_another_time_unit_are_read_in_ns(realdata_file, tmp_path, unit, ns_per_unit):
    # `nsys stats --timeunit us` names the unit in each header (`Total Time (us)`) and prints the values in it.
    import csv

    source = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv")
    rows = list(csv.reader(source.open()))
    header = [c.replace("(ns)", f"({unit})") for c in rows[0]]
    timed = [i for i, c in enumerate(rows[0]) if c.endswith("(ns)")]
    converted = [[f"{float(c) / ns_per_unit:.9f}" if i in timed else c for i, c in enumerate(row)] for row in rows[1:]]
    path = tmp_path / f"kern_sum_{unit}.csv"
    with path.open("w", newline="") as stream:
        csv.writer(stream).writerows([header, *converted])
    original, data = analyze_json(source), analyze_json(path)
    assert data["summary"]["total_duration_ns"] == pytest.approx(original["summary"]["total_duration_ns"])
    assert [k["duration_ns"] for k in data["kernels"]] == pytest.approx([k["duration_ns"] for k in original["kernels"]])
    assert any(f"printed in {unit}" in note for note in data["notes"])


@pytest.mark.parametrize("dialect", [{"delimiter": "\t"}, {"quoting": 1}], ids=["tsv", "every-field-quoted"])
def test_stats_written_as_tsv_or_fully_quoted_read_as_the_csv(realdata_file, tmp_path, dialect):
    import csv

    source = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv")
    path = tmp_path / "kern_sum.txt"
    with path.open("w", newline="") as stream:
        csv.writer(stream, **dialect).writerows(csv.reader(source.open()))
    assert detect_format(path) == TraceFormat.NSYS_STATS
    assert analyze_json(path)["kernels"] == analyze_json(source)["kernels"]


def _as_stats_json(source, indent=None):
    """A stats CSV as `nsys stats --format json` writes it: a JSON array, one object per row keyed by the CSV's
    headers in column order, numbers as JSON numbers (two public tools read it so: search index documents 66309541889
    and 55733365161; no such output is saved)."""
    import csv
    import json

    def value(cell):
        try:
            number = float(cell.replace(",", ""))
        except ValueError:
            return cell
        return int(number) if number.is_integer() and "." not in cell else number

    rows = list(csv.reader(source.open()))
    return json.dumps([{key: value(cell) for key, cell in zip(rows[0], row, strict=True)} for row in rows[1:]], indent=indent)


@pytest.mark.parametrize("name", ["dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv", "cuda_gpu_kern_sum_rtx5090_llmperfopt_allstage.csv"])
@pytest.mark.parametrize("indent", [None, 4], ids=["one-line", "indented"])
def test_stats_written_as_json_read_as_the_csv(realdata_file, tmp_path, name, indent):
    source = realdata_file(f"nsys_stats/{name}")
    path = tmp_path / "report_cuda_gpu_kern_sum.json"
    path.write_text(_as_stats_json(source, indent))
    assert detect_format(path) == TraceFormat.NSYS_STATS
    assert analyze_json(path)["kernels"] == analyze_json(source)["kernels"]


def test_several_json_reports_on_stdout_are_each_read_and_a_cut_one_is_refused(realdata_file, tmp_path):
    kernels = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv")
    api = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_api_sum_TRUNCATED.csv")
    api_rows = [line for line in api.read_text().splitlines() if line.count(",") >= 8][:-1]  # its cut last row left out
    api_csv = tmp_path / "api.csv"
    api_csv.write_text("\n".join(api_rows) + "\n")
    path = tmp_path / "stdout.txt"
    path.write_text("Processing [run.sqlite] with [/opt/nvidia/nsight-systems/2025.3.1/host-linux-x64/reports/cuda_api_sum.py]... \n"
                    + _as_stats_json(api_csv, 1) + "\n\n"
                    + "Processing [run.sqlite] with [/opt/nvidia/nsight-systems/2025.3.1/host-linux-x64/reports/cuda_gpu_kern_sum.py]... \n"
                    + _as_stats_json(kernels, 1) + "\n")
    from traceview.parsers.nsys_stats import parse

    reports = parse(path).reports
    assert sorted(reports) == ["cuda_api_sum", "cuda_gpu_kern_sum"]
    assert reports["cuda_api_sum"].equals(parse(api_csv).reports["cuda_api_sum"])
    assert analyze_json(path)["kernels"] == analyze_json(kernels)["kernels"]
    cut = tmp_path / "cut.json"
    cut.write_text(_as_stats_json(kernels, 4)[:1500])
    result = runner.invoke(app, ["analyze", str(cut)])
    assert result.exit_code == 1 and "JSON table is cut" in result.output, result.output


def test_cuda_api_gpu_sum_is_read_as_its_kernels_copies_and_api_calls(realdata_file, tmp_path):
    # `nsys stats -r cuda_api_gpu_sum` holds the three summaries in one table with a Category column; its Time (%)
    # is a share of all of them. Built here from the three tables of the real A100 console output.
    import csv

    from traceview.parsers.nsys_stats import parse

    source = realdata_file("nsys_stats/nsys_console_stats_a100_vectoradd_README.txt")
    reports = parse(source).reports
    rows = [(category, row) for report, category in (("cuda_api_sum", "CUDA_API"), ("cuda_gpu_kern_sum", "CUDA_KERNEL"),
                                                      ("cuda_gpu_mem_time_sum", "MEMORY_OPER"))
            for row in reports[report].iter_rows(named=True)]
    everything = sum(row["total_ns"] for _, row in rows)
    path = tmp_path / "api_gpu_sum.csv"
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Category", "Operation"])
        for category, row in sorted(rows, key=lambda item: -item[1]["total_ns"]):
            writer.writerow([round(100 * row["total_ns"] / everything, 1), int(row["total_ns"]), row["count"], row["avg_ns"], row["med_ns"],
                             int(row["min_ns"]), int(row["max_ns"]), row["stddev_ns"], category, row["name"]])
    original, data = analyze_json(source), analyze_json(path)
    [kernel] = data["kernels"]
    assert (kernel["launches"], kernel["duration_ns"], kernel["share_pct"]) == (1010, 1831281, 100.0)
    moved = lambda run: [(c["direction"], c["count"], c["duration_ns"]) for c in run["timeline"]["copies"]]  # noqa: E731
    assert moved(data) == moved(original)  # sizes are in cuda_gpu_mem_size_sum only
    assert data["timeline"]["sync"] == original["timeline"]["sync"]
    assert any("cuda_api_gpu_sum" in note for note in data["notes"])


def test_kernel_summary_by_launch_shape_is_one_row_per_kernel(realdata_file, tmp_path):
    # `nsys stats -r cuda_gpu_kern_gb_sum` lists each (grid, block) of a kernel apart. Built from the real RTX 4090
    # summary by giving half of each kernel's launches another grid: the same mean and spread in both halves.
    import csv

    source = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv")
    header, *rows = list(csv.reader(source.open()))
    path = tmp_path / "kern_gb_sum.csv"
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow([*header[:-1], "GridXYZ", "BlockXYZ", "Name"])
        for row in rows:
            launches, total, share = int(row[2]), float(row[1]), float(row[0])
            halves = [launches // 2, launches - launches // 2] if launches > 1 else [launches]
            for grid, part in zip(("  128    1    1", "   64    1    1"), halves, strict=False):
                writer.writerow([share * part / launches, total * part / launches, part, *row[3:8], grid, "  256    1    1", row[8]])
    original, data = analyze_json(source), analyze_json(path)
    assert len(data["kernels"]) == len(original["kernels"]) == len(rows)
    for merged, kernel in zip(data["kernels"], original["kernels"], strict=True):
        assert merged["short_name"] == kernel["short_name"] and merged["launches"] == kernel["launches"]
        for name in ("duration_ns", "avg_duration_ns", "min_duration_ns", "max_duration_ns", "share_pct"):
            assert merged[name] == pytest.approx(kernel[name], rel=1e-4, abs=0.05), name  # nsys rounds Avg to 0.1 ns
        assert merged["median_duration_ns"] == (kernel["median_duration_ns"] if kernel["launches"] == 1 else None)
    assert any("26 rows are read as 15 kernels" in note for note in data["notes"])


def _gpu_trace_from_export(path, rows_sql):
    import sqlite3

    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return connection.execute(rows_sql).fetchall()
    finally:
        connection.close()


def test_per_launch_traces_total_kernels_and_copies_apart(realdata_file, tmp_path):
    # `nsys stats -r cuda_gpu_trace` lists kernels and copies launch by launch (copies named `[CUDA memcpy
    # Host-to-Device]`); `-r cuda_kern_exec_trace` lists each kernel with its launch call. Both are written here by
    # SQL over the real T4 export, as nsys's report scripts do, and must give the export's own totals.
    import csv

    export = realdata_file(T4_STREAMS)
    kernels = _gpu_trace_from_export(export, """
        SELECT k.start, k."end" - k.start, k.correlationId, NULL, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.demangledName""")
    copies = _gpu_trace_from_export(export, """
        SELECT start, "end" - start, correlationId, bytes / 1e6,
               CASE copyKind WHEN 1 THEN '[CUDA memcpy Host-to-Device]' ELSE '[CUDA memcpy Device-to-Host]' END
        FROM CUPTI_ACTIVITY_KIND_MEMCPY""")
    gpu_trace = tmp_path / "gpu_trace.csv"
    with gpu_trace.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["Start (ns)", "Duration (ns)", "CorrId", "Bytes (MB)", "Name"])
        writer.writerows(sorted(kernels + copies))
    launches = _gpu_trace_from_export(export, """
        SELECT r.start, r."end" - r.start, NULL, NULL, k.start, k."end" - k.start, k."end" - r.start, 1, 1, k.deviceId,
               'cudaLaunchKernel', '', '', s.value
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        JOIN StringIds s ON s.id = k.demangledName""")
    exec_trace = tmp_path / "kern_exec_trace.csv"
    with exec_trace.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["API Start (ns)", "API Dur (ns)", "Queue Start (ns)", "Queue Dur (ns)", "Kernel Start (ns)", "Kernel Dur (ns)",
                         "Total Dur (ns)", "PID", "TID", "DevId", "API Function", "GridXYZ", "BlockXYZ", "Kernel Name"])
        writer.writerows(launches)
    truth = analyze_json(export)
    kernel_totals = lambda run: sorted((k["short_name"], k["launches"], k["duration_ns"]) for k in run["kernels"])  # noqa: E731
    for path in (gpu_trace, exec_trace):
        assert detect_format(path) == TraceFormat.NSYS_STATS
        assert kernel_totals(analyze_json(path)) == kernel_totals(truth)
    # The exec trace's launch calls give the export's launch latency (call start → kernel start) and call time.
    launch = analyze_json(exec_trace)["timeline"]["launch"]
    for name in ("median_latency_ns", "p99_latency_ns", "kernels_joined", "median_launch_call_ns"):
        assert launch[name] == pytest.approx(truth["timeline"]["launch"][name]), name
    # The console form of the same report (`nsys stats -r cuda_gpu_trace` without --format csv): column widths from
    # its dashed underline, thousands separators, an empty Bytes cell on kernel rows.
    console = tmp_path / "gpu_trace.txt"
    lines = ["[1/1] Executing 'cuda_gpu_trace' stats report", "",
             f" {'Start (ns)':>14}  {'Duration (ns)':>13}  {'CorrId':>6}  {'Bytes (MB)':>10}  Name", f" {'-' * 14}  {'-' * 13}  {'-' * 6}  {'-' * 10}  {'-' * 30}"]
    lines += [f" {start:>14,}  {duration:>13,}  {corr:>6}  {'' if mb is None else f'{mb:.3f}':>10}  {name}"
              for start, duration, corr, mb, name in sorted(kernels + copies)]
    console.write_text("\n".join(lines) + "\n")
    for path in (gpu_trace, console):
        # cuda_gpu_trace lists each copy on its GPU: they are read as the export's are, per device and direction.
        copied = {c["direction"]: c for c in analyze_json(path)["timeline"]["copies"]}
        assert {k: c["count"] for k, c in copied.items()} == {"HtoD": 8, "DtoH": 4}
        # nsys prints MB with three decimals: each copy's size is known to 500 bytes.
        assert copied["HtoD"]["bytes"] == pytest.approx(16777216, abs=8 * 500)
        assert copied["DtoH"]["bytes"] == pytest.approx(8388608, abs=4 * 500)
        assert sum(c["duration_ns"] for c in copied.values()) == sum(c["duration_ns"] for c in truth["timeline"]["copies"])
    assert kernel_totals(analyze_json(console)) == kernel_totals(truth)


NVTX_KERN_SUM = """[9/9] Executing 'nvtx_kern_sum' stats report

   NVTX Range     Style    PID     TID    NVTX Inst  Kern Inst  Total Time (ns)  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)  Kernel Name
 ------------  -------  ------  ------  ---------  ---------  ---------------  --------  --------  --------  --------  -----------  -----------
 Profile_Loop  PushPop  123456  123456          1       1000        1,812,345   1,812.3   1,792.0     1,760     2,912        60.1  vectorAdd

"""


def test_a_report_that_is_not_read_is_skipped_not_the_whole_file(realdata_file, tmp_path):
    # `nsys stats -r nvtx_kern_sum,...` (kernels projected onto NVTX ranges, handmade here in its documented columns)
    # has a Style column but no Name: it is no NVTX summary, and must not make the real reports around it unreadable.
    source = realdata_file("nsys_stats/nsys_console_stats_a100_vectoradd_README.txt")
    path = tmp_path / "console.txt"
    path.write_text(NVTX_KERN_SUM + source.read_text())
    data = analyze_json(path)
    assert data["kernels"] == analyze_json(source)["kernels"]
    assert "reports not read: nvtx_kern_sum, osrt_sum" in data["notes"]
    alone = tmp_path / "alone.txt"
    alone.write_text(NVTX_KERN_SUM)
    result = runner.invoke(app, ["analyze", str(alone)])
    assert result.exit_code == 1 and "no report traceview reads (found nvtx_kern_sum)" in result.stderr


def test_a_per_launch_report_gives_the_launch_bound_test_of_the_export(realdata_file, tmp_path):
    # The real 2×H100 export: 3,442 kernels, 91% under 10 us. Its kernels are spread out in a copy (each starts
    # twice its own duration after the previous one ends: waiting longer than it runs, as a launch-bound loop
    # does), and `nsys stats -r cuda_gpu_trace` is written from that copy by SQL. Both must give the same verdict.
    import csv

    export = tmp_path / "spread.sqlite"
    shutil.copy(realdata_file(H100), export)
    connection = sqlite3.connect(export)
    rows = connection.execute('SELECT rowid, deviceId, "end" - start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY deviceId, start').fetchall()
    clock: dict[int, int] = {}
    for rowid, device, duration in rows:
        start = clock.get(device, 10**9) + 2 * duration
        connection.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = ?, "end" = ? WHERE rowid = ?', (start, start + duration, rowid))
        clock[device] = start + duration
    connection.commit()
    trace = connection.execute('SELECT k.start, k."end" - k.start, k.deviceId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k '
                               "JOIN StringIds s ON s.id = k.demangledName ORDER BY k.start").fetchall()
    connection.close()
    path = tmp_path / "gpu_trace.csv"
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["Start (ns)", "Duration (ns)", "Device", "Name"])
        writer.writerows([start, duration, f"NVIDIA H100 80GB HBM3 ({device})", name] for start, duration, device, name in trace)
    whole, stats = analyze_json(export)["timeline"], analyze_json(path)["timeline"]
    assert stats["launch"]["tiny_kernels"] == whole["launch"]["tiny_kernels"]
    [bound] = [f for f in stats["findings"] if f["rule"] == "launch_bound"]
    [expected] = [f for f in whole["findings"] if f["rule"] == "launch_bound"]
    assert bound["evidence"] == expected["evidence"] and bound["cost_ns"] == expected["cost_ns"]
    assert bound["evidence"]["kernels_in_stretches"] > 1000


def test_several_csv_reports_on_stdout_are_each_read_by_the_script_nsys_names(realdata_file, tmp_path):
    # `nsys stats --format csv -r osrt_sum,cuda_gpu_kern_sum,cuda_api_sum report.nsys-rep > out.csv`: tables one after
    # another, each after the `Processing [...] with [.../NAME.py]` line nsys prints. osrt_sum has the very columns of
    # cuda_api_sum, so the script name decides. Built from the real RTX 4090 CSVs and the real A100 osrt_sum table.
    kern = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv")
    api = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_api_sum_TRUNCATED.csv")
    console = realdata_file("nsys_stats/nsys_console_stats_a100_vectoradd_README.txt").read_text().splitlines()
    first = next(i for i, line in enumerate(console) if "Executing 'osrt_sum'" in line) + 4  # past the header and its rule
    table = console[first:console.index("", first)]
    osrt_csv = ["Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name"] + [
        ",".join(cell.replace(",", "") for cell in line.split()) for line in table]
    processing = "Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2024.2.1/host-linux-x64/reports/{}.py]... "
    path = tmp_path / "stdout.csv"
    path.write_text("\n".join(["Generating SQLite file report1.sqlite from report1.nsys-rep", processing.format("osrt_sum"), "", *osrt_csv, "",
                               processing.format("cuda_gpu_kern_sum"), "", kern.read_text().strip(), "",
                               processing.format("cuda_api_sum"), "", api.read_text().strip(), ""]))
    data = analyze_json(path)
    assert data["kernels"] == analyze_json(kern)["kernels"]
    assert data["timeline"]["sync"] == analyze_json(api)["timeline"]["sync"]
    assert "reports not read: osrt_sum" in data["notes"]


def test_standalone_nsys_stats_output_names_each_report_by_its_title(realdata_file, tmp_path):
    # `nsys stats report.nsys-rep` (2023+) prints `Processing [x.sqlite] with [.../reports/NAME.py]...` and a title
    # ` ** CUDA API Summary (cuda_api_sum):` before each table, not `nsys profile --stats=true`'s `[5/8] Executing`
    # lines. The real A100 capture rewritten that way must read the same; its osrt_sum table (the columns of
    # cuda_api_sum) comes before the CUDA API summary.
    import re

    source = realdata_file("nsys_stats/nsys_console_stats_a100_vectoradd_README.txt")
    titles = {"nvtx_sum": "NVTX Range Summary", "osrt_sum": "OS Runtime Summary", "cuda_api_sum": "CUDA API Summary",
              "cuda_gpu_kern_sum": "CUDA GPU Kernel Summary", "cuda_gpu_mem_time_sum": "CUDA GPU MemOps Summary (by Time)",
              "cuda_gpu_mem_size_sum": "CUDA GPU MemOps Summary (by Size)"}
    rewritten = re.sub(r"^\[\d+/\d+\] Executing '(\w+)' stats report$",
                       lambda m: f"Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2024.5.1/host-linux-x64/reports/{m.group(1)}.py]... \n\n"
                                 f" ** {titles[m.group(1)]} ({m.group(1)}):", source.read_text(), flags=re.MULTILINE)
    path = tmp_path / "nsys_stats_stdout.txt"
    path.write_text(rewritten)
    original, data = analyze_json(source), analyze_json(path)
    for part in ("kernels", "summary"):
        assert data[part] == original[part]
    assert data["timeline"]["sync"] == original["timeline"]["sync"] and data["timeline"]["copies"] == original["timeline"]["copies"]
    assert any("osrt_sum" in note for note in data["notes"])


def test_the_earliest_stats_console_names_its_tables_in_prose():
    # Handmade in the grammar formats.md §2.1 reports for ≈2019.5-2020 `--stats=true` (no saved sample): `CUDA API
    # Statistics (nanoseconds)` above `Time(%)  Total Time  Calls  Average ...`; the OS runtime table has the same columns.
    from pathlib import Path

    data = analyze_json(Path(__file__).parent / "fixtures" / "nsys_stats_2020_console_handmade.txt")
    assert [(k["short_name"], k["launches"], k["duration_ns"]) for k in data["kernels"]] == [("vectorAdd", 1, 2318815.0)]
    assert data["timeline"]["sync"]["api_calls"] == 6 and data["timeline"]["sync"]["blocking_api_count"] == 3
    assert "reports not read: osrt_sum" in data["notes"]


def test_a_csv_file_named_by_nsys_for_the_os_runtime_summary_is_not_read_as_cuda_api_calls(realdata_file, tmp_path):
    # `nsys stats --format csv -o report1` writes `report1_<report>.csv`; osrt_sum has the columns of cuda_api_sum, so
    # only the name tells them apart. The name settles nothing else: the columns decide where they can.
    import shutil as files

    api = realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_api_sum_TRUNCATED.csv")
    for name, expected in (("report1_osrt_sum.csv", None), ("report1_cuda_api_sum.csv", api)):
        path = tmp_path / name
        files.copy(api, path)
        result = runner.invoke(app, ["analyze", str(path), "-f", "json"])
        if expected is None:
            assert result.exit_code == 1 and "found osrt_sum" in result.stderr
        else:
            assert json.loads(result.stdout)["timeline"]["sync"] == analyze_json(expected)["timeline"]["sync"]
    kern = tmp_path / "run_gputrace.csv"  # a misleading name: the kernel summary's columns win
    files.copy(realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_gpu_kern_sum.csv"), kern)
    assert analyze_json(kern)["summary"]["launches"] == 679


@pytest.mark.parametrize("export", [H100, T4_STREAMS])
def test_cuda_gpu_trace_gives_the_exports_time_breakdown(realdata_file, tmp_path, export):
    # `nsys stats -r cuda_gpu_trace` lists every kernel, copy and memset on each GPU, so where each GPU's time went
    # follows from it as from the export. Written by SQL over the real exports (the 2×H100 one is copy-bound).
    import csv

    source = realdata_file(export)
    connection = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    kinds = {1: "Host-to-Device", 2: "Device-to-Host", 8: "Device-to-Device", 10: "Peer-to-Peer"}
    rows = connection.execute('SELECT k.start, k."end" - k.start, k.deviceId, NULL, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k '
                              "JOIN StringIds s ON s.id = k.demangledName").fetchall()
    rows += [(start, duration, device, size / 1e6, f"[CUDA memcpy {kinds.get(kind, 'Unknown')}]") for start, duration, device, size, kind in
             connection.execute('SELECT start, "end" - start, deviceId, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY')]
    if connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_MEMSET'").fetchone():
        rows += [(start, duration, device, size / 1e6, "[CUDA memset]") for start, duration, device, size in
                 connection.execute('SELECT start, "end" - start, deviceId, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET')]
    # The Device column names each GPU as nsys does (`Tesla T4 (0)`), from the export's own GPU table.
    gpu_names = dict(connection.execute("SELECT id, name FROM TARGET_INFO_GPU").fetchall()) if connection.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'TARGET_INFO_GPU'").fetchone() else {}
    connection.close()
    path = tmp_path / "gpu_trace.csv"
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["Start (ns)", "Duration (ns)", "Device", "Bytes (MB)", "Name"])
        writer.writerows([start, duration, f"{gpu_names.get(device) or 'NVIDIA GPU'} ({device})", "" if size is None else f"{size:.6f}", name]
                         for start, duration, device, size, name in sorted(rows))
    whole_truth, whole_data = analyze_json(source), analyze_json(path)
    truth, data = whole_truth["timeline"], whole_data["timeline"]
    # Copies are judged against the same host link (PCIe Gen3 x16 for the named T4; none where no name is given).
    assert [c.get("link") for c in data["copies"]] == [c.get("link") for c in truth["copies"]]
    if any(gpu_names.values()):
        assert whole_data["device"]["name"] == whole_truth["device"]["name"] == "Tesla T4"
    shape = lambda run: [{k: d[k] for k in ("device_id", "span_ns", "busy_pct", "breakdown", "verdict", "gap_count")} for d in run["devices"]]  # noqa: E731
    assert shape(data) == shape(truth)
    assert (data["verdict"] or {}).get("verdict") == (truth["verdict"] or {}).get("verdict")
    # What the GPU waited for needs the CUDA API calls the trace does not have: said, not guessed.
    assert {c["cause"] for c in data["idle_by_cause"]} <= {"not_traced", "gpu_launch_latency"}


def test_console_stats_and_truncated_api_sum(realdata_file):
    console = analyze_json(realdata_file("nsys_stats/nsys_console_stats_a100_vectoradd_README.txt"))
    kernel = console["kernels"][0]
    assert (kernel["launches"], kernel["duration_ns"]) == (1010, 1831281)  # "1,831,281" with separators
    assert {m["direction"] for m in console["timeline"]["copies"]} == {"[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]"}
    assert console["timeline"]["nvtx"][0]["name"] == "Profile_Loop"
    api = analyze_json(realdata_file("nsys_stats/dotllm_llama31_8b_q4km_rtx4090_prefill476_cuda_api_sum_TRUNCATED.csv"))
    assert any("'...'" in note for note in api["notes"])
    assert api["timeline"]["sync"]["blocking_api_count"] == 293 + 1  # cuMemcpyHtoD_v2 and cuCtxSynchronize


def test_ncu_join_carries_verdicts_onto_whole_run_time(realdata_file):
    stats = realdata_file("nsys_stats/cuda_gpu_kern_sum_rtx5090_llmperfopt_allstage.csv")
    gemm = realdata_file("ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv")
    data = analyze_json(stats, "--ncu", gemm)
    top = data["kernels"][0]
    assert top["short_name"].startswith("cutlass::Kernel2") and top["bound"] == "latency" and top["launches"] == 1180
    # ncu's 67.9 % estimated speedup of the one profiled launch, applied to 1,180 launches' time.
    assert top["recoverable_ns"] == pytest.approx(top["duration_ns"] * 0.679, rel=1e-3)
    assert data["timeline"]["ncu_join"] == {"matched_kernels": 1, "unmatched_ncu_kernels": []}
    assert sum(k["bound"] == "unknown" for k in data["kernels"]) == 112


def test_unmatched_ncu_kernels_are_listed(realdata_file):
    stats = realdata_file("nsys_stats/cuda_gpu_kern_sum_mudock_adt_cuda_native.csv")
    gemm = realdata_file("ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv")
    data = analyze_json(stats, "--ncu", gemm)
    assert data["timeline"]["ncu_join"]["matched_kernels"] == 0
    assert len(data["timeline"]["ncu_join"]["unmatched_ncu_kernels"]) == 1
    assert any("match no kernel" in note for note in data["notes"])


def test_ncu_option_needs_an_nsys_input(realdata_file):
    result = runner.invoke(app, ["analyze", str(realdata_file("ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv")), "--ncu", "x.csv"])
    assert result.exit_code == 1 and "--ncu joins" in result.stderr


def test_ncu_rep_reports(realdata_file):
    pytest.importorskip("ncu_report", reason="the optional ncu-report wheel is not installed")
    import ncu_report

    for name, expected in (("CuVectorAddDrv.ncu-rep", 1), ("manual_nvtx.ncu-rep", 3)):
        path = realdata_file(f"ncu_rep/{name}")
        assert detect_format(path) == TraceFormat.NCU_REP
        context = ncu_report.load_report(str(path))
        actions = [context.range_by_idx(0).action_by_idx(i) for i in range(context.range_by_idx(0).num_actions())]
        truth = {a.name(ncu_report.IAction.NameBase_DEMANGLED): a.metric_by_name("gpu__time_duration.sum").as_double() for a in actions}
        data = analyze_json(path)
        assert data["summary"]["launches"] == expected
        assert {k["name"]: k["duration_ns"] for k in data["kernels"]} == truth
        assert data["device"]["name"] == "NVIDIA GeForce RTX 3070"
        for kernel, action in zip(sorted(data["kernels"], key=lambda k: k["short_name"]), sorted(actions, key=lambda a: a.name()), strict=True):
            sm = action.metric_by_name("sm__throughput.avg.pct_of_peak_sustained_elapsed").as_double()
            mem = action.metric_by_name("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed").as_double()
            assert kernel["compute_pct"] == pytest.approx(sm) and kernel["memory_pct"] == pytest.approx(mem)
    daxpy = next(k for k in analyze_json(realdata_file("ncu_rep/manual_nvtx.ncu-rep"))["kernels"] if k["short_name"] == "daxpy_kernel")
    assert daxpy["bound"] == "memory"  # Memory 90.7 %, SM 12.0 %


def test_ncu_rep_without_the_wheel(realdata_file, without_module):
    without_module("ncu_report")
    result = runner.invoke(app, ["analyze", str(realdata_file("ncu_rep/CuVectorAddDrv.ncu-rep"))])
    assert result.exit_code == 1 and "pip install 'traceview[ncu-rep]'" in result.stderr and "ncu -i" in result.stderr


def test_ncu_option_needs_an_ncu_export(realdata_file):
    stats = realdata_file("nsys_stats/cuda_gpu_kern_sum_mudock_adt_cuda_native.csv")
    other = realdata_file("tegrastats/xavier_nx_jp5_sudo_ts_tegra_burn.log")
    result = runner.invoke(app, ["analyze", str(stats), "--ncu", str(other)])
    assert result.exit_code == 1 and "not per-kernel metrics" in result.stderr


def test_table_format_with_nccl_and_a_hand_cut_end(realdata_file):
    """`nsys stats --format table`: `+---+` borders, old column names, names cut with '…', a '...' line after row 11."""
    data = analyze_json(realdata_file("nsys_stats/nsys_stats_table_format_gpukernsum_nccl_allreduce_ddp_a100_awsdoeks_README.md"))
    top = data["kernels"][0]
    assert (top["short_name"], top["launches"], top["duration_ns"], top["share_pct"]) == ("ncclKernel_AllReduce_RING_LL_Sum_float", 554, 5448188578, 27.8)
    assert top["kind"] == "communication"
    assert any("cut by hand" in note for note in data["notes"])


def test_kernels_of_equal_time_are_ranked_by_name(realdata_file):
    # The H200 export has kernels of one 4,096 ns launch each: a hash group-by hands them over in any order, so the
    # name settles the tie and a rerun writes the same report.
    kernels = analyze_json(str(realdata_file("nsys_sqlite/nvfuser_H200_nsys2024.6.2.sqlite")))["kernels"]
    keys = [(-(k["recoverable_ns"] or -1.0), -k["duration_ns"], k["name"]) for k in kernels]
    assert keys == sorted(keys)
    assert len({(r, d) for r, d, _ in keys}) < len(keys)  # there are ties to settle


def test_stats_copies_carry_bytes_and_rates_and_demand_paging_is_named():
    # The `nsys profile --stats=true` output of the managed-memory run (tests/fixtures/found/PROVENANCE.md): the size
    # summary gives 134.218 MB each way; 4,694 migrations to the GPU of 28.6 kB are demand paging.
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "nsys2022.1_stats_rtx3070_managed_memory_demand_paging.txt"
    data = json.loads(CliRunner().invoke(app, ["analyze", str(path), "-f", "json"]).stdout)
    copies = {c["direction"]: c for c in data["timeline"]["copies"]}
    to_gpu = copies["[CUDA Unified Memory memcpy HtoD]"]
    assert to_gpu["count"] == 4694 and to_gpu["bytes"] == pytest.approx(134.218e6)
    assert to_gpu["gb_per_s"] == pytest.approx(134.218e6 / 39_305_096)
    paging = [f for f in data["timeline"]["findings"] if f["rule"] == "unified_memory_paging"]
    assert {f["evidence"]["migrations"] for f in paging} == {4694, 768}
    assert all("cudaMemPrefetchAsync" in f["advice"] for f in paging)


def test_stats_rates_need_sizes_with_enough_digits(realdata_file):
    # The A100 vectorAdd sizes round to 0.000 MB: no rate is made up from them.
    data = json.loads(CliRunner().invoke(app, ["analyze", str(realdata_file("nsys_stats/nsys_console_stats_a100_vectoradd_README.txt")), "-f", "json"]).stdout)
    assert all(c["gb_per_s"] is None for c in data["timeline"]["copies"])


@pytest.mark.parametrize("text", [
    "Start (ns),Duration (ns),Device,Name\n100,1e30,X (0),k\n200,5,X (0),k\n",  # a duration past 2^63 ns
    "Start (ns),Duration (ns),Device,Name\n100,10,X (999999999999999999999999),k\n200,5,X (0),k\n",  # a device number past 2^63
    "API Start (ns),API Dur (ns),Kernel Start (ns),Kernel Dur (ns),DevId,Kernel Name\n1e300,1e300,100,10,0,k\n50,1e300,200,5,0,k\n",
], ids=["huge-duration", "huge-device", "huge-launch-call"])
def test_damaged_per_launch_cells_leave_the_timeline_not_crash_it(tmp_path, text):
    # Found reading the per-launch reports back: an Int64 timeline column cannot hold these, and they are damage.
    path = tmp_path / "trace.csv"
    path.write_text(text)
    data = analyze_json(path)
    assert data["summary"]["launches"] == 2


def test_summaries_alone_show_a_launch_bound_run():
    # nsys 2026.3.1 `nsys stats` of a program that launches a 1.29 us kernel 16,777,216 times, each launch call taking
    # 6.87 us (tests/fixtures/found/PROVENANCE.md). Only the summaries are there, no per-launch report.
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "nsys2026.3_stats_console_vector_add_16m_launches.txt"
    data = analyze_json(path)
    top = data["timeline"]["findings"][0]
    assert top["rule"] == "launch_bound" and top["evidence"]["launch_calls"] == top["evidence"]["kernel_launches"] == 16_777_216
    assert top["cost_ns"] == 115_231_828_203 - 21_570_333_587
    assert top["evidence"]["busy_ceiling_pct"] == pytest.approx(100 * 21_570_333_587 / 115_231_828_203)
    assert data["kernels"][0]["launches"] == 16_777_216


def test_the_summary_launch_test_needs_one_launch_call_per_kernel(realdata_file):
    from traceview.analyzer.timeline import stats_launch_bound_finding

    # The A100 README: 1,010 vectorAdd launches at 3.17 us per call for 1.81 us kernels.
    found = analyze_json(realdata_file("nsys_stats/nsys_console_stats_a100_vectoradd_README.txt"))["timeline"]["findings"]
    assert found[0]["rule"] == "launch_bound" and found[0]["evidence"]["busy_ceiling_pct"] == pytest.approx(57.2, abs=0.1)
    api = pl.DataFrame({"name": ["cudaLaunchKernel", "cudaGraphLaunch"], "count": [2000, 100], "total_ns": [8e6, 1e6]})
    # Kernels launched by graphs outnumber the launch calls: the summaries cannot pair them.
    graphs = pl.DataFrame({"name": ["k"], "count": [50_000], "total_ns": [5e7]})
    assert stats_launch_bound_finding(api, graphs) is None
    # Kernels that run longer than a launch call keep the GPU fed.
    long = pl.DataFrame({"name": ["k"], "count": [2000], "total_ns": [2000 * 9e3]})
    assert stats_launch_bound_finding(api, long) is None


def test_summaries_say_when_cuda_graphs_hide_their_kernels():
    # nsys 2025.3.2 `nsys stats` of a pi0 policy run with CUDA graphs (tests/fixtures/found/PROVENANCE.md): 55 graph
    # launches, yet the kernel summary lists only the 45 kernels launched one by one (82 us of a ~110 ms run).
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "nsys2025.3_stats_console_pi0_cuda_graphs.txt"
    data = analyze_json(path)
    graphs = next(f for f in data["timeline"]["findings"] if f["rule"] == "cuda_graph_trace")
    assert graphs["evidence"] == {"graph_launches": 55, "direct_launch_calls": 45, "kernel_launches": 45}
    assert "--cuda-graph-trace=node" in graphs["advice"] and any("kernels inside the graphs are not in it" in n for n in data["notes"])
    # Its 136 us of copies are more than the 82 us of kernels the summary lists, but not of the kernels the run had:
    # no copy-share finding is made of a kernel summary that lacks the graphs' kernels.
    assert "copy_dominated" not in [f["rule"] for f in data["timeline"]["findings"]]
    # The five iterations are one NVTX group, as in the export's grouping.
    assert [(g["name"], g["count"]) for g in data["timeline"]["nvtx"]] == [("sample_actions_iter_N_num_steps_10", 5)]
    assert data["timeline"]["nvtx"][0]["cpu_ns"] == 23_518_204 + 21_848_142 + 21_825_337 + 21_824_597 + 21_805_076
    # With the graphs' kernels in the table (node tracing) there are more kernels than one-by-one launches: no finding.
    from traceview.analyzer.timeline import stats_graph_trace_finding

    api = pl.DataFrame({"name": ["cudaGraphLaunch_v10000", "cudaLaunchKernel"], "count": [55, 45], "total_ns": [1.0, 1.0]})
    assert stats_graph_trace_finding(api, pl.DataFrame({"name": ["k"], "count": [4000], "total_ns": [1.0]})) is None


def test_cuda_gpu_sum_the_report_of_nsys_easy_is_read():
    # nsys 2025.3.1 `cuda_gpu_sum`, the default report of nsys_easy (tests/fixtures/found/PROVENANCE.md): kernels and
    # memory operations in one table by Category. It had been refused as "no report traceview reads".
    from pathlib import Path

    data = analyze_json(Path(__file__).parent / "fixtures" / "found" / "nsys2025.3_cuda_gpu_sum_nsys_easy_add.txt")
    assert [(k["short_name"], k["launches"], k["duration_ns"]) for k in data["kernels"]] == [("add", 1, 114_793_377)]
    copies = {c["direction"]: (c["count"], c["duration_ns"]) for c in data["timeline"]["copies"]}
    assert copies == {"[CUDA memcpy Unified Host-to-Device]": (48, 703_231), "[CUDA memcpy Unified Device-to-Host]": (24, 342_227)}
    assert "cuda_gpu_sum is read as its kernels and memory operations" in data["notes"]


def _projection_console(rows):
    """Return nvtx_gpu_proj_sum rows laid out as nsys's console prints a summary: each column as wide as its widest
    cell under a dashed rule, text left-aligned, numbers right-aligned, two spaces between columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    text = [i < 2 for i in range(len(rows[0]))]  # Range and Style
    def line(row):
        return "  ".join(cell.ljust(w) if left else cell.rjust(w) for cell, w, left in zip(row, widths, text, strict=True)).rstrip()
    return "\n".join([line(rows[0]), "  ".join("-" * w for w in widths), *(line(row) for row in rows[1:])]) + "\n"


def test_nvtx_gpu_projection_summary_gives_each_range_group_its_gpu_span(tmp_path):
    # nvtx_gpu_proj_sum of an 8-GPU FSDP training run (tests/fixtures/found/PROVENANCE.md), as a report quoted it: cut
    # inside its last row. It had been refused as "not a supported trace".
    import csv
    import io
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "found" / "nsys_nvtx_gpu_proj_sum_nemotron_fsdp_8gpu_excerpt.csv"
    assert detect_format(path) == TraceFormat.NSYS_STATS
    data = analyze_json(path)
    groups = {g["name"]: g for g in data["timeline"]["nvtx"]}
    # The three captured steps (one row each, 8 ranks apiece) are one group, as the export's grouping makes them.
    step = groups["train_step_N"]
    assert step["count"] == 24 and step["cpu_ns"] == 6294692138 + 6015563708 + 6245456245
    assert step["gpu_projected_ns"] == 6290231188 + 6242626032 + 6012845525 and step["gpu_ops"] == 3 * 27544 and step["depth"] == 0
    # The per-layer module ranges (`:40: FSDPNemotronV3Block`) are one group; the cut row is left out and said so.
    blocks = groups["N: FSDPNemotronV3Block"]
    assert blocks["count"] == 27 * 48 and blocks["depth"] == 2
    assert not any("39" in name for name in groups)
    assert "line 50: the table's last row has 2 of its 14 fields (cut short?) and was left out" in data["notes"]
    # A range whose GPU work outlasts it (the CPU runs ahead) and one that spends its time on the host.
    assert groups["mixer: MoE"]["gpu_projected_ns"] > 2 * groups["mixer: MoE"]["cpu_ns"]
    assert groups["grad_clip"]["gpu_projected_ns"] < groups["grad_clip"]["cpu_ns"] / 4
    text = runner.invoke(app, ["analyze", str(path)]).stdout
    assert "train_step_N: 24× 18.56 s, GPU span 18.55 s (82,632 GPU operations)" in text
    # The console layout of the same rows (`nsys stats -r nvtx_gpu_proj_sum`), and its TSV, read the same.
    rows = list(csv.reader(io.StringIO(path.read_text())))[:-1]
    console = tmp_path / "console.txt"
    console.write_text("Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2025.3.1/host-linux-x64/reports/nvtx_gpu_proj_sum.py]... \n\n"
                       " ** NVTX GPU Projection Summary (nvtx_gpu_proj_sum):\n\n" + _projection_console(rows))
    tsv = tmp_path / "report1_nvtx_gpu_proj_sum.tsv"
    tsv.write_text("\n".join("\t".join(row) for row in rows) + "\n")
    for other in (console, tsv):
        assert detect_format(other) == TraceFormat.NSYS_STATS
        assert analyze_json(other)["timeline"]["nvtx"] == data["timeline"]["nvtx"]


@given(low=st.integers(min_value=-5, max_value=10**6), span=st.integers(min_value=1, max_value=5 * 10**6))
def test_row_ranges_cover_every_row_once_in_even_shares(low, span):
    from traceview.parsers.nsys_sqlite import _CHUNK_ROWS, _CONNECTIONS, _SPLIT_ROWS, row_ranges

    high = low + span - 1
    ranges = row_ranges(low, high)
    assert ranges[0][0] == low and ranges[-1][1] == high
    assert all(first <= last for first, last in ranges)
    assert all(after[0] == before[1] + 1 for before, after in zip(ranges, ranges[1:]))
    sizes = [last - first + 1 for first, last in ranges]
    assert max(sizes) <= _CHUNK_ROWS
    if span >= _SPLIT_ROWS:  # every connection has a share, and no share is much smaller than the others
        assert len(ranges) % _CONNECTIONS == 0 and len(ranges) >= _CONNECTIONS
        assert min(sizes) >= max(sizes) - len(ranges)
    else:
        assert ranges == [(low, high)]


@pytest.mark.parametrize("name", SQLITE)
def test_without_adbc_the_standard_library_reads_the_same_frames(realdata_file, monkeypatch, name):
    # ADBC is a dependency, but an install without it (or a driver that fails to load) falls back to sqlite3: the
    # same rows, types and names, only slower.
    path = realdata_file(f"nsys_sqlite/{name}")
    with_adbc = nsys_sqlite.parse(path)
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)  # `import adbc_driver_sqlite` now raises ImportError
    without = nsys_sqlite.parse(path)
    for table in ("kernels", "memops", "sync", "api", "nvtx", "graphs", "gpus"):
        assert getattr(without, table).equals(getattr(with_adbc, table)), table
    assert without.names == with_adbc.names and without.notes == with_adbc.notes


FOUND_STATS = Path(__file__).parent / "fixtures" / "found"


def test_names_a_stats_table_cut_short_keep_their_function_and_what_tells_them_apart():
    # nsys 2026.1 stats console (tests/fixtures/found/PROVENANCE.md): names cut at 100 characters with `…`, inside
    # template arguments or parameter lists.
    names = [k["short_name"] for k in analyze_json(FOUND_STATS / "nsys2026.1_stats_console_moe_expert_loop_cut_names.txt")["kernels"]]
    assert {"gatherTopK", "vectorized_gather_kernel", "softmax_warp_forward", "gemvx::kernel"} <= set(names)
    # Instantiations are told apart by the argument they differ in, not by where each name was cut.
    assert {"vectorized_elementwise_kernel<CUDAFunctor_add<float>>", "vectorized_elementwise_kernel<float16_copy_kernel_cuda>",
            "vectorized_elementwise_kernel<FillFunctor<Half>>", "vectorized_elementwise_kernel<FillFunctor<int>>"} <= set(names)
    assert not any("…" in name or "(" in name for name in names)
    assert closed_if_cut("void f<int, g(at::Ten…") == "void f<int, g(at::Ten)>" and closed_if_cut("k<a>(int)") == "k<a>(int)"


def test_a_diff_of_two_cut_stats_consoles_matches_their_kernels():
    before = FOUND_STATS / "nsys2026.1_stats_console_moe_expert_loop_cut_names.txt"
    after = FOUND_STATS / "nsys2026.1_stats_console_moe_batched_gemm_cut_names.txt"
    result = runner.invoke(app, ["diff", str(before), str(after), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = {row["short_name"]: row for row in report["kernels"]}
    assert rows["gemvx::kernel"]["status"] == "vanished"
    assert rows["vectorized_elementwise_kernel<float16_copy_kernel_cuda>"]["change_pct"] == pytest.approx(100 * (495841 / 36359468 - 1))
    assert report["total"]["change_pct"] == pytest.approx(100 * (285_073_418 / 362_818_668 - 1))


def test_a_gpu_name_nsys_cut_to_its_width_loses_its_trailing_blank(realdata_file, tmp_path):
    # A 2021 export of a laptop run (github mabdullahsoyturk/cardiac-simulation, report1.sqlite) records its GPU as
    # "NVIDIA GeForce RTX 3060 Laptop ": nsys cuts names to a fixed width. The device line showed the blank.
    path = tmp_path / "cut_name.sqlite"
    shutil.copy(realdata_file("nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite"), path)
    connection = sqlite3.connect(path)
    connection.execute("UPDATE TARGET_INFO_GPU SET name = 'NVIDIA GeForce RTX 3060 Laptop '")
    connection.commit()
    connection.close()
    assert load_trace(path).data.gpus["name"].to_list() == ["NVIDIA GeForce RTX 3060 Laptop"]


def test_a_mig_slice_is_measured_against_its_own_bandwidth_and_its_printed_output_is_no_damage():
    # A real export on an A30 MIG 2g.12gb (tests/fixtures/found/PROVENANCE.md): nsys records the slice's 28 SMs and
    # 466.56 GB/s. The GPU table has the whole A30 (933 GB/s, 56 SMs): it must not lend the slice its peaks.
    path = FOUND_STATS / "nsys2023.3_a30_mig_2g12gb_nussinov_program_output_in_string_ids.sqlite"
    data = analyze_json(path)
    assert data["device"]["name"] == "NVIDIA A30 MIG 2g.12gb" and data["device"]["table_entry"] is None
    assert data["device"]["peaks"]["dram_bytes_per_s"] == {"value": 466.56e9, "source": "profile"}
    # StringIds also holds the program's own printed output (83,045 characters) that names no kernel: no "damaged" note.
    assert not any("longer than 65,536 characters" in note for note in data["notes"])
    assert [k["short_name"] for k in data["kernels"]] == ["nussinov_gpu"]


def test_nsys_analyze_rules_after_the_stats_reports_are_read_as_evidence():
    # A real `nsys profile --stats=true` capture followed by `nsys analyze` (nsys 2025.3.2; PROVENANCE.md). The rule
    # tables were "reports not read", and the note asked for the SQLite export to see pageable copies while the
    # cuda_memcpy_sync table listed three of them. nsys prints the null Green Context ID as nothing at all, so those rows
    # have one value fewer than the header, and two header names sit a column past their dashes.
    path = FOUND_STATS / "nsys_2025.3_stats_then_analyze_console.txt"
    stats = load_trace(path).data
    sync = stats.rules["cuda_memcpy_sync"]
    assert sync.height == 3 and sync["api_name"].to_list() == ["cudaMemcpy_v3020"] * 3 and sync["stream_id"].to_list() == [7] * 3
    assert sync["bytes"].to_list() == [4.194e6] * 3 and sync["src_kind"].to_list() == ["Device", "Pageable", "Pageable"]
    assert stats.rules["gpu_time_util"].row(0, named=True)["in_use_pct"] == 40.9
    assert stats.rule_outcomes["cuda_memcpy_async"].startswith("no problems")
    assert stats.rule_outcomes["cuda_memset_sync"].startswith("skipped: report1.sqlite could not be analyzed")
    result = analyze_json(path)
    findings = {f["rule"]: f for f in result["timeline"]["findings"]}
    assert findings["cuda_memcpy_sync"]["cost_ns"] == 1_008_390 + 577_585 + 576_465
    assert "3 synchronous memcpy calls (cudaMemcpy_v3020)" in findings["cuda_memcpy_sync"]["message"]
    assert "3 of them from or to pageable memory" in findings["cuda_memcpy_sync"]["message"]
    # The API summary's blocking calls no longer count the copies the rule's table holds: the synchronize alone.
    assert findings["cuda_api_sync"]["cost_ns"] == 2_645_612 and "(synchronize)" in findings["cuda_api_sync"]["message"]
    assert findings["gpu_time_util"]["cost_ns"] == int(169_086 * (1 - 0.409))
    notes = " ".join(result["notes"])
    assert "cuda_memcpy_async: no problems" in notes and "gpu_gaps: no problems" in notes
    assert "pageable copies need" not in notes and "idle gaps' causes need the SQLite export" in notes
    assert result["kernels"][0]["short_name"] == "matrixMulKernel"


def test_nsys_analyze_output_alone(tmp_path):
    # The same run's `nsys analyze` output by itself was "not a supported trace".
    path = FOUND_STATS / "nsys_2025.3_analyze_console.txt"
    assert detect_format(path) == TraceFormat.NSYS_STATS
    result = analyze_json(path)
    rules = [f["rule"] for f in result["timeline"]["findings"]]
    assert rules == ["cuda_api_sync", "cuda_memcpy_sync", "gpu_time_util"]
    # One synchronize in the run is the host waiting for its result, not a synchronize in a loop.
    assert "only 1 synchronize call in the run" in result["timeline"]["findings"][0]["advice"]
    assert any("lists no kernels" in note for note in result["notes"])
    # `--format csv`: the same banners, then each table as CSV; an async copy from pageable memory names its rule by
    # its calls where no banner says which memcpy rule printed it.
    csv_form = tmp_path / "analyze.csv"
    csv_form.write_text(
        "Duration (ns),Start (ns),Src Kind,Dst Kind,Bytes (MB),PID,Device ID,Context ID,Green Context ID,Stream ID,API Name\n"
        + "".join(f"{1000 + i},{i * 10_000},Pageable,Device,1.000,42,0,1,,7,cudaMemcpyAsync_v3020\n" for i in range(50)))
    finding = analyze_json(csv_form)["timeline"]["findings"][0]
    assert finding["rule"] == "cuda_memcpy_async" and finding["evidence"]["copies"] == 50
    assert "at least 50 asynchronous copies" in finding["message"] and "rows=-1" in finding["message"]


def test_console_gpu_traces_of_2020_and_of_nsys_nvprof_are_read():
    # Two real console per-launch traces were "not a supported trace" (PROVENANCE.md). nsys 2020.4's `gputrace`:
    # `Start(sec)  Duration(nsec)`, no space before the unit, start times in seconds, sizes as a `Bytes` count, and a
    # three-dash `Ctx` column; named by its `Exporting [.../gputrace.py ...] to console...` line.
    old = analyze_json(FOUND_STATS / "nsys2020.4_stats_then_gputrace_a100_openmp_offload.txt")
    assert old["device"]["table_entry"] == "a100-40gb"
    device = old["timeline"]["devices"][0]
    assert device["span_ns"] == 366_436_954 - 355_442_000  # 0.355442 s to 0.366043 s + 393,954 ns
    copies = {c["direction"]: c for c in old["timeline"]["copies"]}
    assert copies["HtoD"]["bytes"] == 4 + 3 * 4_000_000 and copies["DtoH"]["bytes"] == 1 + 3 * 4_000_000
    assert copies["HtoD"]["pageable_count"] == 4 and copies["HtoD"]["link"] == "PCIe Gen4 x16"
    assert copies["HtoD"]["gb_per_s"] == pytest.approx(12_000_004 / (2_911 + 1_400_294 + 1_399_398 + 1_392_358))
    assert any("printed in sec and are converted" in note for note in old["notes"])
    # `nsys nvprof --print-gpu-trace` of nsys 2024+: the header a column left of its dashes. Copies of a few bytes
    # print `0.000` MB: their size is unknown, and no rate of 0 B/s is made of them.
    new = analyze_json(FOUND_STATS / "nsys2024_nvprof_print_gpu_trace_rtx3060_cppintegration.txt")
    assert new["device"]["table_entry"] == "rtx3060" and [k["short_name"] for k in new["kernels"]] == ["kernel2", "kernel"]
    assert all(c["bytes"] is None and c["gb_per_s"] is None and c["count"] == 2 for c in new["timeline"]["copies"])


def test_nsys_2020_size_summary_in_kib(tmp_path):
    # The same real capture without its gputrace: nsys 2020 titled the size table `(by size in KiB)` and named its
    # columns `Total`, `Average`: the copies had no size at all. 11,718.754 KiB is the gputrace's 12,000,004 bytes.
    text = (FOUND_STATS / "nsys2020.4_stats_then_gputrace_a100_openmp_offload.txt").read_text()
    summaries = tmp_path / "stats_2020.txt"
    summaries.write_text(text[:text.index("> nsys stats --report gputrace")])
    copies = {c["direction"]: c for c in analyze_json(summaries)["timeline"]["copies"]}
    assert copies["[CUDA memcpy HtoD]"]["bytes"] == pytest.approx(12_000_004, abs=1)
    assert copies["[CUDA memcpy DtoH]"]["gb_per_s"] == pytest.approx(11_718.751 * 1024 / 1_144_134)


def test_a_damaged_nsys_analyze_table_is_no_internal_error(tmp_path):
    # A mutant of the real analyze capture (found by tests/fuzz_real_files-style mutation): a gpu_time_util row whose
    # In-Use column is gone, and a row with no duration, gave a TypeError where a finding is written.
    text = (FOUND_STATS / "nsys_2025.3_analyze_console.txt").read_text()
    damaged = tmp_path / "damaged.txt"
    damaged.write_text(text.replace("    1        40.9        169,086", "    1           -        169,086")
                       .replace("       577,585  357,164,672", "             -  357,164,672"))
    findings = {f["rule"]: f for f in analyze_json(damaged)["timeline"]["findings"]}
    assert "as low as" not in findings["gpu_time_util"]["message"]
    assert findings["cuda_memcpy_sync"]["evidence"]["calls"] == 2


def test_a_finding_share_of_a_table_cut_by_hand_is_of_the_whole_run(realdata_file):
    # The real `nsys stats --format table` README: 11 kernel rows and then a `...`. Its FP32 GEMMs (8.17 s) were called
    # "55.1% of kernel time", a share of the rows shown; nsys's own Time(%) of those rows adds up to 41.8% of the run.
    path = realdata_file("nsys_stats/nsys_stats_table_format_gpukernsum_nccl_allreduce_ddp_a100_awsdoeks_README.md")
    finding = next(f for f in analyze_json(path)["timeline"]["findings"] if f["rule"] == "fp32_matrix_math")
    assert "8.17 s, 41.7% of kernel time" in finding["message"]


def test_the_copies_columns_are_chunked_alike_when_the_memsets_are_read_in_several_chunks(realdata_file, monkeypatch):
    # A frame whose columns are chunked differently is laid out again whole by every later polars operation on it
    # (0.15 GB for a moment on the 10 M-launch export); the memsets' constant columns came out as one chunk where the
    # others had one per range read.
    monkeypatch.setattr(nsys_sqlite, "_CHUNK_ROWS", 5)
    monkeypatch.setattr(nsys_sqlite, "_SPLIT_ROWS", 5)
    memops = load_trace(realdata_file(H100)).data.memops
    assert (memops["operation"] == "memset").sum() == 22 and memops.height == 926
    layouts = {name: [chunk.len() for chunk in memops[name].get_chunks()] for name in memops.columns}
    assert len({tuple(lengths) for lengths in layouts.values()}) == 1, layouts
