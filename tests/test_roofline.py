"""Roofline maths and verdicts on inline rows (no files)."""

from __future__ import annotations

import pytest

from traceview.analyzer.roofline import Bound, attainable, classify_launch, ridge_point, sol_bottleneck


@pytest.mark.parametrize(
    ("sm", "mem", "waves", "bound", "label"),
    [
        (12.07, 93.99, None, Bound.MEMORY, "High Throughput"),  # the RTX 5090 elementwise add
        (85.0, 40.0, None, Bound.COMPUTE, "High Throughput"),
        (32.1, 27.7, 3.0, Bound.LATENCY, "Latency Issue"),  # the CUTLASS GEMM
        (9.2, 19.7, 0.7, Bound.LATENCY, "Small Grid"),  # the cuBLAS GEMV
        (70.0, 50.0, None, Bound.COMPUTE, "High Compute Throughput"),
        (50.0, 66.6, None, Bound.MEMORY, "High Memory Throughput"),
        (65.0, 70.0, None, Bound.MEMORY, "Balanced Throughput"),
        (59.9, 59.9, 5.0, Bound.LATENCY, "Latency Issue"),
        (60.0, 10.0, None, Bound.COMPUTE, "High Compute Throughput"),
    ],
)
def test_sol_bottleneck_follows_ncu_thresholds(sm, mem, waves, bound, label):
    assert sol_bottleneck(sm, mem, waves) == (bound, label)


def test_attainable_and_ridge():
    assert ridge_point(100e12, 2e12) == 50.0
    assert attainable(100e12, 10.0, 2e12) == 20e12  # memory side: AI × bandwidth
    assert attainable(100e12, 80.0, 2e12) == 100e12  # compute side: the flat roof


PEAKS = {"peak_fp32_flop_per_s": 100e12, "peak_dram_bytes_per_s": 2e12}


def test_memory_bound_by_roofline_without_sol():
    # AI 1 FLOP/B, 1.8 TB/s of 2 TB/s: 90 % of the memory roof.
    row = {"fp32_flop_per_s": 1.8e12, "dram_bytes_per_s": 1.8e12, "duration_ns": 1000.0}
    verdict = classify_launch(row, PEAKS)
    assert verdict.bound is Bound.MEMORY
    assert verdict.binding_roof == "DRAM"
    assert verdict.arithmetic_intensity == pytest.approx(1.0)
    assert verdict.roof_pct == pytest.approx(90.0)
    assert verdict.recoverable_fraction == pytest.approx(0.10)
    assert verdict.recoverable_source == "roofline headroom"


def test_compute_bound_by_roofline_without_sol():
    row = {"fp32_flop_per_s": 80e12, "dram_bytes_per_s": 0.1e12}  # AI 800, far right of the ridge (50)
    verdict = classify_launch(row, PEAKS)
    assert verdict.bound is Bound.COMPUTE
    assert verdict.binding_roof == "fp32 compute"
    assert verdict.roof_pct == pytest.approx(80.0)


def test_latency_bound_whatever_the_intensity():
    # Far on the compute side of the ridge, but at 10 % of compute and 0.5 % of bandwidth.
    row = {"fp32_flop_per_s": 10e12, "dram_bytes_per_s": 0.01e12}
    verdict = classify_launch(row, PEAKS)
    assert verdict.bound is Bound.LATENCY
    assert "60%" in verdict.reason


def test_profile_peaks_win_over_the_table():
    row = {"fp32_flop_per_s": 1e12, "dram_bytes_per_s": 0.9e12, "peak_dram_bytes_per_s": 1e12}
    verdict = classify_launch(row, PEAKS)
    assert verdict.memory_pct == pytest.approx(90.0)  # 0.9 of the profile's 1 TB/s, not of the table's 2 TB/s


