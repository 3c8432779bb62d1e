"""`traceview report`: self-contained HTML, Markdown and JSON with provenance; hostile names stay inert everywhere."""

from __future__ import annotations

import json
import re

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from conftest import ROOT, SAMPLES
from traceview.app.cli import app

runner = CliRunner()
CFD = SAMPLES / "ncu" / "v100_cfd_details_ncu2019.5.csv"
RAW = SAMPLES / "ncu" / "gtx1650_calc_energy_raw.csv"
ELEMENTWISE = SAMPLES / "ncu" / "rtx5090_elementwise_details_ncu2025.1.csv"
HOSTILE = '</script><script>alert(1)</script><img src=x onerror=alert(2)> | `x` =cmd|"/c calc"!A0'


def report(*args):
    return runner.invoke(app, ["report", *[str(a) for a in args]])


def test_html_is_self_contained_and_deterministic(tmp_path):
    first, second = tmp_path / "a.html", tmp_path / "b.html"
    assert report(RAW, "-o", first).exit_code == 0
    assert report(RAW, "-o", second).exit_code == 0
    text = first.read_text()
    assert 'id="traceview-main-figure"' in text
    assert not re.search(r"<script[^>]+src=", text) and not re.search(r"<link[^>]+href=\"http", text)
    assert "<th>next step</th>" in text and "calc_energy" in text and "Provenance" in text
    strip = lambda t: re.sub(r"generated_at</td><td>[^<]*", "", t)  # noqa: E731
    assert strip(text) == strip(second.read_text())


def test_markdown_report_with_provenance(tmp_path):
    out = tmp_path / "r.md"
    result = report(CFD, "-o", out, "--top", "2")
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert sum(t.type == "tr_open" for t in tokens) == 1 + 2
    assert "sha256" in text and "traceview version" in text and "1 more kernels" in text


def test_json_report_is_the_analyze_contract_plus_provenance(tmp_path):
    out = tmp_path / "r.json"
    assert report(CFD, "-o", out).exit_code == 0
    data = json.loads(out.read_text())
    analyzed = json.loads(runner.invoke(app, ["analyze", str(CFD), "-f", "json"]).stdout)
    assert data["kernels"] == analyzed["kernels"]
    assert data["provenance"]["input"] == CFD.name
    assert data["provenance"]["input_sha256"] == data["source"]["sha256"]
    assert data["provenance"]["format"] == "ncu-csv-details"
    assert "command_line" in data["provenance"] and data["provenance"]["generated_at"]


