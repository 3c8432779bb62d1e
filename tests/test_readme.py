"""The README shows what traceview really prints, fits its shape, and links only to pages that exist."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from traceview.app.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _block_after(marker: str) -> str:
    start = README.index(marker)
    block = README.index("```\n", start) + 4
    return README[block:README.index("\n```", block)]


def test_the_readme_shows_the_real_output_of_the_quick_start():
    shown = _block_after("The first command prints")
    result = CliRunner().invoke(app, ["analyze", "sample_traces/ncu/v100_cfd_details_ncu2019.5.csv"], catch_exceptions=False)
    assert result.exit_code == 0
    assert shown == result.stdout.rstrip("\n")


def test_the_readme_shows_the_real_decode_output():
    start = README.index("$ traceview decode --params")
    shown = README[README.index("\n", start) + 1:README.index("\n```", start)]
    result = CliRunner().invoke(app, ["decode", "--params", "7B", "--bits", "4.5", "--gpu", "h100-sxm", "--measured", "300"])
    assert shown == result.stdout.rstrip("\n")


def test_the_readme_is_short_and_its_links_resolve():
    assert len(README.splitlines()) <= 250
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        assert (ROOT / target).exists(), f"the README links to {target}, which does not exist"
    for page in (ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


def test_the_readme_shows_the_real_projection():
    start = README.index("$ traceview analyze sample_traces/ncu/rtx5090_elementwise_details_ncu2025.1.csv --gpu rtx5090 --what-if")
    shown = README[README.index("…\n", start) + 2:README.index("\n```", start)]
    result = CliRunner().invoke(app, ["analyze", "sample_traces/ncu/rtx5090_elementwise_details_ncu2025.1.csv", "--gpu", "rtx5090",
                                      "--what-if", "h100-sxm,a100-80gb,rtx4090"])
    assert shown in result.stdout
