"""Timeline lanes of an Nsight Systems export, for a zoomable view: per GPU compute, communication and copies; per
host process NVTX ranges and CUDA API calls. Pure.

A lane holds no copy of its events, so the timeline of an export of ten million launches and fifty million NVTX
ranges holds a few MB per lane, whatever the export's size:
- the busy time of the union of its intervals in each of FINE_BINS bins over its span (BusyBins), built chunk by
  chunk as the events go past once;
- a zone map (Zones): the first start and the last end of the lane's events in each block of ZONE_ROWS rows of their
  source, a frame the export holds or its NVTX table read again, through which a window's events are read back.
A window whose blocks hold few enough rows is measured exactly from its events (and lists them when they are few); a
wider one is read off the fine bins, exact at their edges and linear inside one, its own bins then spanning many.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import polars as pl

from traceview.analyzer.kernel_kinds import is_communication
from traceview.analyzer.whole_run import Coverage
from traceview.parsers.nsys_sqlite import pid_of_thread

# Below this many events in the window a lane also lists them, so each can be hovered and clicked.
LISTED_EVENTS = 400
FINE_BINS = 1 << 18  # per lane: 2 MB; a view of 1,000 bins spans 262 of them, so reading it off them is within 1%
ZONE_ROWS = 4096  # source rows per block of the zone map
# A window is measured from its events where its blocks hold at most this many rows: from a frame in memory, or
# from the export's NVTX table, which SQLite decodes at about a microsecond a row (a zoom answers within 300 ms).
EXACT_FRAME_ROWS = 500_000
EXACT_TABLE_ROWS = 50_000
_SLICE_ROWS = 1 << 20  # rows of a held frame taken at a time while its lanes are built
_MAX_SPAN_NS = 1 << 61  # a lane's bins never span more (a damaged export's stray times are left out of the bins)

# Reads back the lane's events among `rows` rows of its source from `offset` in chunk `part`, with `where` if given:
# a frame of start_ns, end_ns and label.
Reader = Callable[[int, int, int, pl.Expr | None], pl.DataFrame]


def _valid() -> pl.Expr:
    return (pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))).fill_null(False)


def union_blocks(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the blocks of the union of intervals (ns, end ≥ start): their starts and ends, disjoint and in order,
    touching intervals in one block. In start order, a block begins where an interval starts after every earlier one
    has ended, and ends at the furthest end before the next block: a running maximum, no sort of the ends (rows come
    in start order or nearly; others are put in order first, stably, which costs little on nearly sorted ones)."""
    if not len(starts):
        return starts.astype(np.int64), ends.astype(np.int64)
    if len(starts) > 1 and not bool((starts[1:] >= starts[:-1]).all()):
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    first = np.empty(len(starts), dtype=bool)
    first[0] = True
    np.greater(starts[1:], reach[:-1], out=first[1:])
    last = np.empty(len(starts), dtype=bool)
    last[:-1] = first[1:]
    last[-1] = True
    return starts[first].astype(np.int64, copy=False), reach[last].astype(np.int64, copy=False)


