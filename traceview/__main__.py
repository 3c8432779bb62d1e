"""`python -m traceview` and the `traceview` command: the CLI, with Ctrl-C while the libraries load ending as quietly
as Ctrl-C later does (exit 130, nothing written, no traceback of the import machinery)."""

from __future__ import annotations

import os
import sys

# polars' allocator (jemalloc) keeps freed pages for ten seconds by default, where numpy's (glibc's) cannot use them:
# an analysis that frees a frame and then builds arrays held both. Returned at once, the 10 M-launch realistic export
# peaked at 4.00 GB instead of 4.15, and a dashboard's memory falls back between analyses (0.8 GB to 0.12 GB after
# the 2 M one). That is for large inputs, the dashboard and the MCP server; other commands keep them a second,
# which took 1.5-2 s less of the realistic 2 M-launch export's 13-17 s (2 s less system time: pages zeroed and
# mapped again) at the same peak within 0.05 GB (three runs each). Read once, when polars loads: only the command
# sets it, never a program that imports traceview, and an allocator setting of the user's own is left as it is.
_RETURN_FREED_PAGES = "dirty_decay_ms:0,muzzy_decay_ms:0"
_KEEP_FREED_PAGES_A_SECOND = "dirty_decay_ms:1000,muzzy_decay_ms:0"


def allocator_settings(arguments: list[str]) -> str:
    """Return polars' allocator settings for a command line (without the program): freed pages returned at once for
    the dashboard and the MCP server (resources.LONG_RUNNING_COMMANDS) and wherever an argument names a large input
    (resources.LARGE_INPUT_BYTES), kept a second else."""
    from traceview.resources import LONG_RUNNING_COMMANDS, is_large_input  # they import neither polars nor numpy

    words = [word for word in arguments if not word.startswith("-")]
    if (words and words[0] in LONG_RUNNING_COMMANDS) or any(is_large_input(word) for word in words[1:]):
        return _RETURN_FREED_PAGES
    return _KEEP_FREED_PAGES_A_SECOND


def main() -> None:
    os.environ.setdefault("_RJEM_MALLOC_CONF", allocator_settings(sys.argv[1:]))
    try:
        from traceview.app.cli import main as cli_main
    except KeyboardInterrupt:
        sys.exit(130)
    cli_main()


if __name__ == "__main__":
    main()
