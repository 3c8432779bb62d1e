"""The mutation campaign of issue 32: N mutants per family of real files, each run as a whole process
(`traceview analyze MUTANT --format json`) with a time limit and its peak memory measured, and the promise checked —
a result, or one `Error:` line with exit 1; never a traceback, a hang, more than 4 GB, or a file cut inside one of its
rows answered without saying so where the cut lost what the answer uses. Not run in CI (hours for thousands of
mutants); docs/reliability.md quotes its table.

    python tests/campaign.py --per-family 2000 [--family llama.cpp] [--seed 7] [--workers 2] [--fork]
    python tests/campaign.py --per-family 500 --family "PyTorch trace" --from DIR --fork   # seeds no test reads

Prints one line per new kind of failure (the mutant kept under the temporary folder), then the table.

`--fork` runs each mutant as a process forked from a worker that has already imported traceview, instead of a new
interpreter: the same `main()` with the same arguments, judged the same way (exit code, stderr, JSON on stdout, peak
RSS from wait4, the time limit), without the second of imports that was most of each run's time. The worker is
single-threaded and has run no analysis, so each child starts from the same state a new interpreter reaches after
its imports.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_real_files import FOUND, REALDATA, mutate_sqlite, mutate_text  # noqa: E402

TIME_LIMIT_S = 60
MEMORY_LIMIT_KB = 4 * 1024 * 1024
# Each family: the real files it mutates (realdata globs, found: globs) and whether they are binary SQLite.
FAMILIES = {
    "llama.cpp": (["llama_cpp/*", "found:llama_*", "found:ik_llama_*"], "text"),
    ".ncu-rep": (["ncu_rep/*.ncu-rep", "found:*.ncu-rep"], "binary"),
    "ncu text": (["ncu_details/*", "ncu_raw/*", "ncu_console/*", "found:ncu*.txt", "found:ncu*.csv"], "text"),
    "nsys SQLite": (["nsys_sqlite/*.sqlite", "found:nsys*.sqlite", "found:*.nv[vp]*"], "sqlite"),
    "nsys stats": (["nsys_stats/*", "found:nsys*.txt", "found:nsys*.csv", "found:nvprof*.txt", "found:nvprof*.md"], "text"),
    "tegrastats": (["tegrastats/*", "found:tegrastats*"], "text"),
    "PyTorch trace": (["kineto/*.json"], "text"),
}
COLUMNS = ("ok", "clean error", "crash", "hang", "memory", "cut, no note")


SEEDS_FROM: Path | None = None  # --from: mutate the files of this folder instead of the family's own


def family_files(family: str) -> list[Path]:
    if SEEDS_FROM is not None:
        return sorted(p for p in SEEDS_FROM.iterdir() if p.is_file())
    globs, _ = FAMILIES[family]
    found: list[Path] = []
    for pattern in globs:
        base, pattern = (FOUND, pattern.removeprefix("found:")) if pattern.startswith("found:") else (REALDATA, pattern)
        found += [p for p in base.glob(pattern) if p.is_file()]
    return sorted(set(found))


def mutate_binary(source: Path, target: Path, rng: random.Random) -> str:
    """A damaged copy of a binary report: cut at a byte, or 64-byte runs overwritten."""
    data = bytearray(source.read_bytes())
    if rng.random() < 0.5:
        target.write_bytes(bytes(data[: rng.randrange(len(data) + 1)]))
        return "truncate"
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(data))
        data[at: at + 64] = bytes(rng.randrange(256) for _ in range(64))
    target.write_bytes(bytes(data))
    return "pages"


def make(family: str, rng: random.Random, folder: Path, index: int) -> tuple[Path, Path, str]:
    source = rng.choice(family_files(family))
    target = folder / f"mutant{index}{''.join(source.suffixes[-2:]) or '.txt'}"
    kind = FAMILIES[family][1]
    if kind == "sqlite":
        what = mutate_sqlite(source, target, rng)
    elif kind == "binary":
        what = mutate_binary(source, target, rng)
    else:
        what, data = mutate_text(source.read_bytes(), rng)
        target.write_bytes(data)
    return target, source, what


@dataclass(frozen=True)
class Ran:
    """One whole-process run of `traceview analyze PATH --format json`."""

    returncode: int
    stdout: str
    stderr: str
    peak_kb: int | None  # peak resident set, where it was measured
    timed_out: bool


FORK = False  # True in the worker processes of --fork (their initializer, _fork_worker, sets it): they judge the runs


def _command(path: Path) -> list[str]:
    return ["analyze", str(path), "--format", "json"]


def _spawned(path: Path) -> Ran:
    command = [sys.executable, "-m", "traceview", *_command(path)]
    timed = shutil.which("time") and Path("/usr/bin/time").exists()
    if timed:
        command = ["/usr/bin/time", "-f", "MAXRSS %M", *command]
    try:
        result = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        return Ran(-9, "", "", None, True)
    stderr, peak_kb = result.stderr, None
    peak = re.search(r"MAXRSS (\d+)\s*$", stderr)
    if peak:
        # GNU time's own lines: the peak, and a line on the exit status.
        stderr = re.sub(r"(?m)^Command (?:exited with non-zero status|terminated by signal) \d+\n?", "", stderr[: peak.start()])
        peak_kb = int(peak.group(1))
    return Ran(result.returncode, result.stdout, stderr, peak_kb, False)


def _child(path: Path) -> int:
    """In the forked child: run the CLI as `python -m traceview` would, and return its exit status."""
    sys.argv = ["traceview", *_command(path)]
    try:
        from traceview.__main__ import main as traceview_main

        traceview_main()
        code = 0
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            code = exit_.code or 0
        else:  # sys.exit("message"): printed, status 1, as the interpreter does
            print(exit_.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - what the interpreter would do with an uncaught exception
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - the interpreter's final flush fails quietly too
        pass
    return code


def _forked(path: Path) -> Ran:
    """Run one mutant in a child forked from this (single-threaded) worker, with the time limit and wait4's peak RSS."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(os.devnull, "rb") as null:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child never returns into the campaign
            code = 1
            try:
                os.dup2(null.fileno(), 0)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                code = _child(path)
            finally:
                os._exit(code)
        deadline = time.monotonic() + TIME_LIMIT_S
        timed_out = False
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                _, status, usage = os.wait4(pid, 0)
                timed_out = True
                break
            time.sleep(0.005)
        out.seek(0)
        err.seek(0)
        returncode = os.waitstatus_to_exitcode(status)
        return Ran(returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), int(usage.ru_maxrss), timed_out)


