"""Property: every mutation of every real file gives a result or the typed one-line error — never another exception,
never a hang, never NaN in JSON. CI runs a bounded number of examples per format (TRACEVIEW_FUZZ_EXAMPLES, default
40); `python tests/fuzz_real_files.py --per-format 10000` runs the long campaign docs/reliability.md reports."""

from __future__ import annotations

import os
import random

import pytest
from fuzz_real_files import FORMATS, Worker, make_mutant, real_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("TRACEVIEW_FUZZ_EXAMPLES", "40"))


@pytest.fixture(scope="module")
def worker():
    runner = Worker()
    yield runner
    runner.close()


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_mutants_of_real_files_never_crash(fmt, worker, tmp_path_factory):
    if not real_files(fmt):
        pytest.skip(f"no real {fmt} files: the shared/ folder beside the checkout is missing")
    folder = tmp_path_factory.mktemp(fmt)

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(st.randoms(use_true_random=False))
    def check(rng: random.Random) -> None:
        path, source, kind = make_mutant(fmt, rng, folder)
        outcome = worker.run(path)
        assert outcome in ("ok", "error"), f"{kind} of {source}"

    check()
