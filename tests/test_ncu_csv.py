"""The ncu CSV parser against every real Nsight Compute CSV in ../shared/realdata."""

from __future__ import annotations

import csv
import io

import pytest

from ncu_truth import details_truth, raw_truth
from traceview.parsers import TraceFormat, detect_format, load_trace
from traceview.parsers.ncu_csv import short_kernel_name
from traceview.parsers.schema import KERNELS

DETAILS = [
    "ncu_details/ncu2019.5_v100_aws_bfs_small_xplacer.log",
    "ncu_details/ncu2019.5_v100_aws_cfd_stdout_mixed_xplacer.log",
    "ncu_details/ncu2019.5_v100_aws_cfd_thousands_sep_xplacer.log",
    "ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv",
    "ncu_details/ncu2025.1_cc120_elementwise_membound_details_llmperfopt.csv",
    "ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv",
]


@pytest.mark.parametrize("relative", DETAILS)
def test_details_pages_match_the_files(realdata_file, relative):
    path = realdata_file(relative)
    truth = details_truth(path)
    trace = load_trace(path)
    frame = trace.data
    assert trace.format == TraceFormat.NCU_DETAILS
    assert frame.schema == KERNELS
    assert frame.height == truth["launches"]
    assert dict(frame.group_by("kernel_name").len().iter_rows()) == dict(truth["names"])
    parsed = {str(k): v for k, v in frame.select("launch_id", "duration_ns").iter_rows()}
    assert parsed == pytest.approx(truth["durations"])


def test_raw_page_matches_the_file(realdata_file):
    path = realdata_file("ncu_raw/mudock_gtx1650_full_raw.csv")
    truth = raw_truth(path)
    trace = load_trace(path)
    frame = trace.data
    assert trace.format == TraceFormat.NCU_RAW
    assert frame.height == truth["launches"] == 6
    assert dict(frame.group_by("kernel_name").len().iter_rows()) == dict(truth["names"])
    assert {str(k): v for k, v in frame.select("launch_id", "duration_ns").iter_rows()} == truth["durations"]
    first = frame.row(0, named=True)
    # Values read by hand from row ID 0 of the file.
    assert first["duration_ns"] == 123_493_984
    assert first["device_name"] == "NVIDIA GeForce GTX 1650"
    assert first["compute_capability"] == "7.5"
    assert first["sm_count"] == 16
    assert first["dram_bytes"] == pytest.approx(6_808_840_416 + 1_971_680, rel=1e-3)
    assert first["sm_throughput_pct"] == 9.32
    assert first["memory_throughput_pct"] == 49.09
    assert first["waves_per_sm"] == 2
    assert first["grid_size"] == "(512, 1, 1)" and first["block_size"] == "(32, 1, 1)"
    # Peaks from the profile itself: 32 B/cycle × 3.5109 GHz DRAM; 2,048 FLOP/cycle × 1.3230 GHz SM.
    assert first["peak_dram_bytes_per_s"] == pytest.approx(32 * 3_510_932_224.84)
    assert first["peak_fp32_flop_per_s"] == pytest.approx(2048 * 1_322_957_460.83)
    # FP32 work from the per-cycle rates: (2·13.40 + 5.79 + fmul) inst/cycle × smsp clock.
    assert first["fp32_flop_per_s"] > (2 * 13.40 + 5.79) * 1_322_957_460.83 * 0.999


def test_2025_details_units_and_rules(realdata_file):
    frame = load_trace(realdata_file("ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv")).data
    row = frame.row(0, named=True)
    assert row["duration_ns"] == pytest.approx(6750)  # "gpu__time_duration.sum","us","6.75"
    assert row["sm_clock_hz"] == pytest.approx(2.0e9, rel=0.01)  # Ghz
    assert row["compute_capability"] == "12.0"
    assert row["grid_size"] == "(224, 1, 1)"
    rules = {r["name"]: r for r in row["ncu_rules"]}
    assert rules["TheoreticalOccupancy"]["speedup_pct"] == 80.34
    assert rules["TheoreticalOccupancy"]["speedup_type"] == "global"
    assert rules["SOLBottleneck"]["section"] == "SpeedOfLight"


