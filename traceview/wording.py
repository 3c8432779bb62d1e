"""English for counts in messages, findings and reports."""

from __future__ import annotations


def counted(count: int | None, singular: str, plural: str | None = None) -> str:
    """Return the count with its noun in the right number, thousands separated: `1 launch`, `12,345 launches`, `n/a
    launches` when unknown (a report's cell that was not a number); `plural` defaults to the singular plus s."""
    noun = singular if count == 1 else plural or singular + "s"
    return f"n/a {noun}" if count is None else f"{count:,} {noun}"
