"""Numbers read from text that a damaged file may have mangled (`1.2.3`, a few thousand digits): None, not an error."""

from __future__ import annotations

import math


def float_or_none(text: str | None) -> float | None:
    """Return the text as a finite float (a decimal comma read as a point), or None when it is no number."""
    if text is None:
        return None
    try:
        value = float(text.replace(",", "."))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def reduced(value: object) -> float | None:
    """Return a reduction of a numeric column (polars types `.max()`, `.median()`, `.sum()` as any scalar) as a float,
    None when the column was empty, all null, or not numeric."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
