"""Metrics polled over time (nvidia-smi CSV, a serving engine's Prometheus counters as CSV): every number read
against the file, the statistics and counter rates against a plain computation, and the findings they support."""

from __future__ import annotations

import csv
import statistics

import pytest

from traceview.app.cli import run_analysis
from traceview.parsers import detect_format, load_trace

SMI = "other/nvidia_smi_csv_1s_h100-64gb_vllm_llama2-7b_serving_ferran.csv"
ENGINE = "other/vllm_prometheus_metrics_engine_llama2-7b_h100-64gb_ferran.csv"


def _columns(path):
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header = [h.strip() for h in rows[0]]
    return header, [[c.strip() for c in row] for row in rows[1:] if row]


def test_nvidia_smi_csv_reads_every_cell_with_its_unit(realdata_file):
    path = realdata_file(SMI)
    assert detect_format(path) == "nvidia-smi-csv"
    series = load_trace(path).data
    header, rows = _columns(path)
    used = header.index("memory.used [MiB]")
    read = series.filter(series["metric"] == "memory.used").sort("time_s")
    assert read["value"].to_list() == [float(row[used].removesuffix(" MiB").strip()) for row in rows]
    assert set(read["unit"].to_list()) == {"MiB"}
    times = [float(row[0]) - float(rows[0][0]) for row in rows]
    assert read["time_s"].to_list() == pytest.approx(times)
    # "Not Active" is 0: the clocks were never held down in this run.
    held = series.filter(series["metric"] == "clocks_event_reasons.hw_slowdown")
    assert held.height == len(rows) and held["value"].sum() == 0


def test_the_statistics_and_findings_hold_against_the_file(realdata_file):
    path = realdata_file(SMI)
    header, rows = _columns(path)
    busy = [float(row[header.index("utilization.gpu [%]")].removesuffix("%").strip()) for row in rows]
    metrics = {m["metric"]: m for m in run_analysis(path, None).detail.metrics}
    assert metrics["utilization.gpu"]["mean"] == pytest.approx(statistics.mean(busy))
    assert metrics["utilization.gpu"]["p50"] == pytest.approx(statistics.median(busy))
    assert metrics["utilization.gpu"]["max"] == max(busy)


def test_engine_counters_give_rates_and_the_queue_is_found(realdata_file):
    path = realdata_file(ENGINE)
    assert detect_format(path) == "engine-metrics-csv"
    analysis = run_analysis(path, None)
    header, rows = _columns(path)
    generated = header.index("generation_tokens_total")
    rate = (float(rows[-1][generated]) - float(rows[0][generated])) / (float(rows[-1][0]) - float(rows[0][0]))
    metrics = {m["metric"]: m for m in analysis.detail.metrics}
    assert metrics["generation_tokens_total"]["rate_per_s"] == pytest.approx(rate)
    assert metrics["num_requests_running"]["rate_per_s"] is None  # a gauge, not a counter
    waiting = max(float(row[header.index("num_requests_waiting")]) for row in rows)
    queued = next(f for f in analysis.detail.findings if f["rule"] == "requests_queued")
    assert f"up to {waiting:,.0f} requests waited" in queued["message"] and "at most 64 ran" in queued["message"]
