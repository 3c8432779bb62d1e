"""The command line as a user meets it: output streams, exit codes and one-line errors on bad input."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from conftest import SAMPLES
from traceview.app.cli import app

runner = CliRunner()
ELEMENTWISE = SAMPLES / "ncu" / "rtx5090_elementwise_details_ncu2025.1.csv"
CFD = SAMPLES / "ncu" / "v100_cfd_details_ncu2019.5.csv"


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_json_goes_to_stdout_alone_and_follows_the_contract():
    result = invoke("analyze", CFD, "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert result.stderr == ""
    assert set(data) >= {"device", "source", "kernels", "summary"}
    assert data["source"]["format"] == "ncu-csv-details"
    assert len(data["source"]["sha256"]) == 64
    assert data["device"]["name"] is None and "use --gpu" in data["device"]["identified"]
    ranks = [k["rank"] for k in data["kernels"]]
    assert ranks == sorted(ranks) == [1, 2, 3]
    for kernel in data["kernels"]:
        assert {"rank", "name", "launches", "duration_ns", "bound", "label", "recoverable_ns",
                "arithmetic_intensity", "roof_pct", "reason"} <= set(kernel)
        assert kernel["bound"] in {"compute", "memory", "latency", "unknown"}
    assert sum(k["launches"] for k in data["kernels"]) == 100


def test_table_is_the_default(realdata_file):
    result = invoke("analyze", realdata_file("ncu_details/ncu2025.1_cc120_elementwise_membound_details_llmperfopt.csv"))
    assert result.exit_code == 0
    assert "elementwise_kernel" in result.stdout and "memory" in result.stdout
    # No device name in the CSV: CC 12.0 at 1,764 GB/s is an RTX 5090 or an RTX PRO 6000 Blackwell, and it says so.
    assert "rtx5090, rtx-pro-6000-blackwell" in " ".join(result.stdout.split())


def test_top_and_per_launch():
    data = json.loads(invoke("analyze", CFD, "-f", "json", "--top", "1", "--per-launch").stdout)
    assert len(data["kernels"]) == 1 and len(data["launches"]) == 100


def test_output_file_is_never_overwritten_without_force(tmp_path):
    out = tmp_path / "report.json"
    out.write_text("keep me")
    result = invoke("analyze", ELEMENTWISE, "-o", out)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ") and "--force" in result.stderr
    assert out.read_text() == "keep me"
    result = invoke("analyze", ELEMENTWISE, "-o", out, "--force")
    assert result.exit_code == 0
    assert json.loads(out.read_text())["kernels"][0]["bound"] == "memory"  # format from the extension


def test_markdown_renders_as_a_table():
    result = invoke("analyze", CFD, "-f", "md")
    tokens = MarkdownIt("commonmark").enable("table").parse(result.stdout)
    assert any(t.type == "table_open" for t in tokens)
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == 1 + 3


def _hostile_copy(tmp_path, name):
    text = ELEMENTWISE.read_text(encoding="utf-8")
    original = text.splitlines()[1].split('","')[4]
    path = tmp_path / "hostile.csv"
    path.write_text(text.replace(original, name.replace('"', '""')), encoding="utf-8")
    return path


HOSTILE = '<script>alert(1)</script> | `rm -rf` =cmd|"/c calc"!A0 **bold** [x](http://e)'


def test_hostile_kernel_names_stay_text_in_markdown(tmp_path):
    path = _hostile_copy(tmp_path, HOSTILE)
    result = invoke("analyze", path, "-f", "md")
    assert result.exit_code == 0
    assert "<script>" not in result.stdout
    html = MarkdownIt("commonmark").enable("table").render(result.stdout)
    assert "<script>" not in html and "<strong>bold" not in html and "<a href" not in html
    header_cells = len(re.findall(r"<th[ >]", html.split("</tr>")[0]))
    first_row = html.split("</tr>")[1]
    assert first_row.count("<td") == header_cells  # the pipe did not split the row


def test_hostile_kernel_names_round_trip_in_json(tmp_path):
    path = _hostile_copy(tmp_path, HOSTILE)
    data = json.loads(invoke("analyze", path, "-f", "json").stdout)
    assert data["kernels"][0]["name"] == HOSTILE


def test_hostile_kernel_names_in_the_terminal(tmp_path):
    result = invoke("analyze", _hostile_copy(tmp_path, "[bold red]x[/] <b>"), "--top", "1")
    assert result.exit_code == 0
    assert "[bold red]x[/]" in result.stdout  # rich markup in a name is printed, not interpreted


def _assert_one_line_error(result, *fragments):
    assert result.exit_code == 1, result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_missing_file():
    _assert_one_line_error(invoke("analyze", "/nonexistent/run.csv"), "/nonexistent/run.csv", "no such file")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    _assert_one_line_error(invoke("analyze", path), "empty.csv", "empty")


def test_csv_that_is_not_a_profiler_export(tmp_path, realdata_file):
    path = tmp_path / "sales.csv"
    path.write_text("region,month,revenue\nnorth,jan,100\n")
    _assert_one_line_error(invoke("analyze", path), "not a supported trace", "ncu --csv")
    # ncu's own listing of its sections is no trace either, and is named for what it is (test_robustness).
    listing = realdata_file("other/ncu2025.1.1_list_sections_llmperfopt.txt")
    _assert_one_line_error(invoke("analyze", listing), "this is ncu --list-sections output", "not profiling results")


@pytest.mark.parametrize("header", [
    # ncu -i R --csv --page source, as two public tools quote it (search index documents 3937325035 and 69257086479):
    # a kernel-name line, then one row per instruction; newer versions number the rows in a leading "#" column.
    '"Kernel Name","void vecAdd(float *, float *, float *, int)",\n"Address","Source","Warp Stall Sampling (All Cycles)",'
    '"Warp Stall Sampling (Not-issued Cycles)","Instructions Executed"\n"0","MOV R1, c[0x0][0x28]","1","0","128"\n',
    '"#","Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"\n'
    '"1","","  int64_t i = blockIdx.x * blockDim.x + threadIdx.x;","10","2"\n',
])
def test_the_source_page_is_named_with_the_pages_that_hold_per_kernel_results(tmp_path, header):
    path = tmp_path / "source.csv"
    path.write_text(header)
    _assert_one_line_error(invoke("analyze", path), "ncu's source page", "--page raw")


@pytest.mark.parametrize("first_line", [
    # nsys export --type json writes one object a line, its strings on lines of their own with --separate-strings;
    # the shapes are those scripts that read it match (search index documents 66546989175 and 10489931142).
    '{"type":"String","id":"1","value":"cudaLaunchKernel"}',
    '{"Type":79,"CudaEvent":{"startNs":"1000","endNs":"2000","deviceId":0,"kernel":{"shortName":"1"}}}',
])
def test_an_nsys_json_export_is_named_with_the_sqlite_export_to_make_instead(tmp_path, first_line):
    path = tmp_path / "report.json"
    path.write_text(first_line + "\n" + '{"Type":48,"TraceProcessEvent":{"startNs":"10","endNs":"20","name":"1","globalTid":"7"}}\n')
    _assert_one_line_error(invoke("analyze", path), "Nsight Systems JSON export", "nsys export --type sqlite")


@pytest.mark.parametrize("compressed", [False, True])
def test_rocprofv3_json_is_named_plain_or_gzipped(tmp_path, compressed):
    """rocprofiler-sdk's JSON (TraceLens keeps a gzipped one in its tests) was 'a binary file of an unknown kind'."""
    import gzip

    text = '{"rocprofiler-sdk-tool":[{"metadata":{"node":{"id":0,"hostname":"mi350"},"pid":908},"kernel_dispatch":[]}]}'
    path = tmp_path / ("908_results.json.gz" if compressed else "908_results.json")
    path.write_bytes(gzip.compress(text.encode()) if compressed else text.encode())
    _assert_one_line_error(invoke("analyze", path), "rocprofv3's JSON", "torch.profiler trace")