def test_2025_auto_scaled_byte_units(realdata_file):
    row = load_trace(realdata_file("ncu_details/ncu2025.1_cc120_elementwise_membound_details_llmperfopt.csv")).data.row(0, named=True)
    assert row["dram_bytes"] == pytest.approx(17.23e6 + 1.28e3)  # read 17.23 Mbyte + write 1.28 Kbyte
    assert row["memory_throughput_pct"] == 93.99 and row["sm_throughput_pct"] == 12.07


def test_2025_tensor_ops_and_dram_bytes(realdata_file):
    row = load_trace(realdata_file("ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv")).data.row(0, named=True)
    assert row["tensor_flop"] == 12_532_580_352
    assert row["tensor_dtype"] == "bf16_dst_fp32"
    assert row["dram_bytes"] == pytest.approx(17.50e6)  # read 17.50 Mbyte + write 0 byte
    assert row["duration_ns"] == pytest.approx(111_810)


def test_roofline_chart_section_export_with_body_item_label(realdata_file):
    frame = load_trace(realdata_file("ncu_details/ncu2025.1_cc120_cutlass_gemm_rooflinechart_section_llmperfopt.csv")).data
    row = frame.row(0, named=True)
    assert frame.height == 1
    assert row["duration_ns"] is None  # the section export carries no duration
    # 43,520 FLOP/cycle × 2.01 GHz and 128 B/cycle × 13.78 GHz (formats.md §1.6).
    assert row["peak_fp32_flop_per_s"] == pytest.approx(43_520 * 2.01e9)
    assert row["peak_dram_bytes_per_s"] == pytest.approx(128 * 13.78e9)
    assert row["fp32_flop_per_s"] == pytest.approx(72.76 * 2.01e9)
    assert row["dram_bytes_per_s"] == pytest.approx(156.55e9)


def test_2019_sizes_come_from_launch_statistics_rows(realdata_file):
    frame = load_trace(realdata_file("ncu_details/ncu2019.5_v100_aws_bfs_small_xplacer.log")).data
    first = frame.row(0, named=True)
    assert first["block_size"] == "512" and first["grid_size"] == "8"
    assert first["waves_per_sm"] == 0.03
    assert first["device_name"] is None and first["compute_capability"] is None


def test_thousands_separators_do_not_change_values(realdata_file):
    plain = load_trace(realdata_file("ncu_details/ncu2019.5_v100_aws_cfd_stdout_mixed_xplacer.log")).data
    grouped = load_trace(realdata_file("ncu_details/ncu2019.5_v100_aws_cfd_thousands_sep_xplacer.log")).data
    assert plain["dram_clock_hz"][0] == pytest.approx(768_683_274.02)
    assert grouped["dram_clock_hz"][0] == pytest.approx(795_373_665.48)
    assert grouped["sm_clock_hz"][0] == pytest.approx(1_177_954_478.05)


@pytest.mark.parametrize("sample", sorted(p.name for p in (__import__("conftest").SAMPLES / "ncu").glob("*.csv")))
def test_bundled_samples_parse(sample):
    from conftest import SAMPLES

    path = SAMPLES / "ncu" / sample
    assert detect_format(path) in (TraceFormat.NCU_DETAILS, TraceFormat.NCU_RAW)
    assert load_trace(path).data.height > 0


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("cuda_compute_step_factor(int,float*,float*,float*)", "cuda_compute_step_factor"),
        ("void Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>(Params)", "Kernel2"),
        ("void elementwise_kernel<128, 4, void gpu_kernel_impl_nocast<CUDAFunctor_add<BFloat16>>(TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)", "elementwise_kernel"),
        ("enable_if<!T7, void>::type kernel<int, int, __nv_bfloat16>(T13)", "kernel"),
        ("void cutlass::Kernel2<x>(T1::Params)", "Kernel2"),
        ("calc_energy", "calc_energy"),
    ],
)
def test_short_kernel_name(name, short):
    assert short_kernel_name(name) == short