def test_command_line_in_provenance(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "r.json"
    subprocess.run([sys.executable, "-m", "traceview", "report", str(CFD), "-o", str(out)], check=True, capture_output=True, timeout=120)
    assert json.loads(out.read_text())["provenance"]["command_line"] == f"traceview report {CFD} -o {out}"


def test_report_refuses_to_overwrite_and_unknown_extensions(tmp_path):
    out = tmp_path / "r.html"
    out.write_text("mine")
    result = report(CFD, "-o", out)
    assert result.exit_code == 1 and "--force" in result.stderr and out.read_text() == "mine"
    result = report(CFD, "-o", tmp_path / "r.pdf")
    assert result.exit_code == 1 and ".html, .md or .json" in result.stderr


def test_png_without_kaleido_is_a_clear_error(tmp_path, without_module):
    without_module("kaleido")
    out = tmp_path / "r.md"
    result = report(CFD, "-o", out, "--png")
    assert result.exit_code == 1 and "pip install 'traceview[png]'" in result.stderr
    assert not out.exists()


def _hostile(tmp_path):
    text = ELEMENTWISE.read_text(encoding="utf-8")
    original = text.splitlines()[1].split('","')[4]
    path = tmp_path / "hostile.csv"
    path.write_text(text.replace(original, HOSTILE.replace('"', '""')), encoding="utf-8")
    return path


@pytest.mark.parametrize("suffix", [".html", ".md", ".json"])
def test_hostile_names_in_every_report_format(tmp_path, suffix):
    out = tmp_path / f"r{suffix}"
    result = report(_hostile(tmp_path), "-o", out)
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    if suffix == ".json":
        assert json.loads(text)["kernels"][0]["name"] == HOSTILE
        return
    assert "<script>alert(1)" not in text and "<img src=x" not in text
    if suffix == ".md":
        html = MarkdownIt("commonmark").enable("table").render(text)
        assert "<script>alert" not in html and "<img" not in html
    else:
        assert "&lt;/script&gt;&lt;script&gt;alert(1)" in text


def test_hostile_name_in_the_roofline_hover(tmp_path):
    # The raw page has a roofline: its hover text carries the kernel name into Plotly's JSON.
    text = RAW.read_text(encoding="utf-8")
    path = tmp_path / "hostile_raw.csv"
    path.write_text(text.replace("void calc_energy<256>", HOSTILE.replace('"', '""')), encoding="utf-8")
    out = tmp_path / "r.html"
    assert report(path, "-o", out).exit_code == 0
    page = out.read_text()
    assert "</script><script>alert(1)" not in page and "<img src=x" not in page


def test_reports_for_tegrastats_and_llama(tmp_path, realdata_file):
    out = tmp_path / "t.html"
    assert report(realdata_file("tegrastats/agx_orin64_jp6_ts_Hanner123_a.log"), "-o", out).exit_code == 0
    assert "Findings" in out.read_text() and "EMC bandwidth (GB/s)" in out.read_text() and "board input power averaged 6.42 W" in out.read_text()
    out = tmp_path / "l.md"
    assert report(SAMPLES / "llama_cpp" / "rtx3090ti_llama7b_q4_0_bench.md.txt", "-o", out).exit_code == 0
    assert "48.3%" in out.read_text()


def test_html_report_renders_the_roofline_offline_in_chromium(tmp_path):
    from browser import dump_dom

    out = tmp_path / "r.html"
    assert report(RAW, "-o", out).exit_code == 0
    dom = dump_dom(out.as_uri())
    assert 'class="main-svg"' in dom  # Plotly drew the figure from the embedded library, with no network
    assert dom.count('class="point"') >= 1
    assert "Roofline" in dom and "latency-bound kernels" in dom  # the kernel's trace is in the legend


def test_png_beside_the_markdown(tmp_path):
    pytest.importorskip("kaleido", reason="the optional kaleido package is not installed")
    from browser import chromium

    chromium()  # skips where no Chromium is installed
    out = tmp_path / "r.md"
    result = report(RAW, "-o", out, "--png")
    assert result.exit_code == 0, result.stderr
    png = tmp_path / "r.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "![main figure](r.png)" in out.read_text()


# found/refused/ holds real outputs that are refused on purpose (nvprof's report of a run that failed).
FOUND = sorted(p for p in (ROOT / "tests" / "fixtures" / "found").iterdir() if p.is_file() and p.name != "PROVENANCE.md")


@pytest.mark.parametrize("path", FOUND, ids=[p.name for p in FOUND])
def test_every_found_file_renders_in_every_format_and_the_dashboard(tmp_path, path):
    # Outputs found through the search index (tests/fixtures/found/PROVENANCE.md): each is a layout the readers were
    # built for, so each must come out whole in every report and in what the dashboard sends first.
    from traceview.app.cli import run_analysis
    from traceview.app.dashboard import figure_for, side_panel, summary_line, table_rows

    for suffix in (".html", ".md", ".json"):
        out = tmp_path / f"report{suffix}"
        result = report(path, "-o", out)
        assert result.exit_code == 0, result.stderr
        text = out.read_text()
        assert "nan%" not in text and "Traceback" not in text
        if suffix == ".json":
            json.loads(text)
    analysis = run_analysis(path, None)
    json.dumps(figure_for(analysis, None, False).to_plotly_json(), default=str)
    assert summary_line(analysis) and isinstance(table_rows(analysis), list) and side_panel(analysis) is not None


def test_counts_of_one_read_in_the_singular(tmp_path, realdata_file):
    from traceview.wording import counted

    assert [counted(1, "launch", "launches"), counted(0, "kernel"), counted(12345, "copy", "copies")] == ["1 launch", "0 kernels", "12,345 copies"]
    # A ticket about one kernel is common: the real RTX 5090 GEMV export holds one launch.
    path = realdata_file("ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv")
    terminal = CliRunner().invoke(app, ["analyze", str(path)])
    assert terminal.exit_code == 0 and "1 launch, 1 kernel, GPU time" in terminal.stdout
    for suffix in ("md", "html"):
        out = tmp_path / f"report.{suffix}"
        assert CliRunner().invoke(app, ["report", str(path), "-o", str(out)]).exit_code == 0
        assert "1 launch, 1 kernel, GPU time" in out.read_text()


def test_copy_lines_give_the_count_and_the_time_apart():
    # "HtoD: 1301, 450.91 ms" read as one number; the real export has 225 host-to-device copies per GPU.
    path = ROOT / "sample_traces" / "nsys" / "h100x2_copy_bound_nsys2026.2.sqlite"
    result = CliRunner().invoke(app, ["analyze", str(path)])
    assert result.exit_code == 0
    assert re.search(r"^- copies GPU 0 HtoD: 225 in 9\d\d\.\d\d ms, 25\.5 GB at ", result.stdout, re.M)


def test_launch_counts_in_the_ranked_table_are_thousands_separated(tmp_path, realdata_file):
    # The real RTX 5090 LLM run: cuBLAS's GEMV ran 329,035 times; "329035" beside "46080" is hard to compare.
    path = realdata_file("nsys_stats/cuda_gpu_kern_sum_rtx5090_llmperfopt_allstage.csv")
    terminal = CliRunner().invoke(app, ["analyze", str(path)])
    assert terminal.exit_code == 0 and re.search(r"gemvx::kernel<7>\s+│\s+329,035 │", terminal.stdout)
    for suffix, cell in (("md", "| 329,035 |"), ("html", ">329,035</td>")):
        out = tmp_path / f"report.{suffix}"
        assert CliRunner().invoke(app, ["report", str(path), "-o", str(out)]).exit_code == 0
        assert cell in out.read_text()


CONTROL_NAME = 'kern\x1b]0;owned\x07el\x1b[2J<x\x01y\x85z\u202eevil\u2028line\u2029para>(float*)'


@pytest.mark.parametrize("fmt", ["table", "md", "html"])
def test_control_and_separator_characters_in_names_are_inert_in_every_text_output(tmp_path, fmt):
    # Issue 32: Markdown carried raw ESC, BEL, NUL, C1 and right-to-left overrides from kernel names, and the terminal
    # let U+2028/U+2029 through.
    text = ELEMENTWISE.read_text(encoding="utf-8")
    original = text.splitlines()[1].split('","')[4]
    path = tmp_path / "controls.csv"
    path.write_text(text.replace(original, CONTROL_NAME), encoding="utf-8")
    result = CliRunner().invoke(app, ["analyze", str(path), "-f", fmt])
    assert result.exit_code == 0, result.stderr
    # The page's inlined plotly.js holds control bytes of its own; the name reaches its scripts as escaped JSON.
    shown = re.sub(r"(?s)<script\b.*?</script>", "", result.stdout) if fmt == "html" else result.stdout
    raw = [c for c in shown if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f or c in "\u202e\u2028\u2029"]
    assert raw == [], [hex(ord(c)) for c in raw]


def test_html_report_fits_1280px_with_names_on_one_line(tmp_path):
    # A cuBLAS name used to break into 10-character lines (20 lines in one row) and the page scrolled sideways.
    webdriver = pytest.importorskip("selenium.webdriver")
    import shutil

    binary, driver_path = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if not binary or not driver_path:
        pytest.skip("Chromium and chromedriver are not installed (.ci/run installs Debian's chromium and chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    out = tmp_path / "r.html"
    assert report(ROOT / "sample_traces" / "nsys" / "h100x2_copy_bound_nsys2026.2.sqlite", "-o", out).exit_code == 0
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.get(out.as_uri())
        overflow = driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        heights = driver.execute_script("return [...document.querySelectorAll('td span.name')].map(e => e.getBoundingClientRect().height)")
        titles = driver.execute_script("return [...document.querySelectorAll('td span.name')].map(e => e.title)")
    finally:
        driver.quit()
    assert overflow <= 0
    assert heights and max(heights) < 30, heights  # one line of text each
    assert any(t.startswith("sm80_xmma_gemm_f32f32") and len(t) > 56 for t in titles)  # the full name on hover
