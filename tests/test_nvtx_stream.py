"""NVTX ranges are streamed from an export (issue 35): nested chunk by chunk, they must give exactly the answer of the
whole table nested at once, wherever the chunk edges fall (inside a range, inside a tie of equal starts, between a
range and its parent), and an export whose rows are not in start order per thread is nested whole instead."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from traceview.analyzer.nvtx import NvtxRanges, RangesOutOfOrder, nvtx_ranges
from traceview.analyzer.whole_run import launch_records, read_nvtx
from traceview.parsers import nsys_sqlite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "nsys" / "h100x2_copy_bound_nsys2026.2.sqlite"
REAL_EXPORTS = ["nsys_sqlite/nsys2026.2_h100x2_sliced_nsys-ai.sqlite", "nsys_sqlite/EDGE_nvtx_only_TITANRTX_nsys2022.4.2.sqlite",
                "nsys_sqlite/dlprof_pytorch_cnn_RTX2070S_nsys2022.1.3.sqlite", "nsys_sqlite/nvfuser_H200_nsys2024.6.2.sqlite"]
NO_LAUNCHES = pl.DataFrame(schema={"tid": pl.Int64, "call_start_ns": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64})


def chunks_of(frame: pl.DataFrame, rows: int) -> list[pl.DataFrame]:
    return [frame.slice(first, rows) for first in range(0, frame.height, rows)]


def assert_same(whole: NvtxRanges, part: NvtxRanges) -> None:
    assert_frame_equal(whole.groups.sort("group"), part.groups.sort("group"))
    assert_frame_equal(whole.steps, part.steps)


def synthetic_ranges(seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return NVTX rows in start order per thread, threads interleaved, and kernel launches from those threads: nested
    push/pop ranges with ties of equal starts (longer and shorter, some of zero length), start/end ranges that cross
    others, marks, ranges without an end, rows without a thread; and launch calls at and inside range edges."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[int, int | None, str, str, int | None]] = []
    calls: list[tuple[int, int, int, int]] = []
    for tid in (11, 12, 13):
        now = 0

        def push(start: int, level: int, tid: int = tid) -> int:
            """Append properly nested ranges under [start, ...) and return where they end."""
            inner = start
            for _ in range(int(rng.integers(0, 4)) if level < 4 else 0):
                inner = push(inner + int(rng.integers(0, 2)), level + 1)  # 0: a child starting with its parent (a tie)
            end = inner + int(rng.integers(0, 3))  # 0: zero length where it has no children
            name = ["ProfilerStep#7", "forward", "aten::linear, seq = 4, op_id = 99", "aten::mm", "kernel_launch"][min(level, 4)]
            rows.append((start, end, name, "PushPop", tid))
            if rng.random() < 0.5:
                call = int(rng.integers(start, end + 1))
                calls.append((tid, call, call + 100, call + 100 + int(rng.integers(1, 50))))
            return end

        for _ in range(6):
            now = push(now + int(rng.integers(0, 3)), 0) + int(rng.integers(0, 2))
            if rng.random() < 0.3:  # a start/end range crossing the next ones
                rows.append((now - 1, now + int(rng.integers(1, 30)), "async region", "StartEnd", tid))
            if rng.random() < 0.3:
                rows.append((now, None, "a mark", "Mark", tid))
        rows.append((now, None, "never ended", "PushPop", tid))
    rows.append((5, 9, "no thread", "PushPop", None))
    # Start order within each thread (ties in the order they were written), threads interleaved as nsys writes them.
    by_thread = sorted(range(len(rows)), key=lambda i: (rows[i][4] or 0, rows[i][0], i))
    interleaved = sorted(by_thread, key=lambda i: (rows[i][0], rng.random()))
    positions = {tid: [i for i in by_thread if rows[i][4] == tid] for tid in {row[4] for row in rows}}
    # Each thread's rows keep their start order, whatever the interleaving put first.
    order: list[int] = []
    taken = {tid: 0 for tid in positions}
    for i in interleaved:
        tid = rows[i][4]
        order.append(positions[tid][taken[tid]])
        taken[tid] += 1
    nvtx = pl.DataFrame([rows[i] for i in order], schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "text": pl.String, "kind": pl.String, "tid": pl.Int64},
                        orient="row").with_columns(pl.col("text", "kind").cast(pl.Categorical))
    launches = pl.DataFrame(calls, schema={"tid": pl.Int64, "call_start_ns": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row")
    return nvtx, launches


@pytest.mark.parametrize("seed", range(8))
def test_ranges_nested_chunk_by_chunk_give_the_whole_tables_answer(seed):
    nvtx, launches = synthetic_ranges(seed)
    whole = nvtx_ranges(nvtx, launches)
    assert whole.groups["count"].sum() == nvtx.filter((pl.col("kind") != "Mark") & pl.col("end_ns").is_not_null()).height
    assert whole.groups["depth"].max() >= 2 and whole.groups["kernels"].sum() > 0
    for rows in (1, 2, 3, 5, 8, 13, 40):
        assert_same(whole, nvtx_ranges(chunks_of(nvtx, rows), launches))


@pytest.mark.parametrize("name", REAL_EXPORTS)
def test_real_exports_nested_in_chunks_give_the_whole_answer(realdata_file, name):
    export = nsys_sqlite.parse(realdata_file(name))
    nvtx, launches = export.nvtx, launch_records(export.kernels, export.api)
    whole = nvtx_ranges(nvtx, launches)
    for rows in (50, 997):
        assert_same(whole, nvtx_ranges(chunks_of(nvtx, rows), launches))


def test_ranges_out_of_start_order_across_chunks_are_nested_whole():
    nvtx, launches = synthetic_ranges(3)
    shuffled = nvtx.sample(fraction=1.0, shuffle=True, seed=5)
    whole = nvtx_ranges(nvtx, launches)
    # One chunk may come in any order (the steps keep the rows' order, so only their set is the same).
    in_any_order = nvtx_ranges(shuffled, launches)
    assert_frame_equal(whole.groups.sort("group"), in_any_order.groups.sort("group"))
    assert_frame_equal(whole.steps.sort(pl.all()), in_any_order.steps.sort(pl.all()))
    with pytest.raises(RangesOutOfOrder):
        nvtx_ranges(chunks_of(shuffled, 10), launches)
    # The whole-run pass reads such rows again and nests them as one chunk.
    starts = ends = np.array([], dtype=np.int64)
    fallback = read_nvtx(lambda: chunks_of(shuffled, 10), launches, starts, ends)
    assert_same(nvtx_ranges(shuffled, launches), fallback.ranges)


def test_the_whole_run_pass_keeps_only_what_the_gaps_need():
    nvtx, launches = synthetic_ranges(1)
    starts, ends = np.array([3, 40]), np.array([6, 41])
    once = read_nvtx(lambda: [nvtx], launches, starts, ends)
    chunked = read_nvtx(lambda: chunks_of(nvtx, 4), launches, starts, ends)
    assert_same(once.ranges, chunked.ranges)
    assert once.texts.to_list() == chunked.texts.to_list() == sorted(nvtx["text"].cast(pl.String).unique().to_list())
    row_end = pl.coalesce("end_ns", "start_ns")
    near = nvtx.filter(((pl.col("start_ns") < 6) & (row_end > 3)) | ((pl.col("start_ns") < 41) & (row_end > 40)))
    assert_frame_equal(chunked.near, near)
    assert chunked.threads_known and chunked.named.height == 0


@pytest.mark.parametrize("adbc", [True, False])
def test_an_export_removed_after_it_was_read_still_streams_its_ranges(tmp_path, without_module, adbc):
    """The dashboard removes an upload once it is analysed; its timeline reads the NVTX ranges later."""
    if not adbc:
        without_module("adbc_driver_manager")
    copy = tmp_path / "upload.sqlite"
    shutil.copyfile(SAMPLE, copy)
    with sqlite3.connect(copy) as connection:
        expected = connection.execute("SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 34)").fetchone()[0]
    assert expected > 0
    export = nsys_sqlite.parse(copy)
    copy.unlink()
    assert sum(chunk.height for chunk in export.nvtx_chunks()) == expected
    assert export.nvtx.height == expected


def test_chunks_read_ahead_are_the_chunks_read_in_turn(tmp_path, monkeypatch):
    """The analysis starts reading the first NVTX chunk before it comes to the ranges; the pass then yields the same
    chunks in the same order, and a later pass reads them all again."""
    monkeypatch.setattr(nsys_sqlite, "_CHUNK_ROWS", 50)
    monkeypatch.setattr(nsys_sqlite, "_SPLIT_ROWS", 50)
    stream = nsys_sqlite.parse(SAMPLE).nvtx_stream
    assert stream is not None
    plain = list(stream.chunks())
    assert len(plain) > 2
    stream.read_ahead()
    stream.read_ahead()  # a second call while the first read is pending starts nothing more
    for ahead in (list(stream.chunks()), list(stream.chunks())):
        assert len(ahead) == len(plain)
        for first, second in zip(plain, ahead, strict=True):
            assert_frame_equal(first, second)
