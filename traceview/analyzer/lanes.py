"""Timeline lanes of an Nsight Systems export, for a zoomable view: per GPU compute, communication and copies; per
host process NVTX ranges and CUDA API calls. Pure.

Each lane keeps its intervals sorted and their union's running total, so the busy share of any window, cut into any
number of bins, costs a binary search per bin edge: millions of events stay interactive because the view asks for
bins, never for the events themselves, except where a window holds few enough to name one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from traceview.analyzer.kernel_kinds import is_communication
from traceview.analyzer.whole_run import Coverage
from traceview.parsers.nsys_sqlite import threads_of

# Below this many events in the window a lane also lists them, so each can be hovered and clicked.
LISTED_EVENTS = 400


@dataclass
class Lane:
    """One row of the timeline: its label, what it shows, and its intervals (ns, sorted by start)."""

    name: str
    kind: str  # compute, communication, copy, nvtx, cuda_api
    device_id: int | None
    starts: np.ndarray
    ends: np.ndarray
    labels: pl.Series  # one per interval: a name, or a name id looked up in `names`
    coverage: Coverage
    names: dict[int, str] | None = None

    def busy(self, edges: np.ndarray) -> np.ndarray:
        """Return the share (0-1) of each bin between consecutive `edges` (ns) that the lane is busy."""
        covered = np.diff(self.coverage.upto(edges))
        widths = np.diff(edges).astype(np.float64)
        return np.divide(covered, widths, out=np.zeros(len(widths)), where=widths > 0)

    def events_in(self, start: int, end: int, limit: int = LISTED_EVENTS) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
        """Return the lane's intervals overlapping [start, end) when there are at most `limit`, else None."""
        # Intervals are sorted by start; one that began before the window may still reach into it (up to the longest).
        first = np.searchsorted(self.starts, start - self.longest, side="left")
        last = np.searchsorted(self.starts, end, side="left")
        if last - first > 4 * limit:
            return None
        index = np.arange(first, last)
        index = index[self.ends[index] > start]
        if len(index) > limit:
            return None
        labels = self.labels.gather(index).to_list()
        if self.names is not None:
            labels = [self.names.get(label, "?") if label is not None else "?" for label in labels]
        return self.starts[index], self.ends[index], [str(label or "") for label in labels]

    @property
    def longest(self) -> int:
        if self._longest is None:
            self._longest = int((self.ends - self.starts).max()) if len(self.starts) else 0
        return self._longest

    _longest: int | None = None


def _lane(name: str, kind: str, device: int | None, frame: pl.DataFrame, label: str, names: dict[int, str] | None = None,
          keep: pl.Expr | None = None) -> Lane:
    """Return the lane of `frame`'s rows that `keep` keeps (all where None) and that have a start and an end."""
    wanted = pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))
    if keep is not None:
        wanted = wanted & keep
    # One pass and one copy of the three columns a lane keeps, and none where every row is kept: a filter per
    # condition copied ten million NVTX rows three times over (9 s of the 10 M-launch export's first timeline).
    if frame.select(wanted.fill_null(False).all()).item():
        frame = frame.select("start_ns", "end_ns", label)
    else:
        frame = frame.lazy().filter(wanted).select("start_ns", "end_ns", label).collect()
    # Exports write activity in (or nearly in) start order: sorted starts are kept as they are, else a stable sort of
    # the starts alone reorders the three columns a lane keeps.
    if not frame["start_ns"].is_sorted():
        frame = frame.select(pl.all().gather(np.argsort(frame["start_ns"].to_numpy(), kind="stable")))
    starts, ends = frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy()
    return Lane(name, kind, device, starts, ends, frame[label], Coverage(starts, ends, presorted=True), names)


def timeline_lanes(kernels: pl.DataFrame, memops: pl.DataFrame, graphs: pl.DataFrame, api: pl.DataFrame, nvtx: pl.DataFrame,
                   names: dict[int, str]) -> list[Lane]:
    """Return the lanes: for each GPU its compute, communication and copy activity (unified memory with copies), then
    for each host process that owns a GPU its NVTX ranges and CUDA API calls."""
    communication = [i for i in kernels["name_id"].unique().drop_nulls().to_list() if is_communication(names.get(i, ""))]
    graph_rows = graphs.select("device_id", "start_ns", "end_ns", pl.lit(None, dtype=kernels.schema["name_id"]).alias("name_id"))
    lanes: list[Lane] = []
    devices = set(kernels["device_id"].drop_nulls().unique().to_list()) | set(memops["device_id"].drop_nulls().unique().to_list())
    for device in sorted(devices):
        own = pl.concat([kernels.filter(pl.col("device_id") == device).select("device_id", "start_ns", "end_ns", "name_id"),
                         graph_rows.filter(pl.col("device_id") == device)])
        for kind, rows in (("compute", own.filter(~pl.col("name_id").is_in(communication) | pl.col("name_id").is_null())),
                           ("communication", own.filter(pl.col("name_id").is_in(communication)))):
            if rows.height:
                lanes.append(_lane(f"GPU {device} {kind}", kind, device, rows, "name_id", names))
        copies = memops.filter(pl.col("device_id") == device)
        if copies.height:
            lanes.append(_lane(f"GPU {device} copy", "copy", device, copies, "operation"))
    pids = set(kernels["pid"].drop_nulls().unique().to_list()) | set(memops["pid"].drop_nulls().unique().to_list())
    ranges = pl.col("kind") != "Mark"
    for pid in sorted(pids) or [None]:
        own_ranges = ranges if pid is None else ranges & pl.col("tid").is_in(threads_of(nvtx["tid"], [pid]).implode())
        if nvtx.height and nvtx.select(own_ranges.fill_null(False).any()).item():
            lanes.append(_lane(f"host {pid} NVTX" if pid is not None else "host NVTX", "nvtx", None, nvtx, "text", keep=own_ranges))
        own_calls = None if pid is None else pl.col("pid") == pid
        if api.height and (own_calls is None or api.select(own_calls.fill_null(False).any()).item()):
            lanes.append(_lane(f"host {pid} CUDA API" if pid is not None else "host CUDA API", "cuda_api", None, api, "name", keep=own_calls))
    return lanes


def span_of(lanes: list[Lane]) -> tuple[int, int] | None:
    """Return the first start and last end over every lane (ns), or None when all are empty."""
    starts = [int(lane.starts.min()) for lane in lanes if len(lane.starts)]
    ends = [int(lane.ends.max()) for lane in lanes if len(lane.ends)]
    return (min(starts), max(ends)) if starts else None
