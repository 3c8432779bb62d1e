"""The realistic scale export (benchmarks/realistic_nsys.py) on a small factor: every timed table is replicated, and
the whole-run analysis gives the original's answer scaled by the factor. The benchmark's numbers rest on this."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from realistic_nsys import build, counts  # noqa: E402

H100 = "nsys_sqlite/nsys2026.2_h100x2_sliced_nsys-ai.sqlite"
FACTOR = 3


def analyze_json(path: Path) -> dict:
    result = CliRunner().invoke(app, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def original_and_replica(tmp_path_factory):
    from conftest import realdata

    original = realdata(H100)
    replica = build(FACTOR, tmp_path_factory.mktemp("scale") / "replica.sqlite", source=original)
    return original, replica


def test_every_timed_table_is_replicated(original_and_replica):
    original, replica = original_and_replica
    before, after = counts(original), counts(replica)
    assert set(before) == set(after) and len(before) >= 6
    assert {table: after[table] for table in after} == {table: FACTOR * before[table] for table in before}


def test_analysis_of_the_replica_is_the_original_scaled(original_and_replica):
    original, replica = (analyze_json(path) for path in original_and_replica)
    assert replica["summary"]["launches"] == FACTOR * original["summary"]["launches"]
    assert replica["summary"]["total_duration_ns"] == pytest.approx(FACTOR * original["summary"]["total_duration_ns"])
    launches = {k["name"]: k["launches"] for k in original["kernels"]}
    assert {k["name"]: k["launches"] for k in replica["kernels"]} == {name: FACTOR * n for name, n in launches.items()}
    for before, after in zip(original["timeline"]["devices"], replica["timeline"]["devices"], strict=True):
        assert after["device_id"] == before["device_id"] and after["verdict"] == before["verdict"]
        for share in ("compute_pct", "copy_pct", "idle_pct"):
            # Copies follow each other 1 µs apart: the shares move by far less than a point.
            assert after["breakdown"][share] == pytest.approx(before["breakdown"][share], abs=0.5)
    copies = {(c["device_id"], c["direction"]): c for c in original["timeline"]["copies"]}
    for copy in replica["timeline"]["copies"]:
        assert copy["count"] == FACTOR * copies[(copy["device_id"], copy["direction"])]["count"]
    # Launch calls still find their own kernels: correlation ids were shifted with the copies.
    assert replica["timeline"]["launch"]["kernels_joined"] == FACTOR * original["timeline"]["launch"]["kernels_joined"]
    nvtx = {g["name"]: g["count"] for g in original["timeline"]["nvtx"]}
    for group in replica["timeline"]["nvtx"][:10]:
        assert group["count"] == FACTOR * nvtx[group["name"]]


def test_the_replicas_op_ranges_stay_distinct_as_in_a_real_long_run(original_and_replica):
    # PyTorch numbers every op range through the run: a real long export has about as many distinct NVTX texts as
    # ranges, and the replica keeps that (each copy's op ids get their own prefix) while the groups stay the same.
    original, replica = original_and_replica
    query = "SELECT count(DISTINCT text) FROM NVTX_EVENTS"
    with sqlite3.connect(f"file:{original}?mode=ro", uri=True) as a, sqlite3.connect(f"file:{replica}?mode=ro", uri=True) as b:
        assert b.execute(query).fetchone()[0] == FACTOR * a.execute(query).fetchone()[0]


def test_reading_an_export_does_not_import_pyarrow():
    """pyarrow costs 0.3 s at every start; the export is read through ADBC's Arrow C stream, which polars takes as is."""
    sample = Path(__file__).resolve().parent.parent / "sample_traces" / "nsys" / "h100x2_copy_bound_nsys2026.2.sqlite"
    script = ("import sys; from traceview.parsers import nsys_sqlite; export = nsys_sqlite.parse(sys.argv[1]); "
              "assert export.kernels.height > 0; print('pyarrow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script, str(sample)], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_repeated_correlation_ids_give_the_distinct_ids_answer_and_a_note(original_and_replica, tmp_path):
    # Issue 31: every timed table replicated with its correlationIds left as they are (a merged or damaged export).
    # A join on the ids matched each kernel and copy to every copy of its call: 581 copies took 23.7 GB and reported
    # 19 s launch latencies and 40× the pageable copies. Each is now matched to the latest call with its id before it.
    original, distinct = original_and_replica
    repeated = build(FACTOR, tmp_path / "repeated.sqlite", source=original, shift_correlation_ids=False)
    ours, theirs = analyze_json(distinct), analyze_json(repeated)
    notes = [n for n in theirs["notes"] if "repeat the process and correlation id" in n]
    assert len(notes) == 1 and not any("repeat the process" in n for n in ours["notes"])
    assert theirs["timeline"]["launch"] == ours["timeline"]["launch"]
    assert theirs["timeline"]["findings"] == ours["timeline"]["findings"]
    assert theirs["timeline"]["idle_by_cause"] == ours["timeline"]["idle_by_cause"]
    assert theirs["kernels"] == ours["kernels"]


@pytest.mark.parametrize("chunk_rows", [211, 997, 4_096])
def test_an_export_read_in_small_chunks_gives_exactly_the_whole_answer(realdata_file, monkeypatch, chunk_rows):
    """The SQLite reader reads each table in row-id ranges on two connections: ranges of a few hundred rows put chunk
    edges inside every kind of row (kernels, copies, NVTX ranges, calls) and between the two ends of idle gaps; the
    answer must not move. The real 2×H100 export has 51 k timed rows, so each default read is one or two ranges."""
    from traceview.parsers import nsys_sqlite

    path = realdata_file(H100)
    whole = _answer_without_provenance(path)
    monkeypatch.setattr(nsys_sqlite, "_CHUNK_ROWS", chunk_rows)
    monkeypatch.setattr(nsys_sqlite, "_SPLIT_ROWS", chunk_rows)
    assert len(nsys_sqlite.row_ranges(1, 20_000)) > 4
    assert _answer_without_provenance(path) == whole


@pytest.mark.parametrize("chunk_events", [613, 5_000])
def test_a_pytorch_trace_read_in_small_chunks_gives_exactly_the_whole_answer(realdata_file, monkeypatch, chunk_events):
    """The PyTorch reader flushes its rows into frames every CHUNK_EVENTS events: small chunks cut between a launch
    call and its kernel, an op and its kernels, a collective and its arguments."""
    from traceview.parsers import kineto

    path = realdata_file("kineto/vllm_h100x4_tp4_rank0_cudagraphs_nccl_tracemap.pt.trace.json.gz")
    whole = _answer_without_provenance(path)
    monkeypatch.setattr(kineto, "CHUNK_EVENTS", chunk_events)
    assert _answer_without_provenance(path) == whole


def _answer_without_provenance(path) -> dict:
    answer = analyze_json(path)
    answer.pop("provenance", None)
    return answer