def _decimal_comma_copy(source, target):
    """The export as a decimal-comma locale writes it: `9,495.42` → `9.495,42`, `13,485` → `13.485`."""
    import csv
    import io
    import re

    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    units_rows = 2 if "Metric Name" not in lines[start] else 1  # the raw page's units row stays as it is

    def localised(cell):
        if re.fullmatch(r"-?[\d,]+(\.\d+)?", cell) and any(ch.isdigit() for ch in cell):
            whole, _, fraction = cell.partition(".")
            return whole.replace(",", ".") + ("," + fraction if fraction else "")
        return cell

    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for index, row in enumerate(csv.reader(io.StringIO("".join(lines[start:])))):
        writer.writerow(row if index < units_rows else [localised(cell) for cell in row])
    target.write_text("".join(lines[:start]) + out.getvalue(), encoding="utf-8")
    return target


@pytest.mark.parametrize("relative", ["ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv", "ncu_raw/mudock_gtx1650_full_raw.csv"])
def test_a_decimal_comma_locale_reads_the_same_numbers(realdata_file, tmp_path, relative):
    # A European-locale ncu writes `9.495,42` for 9495.42 (formats.md §1.4, reported); every number must come out the same.
    original = load_trace(realdata_file(relative))
    localised = load_trace(_decimal_comma_copy(realdata_file(relative), tmp_path / "de.csv"))
    assert localised.data.equals(original.data)
    assert any("decimal comma" in note for note in localised.notes) and not any("decimal comma" in note for note in original.notes)


def test_mangled_kernel_names_give_the_demangled_short_name(realdata_file):
    # `ncu --print-kernel-base mangled` and nsys's `:mangled` reports print Itanium names (`_ZN5cudnn6detail23
    # implicit_convolve_sgemmIff…`); every real export keeps both spellings of each kernel, which must agree.
    import glob
    import sqlite3

    pairs = []
    for path in sorted(glob.glob(str(realdata_file("nsys_sqlite")) + "/*.sqlite")):
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchone():
                pairs += connection.execute("""SELECT DISTINCT m.value, d.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
                    JOIN StringIds m ON m.id = k.mangledName JOIN StringIds d ON d.id = k.demangledName""").fetchall()
        finally:
            connection.close()
    mangled = [(m, d) for m, d in pairs if m.startswith("_Z")]
    assert len(mangled) >= 80
    assert [short_kernel_name(m) for m, _ in mangled] == [short_kernel_name(d) for _, d in mangled]
    assert short_kernel_name("_Zfoo") == "_Zfoo"  # not a mangled form: left as it is