def execute(path: Path) -> Ran:
    return _forked(path) if FORK else _spawned(path)


def _answer(path: Path) -> dict | None:
    """Return the JSON answer for `path` without what may differ for the same data (its path, its notes), or None."""
    ran = execute(path)
    if ran.timed_out or ran.returncode != 0:  # judged by run() itself; here only a difference counts
        return None
    try:
        data = json.loads(ran.stdout)
    except ValueError:
        return None
    for key in ("source", "notes", "provenance"):
        data.pop(key, None)
    return data


def loses_data(cut: Path, source: Path) -> bool:
    """True when the file cut inside a line answers otherwise than the same file with that line whole: the cut lost
    something the answer used (a line of log prose or of output no reader takes loses nothing, noted or not)."""
    data = source.read_bytes()
    end = data.find(b"\n", cut.stat().st_size)
    whole = cut.with_name("whole-" + cut.name)
    whole.write_bytes(data if end < 0 else data[: end + 1])
    try:
        return _answer(cut) != _answer(whole)
    finally:
        whole.unlink()


def run(path: Path, kind: str, source: Path | None = None) -> str:
    """Return the outcome of one whole-process run: one of COLUMNS. A cut inside a line with no note is a failure
    only where it lost data (loses_data), judged against `source` when given."""
    ran = execute(path)
    if ran.timed_out:
        return "hang"
    if ran.peak_kb is not None and ran.peak_kb > MEMORY_LIMIT_KB:
        return "memory"
    if ran.returncode == 0:
        try:
            data = json.loads(ran.stdout, parse_constant=lambda constant: (_ for _ in ()).throw(ValueError(constant)))
        except ValueError:
            return "crash"
        if kind == "cut_in_row" and not any("cut short" in note for note in data.get("notes", [])):
            return "cut, no note" if source is None or loses_data(path, source) else "ok"
        return "ok"
    lines = ran.stderr.strip().splitlines()
    if ran.returncode == 1 and len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in ran.stderr:
        return "clean error"
    return "crash"


def _judge(mutant: tuple[Path, Path, str]) -> str:
    path, source, kind = mutant
    return run(path, kind, source)


def _fork_worker() -> None:
    """A worker of --fork: import what every run imports, once, before the first fork."""
    global FORK
    FORK = True
    import traceview.app.cli  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-family", type=int, default=200)
    parser.add_argument("--family", choices=sorted(FAMILIES), action="append")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only-kind", action="append", help="run only the mutants of this kind (cut_in_row, flip, …) of the same "
                        "seed's sequence: a failure class judged again after a fix, without running the rest")
    parser.add_argument("--fork", action="store_true", help="fork each run from a worker that has imported traceview (see above)")
    parser.add_argument("--from", dest="seeds_from", type=Path, help="mutate the files in this folder (real files no test reads) instead "
                        "of the family's own; give one --family, whose kind of mutation they take")
    args = parser.parse_args(argv)
    global SEEDS_FROM
    SEEDS_FROM = args.seeds_from
    table: dict[str, Counter[str]] = {}
    keep = Path(tempfile.mkdtemp(prefix="traceview-campaign-"))
    for family in args.family or list(FAMILIES):
        if not family_files(family):
            print(f"{family}: no real files (the shared/ folder beside the checkout is missing?)", file=sys.stderr)
            continue
        rng = random.Random(f"{args.seed}-{family}")
        counts: Counter[str] = Counter()
        started = time.perf_counter()
        # Forked runs come from worker processes (a forkserver's, single-threaded); spawned ones from threads.
        pool = (concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("forkserver"), initializer=_fork_worker)
                if args.fork else concurrent.futures.ThreadPoolExecutor(args.workers))
        with tempfile.TemporaryDirectory() as folder, pool:
            mutants = [make(family, rng, Path(folder), i) for i in range(args.per_family)]
            if args.only_kind:
                mutants = [m for m in mutants if m[2] in args.only_kind]
            outcomes = pool.map(_judge, [(path, source, kind) for path, source, kind in mutants], chunksize=4 if args.fork else 1)
            seen: set[tuple[str, str]] = set()
            for (path, source, kind), outcome in zip(mutants, outcomes, strict=True):
                counts[outcome] += 1
                if outcome not in ("ok", "clean error") and (outcome, kind) not in seen:
                    seen.add((outcome, kind))
                    kept = keep / f"{family.replace(' ', '_').replace('.', '')}-{path.name}"
                    shutil.copy(path, kept)
                    print(f"{family}: {outcome} [{kind} of {source.name}; kept as {kept}]", file=sys.stderr)
        table[family] = counts
        print(f"{family}: {len(mutants)} mutants in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print("| family | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for family, counts in table.items():
        print(f"| {family} | " + " | ".join(f"{counts[c]:,}" for c in COLUMNS) + " |")
    return 0 if all(counts[c] == 0 for counts in table.values() for c in COLUMNS[2:]) else 1


if __name__ == "__main__":
    sys.exit(main())
