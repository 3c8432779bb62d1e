"""Human-readable numbers for reports and figures: durations, rates, percentages."""

from __future__ import annotations

import re


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


def gap_calls_text(calls: list[dict[str, object]]) -> str:
    """Return the CUDA calls of an idle gap's evidence as `cudaLaunchKernel ×1 (497.20 ms)`: how long the calls took
    within the gap, the evidence for its cause (a first launch that loads a module holds the GPU idle for its length)."""
    parts = []
    for call in calls:
        overlap = call.get("overlap_ns")
        took = f" ({format_duration(float(overlap))})" if isinstance(overlap, int | float) and overlap > 0 else ""
        parts.append(f"{call['name']} ×{call['count']}{took}")
    return ", ".join(parts)


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


# C0 and C1 controls (ESC starts terminal escape sequences: clear screen, window titles, hyperlinks), DEL, the
# bidirectional overrides that make text read in another order than it is stored, and the line and paragraph
# separators (U+2028, U+2029) that break a line where no newline is.
_UNSAFE_FOR_TERMINALS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: object, limit: int = 2000) -> str:
    """Return text that is inert in a terminal: control and bidi characters shown as escapes (`\\x1b`), and at most
    `limit` characters (cut in the middle) so a multi-megabyte name cannot stall the table layout."""
    value = _UNSAFE_FOR_TERMINALS.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", str(text))
    return middle_cut(value, limit, f"…[{len(value) - limit + 1:,} characters]…")


def middle_cut(text: str, width: int, marker: str = "…") -> str:
    """Shorten a long name in the middle, where instantiations rarely differ, keeping its start and its end; the
    kept characters number `width - 1`, around `marker`."""
    if len(text) <= width:
        return text
    head = (width - 1) * 2 // 5
    return text[:head] + marker + text[-(width - 1 - head):]


def distinct_cuts(names: list[str], width: int, marker: str = "…") -> list[str]:
    """Shorten each name in the middle (middle_cut), and where two different names would then read the same, show
    instead their start, the part around where they differ, and their end, so every shortened name of one column
    still tells its kernel apart (repeated until no two differ only in what was cut, or no window helps)."""
    cuts = [middle_cut(name, width, marker) for name in names]
    head = tail = (width - 2) // 5
    window = width - 2 - head - tail
    for _ in range(4):
        groups: dict[str, list[int]] = {}
        for index, cut in enumerate(cuts):
            groups.setdefault(cut, []).append(index)
        colliding = [members for members in groups.values() if len({names[i] for i in members}) > 1]
        if not colliding:
            break
        for members in colliding:
            distinct = {names[i] for i in members}
            for i in members:
                name = names[i]
                differs = max(_first_difference(name, other) for other in distinct if other != name)
                start = max(head, min(differs - window // 3, len(name) - tail - window))
                cuts[i] = (name[:head] + marker + name[start:start + window] + marker + name[-tail:] if start > head
                           else name[:head + window] + marker + name[-tail:])
    return cuts


def _first_difference(a: str, b: str) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def format_change(row: dict[str, object]) -> str:
    """Return a diff row's change: percentage points for a share (`change_pts`), else the relative change in %."""
    points, relative = row.get("change_pts"), row.get("change_pct")
    if isinstance(points, int | float):
        return f"{points:+.1f} pts"
    return "n/a" if not isinstance(relative, int | float) else f"{relative:+.1f}%"
