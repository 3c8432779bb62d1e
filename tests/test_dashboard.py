"""The dashboard in a real browser (headless Chromium through Selenium) against real exports."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLES
from traceview.app.cli import run_analysis
from traceview.app.dashboard import RunStore, create_app, table_rows

CFD = SAMPLES / "ncu" / "v100_cfd_details_ncu2019.5.csv"
RAW = SAMPLES / "ncu" / "gtx1650_calc_energy_raw.csv"
ELEMENTWISE = SAMPLES / "ncu" / "rtx5090_elementwise_details_ncu2025.1.csv"
NSYS = SAMPLES / "nsys" / "h100x2_copy_bound_nsys2026.2.sqlite"
HOSTILE = '<img src=x onerror="window.__xss=1">|`x`'


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def dashboard():
    from werkzeug.serving import make_server

    store = RunStore()
    for path in (CFD, RAW, NSYS):
        store.add(run_analysis(path, None, timeline=True), path.name)  # as `traceview serve` analyses
    app = create_app(store, lambda path: run_analysis(path, None, timeline=True), max_upload_bytes=2 * 2**20)
    port = _free_port()
    server = make_server("127.0.0.1", port, app.server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/", store
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        pytest.skip("Chromium and chromedriver are not installed (.ci/run installs Debian's chromium and chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1500,1300",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def wait_for(check, timeout=30.0, interval=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as error:  # the page is still rendering
            last = error
        time.sleep(interval)
    raise AssertionError(f"timed out waiting; last value: {last!r}")


KERNEL_DOTS = """
const g = document.querySelector('#roofline .js-plotly-plot');
if (!g || !g.data) return null;
return g.data.filter(t => (t.name || '').endsWith('-bound kernels')).reduce((n, t) => n + t.x.length, 0);
"""


def open_run(driver, url, label):
    driver.get(url)
    wait_for(lambda: driver.execute_script(KERNEL_DOTS) is not None)
    if label != CFD.name:
        choose_run(driver, label)


def choose_run(driver, label):
    from selenium.webdriver.common.by import By

    # The first test of a cold browser can see the roofline drawn before the run picker is: wait for it as well.
    wait_for(lambda: driver.find_element(By.ID, "run")).click()
    option = wait_for(lambda: next((o for o in driver.find_elements(By.CSS_SELECTOR, "[role=option]") if o.text.strip() == label), None))
    option.click()
    wait_for(lambda: label in driver.find_element(By.ID, "run").text)


def ranks_and_names(driver):
    from selenium.webdriver.common.by import By

    rows = sorted(driver.find_elements(By.CSS_SELECTOR, "#kernels .ag-center-cols-container .ag-row"), key=lambda r: int(r.get_attribute("row-index")))
    ranks = [row.find_element(By.CSS_SELECTOR, '[col-id="rank"]').text for row in rows]
    names = [row.find_element(By.CSS_SELECTOR, '[col-id="short_name"]').text for row in rows]
    return ranks, names


def click_row(driver, index):
    """Select a kernel the way a user does: a click on its row in the grid (retried while the grid redraws its rows)."""
    selector = f'#kernels .ag-center-cols-container .ag-row[row-index="{index}"] [col-id="short_name"]'
    wait_for(lambda: driver.find_element("css selector", selector).click() or True)


def row_selected(driver, index):
    row = driver.find_element("css selector", f'#kernels .ag-center-cols-container .ag-row[row-index="{index}"]')
    return "ag-row-selected" in row.get_attribute("class")


def test_roofline_and_table_for_real_exports(dashboard, browser):
    url, store = dashboard
    open_run(browser, url, CFD.name)
    expected = table_rows(store.get(CFD.name))
    assert wait_for(lambda: browser.execute_script(KERNEL_DOTS) == len(expected))  # one dot per kernel
    ranks, names = wait_for(lambda: ranks_and_names(browser) if ranks_and_names(browser)[0] else None)
    assert ranks == [str(r["rank"]) for r in expected] == ["1", "2", "3"]
    assert names == [r["short_name"] for r in expected]
    choose_run(browser, RAW.name)
    assert wait_for(lambda: browser.execute_script(KERNEL_DOTS) == 1)
    assert "Roofline" in browser.find_element("css selector", "#roofline").text


def test_clicking_a_row_opens_its_detail(dashboard, browser):
    url, store = dashboard
    open_run(browser, url, CFD.name)
    wait_for(lambda: ranks_and_names(browser)[0])
    click_row(browser, 1)
    second = table_rows(store.get(CFD.name))[1]
    name = wait_for(lambda: browser.find_element("id", "detail-name").text)
    assert name == second["id"]
    assert "ncu SOL" in browser.find_element("id", "detail-reason").text


def upload(driver, path):
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, "#upload input[type=file]").send_keys(str(path))


def test_upload_of_a_real_file_updates_the_page(dashboard, browser):
    url, _ = dashboard
    open_run(browser, url, CFD.name)
    upload(browser, ELEMENTWISE)
    wait_for(lambda: ELEMENTWISE.name in browser.find_element("id", "run").text)
    assert wait_for(lambda: ranks_and_names(browser)[1] == ["elementwise_kernel"])
    assert "Loaded" in browser.find_element("id", "message").text
    # The upload belongs to this browser's session: after a reload it is still one of the runs to choose.
    browser.refresh()
    wait_for(lambda: browser.execute_script(KERNEL_DOTS) is not None)
    choose_run(browser, ELEMENTWISE.name)
    assert wait_for(lambda: ranks_and_names(browser)[1] == ["elementwise_kernel"])


def test_no_console_errors_in_any_view(dashboard, browser):
    """Every tab of every loaded run, in a real browser: nothing the page logs as an error."""
    url, store = dashboard
    browser.get(url)
    wait_for(lambda: browser.execute_script(KERNEL_DOTS) is not None)
    browser.get_log("browser")  # start from a clean log
    for label in (CFD.name, RAW.name, NSYS.name):
        choose_run(browser, label)
        for tab in ("Telemetry", "Timeline", "Compare runs", "Roofline and bottlenecks"):
            browser.find_element("xpath", f"//*[contains(@class, 'tab') and normalize-space()='{tab}']").click()
            time.sleep(0.5)
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []


def test_bad_upload_shows_the_cli_message_and_the_app_keeps_running(dashboard, browser, tmp_path):
    url, _ = dashboard
    open_run(browser, url, CFD.name)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(os.urandom(2048) + b"\x00")
    upload(browser, garbage)
    message = wait_for(lambda: browser.find_element("id", "message").text)
    assert message.startswith("Error: garbage.bin") and "binary" in message
    assert ranks_and_names(browser)[0] == ["1", "2", "3"]  # still showing the loaded run


def test_hostile_kernel_name_stays_inert(dashboard, browser, tmp_path):
    url, _ = dashboard
    text = ELEMENTWISE.read_text(encoding="utf-8")
    original = text.splitlines()[1].split('","')[4]
    hostile = tmp_path / "hostile.csv"
    hostile.write_text(text.replace(original, HOSTILE.replace('"', '""')), encoding="utf-8")
    open_run(browser, url, CFD.name)
    upload(browser, hostile)
    wait_for(lambda: "hostile.csv" in browser.find_element("id", "run").text)
    wait_for(lambda: ranks_and_names(browser)[0] == ["1"])
    click_row(browser, 0)
    assert wait_for(lambda: browser.find_element("id", "detail-name").text) == HOSTILE
    browser.execute_script("const g = document.querySelector('#roofline .js-plotly-plot'); Plotly.Fx.hover(g, [{curveNumber: 0, pointNumber: 0}]);")
    time.sleep(1)
    assert browser.execute_script("return window.__xss === undefined")
    assert not browser.find_elements("css selector", 'img[src="x"]')


def test_screenshot_of_the_main_view(dashboard, browser, tmp_path):
    url, _ = dashboard
    open_run(browser, url, RAW.name)
    wait_for(lambda: browser.execute_script(KERNEL_DOTS) == 1)
    click_row(browser, 0)
    wait_for(lambda: browser.find_element("id", "detail-name").text)
    # Regenerate the docs' picture with TRACEVIEW_UPDATE_SCREENSHOT=1; otherwise only check that one can be taken.
    target = ROOT / "docs" / "dashboard.png" if os.environ.get("TRACEVIEW_UPDATE_SCREENSHOT") else tmp_path / "dashboard.png"
    target.parent.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(target))
    assert Path(target).stat().st_size > 10_000


def test_upload_limit_and_temporary_files(tmp_path, monkeypatch):
    import base64

    from traceview.app.dashboard import analyze_upload
    from traceview.errors import TraceviewError

    payload = "data:text/csv;base64," + base64.b64encode(b"x" * 2048).decode()
    with pytest.raises(TraceviewError, match="over the 0 MB upload limit"):
        analyze_upload(payload, "big.csv", lambda path: None, max_upload_bytes=1024)
    seen = []

    def analyze_file(path):
        seen.append(path)
        return run_analysis(path, None)

    good = "data:text/csv;base64," + base64.b64encode(ELEMENTWISE.read_bytes()).decode()
    analysis = analyze_upload(good, "../../etc/x|y.csv", analyze_file, max_upload_bytes=2**20)
    assert analysis.source.path == "../../etc/x|y.csv"  # shown as given, never used as a path
    assert seen[0].name == "upload.csv" and not seen[0].exists()  # the temporary copy is gone


DOT_POSITION = """
const g = document.querySelector('#roofline .js-plotly-plot');
const t = g.data.find(t => (t.name || '').endsWith('-bound kernels'));
const L = g._fullLayout, x = L.xaxis.l2p(Math.log10(t.x[0])) + L._size.l, y = L.yaxis.l2p(Math.log10(t.y[0])) + L._size.t;
const box = g.getBoundingClientRect();
return [x - box.width / 2, y - box.height / 2, t.customdata[0]];
"""


def test_clicking_a_dot_selects_its_kernel(dashboard, browser):
    from selenium.webdriver.common.action_chains import ActionChains

    url, _ = dashboard
    open_run(browser, url, RAW.name)
    wait_for(lambda: browser.execute_script(KERNEL_DOTS) == 1)
    dx, dy, name = browser.execute_script(DOT_POSITION)
    graph = browser.find_element("css selector", "#roofline .js-plotly-plot")
    ActionChains(browser).move_to_element_with_offset(graph, int(dx), int(dy)).pause(0.3).click().perform()
    assert wait_for(lambda: browser.find_element("id", "detail-name").text) == name
    assert wait_for(lambda: row_selected(browser, 0))


def test_switching_runs_clears_the_detail_of_the_last_kernel(dashboard, browser):
    url, store = dashboard
    open_run(browser, url, CFD.name)
    wait_for(lambda: ranks_and_names(browser)[0])
    click_row(browser, 0)
    assert wait_for(lambda: browser.find_element("id", "detail-name").text) == table_rows(store.get(CFD.name))[0]["id"]
    choose_run(browser, RAW.name)
    assert wait_for(lambda: not browser.find_elements("id", "detail-name"))
    assert "Select a kernel" in browser.find_element("id", "detail").text


@pytest.mark.parametrize("width", [1280, 1920])
def test_nothing_overflows_the_viewport(dashboard, browser, width):
    url, _ = dashboard
    browser.set_window_size(width, 900)
    try:
        open_run(browser, url, CFD.name)
        wait_for(lambda: ranks_and_names(browser)[0])
        click_row(browser, 0)
        wait_for(lambda: browser.find_element("id", "detail-name").text)
        viewport = browser.execute_script("return document.documentElement.clientWidth")
        widest = browser.execute_script("return Math.max(...[...document.querySelectorAll('#detail, #side, #roofline')].map(e => e.getBoundingClientRect().right))")
        assert widest <= viewport + 1
        assert browser.execute_script("return document.documentElement.scrollWidth") <= viewport + 1
    finally:
        browser.set_window_size(1500, 1300)


TIMELINE = "return (document.querySelector('#timeline .js-plotly-plot') || {}).layout?.title?.text || null;"
GAP_POSITION = """
const g = document.querySelector('#timeline .js-plotly-plot');
const t = g.data.find(t => (t.name || '').startsWith('idle gaps'));
if (!t) return null;
const L = g._fullLayout, box = g.getBoundingClientRect();
const x = L.xaxis.l2p(t.x[0]) + L._size.l, y = L.yaxis.d2p(t.y[0]) + L._size.t;
return [x - box.width / 2, y - box.height / 2];
"""


def test_timeline_zooms_on_the_server_and_explains_a_gap(dashboard, browser):
    from selenium.webdriver.common.action_chains import ActionChains

    url, _ = dashboard
    open_run(browser, url, NSYS.name)
    browser.find_element("xpath", "//*[contains(@class, 'tab') and normalize-space()='Timeline']").click()
    whole = wait_for(lambda: browser.execute_script(TIMELINE))
    assert "shown in 1000 bins" in whole
    zoom = "Plotly.relayout(document.querySelector('#timeline .js-plotly-plot'), {'xaxis.range[0]': 100, 'xaxis.range[1]': 101});"

    def zoomed():
        # The graph binds its zoom events once it has drawn: a zoom sent before that is lost, so it is sent again.
        title = browser.execute_script(TIMELINE)
        if title and "1.00 ms shown" in title:
            return title
        browser.execute_script(zoom)
        return None

    assert "1.00 ms shown" in wait_for(zoomed, interval=1.0)
    browser.execute_script("Plotly.relayout(document.querySelector('#timeline .js-plotly-plot'), {'xaxis.autorange': true});")
    wait_for(lambda: browser.execute_script(TIMELINE) == whole)
    dx, dy = wait_for(lambda: browser.execute_script(GAP_POSITION))
    graph = browser.find_element("css selector", "#timeline .js-plotly-plot")
    ActionChains(browser).move_to_element_with_offset(graph, int(dx), int(dy)).pause(0.3).click().perform()
    assert wait_for(lambda: browser.find_element("id", "gap-cause").text).startswith("Cause: ")
    update_screenshot(browser, "timeline.png")
    # A kernel chosen in the table has its launches marked on the timeline.
    browser.find_element("xpath", "//*[contains(@class, 'tab') and normalize-space()='Roofline and bottlenecks']").click()
    click_row(browser, 0)
    browser.find_element("xpath", "//*[contains(@class, 'tab') and normalize-space()='Timeline']").click()
    assert "launch(es) of the selected kernel" in wait_for(lambda: (lambda t: t if t and "selected kernel" in t else None)(browser.execute_script(TIMELINE)))


def test_telemetry_tab_draws_a_real_log(dashboard, browser):
    from conftest import realdata

    url, store = dashboard
    log = realdata("tegrastats/agx_orin64_jp6_ts_Hanner123_a.log")
    store.add(run_analysis(log, None), log.name)  # the page lists it from the next load on
    open_run(browser, url, CFD.name)
    choose_run(browser, log.name)
    browser.find_element("xpath", "//*[contains(@class, 'tab') and normalize-space()='Telemetry']").click()
    count = "return (document.querySelector('#telemetry .js-plotly-plot') || {}).data?.length || 0;"
    assert wait_for(lambda: browser.execute_script(count) >= 10)
    titles = browser.execute_script("return [...document.querySelectorAll('#telemetry .annotation-text')].map(e => e.textContent)")
    assert "EMC bandwidth (GB/s)" in titles and "temperatures (°C)" in titles
    assert not browser.execute_script("return document.querySelectorAll('#telemetry .gtitle').length === 0")
    update_screenshot(browser, "telemetry.png")


def update_screenshot(driver, name):
    """With TRACEVIEW_UPDATE_SCREENSHOT=1, save the page as docs/NAME for docs/commands.md."""
    if os.environ.get("TRACEVIEW_UPDATE_SCREENSHOT"):
        driver.save_screenshot(str(ROOT / "docs" / name))


def test_llm_view_shows_tokens_per_second_against_the_ceiling(dashboard, browser):
    from conftest import realdata

    url, store = dashboard
    bench = realdata("llama_cpp/llama_bench_md_rtx3090ti_nkvo_pr4812.txt")
    store.add(run_analysis(bench, "rtx3090ti"), bench.name)
    open_run(browser, url, CFD.name)
    choose_run(browser, bench.name)
    names = "return (document.querySelector('#roofline .js-plotly-plot') || {}).data?.map(t => t.name) || [];"
    traces = wait_for(lambda: (lambda n: n if "bandwidth ceiling (tokens/s)" in n else None)(browser.execute_script(names)))
    assert "measured tokens/s" in traces and "MBU (%)" in traces
    assert "llama.cpp measurements" in browser.find_element("id", "summary").text
    update_screenshot(browser, "llm.png")
