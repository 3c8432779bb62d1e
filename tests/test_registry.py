"""The registries are whole: every format's kind has an analysis, every kind's options are fields of the options
object, every named format is registered, and every kind renders in every reporter and in the dashboard — so a new
kind that forgets one of its lines fails here, not in a user's hands."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.analyzer.kinds import ANALYSES, OPTION_USE, option_names
from traceview.app.cli import app, run_analysis
from traceview.app.reporters import REPORTERS, ReportOptions
from traceview.app.reporters.markdown_report import escape_markdown
from traceview.app.views import VIEWS, report_of
from traceview.parsers import FORMATS, FORMATS_BY_NAME
from traceview.parsers.sniff import TraceFormat

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# One bundled input of each kind (the fleet's is written by `traceview fleet` in the test).
KIND_SAMPLES = {
    "kernels": SAMPLES / "ncu" / "rtx5090_gemv_details_ncu2025.1.csv",
    "nsys-export": SAMPLES / "nsys" / "h100x2_copy_bound_nsys2026.2.sqlite",
    "nsys-stats": FIXTURES / "nsys_stats_2020_console_handmade.txt",
    "telemetry": FIXTURES / "tegrastats_l4t28.1_tx1_oldest_grammar.log",
    "llama-runs": SAMPLES / "llama_cpp" / "rtx3090ti_llama7b_q4_0_bench.md.txt",
    "torch-trace": SAMPLES / "pytorch" / "hf_qwen1.5-0.5b_h100_recordshapes.pt.trace.json.gz",
    "serving-bench": SAMPLES / "serving" / "vllm_benchmark_serving_llama2-7b_h100_console.log",
    "gpu-metrics": SAMPLES / "metrics" / "nvidia_smi_h100_vllm_llama2-7b_serving.csv",
}


def test_every_format_has_an_analysis_of_its_kind():
    assert FORMATS
    for fmt in FORMATS:
        assert fmt.kind in ANALYSES, f"format {fmt.name} returns kind {fmt.kind!r}, which has no analysis in analyzer.kinds.ANALYSES"


def test_every_format_says_how_a_cut_shows():
    # Without a data line a text format's cut-short copy would pass silently.
    for fmt in FORMATS:
        assert fmt.data_line is not None or fmt.whole, f"format {fmt.name} has neither a data_line nor whole=True"


def test_format_names_are_unique_and_every_named_format_is_registered():
    assert len(FORMATS_BY_NAME) == len(FORMATS)
    assert {member.value for member in TraceFormat} <= set(FORMATS_BY_NAME)


def test_every_kinds_options_are_fields_of_the_options_object():
    for kind in ANALYSES.values():
        assert kind.options <= option_names(), f"kind {kind.name} takes options AnalysisOptions lacks: {kind.options - option_names()}"
        assert kind.options <= set(OPTION_USE), f"kind {kind.name}'s options need a sentence in OPTION_USE"


def test_every_kind_has_a_view_and_a_sample():
    assert set(ANALYSES) <= set(VIEWS) | {"fleet"}, "a kind without a view falls back to the generic view; give it one or list it here"
    assert set(ANALYSES) <= set(KIND_SAMPLES) | {"fleet"}, "add a bundled sample of the new kind to KIND_SAMPLES"


def _analyses(tmp_path: Path):
    for kind, path in KIND_SAMPLES.items():
        yield kind, run_analysis(path, None)
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for rank in (0, 1):
        shutil.copy(KIND_SAMPLES["nsys-export"], ranks / f"run_rank{rank}.sqlite")
    saved = tmp_path / "fleet.json"
    assert CliRunner().invoke(app, ["fleet", str(ranks), "-o", str(saved)]).exit_code == 0
    yield "fleet", run_analysis(saved, None)


def test_every_kind_renders_in_every_reporter_and_the_dashboard(tmp_path):
    from traceview.app.dashboard import _build_figure, side_panel, summary_line

    seen = set()
    for kind, analysis in _analyses(tmp_path):
        assert analysis.kind == kind
        seen.add(kind)
        for reporter_name, reporter_type in REPORTERS.items():
            reporter = reporter_type()
            text = reporter.render(report_of(analysis, ReportOptions(brief=reporter.brief, top=5)), ReportOptions(top=5))
            assert text.strip(), f"{kind} renders nothing in {reporter_name}"
            if reporter_name == "json":
                assert json.loads(text)["source"]["format"] == analysis.source.format
            elif reporter_name != "html":
                name = analysis.source.path.rsplit("/", 1)[-1]
                assert (escape_markdown(name) if reporter_name == "md" else name) in text
        assert summary_line(analysis)
        assert side_panel(analysis) is not None
        assert _build_figure(analysis, None, False).to_plotly_json()["data"] is not None
    assert seen == set(ANALYSES)


@pytest.mark.parametrize("kind", sorted(KIND_SAMPLES))
def test_the_library_call_gives_the_clis_answer(kind):
    import traceview

    analysis = traceview.analyze_file(KIND_SAMPLES[kind])
    assert analysis.kind == kind
    cli = json.loads(CliRunner().invoke(app, ["analyze", str(KIND_SAMPLES[kind]), "--format", "json"]).stdout)
    assert cli["summary"]["kernels"] == analysis.kernels.height and cli["source"]["sha256"] == analysis.source.sha256


def test_every_format_says_how_it_is_produced():
    # The MCP server's formats() tells an agent how to make each input: a new format needs its line there.
    from traceview.app.producing import HOW_TO_PRODUCE

    for fmt in FORMATS:
        assert any(fmt.name.startswith(prefix) for prefix in HOW_TO_PRODUCE), f"format {fmt.name} has no line in app/producing.HOW_TO_PRODUCE"
