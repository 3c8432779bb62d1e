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
        # One line whatever the cause says: messages from libraries (polars, SQLite) can span several.
        self.problem = " ".join(problem.split())
        self.fix = " ".join(fix.split())
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        message = f"{where}: {self.problem}"
        if self.fix:
            message += f" — {self.fix}"
        super().__init__(message)


    def __reduce__(self) -> tuple[type, tuple[str, str, str, int | None]]:
        # Raised in a worker process (the .ncu-rep reader), it must arrive whole in the parent.
        return (self.__class__, (self.path, self.problem, self.fix, self.line))


class TooLargeError(TraceFormatError):
    """An input whose analysis would need more memory than this process may take (traceview.resources)."""


class UnknownFormatError(TraceFormatError):
    """A file whose content matches none of the supported formats."""


class UsageError(TraceviewError):
    """A bad combination of options or an unknown name (GPU, format)."""