def test_nersc_cache_byte_counts_fill_in_only_where_ncus_chart_metrics_are_missing(realdata_file, tmp_path):
    # `--metrics ...,lts__t_bytes.sum,l1tex__t_bytes.sum` (NERSC's hierarchical roofline, and most hand-picked metric
    # lists). Built from the real full raw page: once with the NERSC counts added (ncu's chart metrics win), once with
    # only the identity columns, DRAM bytes, time and the NERSC counts (then they are the L2 and L1 bytes, said in a note).
    import csv

    from traceview.parsers import load_trace

    source = realdata_file("ncu_raw/mudock_gtx1650_full_raw.csv")
    lines = source.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    header, units, *rows = list(csv.reader(lines[start:]))
    original = load_trace(source).data
    keep = [i for i, name in enumerate(header) if i < 11 or name in ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")]
    for name, columns in (("with_charts.csv", list(range(len(header)))), ("nersc_only.csv", keep)):
        path = tmp_path / name
        with path.open("w", newline="") as stream:
            writer = csv.writer(stream, quoting=csv.QUOTE_ALL)
            writer.writerow([header[i] for i in columns] + ["lts__t_bytes.sum", "l1tex__t_bytes.sum"])
            writer.writerow([units[i] for i in columns] + ["Mbyte", "Gbyte"])
            writer.writerows([[row[i] for i in columns] + ["1,234.50", "2.50"] for row in rows])
        trace = load_trace(path)
        if name == "with_charts.csv":
            assert trace.data["l2_bytes"].to_list() == original["l2_bytes"].to_list()
            assert not [n for n in trace.notes if "NERSC" in n]
        else:
            assert trace.data["l2_bytes"].to_list() == [1234.5e6] * len(rows)
            assert trace.data["l1_bytes"].to_list() == [2.5e9] * len(rows)
            duration_s = trace.data["duration_ns"] / 1e9
            assert trace.data["l2_bytes_per_s"].to_list() == pytest.approx((1234.5e6 / duration_s).to_list())
            assert trace.data["dram_bytes"].to_list() == original["dram_bytes"].to_list()
            assert any("NERSC" in n and "lts__t_bytes.sum" in n for n in trace.notes)


def test_a_cc_10_csv_in_base_units_from_a_benchmark_harness():
    # superbench's cuBLASLt FP8 GEMM on a CC 10.0 GPU with 152 SMs (tests/fixtures/found/PROVENANCE.md): base units
    # (hz, ns, byte), the harness's own lines before the header.
    from pathlib import Path

    from traceview.analyzer.analysis import Source, analyze

    path = Path(__file__).parent / "fixtures" / "found" / "ncu_csv_cc100_cublaslt_fp8_gemm_superbench.csv"
    assert detect_format(path) == TraceFormat.NCU_DETAILS
    trace = load_trace(path)
    launch = trace.data.row(0, named=True)
    assert launch["duration_ns"] == 406240 and launch["sm_clock_hz"] == pytest.approx(1239496049.13)
    assert launch["sm_count"] == 152 and launch["registers_per_thread"] == 168 and launch["shared_bytes_per_block"] == 205696
    analysis = analyze(trace.data, Source(str(path), trace.format, "", 0))
    kernel = analysis.kernels.row(0, named=True)
    assert kernel["bound"] == "latency" and kernel["recoverable_ns"] == pytest.approx(406240 * 0.5)  # the global tail-effect estimate
    assert kernel["occupancy"]["tail"]["full_waves"] == 1
    # The table's one CC 10.0 GPU (B200) has 148 SMs: no peaks are borrowed for a 152-SM part.
    assert analysis.device.spec is None and "152 SMs matches no GPU" in analysis.device.how_identified


def test_a_device_column_that_holds_a_name_names_the_gpu(realdata_file, tmp_path):
    # Real exports put the device's index in the Device column ("0"); public parsers' fixtures show a name there. Such
    # a column is taken as the GPU's name. Made from the real 2025.1 GEMV export by writing a name into that column.
    text = realdata_file("ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv").read_text()
    path = tmp_path / "named.csv"
    assert text.count('"(224, 1, 1)","0","12.0"') == 48
    path.write_text(text.replace('"(224, 1, 1)","0","12.0"', '"(224, 1, 1)","NVIDIA GeForce RTX 5090","12.0"'))
    launch = load_trace(path).data.row(0, named=True)
    assert launch["device_name"] == "NVIDIA GeForce RTX 5090" and launch["device_index"] is None


def test_instanced_metrics_exported_with_their_instances_read_as_their_aggregate(realdata_file, tmp_path):
    # `ncu -i R --page raw --csv --print-metric-instances values` writes an instanced metric as its aggregate followed by
    # the instances, `6,808,840,416 (3,404,420,208;3,404,420,208)`; `details` names each instance. The grammar is the
    # one two public scripts parse (search index documents 52234995240 and 69529352898); no such export is saved, so
    # the real raw page gets instance lists planted behind its own aggregates.
    original = realdata_file("ncu_raw/mudock_gtx1650_full_raw.csv")
    lines = original.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.reader(io.StringIO("".join(lines[start:]))))
    header = rows[0]
    dram, opcodes = header.index("dram__bytes_read.sum"), header.index("sass__inst_executed_per_opcode")
    for row in rows[2:]:
        row[dram] = f"{row[dram]} (1,000;2,000)"
        row[opcodes] = f"{row[opcodes]} (FFMA: 7; LDG: 5)"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    planted = tmp_path / "instances.csv"
    planted.write_text("".join(lines[:start]) + out.getvalue())
    assert load_trace(planted).data.equals(load_trace(original).data)
    assert load_trace(planted).data["dram_bytes"].null_count() == 0
