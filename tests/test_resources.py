"""An export too large for the memory this process may take is refused before it is read, with one line that says
how much it needs and what to do (issue 35: memory still grows with the export; the OOM killer gave no answer at all)."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app
from traceview.resources import MEMORY_ENV, cgroup_room_bytes, memory_budget_bytes

EXPORT = "nsys_sqlite/nsys2026.2_h100x2_sliced_nsys-ai.sqlite"


def test_an_export_larger_than_the_budget_is_refused_in_one_line(realdata_file, monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "0.05")  # 50 MB: less than any export's analysis needs
    result = CliRunner().invoke(app, ["analyze", str(realdata_file(EXPORT)), "--format", "json"])
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs about 0.251 GB of memory (3,442 kernels and 23,748 other timed rows)" in lines[0], lines
    assert "more than the 0.05 GB this process may take" in lines[0] and MEMORY_ENV in lines[0] and "Traceback" not in result.stderr


def test_zero_turns_the_check_off_and_a_bad_value_is_one_line(realdata_file, monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "0")
    assert memory_budget_bytes() is None
    result = CliRunner().invoke(app, ["analyze", str(realdata_file(EXPORT)), "--format", "json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["source"]["format"] == "nsys-sqlite"
    for bad in ("lots", "-3", "nan", "inf"):
        monkeypatch.setenv(MEMORY_ENV, bad)
        result = CliRunner().invoke(app, ["analyze", str(realdata_file(EXPORT)), "--format", "json"])
        assert result.exit_code == 1 and result.stderr.strip().splitlines() == [
            f"Error: {MEMORY_ENV}={bad!r} is not a number of GB — set it to e.g. 16, or to 0 to turn the memory check off"]


def test_the_room_under_a_cgroup_limit_less_what_it_cannot_give_back(tmp_path):
    own = tmp_path / "cgroup"
    own.write_text("0::/user.slice/job\n")
    v2 = tmp_path / "fs" / "user.slice" / "job"
    v2.mkdir(parents=True)
    (v2 / "memory.max").write_text("8000000000\n")
    (v2 / "memory.current").write_text("3000000000\n")
    (v2 / "memory.stat").write_text("anon 1000000000\ninactive_file 1000000000\n")  # page cache it can give back
    assert cgroup_room_bytes(tmp_path / "fs", own) == 6_000_000_000
    (v2 / "memory.max").write_text("max\n")  # no limit on the group
    assert cgroup_room_bytes(tmp_path / "fs", own) is None
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text("4000000000\n")
    (v1 / "memory" / "memory.usage_in_bytes").write_text("1500000000\n")
    (v1 / "memory" / "memory.stat").write_text("total_inactive_file 500000000\n")
    assert cgroup_room_bytes(v1, own) == 3_000_000_000
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    assert cgroup_room_bytes(v1, own) is None


@pytest.mark.parametrize("threshold", [1, 10**12])
def test_freed_memory_goes_back_at_once_for_large_inputs_only(threshold, realdata_file, monkeypatch):
    """Both allocators keep freed memory for reuse (faster) except for inputs from LARGE_INPUT_BYTES on, whose peak
    must stay bounded; a setting of the user's own for polars' allocator is left as it is."""
    from traceview import allocators, resources

    calls = []
    monkeypatch.setattr(allocators, "give_freed_arrays_back", lambda: calls.append(True))
    monkeypatch.setattr(resources, "LARGE_INPUT_BYTES", threshold)
    monkeypatch.delenv("_RJEM_MALLOC_CONF", raising=False)
    allocators.set_allocators(allocators.gives_memory_back_at_once(["analyze", str(realdata_file(EXPORT)), "--format", "json"]))
    assert bool(calls) == (threshold == 1)
    assert os.environ["_RJEM_MALLOC_CONF"] == (allocators._RETURN_FREED_PAGES if threshold == 1 else allocators._KEEP_FREED_PAGES_A_SECOND)
    monkeypatch.setenv("_RJEM_MALLOC_CONF", "dirty_decay_ms:5")
    allocators.set_allocators(True)
    assert os.environ["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:5"


@pytest.mark.parametrize("gives_back", [True, False])
def test_freed_blocks_are_reused_only_in_the_nvtx_pass_of_a_command_that_gives_them_back(gives_back, realdata_file, monkeypatch):
    """A large input's analysis gives freed arrays back at once, except through the NVTX pass (after its peak), and
    gives back what it kept once the pass ends and when the analysis ends, an error too; elsewhere glibc is left as it is."""
    from traceview import allocators
    from traceview.app import cli

    calls: list[tuple[str, tuple[int, ...]]] = []
    monkeypatch.setattr(allocators, "_glibc_call", lambda name, *arguments: calls.append((name, arguments)) or True)
    monkeypatch.setattr(allocators, "_gives_arrays_back", gives_back)
    monkeypatch.setattr(allocators, "_reusing_freed_blocks", False)
    phases: list[str] = []
    real_analyze = cli.analyze_file

    def analyze(path, options, ncu):
        told = options.phase

        def phase(name):
            phases.append(name)
            calls.append(("phase", (name == cli.NVTX_PASS,)))
            told(name)

        return real_analyze(path, dataclasses.replace(options, phase=phase), ncu)

    monkeypatch.setattr(cli, "analyze_file", analyze)
    cli.run_analysis(realdata_file(EXPORT), None)
    assert cli.NVTX_PASS in phases
    reuse = ("mallopt", (allocators._M_MMAP_THRESHOLD, allocators._REUSED_UP_TO_BYTES))
    give_back = ("mallopt", (allocators._M_MMAP_THRESHOLD, allocators._GIVEN_BACK_FROM_BYTES))
    if not gives_back:
        assert [call for call in calls if call[0] != "phase"] == []
        return
    nvtx = calls.index(("phase", (True,)))
    assert calls[nvtx + 1] == reuse and reuse not in calls[:nvtx]
    assert calls[nvtx + 2:nvtx + 5] == [("phase", (False,)), give_back, ("malloc_trim", (0,))]
    assert not allocators._reusing_freed_blocks
    # Cut short in the pass: what was kept goes back all the same.
    calls.clear()

    def failing(path, options, ncu):
        options.phase(cli.NVTX_PASS)
        raise RuntimeError("stopped in the pass")

    monkeypatch.setattr(cli, "analyze_file", failing)
    with pytest.raises(RuntimeError):
        cli.run_analysis(realdata_file(EXPORT), None)
    assert calls == [reuse, give_back, ("malloc_trim", (0,))]


def test_freed_memory_goes_back_at_once_for_long_running_commands_and_large_inputs(realdata_file, tmp_path):
    from traceview.__main__ import gives_memory_back_at_once
    from traceview.resources import LARGE_INPUT_BYTES

    large = tmp_path / "large.sqlite"
    with large.open("wb") as handle:
        handle.truncate(LARGE_INPUT_BYTES)  # sparse: no disk taken
    small = str(realdata_file(EXPORT))
    assert not gives_memory_back_at_once(["analyze", small, "--format", "json"])
    assert gives_memory_back_at_once(["analyze", str(large), "--format", "json"])
    assert gives_memory_back_at_once(["diff", small, str(large)])
    assert gives_memory_back_at_once(["serve", small])
    assert gives_memory_back_at_once(["mcp", "--root", str(tmp_path)])
    assert not gives_memory_back_at_once(["analyze", str(tmp_path / "missing"), "--gpu", "serve"])
    assert not gives_memory_back_at_once([])
