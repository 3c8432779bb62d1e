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
