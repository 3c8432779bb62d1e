"""The timeline's lanes hold no copy of their events (issue 35): busy time per fine bin, built chunk by chunk, and a
zone map through which a window's events are read back from the export. They must answer as the events themselves
do: the union's busy time exactly at every fine bin edge, a narrow window's busy shares and events exactly, wherever
the chunk, slice and block edges fall."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from traceview.analyzer import lanes as lanes_module
from traceview.analyzer.lanes import BusyBins, frame_lane
from traceview.analyzer.whole_run import Coverage
from traceview.parsers import nsys_sqlite

H100 = "nsys_sqlite/nsys2026.2_h100x2_sliced_nsys-ai.sqlite"


def intervals(seed: int, count: int = 600) -> tuple[np.ndarray, np.ndarray]:
    """Return overlapping intervals in start order: short and long ones, touching ones, zero-length ones, ties."""
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.integers(0, 20 * count, count))
    lengths = rng.choice([0, 1, 5, 40, 400, 4000], size=count, p=[0.05, 0.1, 0.4, 0.3, 0.1, 0.05])
    return starts.astype(np.int64), (starts + lengths).astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [1, 7, 50, 1000])
def test_busy_bins_are_the_union_at_every_bin_edge(seed, chunk):
    starts, ends = intervals(seed)
    rng = np.random.default_rng(seed + 100)
    bins = BusyBins(64)
    for at in range(0, len(starts), chunk):
        # Within a chunk, any order.
        order = rng.permutation(min(chunk, len(starts) - at))
        bins.add(starts[at:at + chunk][order], ends[at:at + chunk][order])
    bins.finish()
    assert bins.late == 0 and bins.outside == 0
    edges = bins.origin + bins.width * np.arange(len(bins.busy) + 1)
    assert np.array_equal(bins.upto(edges), Coverage(starts, ends).upto(edges).astype(np.float64))
    assert int(bins.busy.sum()) == int(Coverage(starts, ends).before[-1])


def test_busy_bins_grow_both_ways_and_stay_exact():
    bins = BusyBins(16)
    pieces = [(1000, 1010), (990, 995), (5000, 5100), (-300, -100)]
    for start, end in pieces:
        bins.add(np.array([start]), np.array([end]))
    bins.finish()
    # The second starts before the first, which is still held; the fourth starts before blocks already added: late,
    # added on its own (it overlaps nothing, so still exact).
    assert bins.late == 1 and bins.busy.sum() == sum(end - start for start, end in pieces)
    assert bins.origin <= -300 and bins.origin + bins.width * 16 >= 5100


def test_a_late_interval_never_makes_a_bin_busier_than_it_is_long():
    bins = BusyBins(8)
    bins.add(np.array([0]), np.array([800]))
    bins.add(np.array([900]), np.array([901]))
    bins.add(np.array([1000]), np.array([1001]))
    bins.add(np.array([0]), np.array([800]))  # the same stretch again, after it was added
    bins.finish()
    assert bins.late == 1
    # Approximate only in the bins it partly covers: no bin is busier than it is long.
    assert (bins.busy <= bins.width).all() and 802 <= bins.busy.sum() <= 802 + bins.width


def test_a_stray_time_is_left_out_of_the_bins_not_the_intervals_beside_it():
    bins = BusyBins(64)
    bins.add(np.array([100, 2**62, 300]), np.array([200, 2**62 + 5, 350]))
    bins.add(np.array([400]), np.array([450]))
    bins.finish()
    assert bins.outside == 1 and bins.busy.sum() == 100 + 50 + 50


def reference(frame: pl.DataFrame, keep: pl.Expr, label: str) -> pl.DataFrame:
    valid = pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))
    return frame.filter((valid & keep).fill_null(False)).select("start_ns", "end_ns", pl.col(label).alias("label"))


@pytest.mark.parametrize(("zone_rows", "slice_rows"), [(7, 1000), (4096, 1 << 20)])
def test_lanes_of_a_real_export_answer_as_its_events(realdata_file, monkeypatch, zone_rows, slice_rows):
    """Every lane of the real 2×H100 export, built in slices and blocks of several sizes, against its events held
    whole: count and span, busy shares in windows wide and narrow (exact from the events, or read off the fine bins
    to within one fine bin at each edge), and the events a narrow window lists."""
    from traceview.app.cli import run_analysis

    monkeypatch.setattr(lanes_module, "ZONE_ROWS", zone_rows)
    monkeypatch.setattr(lanes_module, "_SLICE_ROWS", slice_rows)
    analysis = run_analysis(realdata_file(H100), None)
    export = analysis.timeline.export
    lanes = {lane.name: lane for lane in analysis.timeline.lanes()}
    nvtx = export.nvtx
    expected = {}
    for device in sorted(set(export.kernels["device_id"].unique().to_list())):
        own = pl.col("device_id") == device
        expected[f"GPU {device} compute"] = reference(export.kernels, own, "name_id")  # no communication kernels here
        expected[f"GPU {device} copy"] = reference(export.memops, own, "operation")
    for pid in sorted(set(export.kernels["pid"].unique().to_list())):
        expected[f"host {pid} NVTX"] = reference(nvtx, (pl.col("kind") != "Mark") & (nsys_sqlite.pid_of_thread() == pid), "text")
        expected[f"host {pid} CUDA API"] = reference(export.api, pl.col("pid") == pid, "name")
    assert set(lanes) == set(expected)
    rng = np.random.default_rng(5)
    compared = 0
    for name, events in expected.items():
        lane = lanes[name]
        starts, ends = events["start_ns"].to_numpy(), events["end_ns"].to_numpy()
        union = Coverage(starts, ends)
        assert (lane.count, lane.first_ns, lane.last_ns) == (events.height, starts.min(), ends.max()), name
        for width in (ends.max() - starts.min(), 10_000_000, 100_000, 3_000):
            start = int(rng.integers(starts.min() - width // 4, ends.max()))
            edges = np.linspace(start, start + width, 101).round().astype(np.int64)
            truth = np.diff(union.upto(edges)) / np.diff(edges)
            assert np.allclose(lane.busy(edges), truth, atol=1e-12), (name, width)
            monkeypatch.setattr(lane, "_exact_rows", -1)  # the fine bins alone
            fine = lane.bins.width / np.diff(edges).min()
            assert np.allclose(lane.busy(edges), truth, atol=2 * fine + 1e-9), (name, width)
            monkeypatch.setattr(lane, "_exact_rows", lanes_module.EXACT_FRAME_ROWS)
            listed = lane.events_in(start, start + width, limit=50)
            inside = events.filter((pl.col("start_ns") < start + width) & (pl.col("end_ns") > start))
            if inside.height > 50:
                assert listed is None
            elif listed is not None:  # None where its blocks hold too many rows of other lanes to read for a list
                compared += 1
                labels = inside["label"].to_list()
                if lane.names is not None:
                    labels = [lane.names.get(label, "?") for label in labels]
                assert sorted(zip(*listed[:2], listed[2], strict=True)) == sorted(
                    zip(inside["start_ns"].to_list(), inside["end_ns"].to_list(), [str(label or "") for label in labels], strict=True)), name
    assert compared >= 8  # windows whose events were listed and compared


def test_a_lane_reads_its_events_back_from_the_frame_it_was_built_from():
    frame = pl.DataFrame({"start_ns": [5, 0, 20, 30, None, 40], "end_ns": [9, 4, 25, 29, 50, 41], "name": ["a", "b", "c", "d", "e", "f"],
                          "device_id": [0, 0, 1, 0, 0, 0]})
    lane = frame_lane("GPU 0 compute", "compute", 0, frame, "name", keep=pl.col("device_id") == 0)
    assert lane is not None and lane.count == 3  # device 1's row, the row without a start and the one ending early are left out
    assert lane.events_in(0, 100) == (pytest.approx(np.array([0, 5, 40])), pytest.approx(np.array([4, 9, 41])), ["b", "a", "f"])
    assert lane.busy(np.array([0, 10, 50])) == pytest.approx([0.8, 0.025])
    assert frame_lane("none", "compute", 0, frame, "name", keep=pl.col("device_id") == 7) is None


def test_nvtx_lanes_built_in_the_analysis_pass_are_those_built_later(realdata_file, monkeypatch):
    """`traceview serve` builds the NVTX lanes in the analysis' own pass over the ranges (read in chunks of 997 rows
    here, so blocks and chunks cross): the same lanes as a pass of their own at the first timeline."""
    from traceview.app.cli import run_analysis

    monkeypatch.setattr(nsys_sqlite, "_CHUNK_ROWS", 997)
    monkeypatch.setattr(nsys_sqlite, "_SPLIT_ROWS", 997)
    monkeypatch.setattr(lanes_module, "ZONE_ROWS", 64)
    during = run_analysis(realdata_file(H100), None, timeline=True).timeline
    later = run_analysis(realdata_file(H100), None).timeline
    assert during.nvtx_lanes and later.nvtx_lanes is None
    built, drawn = ({lane.name: lane for lane in t.lanes() if lane.kind == "nvtx"} for t in (during, later))
    assert set(built) == set(drawn) and len(built) == 2
    for name, lane in built.items():
        other = drawn[name]
        assert lane.count == other.count and np.array_equal(lane.bins.busy, other.bins.busy) and lane.bins.late == 0
        assert np.array_equal(lane.zones.offsets, other.zones.offsets) and np.array_equal(lane.zones.parts, other.zones.parts)
        window = (lane.first_ns + 1_000_000, lane.first_ns + 1_100_000)
        listed, again = lane.events_in(*window), other.events_in(*window)
        assert listed is not None and again is not None and len(listed[0])
        assert [list(part) for part in listed] == [list(part) for part in again]


@pytest.mark.parametrize("seed", range(4))
def test_union_blocks_are_the_coverage_blocks_in_any_order(seed):
    starts, ends = intervals(seed)
    order = np.random.default_rng(seed).permutation(len(starts))
    block_starts, block_ends = lanes_module.union_blocks(starts[order], ends[order])
    union = Coverage(starts, ends)
    assert np.array_equal(block_starts, union.starts) and np.array_equal(block_ends, union.ends)
