"""Human-readable numbers for reports and figures: durations, rates, percentages."""

from __future__ import annotations


def format_duration(ns: float | None) -> str:
    """Return a human duration: 812 ns, 94.9 us, 12.3 ms, 1.52 s."""
    if ns is None:
        return "n/a"
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.1f} us"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def format_rate(value: float | None, unit: str) -> str:
    """Return 87.5 TFLOP/s, 1.76 TB/s style text."""
    if value is None:
        return "n/a"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def format_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def format_number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"
