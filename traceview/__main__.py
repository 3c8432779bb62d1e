"""`python -m traceview` and the `traceview` command: the CLI, with Ctrl-C while the libraries load ending as quietly
as Ctrl-C later does (exit 130, nothing written, no traceback of the import machinery)."""

from __future__ import annotations

import ctypes
import os
import sys

# How freed memory is handled, decided once from the command line, before polars (and its allocator) loads: given
# back to the system at once for large inputs and for the commands that stay up between analyses, kept for reuse
# otherwise. Only the command sets it, never a program that imports traceview.
#
# polars' allocator (jemalloc) keeps freed pages for ten seconds by default, where numpy's (glibc's) cannot use them:
# an analysis that frees a frame and then builds arrays held both. Returned at once, the 10 M-launch realistic export
# peaked at 4.00 GB instead of 4.15, and a dashboard's memory falls back between analyses (0.8 GB to 0.12 GB after
# the 2 M one). Kept a second instead, the realistic 2 M-launch export took 1.5-2 s less of its 13-17 s (2 s less
# system time: pages zeroed and mapped again) at the same peak within 0.05 GB (three runs each). It is read once,
# when polars loads, and an allocator setting of the user's own is left as it is.
_RETURN_FREED_PAGES = "dirty_decay_ms:0,muzzy_decay_ms:0"
_KEEP_FREED_PAGES_A_SECOND = "dirty_decay_ms:1000,muzzy_decay_ms:0"
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)


def gives_memory_back_at_once(arguments: list[str]) -> bool:
    """Return whether a command line (without the program) should have freed memory given back at once: for the
    dashboard and the MCP server (resources.LONG_RUNNING_COMMANDS) and wherever an argument names a large input
    (resources.LARGE_INPUT_BYTES). Every input a command analyses is named on its command line, except the
    dashboard's uploads and the MCP server's files: those two always give memory back."""
    from traceview.resources import LONG_RUNNING_COMMANDS, is_large_input  # they import neither polars nor numpy

    words = [word for word in arguments if not word.startswith("-")]
    return bool(words and words[0] in LONG_RUNNING_COMMANDS) or any(is_large_input(word) for word in words[1:])


def set_allocators(at_once: bool) -> None:
    """Set how polars' allocator (jemalloc, unless the user set it) and glibc's treat freed memory: given back at once,
    or kept for reuse. Must run before polars loads."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", _RETURN_FREED_PAGES if at_once else _KEEP_FREED_PAGES_A_SECOND)
    if at_once:
        give_freed_arrays_back()


def give_freed_arrays_back() -> None:
    """Have glibc map blocks over 128 kB on their own, so that a freed numpy array goes back to the system at once.

    glibc raises that threshold to the size of each large block freed, up to 32 MB: after the first few, the analysis'
    arrays of a million rows come from the heap and stay held once freed, and are reused without being mapped again.
    Kept and reused, the realistic 2 M-launch export (1.2 GB) took 1-2.4 s less (2.5-3.5 s less system time) for
    0.1-0.25 GB more at its peak (0.58 -> 0.70-0.83 GB; three runs each); the 10 M-launch one (6.4 GB) peaked at
    1.90 GB, against 1.83-1.87 GB given back: the 2 GB bound needs that room. Elsewhere (musl, macOS, Windows) nothing
    is changed.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
    except (OSError, AttributeError):
        pass


def main() -> None:
    set_allocators(gives_memory_back_at_once(sys.argv[1:]))
    try:
        from traceview.app.cli import main as cli_main
    except KeyboardInterrupt:
        sys.exit(130)
    cli_main()


if __name__ == "__main__":
    main()
