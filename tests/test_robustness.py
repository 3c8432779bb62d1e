"""The inputs and outputs users actually have: paths with pattern characters, FIFOs, symlinks, devices, full disks,
hostile names in the terminal, .nsys-rep files, sizes without units, ambiguous GPU names. Each case failed before."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app

runner = CliRunner()
GEMV = "ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv"
GEMM = "ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv"


def one_line_error(result, *fragments):
    assert result.exit_code == 1, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_a_path_is_a_path_not_a_pattern(realdata_file, tmp_path):
    shutil.copy(realdata_file(GEMV), tmp_path / "run[1].csv")
    shutil.copy(realdata_file(GEMV), tmp_path / "run*.csv")
    shutil.copy(realdata_file(GEMM), tmp_path / "runB.csv")  # a sibling that `run*.csv` as a glob would merge
    for name in ("run[1].csv", "run*.csv"):
        result = invoke("analyze", tmp_path / name, "-f", "json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["summary"]["launches"] == 1


def test_sqlite_paths_with_uri_characters(realdata_file, tmp_path):
    source = realdata_file("nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite")
    shutil.copy(source, tmp_path / "a%41.sqlite")
    shutil.copy(source, tmp_path / "run#1.sqlite")
    for name in ("a%41.sqlite", "run#1.sqlite"):
        assert invoke("analyze", tmp_path / name, "-f", "json").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a%41.sqlite", "run#1.sqlite"]  # nothing created beside them


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    one_line_error(invoke("analyze", fifo), "not a regular file")


def test_outputs_never_go_through_links_or_onto_directories_and_devices(realdata_file, tmp_path):
    link = tmp_path / "report.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    one_line_error(invoke("analyze", realdata_file(GEMV), "-o", link, "--force"), "symbolic link")
    assert not (tmp_path / "elsewhere.json").exists()
    one_line_error(invoke("analyze", realdata_file(GEMV), "-o", tmp_path, "--force"), "not a regular file")
    one_line_error(invoke("analyze", realdata_file(GEMV), "-o", "/dev/null", "--force"), "not a regular file")
    one_line_error(invoke("analyze", realdata_file(GEMV), "-o", tmp_path / "missing" / "r.json"), "not an existing folder")


def test_a_full_disk_on_stdout_is_one_line(realdata_file):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "traceview", "analyze", str(realdata_file(GEMV)), "-f", "json"],
                                stdout=full, stderr=subprocess.PIPE, text=True, check=False)
    assert result.returncode == 1 and result.stderr.strip().startswith("Error: cannot write to standard output")
    assert "Traceback" not in result.stderr


def test_nsys_rep_says_how_to_export(tmp_path):
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\x1f\x8b\x08\x00binary\x00report")
    one_line_error(invoke("analyze", report), "nsys export --type sqlite")


def test_a_git_lfs_pointer_says_to_fetch_the_file(tmp_path):
    # A repository cloned without Git LFS holds these lines in place of its exports (seen in real repositories that
    # commit their nsys exports: koshiq/WikiText102-Optimizations-CUDA-vs-Mojo's report1.sqlite).
    pointer = tmp_path / "report1.sqlite"
    pointer.write_text("version https://git-lfs.github.com/spec/v1\n"
                       "oid sha256:a1c2af0d6058114d6a1c2a21e86fbe5812197ea2d6e4293dcf997dd24db63123\nsize 552960\n")
    one_line_error(invoke("analyze", pointer), "a Git LFS pointer, not the file itself (the file is 552,960 bytes)", "git lfs pull")


def test_ncu_listings_are_named_for_what_they_are(realdata_file):
    # What ncu prints when asked what it can measure, saved beside results in real repositories: `--list-sections`
    # (../shared/realdata/other) and `--query-metrics` (tests/fixtures/found_not_traces, its provenance in
    # tests/fixtures/found/PROVENANCE.md; a copy cut above its header).
    from pathlib import Path

    one_line_error(invoke("analyze", realdata_file("other/ncu2025.1.1_list_sections_llmperfopt.txt")),
                   "this is ncu --list-sections output", "not profiling results", "ncu --set full -o report")
    one_line_error(invoke("analyze", Path(__file__).parent / "fixtures" / "found_not_traces" / "ncu_query_metrics_excerpt.txt"),
                   "this is ncu --query-metrics output")


def test_sizes_need_units_and_gpu_families_are_ambiguous():
    one_line_error(invoke("decode", "--weights", "4.2", "--gpu", "h100-sxm"), "no unit", "4.2GB")
    one_line_error(invoke("decode", "--weights", "4.2GB", "--gpu", "a100"), "a100-80gb", "a100-40gb")
    assert invoke("decode", "--weights", "4.2GB", "--gpu", "a100-80gb").exit_code == 0


def test_hostile_names_are_inert_in_the_terminal(realdata_file, tmp_path):
    import csv

    header, *rows = realdata_file(GEMV).read_text().splitlines(keepends=True)
    name = next(csv.DictReader([header, rows[0]]))["Kernel Name"]
    hostile = "\x1b]0;pwned\x07\x1b[2J" + "\u202e<script>|=cmd" + "A" * 300_000
    path = tmp_path / "hostile.csv"
    path.write_text(header + "".join(row.replace(name, hostile) for row in rows))
    result = invoke("analyze", path)
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout and "\x07" not in result.stdout
    assert "\\x1b" in result.stdout and len(result.stdout) < 60_000
    data = json.loads(invoke("analyze", path, "-f", "json").stdout)
    assert data["kernels"][0]["name"].startswith(hostile[:20])  # JSON keeps the exact name


def test_cr_only_line_ends_are_one_line(realdata_file, tmp_path):
    path = tmp_path / "mac.csv"
    path.write_bytes(realdata_file(GEMV).read_bytes().replace(b"\n", b"\r"))
    one_line_error(invoke("analyze", path), "carriage return")


def test_a_failed_launch_is_reported_as_failed_and_json_has_no_nan(realdata_file, tmp_path):
    import csv
    import io

    lines = realdata_file("ncu_raw/mudock_gtx1650_full_raw.csv").read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    header = next(csv.reader([lines[start]]))
    identity = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC"}
    last = next(csv.reader([lines[-1]]))
    failed = [value if column in identity else "nan" for column, value in zip(header, last, strict=True)]
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(failed)
    path = tmp_path / "failed.csv"
    path.write_text("".join(lines[:-1]) + buffer.getvalue())
    durations = [float(row["gpu__time_duration.sum"].replace(",", "")) for row in csv.DictReader(lines[start:-1]) if row["ID"] != ""]

    result = invoke("analyze", path, "-f", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    kernel = data["kernels"][0]
    assert (kernel["launches"], kernel["failed_launches"]) == (6, 1)
    assert kernel["duration_ns"] == pytest.approx(sum(durations))  # the five measured launches
    assert any("failed under profiling" in note for note in data["notes"])
    launches = json.loads(invoke("analyze", path, "-f", "json", "--per-launch").stdout)["launches"]
    assert [launch["label"] for launch in launches].count("launch failed") == 1


def _failed_like_ncu(header: list[str], measured_row: list[str], launch_id: str) -> list[str]:
    """A failed launch's row as ncu writes it on the raw page (muDock's full GTX 1650 export, row 190, whose capture
    ended in `==ERROR== LaunchFailed`): block and grid (0, 0, 0), the device attributes, peak constants and launch
    configuration still filled in, derived counts 0, every measurement nan."""
    kept = {"Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Device", "CC"}
    row = []
    for column, value in zip(header, measured_row, strict=True):
        if column == "ID":
            row.append(launch_id)
        elif column in ("Block Size", "Grid Size"):
            row.append("(0, 0, 0)")
        elif column in kept or column.startswith(("device__attribute_", "launch__")) or ".peak_sustained" in column:
            row.append(value)
        else:
            row.append("0" if column.startswith("derived__") else "nan")
    return row


def test_a_failed_launch_with_its_constants_filled_in_keeps_the_kernels_measured_time(realdata_file, tmp_path):
    # Issue 31: ncu keeps the peak constants and launch configuration of a failed launch, so "every cell nan" never
    # held and the kernel's whole time read as n/a ("averaged over 6 launches (no durations)").
    import csv
    import io

    lines = realdata_file("ncu_raw/mudock_gtx1650_full_raw.csv").read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    header = next(csv.reader([lines[start]]))
    measured = lines[:start + 2 + 5]  # preamble, header, units and launches 0-4
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(_failed_like_ncu(header, next(csv.reader([lines[start + 6]])), "5"))
    path = tmp_path / "failed.csv"
    path.write_text("".join(measured) + buffer.getvalue())
    durations = [float(row["gpu__time_duration.sum"].replace(",", "")) for row in csv.DictReader(measured[start:]) if row["ID"] != ""]
    assert len(durations) == 5

    data = json.loads(invoke("analyze", path, "-f", "json").stdout)
    kernel = data["kernels"][0]
    assert (kernel["launches"], kernel["failed_launches"]) == (6, 1)
    assert kernel["duration_ns"] == pytest.approx(sum(durations))
    assert data["summary"]["total_duration_ns"] == pytest.approx(sum(durations))
    assert kernel["recoverable_ns"] is not None
    assert "over 5 launches" in kernel["reason"] and "no durations" not in kernel["reason"]
    assert any("failed under profiling" in note and "calc_energy" in note for note in data["notes"])
    assert "6 (1 failed)" in invoke("analyze", path).stdout


def test_a_failed_launch_on_the_details_page_keeps_the_kernels_measured_time(realdata_file, tmp_path):
    # The same launch on the details page: every measured value nan, its grid 0 (2019.5 prints launch statistics as rows).
    import csv
    import io

    lines = realdata_file("ncu_details/ncu2019.5_v100_aws_bfs_small_xplacer.log").read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    rows = list(csv.reader(lines[start:]))
    header, body = rows[0], rows[1:]
    column = {name: i for i, name in enumerate(header)}
    last_id = body[-1][0]
    durations = [float(r[column["Metric Value"]]) for r in body if r[column["Metric Name"]] == "Duration" and r[0] != last_id]
    for r in body:
        if r[0] == last_id:
            r[column["Metric Value"]] = "0" if r[column["Metric Name"]] in ("Grid Size", "Block Size") else "nan"
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path = tmp_path / "failed_details.csv"
    path.write_text("".join(lines[:start]) + buffer.getvalue())

    data = json.loads(invoke("analyze", path, "-f", "json").stdout)
    assert sum(k["failed_launches"] for k in data["kernels"]) == 1
    assert data["summary"]["total_duration_ns"] == pytest.approx(sum(durations))
    assert all(k["duration_ns"] is not None for k in data["kernels"])


@pytest.mark.parametrize("relative", [
    "ncu_details/ncu2019.5_v100_aws_cfd_stdout_mixed_xplacer.log",
    "tegrastats/xavier_nx_jp5_nosudo_ts_tegra_burn.log",
    "llama_cpp/timings_server_rtx3060_issue12237.txt",
])
def test_a_file_cut_short_says_so(realdata_file, tmp_path, relative):
    """Cut at a line end without the final newline (a copy cut short that still parses): the output says so, and
    the partial launch or sample is left out rather than reported with missing metrics."""
    lines = realdata_file(relative).read_bytes().split(b"\n")
    keep = max(3, len(lines) // 2)
    path = tmp_path / f"cut{realdata_file(relative).suffix}"
    path.write_bytes(b"\n".join(lines[:keep]).rstrip(b"\n"))
    result = invoke("analyze", path, "-f", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert any("cut short" in note for note in data["notes"])
    if relative.startswith("ncu_details"):
        ids = {line.split(b'","')[0] for line in lines[:keep] if line.startswith(b'"') and not line.startswith(b'"ID"')}
        assert data["summary"]["launches"] == len(ids) - 1  # the launch the cut went through is left out


def abort_like_the_reader(path):
    """What NVIDIA's reader does on some damaged reports: abort the whole process (exit 134)."""
    os.abort()