@pytest.mark.parametrize(("root", "compressed"), [("execution_trace", True), ("execution_graph", False)])
def test_a_pytorch_execution_trace_is_named_with_the_profiler_trace_to_pass(tmp_path, root, compressed):
    """ExecutionTraceObserver's output (param's et_replay keeps both schema generations in its tests) has no times."""
    import gzip

    text = ('{\n  "schema": "1.1.0-chakra.0.0.4", "pid": 1734239, "time": "2024-06-30 11:23:59", "start_ts": 8727390555,\n  "nodes": [\n'
            f'    {{"id": 2, "name": "[pytorch|profiler|{root}|thread]", "ctrl_deps": 1}}\n  ]\n}}\n')
    path = tmp_path / ("resnet_et.json.gz" if compressed else "linear_et.json")
    path.write_bytes(gzip.compress(text.encode()) if compressed else text.encode())
    _assert_one_line_error(invoke("analyze", path), "PyTorch execution trace", ".pt.trace.json")


def test_a_gzipped_nsys_json_export_is_named_too(tmp_path):
    import gzip

    path = tmp_path / "report.json.gz"
    path.write_bytes(gzip.compress(b'{"type":"String","id":"1","value":"cudaLaunchKernel"}\n'))
    _assert_one_line_error(invoke("analyze", path), "Nsight Systems JSON export", "nsys export --type sqlite")