class BusyBins:
    """The union of intervals fed in chunks, as busy ns in each of a fixed number of bins of one width from `origin`;
    the width doubles (neighbouring bins summed) whenever an interval falls outside.

    Chunks may overlap in time: a chunk's intervals are held until the next chunk comes, and of their union with the
    blocks still open only those that end before the next chunk's first start are added to the bins. Rows come in
    start order or nearly (every export here does), so those blocks are final; an interval that starts before the
    last block added (counted in `late`) has its part before it added on its own, capped at each bin's width."""

    def __init__(self, bins: int = FINE_BINS) -> None:
        self.busy = np.zeros(bins, dtype=np.int64)
        self.origin: int | None = None
        self.width = 1
        self.late = 0
        self.outside = 0  # intervals too far from the rest to bin (a damaged export's stray times)
        self._held: tuple[np.ndarray, np.ndarray] | None = None
        self._open = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self._frontier: int | None = None
        self._cumulative: np.ndarray | None = None

    def add(self, starts: np.ndarray, ends: np.ndarray) -> None:
        """Take a chunk of intervals (ns, end ≥ start), in any order within it."""
        if not len(starts):
            return
        starts, ends = starts.astype(np.int64, copy=False), ends.astype(np.int64, copy=False)
        if self._held is not None:
            self._merge(*self._held, upto=int(starts.min()))
        self._held = (starts, ends)

    def finish(self) -> BusyBins:
        """Add everything still held; return self."""
        if self._held is not None:
            self._merge(*self._held, upto=None)
            self._held = None
        return self

    def _merge(self, starts: np.ndarray, ends: np.ndarray, upto: int | None) -> None:
        if self._frontier is not None and len(starts):
            late = starts < self._frontier
            if late.any():
                self.late += int(np.count_nonzero(late))
                block_starts, block_ends = union_blocks(starts[late], np.minimum(ends[late], self._frontier))
                self._add(block_starts, block_ends)
                np.minimum(self.busy, self.width, out=self.busy)
                # What reaches past the frontier joins the union as usual; the rest is left empty.
                starts = np.where(late, self._frontier, starts)
                ends = np.maximum(ends, starts)
        block_starts, block_ends = union_blocks(np.concatenate([self._open[0], starts]), np.concatenate([self._open[1], ends]))
        done = len(block_starts) if upto is None else int(np.searchsorted(block_ends, upto, side="left"))
        self._add(block_starts[:done], block_ends[:done])
        if done:
            self._frontier = int(block_ends[done - 1])
        self._open = (block_starts[done:], block_ends[done:])

    def _add(self, starts: np.ndarray, ends: np.ndarray) -> None:
        """Add blocks (disjoint, in order) to the bins."""
        if not len(starts):
            return
        if not self._cover(int(starts[0]), int(ends[-1])):
            # A stray time (a damaged export) is left out, not the blocks beside it: those within reach of the bins
            # already begun, or of the blocks' median, are kept.
            anchor = self.origin if self.origin is not None else int(np.median(starts))
            near = (starts >= anchor - _MAX_SPAN_NS // 2) & (ends <= anchor + _MAX_SPAN_NS // 2)
            self.outside += int(np.count_nonzero(~near))
            starts, ends = starts[near], ends[near]
            if not len(starts) or not self._cover(int(starts[0]), int(ends[-1])):
                self.outside += len(starts)
                return
        assert self.origin is not None
        origin, width, count = self.origin, self.width, len(self.busy)
        timed = ends > starts
        starts, ends = starts[timed] - origin, ends[timed] - origin
        first, last = starts // width, ends // width
        # Most blocks lie inside one bin: their lengths are summed per bin at once (exact: float64 holds every sum of
        # nanoseconds below 104 days).
        inside = first == last
        self.busy += np.bincount(first[inside], weights=(ends - starts)[inside], minlength=count).astype(np.int64)
        # A block across bin edges: its piece in its first and last bins, and the whole width of every bin between.
        first, last, starts, ends = first[~inside], last[~inside], starts[~inside], ends[~inside]
        np.add.at(self.busy, first, (first + 1) * width - starts)
        tail = ends > last * width
        np.add.at(self.busy, last[tail], ends[tail] - last[tail] * width)
        between = last > first + 1
        if between.any():
            steps = np.zeros(count + 1, dtype=np.int64)
            np.add.at(steps, first[between] + 1, width)
            np.add.at(steps, last[between], -width)
            self.busy += np.cumsum(steps[:count])
        self._cumulative = None

    def _cover(self, low: int, high: int) -> bool:
        """Widen the bins until [low, high] lies inside them; return False where that would span more than
        _MAX_SPAN_NS."""
        count = len(self.busy)
        if self.origin is None:
            if high - low > _MAX_SPAN_NS:
                return False
            self.origin, self.width = low, max(1, -(-(high - low + 1) // count))
            return True
        if max(high, self.origin + self.width * count) - min(low, self.origin) > _MAX_SPAN_NS:
            return False
        while low < self.origin:
            pairs = self.busy.reshape(-1, 2).sum(axis=1)
            self.busy[: count // 2], self.busy[count // 2:] = 0, pairs
            self.origin -= self.width * count
            self.width *= 2
        while high > self.origin + self.width * count:
            pairs = self.busy.reshape(-1, 2).sum(axis=1)
            self.busy[: count // 2], self.busy[count // 2:] = pairs, 0
            self.width *= 2
        return True

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Return the busy time (ns, float) from the bins' origin up to each t: exact at bin edges, linear inside."""
        if self.origin is None:
            return np.zeros(len(t))
        if self._cumulative is None:
            self._cumulative = np.concatenate([[0], np.cumsum(self.busy)])
        place = (t - self.origin) / self.width
        index = np.clip(np.floor(place), 0, len(self.busy) - 1).astype(np.int64)
        inside = np.clip(place - index, 0.0, 1.0)
        covered: np.ndarray = self._cumulative[index] + self.busy[index] * inside
        return covered


@dataclass
class Zones:
    """Per block of a lane's source rows that holds any of its events: where the block is (its chunk, first row and
    row count) and the first start and last end (ns) of the lane's events in it."""

    parts: np.ndarray
    offsets: np.ndarray
    rows: np.ndarray
    first_start: np.ndarray
    last_end: np.ndarray

    def overlapping(self, start: int, end: int) -> np.ndarray:
        """Return the blocks (indices) that may hold an event overlapping [start, end)."""
        return np.flatnonzero((self.first_start < end) & (self.last_end > start))


@dataclass
class _ZoneBuilder:
    parts: list[np.ndarray] = field(default_factory=list)
    offsets: list[np.ndarray] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    first_start: list[np.ndarray] = field(default_factory=list)
    last_end: list[np.ndarray] = field(default_factory=list)

    def add(self, part: int, part_rows: int, rows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        """Take a lane's events at `rows` (ascending) of chunk `part`, which has `part_rows` rows."""
        if not len(rows):
            return
        block = rows // ZONE_ROWS
        first = np.flatnonzero(np.concatenate([[True], block[1:] != block[:-1]]))
        offsets = block[first] * ZONE_ROWS
        self.parts.append(np.full(len(first), part, dtype=np.int32))
        self.offsets.append(offsets.astype(np.int64))
        self.rows.append(np.minimum(ZONE_ROWS, part_rows - offsets).astype(np.int32))
        self.first_start.append(np.minimum.reduceat(starts, first))
        self.last_end.append(np.maximum.reduceat(ends, first))

    def zones(self) -> Zones:
        def joined(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype=dtype)

        return Zones(joined(self.parts, np.int32), joined(self.offsets, np.int64), joined(self.rows, np.int32),
                     joined(self.first_start, np.int64), joined(self.last_end, np.int64))


@dataclass
class _LaneBuilder:
    """Builds one lane from chunks of its source."""

    bins: BusyBins = field(default_factory=BusyBins)
    zones: _ZoneBuilder = field(default_factory=_ZoneBuilder)
    count: int = 0

    def add(self, part: int, part_rows: int, events: pl.DataFrame) -> None:
        """Take the lane's events (row, start_ns, end_ns) of chunk `part`, in row order."""
        if not events.height:
            return
        starts, ends = events["start_ns"].to_numpy(), events["end_ns"].to_numpy()
        self.bins.add(starts, ends)
        self.zones.add(part, part_rows, events["row"].to_numpy().astype(np.int64), starts, ends)
        self.count += events.height


class Lane:
    """One row of the timeline: its label, what it shows, and how to measure and list its events in any window."""

    def __init__(self, name: str, kind: str, device_id: int | None, built: _LaneBuilder, read: Reader, exact_rows: int,
                 names: dict[int, str] | None = None) -> None:
        self.name, self.kind, self.device_id, self.names = name, kind, device_id, names
        self.count = built.count  # events in the lane
        self.bins = built.bins.finish()
        self.zones = built.zones.zones()
        self._read, self._exact_rows = read, exact_rows

    @property
    def first_ns(self) -> int:
        """Return the lane's first start (ns)."""
        return int(self.zones.first_start.min())

    @property
    def last_ns(self) -> int:
        """Return the lane's last end (ns)."""
        return int(self.zones.last_end.max())

    def _window(self, start: int, end: int, most_rows: int | None, where: pl.Expr | None = None) -> pl.DataFrame | None:
        """Return the lane's events overlapping [start, end) (start_ns, end_ns, label; by start), read from the
        blocks that may hold them, or None where those blocks hold more than `most_rows` rows."""
        blocks = self.zones.overlapping(start, end)
        if most_rows is not None and int(self.zones.rows[blocks].sum()) > most_rows:
            return None
        overlap = (pl.col("start_ns") < end) & (pl.col("end_ns") > start)
        where = overlap if where is None else overlap & where
        if not len(blocks):
            return self._read(0, 0, 0, where)
        parts, offsets, rows = self.zones.parts[blocks], self.zones.offsets[blocks], self.zones.rows[blocks]
        # Neighbouring blocks are read together.
        runs = np.flatnonzero(np.concatenate([[True], (parts[1:] != parts[:-1]) | (offsets[1:] != offsets[:-1] + rows[:-1])]))
        frames = []
        for at, upto in zip(runs.tolist(), [*runs[1:].tolist(), len(blocks)], strict=True):
            count = int(offsets[upto - 1] + rows[upto - 1] - offsets[at])
            frames.append(self._read(int(parts[at]), int(offsets[at]), count, where))
        return pl.concat(frames).sort("start_ns", maintain_order=True)

    def busy(self, edges: np.ndarray) -> np.ndarray:
        """Return the share (0-1) of each bin between consecutive `edges` (ns) that the lane is busy."""
        events = self._window(int(edges[0]), int(edges[-1]), self._exact_rows)
        if events is not None:
            covered = np.diff(Coverage(events["start_ns"].to_numpy(), events["end_ns"].to_numpy()).upto(edges)).astype(np.float64)
        else:
            covered = np.diff(self.bins.upto(edges))
        widths = np.diff(edges).astype(np.float64)
        shares: np.ndarray = np.clip(np.divide(covered, widths, out=np.zeros(len(widths)), where=widths > 0), 0.0, 1.0)
        return shares

    def events_in(self, start: int, end: int, limit: int = LISTED_EVENTS) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
        """Return the lane's intervals overlapping [start, end) (ns, by start, with their labels) when there are at most
        `limit`, else None."""
        events = self._window(start, end, max(4 * limit, 16 * ZONE_ROWS))
        if events is None or events.height > limit:
            return None
        labels = events["label"].to_list()
        if self.names is not None:
            labels = [self.names.get(label, "?") if label is not None else "?" for label in labels]
        return events["start_ns"].to_numpy(), events["end_ns"].to_numpy(), [str(label or "") for label in labels]

    def labelled(self, start: int, end: int, labels: Iterable[int | str]) -> tuple[np.ndarray, np.ndarray]:
        """Return the starts and ends (ns) of the lane's events overlapping [start, end) whose label is one of
        `labels` (a kernel's name ids), read a run of blocks at a time."""
        events = self._window(start, end, None, pl.col("label").is_in(list(labels)).fill_null(False))
        assert events is not None
        return events["start_ns"].to_numpy(), events["end_ns"].to_numpy()


def _reader(rows_at: Callable[[int, int, int], pl.DataFrame], wanted: pl.Expr, label: str) -> Reader:
    """Return the Reader of a lane whose source's rows `rows_at(part, offset, count)` gives: the rows `wanted` keeps,
    as start_ns, end_ns and their `label` column."""
    def read(part: int, offset: int, rows: int, where: pl.Expr | None) -> pl.DataFrame:
        own = rows_at(part, offset, rows).lazy().filter(wanted).select("start_ns", "end_ns", pl.col(label).alias("label"))
        return (own if where is None else own.filter(where)).collect()

    return read


def _host_lane(pid: int | None, what: str) -> str:
    """Return the name of a host process's lane (`what`: NVTX or CUDA API), of every process where pid is None."""
    return f"host {pid} {what}" if pid is not None else f"host {what}"


def frame_lane(name: str, kind: str, device: int | None, frame: pl.DataFrame, label: str, names: dict[int, str] | None = None,
               keep: pl.Expr | None = None) -> Lane | None:
    """Return the lane of `frame`'s rows that `keep` keeps (all where None) and that have a start and an end, or None
    where there are none. The frame is the export's own: the lane reads its rows back from it."""
    wanted = _valid() if keep is None else _valid() & keep.fill_null(False)
    built = _LaneBuilder()
    for offset in range(0, frame.height, _SLICE_ROWS):
        rows = frame.slice(offset, _SLICE_ROWS).lazy().with_row_index("row", offset).filter(wanted).select("row", "start_ns", "end_ns").collect()
        built.add(0, frame.height, rows)
    if not built.count:
        return None
    return Lane(name, kind, device, built, _reader(lambda part, offset, rows: frame.slice(offset, rows), wanted, label), EXACT_FRAME_ROWS, names)


def _ranges_of(pid: int | None) -> pl.Expr:
    """The NVTX rows of a process's lane: ranges (not marks) timed, of the process's threads (any where None)."""
    ranges = (pl.col("kind") != "Mark").fill_null(False) & _valid()
    return ranges if pid is None else ranges & (pid_of_thread() == pid).fill_null(False)


class NvtxLanes:
    """Builds each process's NVTX lane from the chunks of NSYS_NVTX rows that one pass over them yields (the
    analysis' own pass, or one of its own), numbered in the order they come; `read(part, offset, rows)` reads rows of
    chunk `part` back (TableStream.rows_at). Starting the chunks again (`restart`) starts the lanes again."""

    def __init__(self, pids: list[int], read: Callable[[int, int, int], pl.DataFrame], exact_rows: int = EXACT_TABLE_ROWS) -> None:
        self._pids = _owners(pids)
        self._read, self._exact_rows = read, exact_rows
        self.restart()

    def restart(self) -> None:
        """Forget every chunk taken."""
        self._built = {pid: _LaneBuilder() for pid in self._pids}
        self._parts = 0

    def add(self, chunk: pl.DataFrame) -> None:
        """Take the next chunk."""
        part = self._parts
        self._parts += 1
        rows = chunk.lazy().with_row_index("row").filter(_ranges_of(None))
        if self._pids == [None]:
            self._built[None].add(part, chunk.height, rows.select("row", "start_ns", "end_ns").collect())
            return
        owned = rows.select("row", "start_ns", "end_ns", pid_of_thread()).collect()
        for pid in self._pids:
            self._built[pid].add(part, chunk.height, owned.filter(pl.col("pid") == pid))

    def lanes(self) -> dict[int | None, Lane]:
        """Return the lane of each process that has ranges."""
        return {pid: Lane(_host_lane(pid, "NVTX"), "nvtx", None, built, _reader(self._read, _ranges_of(pid), "text"), self._exact_rows)
                for pid, built in self._built.items() if built.count}


def _owners(pids: list[int]) -> list[int | None]:
    """Return the processes that get host lanes: each of `pids`, or one lane for every process (None) where none is
    known."""
    return [*pids] if pids else [None]


def process_ids(kernels: pl.DataFrame, memops: pl.DataFrame) -> list[int]:
    """Return the processes that own GPU work, in order: each gets its host lanes."""
    return sorted(set(kernels["pid"].drop_nulls().unique().to_list()) | set(memops["pid"].drop_nulls().unique().to_list()))


def nvtx_lanes(chunks: Iterable[pl.DataFrame], pids: list[int], held: pl.DataFrame | None = None,
               read: Callable[[int, int, int], pl.DataFrame] | None = None) -> dict[int | None, Lane]:
    """Return each process's NVTX lane: from `held` rows (a PyTorch trace's, in memory), or from `chunks` streamed,
    read back through `read` (TableStream.rows_at)."""
    if held is not None:
        lanes = {pid: frame_lane(_host_lane(pid, "NVTX"), "nvtx", None, held, "text", keep=_ranges_of(pid))
                 for pid in _owners(pids)}
        return {pid: lane for pid, lane in lanes.items() if lane is not None}
    assert read is not None
    builder = NvtxLanes(pids, read)
    for chunk in chunks:
        builder.add(chunk)
    return builder.lanes()


def timeline_lanes(kernels: pl.DataFrame, memops: pl.DataFrame, graphs: pl.DataFrame, api: pl.DataFrame, nvtx: dict[int | None, Lane],
                   names: dict[int, str]) -> list[Lane]:
    """Return the lanes: for each GPU its compute, communication and copy activity (unified memory with copies), then
    for each host process that owns a GPU its NVTX ranges (`nvtx`, nvtx_lanes') and CUDA API calls."""
    communication = [i for i in kernels["name_id"].unique().drop_nulls().to_list() if is_communication(names.get(i, ""))]
    planned: list[Callable[[], Lane | None] | Lane | None] = []
    devices = set(kernels["device_id"].drop_nulls().unique().to_list()) | set(memops["device_id"].drop_nulls().unique().to_list())
    talking = pl.col("name_id").is_in(communication).fill_null(False)
    for device in sorted(devices):
        own = pl.col("device_id") == device
        if graphs.height and graphs.select(own.fill_null(False).any()).item():
            # Whole-graph executions are compute, beside the kernels: a frame of both, for this device's lane alone.
            rows = pl.concat([kernels.filter(own & ~talking).select("start_ns", "end_ns", "name_id"),
                              graphs.filter(own).select("start_ns", "end_ns", pl.lit(None, dtype=kernels.schema["name_id"]).alias("name_id"))])
            planned.append(partial(frame_lane, f"GPU {device} compute", "compute", device, rows, "name_id", names))
        else:
            planned.append(partial(frame_lane, f"GPU {device} compute", "compute", device, kernels, "name_id", names, keep=own & ~talking))
        planned.append(partial(frame_lane, f"GPU {device} communication", "communication", device, kernels, "name_id", names, keep=own & talking))
        planned.append(partial(frame_lane, f"GPU {device} copy", "copy", device, memops, "operation", keep=own))
    for pid in _owners(process_ids(kernels, memops)):
        planned.append(nvtx.get(pid))
        if api.height:
            planned.append(partial(frame_lane, _host_lane(pid, "CUDA API"), "cuda_api", None, api, "name",
                                    keep=None if pid is None else pl.col("pid") == pid))
    # Two lanes are built at a time: numpy and polars release the GIL, and the first timeline waits for them all.
    with ThreadPoolExecutor(max_workers=2) as pool:
        lanes = list(pool.map(lambda plan: plan() if callable(plan) else plan, planned))
    return [lane for lane in lanes if lane is not None]


def span_of(lanes: list[Lane]) -> tuple[int, int] | None:
    """Return the first start and last end over every lane (ns), or None when all are empty."""
    return (min(lane.first_ns for lane in lanes), max(lane.last_ns for lane in lanes)) if lanes else None
