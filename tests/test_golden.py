"""Golden answers: what `traceview analyze FILE --format json` and the terminal table say of every real file, kept
under tests/golden/ and compared on every run, so a change that alters an answer fails until its golden is rewritten
on purpose (`pytest tests/test_golden.py --update-golden`) and the commit says why the new answer is the right one.

Volatile fields are left out of the JSON: the traceview version, and the command line and time of the report.
Paths are relative to the folder each input lives in, so the answers do not depend on where the checkout is.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
# Each group: where its inputs live (answers name them relative to it), and which files there are inputs.
GROUPS = {
    "realdata": ROOT.parent / "shared" / "realdata",
    "found": Path(__file__).resolve().parent / "fixtures",
    "samples": ROOT / "sample_traces",
}
_NOT_INPUTS = {"MANIFEST.md", "PROVENANCE.md", "README.md"}
VOLATILE = {("traceview_version",), ("provenance", "traceview_version"), ("provenance", "command_line"), ("provenance", "generated_at")}
# Floats are compared to 1e-9 of their size: a sum's last digit may follow polars' chunking.
RELATIVE_TOLERANCE = 1e-9


def inputs(group: str) -> list[str]:
    """Return the group's input files, relative to its folder, in a stable order (empty when the folder is absent)."""
    base = GROUPS[group]
    if not base.is_dir():
        return []
    return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file() and p.name not in _NOT_INPUTS)


def _cases() -> Iterator[Any]:
    for group in GROUPS:
        found = inputs(group)
        if not found:
            yield pytest.param(group, None, id=f"{group}-absent")
        for relative in found:
            yield pytest.param(group, relative, id=f"{group}/{relative}")


def answer(group: str, relative: str) -> tuple[dict[str, Any], str]:
    """Return (the JSON answer without volatile fields, or {"error": line, "exit_code": n}; the terminal text)."""
    runner = CliRunner()
    previous = Path.cwd()
    os.chdir(GROUPS[group])
    try:
        as_json = runner.invoke(app, ["analyze", relative, "--format", "json"])
        as_table = runner.invoke(app, ["analyze", relative])
    finally:
        os.chdir(previous)
    if as_json.exit_code != 0:
        if as_json.exception is not None and not isinstance(as_json.exception, SystemExit):
            raise as_json.exception
        data: dict[str, Any] = {"error": as_json.stderr.strip(), "exit_code": as_json.exit_code}
    else:
        data = _without_volatile(json.loads(as_json.stdout))
    text = as_table.stdout if as_table.exit_code == 0 else as_table.stderr
    return data, text


def _without_volatile(data: dict[str, Any]) -> dict[str, Any]:
    for path in VOLATILE:
        holder: Any = data
        for key in path[:-1]:
            holder = holder.get(key, {}) if isinstance(holder, dict) else {}
        if isinstance(holder, dict):
            holder.pop(path[-1], None)
    return data


def golden_paths(group: str, relative: str) -> tuple[Path, Path]:
    stem = GOLDEN / group / relative
    return stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".txt")


def first_difference(expected: Any, actual: Any, where: str = "") -> str | None:
    """Return where two JSON values first differ and how (`.kernels[0].duration_ns: 1.0 → 2.0`), or None."""
    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        if math.isclose(expected, actual, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12):
            return None
        return f"{where or '.'}: {expected!r} → {actual!r}"
    if type(expected) is not type(actual) and not (isinstance(expected, int) and isinstance(actual, float)):
        return f"{where or '.'}: {_short(expected)} → {_short(actual)}"
    if isinstance(expected, dict):
        for key in expected.keys() | actual.keys():
            if key not in actual:
                return f"{where}.{key}: {_short(expected[key])} → (missing)"
            if key not in expected:
                return f"{where}.{key}: (missing) → {_short(actual[key])}"
        for key in expected:
            found = first_difference(expected[key], actual[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        for index, (a, b) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(a, b, f"{where}[{index}]")
            if found:
                return found
        if len(expected) != len(actual):
            return f"{where}: {len(expected)} items → {len(actual)}"
        return None
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)) and math.isclose(expected, actual, rel_tol=RELATIVE_TOLERANCE):
        return None
    return None if expected == actual else f"{where or '.'}: {_short(expected)} → {_short(actual)}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 160 else text[:157] + "…"


def first_line_difference(expected: str, actual: str) -> str | None:
    for number, (a, b) in enumerate(zip(expected.splitlines(), actual.splitlines(), strict=False), start=1):
        if a != b:
            return f"line {number}:\n  golden: {a}\n  now:    {b}"
    a, b = expected.splitlines(), actual.splitlines()
    return None if len(a) == len(b) else f"{len(a)} lines → {len(b)}"


@pytest.mark.parametrize(("group", "relative"), list(_cases()))
def test_golden_answer(group: str, relative: str | None, request: pytest.FixtureRequest) -> None:
    if relative is None:
        pytest.skip(f"no inputs: {GROUPS[group]} is absent (the shared/ folder beside the checkout is missing)")
    data, text = answer(group, relative)
    json_path, text_path = golden_paths(group, relative)
    if request.config.getoption("--update-golden"):
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
        text_path.write_text(text, encoding="utf-8")
        return
    if not json_path.exists():
        pytest.fail(f"{group}/{relative} has no golden answer: write it with `pytest tests/test_golden.py --update-golden` "
                    "and say in the commit why the answer is right")
    expected = json.loads(json_path.read_text(encoding="utf-8"))
    where = first_difference(expected, data)
    assert where is None, f"{group}/{relative}: the JSON answer changed at {where}"
    where = first_line_difference(text_path.read_text(encoding="utf-8"), text)
    assert where is None, f"{group}/{relative}: the terminal answer changed at {where}"


def test_every_golden_answer_has_its_input() -> None:
    """A golden left behind by a removed or renamed input is stale: it would guard nothing."""
    if not GOLDEN.is_dir():
        pytest.skip("no golden answers yet")
    present = {group: set(inputs(group)) for group in GROUPS}
    stale = []
    for path in GOLDEN.rglob("*.json"):
        group, *rest = path.relative_to(GOLDEN).parts
        relative = re.sub(r"\.json$", "", "/".join(rest))
        if group in present and present[group] and relative not in present[group]:
            stale.append(f"{group}/{relative}")
    assert not stale, f"golden answers without an input: {stale}"
