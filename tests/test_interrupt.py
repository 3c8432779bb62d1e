"""Ctrl-C at any moment of `traceview analyze … -o FILE` (issue 35): exit 130 with no traceback and nothing left
behind — no output, no temporary file beside it — or, where the run had already finished, its whole output."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

EXPORT = "nsys_sqlite/nsys2026.2_h100x2_sliced_nsys-ai.sqlite"


@pytest.mark.parametrize("delay_s", [0.1, 0.3, 0.6, 1.0, 1.5])
def test_ctrl_c_leaves_nothing_behind(realdata_file, tmp_path, delay_s):
    out = tmp_path / "report.html"
    run = subprocess.Popen([sys.executable, "-m", "traceview", "analyze", str(realdata_file(EXPORT)), "--format", "html", "-o", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    time.sleep(delay_s)
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    if run.returncode == 0:  # it had finished: the whole report, and nothing else
        assert [p.name for p in tmp_path.iterdir()] == ["report.html"] and out.read_text().rstrip().endswith("</html>")
    else:
        assert run.returncode in (130, -signal.SIGINT), stderr
        assert list(tmp_path.iterdir()) == [], [p.name for p in tmp_path.iterdir()]


def test_ctrl_c_once_the_report_is_in_place_changes_nothing(realdata_file, tmp_path):
    """The window CI once hit: Ctrl-C after the report was renamed into place but before the process ended gave exit
    130 with the report left behind. Once the output is whole, the command is done: exit 0 and the report."""
    out = tmp_path / "report.html"
    run = subprocess.Popen([sys.executable, "-m", "traceview", "analyze", str(realdata_file(EXPORT)), "--format", "html", "-o", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not out.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    assert run.returncode == 0, stderr
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"] and out.read_text().rstrip().endswith("</html>")
