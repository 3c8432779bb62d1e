"""Shared fixtures: the real profiler outputs in ../shared/realdata (the truth) and the bundled samples."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# tests/ on the path: test_fuzz imports the mutation harness, which is also a script of its own.
sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
REALDATA = ROOT.parent / "shared" / "realdata"


def realdata(relative: str) -> Path:
    """Return a file under ../shared/realdata, skipping the test (with the reason) when it is absent."""
    path = REALDATA / relative
    if not path.exists():
        pytest.skip(f"real data not available: {path} (the shared/ folder beside the checkout is missing)")
    return path


@pytest.fixture
def realdata_file():
    return realdata


@pytest.fixture
def without_module(monkeypatch):
    """Make `import NAME` fail, as on a machine where an optional package is not installed."""
    import builtins

    real_import = builtins.__import__
    blocked: set[str] = set()

    def guarded(name, *args, **kwargs):
        if name in blocked:
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", guarded)
    return blocked.add


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/ from today's answers (then say in the commit why each change is right)")
