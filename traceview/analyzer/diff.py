"""Run-vs-run comparison of two analyses: per-kernel time and verdict changes, comparability, regression gate. Pure.

Kernels are matched by normalised name (namespaces, `void`, and `(bool)`/`(int)` casts removed, so ncu's and nsys's
spellings of one kernel agree — formats.md §1.2). llama.cpp runs are matched by test (pp512, tg128) and model;
tegrastats logs are compared by their bandwidth, GPU and power statistics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.llm import bandwidth_verdict, run_settings, same_model, same_settings
from traceview.analyzer.names import normalise_kernel_name
from traceview.errors import UsageError


@dataclass(frozen=True)
class KernelChange:
    name: str
    short_name: str
    status: str  # changed, new, vanished
    before_ns: float | None
    after_ns: float | None
    change_pct: float | None
    share_before_pct: float | None
    share_after_pct: float | None
    bound_before: str | None
    bound_after: str | None
    roof_pct_before: float | None
    roof_pct_after: float | None
    launches_before: int | None
    launches_after: int | None


@dataclass(frozen=True)
class Diff:
    """The comparison; `regressions` lists what breaks a --fail-on-regression gate, with reasons."""

    kind: str  # kernels, llama, telemetry
    before: Analysis
    after: Analysis
    total_before_ns: float | None = None
    total_after_ns: float | None = None
    total_change_pct: float | None = None
    kernels: list[KernelChange] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    telemetry: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)


def _pct(before: float | None, after: float | None) -> float | None:
    if before is None or after is None or before == 0:
        return None
    return 100.0 * (after - before) / before


def _row(name: str, before: Any, after: Any) -> dict[str, Any]:
    """A side-by-side row: a share (name ending `_pct`) changes by percentage points (`change_pts`, after − before),
    since a relative change of a share reads as nonsense (compute 3.2% → 75.8% is not "+2,288%"); anything else by
    its relative change (`change_pct`)."""
    numbers = isinstance(before, int | float) and isinstance(after, int | float)
    if name.endswith("_pct") or "_pct_" in name:
        return {"before": before, "after": after, "change_pct": None, "change_pts": after - before if numbers else None}
    return {"before": before, "after": after, "change_pct": _pct(before, after) if numbers else None, "change_pts": None}


def _by_name(analysis: Analysis) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for row in analysis.kernels.iter_rows(named=True):
        key = normalise_kernel_name(row["kernel_name"])
        if key in rows:  # two raw names that normalise alike: add them up
            merged = rows[key]
            merged["duration_ns"] = (merged["duration_ns"] or 0) + (row["duration_ns"] or 0)
            merged["launches"] += row["launches"]
        else:
            rows[key] = dict(row)
    return rows


def compare(before: Analysis, after: Analysis, fail_on_regression_pct: float | None = None, min_share_pct: float = 1.0) -> Diff:
    """Return the comparison of two analyses of the same kind (kernels, llama.cpp runs or tegrastats logs)."""
    if before.telemetry is not None and after.telemetry is not None:
        return _compare_telemetry(before, after)
    if before.llm is not None and after.llm is not None:
        return _compare_llama(before, after, fail_on_regression_pct)
    kinds = {("telemetry" if a.telemetry else "llama" if a.llm else "kernels") for a in (before, after)}
    if len(kinds) > 1:
        raise UsageError(f"cannot compare a {before.source.format} input with a {after.source.format} input — diff two runs of the same kind")
    return _compare_kernels(before, after, fail_on_regression_pct, min_share_pct)


def _compare_kernels(before: Analysis, after: Analysis, gate: float | None, min_share: float) -> Diff:
    a, b = _by_name(before), _by_name(after)
    total_a, total_b = before.total_duration_ns, after.total_duration_ns
    changes = []
    for key in list(a) + [k for k in b if k not in a]:
        x, y = a.get(key), b.get(key)
        status = "changed" if x and y else ("vanished" if x else "new")
        ref = x or y
        assert ref is not None
        changes.append(KernelChange(
            name=ref["kernel_name"], short_name=ref["short_name"], status=status,
            before_ns=x["duration_ns"] if x else None, after_ns=y["duration_ns"] if y else None,
            change_pct=_pct(x["duration_ns"], y["duration_ns"]) if x and y else None,
            share_before_pct=x["share_pct"] if x else None, share_after_pct=y["share_pct"] if y else None,
            bound_before=x["bound"] if x else None, bound_after=y["bound"] if y else None,
            roof_pct_before=x["roof_pct"] if x else None, roof_pct_after=y["roof_pct"] if y else None,
            launches_before=x["launches"] if x else None, launches_after=y["launches"] if y else None,
        ))
    # Biggest absolute time change first: what a reviewer should look at.
    changes.sort(key=lambda c: -abs((c.after_ns or 0) - (c.before_ns or 0)))
    diff = Diff("kernels", before, after, total_a, total_b, _pct(total_a, total_b), changes, telemetry=_timeline_side_by_side(before, after))
    diff.warnings.extend(_comparability(before, after, a, b))
    for change in changes:
        if change.bound_before and change.bound_after and change.bound_before != change.bound_after:
            diff.findings.append(f"{change.short_name}: verdict changed from {change.bound_before} to {change.bound_after}")
    for key, row in diff.telemetry.items():
        if key.endswith("_verdict") and row["before"] and row["after"] and row["before"] != row["after"]:
            diff.findings.append(f"GPU {key.removeprefix('gpu').removesuffix('_verdict')}: run verdict changed from {row['before']}-bound to {row['after']}-bound")
    if gate is not None:
        if diff.total_change_pct is not None and diff.total_change_pct > gate:
            diff.regressions.append(
                f"total GPU time {diff.total_change_pct:+.1f}% ({_ms(total_a)} → {_ms(total_b)}), over the {gate:g}% limit")
        step = diff.telemetry.get("step_median_ns")
        if step and step["change_pct"] is not None and step["change_pct"] > gate:
            diff.regressions.append(f"median step time {step['change_pct']:+.1f}% ({_ms(step['before'])} → {_ms(step['after'])}), over the {gate:g}% limit")
        for change in changes:
            share = max(change.share_before_pct or 0, change.share_after_pct or 0)
            if change.change_pct is not None and change.change_pct > gate and share >= min_share:
                diff.regressions.append(
                    f"{change.short_name} {change.change_pct:+.1f}% ({_ms(change.before_ns)} → {_ms(change.after_ns)}, "
                    f"{share:.1f}% of GPU time), over the {gate:g}% limit")
    return diff


# Unified-memory migrations are a share of their own: a copy-bound verdict of prefetched managed memory shows there.
_SHARES = ("compute_pct", "communication_pct", "copy_pct", "unified_memory_pct", "idle_pct")


def _timeline_side_by_side(before: Analysis, after: Analysis) -> dict[str, Any]:
    """For two Nsight Systems runs: per device the verdict, busy %, the compute/communication/copy/unified-memory/idle shares,
    idle time and gap count, and the step times (median, p99) and decode tokens/s where both runs have steps."""
    if before.timeline is None or after.timeline is None or not (before.timeline.devices or after.timeline.devices):
        return {}
    rows: dict[str, Any] = {}
    x = {d["device_id"]: d for d in before.timeline.devices}
    y = {d["device_id"]: d for d in after.timeline.devices}
    def pick(device: dict[str, Any] | None, name: str) -> Any:
        if device is None:
            return None
        if name in _SHARES:
            return device["breakdown"][name]
        return device["gap_count" if name == "idle_gaps" else name]

    names = ("verdict", "busy_pct", *_SHARES, "idle_ns", "idle_gaps")
    for device in sorted(set(x) | set(y)):
        b, a = x.get(device), y.get(device)
        for name in names:
            rows[f"gpu{device}_{name}"] = _row(name, pick(b, name), pick(a, name))
    steps_a, steps_b = before.timeline.steps, after.timeline.steps
    if steps_a and steps_b:
        for name in ("median_ns", "p99_ns"):
            rows[f"step_{name}"] = _row(name, steps_a[name], steps_b[name])
        decode_a, decode_b = steps_a.get("decode") or {}, steps_b.get("decode") or {}
        if decode_a.get("tokens_per_s") and decode_b.get("tokens_per_s"):
            rows["decode_tokens_per_s"] = _row("tokens_per_s", decode_a["tokens_per_s"], decode_b["tokens_per_s"])
    return rows


def _ms(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:.3f} ms"


def _comparability(before: Analysis, after: Analysis, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    warnings = []
    if before.device.name != after.device.name:
        warnings.append(f"different devices: {before.device.name or 'unknown'} vs {after.device.name or 'unknown'}")
    for column, label in (("sm_clock_hz", "SM clock"), ("dram_clock_hz", "DRAM clock")):
        x, y = before.launches[column].median(), after.launches[column].median()
        if x and y and abs(float(y) - float(x)) / float(x) > 0.05:  # type: ignore[arg-type]
            warnings.append(f"{label} differs: {float(x) / 1e9:.2f} GHz vs {float(y) / 1e9:.2f} GHz — lock clocks (ncu --clock-control base) to compare")  # type: ignore[arg-type]
    names = set(a) | set(b)
    if names:
        shared = len(set(a) & set(b)) / len(names)
        if shared < 0.5:
            warnings.append(f"different kernel mix: only {100 * shared:.0f}% of kernel names appear in both runs")
    return warnings


def _compare_llama(before: Analysis, after: Analysis, gate: float | None) -> Diff:
    """Match llama.cpp rows on their whole configuration (test, model, settings), never averaging different ones;
    unmatched rows are listed and never gated."""
    assert before.llm is not None and after.llm is not None
    a_rows, b_rows = before.llm.runs.to_dicts(), after.llm.runs.to_dicts()
    runs: list[dict[str, Any]] = []
    findings: list[str] = []
    regressions: list[str] = []
    unused = list(range(len(b_rows)))
    for x in a_rows:
        candidates = [i for i in unused if b_rows[i]["test"] == x["test"] and same_model(x, b_rows[i]) and same_settings(x, b_rows[i])]
        # The candidate that states the most settings in common is the closest configuration.
        best = max(candidates, key=lambda i: len(set(run_settings(x)) & set(run_settings(b_rows[i]))), default=None)
        if best is None:
            runs.append(_llama_row(x, None, "vanished"))
            continue
        unused.remove(best)
        y = b_rows[best]
        row = _llama_row(x, y, "changed")
        runs.append(row)
        change = row["change_pct"]
        if gate is not None and change is not None and -change > gate:
            regressions.append(f"{x['test']} ({_configuration(x)}): {x['tokens_per_s']:.2f} → {y['tokens_per_s']:.2f} tokens/s ({change:+.1f}%), "
                               f"over the {gate:g}% limit")
        measured = x["phase"] == "decode" and x.get("bytes_per_token") and y.get("bytes_per_token") and x["tokens_per_s"] and y["tokens_per_s"]
        if measured and abs(x["bytes_per_token"] / y["bytes_per_token"] - 1) > 0.05:
            small, big = (y, x) if y["bytes_per_token"] < x["bytes_per_token"] else (x, y)
            findings.append(f"{x['test']}: {bandwidth_verdict(small, big)[0]}")
    runs += [_llama_row(None, b_rows[i], "new") for i in unused]
    unmatched = sum(r["status"] != "changed" for r in runs)
    if unmatched:
        findings.append(f"{unmatched} row(s) have no run of the same configuration on the other side (listed as new or vanished; never averaged "
                        "into another configuration, never gated)")
    warnings = [] if before.device.name == after.device.name else [f"different devices: {before.device.name} vs {after.device.name}"]
    return Diff("llama", before, after, runs=runs, findings=findings, regressions=regressions, warnings=warnings)


def _configuration(row: dict[str, Any]) -> str:
    settings = ", ".join(f"{k}={v}" for k, v in sorted(run_settings(row).items()))
    return "; ".join(part for part in (row.get("model"), settings) if part) or "(no model or settings named)"


def _llama_row(x: dict[str, Any] | None, y: dict[str, Any] | None, status: str) -> dict[str, Any]:
    ref = x or y
    assert ref is not None
    return {
        "test": ref["test"], "phase": ref["phase"], "status": status, "configuration": _configuration(ref),
        "model": x["model"] if x else None, "model_after": y["model"] if y else None,
        "tokens_per_s": x["tokens_per_s"] if x else None, "tokens_per_s_after": y["tokens_per_s"] if y else None,
        "change_pct": _pct(x["tokens_per_s"], y["tokens_per_s"]) if x and y else None,
        "mbu_pct": x.get("mbu_pct") if x else None, "mbu_pct_after": y.get("mbu_pct") if y else None,
        "bytes_per_token": x.get("bytes_per_token") if x else None, "bytes_per_token_after": y.get("bytes_per_token") if y else None,
    }


def _compare_telemetry(before: Analysis, after: Analysis) -> Diff:
    x, y = before.telemetry, after.telemetry
    assert x is not None and y is not None

    def stat(stats: dict[str, float] | None, name: str = "mean") -> float | None:
        return stats[name] if stats else None

    rows = {
        "bandwidth_gb_s_mean": (stat(x.bandwidth_gb_s), stat(y.bandwidth_gb_s)),
        "bandwidth_gb_s_p90": (stat(x.bandwidth_gb_s, "p90"), stat(y.bandwidth_gb_s, "p90")),
        "gpu_util_pct_mean": (stat(x.gpu_pct), stat(y.gpu_pct)),
        "mean_power_w": (x.mean_power_w, y.mean_power_w),
        "duration_s": (x.duration_s, y.duration_s),
    }
    telemetry = {name: _row(name, a, b) for name, (a, b) in rows.items()}
    warnings = []
    if (x.board and x.board.key) != (y.board and y.board.key):
        warnings.append(f"different boards: {x.board.name if x.board else 'unknown'} vs {y.board.name if y.board else 'unknown'}")
    return Diff("telemetry", before, after, telemetry=telemetry, warnings=warnings)
