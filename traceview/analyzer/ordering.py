"""Orderings of timed rows by group (device, thread) and time, for millions of rows. Pure.

Profilers write activity nearly in time order, and the groups are few: two stable sorts (by time, which timsort does
in near-linear time on nearly sorted data; then by the group's rank as a 16-bit key, which numpy sorts by radix) cost
a fraction of a general multi-key sort.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def group_ranks(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (the distinct groups sorted, each row's rank among them), the rank 16-bit where the groups allow."""
    ids = np.sort(pl.Series(groups).unique().to_numpy())
    rank = np.searchsorted(ids, groups)
    return ids, rank.astype(np.int16 if len(ids) < 2**15 else np.int64)


def grouped_time_order(groups: np.ndarray, starts: np.ndarray, ends: np.ndarray | None = None) -> np.ndarray:
    """Return the permutation that orders rows by group, then start, then (with `ends`) longer first."""
    order = np.argsort(starts, kind="stable")
    if ends is not None and len(order) > 1:
        ordered = starts[order]
        tie = np.flatnonzero(ordered[1:] == ordered[:-1])
        if len(tie):
            member = np.zeros(len(order), dtype=bool)
            member[tie] = member[tie + 1] = True
            # The tied rows sit in start order: sorting them by (start, -end) and writing them back keeps each run
            # of equal starts in its own places.
            tied = order[member]
            order[member] = tied[np.lexsort((-ends[tied], starts[tied]))]
    _, rank = group_ranks(groups)
    return order[np.argsort(rank[order], kind="stable")]
