"""One test per crash class the mutation fuzzing found, each a real file with one planted damage: a result or the
one-line error, never a traceback. (tests/test_fuzz.py samples the same mutations at random.)"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app

runner = CliRunner()


def outcome(path, *args):
    """Analyze in every format; return the JSON data (None when the input was refused with one line)."""
    data = None
    for fmt in ("json", "md", "table", "html"):
        result = runner.invoke(app, ["analyze", str(path), "-f", fmt, *args])
        assert result.exit_code in (0, 1) and "Traceback" not in result.stderr, result.stderr
        if result.exit_code == 1:
            assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("Error: ")
            return None
        if fmt == "json":
            data = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    return data


def planted(realdata_file, tmp_path, relative, old, new, count=1):
    text = realdata_file(relative).read_text(encoding="utf-8", errors="replace")
    assert old in text, f"{old!r} not in {relative}"
    path = tmp_path / realdata_file(relative).name
    path.write_text(text.replace(old, new, count), encoding="utf-8")
    return path


def test_an_sm_count_beyond_64_bits_is_unknown(realdata_file, tmp_path):
    raw = realdata_file("ncu_raw/mudock_gtx1650_full_raw.csv").read_text()
    header = next(line for line in raw.splitlines() if line.startswith('"ID",')).split('","')
    column = header.index("device__attribute_multiprocessor_count")
    rows = raw.splitlines(keepends=True)
    start = next(i for i, line in enumerate(rows) if line.startswith('"ID",'))
    fields = rows[start + 2].split('","')
    fields[column] = "1e23"
    rows[start + 2] = '","'.join(fields)
    path = tmp_path / "sm_count.csv"
    path.write_text("".join(rows))
    assert outcome(path)["summary"]["launches"] == 6


@pytest.mark.parametrize("old,new", [("1,831,281", "inf"), ("1,831,281", "nan"), ("1,831,281", "1e400")])
def test_non_finite_numbers_in_nsys_stats(realdata_file, tmp_path, old, new):
    path = planted(realdata_file, tmp_path, "nsys_stats/nsys_console_stats_a100_vectoradd_README.txt", old, new)
    data = outcome(path)
    assert data is None or all(k["duration_ns"] is None or k["duration_ns"] >= 0 for k in data["kernels"])


def test_a_200_kb_name_in_nsys_stats_csv(realdata_file, tmp_path):
    path = planted(realdata_file, tmp_path, "nsys_stats/cuda_gpu_kern_sum_mudock_adt_cuda_native.csv", "calc_energy", "calc_energy" + "x" * 200_000)
    assert outcome(path)["kernels"]


def test_a_header_only_nsys_stats_csv(realdata_file, tmp_path):
    header = realdata_file("nsys_stats/cuda_gpu_kern_sum_rtx5090_llmperfopt_allstage.csv").read_text().splitlines()[0]
    path = tmp_path / "header_only.csv"
    path.write_text(header + "\n")
    data = outcome(path)
    assert data is None or data["kernels"] == []


def test_a_fullwidth_digit_in_tegrastats(realdata_file, tmp_path):
    text = realdata_file("tegrastats/agx_orin64_jp6_ts_Hanner123_a.log").read_text()
    first = re.search(r"EMC_FREQ (\d)", text)
    path = tmp_path / "fullwidth.log"
    path.write_text(text[: first.start(1)] + "\uff11" + text[first.end(1):])
    assert outcome(path)["telemetry"]["samples"] >= 14


def test_a_unit_separator_byte_in_tegrastats(realdata_file, tmp_path):
    # Lines are split by a one-column CSV reader on \x1f: a stray one (damage) in the first line made it see two
    # columns and stop. Now the line ends there and the rest of the log reads as before.
    path = planted(realdata_file, tmp_path, "tegrastats/agx_orin64_jp6_ts_Hanner123_a.log", " SWAP ", " SWAP\x1f ")
    data = outcome(path)
    assert data is not None and data["telemetry"]["samples"] == 15


@pytest.mark.parametrize("new", ['"nan"', '"inf"', '"1e400"'])
def test_non_finite_counts_in_llama_bench_csv(realdata_file, tmp_path, new):
    path = planted(realdata_file, tmp_path, "llama_cpp/llama_bench_readme_rtx3090ti_i9-13900k.csv", '"512"', new)
    data = outcome(path)
    assert data is not None and len(data["runs"]) == 2
    assert all(run["n_prompt"] is None or 0 <= run["n_prompt"] < 2**53 for run in data["runs"])


def test_text_in_the_string_table_ids(realdata_file, tmp_path):
    copy = tmp_path / "text_ids.sqlite"
    shutil.copy(realdata_file("nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite"), copy)
    with sqlite3.connect(copy) as connection:
        connection.execute("CREATE TABLE damaged AS SELECT * FROM StringIds")
        connection.execute("DROP TABLE StringIds")
        connection.execute("ALTER TABLE damaged RENAME TO StringIds")
        connection.execute("UPDATE StringIds SET id = 'abc' WHERE rowid % 5 = 0")
    assert outcome(copy)["summary"]["launches"] == 4


def test_a_stats_table_whose_name_header_is_damaged(realdata_file, tmp_path):
    """Found by the 10,000-mutant campaign: a flipped byte in the Name header of a console table left rows without
    names, which crashed the summary and the NVTX lines."""
    text = realdata_file("nsys_stats/nsys_console_stats_a100_vectoradd_README.txt").read_text()
    # The kernel summary's header (the osrt_sum table before it is a report traceview skips, damaged or not).
    kernels = text.index("Executing 'cuda_gpu_kern_sum'")
    header = next(line for line in text[kernels:].splitlines() if line.strip().startswith("Time (%)"))
    path = tmp_path / "damaged_name.txt"
    path.write_text(text[:kernels] + text[kernels:].replace(header, header.replace("Name", "N\x07me"), 1))
    assert outcome(path) is None  # refused with one line: the header is damaged


def test_diagnosis_survives_damaged_occupancy_cells():
    """Found by the mutation campaign: a theoretical occupancy of 1e-320 % (max warps → inf), a block limit of 0.4,
    wave counts that overflow; each is damage, read as unknown rather than crashing the diagnosis."""
    from traceview.analyzer.diagnosis import diagnose, occupancy

    launch = {"kernel_name": "k", "duration_ns": 1.0, "block_size": "(32, 1, 1)", "grid_size": "(8, 1, 1)",
              "theoretical_occupancy_pct": 1e-320, "theoretical_warps_per_sm": 16.0, "waves_per_sm": 1e308,
              "block_limit_sm": 0.4, "block_limit_registers": 40.0, "block_limit_shared_mem": 16.0, "block_limit_warps": 32.0}
    occ = occupancy([launch, {**launch, "duration_ns": 2.0}])
    assert occ["max_warps_per_sm"] is None and occ["tail"] is None
    diagnose([launch], {"kernel_name": "k", "bound": "latency", "label": "Latency Issue", "launches": 1})


def test_roofline_survives_a_bandwidth_that_underflows():
    from traceview.analyzer.roofline import classify_launch

    verdict = classify_launch({"fp32_flop_per_s": 1e12, "dram_bytes_per_s": 1e-320},
                              {"peak_fp32_flop_per_s": 1e13, "peak_dram_bytes_per_s": 1e-320})
    assert verdict.bound is not None


def test_an_export_whose_schema_names_are_not_utf8(realdata_file, tmp_path):
    """Found by the mutation campaign: a damaged page left invalid UTF-8 in a table's name in sqlite_master; reading
    the names raised UnicodeDecodeError, which is no sqlite3.DatabaseError, and escaped as a traceback."""
    source = realdata_file("nsys_sqlite/vecadd_streams_T4_nsys2022.4.2.sqlite").read_bytes()
    damaged = bytearray(source)
    damaged[source.index(b"TARGET_INFO_GPU") + 2] = 0xBB  # the first occurrence is the `name` field of its schema row
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(bytes(damaged))
    assert outcome(path) is None  # refused with one line
