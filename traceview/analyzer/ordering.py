"""Orderings of timed rows by group (device, thread) and time, for millions of rows. Pure.

Profilers write activity nearly in time order, and the groups are few (devices, threads). Rows are split by group
with one pass per group (stable: each group's rows keep their order), and each group's rows are sorted by time only
where they are not in order already; timsort is near-linear on nearly sorted data. Many groups (correlation ids by
process) fall back to a time sort and a stable sort by the group's rank.
"""

from __future__ import annotations

import numpy as np
import polars as pl

# Up to this many groups, one pass per group costs less than a stable sort of every row by group.
_FEW_GROUPS = 32


def _distinct(groups: np.ndarray) -> np.ndarray:
    return np.sort(pl.Series(groups).unique().to_numpy())


def _ranks(ids: np.ndarray, groups: np.ndarray) -> np.ndarray:
    return np.searchsorted(ids, groups).astype(np.int16 if len(ids) < 2**15 else np.int64)


def time_order(starts: np.ndarray, ends: np.ndarray | None) -> np.ndarray | None:
    """Return the permutation that orders rows by start, then (with `ends`) longer first; None when they are in that
    order already."""
    in_order = len(starts) < 2 or bool(np.all(starts[1:] >= starts[:-1]))
    order = None if in_order else np.argsort(starts, kind="stable")
    if ends is not None and len(starts) > 1:
        ordered = starts if order is None else starts[order]
        tie = np.flatnonzero(ordered[1:] == ordered[:-1])
        if len(tie):
            member = np.zeros(len(starts), dtype=bool)
            member[tie] = member[tie + 1] = True
            # The tied rows sit in start order: sorting them by (start, -end) and writing them back keeps each run
            # of equal starts in its own places.
            if order is None:
                order = np.arange(len(starts))
            tied = order[member]
            order[member] = tied[np.lexsort((-ends[tied], starts[tied]))]
    return order


def grouped_time_order(groups: np.ndarray, starts: np.ndarray, ends: np.ndarray | None = None) -> np.ndarray:
    """Return the permutation that orders rows by group, then start, then (with `ends`) longer first."""
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64)
    ids = _distinct(groups)
    if len(ids) == 1:
        order = time_order(starts, ends)
        return np.arange(len(starts)) if order is None else order
    if len(ids) <= _FEW_GROUPS:
        parts = []
        for group in ids:
            rows = np.flatnonzero(groups == group)
            own = time_order(starts[rows], None if ends is None else ends[rows])
            parts.append(rows if own is None else rows[own])
        return np.concatenate(parts)
    order = time_order(starts, ends)
    if order is None:
        order = np.arange(len(starts))
    return order[np.argsort(_ranks(ids, groups)[order], kind="stable")]
