"""`traceview fleet` on real exports copied as ranks: one with its kernels stretched (the planted straggler), one cut
short (a failure). Map and reduce as plain functions, the local and Dask engines, the cache, the CI gate."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from typer.testing import CliRunner

from traceview.analyzer.analysis import Source, analyze_nsys
from traceview.analyzer.fleet import rank_from_name, reduce_fleet, summarize
from traceview.app.cli import app
from traceview.parsers import load_trace

H100 = "nsys_sqlite/nsys2026.2_h100x2_sliced_nsys-ai.sqlite"


@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory):
    from conftest import realdata

    source = realdata(H100)
    folder = tmp_path_factory.mktemp("fleet")
    for rank in range(4):
        target = folder / f"job_rank{rank}.sqlite"
        shutil.copy(source, target)
        target.chmod(0o644)
    with sqlite3.connect(folder / "job_rank2.sqlite") as connection:  # every kernel 1.5× longer
        connection.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + ("end" - start) * 3 / 2')
    (folder / "job_rank4.sqlite").write_bytes(source.read_bytes()[:300_000])  # cut short
    return folder


def fleet_json(*args: str, code: int = 0) -> dict:
    result = CliRunner().invoke(app, ["fleet", *args, "--format", "json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)["fleet"]


def test_map_and_reduce_as_functions(ranks_dir):
    summaries = []
    for rank in (0, 1, 2, 3):
        path = ranks_dir / f"job_rank{rank}.sqlite"
        analysis = analyze_nsys(load_trace(path).data, Source(str(path), "nsys-sqlite", f"sha{rank}", path.stat().st_size))
        summaries.append(summarize(analysis, rank_from_name(str(path), None)))
    assert set(summaries[0]) == {"meta", "kernels", "devices", "nvtx"}
    assert summaries[0]["devices"].height == 2 and summaries[0]["meta"]["rank"][0] == 0
    result = reduce_fleet(summaries, [{"path": "x", "error": "cut short", "internal": False}])
    assert result.ranks["rank"].to_list() == [0, 1, 2, 3]
    top = result.kernels.row(0, named=True)
    assert top["ranks"] == 4 and top["slowest_rank"] == 2 and top["imbalance"] == pytest.approx(1.5, rel=0.01)
    assert [s["rank"] for s in result.stragglers] == [2]
    straggler = result.stragglers[0]
    assert straggler["metric"] == "kernel_ns" and straggler["excess_pct"] == pytest.approx(50, abs=1)


def test_fleet_on_a_directory_lists_kernels_ranks_the_straggler_and_the_bad_file(ranks_dir):
    fleet = fleet_json(str(ranks_dir))
    assert [r["rank"] for r in fleet["ranks"]] == [0, 1, 2, 3]
    assert {r["rank"]: r["gpus"] for r in fleet["ranks"]} == {0: 2, 1: 2, 2: 2, 3: 2}
    assert [s["rank"] for s in fleet["stragglers"]] == [2]
    assert fleet["kernels"][0]["ranks"] == 4 and fleet["kernels"][0]["slowest_rank"] == 2
    assert [f["path"].rsplit("/", 1)[-1] for f in fleet["failures"]] == ["job_rank4.sqlite"]
    assert "not a readable SQLite database" in fleet["failures"][0]["error"] and not fleet["failures"][0]["internal"]
    # One line per failure, without the path repeated in the error.
    assert str(ranks_dir) not in fleet["failures"][0]["error"]


def test_engines_give_byte_identical_json(ranks_dir):
    distributed = pytest.importorskip("dask.distributed", reason="the optional dask extra is not installed")
    local = CliRunner().invoke(app, ["fleet", str(ranks_dir), "--format", "json"])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        on_dask = CliRunner().invoke(app, ["fleet", str(ranks_dir), "--format", "json", "--engine", "dask", "--scheduler", cluster.scheduler_address])
    assert local.exit_code == 0 and on_dask.exit_code == 0, on_dask.output
    assert local.stdout == on_dask.stdout


def test_cache_reads_only_new_files(ranks_dir, tmp_path):
    cache = tmp_path / "cache"
    runner = CliRunner()
    first = runner.invoke(app, ["fleet", str(ranks_dir), "--cache", str(cache), "--format", "json"])
    assert "5 file(s) read, 0 from the cache" in first.stderr
    grown = tmp_path / "grown"
    shutil.copytree(ranks_dir, grown)
    with sqlite3.connect(grown / "job_rank3.sqlite") as connection:  # a changed file is a new file
        connection.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + 1')
    second = runner.invoke(app, ["fleet", str(grown), "--cache", str(cache), "--format", "json"])
    # The changed file and the failed one are read again; the other three come from the cache.
    assert "2 file(s) read, 3 from the cache" in second.stderr
    fleet = json.loads(second.stdout)["fleet"]
    assert all(f["path"].startswith(str(grown)) for f in fleet["files"])  # cached summaries take the files' new paths


def test_fail_on_straggler_gates_ci(ranks_dir):
    result = CliRunner().invoke(app, ["fleet", str(ranks_dir), "--fail-on-straggler", "20"])
    assert result.exit_code == 3 and "rank 2 is 50.0% slower than the median rank" in result.stderr
    assert CliRunner().invoke(app, ["fleet", str(ranks_dir), "--fail-on-straggler", "80"]).exit_code == 0


def test_inputs_as_glob_list_file_and_rank_regex(ranks_dir, tmp_path):
    listing = tmp_path / "ranks.txt"
    listing.write_text("".join(f"{ranks_dir}/job_rank{r}.sqlite\n" for r in (1, 3)))
    assert [r["rank"] for r in fleet_json(str(listing))["ranks"]] == [1, 3]
    assert [r["rank"] for r in fleet_json(f"{ranks_dir}/job_rank[01].sqlite")["ranks"]] == [0, 1]
    assert [r["rank"] for r in fleet_json(str(ranks_dir / "job_rank0.sqlite"), "--rank-from", r"job_rank(\d)")["ranks"]] == [0]


def test_bad_fleet_inputs_are_one_line_errors(tmp_path):
    result = CliRunner().invoke(app, ["fleet", str(tmp_path / "missing")])
    assert result.exit_code == 1 and "no such file or directory" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["fleet", str(tmp_path), "--rank-from", "("])
    assert result.exit_code == 1 and "--rank-from is not a regular expression" in result.output


@pytest.mark.parametrize("fmt", ["table", "md", "html"])
def test_human_formats_name_the_straggler(ranks_dir, fmt):
    result = CliRunner().invoke(app, ["fleet", str(ranks_dir), "--format", fmt])
    assert result.exit_code == 0
    assert "rank 2 is a straggler" in result.stdout
    if fmt == "html":
        assert 'id="fleet-heatmap"' in result.stdout and 'id="fleet-ranks"' in result.stdout


def test_fleet_diff_compares_two_sets_and_gates_ci(ranks_dir, tmp_path):
    base, new = tmp_path / "base", tmp_path / "new"
    base.mkdir(), new.mkdir()
    for rank in (0, 1):
        shutil.copy(ranks_dir / f"job_rank{rank}.sqlite", base / f"job_rank{rank}.sqlite")
    shutil.copy(ranks_dir / "job_rank0.sqlite", new / "job_rank0.sqlite")
    shutil.copy(ranks_dir / "job_rank2.sqlite", new / "job_rank1.sqlite")  # one rank's kernels 1.5× longer
    result = CliRunner().invoke(app, ["fleet", "diff", str(base), str(new), "--format", "json", "--fail-on-regression", "10"])
    assert result.exit_code == 3, result.output
    diff = json.loads(result.stdout)["fleet_diff"]
    assert diff["total"]["change_pct"] == pytest.approx(25.0, abs=0.5)  # median of (1.0, 1.5) × the base
    assert diff["kernels"][0]["change_pct"] == pytest.approx(25.0, abs=0.5)
    assert diff["regressions"][0].startswith("median kernel time per rank grew 25.0%")
    assert CliRunner().invoke(app, ["fleet", "diff", str(base), str(base), "--fail-on-regression", "1"]).exit_code == 0
    misuse = CliRunner().invoke(app, ["fleet", str(base), "--fail-on-regression", "1"])
    assert misuse.exit_code == 1 and "applies to `traceview fleet diff" in misuse.output


def test_a_saved_fleet_result_opens_in_the_dashboard(ranks_dir, tmp_path):
    from traceview.app.cli import run_analysis
    from traceview.app.dashboard import RunStore, create_app, figure_for, side_panel, summary_line

    saved = tmp_path / "fleet.json"
    assert CliRunner().invoke(app, ["fleet", str(ranks_dir), "-o", str(saved)]).exit_code == 0
    analysis = run_analysis(saved, None)
    assert summary_line(analysis) == "fleet: 4 files over 4 ranks, 1 straggler, 1 failed"
    heatmap = figure_for(analysis, None, False)
    assert heatmap.data[0].type == "heatmap" and list(heatmap.data[0].y) == ["rank 0", "rank 1", "rank 2", "rank 3"]
    # The straggling rank's row reads 1.5× the median rank for the heaviest kernel.
    assert heatmap.data[0].z[2][0] == pytest.approx(1.5, rel=0.01)
    panel = str(side_panel(analysis))
    assert "rank 2 is a straggler" in panel and "job_rank4.sqlite" in panel
    store = RunStore()
    store.add(analysis, saved.name)
    client = create_app(store, lambda path: run_analysis(path, None), 2**20).server.test_client()
    assert client.get("/", headers={"Host": "127.0.0.1:8050"}).status_code == 200
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"fleet": {"ranks": []}}')
    from traceview.errors import TraceFormatError

    with pytest.raises(TraceFormatError, match="fleet result with missing or damaged fields"):
        run_analysis(damaged, None)


def test_ncu_verdicts_are_joined_once_onto_the_fleet_kernels(realdata_file, tmp_path):
    for rank in (0, 1):
        target = tmp_path / f"nvfuser_rank{rank}.sqlite"
        shutil.copy(realdata_file("nsys_sqlite/nvfuser_H200_nsys2024.6.2.sqlite"), target)
        target.chmod(0o644)
    ncu = realdata_file("ncu_console/ncu2022_a100_80gb_pytorch_layernorm_x17_nvfuser_x13_liqiangxl.log")
    result = CliRunner().invoke(app, ["fleet", str(tmp_path), "--ncu", str(ncu), "--format", "json"])
    assert result.exit_code == 0, result.output
    kernels = json.loads(result.stdout)["fleet"]["kernels"]
    joined = [k for k in kernels if k["ncu_bound"] is not None]
    assert [k["short_name"] for k in joined] == ["distribution_elementwise_grid_stride_kernel"]
    assert joined[0]["ncu_bound"] == "compute" and joined[0]["ranks"] == 2
    assert "Nsight Compute verdicts joined onto 1 of" in result.stderr


def test_mixed_inputs_with_no_kernel_time_name_no_straggler(realdata_file):
    """Logs and summaries have no kernel time: a median of zero leaves nothing to stand out from (it divided by it)."""
    fleet = fleet_json(str(realdata_file("tegrastats/agx_orin64_jp6_ts_Hanner123_a.log").parent),
                       str(realdata_file("ncu_raw/mudock_gtx1650_full_raw.csv")))
    assert fleet["stragglers"] == [] and len(fleet["files"]) >= 10 and fleet["failures"] == []


def test_files_of_different_workloads_are_not_tested_for_stragglers(realdata_file):
    fleet = fleet_json(*(str(realdata_file(p)) for p in (
        "ncu_details/ncu2019.5_v100_aws_cfd_stdout_mixed_xplacer.log", "ncu_raw/mudock_gtx1650_full_raw.csv",
        "ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv", H100)))
    assert fleet["stragglers"] == [] and fleet["notes"][0].startswith("no straggler test: no kernel runs on half of the 4 files")


def test_unified_memory_time_is_a_rank_share_and_a_stale_cache_is_summarised_again(tmp_path):
    # The real managed-memory export (tests/fixtures/found/PROVENANCE.md) as two ranks: its unified-memory time is a
    # share of each rank's span beside compute, copy and idle. A cache written by a traceview whose summaries lacked
    # that column is a miss, not a crash or a silent gap.
    from pathlib import Path

    import polars as pl

    source = Path(__file__).parent / "fixtures" / "found" / "nsys2022.1_rtx3070_managed_memory_demand_paging.sqlite"
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in range(2):
        shutil.copy(source, folder / f"run_rank{rank}.sqlite")
    cache = tmp_path / "cache"
    fleet = fleet_json(str(folder), "--cache", str(cache))
    shares = [rank["unified_memory_pct"] for rank in fleet["ranks"]]
    assert len(shares) == 2 and all(share > 1 for share in shares)
    table = runner_output(str(folder))
    assert "UM %" in table
    for cached in cache.glob("*.devices.parquet"):
        pl.read_parquet(cached).drop("unified_memory_pct").write_parquet(cached)
    result = CliRunner().invoke(app, ["fleet", str(folder), "--cache", str(cache), "--format", "json"])
    assert result.exit_code == 0 and "2 file(s) read, 0 from the cache" in result.stderr
    assert [rank["unified_memory_pct"] for rank in json.loads(result.stdout)["fleet"]["ranks"]] == shares


def runner_output(*args: str) -> str:
    result = CliRunner().invoke(app, ["fleet", *args])
    assert result.exit_code == 0, result.output
    return result.stdout