def test_a_reader_abort_on_a_damaged_ncu_rep_is_one_error(realdata_file):
    pytest.importorskip("ncu_report", reason="the optional ncu-report wheel is not installed")
    from traceview.errors import TraceFormatError
    from traceview.parsers import ncu_rep

    with pytest.raises(TraceFormatError, match="crashed on this file"):
        ncu_rep.parse(realdata_file("ncu_rep/CuVectorAddDrv.ncu-rep"), extractor=abort_like_the_reader)


def test_negative_durations_are_unknown_not_negative_recoverable_time(realdata_file, tmp_path):
    import re

    text = realdata_file(GEMV).read_text()
    damaged = re.sub(r'("gpu__time_duration.sum","us",")[0-9.,]+"', r'\1-5"', re.sub(r'("Duration","us",")[0-9.,]+"', r'\1-5"', text))
    path = tmp_path / "negative.csv"
    path.write_text(damaged)
    data = json.loads(invoke("analyze", path, "-f", "json").stdout)
    kernel = data["kernels"][0]
    assert kernel["duration_ns"] is None and kernel["recoverable_ns"] is None
    assert any("negative metric value" in note for note in data["notes"])


def test_no_nan_in_any_figure_of_the_real_ncu_inputs(realdata_file):
    from traceview.app.cli import run_analysis
    from traceview.app.figures import roofline_figure
    from traceview.app.views import view_for

    for relative in ("ncu_details/ncu2019.5_v100_aws_cfd_stdout_mixed_xplacer.log", "ncu_details/ncu2019.5_v100_aws_bfs_small_xplacer.log",
                     "ncu_details/ncu2025.1_cc120_cutlass_gemm_details_llmperfopt.csv", "ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv",
                     "ncu_details/ncu2025.1_cc120_elementwise_membound_details_llmperfopt.csv", "ncu_raw/mudock_gtx1650_full_raw.csv",
                     "ncu_details/ncu2025.1_cc120_cutlass_gemm_rooflinechart_section_llmperfopt.csv"):
        analysis = run_analysis(realdata_file(relative), None)
        for figure in (view_for(analysis).figure(analysis), roofline_figure(analysis, per_launch=True)):
            text = json.dumps(figure.to_plotly_json(), default=str)
            assert "nan FLOP" not in text and "nan%" not in text and " nan " not in text, relative