def test_sol_decides_and_busiest_unit_sets_roof_pct():
    row = {"sm_throughput_pct": 12.07, "memory_throughput_pct": 93.99, "l2_throughput_pct": 93.99,
           "dram_throughput_pct": 10.29, "dram_bytes_per_s": 181e9}
    verdict = classify_launch(row, PEAKS)
    assert verdict.bound is Bound.MEMORY
    assert verdict.label == "High Throughput (L2)"
    assert verdict.roof_pct == pytest.approx(93.99)
    assert verdict.binding_roof == "L2"


def test_ncu_speedup_estimate_is_used_for_recoverable_time():
    row = {"sm_throughput_pct": 32.1, "memory_throughput_pct": 27.7,
           "ncu_rules": [{"name": "IssueSlotUtilization", "speedup_pct": 67.9}, {"name": "X", "speedup_pct": None}]}
    verdict = classify_launch(row, {})
    assert verdict.recoverable_fraction == pytest.approx(0.679)
    assert verdict.recoverable_source == "ncu estimated speedup"


def test_small_grid_from_ncu_rule_text_when_waves_are_missing():
    rule = {"name": "SOLBottleneck", "message": "This kernel grid is too small to fill the available resources on this device, resulting in only 0.7 full waves across all SMs."}
    verdict = classify_launch({"sm_throughput_pct": 9.2, "memory_throughput_pct": 19.7, "ncu_rules": [rule]}, {})
    assert verdict.label == "Small Grid"


def test_unknown_with_a_reason_when_nothing_is_measured():
    verdict = classify_launch({"duration_ns": 5.0}, PEAKS)
    assert verdict.bound is Bound.UNKNOWN
    assert "no FLOP or byte counts" in verdict.reason
    assert verdict.roof_pct is None and verdict.recoverable_fraction is None


def test_rates_without_peaks_are_unknown():
    verdict = classify_launch({"fp32_flop_per_s": 1e12, "dram_bytes_per_s": 1e9}, {})
    assert verdict.bound is Bound.UNKNOWN


def test_many_launches_at_once_get_the_verdicts_each_gets_alone():
    # The verdicts are column expressions over a whole export: rows of every kind side by side must not leak into
    # each other (a SOL row, roofline-only rows on both sides of the ridge, one-sided SOL, rule-only waves, nothing).
    import polars as pl

    from traceview.analyzer.roofline import classify_launches
    from traceview.parsers.schema import KERNELS

    small_grid = {"name": "SOLBottleneck", "message": "grid is too small to fill the device, resulting in only 0.5 full waves",
                  "speedup_pct": 40.0}
    rows = [
        {"sm_throughput_pct": 12.07, "memory_throughput_pct": 93.99, "l2_throughput_pct": 93.99, "dram_throughput_pct": 10.29},
        {"fp32_flop_per_s": 1.8e12, "dram_bytes_per_s": 1.8e12},
        {"fp32_flop_per_s": 80e12, "dram_bytes_per_s": 0.1e12, "l2_bytes_per_s": 0.5e12, "peak_l2_bytes_per_s": 5e12},
        {"memory_throughput_pct": 91.0},
        {"sm_throughput_pct": 9.2, "memory_throughput_pct": 19.7, "ncu_rules": [small_grid]},
        {"dram_throughput_pct": 45.0, "l1_throughput_pct": 70.0, "sm_throughput_pct": 20.0},
        {"duration_ns": 5.0},
    ]
    frame = pl.DataFrame([{name: row.get(name) for name in KERNELS} for row in rows], schema=KERNELS)
    together = classify_launches(frame, PEAKS).to_dicts()
    for row, verdict in zip(rows, together, strict=True):
        alone = classify_launch(row, PEAKS)
        assert verdict == {**alone.__dict__, "bound": alone.bound.value}
    assert [v["label"] for v in together] == [
        "High Throughput (L2)", "Memory-bound (roofline)", "Compute-bound (roofline)", "High Throughput", "Small Grid",
        "High Memory Throughput (L1/TEX)", "No Data"]
