"""Typed errors: everything a user can fix is a TraceviewError; the CLI turns them into one line."""

from __future__ import annotations

from pathlib import Path


class TraceviewError(Exception):
    """A problem the user can fix (bad input, bad option); shown as one line, exit code 1."""

    exit_code = 1


class TraceFormatError(TraceviewError):
    """An input file that cannot be read as the format it claims (or any known format)."""

    def __init__(self, path: str | Path, problem: str, fix: str = "", line: int | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.fix = fix
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        message = f"{where}: {problem}"
        if fix:
            message += f" — {fix}"
        super().__init__(message)


class UnknownFormatError(TraceFormatError):
    """A file whose content matches none of the supported formats."""


class UsageError(TraceviewError):
    """A bad combination of options or an unknown name (GPU, format)."""
