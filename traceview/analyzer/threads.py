"""Where the analysis runs independent steps side by side: a thread pool for large inputs, none for small ones.

numpy and polars release the GIL in their sorts, searches and joins, so on a large export a second thread uses the
second core. On a small export threads cost more than they give, and `traceview fleet` analyses many exports at once
in as many processes as there are cores.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

PARALLEL_ROWS = 200_000  # rows of input from which steps run on threads


class _Inline(Executor):
    """An executor that runs each step when it is submitted, on the caller's thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # noqa: BLE001 — handed to whoever asks for the result, as a pool would
            future.set_exception(error)
        return future


def pool_for(rows: int, workers: int) -> Executor:
    """Return a pool of `workers` threads for an input of `rows` rows or more, else an executor that runs in line."""
    return ThreadPoolExecutor(max_workers=workers) if rows >= PARALLEL_ROWS else _Inline()