def test_header_without_launches(tmp_path):
    path = tmp_path / "header_only.csv"
    path.write_text(ELEMENTWISE.read_text().splitlines()[0] + "\n")
    _assert_one_line_error(invoke("analyze", path), "no kernel launches")


def test_truncated_details_export(tmp_path):
    data = ELEMENTWISE.read_bytes()
    path = tmp_path / "cut.csv"
    path.write_bytes(data[: len(data) // 2])
    _assert_one_line_error(invoke("analyze", path), "cut.csv:", "truncated")


def test_truncated_raw_export(tmp_path):
    data = (SAMPLES / "ncu" / "gtx1650_calc_energy_raw.csv").read_bytes()
    path = tmp_path / "cut_raw.csv"
    path.write_bytes(data[: len(data) - 5000])
    _assert_one_line_error(invoke("analyze", path), "truncated")


def test_binary_garbage(tmp_path):
    path = tmp_path / "garbage.bin"
    path.write_bytes(os.urandom(4096) + b"\x00" * 16)
    _assert_one_line_error(invoke("analyze", path), "binary")


def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    import sqlite3

    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    _assert_one_line_error(invoke("analyze", path), "not an Nsight Systems export")


def test_truncated_sqlite(tmp_path, realdata_file):
    data = realdata_file("nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite").read_bytes()
    path = tmp_path / "cut.sqlite"
    path.write_bytes(data[: len(data) // 3])
    _assert_one_line_error(invoke("analyze", path), "cut.sqlite")


def test_unknown_gpu():
    _assert_one_line_error(invoke("analyze", CFD, "--gpu", "rtx9999"), "unknown GPU", "traceview gpus")


def test_directory(tmp_path):
    _assert_one_line_error(invoke("analyze", tmp_path), "directory")


def test_gpus_lists_the_table():
    result = invoke("gpus")
    assert result.exit_code == 0
    for key in ("h100-sxm", "a100-80gb", "rtx4090", "rtx5090", "jetson-agx-orin-64gb", "v100-sxm2"):
        assert key in result.stdout


@pytest.mark.parametrize("args", [["--help"], ["analyze", str(ELEMENTWISE), "-f", "json"]])
def test_python_dash_m(args):
    result = subprocess.run([sys.executable, "-m", "traceview", *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    if "json" in args:
        json.loads(result.stdout)


def test_export_cut_inside_its_header(tmp_path):
    data = (SAMPLES / "ncu" / "gtx1650_calc_energy_raw.csv").read_bytes()
    path = tmp_path / "cut_header.csv"
    path.write_bytes(data[:3000])  # the raw header line is 63 kB long
    _assert_one_line_error(invoke("analyze", path), "ends inside its header line")


def test_damaged_details_header(tmp_path):
    path = tmp_path / "damaged.csv"
    path.write_text(ELEMENTWISE.read_text().replace('"Metric Unit"', '"MetriY Unit"', 1))
    _assert_one_line_error(invoke("analyze", path), "lacks the column(s) 'Metric Unit'")


def test_corrupted_sqlite(tmp_path, realdata_file):
    data = bytearray(realdata_file("nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite").read_bytes())
    for position in range(100, len(data), 997):  # damage pages all over the file, header left intact
        data[position] = (data[position] + 97) % 256
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(bytes(data))
    result = invoke("analyze", path)
    assert result.exit_code in (0, 1) and "Traceback" not in result.stderr
    if result.exit_code == 1:
        _assert_one_line_error(result, "damaged.sqlite")


def test_version():
    from traceview import __version__

    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"traceview {__version__}"