def test_a_details_header_cut_into_a_raw_shape():
    """Found by the 10,000-mutant campaign: a deletion inside the header of a real roofline-section export left a
    header without `Metric Name`, read as a raw page whose units row is empty."""
    from pathlib import Path

    result = invoke("analyze", Path(__file__).parent / "fixtures" / "ncu_details_header_cut_to_raw_shape.csv", "-f", "json")
    assert result.exit_code in (0, 1) and "Traceback" not in result.stderr
    if result.exit_code == 1:
        one_line_error(result)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig", "utf-32"])
def test_windows_encodings_read_like_the_utf8_file(realdata_file, tmp_path, encoding):
    # Windows PowerShell's `ncu --csv > out.csv` writes UTF-16 with a byte-order mark; Notepad and Excel save UTF-8 with one.
    original = realdata_file("ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv")
    converted = tmp_path / "out.csv"
    converted.write_text(original.read_text(encoding="utf-8").replace("\n", "\r\n"), encoding=encoding)
    expected = json.loads(runner.invoke(app, ["analyze", str(original), "-f", "json"]).stdout)
    result = runner.invoke(app, ["analyze", str(converted), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kernels"] == expected["kernels"] and data["source"]["path"] == str(converted)
    assert any("read as UTF-8" in note for note in data["notes"])
    assert not list(tmp_path.glob("traceview-*")) and not [p for p in os.listdir(tempfile.gettempdir()) if p.startswith("traceview-") and p.endswith(".csv") and "fuzz" not in p]


def test_a_byte_order_mark_alone_is_an_empty_file_named_as_given(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xff\xfe")
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}: the file is empty") and "Traceback" not in result.stderr


@pytest.mark.parametrize(("marker", "relative", "noted"), [
    ("// ", "nsys_stats/nsys_console_stats_a100_vectoradd_README.txt", True),  # after the C++ that made it
    ("# ", "ncu_console/ncu2024plus_l4_cc89_unfused_attention_qkT_softmax_pv_quantizedmha.txt", True),  # in a Python file
    ("> ", "llama_cpp/llama_bench_md_rtx3090ti_nkvo_pr4812.txt", True),  # a Markdown quote
    # Inside a /* */ block. llama.cpp's timing lines are found behind any log decoration, so the file reads as it is,
    # with no marker to take off and no note.
    (" * ", "llama_cpp/timings_server_rtx3060_issue12237.txt", False),
])
def test_output_pasted_as_comments_reads_like_the_output(realdata_file, tmp_path, marker, relative, noted):
    original = realdata_file(relative)
    pasted = tmp_path / "pasted.txt"
    code = "int main() {\n    // launch the kernel\n    return 0;\n}\n\n"  # lines without the marker stay as they are
    pasted.write_text(code + "".join(marker + line for line in original.read_text(encoding="utf-8").splitlines(keepends=True)))
    expected = json.loads(runner.invoke(app, ["analyze", str(original), "-f", "json"]).stdout)
    result = runner.invoke(app, ["analyze", str(pasted), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    for part in ("kernels", "summary", "findings", "timeline"):
        assert data.get(part) == expected.get(part), part
    # Line numbers still point into the user's file: the five lines of code come first.
    assert [{**run, "line_number": run["line_number"] - 5} for run in data.get("runs") or []] == (expected.get("runs") or [])
    assert data["source"]["path"] == str(pasted)
    assert any(f"starts with '{marker.strip()}'" in note for note in data["notes"]) is noted


def test_comments_without_any_output_in_them_are_still_not_a_trace(tmp_path):
    path = tmp_path / "notes.py"
    path.write_text("# profile the decode step\n# then compare\n# with the graphs run\nprint('hello')\n")
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}: not a supported trace") and "Traceback" not in result.stderr


def test_a_tegrastats_log_behind_a_prefix_keeps_its_timestamps(realdata_file, tmp_path):
    # journald and pasted logs put text before the timestamp; tegrastats prints it right before RAM.
    original = realdata_file("tegrastats/agx_orin64_jp6_ts_Hanner123_a.log")
    prefixed = tmp_path / "journal.log"
    prefixed.write_text("".join(f"Jul 21 orin tegrastats[812]: {line}" for line in original.read_text().splitlines(keepends=True)))
    expected = json.loads(runner.invoke(app, ["analyze", str(original), "-f", "json"]).stdout)
    data = json.loads(runner.invoke(app, ["analyze", str(prefixed), "-f", "json"]).stdout)
    assert data["telemetry"]["duration_s"] == expected["telemetry"]["duration_s"] == 16.0


# Issue 32's crash classes, each on a real file damaged the way the mutation campaign damaged it.

def test_numbers_with_several_dots_in_llama_bench_cells_are_no_figure_not_a_crash(tmp_path):
    from pathlib import Path

    source = Path(__file__).parent / "fixtures" / "found" / "llama_bench_vulkan_depth_sweep.md"
    text = source.read_text(encoding="utf-8")
    import re

    damaged = tmp_path / "dots.md"
    # Every size, parameter count and rate cell gets a second decimal point.
    damaged.write_text(re.sub(r"(\d+\.\d+)( GiB| B |\s*±)", r"\1.3\2", text), encoding="utf-8")
    result = invoke("analyze", damaged, "-f", "json")
    assert result.exit_code in (0, 1) and result.exception is None or isinstance(result.exception, SystemExit), result.output
    if result.exit_code == 1:
        one_line_error(result)


def test_a_details_header_without_metric_value_is_one_clear_line(realdata_file, tmp_path):
    lines = realdata_file(GEMV).read_text().splitlines(keepends=True)
    damaged = tmp_path / "no_value.csv"
    damaged.write_text(lines[0].replace('"Metric Value"', '"Metric Valu"') + "".join(lines[1:]).rstrip("\n"))
    one_line_error(invoke("analyze", damaged), "Metric Value")


def test_report_strings_that_are_not_valid_utf8_become_replacement_characters():
    from traceview.parsers.ncu_csv import rule_frame
    from traceview.parsers.ncu_rep import _valid_text

    rows = _valid_text([{"launch_id": "0", "section": "SpeedOfLight", "name": "SOL\udcff", "type": "OPT",
                         "message": "damaged \ud800 text", "speedup_type": None, "speedup_pct": None}])
    frame = rule_frame(rows)
    assert frame is not None and frame["rule"][0]["message"] == "damaged \ufffd text"


def test_a_cuda_id_stored_as_text_is_left_out_not_a_crash(realdata_file, tmp_path):
    import sqlite3

    damaged = tmp_path / "nan_id.sqlite"
    shutil.copy(realdata_file("nsys_sqlite/nsys2026.1_rtx3080_torch_zeros_nsys-ai.sqlite"), damaged)
    with sqlite3.connect(damaged) as connection:
        connection.execute("UPDATE TARGET_INFO_CUDA_DEVICE SET cudaId = 'NaN'")
    result = invoke("analyze", damaged, "-f", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["kernels"] == 2


def test_row_ranges_of_a_damaged_btree_whose_max_is_below_its_min():
    from traceview.parsers.nsys_sqlite import row_ranges

    assert row_ranges(10, 3) == [(3, 10)]


def test_a_closed_standard_output_is_one_clear_line(realdata_file):
    import subprocess
    import sys

    result = subprocess.run(f'"{sys.executable}" -m traceview analyze "{realdata_file(GEMV)}" >&-', shell=True,
                            capture_output=False, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "standard output is closed" in lines[0], result.stderr


def test_a_launch_id_repeated_on_the_raw_page_is_read_once_with_a_note(realdata_file, tmp_path):
    # 300 repeats of one row took 12 GB in the joins on the launch; 30 show the class without the blow-up.
    lines = realdata_file("ncu_raw/mudock_gtx1650_full_raw.csv").read_text().splitlines(keepends=True)
    damaged = tmp_path / "repeated.csv"
    damaged.write_text("".join(lines) + lines[-1] * 30)
    data = json.loads(invoke("analyze", damaged, "-f", "json").stdout)
    assert data["summary"]["launches"] == 6
    assert any("30 rows repeat the launch ID of an earlier row" in note for note in data["notes"])


def test_a_count_of_thousands_of_digits_is_no_figure_not_a_crash(tmp_path):
    # Python's int() refuses more than 4,300 digits: a count cell that long is damage, and its row is not read.
    from pathlib import Path

    source = Path(__file__).parent / "fixtures" / "found" / "nvprof_metrics_v100_dram_bytes_and_throughput_with_timing_excerpt.md"
    import re

    text = source.read_text(encoding="utf-8")
    damaged = tmp_path / "digits.md"
    damaged.write_text(re.sub(r"(?m)(%\s+\S+\s+)(\d+)(\s)", lambda m: m.group(1) + "1" * 6000 + m.group(3), text), encoding="utf-8")
    result = invoke("analyze", damaged, "-f", "json")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1)


@pytest.mark.parametrize(("name", "pattern", "damage"), [
    ("ncu2023_console_t4_tiled_matmul_estimated_speedup.txt", r"Speedup: [0-9.]+%", "Speedup: 1.2.3%"),
    ("nvprof_nvtx_result_after_summary_nvtx3_issue.txt", r"\b\d+\.\d+ms\b", "1.2.3ms"),
    ("nvprof_metrics_v100_dram_bytes_and_throughput_with_timing_excerpt.md", r"\b\d+\.\d+GB/s\b", "1.2.3GB/s"),
])
def test_numbers_with_several_dots_in_profiler_text_are_no_figure_not_a_crash(tmp_path, name, pattern, damage):
    # Found by the issue 32 campaign: `float()` of a match that allows several dots.
    import re
    from pathlib import Path

    text = (Path(__file__).parent / "fixtures" / "found" / name).read_text(encoding="utf-8")
    assert re.search(pattern, text), pattern
    damaged = tmp_path / name
    damaged.write_text(re.sub(pattern, damage, text), encoding="utf-8")
    result = invoke("analyze", damaged, "-f", "json")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1)


def test_numbers_of_thousands_of_digits_in_any_cell_are_unknown_not_a_crash(tmp_path):
    # The campaign of issue 32 (seed 31) put 6,000 digits in an ncu block size: int() refuses more than 4,300.
    from pathlib import Path

    from traceview.analyzer.diagnosis import block_threads

    assert block_threads("(32, 4, 1)") == 128
    assert block_threads("(" + "9" * 6000 + ", 1, 1)") is None
    # And in a llama-batched-bench settings line (`n_kv_max = 2048, …`).
    source = Path(__file__).resolve().parent / "fixtures" / "found" / "llama_batched_bench_readme_llama7b_f16.md"
    damaged = tmp_path / "batched.md"
    settings = "main: n_kv_max = " + "7" * 6000 + ", n_batch = 2048, n_ubatch = 512, flash_attn = 0, is_pp_shared = 0, n_gpu_layers = 99\n"
    damaged.write_text(settings + source.read_text(encoding="utf-8"), encoding="utf-8")
    result = CliRunner().invoke(app, ["analyze", str(damaged), "--format", "json"])
    assert "Traceback" not in result.output and "digits" not in result.output
    assert result.exit_code == 0 or (result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1), result.output
