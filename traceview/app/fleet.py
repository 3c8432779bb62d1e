"""`traceview fleet`: map the per-file summary over many exports (a process pool, or a Dask cluster), reduce on the
driver. Each file is parsed and analysed exactly as `analyze` does; a file that fails becomes a row in `failures`.

Summaries are cached as Parquet, keyed by the file's sha256 and the options that change them, so a rerun over a
grown directory reads only the new files. Engines give identical results: summaries are reduced in path order.
"""

from __future__ import annotations

import glob
import hashlib
import os
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from traceview import __version__
from traceview.analyzer.fleet import TABLES, FleetResult, rank_from_name, reduce_fleet
from traceview.analyzer.kinds import AnalysisOptions
from traceview.analyzer.pipeline import analyze_file, sha256_of
from traceview.errors import TraceFormatError
from traceview.parsers import detect_format

_MAX_LIST_LINES = 100_000


@dataclass(frozen=True)
class MapOptions:
    """What a worker needs to summarise one file (picklable: it travels to Dask workers)."""

    gpu: str | None = None
    rank_from: str | None = None

    def cache_key(self) -> str:
        """Options that change a summary, with the traceview version: a cache entry is reused only when all match."""
        return hashlib.sha256(f"{__version__}|{self.gpu}".encode()).hexdigest()[:12]


def _is_path_list(path: Path) -> list[Path] | None:
    """The paths a text file lists, one per line, when it is such a list (and not a trace)."""
    try:
        detect_format(path)
        return None
    except TraceFormatError:
        pass
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()[:_MAX_LIST_LINES] if line.strip() and not line.startswith("#")]
    except (OSError, UnicodeDecodeError):
        return None
    listed = [(path.parent / line) if not Path(line).is_absolute() else Path(line) for line in lines]
    return listed if listed and all(p.exists() for p in listed) else None


def expand_inputs(inputs: Iterable[str]) -> list[Path]:
    """Return the files named by directories (every file in them, recursively, hidden ones skipped), globs, text files
    listing paths, or plain paths; sorted, without duplicates. Raises TraceFormatError for a name that matches nothing."""
    found: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            files = [p for p in sorted(path.rglob("*")) if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)]
            # A report beside its own SQLite export is the same run twice (and only nsys reads the report).
            found += [p for p in files if not (p.suffix in (".nsys-rep", ".qdrep") and p.with_suffix(".sqlite").exists())]
        elif path.is_file():
            listed = _is_path_list(path)
            found += expand_inputs(str(p) for p in listed) if listed else [path]
        elif glob.has_magic(item):
            matches = sorted(Path(m) for m in glob.glob(item, recursive=True) if Path(m).is_file())
            if not matches:
                raise TraceFormatError(path, "the pattern matches no file", "check the pattern (quote it so the shell leaves it to traceview)")
            found += matches
        else:
            raise TraceFormatError(path, "no such file or directory", "check the path")
    return sorted(dict.fromkeys(p.resolve() for p in found))


def summarize_file(path: str, sha256: str, options: MapOptions) -> dict[str, Any]:
    """Map step, run where the data is: parse and analyse one file, return its summary tables, or its failure."""
    from traceview.analyzer.fleet import summarize

    try:
        # The same pipeline as `analyze`: the reader's notes (a file cut short) reach the fleet too.
        analysis = analyze_file(path, AnalysisOptions(gpu=options.gpu))
        return {"path": path, "tables": summarize(analysis, rank_from_name(path, options.rank_from))}
    except TraceFormatError as error:
        where = f"line {error.line}: " if error.line is not None else ""
        return {"path": path, "error": where + error.problem + (f" — {error.fix}" if error.fix else ""), "internal": False}
    except Exception as error:  # noqa: BLE001 - one file's bug must not stop a fleet of hundreds; its traceback is kept
        return {"path": path, "error": f"internal error: {type(error).__name__}: {error}", "internal": True, "traceback": traceback.format_exc()}


def _cache_files(cache: Path, sha256: str, options: MapOptions) -> dict[str, Path]:
    return {table: cache / f"{sha256}.{options.cache_key()}.{table}.parquet" for table in TABLES}


def _read_cached(cache: Path | None, sha256: str, path: str, options: MapOptions) -> dict[str, pl.DataFrame] | None:
    if cache is None:
        return None
    files = _cache_files(cache, sha256, options)
    if not all(f.exists() for f in files.values()):
        return None
    try:
        tables = {table: pl.read_parquet(f) for table, f in files.items()}
    except (OSError, pl.exceptions.PolarsError):
        return None  # a damaged cache entry is a miss, not an error
    if any(tables[table].schema != schema for table, schema in TABLES.items()):
        return None  # written by a traceview whose summaries had other columns: summarised again
    # The path and rank belong to where the file is now, not to where it was when cached.
    tables["meta"] = tables["meta"].with_columns(pl.lit(path).alias("path"), pl.lit(rank_from_name(path, options.rank_from), dtype=pl.Int64).alias("rank"))
    return tables


