"""English for counts in messages, findings and reports."""

from __future__ import annotations


def format_count(count: int | None) -> str:
    """Return a count thousands separated (329,035), n/a when unknown (a report's cell that was not a number)."""
    return "n/a" if count is None else f"{count:,}"


def counted(count: int | None, singular: str, plural: str | None = None) -> str:
    """Return the count with its noun in the right number: `1 launch`, `12,345 launches`, `n/a launches`; `plural`
    defaults to the singular plus s."""
    return f"{format_count(count)} {singular if count == 1 else plural or singular + 's'}"
