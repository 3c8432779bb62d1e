"""Headless Chromium helpers for tests: render a page with every network request refused."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    # No network at all: a proxy that refuses and a resolver that finds nothing.
    "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium)")
    return path


def dump_dom(url: str) -> str:
    """Return the DOM of `url` after its scripts ran, loaded offline."""
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", url],
            capture_output=True, text=True, timeout=120,
        )
    return result.stdout