def _write_cache(cache: Path | None, sha256: str, tables: dict[str, pl.DataFrame], options: MapOptions) -> None:
    if cache is None:
        return
    cache.mkdir(parents=True, exist_ok=True)
    for table, target in _cache_files(cache, sha256, options).items():
        partial = target.with_suffix(".partial")
        tables[table].write_parquet(partial)
        partial.replace(target)  # readers never see half a file


@dataclass
class FleetRun:
    result: FleetResult
    read: int  # files summarised in this run
    cached: int  # files whose summary came from the cache


def run_fleet(
    paths: list[Path],
    options: MapOptions,
    engine: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    scheduler_file: str | None = None,
    cache: Path | None = None,
    k: float = 3.0,
    progress: Callable[[int, int], None] | None = None,
    report_internal: Callable[[str, str], None] | None = None,
) -> FleetRun:
    """Summarise every path (from the cache where it can), reduce, and return the fleet view."""
    hashes = {str(p): sha256_of(p) for p in paths}
    summaries: list[dict[str, pl.DataFrame]] = []
    failures: list[dict[str, Any]] = []
    todo = []
    for path, digest in hashes.items():
        cached = _read_cached(cache, digest, path, options)
        if cached is not None:
            summaries.append(cached)
        else:
            todo.append(path)
    done = len(paths) - len(todo)
    if progress:
        progress(done, len(paths))
    for outcome in _map(todo, hashes, options, engine, workers, scheduler, scheduler_file):
        done += 1
        if progress:
            progress(done, len(paths))
        if "tables" in outcome:
            summaries.append(outcome["tables"])
            _write_cache(cache, hashes[outcome["path"]], outcome["tables"], options)
        else:
            failures.append({"path": outcome["path"], "error": outcome["error"], "internal": outcome["internal"]})
            if outcome["internal"] and report_internal:
                report_internal(outcome["path"], outcome.get("traceback", ""))
    return FleetRun(reduce_fleet(summaries, failures, k), read=len(todo), cached=len(paths) - len(todo))


def _map(todo: list[str], hashes: dict[str, str], options: MapOptions, engine: str, workers: int | None,
         scheduler: str | None, scheduler_file: str | None) -> Iterable[dict[str, Any]]:
    if not todo:
        return
    if engine == "dask":
        yield from _map_dask(todo, hashes, options, scheduler, scheduler_file, workers)
        return
    if engine != "local":
        raise ValueError(f"unknown engine {engine!r}")
    import multiprocessing

    count = workers or min(len(todo), os.cpu_count() or 1)
    if count <= 1:
        for path in todo:
            yield summarize_file(path, hashes[path], options)
        return
    # spawn, not fork: polars' thread pool does not survive a fork.
    with ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(summarize_file, path, hashes[path], options) for path in todo]
        for future in as_completed(futures):
            yield future.result()


def _map_dask(todo: list[str], hashes: dict[str, str], options: MapOptions, scheduler: str | None, scheduler_file: str | None,
              workers: int | None) -> Iterable[dict[str, Any]]:
    """Map on Dask: an existing cluster (--scheduler, --scheduler-file, or DASK_SCHEDULER_ADDRESS), else a LocalCluster
    started for this run, as `nsys recipe --mode dask-futures` does."""
    try:
        from dask.distributed import Client, LocalCluster
        from dask.distributed import as_completed as dask_completed
    except ImportError:
        raise TraceFormatError(Path("--engine dask"), "Dask is not installed", "pip install 'traceview[dask]' (or use --engine local)") from None
    address = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or os.environ.get("NSYS_DASK_SCHEDULER_ADDRESS")
    scheduler_file = scheduler_file or os.environ.get("NSYS_DASK_SCHEDULER_FILE")
    cluster = None
    if address:
        client = Client(address)
    elif scheduler_file:
        client = Client(scheduler_file=scheduler_file)
    else:
        cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        futures = client.map(summarize_file, todo, [hashes[p] for p in todo], [options] * len(todo), pure=False)
        for future in dask_completed(futures):
            yield future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


__all__ = ["FleetRun", "MapOptions", "expand_inputs", "run_fleet", "summarize_file"]
