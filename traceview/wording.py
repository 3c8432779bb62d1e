"""English for counts in messages, findings and reports."""

from __future__ import annotations


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """Return the count with its noun in the right number, thousands separated: `1 launch`, `12,345 launches`
    (`plural` defaults to the singular plus s)."""
    return f"{count:,} {singular if count == 1 else plural or singular + 's'}"
